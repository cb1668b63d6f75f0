"""A module class with its own `__call__` (HuggingFace's GradientCheckpointingLayer up to
transformers 5.2x: `if self.gradient_checkpointing and self.training: ...; return
super().__call__(*args, **kwargs)`), and nn.Module's dispatch called by name: traced into,
as torch.compile does, not a graph break per layer (a tiny GPT2 on transformers 5.17 split
into 5 graphs with 9 breaks)."""
import pytest
import torch
import torch.nn as nn

import tracer
from helpers import assert_captured, assert_recompiled, assert_warm, traced
from semantics_helpers import dynamo_graphs

pytestmark = pytest.mark.usefixtures("fresh_tracer")


class CheckpointingLayer(nn.Module):
    """The shape of transformers' GradientCheckpointingLayer.__call__."""
    gradient_checkpointing = False

    def __call__(self, *args, **kwargs):
        if self.gradient_checkpointing and self.training:
            kwargs["scale"] = 0.0
        return super().__call__(*args, **kwargs)


class Block(CheckpointingLayer):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x, scale=1.0):
        return torch.tanh(self.lin(x)) * scale + x


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x):
        for b in self.blocks:
            x = b(x, scale=0.5)
        return x.sum(-1)


def test_layers_with_their_own_call_are_one_graph_like_torch_compile():
    model = Stack().eval()
    x = torch.randn(2, 8)
    c = tracer.compile(model)
    with traced() as t:
        got = c(x)
    torch.testing.assert_close(got, model(x))
    assert_captured(t, min_ops=9, graphs=1, breaks=0)
    assert t.graphs == dynamo_graphs(model, x) == 1
    x2 = torch.randn(2, 8)
    same, fresh = assert_warm(c, x, fresh=(x2,))
    torch.testing.assert_close(same, model(x))
    torch.testing.assert_close(fresh, model(x2))


def test_the_own_call_branch_is_guarded():
    """The attribute the own __call__ branches on, and the class's __call__ itself, are
    guarded: switching checkpointing on in train mode, or patching __call__ on the class,
    recompiles and takes the new path."""
    model = Stack().train()
    x = torch.randn(2, 8)
    c = tracer.compile(model)
    torch.testing.assert_close(c(x), model(x))
    model.blocks[1].gradient_checkpointing = True
    with traced() as t:
        got = c(x)
    torch.testing.assert_close(got, model(x))
    assert_recompiled(t)

    def doubled(self, *args, **kwargs):
        return super(Block, self).__call__(*args, **kwargs) * 2

    Block.__call__ = doubled
    try:
        with traced() as t:
            got = c(x)
        torch.testing.assert_close(got, model(x))
        assert_recompiled(t, "__call__")
    finally:
        del Block.__call__
    with traced() as t:
        got = c(x)
    torch.testing.assert_close(got, model(x))


class ByName(nn.Module):
    """nn.Module's dispatch called by name runs the hooks, as in eager."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return nn.Module.__call__(self.a, x) + self.b._call_impl(x)


def test_module_dispatch_called_by_name_runs_hooks():
    model = ByName()
    seen = []
    model.a.register_forward_hook(lambda m, args, out: seen.append("a") or out * 3)
    model.b.register_forward_pre_hook(lambda m, args: seen.append("b") or (args[0] + 1,))
    x = torch.randn(2, 4)
    c = tracer.compile(model)
    with traced() as t:
        got = c(x)
    want = model(x)
    torch.testing.assert_close(got, want)
    assert seen == ["a", "b", "a", "b"]
    assert_captured(t, min_ops=4, graphs=1, breaks=0)
    assert_warm(c, x)


def test_an_own_call_that_is_not_a_function_is_a_break_with_a_reason():
    class Odd(nn.Module):
        def forward(self, x):
            return x + 1

    Odd.__call__ = staticmethod(lambda x: x * 2)  # not a Python function on the class

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.odd = Odd()

        def forward(self, x):
            return self.odd(x).sin()

    model = Outer()
    x = torch.randn(3)
    c = tracer.compile(model)
    with traced() as t:
        got = c(x)
    torch.testing.assert_close(got, model(x))
    assert t.fallbacks == 0 and t.internal_errors == 0, str(t)
    assert any("__call__ is a staticmethod" in e.reason for e in t.of("break")), str(t)


def test_a_stock_modules_forward_called_through_its_class_is_inlined():
    """`nn.LayerNorm.forward(self, x)` in a subclass's forward (transformers' SqueezeBERT
    layer norm, LoRA wrappers calling `nn.Linear.forward`): the function, read from a torch
    module, was taken for a torch op and `self` for its argument: a graph break (SqueezeBERT:
    7 breaks and a fallback; torch.compile: one graph)."""
    class LN(nn.LayerNorm):
        def forward(self, x):
            return nn.LayerNorm.forward(self, x.permute(0, 2, 1)).permute(0, 2, 1)

    class Lin(nn.Linear):
        def forward(self, x):
            return nn.Linear.forward(self, x) * 2

    for m, x in ((LN(4), torch.randn(2, 4, 3)), (Lin(3, 5), torch.randn(2, 3))):
        c = tracer.compile(m)
        for _ in range(2):
            torch.testing.assert_close(c(x), m(x))
    s = tracer.stats()
    assert s.graphs == 2 and s.graph_breaks == 0 and s.fallbacks == 0
