"""`match` statements are traced (issue 10): sequence, mapping, class, value, literal, guard
and or-patterns, with the subject's type and contents guarded."""
import dataclasses

import pytest
import torch

from semantics_helpers import check, fresh, run
import tracer


@dataclasses.dataclass
class Op:
    kind: str
    scale: float = 1.0


class Point:
    __match_args__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y


def dispatch(x, v):
    match v:
        case [a, b]:
            return x + a + b
        case [a, *rest] if len(rest) > 2:
            return x * a, rest
        case {"k": k, **others}:
            return x + k, others
        case Op("scale", s):
            return x * s
        case Op(kind="shift", scale=s) | Op(kind="move", scale=s):
            return x + s
        case Point(0, y):
            return x - y
        case int(n) if n > 10:
            return x + n
        case str() | bytes():
            return x * 2, v
        case None:
            return x * 3
        case _:
            return -x


@pytest.mark.parametrize("v", [
    [1, 2], (1, 2, 3, 4), {"k": 3, "z": 4}, Op("scale", 2.0), Op("shift", 5.0), Op("move", 1.0),
    Point(0, 7), Point(1, 7), 42, 3, "text", None, 2.5,
], ids=lambda v: type(v).__name__)
def test_match_patterns(v):
    check(fresh(dispatch), torch.ones(2), v, graphs=1)


def test_match_recompiles_when_the_subject_changes_kind():
    fn = fresh(dispatch)
    c = tracer.compile(fn)
    before = tracer.stats()
    for v in ([1, 2], {"k": 1}, Op("scale", 3.0), 42, None):
        run(c, fn, torch.ones(2), v)
    after = tracer.stats()
    assert after.frames_traced - before.frames_traced == 5 and after.fallbacks == before.fallbacks


def test_match_with_dynamo_beside():
    def f(x, v):
        match v:
            case [a, b]:
                return x + a + b
            case {"k": k}:
                return x + k
            case _:
                return x
    check(f, torch.ones(2), [1, 2], graphs=1, dynamo=True)
