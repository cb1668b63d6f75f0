"""`match` statements are traced (issue 10): sequence, mapping, class, value, literal, guard
and or-patterns, with the subject's type and contents guarded."""
import collections
import collections.abc
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


class _GetSays(dict):
    def get(self, key, default=None):  # a mapping pattern looks keys up with .get(key, sentinel)
        return "from get" if key in self else default


class _ItemsSay(dict):
    def __getitem__(self, key):  # not asked: dict.get reads the storage
        return "from __getitem__"

    def __contains__(self, key):
        return True


class _Scaled(collections.abc.Mapping):
    def __init__(self, d):
        self.d = d

    def __getitem__(self, key):
        return self.d[key] * 10

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


def _keys(x, m):
    match m:
        case {"k": v, "j": w}:
            return x + 1, v, w
        case {"k": v}:
            return x + 2, v
        case {}:
            return x + 3, "any mapping"
    return x, None


@pytest.mark.parametrize("subject", [
    _GetSays(k=1), _ItemsSay(k=1), _ItemsSay(), collections.defaultdict(int), _Scaled({"k": 4, "j": 5}),
    collections.OrderedDict(j=2, k=1), {"k": 1},
], ids=lambda v: f"{type(v).__name__}{sorted(v)}")
def test_a_mapping_pattern_asks_the_mappings_get(subject):
    """A mapping pattern reads each key with the subject's own `get(key, sentinel)` (CPython's
    match_keys): the trace asked `__contains__` then `[]`, so a dict subclass's own get was
    not run (eager: "from get", traced: 1), and its own __contains__/__getitem__ were (a
    defaultdict gained no key either way, as get never calls __missing__)."""
    check(fresh(_keys), torch.ones(2), subject, graphs=1)


def test_a_mapping_pattern_on_mappings_made_in_the_frame():
    def f(x):
        found = []
        for m in (_GetSays(k=1), _ItemsSay(k=2), _Scaled({"k": 4}), {"k": 3}):
            match m:
                case {"k": v}:
                    found.append(v)
        return x + 1, found

    check(f, torch.ones(2), graphs=1)
