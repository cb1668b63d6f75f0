"""A constant that came from the frame's inputs is handed on as that object, not as the equal
object the trace saw: value guards pin equality, not identity, so code run natively after a
break (`a is b`, id()), the caller, and container `==` (which calls an object equal to itself)
see the objects of this call.

Before, such a value was rebuilt from the trace's copy at a graph break: `a is b` between
two equal strings, and `[a] == [b]` of one NaN passed twice, gave the first call's answer on
later calls (wrong results; the first and last tests). The two in between already held (a
returned argument, a value copied within an input dict) and keep the mechanism honest.
"""
import torch

import tracer
from helpers import traced


def _pair():
    s = "ab" * 40
    return s, "".join(["ab"] * 40)   # equal, distinct objects


def test_is_between_equal_strings_follows_this_calls_objects():
    def f(x, a, b):
        return x + (1 if a is b else 2)

    s, t = _pair()
    c = tracer.compile(f)
    for a, b in ((s, s), (s, t), (t, t), (t, s), (s, s)):
        assert torch.equal(c(torch.zeros(1), a, b), f(torch.zeros(1), a, b))


def test_a_returned_argument_is_the_argument():
    def f(x, name, scale):
        return x * 2, name, scale

    c = tracer.compile(f)
    for _ in range(3):
        s, _t = _pair()
        k = 1e-3 * 7
        _, name, scale = c(torch.ones(1), s, k)
        assert name is s and scale is k


def test_a_value_copied_within_an_input_dict_keeps_its_identity():
    def f(x, d):
        d["copy"] = d["name"]
        print("a break", file=open("/dev/null", "w"))
        return x + 1, d["copy"] is d["name"]

    c = tracer.compile(f)
    for _ in range(3):
        d = {"name": _pair()[1]}
        _, same = c(torch.ones(1), d)
        assert same and d["copy"] is d["name"]


def test_the_same_nan_passed_twice_then_two_nans():
    def f(x, a, b):
        return x + 1, [a] == [b], a is b

    n1, n2 = float("nan"), float("nan")
    c = tracer.compile(f)
    for a, b in ((n1, n1), (n1, n2), (n2, n2)):
        assert c(torch.ones(1), a, b)[1:] == f(torch.ones(1), a, b)[1:]


def test_identity_of_values_the_frame_computes():
    """`n + 1000` computed twice is two objects, `float(v)` of a float and `t[:]` of a tuple are
    the argument itself, as in CPython (the first was True, the others False, on 4ae4eb4)."""
    def f(x, n, v, t):
        a, b = n + 1000, n + 1000
        return x + 1, a is b, float(v) is v, t[:] is t, tuple(t) is t

    c = tracer.compile(f)
    for n in (3, 4):
        args = (n, 2.5 + n, (1, "a"))
        got, expected = c(torch.ones(1), *args)[1:], f(torch.ones(1), *args)[1:]
        # (`a is b` is CPython's business: False up to 3.14, True on 3.15.2)
        assert got == expected and expected[1:] == (True, True, True)


def test_a_full_slice_of_a_tuple_built_here_is_the_tuple():
    def g(x, lst):
        t = tuple(lst)
        return x + 1, t[:] is t, t[0:] is t, t[::1] is t, t[1:] is t

    c = tracer.compile(g)
    assert c(torch.ones(1), [1, 2])[1:] == g(torch.ones(1), [1, 2])[1:] == (True, True, True, False)


def test_a_tuple_keeps_its_identity_across_a_break():
    """A tuple built in the frame, referenced from a local and from the stack at a break, is
    rebuilt once (`id(s) == id(s)` was False after the break), and `t * 1` is `t` itself, as
    CPython gives it (CPython's own test_tuple/test_list test_repeat, found by the oracle)."""
    def f(m):
        s = tuple(range(m))
        t = s * 1
        return id(s) == id(s), id(s) == id(t), t is s, s + () is s

    def g(x, m):
        s = (x, m)
        t = s * 1
        return id(s) == id(t), t is s, x + 1

    c = tracer.compile(f)
    for m in (3, 4):
        assert c(m) == f(m) == (True, True, True, True)
    cg = tracer.compile(g)
    x = torch.ones(2)
    got, expected = cg(x, 2), g(x, 2)
    assert got[:2] == expected[:2] == (True, True) and torch.equal(got[2], expected[2])
    assert tracer.stats().fallbacks == 0


def test_int_and_float_of_a_symbolic_number_are_the_number():
    """float(v) of a float argument that became a symbol (its value changed between calls) is v
    itself, as in CPython, and stays symbolic (it was specialised into a new object: `float(v)
    is v` was False from the second call on, found through the sizes handed across breaks)."""
    def g(x, v, n):
        return x + 1, float(v) is v, int(n) is n, float(v) * 2, int(n) + 1

    c = tracer.compile(g)
    for v in (2.5, 3.5, 4.5):
        n = int(v * 1000)
        got, want = c(torch.ones(1), v, n), g(torch.ones(1), v, n)
        assert got[1:] == want[1:] == (True, True, v * 2, n + 1)
        assert torch.equal(got[0], want[0])
    s = tracer.stats()
    assert s.graphs >= 1 and s.recompiles == 1, s  # symbolic from the second call on


_LAYERS = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(3)])
_AS_LIST = list(_LAYERS)


def test_one_module_through_two_sources_stays_one_object():
    """`mod in _AS_LIST[:1]` compares a ModuleList's module with the same module in a global
    list: one object, which the guards keep one (it was an internal error: the distinct
    inputs' guard failed on the inputs it was built from, and the frame ran as Python)."""
    def f(x):
        return [m(x) * (2.0 if m in _AS_LIST[:1] else 3.0) for m in _LAYERS]

    x = torch.ones(3)
    ref = f(x)
    tracer.reset()
    tracer.reset_stats()
    c = tracer.compile(f, backend="eager")
    with traced() as t:
        out = c(x)
    torch.testing.assert_close(out, ref)
    assert t.internal_errors == 0 and t.fallbacks == 0 and t.graphs >= 1
    _AS_LIST.reverse()  # now the first is another module: recompiled, and the answer follows
    try:
        torch.testing.assert_close(c(x), f(x))
    finally:
        _AS_LIST.reverse()
