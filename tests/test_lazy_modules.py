"""Lazy modules (LazyLinear, LazyConv2d, LazyBatchNorm...) called for the first time inside a
traced frame: their initialising pre-hook runs at trace time, as under torch.compile, and the
frame is traced again with the initialised module (tracer/variables/lazy_modules.py)."""
import pytest
import torch
from torch import nn

import tracer
from helpers import assert_captured, traced


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def _net():
    return nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d(), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5))


def _pair(make, seed=0):
    torch.manual_seed(seed)
    a = make()
    torch.manual_seed(seed)
    b = make()
    return a, b


def test_a_lazy_stack_is_captured_whole_and_initialised_as_in_eager():
    eager, compiled_model = _pair(_net)
    x = torch.randn(2, 3, 8, 8)
    torch.manual_seed(1)
    ref = eager(x)
    torch.manual_seed(1)
    c = tracer.compile(compiled_model, fullgraph=True)
    with traced() as t:
        out = c(x)
    assert_captured(t, graphs=1)
    torch.testing.assert_close(out, ref)
    # the module became its plain classes, with eager's parameters
    assert [type(m) for m in compiled_model] == [type(m) for m in eager]
    assert type(compiled_model[4]) is nn.Linear
    for (n, p), (_, q) in zip(compiled_model.named_parameters(), eager.named_parameters()):
        torch.testing.assert_close(p, q, msg=n)
    # later calls: the same entry, nothing traced
    x2 = torch.randn(2, 3, 8, 8)
    with traced() as t2:
        out2 = c(x2)
    assert t2.frames_traced == 0
    torch.testing.assert_close(out2, eager(x2))


def test_a_lazy_module_reached_as_a_global_in_a_function():
    lazy = nn.LazyLinear(3)

    def f(x):
        return lazy(x * 2).sum(-1)

    c = tracer.compile(f, fullgraph=True)
    x = torch.randn(4, 6)
    with traced() as t:
        out = c(x)
    assert_captured(t, graphs=1)
    assert type(lazy) is nn.Linear and lazy.weight.shape == (3, 6)
    torch.testing.assert_close(out, f(x))
    # a second instance, still lazy, reaches the same code: its own initialisation
    lazy = nn.LazyLinear(3)
    out = c(torch.ones(4, 2))
    assert lazy.weight.shape == (3, 2)
    torch.testing.assert_close(out, f(torch.ones(4, 2)))


def test_a_lazy_module_after_a_graph_break():
    lazy = nn.LazyLinear(2)

    def f(x):
        y = x.relu()
        print("between", end="")  # a graph break before the lazy call
        return lazy(y) + 1

    c = tracer.compile(f)
    x = torch.randn(3, 5)
    out = c(x)
    torch.testing.assert_close(out, lazy(x.relu()) + 1)
    assert lazy.in_features == 5


def test_a_lazy_initialisation_that_raises_raises_as_in_eager():
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.LazyLinear(2)

        def forward(self, x):
            return self.l(x)

    m = Bad()
    c = tracer.compile(m)
    # a 0-d input: LazyLinear reads input.shape[-1] and raises IndexError in eager
    with pytest.raises(IndexError):
        c(torch.tensor(1.0))
    out = c(torch.ones(2, 4))
    torch.testing.assert_close(out, m(torch.ones(2, 4)))
