"""Graph nodes carry the metadata torch.compile's graphs carry (issue 14), so torch's own
tools read our graphs as they read Dynamo's."""
import pytest
import torch
import torch._dynamo
import torch.nn as nn

import tracer
from tests.test_models import CNN, GPTBlock


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    tracer.reset()
    torch._dynamo.reset()


def graphs_of(model, x):
    """(our graph, Dynamo's graph) of one forward, each captured whole."""
    ours = tracer.compile(model, fullgraph=True)
    ours(x)
    entry, = ours._compiled_forward.entries
    theirs = []

    def keep(gm, example_inputs):
        theirs.append(gm)
        return gm.forward
    torch.compile(model, backend=keep, fullgraph=True)(x)
    return entry.graph, theirs[0]


CALLS = ("call_function", "call_method", "call_module")


@pytest.mark.parametrize("make, shape", [(lambda: GPTBlock(), (2, 8, 16)), (CNN, (2, 3, 8, 8))],
                         ids=["gpt_block", "cnn"])
def test_call_nodes_have_dynamos_keys(make, shape):
    model = make().eval()
    ours, theirs = graphs_of(model, torch.randn(*shape))
    want = set()
    for n in theirs.graph.nodes:
        if n.op in CALLS:
            want |= set(n.meta) & {"example_value", "stack_trace", "source_fn_stack", "nn_module_stack"}
    assert {"example_value", "stack_trace", "source_fn_stack", "nn_module_stack"} <= want
    calls = [n for n in ours.graph.nodes if n.op in CALLS]
    assert len(calls) >= 5
    for n in calls:
        missing = (want - {"nn_module_stack"}) - set(n.meta)
        assert not missing, (n.name, missing)
        assert isinstance(n.meta["val"], (torch.Tensor, tuple)), n.name
        assert n.meta["stack_trace"].startswith('  File "'), n.meta["stack_trace"]
        name, fn = n.meta["source_fn_stack"][-1]
        assert name == n.name and fn is not None
    inside = [n for n in calls if "nn_module_stack" in n.meta]
    assert inside, "nodes made inside submodules say which"
    for n in inside:
        for path, cls in n.meta["nn_module_stack"].values():
            assert isinstance(path, str) and isinstance(cls, type) and issubclass(cls, nn.Module)


def test_stack_trace_names_inlined_frames_innermost_last():
    def helper(y):
        return y.cos() * 2  # the node's own line

    def f(x):
        return helper(x + 1)

    c = tracer.compile(f, fullgraph=True)
    c(torch.ones(3))
    g = c.entries[0].graph
    mul, = [n for n in g.graph.nodes if n.op == "call_function" and n.target.__name__ == "mul"]
    lines = mul.meta["stack_trace"].splitlines()
    assert "in f" in lines[0] and "return helper(x + 1)" in lines[1]
    assert "in helper" in lines[2] and "the node's own line" in lines[3]


@pytest.mark.parametrize("leaves", [True, False], ids=["leaf", "inlined"])
def test_leaf_module_path_and_type(leaves, monkeypatch):
    monkeypatch.setattr(tracer.config, "inline_stock_modules", not leaves)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

        def forward(self, x):
            return self.body(x)

    ours, _ = graphs_of(Outer(), torch.randn(2, 4))
    if not leaves:  # F.linear inside Linear.forward, as torch.compile records it
        lin, = [n for n in ours.graph.nodes if n.op == "call_function" and "linear" in n.name]
        stack = list(lin.meta["nn_module_stack"].values())
        assert [p.rsplit(".", 2)[-2:] for p, _ in stack][-1] == ["body", "0"]
        assert [c for _, c in stack] == [nn.Sequential, nn.Linear]
        return
    lin, = [n for n in ours.graph.nodes if n.op == "call_module" and "0" in n.name]
    stack = list(lin.meta["nn_module_stack"].values())
    assert [p.rsplit(".", 2)[-2:] for p, _ in stack][-1] == ["body", "0"]
    assert [c for _, c in stack] == [nn.Sequential, nn.Linear]
    assert lin.meta["source_fn_stack"] == [(lin.name, nn.Linear)]


def test_tensor_meta_matches_the_value():
    ours, _ = graphs_of(GPTBlock().eval(), torch.randn(2, 8, 16))
    for n in ours.graph.nodes:
        if isinstance(n.meta.get("val"), torch.Tensor):
            tm = n.meta["tensor_meta"]
            assert tuple(tm.shape) == tuple(n.meta["val"].shape) and tm.dtype == n.meta["val"].dtype


# ---- the zoo's models ---------------------------------------------------------------------------
def _zoo():
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "zoo"))
    import hf_specs
    return hf_specs.hf_specs()


_ZOO = _zoo()
_ZOO_FAST = ["llama", "bert", "t5", "wav2vec2", "vit"]  # one per family; ZOO=full: all


@pytest.mark.parametrize("name", sorted(_ZOO) or ["(transformers missing)"])
def test_zoo_graphs_carry_dynamos_metadata(name):
    """Every call node of each zoo model's graph has val/example_value, stack_trace and
    source_fn_stack; nodes made inside submodules have nn_module_stack with real module
    classes; tensor_meta matches val. As in Dynamo's graph of the same model."""
    import os
    if not _ZOO:
        pytest.skip("transformers is not installed")
    if os.environ.get("ZOO", "") != "full" and name not in _ZOO_FAST:
        pytest.skip("full zoo: ZOO=full")
    family, build, inputs = _ZOO[name]
    model = build().eval()
    kw = inputs(torch.Generator().manual_seed(0))
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    with torch.no_grad():
        out = tracer.compile(model, backend=keep)(**kw)
        ref = model(**kw)
    first = out[0] if isinstance(out, tuple) else next(iter(out.values()))
    expected = ref[0] if isinstance(ref, tuple) else next(iter(ref.values()))
    torch.testing.assert_close(first, expected)
    s = tracer.stats()
    assert len(graphs) == 1 and s.graph_breaks == 0 and s.fallbacks == 0, str(s)
    calls = [n for n in graphs[0].graph.nodes if n.op in CALLS]
    assert len(calls) >= 10
    inside = 0
    for n in calls:
        assert {"val", "example_value", "stack_trace", "source_fn_stack"} <= set(n.meta), (n.name, set(n.meta))
        assert n.meta["stack_trace"].startswith('  File "'), n.name
        val = n.meta["val"]
        if isinstance(val, torch.Tensor):
            tm = n.meta.get("tensor_meta")
            assert tm is not None and tuple(tm.shape) == tuple(val.shape) and tm.dtype == val.dtype, n.name
        if "nn_module_stack" in n.meta:
            inside += 1
            for path, cls in n.meta["nn_module_stack"].values():
                assert isinstance(path, str) and isinstance(cls, type) and issubclass(cls, nn.Module)
    assert inside >= len(calls) // 2, "most nodes of a model are made inside its submodules"
