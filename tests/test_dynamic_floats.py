"""Automatic dynamic floats (config.dynamic_floats): a float argument whose value changed
between traces becomes a SymFloat graph input, as an int becomes a SymInt, so a learning
rate or a temperature that changes on every call compiles twice (torch.compile: the same,
`specialize_float=False`), not once per value until the recompile limit and then Python."""
import math

import pytest
import torch

import tracer
from tests.helpers import traced

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
