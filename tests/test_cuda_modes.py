"""On a GPU: torch.compile's inductor modes through tracer.compile (CUDA graphs included), the
zoo's fast subset with inductor on CUDA, and torch.cuda streams, events and autocast in traced
frames.

Skipped where torch sees no CUDA device (CI has none): run with `python -m pytest -m cuda`
where one is lent. `TRACER_TEST_DEVICE=cpu` runs what does not need CUDA graphs on the CPU (to
debug the tests themselves). Every check compares with eager on the same device and checks
that the work was captured and that warm calls trace nothing; the CUDA-graph checks also read
inductor's counters: no graph skipped, and only the call's own inputs copied on a replay (the
module's parameters and buffers are static inputs).
"""
import copy
import os

import pytest
import torch
from torch import nn

import tracer
from helpers import assert_captured, traced

DEV = os.environ.get("TRACER_TEST_DEVICE", "cuda")
CUDA = DEV == "cuda"
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(CUDA and not torch.cuda.is_available(), reason="no CUDA device"),
              pytest.mark.usefixtures("fresh_tracer")]
needs_cuda_graphs = pytest.mark.skipif(not CUDA, reason="CUDA graphs need a CUDA device")


def _inductor_counters():
    """inductor's counters, looked up when read: torch clears the outer dict (torch._dynamo
    reset), so a Counter held from before a compile can be a dropped one."""
    from torch._dynamo.utils import counters
    return counters["inductor"]


def _clear_inductor_counters():
    from torch._dynamo.utils import counters
    counters["inductor"].clear()


class _MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 16))
        self.register_buffer("scale", torch.full((16,), 0.5))

    def forward(self, x):
        return self.net(x) * self.scale


# ---- mode="reduce-overhead": CUDA graphs ---------------------------------------------------
@needs_cuda_graphs
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graphs_replay_with_parameters_as_static_inputs(mode):
    """The graph is recorded once and replayed: each call equal to eager on fresh inputs, no
    trace after the first, no graph skipped by inductor, and a replay copies only the call's
    own input (the 5 parameters and the buffer are read in place)."""
    torch.manual_seed(0)
    model = _MLP().to(DEV).eval()
    c = tracer.compile(model, backend="inductor", mode=mode)
    _clear_inductor_counters()
    with torch.no_grad():
        with traced() as t:
            outs = []
            for step in range(6):
                x = torch.randn(8, 32, device=DEV)
                outs.append((c(x).clone(), model(x)))
    for got, want in outs:
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    assert t.frames_traced == 1 and t.recompiles == 0, str(t)
    assert_captured(t, min_ops=4)
    counters = _inductor_counters()
    assert counters["cudagraph_skips"] == 0, dict(counters)
    # one recording (the graph's), whose only copied input is x
    assert counters["cudagraph_recorded_non_static_inputs"] == 1, dict(counters)


@needs_cuda_graphs
def test_cuda_graphs_in_training_give_eager_gradients():
    """Forward and backward graphs both replayed as CUDA graphs; gradients equal eager's over
    several steps of an optimizer (parameters change in place between replays)."""
    torch.manual_seed(0)
    ref = _MLP().to(DEV).train()
    model = copy.deepcopy(ref)
    c = tracer.compile(model, backend="inductor", mode="reduce-overhead")
    opt, opt_ref = (torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, ref))
    _clear_inductor_counters()
    with traced() as t:
        for step in range(4):
            x = torch.randn(8, 32, device=DEV)
            for m, o, call in ((model, opt, c), (ref, opt_ref, ref)):
                o.zero_grad()
                call(x).pow(2).mean().backward()
                o.step()
            for p, q in zip(model.parameters(), ref.parameters()):
                torch.testing.assert_close(p, q, atol=1e-4, rtol=1e-4)
    assert t.frames_traced == 1 and t.recompiles == 0, str(t)
    counters = _inductor_counters()
    assert counters["cudagraph_skips"] == 0 and counters["cudagraph_recorded_non_static_inputs"] >= 1, \
        dict(counters)


@needs_cuda_graphs
def test_two_instances_share_the_entry_and_each_replays_its_own_weights():
    """One trace for both instances (modules are graph inputs); the second instance's other
    parameter addresses are recorded again (unguarded static inputs, as torch.compile's), and
    each instance's replay computes with its own weights."""
    torch.manual_seed(0)
    a, b = _MLP().to(DEV).eval(), _MLP().to(DEV).eval()
    ca, cb = (tracer.compile(m, backend="inductor", mode="reduce-overhead") for m in (a, b))
    with torch.no_grad(), traced() as t:
        for _ in range(3):
            x = torch.randn(4, 32, device=DEV)
            torch.testing.assert_close(ca(x).clone(), a(x), atol=1e-3, rtol=1e-3)
            torch.testing.assert_close(cb(x).clone(), b(x), atol=1e-3, rtol=1e-3)
    assert t.frames_traced == 1, str(t)


def _decoder(name):
    pytest.importorskip("transformers")
    from zoo.hf_specs import hf_specs
    _family, build, _inputs = hf_specs()[name]
    torch.manual_seed(0)
    return build().to(DEV).eval()


@needs_cuda_graphs
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_decode_steps_with_a_static_kv_cache_as_cuda_graphs(name):
    """The serving loop torch.compile's "reduce-overhead" is for: prefill eagerly into a
    StaticCache (its tensors marked static by transformers), then one compiled decode step per
    token: the same greedy tokens and logits as eager, one trace for all steps, no graph
    skipped, and only the step's token and position copied per replay."""
    from transformers import StaticCache
    model = _decoder(name)
    prompt = torch.randint(0, model.config.vocab_size, (2, 6), device=DEV)

    def prefill():
        cache = StaticCache(config=model.config, max_cache_len=32)
        pos = torch.arange(prompt.shape[1], device=DEV)
        out = model(input_ids=prompt, past_key_values=cache, cache_position=pos, use_cache=True)
        return cache, out.logits[:, -1:].argmax(-1)

    def step(ids, pos, cache):
        return model(input_ids=ids, past_key_values=cache, cache_position=pos, use_cache=True).logits

    compiled = tracer.compile(step, backend="inductor", mode="reduce-overhead")
    with torch.no_grad():
        cache_e, tok_e = prefill()
        cache_c, tok_c = prefill()
        _clear_inductor_counters()
        with traced() as t:
            for i in range(8):
                pos = torch.tensor([prompt.shape[1] + i], device=DEV)
                want = step(tok_e, pos, cache_e)
                got = compiled(tok_c, pos, cache_c).clone()
                torch.testing.assert_close(got, want, atol=2e-3, rtol=2e-3)
                tok_e, tok_c = want.argmax(-1), got.argmax(-1)
                assert torch.equal(tok_e, tok_c), i
    assert t.frames_traced >= 1 and t.recompiles == 0 and t.fallbacks == 0, str(t)
    assert_captured(t, min_ops=20, breaks=None)
    counters = _inductor_counters()
    assert counters["cudagraph_skips"] == 0 and counters["cudagraph_recorded_non_static_inputs"] >= 1, \
        dict(counters)


# ---- the zoo's fast subset with inductor on CUDA ------------------------------------------
def _zoo_fast():
    from zoo.hf_specs import FAST
    return sorted(FAST)


@pytest.mark.parametrize("name,mode", _zoo_fast(), ids=[f"{n}-{m}" for n, m in _zoo_fast()])
def test_zoo_fast_subset_inductor(name, mode):
    """The HF zoo's fast subset (tests/zoo/test_zoo_hf.py) with inductor on the device, in
    eval and train: outputs and gradients equal to eager within inductor's tolerances, warm
    calls compile nothing, no more graphs than torch.compile makes."""
    from zoo import harness
    from zoo.hf_specs import hf_specs
    _family, build, inputs = hf_specs()[name]
    torch.manual_seed(0)
    train = mode == "train"
    model = build()
    for m in model.modules():  # inductor draws dropout's random numbers its own way
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    counts = harness.check(model, lambda gen: inputs(gen, labels=train), train=train, backend="inductor",
                           device=DEV, atol=2e-3, rtol=2e-3)
    assert counts.fallbacks == 0, str(counts)
    assert counts.graphs <= counts.tc_graphs, str(counts)


# ---- torch.cuda streams, events and autocast in traced frames ------------------------------
def _streams(x, w):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = (x @ w).relu()
    torch.cuda.current_stream().wait_stream(s)
    done = torch.cuda.Event()
    done.record()
    return y + 1


def _amp(x, w):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = x @ w
    with torch.autocast(device_type="cuda", enabled=False):
        z = x.float() @ w
    return y.float() + z


@pytest.mark.skipif(not CUDA, reason="autocast on CUDA needs a CUDA device")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_cuda_autocast_blocks_are_captured(backend):
    """torch.autocast("cuda") blocks, one of them disabling it: equal to eager (dtypes
    included), one graph, no break; warm calls trace nothing."""
    x, w = torch.randn(16, 16, device=DEV), torch.randn(16, 16, device=DEV)
    c = tracer.compile(_amp, backend=backend)
    with traced() as t:
        got = c(x, w)
    want = _amp(x, w)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, atol=3e-2, rtol=3e-2)
    assert_captured(t, min_ops=3, graphs=1)
    with traced() as warm:
        c(x, w)
    assert warm.frames_traced == 0, str(warm)


@pytest.mark.skipif(not CUDA, reason="torch.cuda streams need a CUDA device")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_cuda_streams_and_events_run_as_python_with_their_reasons(backend):
    """A side stream, wait_stream and an event in a traced frame: what the tracer does not
    model (Stream and Event objects have no graph meaning here) breaks the graph with a reason
    naming it, the work runs in order on the right streams (equal to eager), nothing fails
    inside the tracer, and warm calls trace nothing."""
    x, w = torch.randn(16, 16, device=DEV), torch.randn(16, 16, device=DEV)
    c = tracer.compile(_streams, backend=backend)
    with traced() as t:
        got = c(x, w)
    torch.cuda.synchronize()
    torch.testing.assert_close(got, _streams(x, w), atol=1e-4, rtol=1e-4)
    assert t.internal_errors == 0 and t.graph_breaks >= 1, str(t)
    assert all("Stream" in e.reason or "stream" in e.reason for e in t.events if e.kind == "break"), str(t)
    with traced() as warm:
        c(x, w)
        torch.cuda.synchronize()
    assert warm.frames_traced == 0 and warm.recompiles == 0, str(warm)


@pytest.mark.skipif(not CUDA, reason="torch.cuda streams need a CUDA device")
@pytest.mark.xfail(strict=True, reason="issue 37: streams and events are graph breaks (torch.compile models them)")
def test_cuda_streams_and_events_are_captured_whole():
    x, w = torch.randn(16, 16, device=DEV), torch.randn(16, 16, device=DEV)
    with traced() as t:
        tracer.compile(_streams)(x, w)
    assert t.graph_breaks == 0 and t.fallbacks == 0, str(t)
