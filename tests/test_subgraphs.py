"""Repeated blocks reach inductor as one subgraph (tracer/graph/subgraphs.py).

The trace tags each replayed block call's nodes; `outline` turns the calls of one block kind
into invoke_subgraph calls of one shared subgraph, for inductor only. Checked here: the
outlined graph computes what the unrolled one does (run eagerly, node by node), the calls
share one subgraph module, what must stay inline stays inline (random draws, in-place writes,
a call whose shape differs), and end to end with inductor on the CPU, eval and train: outputs
and gradients equal to eager's, captured, warm calls compile nothing, the same with the
outlining turned off.
"""
import copy

import pytest
import torch
from torch import nn

import tracer
from helpers import assert_captured, traced
from tracer.graph import subgraphs
from tracer.runtime import config

pytestmark = pytest.mark.usefixtures("fresh_tracer")

INVOKE = torch.ops.higher_order.invoke_subgraph


class Block(nn.Module):
    def __init__(self, d=16, p=0.0):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.LayerNorm(d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        return self.norm(x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(x)))))


class Stack(nn.Module):
    def __init__(self, n=4, p=0.0):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.layers = nn.ModuleList(Block(p=p) for _ in range(n))

    def forward(self, x):
        x = self.inp(x)
        for layer in self.layers:
            x = layer(x)
        return x.sum(-1)


def _graph(model, *args):
    graphs = []

    def keep(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    with traced() as t:
        tracer.compile(model, backend=keep)(*args)
    assert_captured(t, min_ops=5)
    [(gm, inputs)] = graphs
    return gm, inputs


def _invokes(gm):
    return [n for n in gm.graph.nodes if n.target is INVOKE]


def test_the_calls_of_a_block_become_calls_of_one_shared_subgraph():
    """Four layers (the first recorded, three replayed): four invoke_subgraph calls naming one
    submodule and one identifier; the outlined graph computes what the unrolled one does."""
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        gm, inputs = _graph(model, x)
        new = subgraphs.outline(gm)
        calls = _invokes(new)
        assert len(calls) == 4, new.graph
        assert len({c.args[0].target for c in calls}) == 1 and len({c.args[1] for c in calls}) == 1
        assert not _invokes(gm), "the entry's own graph (what users see) stays unrolled"
        torch.testing.assert_close(new(*inputs), gm(*inputs))
        torch.testing.assert_close(new(*inputs)[0], model(x))


def test_a_graph_loaded_from_the_disk_cache_is_outlined_the_same():
    """The block tags survive the disk cache (persist/graph_io.py): a second process outlines
    its loaded graph into the same code, so inductor's own caches hit on a warm start."""
    from tracer.persist import graph_io, portable
    torch.manual_seed(0)
    with torch.no_grad():
        gm, inputs = _graph(Stack().eval(), torch.randn(3, 8))
    back = graph_io.read_graph(portable.Reader(), graph_io.write_graph(portable.Writer(), gm))
    assert len(_invokes(subgraphs.outline(back))) == 4
    assert subgraphs.outline(back).code == subgraphs.outline(gm).code


def test_random_blocks_stay_inline_and_eval_dropout_does_not_count():
    """A dropout that draws (train mode) keeps its block inline: each inlined call draws its
    own numbers. The same dropout in eval draws nothing, and the block is outlined."""
    torch.manual_seed(0)
    model = Stack(p=0.5)
    x = torch.randn(3, 8)
    gm, _ = _graph(model.train(), x)
    assert not _invokes(subgraphs.outline(gm))
    tracer.reset()
    with torch.no_grad():
        gm, _ = _graph(model.eval(), x)
    assert len(_invokes(subgraphs.outline(gm))) == 4


def test_a_call_of_another_shape_is_left_out_of_the_subgraph():
    """A call whose graph differs from its kind's others (here: one of its results removed) is
    not outlined with them; the others still are."""
    torch.manual_seed(0)
    with torch.no_grad():
        gm, inputs = _graph(Stack().eval(), torch.randn(3, 8))
    want = gm(*inputs)
    calls = {}
    for n in gm.graph.nodes:
        if subgraphs.BLOCK_META in n.meta:
            calls.setdefault(n.meta[subgraphs.BLOCK_META], []).append(n)
    kinds = {}
    for (kind, i), nodes in calls.items():
        kinds.setdefault(kind, []).append((i, nodes))
    [layers] = [sorted(c) for c in kinds.values() if len(c) == 4 and len(c[0][1]) >= subgraphs.MIN_NODES]
    last = layers[-1][1]
    gelu = next(n for n in last if "gelu" in str(n.target))
    with gm.graph.inserting_after(gelu):  # the last call reads its gelu twice: another graph
        twice = gm.graph.call_function(torch.add, (gelu, gelu))
        twice.meta.update(gelu.meta)
    half = gm.graph.call_function(torch.mul, (twice, 0.5))
    half.meta.update(gelu.meta)
    twice.append(half)
    gelu.replace_all_uses_with(half, delete_user_cb=lambda u: u not in (twice, half))
    gm.recompile()
    new = subgraphs.outline(gm)
    assert len(_invokes(new)) == 3, new.graph
    torch.testing.assert_close(new(*inputs), want)


class _ViewBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x)) + self.fc2(x)
        return h.transpose(0, 1)  # a view: invoke_subgraph's outputs alias nothing


def test_a_block_returning_a_view_stays_inline():
    torch.manual_seed(0)
    model = nn.Sequential(*[_ViewBlock() for _ in range(4)]).eval()
    with torch.no_grad():
        gm, inputs = _graph(model, torch.randn(16, 16))
    tagged = sum(subgraphs.BLOCK_META in n.meta for n in gm.graph.nodes)
    assert tagged >= 8, "the blocks were replayed (tagged)"
    assert not _invokes(subgraphs.outline(gm))


@pytest.mark.parametrize("outlined", [True, False], ids=["subgraphs", "unrolled"])
def test_inductor_eval_and_train_equal_eager(monkeypatch, outlined):
    """End to end through inductor (CPU): eval outputs, then training steps' outputs and
    gradients equal eager's; one trace; warm calls compile nothing."""
    monkeypatch.setattr(config, "inductor_subgraphs", outlined)
    torch.manual_seed(0)
    ref = Stack().train()
    model = copy.deepcopy(ref)
    c = tracer.compile(model, backend="inductor")
    x = torch.randn(3, 8)
    with traced() as t:
        for step in range(3):
            out = c(x)
            out.pow(2).mean().backward()
            want = ref(x)
            want.pow(2).mean().backward()
            torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-4)
            for (name, p), q in zip(model.named_parameters(), ref.parameters()):
                torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)
                p.grad = q.grad = None
    assert t.frames_traced == 1 and t.recompiles == 0 and t.internal_errors == 0, str(t)
    assert_captured(t, min_ops=5)
    with torch.no_grad():
        model.eval(), ref.eval()
        with traced() as t2:
            torch.testing.assert_close(c(x), ref(x), atol=1e-5, rtol=1e-4)
            c(torch.randn(3, 8))
        assert t2.frames_traced == 1, str(t2)  # (eval is another entry: one trace, then a hit)
