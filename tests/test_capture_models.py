"""capture() on real models (issue 15): `with tracer.capture(): model(batch)` traces the frame
`tracer.compile(model)` traces (the model's `forward`, stock torch.nn modules included) and
captures the same ops; warm calls trace nothing and recompile nothing; torch's internals
(the module call machinery, functional wrappers, whatever runs inside a compiled graph) are
skipped, and the skip is cached on their code objects.

The zoo (tests/capture_zoo.py): one sample of every entry of torch's `module_db` (several for
the Transformer family and MultiheadAttention), user models, tiny HuggingFace models.
Per-call cost is measured in benchmarks/capture_models.py, not here.
"""
import pytest
import torch
import torch.nn as nn

import capture_helpers
import tracer
from capture_zoo import run_case, same, zoo
from tracer.capture import DEFAULT_SKIP_PREFIXES
from tracer.runtime.policy import SKIP, SKIP_ONCE, TRACE, frame_rule
from tracer.runtime.frame_hook import is_rule_skipped, is_skipped

CASES = zoo()


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    yield
    tracer.reset()


def test_the_zoo_has_the_models_the_issue_names():
    names = {c.name.split("[")[0] for c in CASES}
    assert {"nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer", "nn.Transformer",
            "nn.MultiheadAttention", "nn.Embedding", "nn.Conv2d", "nn.LayerNorm",
            "nn.CrossEntropyLoss", "user.TinyGPT"} <= names
    assert len(CASES) > 100


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_capture_matches_compile_on_real_model(case):
    r = run_case(case)
    assert same(r.eager, r.compiled), "compile() differs from eager"
    assert same(r.eager, r.captured), "capture() differs from eager"
    c, k, w = r.compile_stats, r.capture_stats, r.warm_stats
    # the same frames captured the same way as compile()
    assert (k.ops, k.graphs, k.graph_breaks, k.fallbacks) == (c.ops, c.graphs, c.graph_breaks, c.fallbacks)
    assert k.frames_traced == c.frames_traced
    # warm: nothing traced, nothing recompiled, served from the cache
    assert (w.frames_traced, w.recompiles) == (k.frames_traced, k.recompiles)
    assert w.cache_hits > k.cache_hits
    if case.name.startswith(("nn.Transformer", "nn.MultiheadAttention", "user.", "hf.")):
        assert k.ops > 0 and k.graph_breaks == 0, str(k)


def test_stock_module_forward_is_traced_and_call_machinery_is_skipped():
    m, x = nn.Linear(4, 3), torch.randn(2, 4)
    with tracer.capture():
        out = m(x)
    assert torch.allclose(out, m(x))
    s = tracer.stats()
    assert s.frames_traced == 1 and s.ops == 1 and [e.frame for e in s.of("frame")] == ["Linear.forward"]
    # the skip decisions are cached on the code objects: later calls cost no callback
    assert is_rule_skipped(nn.Module._call_impl.__code__)
    assert is_rule_skipped(nn.Module._wrapped_call_impl.__code__)
    assert not is_rule_skipped(nn.Linear.forward.__code__)
    # ...and the cache is not what tracer.disable / skip_code mark (inlining still works)
    assert not is_skipped(nn.Module._call_impl.__code__)


def test_frame_rule():
    lin = nn.Linear(2, 2)
    assert frame_rule(nn.Linear.forward.__code__, (lin, torch.ones(2))) is TRACE
    assert frame_rule(nn.Linear.forward.__code__, (object(),)) is SKIP_ONCE
    assert frame_rule(nn.Module._call_impl.__code__, (lin,)) is SKIP
    assert frame_rule(torch.nn.functional.gelu.__code__ if hasattr(torch.nn.functional.gelu, "__code__")
                      else torch.nn.functional.dropout.__code__, ()) is SKIP
    assert frame_rule(torch.fx.GraphModule.__call__.__code__, ()) is SKIP
    assert frame_rule(capture_helpers.scale_shift.__code__, ()) is TRACE
    code = compile("def f(x):\n    return x\n", "<generated>", "exec").co_consts[0]
    assert frame_rule(code, ()) is SKIP
    # a resume function is traced wherever it lives: the frame it continues was traced (a
    # torch function the user compiled, a stock module's forward); a loop that breaks in
    # every iteration nests at most graph_break.LOOP_RESUME_LIMIT of them (test_graph_breaks)
    fwd = nn.Linear.forward.__code__
    assert frame_rule(fwd.replace(co_qualname="Linear.forward.<resume@3>"), (torch.ones(2),)) is TRACE
    assert frame_rule(code.replace(co_qualname="f.<resume@3>", co_filename=torch.__file__), ()) is TRACE
    assert frame_rule(code.replace(co_qualname="f.<resume@3>", co_filename=__file__), ()) is TRACE


def test_hooks_run_as_in_eager_and_forward_is_still_captured():
    calls, graphs = [], []
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    m.register_forward_pre_hook(lambda mod, args: calls.append("pre"))
    m[0].register_forward_hook(lambda mod, args, out: calls.append("post0"))
    x = torch.randn(2, 4)
    ref = m(x)
    calls.clear()
    with tracer.capture(backend=lambda gm, example_inputs: graphs.append(gm) or gm.forward):
        out1 = m(x)
        out2 = m(x)
    assert torch.allclose(out1, ref) and torch.allclose(out2, ref)
    # the outer pre-hook runs natively in _call_impl (traced as a frame of its own) and forward
    # is traced; the hooked Linear is inlined into it, its forward hook run in the trace as
    # _call_impl runs it (nn_module.py: hooks guarded exactly), so nothing breaks
    assert calls == ["pre", "post0", "pre", "post0"]
    s = tracer.stats()
    frames = {e.frame for e in s.of("frame")}
    assert "Sequential.forward" in frames and "Linear.forward" not in frames
    assert s.graph_breaks == 0 and s.fallbacks == 0, str(s)
    assert graphs and all([n.target for n in g.graph.nodes if n.op == "call_function"][:1] == [torch._C._nn.linear]
                          and [n.op for n in g.graph.nodes].count("call_module") == 0 for g in graphs)  # ReLU inlined too
    # the hooks (user lambdas appending to a list) are traced, and recompile their frames (the
    # pre-hook's, and forward's where the post-hook is inlined) as the list grows
    assert {e.frame for e in s.of("recompile")} <= {"Sequential.forward"} | {f for f in frames if "<lambda>" in f}


def test_frames_inside_the_compiled_graph_are_not_traced():
    """A leaf module in the graph runs its real forward inside the graph call: that frame is
    the graph's business (frame_hook.untraced), even though Linear.forward is traced when it
    is the frame the user starts."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.LayerNorm(4)

        def forward(self, x):
            return self.b(self.a(x)).relu()

    m, x = Net(), torch.randn(3, 4)
    with tracer.capture():
        for _ in range(3):
            out = m(x)
    assert torch.allclose(out, m(x))
    s = tracer.stats()
    assert [e.frame for e in s.of("frame")] == ["test_frames_inside_the_compiled_graph_are_not_traced.<locals>.Net.forward"]
    assert s.ops == 3 and s.cache_hits == 2


def test_other_skip_prefixes_are_honoured_and_not_cached():
    import os
    helpers_dir = os.path.dirname(capture_helpers.__file__) + os.sep
    with tracer.capture(skip_prefixes=DEFAULT_SKIP_PREFIXES + (helpers_dir,)):
        capture_helpers.scale_shift(torch.ones(3))
    assert tracer.stats().frames_traced == 0
    assert not is_rule_skipped(capture_helpers.scale_shift.__code__)
    with tracer.capture():
        out = capture_helpers.scale_shift(torch.ones(3))
    assert torch.allclose(out, torch.tanh(torch.ones(3)) * 2 + 1) and tracer.stats().frames_traced == 1


def test_compile_of_stock_module_resumes_are_traced_after_a_break():
    """A stock module's forward that breaks: its resume function lives in torch/nn, and is
    traced (by compile()'s callback and by capture()'s) instead of running as Python."""
    class Printing(nn.Linear):
        def forward(self, x):
            y = super().forward(x)
            print("", end="")  # a graph break
            return y.relu() * 2

    torch.manual_seed(0)
    m, x = Printing(4, 4), torch.randn(2, 4)
    Printing.forward.__code__ = Printing.forward.__code__.replace(co_filename=nn.Linear.forward.__code__.co_filename)
    ref = m(x)
    with tracer.capture():
        out = m(x)
        out2 = m(x)
    assert torch.allclose(out, ref) and torch.allclose(out2, ref)
    s = tracer.stats()
    assert s.graph_breaks == 1 and s.ops == 3 and s.graphs == 2  # linear | relu, mul
