"""torch results and entry points (issue 10): struct sequences with named fields, numpy
constants inside graphs, and tracer.compile of any callable."""
import functools
import operator

import numpy as np
import pytest
import torch

import tracer
from semantics_helpers import check, run


def test_struct_sequence_results_keep_their_fields():
    def f(x):
        m = x.min(dim=0)
        s = torch.sort(x)
        t = torch.topk(x, 2)
        mx = torch.max(x, 1)
        values, indices = torch.max(x, 0)
        return m.values + 1, s.indices, t, mx, m, values, indices, t[0], t[:1], len(m), m.n_fields

    check(f, torch.randn(3, 4), graphs=1, dynamo=True)


def test_struct_sequence_as_an_input():
    def f(r):
        return r.values * 2, r.indices, r

    r = torch.randn(3, 4).max(dim=1)
    check(f, r)


def test_numpy_scalar_constant_inside_a_graph():
    def f(x, s, k):
        return x * s + k

    _, d = check(f, torch.ones(2), np.float64(2.5), True, graphs=1)
    c, _ = check(f, torch.ones(2), 3, np.float64(0.5), graphs=1)
    gm = c.entries[0].graph
    assert "np." not in gm.code


@pytest.mark.parametrize("target, args", [
    (torch.add, (torch.ones(2), torch.ones(2))),
    (torch.ops.aten.mul.Tensor, (torch.ones(2), torch.full((2,), 3.0))),
    (operator.mul, (torch.ones(2), 2)),
    (functools.partial(torch.add, alpha=3), (torch.ones(2), torch.ones(2))),
    (torch.nn.functional.relu, (torch.randn(3),)),
])
def test_compile_any_callable(target, args):
    c = tracer.compile(target)
    _, d = run(c, target, *args)
    assert d.graphs == 1 and d.fallbacks == 0
    _, warm = run(c, target, *args)
    assert warm.frames == 0


class Scaler:
    def __init__(self):
        self.s = 2.0

    def scale(self, x):
        return x * self.s

    def __call__(self, x):
        return x + self.s


def test_compile_bound_method_and_callable_object():
    k = Scaler()
    for target in (k.scale, k):
        c = tracer.compile(target)
        _, d = run(c, target, torch.ones(2))
        assert d.graphs == 1 and d.fallbacks == 0
    assert tracer.compile(k.scale).__self__ is k


def test_each_compiled_builtin_has_its_own_cache():
    adds = [tracer.compile(torch.add) for _ in range(12)]
    for c in adds:  # twelve compiled objects: no shared recompile limit
        c(torch.ones(2), torch.ones(2))
    subs = tracer.compile(torch.sub)
    assert torch.equal(subs(torch.ones(2), torch.ones(2)), torch.zeros(2))


def test_compile_rejects_what_is_not_callable():
    with pytest.raises(TypeError):
        tracer.compile(3)


def test_slices_of_named_sequences_are_tuples():
    import collections
    P = collections.namedtuple("P", "a b c")

    def f(x, p):
        m = x.max(dim=0)
        return x + p.a, p[:2], p[1:], m[:1], m[1:]

    check(f, torch.ones(2, 3), P(1, 2, 3))
