"""Invariants of guard sets, checked where they are made (issues 9 and 16): a new entry's
guards pass on the inputs it was built from, check() and failures() agree, and warm calls of
a frame (same inputs, fresh inputs of the same shapes) compile nothing."""
import pytest
import torch
import torch.nn as nn

import tracer
from guards import LocalSource, compile_guards
from guards.tensor import TensorMatch


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


class Tied(nn.Module):
    """Two attributes, one Parameter (GPT2's lm_head.weight is wte.weight)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


def test_tied_weights_compile_once():
    m = Tied()
    c = tracer.compile(m)
    ids = torch.randint(0, 10, (2, 3))
    assert torch.equal(c(ids), m(ids))
    s0 = tracer.stats()
    for _ in range(3):
        fresh = torch.randint(0, 10, (2, 3))
        assert torch.equal(c(fresh), m(fresh))
    s1 = tracer.stats()
    assert s1.frames_traced == s0.frames_traced, s1
    assert s1.cache_hits == s0.cache_hits + 3
    assert len(c._compiled_forward.entries) == 1
    assert c._compiled_forward.entries[0].ops >= 2


def test_untying_weights_recompiles():
    m = Tied()
    c = tracer.compile(m)
    ids = torch.randint(0, 10, (2, 3))
    c(ids)
    m.head.weight = nn.Parameter(m.emb.weight.detach().clone())  # same metadata, no longer tied
    with torch.no_grad():
        m.head.weight.mul_(2)
    assert torch.equal(c(ids), m(ids))
    assert len(c._compiled_forward.entries) == 2


class _Table(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(10, 4))

    def forward(self, ids):
        return self.weight[ids]


class _Proj(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(10, 4))

    def forward(self, x):
        return x @ self.weight.t()


class _UserTied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.head = _Table(), _Proj()
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


@pytest.mark.parametrize("stock_leaves", [False, True])
def test_untying_the_weights_of_user_modules_recompiles(stock_leaves, monkeypatch):
    """The second path to a tied parameter was not guarded (the trace had met the tensor
    already): after untying, the cached graph used the embedding's weight for the head."""
    monkeypatch.setattr(tracer.config, "inline_stock_modules", not stock_leaves)
    m = _UserTied()
    c = tracer.compile(m)
    ids = torch.randint(0, 10, (2, 3))
    assert torch.equal(c(ids), m(ids))
    m.head.weight = nn.Parameter(m.emb.weight.detach() * 2)
    assert torch.equal(c(ids), m(ids))
    assert len(c._compiled_forward.entries) == 2


def test_same_tensor_under_two_sources_is_one_batched_check():
    a, b = torch.randn(3), torch.randn(3)
    gs = compile_guards([TensorMatch(LocalSource("x", 0), a), TensorMatch(LocalSource("y", 1), a)],
                        builtins={})
    assert gs.check((a, a), {}, None) and gs.failures((a, a), {}, None) == []
    assert not gs.check((a, b), {}, None)
    assert any("x is y" in f or "y is x" in f for f in gs.failures((a, b), {}, None)), gs.failures((a, b), {}, None)


@pytest.mark.internal_errors
def test_new_entry_guards_pass_on_their_inputs_or_the_call_runs_as_python(monkeypatch):
    """A guard set that rejects its own inputs is an internal error, not a recompile loop."""
    from guards import builder
    real = builder.GuardSet._generate

    def broken(self, *a):  # every set but the global-state-only one the fallback gets
        check, text = real(self, *a)
        return ((lambda L, G, C: False) if len(self.guards) > 1 else check), text
    monkeypatch.setattr(builder.GuardSet, "_generate", broken)

    def f(x):
        return x + 1

    c = tracer.compile(f)  # guards: global state and x
    before = tracer.stats()
    for _ in range(5):
        assert torch.equal(c(torch.ones(2)), torch.ones(2) + 1)
    after = tracer.stats()
    assert after.frames_traced == before.frames_traced + 1, "traced once, never again"
    assert after.internal_errors == before.internal_errors + 1
    assert "guards fail on the inputs they were built from" in after.of("internal_error")[-1].reason
