"""Constants are told apart as the code that reads them tells them apart, and float
arithmetic on dynamic floats is computed, never simplified. Each case gave a wrong result
on 4ae4eb4 (found by a differential hunt; the calls below are the reproducers):

* a set or frozenset argument was guarded by `==`: {True} and {1.0} reused the entry made for
  {1}, {16, 8} the one for {8, 16} (equal, but iterated in another order), frozenset({0.0})
  the one for frozenset({-0.0});
* a dynamic float specialised at -0.0 was guarded `v == 0.0` by the ShapeEnv, and 0.0 then
  reused it (str() gave '-0.0'); a complex argument 0j accepted -0j;
* sympy simplified `(a + b) - b` on symbolic floats to `a` (0.1 where eager gives
  0.10000000000000003), and `0.0 * v` to 0.0 (eager: -0.0 for a negative v);
* max(7, 0.5) of a symbolic int and a symbolic float gave 7.0 (torch.sym_max): Python gives
  the int.
"""
import math

import torch

import tracer
from semantics_helpers import fresh


def _calls(f, argsets):
    """Compare each call with eager through one compiled function (so later calls can hit
    entries made by earlier ones). Values are compared by repr: it tells -0.0, 1.0 and True
    apart."""
    c = tracer.compile(f)
    for args in argsets:
        want, got = f(torch.ones(2), *args), c(torch.ones(2), *args)
        assert torch.equal(want[0], got[0])
        assert repr(want[1:]) == repr(got[1:]), (args, want[1:], got[1:])


def test_sets_and_frozensets_are_guarded_by_element_types_and_order():
    def f(x, s):
        return x + 1, list(s)

    _calls(f, [({1},), ({True},), ({1.0},), ({8, 16},), ({16, 8},), ({8, 16},)])
    _calls(fresh(f), [(frozenset({1}),), (frozenset({True}),), (frozenset({-0.0}),), (frozenset({0.0}),)])


def test_signed_zero_floats_and_complex_arguments_stay_apart():
    def f(x, v):
        return x + 1, str(v), math.copysign(1.0, v)

    _calls(f, [(1.5,), (-0.0,), (0.0,), (-0.0,), (2.5,)])

    def g(x, z):
        return x + 1, str(z)

    _calls(g, [(0j,), (complex(-0.0, -0.0),), (0j,)])


def test_float_arithmetic_on_dynamic_floats_is_computed_not_simplified():
    def f(x, a, b):
        if a:
            pass
        return x + 1, (a + b) - b, 0.0 * b, math.copysign(1.0, 0.0 * b)

    _calls(f, [(1.5, 2.5), (3.5, -0.5), (0.1, 0.2), (1e308, 1e308), (0.7, -2.0)])


def test_max_and_min_of_an_int_and_a_float_keep_the_winning_object():
    def f(x, a, b):
        return x + 1, max(a, b), min(b, a), max(a, 0.5)

    _calls(f, [(3, 2), (5, 4), (7, 0.5), (1, 3.0), (9, 8)])
