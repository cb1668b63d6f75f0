"""torch.nn's own modules inside a traced model (config.inline_stock_modules, on by default).

Their forward is traced like user code, as TorchDynamo does: the graph holds F.conv2d,
batch_norm, linear, ... (the same ops torch.compile's graph holds), and a warm call runs no
module Python. A stock module whose forward cannot be traced (the RNN family calls
`torch._VF` with flattened weights) stays one call_module node, a leaf: no graph break.
Everything its forward read is guarded, so changing a hyperparameter or the mode recompiles.
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as P

import tracer
from tests.helpers import traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return F.relu(self.drop(self.bn(self.conv(x))) + x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.blocks = nn.Sequential(Block(4), Block(4))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)
        self.norm = nn.LayerNorm(5)

    def forward(self, x):
        return self.norm(self.fc(self.pool(self.blocks(self.stem(x))).flatten(1)))


def _counts(model, x):
    """(graphs, ops) of torch.compile on the same call, with a counting backend."""
    import torch._dynamo
    seen = []

    def backend(gm, _inputs):
        seen.append(sum(n.op in ("call_function", "call_method", "call_module") for n in gm.graph.nodes))
        return gm.forward
    torch._dynamo.reset()
    torch.compile(model, backend=backend)(x)
    torch._dynamo.reset()
    return len(seen), sum(seen)


def _graph(c):
    return c._compiled_forward.entries[0].graph


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_stock_modules_are_inlined_like_torch_compile(mode):
    torch.manual_seed(0)
    model, ref = Net(), Net()
    ref.load_state_dict(model.state_dict())
    getattr(model, mode)(), getattr(ref, mode)()
    c = tracer.compile(model)
    x = torch.randn(2, 3, 8, 8)
    with traced() as first:
        out = c(x)
    torch.testing.assert_close(out, ref(x))
    assert first.graphs == 1 and first.graph_breaks == 0 and first.fallbacks == 0, str(first)
    gm = _graph(c)
    assert not [n for n in gm.graph.nodes if n.op == "call_module"], gm.graph
    assert first.ops == _counts(copy.deepcopy(ref), x)[1]  # the same ops as torch.compile's graph
    with traced() as warm:
        for _ in range(3):
            x = torch.randn(2, 3, 8, 8)
            torch.testing.assert_close(c(x), ref(x))
    assert warm.frames_traced == 0 and warm.cache_hits == 3, str(warm)
    # train mode: the running statistics moved exactly as eager's (4 calls each)
    for (name, a), b in zip(model.named_buffers(), ref.buffers()):
        torch.testing.assert_close(a, b, msg=name)


def test_changing_what_a_stock_forward_read_recompiles():
    torch.manual_seed(0)
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(c(x), model(x))
    # (a Parameter replaced by one of the same metadata is read at call time: no recompile)
    model.fc.weight = nn.Parameter(torch.randn_like(model.fc.weight))
    with traced() as t:
        torch.testing.assert_close(c(x), model(x))
    assert t.recompiles == 0 and t.frames_traced == 0, str(t)
    changes = [lambda: setattr(model.blocks[0].bn, "eps", 0.5),
               lambda: setattr(model.fc, "weight", nn.Parameter(torch.randn(5, 4), requires_grad=False)),
               lambda: setattr(model.stem[0], "padding", (2, 2)),
               lambda: setattr(model.norm, "eps", 1.0),
               lambda: model.blocks[1].train()]
    for change in changes:
        change()
        with traced() as t:
            out = c(x)
        torch.testing.assert_close(out, model(x))
        assert t.recompiles == 1, str(t)


class WithRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def test_a_stock_module_that_cannot_be_traced_is_a_leaf_not_a_break():
    torch.manual_seed(0)
    model = WithRNN()
    c = tracer.compile(model)
    x = torch.randn(2, 5, 4)
    with traced() as t:
        torch.testing.assert_close(c(x), model(x))
    assert t.graphs == 1 and t.graph_breaks == 0 and t.fallbacks == 0, str(t)
    gm = _graph(c)
    assert [n.target for n in gm.graph.nodes if n.op == "call_module"] == ["self_lstm"], gm.graph
    assert any(n.op == "call_function" and n.target is F.linear for n in gm.graph.nodes)  # head inlined
    with traced() as warm:
        torch.testing.assert_close(c(x), model(x))
    assert warm.frames_traced == 0, str(warm)


def test_a_leaf_the_backend_cannot_compile_is_called_as_python():
    """Inductor cannot compile cuDNN's LSTM as a graph leaf (it reads the weights' data
    pointers under fake tensors; torch.compile runs the RNNs as Python): a backend that fails
    on the graph holding the leaf gets the frame again with the module called as Python, a
    graph break with that reason, not the whole frame falling back."""
    def no_leaves(gm, _inputs):
        if any(n.op == "call_module" for n in gm.graph.nodes):
            raise RuntimeError("Cannot access data pointer of Tensor (a stand-in for inductor on cuDNN)")
        return gm.forward

    torch.manual_seed(0)
    model = WithRNN()
    c = tracer.compile(model, backend=no_leaves)
    x = torch.randn(2, 5, 4)
    with traced() as t:
        torch.testing.assert_close(c(x), model(x))
    assert t.fallbacks == 0 and t.internal_errors == 0, str(t)
    reasons = [e.reason for e in t.of("break")]
    assert any("could not compile LSTM as a graph leaf" in r for r in reasons), str(t)
    assert t.graphs >= 1, str(t)  # the head after the break is captured
    with traced() as warm:
        torch.testing.assert_close(c(x), model(x))
    assert warm.frames_traced == 0 and warm.recompiles == 0, str(warm)


def test_leaves_when_switched_off(monkeypatch):
    monkeypatch.setattr(tracer.config, "inline_stock_modules", False)
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(c(x), model(x))
    leaves = [n for n in _graph(c).graph.nodes if n.op == "call_module"]
    assert len(leaves) == 12, leaves  # every stock module: stem's 3, 3 per block, pool, fc, norm


class Sym(nn.Module):
    """A user parametrization: the weight made symmetric."""

    def forward(self, w):
        return w.triu() + w.triu(1).transpose(-1, -2)


def _parametrized(kind):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    if kind == "user":
        P.register_parametrization(m[0], "weight", Sym())
    else:
        nn.utils.parametrizations.spectral_norm(m[0])  # (power iteration: buffers written in train mode)
    return m


@pytest.mark.parametrize("leaves", [False, True], ids=["inlined", "leaves"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("kind", ["user", "spectral_norm"])
def test_a_parametrized_module_under_parametrize_cached_is_no_leaf(kind, backend, leaves, monkeypatch):
    """Under `parametrize.cached()`, reading a parametrized weight calls torch's
    get_cached_parametrization with the module (a graph break); the parametrized Linear was
    then kept as a leaf, whose example output came from running its call on fakes: that ran
    the parametrization and wrote its fake result into parametrize's global cache, the leaf
    was refused, and the frame run as Python read the fake weight (AssertionError "Please
    convert all Tensors to FakeTensors first"). A module whose call runs more than torch's own
    code (a parametrization) is no leaf: it is inlined, the break stays, the outputs,
    buffers and the cache are eager's (real tensors)."""
    monkeypatch.setattr(tracer.config, "inline_stock_modules", not leaves)
    m, ref = _parametrized(kind), _parametrized(kind)
    c = tracer.compile(m, backend=backend)
    with traced() as t:
        for _ in range(2):
            x = torch.randn(2, 4)
            with P.cached():
                out = c(x)
                assert all(type(v) is torch.Tensor for v in P._cache.values())
            with P.cached():
                torch.testing.assert_close(out, ref(x))
            for (name, b), (_, e) in zip(m.named_buffers(), ref.named_buffers()):
                torch.testing.assert_close(b, e, msg=name)
    assert t.internal_errors == 0 and t.graphs >= 1, str(t)
    assert not any(n.op == "call_module" for e in c._compiled_forward.entries if e.graph is not None
                   for n in e.graph.graph.nodes), "no leaf holds the parametrized module"


def test_a_stock_module_with_a_forward_set_on_it_is_no_leaf(monkeypatch):
    """A forward set on a stock module's instance is user code: kept as a leaf (stock modules
    as leaves, or one whose forward was not traced) it ran on fakes while tracing, and what it
    kept (here, the input appended to a list) was a fake tensor, plus a real one per call.
    Such a module is inlined like a user module: the list gets one real tensor per call."""
    monkeypatch.setattr(tracer.config, "inline_stock_modules", False)
    seen = []
    lin = nn.Linear(4, 4)

    def forward(x):
        seen.append(x)
        return nn.Linear.forward(lin, x)

    lin.forward = forward
    model = nn.Sequential(lin, nn.Tanh())
    c = tracer.compile(model)
    x = torch.randn(2, 4)
    with traced() as t:
        torch.testing.assert_close(c(x), torch.tanh(F.linear(x, lin.weight, lin.bias)))
    assert t.graphs == 1 and t.graph_breaks == 0 and t.fallbacks == 0, str(t)
    assert len(seen) == 1 and type(seen[0]) is torch.Tensor and seen[0] is x, seen


# ---- every module_db sample, called from a user module (so that it is inlined) --------------
def _db():
    from capture_zoo import _db_cases
    return _db_cases()


DB = _db()


@pytest.mark.parametrize("case", DB, ids=[c.name for c in DB])
def test_every_module_db_sample_inlined_equals_eager(case):
    from capture_zoo import Caller, _call, same
    m, args, kwargs = case.make()
    ref = _call(m, args, kwargs)
    c = tracer.compile(Caller(copy.deepcopy(m)))
    with traced() as first:
        out = _call(c, args, kwargs)
    assert same(ref, out), f"{case.name}: compiled differs from eager"
    assert first.fallbacks == 0 and first.internal_errors == 0, str(first)
    assert first.graphs >= 1 or first.graph_breaks, str(first)  # the caller's frame was traced
    with traced() as warm:
        again = _call(c, args, kwargs)
    assert same(ref, again), f"{case.name}: warm call differs from eager"
    assert warm.frames_traced == 0 and warm.recompiles == 0, str(warm)
