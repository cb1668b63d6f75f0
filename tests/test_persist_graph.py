"""tracer/persist/graph_io.py: graphs captured from real code, written to a description,
marshalled, read back: the same code, the same outputs, compiled lazily by a backend; and the
graphs it refuses, with their reasons."""
import marshal
import operator

import pytest
import torch

import tracer
from tracer.graph.backends import resolve
from tracer.graph.leaf_call import LeafCall
from tracer.graph.output_graph import ByObject, OutputGraph
from tracer.persist import graph_io, portable
from tracer.persist.portable import Unportable
from tracer.runtime import cache, config


class Recorder:
    """A backend that runs the graph as is and keeps each graph with its first real call's
    arguments (the graph's inputs include module tensors: the frame's caller never sees them)."""

    def __init__(self):
        self.calls = []

    def __call__(self, gm, example_inputs):
        seen = []
        self.calls.append((gm, seen))

        def run(*args):
            if not seen:
                seen.append(args)
            return gm.forward(*args)
        return run


def captured(fn, *calls, **options):
    """[(graph, its first call's arguments)] of the graphs `fn` was traced into, each checked
    to be a cache entry's graph."""
    tracer.reset()
    rec = Recorder()
    compiled = tracer.compile(fn, backend=rec, **options)
    for args in calls:
        compiled(*args)
    in_cache = [e.graph for _code, c in cache._CACHES.items() for e in c.entries if e.graph is not None]
    out = [(gm, seen[0]) for gm, seen in rec.calls if seen]
    assert out and all(any(gm is g for g in in_cache) for gm, _ in out)
    return out


def round_trip(gm):
    writer = portable.Writer()
    desc = graph_io.write_graph(writer, gm)
    desc = marshal.loads(marshal.dumps(desc))
    back = graph_io.read_graph(portable.Reader(), desc)
    assert type(back).__name__ == "TracedGraph"
    assert back.code == gm.code
    assert [(n.op, n.name) for n in back.graph.nodes] == [(n.op, n.name) for n in gm.graph.nodes]
    back.graph.lint()
    return desc, back


def _plain(out):
    return torch.utils._pytree.tree_map(lambda v: v.detach() if isinstance(v, torch.Tensor) else v, out)


def check_graph(gm, args, backends=("eager", "aot_eager")):
    desc, back = round_trip(gm)
    torch.manual_seed(0)
    expected = _plain(gm(*args))
    torch.manual_seed(0)
    torch.testing.assert_close(_plain(back(*args)), expected)
    for name in backends:
        lazy = graph_io.LazyCompiled(back, resolve(name))
        assert lazy.compiled is None
        for _ in range(2):  # the first call compiles, the second reuses it
            torch.manual_seed(0)
            torch.testing.assert_close(_plain(lazy(*args)), expected)
        assert lazy.compiled is not None
    return desc, back


def test_mlp():
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    [(gm, args)] = captured(mlp, (torch.randn(3, 8),))
    desc, back = check_graph(gm, args)
    assert not graph_io.is_symbolic(desc)
    assert any(n.target is torch._C._nn.linear or n.target is torch.nn.functional.linear
               for n in back.graph.nodes)
    # the meta the tracer reads later comes back; fake tensors do not
    fresh = graph_io.read_graph(portable.Reader(), marshal.loads(marshal.dumps(desc)))
    for a, b in zip(gm.graph.nodes, fresh.graph.nodes):
        assert b.meta.get("source") == a.meta.get("source")
        assert b.meta.get("stack_trace") == a.meta.get("stack_trace")
        assert "example_value" not in b.meta
    # a compiling backend's first call gave each node a fake example value (AOTAutograd's cache
    # key needs them), of the shapes the traced graph had
    for a, b in zip(gm.graph.nodes, back.graph.nodes):
        if isinstance(a.meta.get("example_value"), torch.Tensor):
            assert tuple(b.meta["example_value"].shape) == tuple(a.meta["example_value"].shape)
    assert any("source" in n.meta for n in back.graph.nodes if n.op == "placeholder")


def test_transformer_encoder_layer():
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True).eval()
    with torch.no_grad():
        graphs = captured(layer, (torch.randn(2, 5, 16),))
    for gm, args in graphs:
        with torch.no_grad():
            check_graph(gm, args)


def test_tiny_gpt2():
    tf = pytest.importorskip("transformers")
    cfg = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64)
    model = tf.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        graphs = captured(lambda i: model(i, use_cache=False).logits, (ids,))
        assert sum(len(gm.graph.nodes) for gm, _ in graphs) > 50
        for gm, args in graphs:
            check_graph(gm, args, backends=("eager",))
        gm, args = max(graphs, key=lambda g: len(g[0].graph.nodes))
        check_graph(gm, args, backends=("aot_eager",))


def test_slicing_ellipsis_dtype_device_args():
    def f(x):
        y = x[..., 1:3].to(device="cpu", dtype=torch.float64)
        z = x[None, :, ::2].sum(dim=-1, keepdim=True, dtype=torch.float32)
        return y * 2, z.contiguous(memory_format=torch.contiguous_format), x.new_zeros(x.shape[0], 2)
    [(gm, args)] = captured(f, (torch.randn(3, 5),))
    check_graph(gm, args)
    values = [a for n in gm.graph.nodes for a in (*n.args, *n.kwargs.values())]
    flat = [v for a in values for v in (a if isinstance(a, tuple) else (a,))]
    assert Ellipsis in flat and torch.float64 in values and any(isinstance(v, slice) for v in flat)


def _graph_with_constant(value):
    """A graph as the tracer builds one around a tensor reached without a source (a module
    the frame made): the tensor is held by the root and read by a get_attr node."""
    og = OutputGraph()
    x = og.graph.placeholder("x")
    c = og.get_attr(value, "self.scale")
    return og.build_module([og.graph.call_function(operator.mul, (x, c))])


def test_tensor_constant():
    gm = _graph_with_constant(torch.tensor([1.0, 2.0, 3.0]))
    [const] = [n for n in gm.graph.nodes if n.op == "get_attr"]
    _desc, back = check_graph(gm, (torch.randn(2, 3),))
    original, rebuilt = getattr(gm, const.target), getattr(back, const.target)
    assert type(rebuilt) is torch.Tensor and rebuilt is not original
    torch.testing.assert_close(rebuilt, original)
    assert dict(back.named_buffers()).keys() == dict(gm.named_buffers()).keys() == {const.target}
    assert back.state_dict().keys() == gm.state_dict().keys()


@pytest.mark.parametrize("value, reason", [
    (torch.nn.Parameter(torch.ones(3), requires_grad=False), "is a Parameter, not a plain tensor constant"),
    (torch.ones(3, requires_grad=True), "is a Tensor requiring grad"),
])
def test_other_constants_are_refused(value, reason):
    with pytest.raises(Unportable, match=reason):
        graph_io.write_graph(portable.Writer(), _graph_with_constant(value))


def test_dynamic_shapes():
    def f(x, n):
        return x.reshape(-1) * x.shape[0] + n
    graphs = captured(f, (torch.randn(4, 3), 2), (torch.randn(6, 3), 3))
    symbolic = []
    for gm, args in graphs:
        desc, back = check_graph(gm, args)
        symbolic.append(graph_io.is_symbolic(desc))
    assert symbolic == [False, True]
    gm, _ = graphs[1]
    _desc, back = round_trip(gm)
    lazy = graph_io.LazyCompiled(back, resolve("eager"))
    args = [torch.randn(8, 3) if isinstance(n.meta["example_value"], torch.Tensor) else 8
            for n in gm.graph.nodes if n.op == "placeholder"]
    torch.testing.assert_close(lazy(*args), gm(*args))


def test_stock_leaves_kept_whole(monkeypatch):
    monkeypatch.setattr(config, "inline_stock_modules", False)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.LayerNorm(4))
    [(gm, args)] = captured(model, (torch.randn(2, 4),))
    assert any(n.op == "call_module" for n in gm.graph.nodes)
    _desc, back = check_graph(gm, args)
    for n in gm.graph.nodes:
        if n.op == "call_module":
            a, b = gm.get_submodule(n.target), back.get_submodule(n.target)
            assert type(a) is type(b)
            if type(a) is LeafCall:
                a, b = a.leaf, b.leaf
                assert b._parameters == dict.fromkeys(a._parameters) and b._parameters
            assert type(b) is type(a) and b.extra_repr() == a.extra_repr() and b.training == a.training


def test_lstm_leaf_is_refused(monkeypatch):
    monkeypatch.setattr(config, "inline_stock_modules", False)
    [(gm, _args)] = captured(torch.nn.Sequential(torch.nn.LSTM(4, 4)), (torch.randn(3, 2, 4),))
    with pytest.raises(Unportable, match=r"a stock module kept whole \(.*LSTM\): attribute _flat_weight_refs"):
        graph_io.write_graph(portable.Writer(), gm)


def test_other_version_is_stale():
    [(gm, _args)] = captured(lambda x: x + 1, (torch.randn(2),))
    desc = graph_io.write_graph(portable.Writer(), gm)
    with pytest.raises(portable.Stale):
        graph_io.read_graph(portable.Reader(), ("fx", graph_io.VERSION + 1, *desc[2:]))


def test_lazy_compiled_compiles_once_with_the_real_arguments():
    [(gm, args)] = captured(lambda x: x.sin() * 2, (torch.randn(3),))
    seen = []

    def backend(g, example_inputs):
        seen.append(list(example_inputs))
        return g.forward
    lazy = graph_io.LazyCompiled(graph_io.read_graph(portable.Reader(), graph_io.write_graph(portable.Writer(), gm)),
                                 backend)
    x = torch.randn(3)
    torch.testing.assert_close(lazy(x), (x.sin() * 2,))
    lazy(torch.randn(3))
    assert len(seen) == 1 and seen[0][0] is x


def test_target_held_by_object():
    """A call_function target FX cannot name (output_graph.ByObject) is written as the
    function it holds."""
    og = OutputGraph()
    x = og.graph.placeholder("x")
    gm = og.build_module([og.graph.call_function(ByObject(torch.nn.functional.relu), (x,))])
    _desc, back = check_graph(gm, (torch.randn(4),))
    [node] = [n for n in back.graph.nodes if n.op == "call_function"]
    assert type(node.target) is ByObject and node.target.fn is torch.nn.functional.relu
