"""One long process, many models: modules are graph inputs, guarded by structure.

Parameters and buffers reached through a module are placeholders read from the module at
call time; a module is guarded by its class and what the trace read of it, never by its
identity. So one entry serves every instance of a module structure (torch.compile: one
frame for them too), a replaced Parameter is picked up, in-place updates reach the real
module, the cache keeps no model alive, and the recompile limit is counted per code object
and module structure (config.recompile_limit).
"""
import copy
import gc
import warnings
import weakref

import pytest
import torch
import torch.nn as nn

import tracer
from tracer.runtime import cache, config

from helpers import assert_captured, traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x)))) * 2


def _torch_compile_frames(models, x):
    from torch._dynamo.testing import CompileCounter
    torch._dynamo.reset()
    cnt = CompileCounter()
    try:
        for m in models:
            c = torch.compile(m, backend=cnt)
            torch.testing.assert_close(c(x), m(x))
        return cnt.frame_count
    finally:
        torch._dynamo.reset()


def test_twelve_instances_of_one_class_trace_once():
    x = torch.randn(3, 8)
    models = [Small().eval() for _ in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", tracer.RecompileLimitWarning)
        with traced() as t:
            for m in models:
                c = tracer.compile(m)
                torch.testing.assert_close(c(x), m(x))
                torch.testing.assert_close(c(x), m(x))  # warm
    assert t.frames_traced == 1 and t.graphs == 1, str(t)
    assert t.recompiles == 0 and t.recompile_limits == 0 and t.fallbacks == 0, str(t)
    assert t.cache_hits == 23, str(t)
    assert _torch_compile_frames(models, x) == t.frames_traced  # torch.compile: one frame too
    # the graph takes the parameters as inputs: it holds none of them
    [entry] = c._compiled_forward.entries
    assert not list(entry.graph.parameters()) and not list(entry.graph.buffers())
    ph = [n.name for n in entry.graph.graph.nodes if n.op == "placeholder"]
    assert len(ph) == 1 + 6 and "self_fc1_weight" in ph, ph


def test_guards_name_no_module_identity():
    m = Small().eval()
    e = tracer.explain(m, torch.randn(3, 8))
    guards = "\n".join(e.frames[0].guards)
    assert "object at 0x" not in guards.replace("module object at", ""), guards  # (only G['torch'])
    assert "type(self) is" in guards and "_parameters['weight']: torch.nn.parameter.Parameter float32" in guards


def _hf_models():
    tf = pytest.importorskip("transformers")
    from zoo.hf_specs import hf_specs
    specs = hf_specs()
    return tf, specs["gpt2"], specs["llama"]


@pytest.mark.one_version
def test_eleven_gpt2s_then_a_llama_one_trace_per_model_class():
    _tf, (_f, build_gpt2, inputs), (_f2, build_llama, _i2) = _hf_models()
    gen = torch.Generator().manual_seed(0)
    kw = inputs(gen)
    per_model = []
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", tracer.RecompileLimitWarning)
        for build in [build_gpt2] * 11 + [build_llama]:
            torch.manual_seed(len(per_model))
            m = build().eval()
            c = tracer.compile(m)
            with traced() as t:
                out = c(**kw)
            torch.testing.assert_close(out.logits, m(**kw).logits)
            assert t.fallbacks == 0 and t.recompile_limits == 0, str(t)
            per_model.append(t.frames_traced)
    assert per_model[0] > 0 and per_model[-1] > 0, per_model  # the first GPT2 and the LLaMA
    assert per_model[1:11] == [0] * 10, per_model               # the other GPT2s: cache hits


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.emb.weight  # the same Parameter under two paths

    def forward(self, ids):
        return self.head(self.emb(ids))


def test_tied_weights_stay_correct_and_untying_retraces():
    ids = torch.tensor([[1, 2, 3]])
    m = Tied()
    c = tracer.compile(m)
    with traced() as t:
        torch.testing.assert_close(c(ids), m(ids))
        m2 = Tied()  # another tied instance: the same entry
        torch.testing.assert_close(tracer.compile(m2)(ids), m2(ids))
    assert t.frames_traced == 1, str(t)
    [entry] = c._compiled_forward.entries
    assert len([n for n in entry.graph.graph.nodes if n.op == "placeholder"]) == 2  # ids + one weight
    m.head.weight = nn.Parameter(torch.randn(10, 6))  # untied: the same-object guard fails
    with traced() as t:
        torch.testing.assert_close(c(ids), m(ids))
    assert t.recompiles == 1, str(t)
    # and a tied model after that still gets the tied answer
    torch.testing.assert_close(tracer.compile(m2)(ids), m2(ids))


class BN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.fc(x))


def test_batchnorm_train_updates_the_real_modules_running_stats():
    for _ in range(2):  # a second instance: the same entry writes its own buffers
        m = BN().train()
        ref = copy.deepcopy(m)
        c = tracer.compile(m)
        for _ in range(3):
            x = torch.randn(5, 4)
            torch.testing.assert_close(c(x), ref(x))
        assert int(m.bn.num_batches_tracked) == 3
        for (name, a), b in zip(m.named_buffers(), ref.buffers()):
            torch.testing.assert_close(a, b, msg=name)
    assert tracer.stats().frames_traced == 1


def test_replaced_parameter_is_picked_up_without_retracing():
    m = Small().eval()
    c = tracer.compile(m)
    x = torch.randn(3, 8)
    torch.testing.assert_close(c(x), m(x))
    with traced() as t:
        m.fc1.weight = nn.Parameter(torch.randn(16, 8))
        torch.testing.assert_close(c(x), m(x))
        m.fc2.bias = nn.Parameter(torch.randn(4))
        m.norm.register_buffer("unused", torch.zeros(1))  # not read: no guard on it
        torch.testing.assert_close(c(x), m(x))
    assert t.frames_traced == 0 and t.recompiles == 0, str(t)


class Modal(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y * 2 if self.training else y - 1


def test_train_eval_switches_recompile_once_each_and_stay_correct():
    m = Modal()
    c = tracer.compile(m)
    x = torch.randn(2, 4)
    with traced() as t:
        for mode in ("train", "eval", "train", "eval"):
            getattr(m, mode)()
            torch.testing.assert_close(c(x), m(x))
        other = Modal().eval()  # another instance in eval mode: the eval entry
        torch.testing.assert_close(tracer.compile(other)(x), other(x))
    assert t.frames_traced == 2 and t.recompiles == 1, str(t)


class Special(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if self is SPECIAL:  # identity used by the code itself
            return self.fc(x) + 100
        return self.fc(x)


SPECIAL = Special()


def test_forward_that_compares_self_identity_stays_correct():
    x = torch.randn(2, 4)
    plain = Special()
    for m in (SPECIAL, plain, SPECIAL, Special(), plain):
        torch.testing.assert_close(tracer.compile(m)(x), m(x))
    assert tracer.stats().frames_traced == 2  # one entry per answer of `self is SPECIAL`


def test_deleting_a_compiled_model_frees_it():
    x = torch.randn(3, 8)
    m = Small().eval()
    c = tracer.compile(m)
    torch.testing.assert_close(c(x), m(x))
    refs = [weakref.ref(m), weakref.ref(m.fc1.weight), weakref.ref(m.fc1)]
    del m, c
    gc.collect()
    assert [r() for r in refs] == [None, None, None]  # no tracer.reset(): the entry holds none
    m2 = Small().eval()
    with traced() as t:  # and the entry is still there for the next instance
        torch.testing.assert_close(tracer.compile(m2)(x), m2(x))
    assert t.frames_traced == 0 and t.cache_hits == 1, str(t)


class A(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 2)

    def forward(self, x):
        return self.fc(x)


class B(A):
    pass


def run_model(m, x):
    return m(x)


def test_recompile_limit_is_per_code_and_module_structure(monkeypatch):
    monkeypatch.setattr(config, "recompile_limit", 2)
    f = tracer.compile(run_model, dynamic=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (2, 3, 4):  # three structures of A: the third is past A's budget
            m, x = A(n), torch.randn(1, n)
            torch.testing.assert_close(f(m, x), m(x))
        limit = [x for x in w if issubclass(x.category, tracer.RecompileLimitWarning)]
        assert len(limit) == 1 and "for A" in str(limit[0].message), [str(x.message) for x in w]
        with traced() as t:  # B has a budget of its own
            m, x = B(5), torch.randn(1, 5)
            torch.testing.assert_close(f(m, x), m(x))
        assert t.frames_traced == 1 and t.recompile_limits == 0, str(t)
    assert cache.structure_key([A(2), torch.zeros(1)]) == (A,)
    assert_captured(f, entries=3)


# ---- stock leaves (config.inline_stock_modules off, or a StockLeaf: the RNN family) ----
class Leafy(nn.Module):
    """Stock modules kept as graph leaves, with parameters and buffers (BatchNorm in train
    and in eval) and an LSTM."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.bn_eval = nn.BatchNorm2d(4)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 8)
        self.lstm = nn.LSTM(8, 6, batch_first=True)

    def forward(self, x):
        y = self.bn_eval(self.bn(self.conv(x)))
        y = self.fc(self.norm(y.flatten(1, 2)))
        out, (h, _) = self.lstm(y)
        return out.sum(1) + h[0]


def _leafy(seed):
    torch.manual_seed(seed)
    m = Leafy()
    m.bn_eval.eval()
    with torch.no_grad():
        m.bn_eval.running_mean.uniform_(-1, 1)
        m.bn_eval.running_var.uniform_(0.5, 2)
    return m


_STATS = ("running_mean", "running_var", "num_batches_tracked")


@pytest.mark.parametrize("stock_leaves", [True, False], ids=["leaves", "default"])
def test_twelve_instances_of_a_model_of_stock_leaves_trace_once(monkeypatch, stock_leaves):
    """A leaf with parameters or buffers reads them as graph inputs (a LeafCall over a
    state-free template, graph/leaf_call.py), guarded by metadata, not identity: one trace
    for twelve instances, outputs and BatchNorm's running stats (on the real modules) equal
    to eager's, the graph holds no module state. (default: everything inlined but the LSTM,
    a StockLeaf.)"""
    monkeypatch.setattr(tracer.config, "inline_stock_modules", not stock_leaves)
    x = torch.randn(2, 3, 8, 8)
    models = [_leafy(i) for i in range(12)]
    refs = [copy.deepcopy(m) for m in models]
    with warnings.catch_warnings():
        warnings.simplefilter("error", tracer.RecompileLimitWarning)
        with traced() as t:
            for m, r in zip(models, refs):
                c = tracer.compile(m)
                for _ in range(2):  # first call (a trace or a hit), then a warm one
                    torch.testing.assert_close(c(x), r(x))
                for leaf in ("bn", "bn_eval"):
                    for name in _STATS:
                        torch.testing.assert_close(getattr(getattr(m, leaf), name), getattr(getattr(r, leaf), name))
    assert t.graphs == 1 and t.recompiles == 0 and t.fallbacks == 0 and t.graph_breaks == 0, str(t)
    assert t.frames_traced == 1, str(t)
    assert int(models[0].bn.num_batches_tracked) == 2 and int(models[0].bn_eval.num_batches_tracked) == 0
    [entry] = c._compiled_forward.entries
    gm = entry.graph
    assert not list(gm.parameters()) and not list(gm.buffers()), gm
    leaves = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert leaves == (["self_conv", "self_bn", "self_bn_eval", "self_norm", "self_fc", "self_lstm"]
                      if stock_leaves else ["self_lstm"]), gm.graph
    ph = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    assert "self_lstm_weight_ih_l0" in ph and "self_bn_running_mean" in ph, ph
    guards = "\n".join(tracer.explain(models[0], x).frames[-1].guards)
    assert "object at 0x" not in guards.replace("module object at", ""), guards


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_stock_leaves_compile_on_other_backends(monkeypatch, backend):
    """aot_eager and inductor trace through a LeafCall as through any module (BatchNorm's
    running stats still reach the real modules: inputs mutated in place)."""
    monkeypatch.setattr(tracer.config, "inline_stock_modules", False)
    x = torch.randn(2, 3, 8, 8)
    models = [_leafy(i) for i in range(2)]
    refs = [copy.deepcopy(m) for m in models]
    with traced() as t:
        for m, r in zip(models, refs):
            c = tracer.compile(m, backend=backend)
            torch.testing.assert_close(c(x), r(x), rtol=1e-4, atol=1e-4)
            for name in _STATS:
                torch.testing.assert_close(getattr(m.bn, name), getattr(r.bn, name), rtol=1e-4, atol=1e-4)
    assert t.frames_traced == 1 and t.graphs == 1 and t.graph_breaks == 0 and t.fallbacks == 0, str(t)


@pytest.mark.parametrize("stock_leaves", [True, False], ids=["leaves", "default"])
def test_deleting_a_compiled_model_with_leaves_frees_it(monkeypatch, stock_leaves):
    monkeypatch.setattr(tracer.config, "inline_stock_modules", not stock_leaves)
    x = torch.randn(2, 3, 8, 8)
    m = _leafy(0)
    c = tracer.compile(m)
    c(x)
    refs = [weakref.ref(o) for o in (m, m.lstm, m.lstm.weight_ih_l0, m.bn, m.bn.running_mean, m.fc.weight)]
    del m, c
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)  # no tracer.reset(): the entry holds none
    m2 = _leafy(1)
    with traced() as t:
        tracer.compile(m2)(x)
    assert t.frames_traced == 0 and t.cache_hits == 1, str(t)
