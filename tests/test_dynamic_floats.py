"""Automatic dynamic floats (config.dynamic_floats): a float argument whose value changed
between traces becomes a SymFloat graph input, as an int becomes a SymInt, so a learning
rate or a temperature that changes on every call compiles twice (torch.compile: the same,
`specialize_float=False`), not once per value until the recompile limit and then Python."""
import math

import pytest
import torch
import torch.nn.functional as F

import tracer
from tests.helpers import assert_captured, traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")

VALUES = (0.3, 0.7, 0.25, 0.9, 0.31, 0.77, 0.42, 0.55, 0.61, 0.13)


def _dynamo_graphs(f, x):
    import torch._dynamo
    seen = []

    def backend(gm, _inputs):
        seen.append(gm)
        return gm.forward
    torch._dynamo.reset()
    t = torch.compile(f, backend=backend)
    for v in VALUES:
        t(x, v)
    torch._dynamo.reset()
    return len(seen)


def scaled(x, lr):
    return x * lr + 1


def trig(x, t):
    return x * math.cos(t) + math.sqrt(t) * math.tanh(t)


def branchy(x, lr):
    if lr > 0.5:
        return x + lr, lr * 2
    return x - lr, lr / 2


@pytest.mark.parametrize("f", [scaled, branchy, trig])
def test_a_changing_float_compiles_a_bounded_number_of_times(f):
    x = torch.randn(4)
    c = tracer.compile(f)
    with traced() as t:
        for v in VALUES:
            out, ref = c(x, v), f(x, v)
            torch.testing.assert_close(out, ref)
    assert t.recompile_limits == 0 and t.fallbacks == 0, str(t)
    assert t.frames_traced <= 3, str(t)  # static, then symbolic (and the other branch)
    assert t.frames_traced <= _dynamo_graphs(f, x) + 1
    with traced() as warm:
        for v in (0.111, 0.888):
            torch.testing.assert_close(c(x, v), f(x, v))
    assert warm.frames_traced == 0, str(warm)


def test_a_float_needed_as_a_python_value_is_specialised_and_correct():
    def f(x, s):
        return x * math.sqrt(s), round(s, 2), f"{s:.3f}"
    c = tracer.compile(f)
    x = torch.randn(3)
    for v in VALUES[:5]:
        out, ref = c(x, v), f(x, v)
        torch.testing.assert_close(out[0], ref[0])
        assert out[1:] == ref[1:]


def test_a_backend_that_refuses_symbolic_floats_gets_constants():
    calls = []

    def picky(gm, example_inputs):
        if any(isinstance(a, torch.SymFloat) for a in example_inputs):
            raise RuntimeError("no SymFloat inputs here")
        calls.append(gm)
        return gm.forward
    c = tracer.compile(scaled, backend=picky)
    x = torch.randn(4)
    with traced() as t:
        for v in VALUES[:4]:
            torch.testing.assert_close(c(x, v), scaled(x, v))
    assert t.fallbacks == 0 and len(calls) == 4, str(t)  # one graph per value, as before


@pytest.mark.parametrize("how", ["config", "dynamic=False"])
def test_static_floats_when_asked(how, monkeypatch):
    if how == "config":
        monkeypatch.setattr(tracer.config, "dynamic_floats", False)
    c = tracer.compile(scaled, dynamic=False if how != "config" else None)
    x = torch.randn(4)
    with traced() as t:
        for v in VALUES[:4]:
            torch.testing.assert_close(c(x, v), scaled(x, v))
    assert t.frames_traced == 4, str(t)


# ---- floats computed from sizes -----------------------------------------------------------------
# Before: once sizes were dynamic, every float computed with a symbolic float operand was an
# opaque unbacked symbol (sympy must not simplify float arithmetic), so anything that needed
# its value broke the graph: a size made from it, an op's float argument, a comparison. Now it
# is a symbol of its own with the program's value as its hint, guarded by computing it again
# as the program does (guards/shape.py: ComputedNumberSource).


def window_reverse(x, H, W):
    B = int(x.shape[0] / (H * W / 2 / 2))  # Swin's window_reverse
    y = x.view(B, H, W, -1)
    return torch.roll(y, shifts=(1, 1), dims=(1, 2))


WINDOWS = [(4, 4), (6, 6), (4, 8), (8, 8), (2, 6), (10, 4)]


def test_a_size_computed_through_floats_sizes_a_view_in_the_graph():
    """Swin's window_reverse then roll: `int(n / (H * W / 2 / 2))` sized the view with an
    unbacked int and roll broke the graph (GuardOnDataDependentSymNode) on every size after
    the first. Now one graph per trace, and as few traces as torch.compile's (4 for these 6
    sizes: the view's own guards on divisibility)."""
    c = tracer.compile(window_reverse, backend="eager")
    with traced() as t:
        for H, W in WINDOWS:
            x = torch.randn(2 * H * W // 4, 4, 8)
            torch.testing.assert_close(c(x, H, W), window_reverse(x, H, W), rtol=0, atol=0)
    assert_captured(t, breaks=0, min_ops=2)
    assert t.frames_traced <= 4 and t.recompile_limits == 0, str(t)
    with traced() as warm:
        for H, W in WINDOWS[1:]:
            x = torch.randn(2 * H * W // 4, 4, 8)
            torch.testing.assert_close(c(x, H, W), window_reverse(x, H, W), rtol=0, atol=0)
    assert warm.frames_traced == 0, str(warm)  # the guards pass on the inputs they were built from


POS = torch.randn(1, 8, 4, 4)


def interpolate_pos(x, w):
    s = (w + 0.1) / 4  # old DINO / HF ViT position-embedding interpolation
    return F.interpolate(POS, scale_factor=(s, s), mode="bicubic") + x


def test_a_float_an_op_needs_as_a_python_float_is_specialised_not_a_break():
    """F.interpolate's scale_factors must be Python floats: the unbacked symbol was a break
    (`must be tuple of floats, but found element of type SymFloat`). Now the value is
    specialised and guarded, one graph per value as torch.compile (3 for 3 sizes), and a
    size seen before is a cache hit."""
    c = tracer.compile(interpolate_pos, backend="eager")
    with traced() as t:
        for w in (6, 8, 10):
            x = torch.randn(1, 8, w, w)
            torch.testing.assert_close(c(x, w), interpolate_pos(x, w), rtol=0, atol=0)
    assert_captured(t, breaks=0, graphs=3, recompiles=2)
    with traced() as warm:
        x = torch.randn(1, 8, 8, 8)
        torch.testing.assert_close(c(x, 8), interpolate_pos(x, 8), rtol=0, atol=0)
    assert warm.frames_traced == 0, str(warm)


def test_a_float_specialised_per_size_stops_at_half_the_recompile_limit():
    """Specialised once per size, `interpolate_pos` over 12 sizes reached the recompile limit
    at the ninth and then ran as Python (RecompileLimitWarning). After half the limit's
    traces specialised such a float, it is opaque again: interpolate is a graph break, and
    that one trace serves every further size."""
    c = tracer.compile(interpolate_pos, backend="eager")
    with traced() as t:
        for w in [*range(5, 17), 6, 9]:
            x = torch.randn(1, 8, w, w)
            torch.testing.assert_close(c(x, w), interpolate_pos(x, w), rtol=0, atol=0)
    assert t.recompile_limits == 0 and t.fallbacks == 0 and t.internal_errors == 0, str(t)
    assert t.graph_breaks == 1 and t.frames_traced <= tracer.config.recompile_limit, str(t)
    with traced() as warm:
        for w in (17, 20):
            x = torch.randn(1, 8, w, w)
            torch.testing.assert_close(c(x, w), interpolate_pos(x, w), rtol=0, atol=0)
    assert warm.frames_traced == 0, str(warm)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_eps_computed_from_a_size_is_the_programs_value(backend):
    """layer_norm's eps computed from a size broke the graph (`zuf` data-dependent). Now it
    is specialised to exactly the program's float, and is that constant in the graph: a
    backend tracing the graph again computed sympy's form (`5e-06 + 1e-05*(w/4)`) and
    pinned that, a guard failing on its own inputs (torch.compile fails it on this code)."""
    def f(x, w):
        return F.layer_norm(x, (8,), eps=1e-5 * (w / 4 + 0.5))
    c = tracer.compile(f, backend=backend)
    with traced() as t:
        for w in (6, 8, 10):
            x = torch.randn(w, 8) * 1e-3
            torch.testing.assert_close(c(x, w), f(x, w), rtol=0, atol=0)
    assert_captured(t, breaks=0, graphs=3)


def test_a_comparison_of_a_float_of_sizes_is_guarded_not_a_break():
    """`if n / 3 * 2 > 2.5` on a dynamic size was a break (bool() of an unbacked symbol);
    now a guard computing the float again, so the sizes on each side share a trace."""
    def f(x):
        r = x.shape[0] / 3 * 2
        if r > 2.5:
            return x + r, r
        return x - r, r
    c = tracer.compile(f)
    with traced() as t:
        for n in range(2, 12):
            x = torch.ones(n)
            out, ref = c(x), f(x)
            torch.testing.assert_close(out[0], ref[0])
            assert repr(out[1]) == repr(ref[1])
    assert_captured(t, breaks=0)
    assert t.frames_traced == 3, str(t)  # static, then symbolic on either side of 2.5


def test_a_specialised_float_of_sizes_is_guarded_by_its_own_value():
    """`(n + 0.1) - n` is not 0.1, and not the same float for every n (0.10000000000000009
    for n = 2, 3; 0.09999999999999964 for n = 4..7): specialised by str(), the guard
    computes it again in floats, so n = 4 does not reuse n = 3's entry."""
    def f(x):
        n = x.shape[0]
        v = (n + 0.1) - n
        return x + 1, v, str(v)
    c = tracer.compile(f)
    with traced() as t:
        for n in (2, 3, 4, 5, 6, 7):
            x = torch.ones(n)
            out, ref = c(x), f(x)
            torch.testing.assert_close(out[0], ref[0])
            assert repr(out[1:]) == repr(ref[1:])
    assert_captured(t, breaks=0)
    assert t.frames_traced == 3, str(t)  # static n = 2, then one trace per value


def test_a_float_computed_from_a_float_argument_is_not_specialised_per_call():
    """BatchNorm(momentum=None) in train mode computes its momentum as `1.0 /
    float(num_batches_tracked)`, new on every step. A float computed from a float argument
    stays opaque (what needs its value is a break), so batch_norm does not trace once per
    step up to the recompile limit (torch.compile runs this forward as Python)."""
    bn, ref = torch.nn.BatchNorm1d(8, momentum=None), torch.nn.BatchNorm1d(8, momentum=None)

    def f(m, x):
        return m(x) * 2
    c = tracer.compile(f)
    with traced() as t:
        for n in range(4, 16):
            x = torch.randn(n, 8)
            torch.testing.assert_close(c(bn, x), f(ref, x))
            torch.testing.assert_close(bn.running_mean, ref.running_mean)
    assert t.recompile_limits == 0 and t.fallbacks == 0 and t.internal_errors == 0, str(t)
    assert t.frames_traced <= 10, str(t)
