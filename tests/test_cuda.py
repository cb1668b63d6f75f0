"""On a GPU: the differential checks of the CPU suite, with CUDA tensors and torch's inductor
generating the kernels (Triton), beside the eager backend.

Skipped where torch sees no CUDA device (CI has none); run where one is lent
(`python -m pytest tests/test_cuda.py`). Each check compares with eager on the same device,
says what was captured, calls again with the same and with fresh same-shape inputs and
asserts that those warm calls trace nothing, and for the real models counts graphs beside
torch.compile's on the same call.
"""
import copy
import os

import pytest
import torch
from torch import nn

import tracer
from helpers import assert_captured, traced

# TRACER_TEST_DEVICE=cpu runs the same checks on the CPU (to debug the tests themselves)
DEV = os.environ.get("TRACER_TEST_DEVICE", "cuda")
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(DEV == "cuda" and not torch.cuda.is_available(), reason="no CUDA device"),
              pytest.mark.usefixtures("fresh_tracer")]

BACKENDS = ["eager", "inductor"]


def _fresh_like(args):
    return [torch.randn_like(a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]


def _differential(fn, args, backend, *, atol=1e-4, rtol=1e-4, breaks=0, min_ops=1, kwargs=None):
    """compiled == eager on `args`, captured, and warm calls (same, then fresh inputs) trace
    nothing. Returns what the first call traced."""
    kwargs = kwargs or {}
    c = tracer.compile(fn, backend=backend)
    with traced() as t:
        got = c(*args, **kwargs)
    torch.testing.assert_close(got, fn(*args, **kwargs), atol=atol, rtol=rtol)
    assert_captured(t, min_ops=min_ops, breaks=breaks)
    fresh = _fresh_like(args)
    with traced() as warm:
        c(*args, **kwargs)
        got2 = c(*fresh, **kwargs)
    torch.testing.assert_close(got2, fn(*fresh, **kwargs), atol=atol, rtol=rtol)
    assert warm.frames_traced == 0 and warm.recompiles == 0 and warm.cache_hits >= 2, str(warm)
    return t


def _tc_graphs(fn, args, kwargs=None):
    """torch.compile's graph count and breaks on one call (dynamo only: a counting backend)."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounter()
    torch.compile(fn, backend=cnt)(*args, **(kwargs or {}))
    breaks = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    return cnt.frame_count, breaks


# ---- functions ---------------------------------------------------------------------------
def _pointwise(x, y):
    return torch.sigmoid(x) * y + (x - y).abs().sqrt()


def _reduce_matmul(x, y):
    h = x @ y.T
    return h.softmax(-1).sum(0), h.amax(dim=1)


def _control_flow(x, y):
    out = x
    for i in range(3):
        out = out * y if i % 2 else out + y
    if x.shape[0] > 4:
        out = out.relu()
    return out.mean(1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_pointwise, _reduce_matmul, _control_flow])
def test_functions(fn, backend):
    x, y = torch.randn(8, 16, device=DEV), torch.randn(8, 16, device=DEV)
    _differential(fn, (x, y), backend, min_ops=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_break_keeps_both_sides_on_the_gpu(backend):
    def f(x):
        y = x.cos() + 1
        print("", end="")  # a break
        return (y * 2).sum(0)

    t = _differential(f, (torch.randn(6, 5, device=DEV),), backend, breaks=1, min_ops=2)
    assert t.graphs == 2


def test_moving_an_input_between_devices_recompiles_and_both_entries_stay():
    def f(x):
        return (x * 3).sin()

    if DEV == "cpu":
        pytest.skip("needs a second device")
    c = tracer.compile(f)
    xc, xg = torch.randn(4), torch.randn(4, device=DEV)
    with traced() as t:
        a = c(xc)
        b = c(xg)
    assert a.device.type == "cpu" and b.device.type == "cuda"
    torch.testing.assert_close(a, f(xc))
    torch.testing.assert_close(b, f(xg))
    assert t.recompiles == 1 and "device" in str(t.of("recompile")[0]), str(t)
    with traced() as warm:
        c(xc)
        c(xg)
    assert warm.frames_traced == 0 and warm.cache_hits == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_in_place_on_an_input_then_a_raising_op_reruns_once(backend):
    """tracer/rewrite/rerun.py on the GPU: the graph writes its input through a working copy, raises
    (relu of a bool tensor: checked at dispatch, also on CUDA), and the frame reruns as
    Python: the write before it happens, the input changes once. (Inductor's kernel for it
    does not raise, in torch.compile too: no backend runs it there.)"""
    def g(x, lst):
        x.add_(1)
        lst.append(1)
        return (x > 0).relu()

    c = tracer.compile(g, backend=backend)
    for _ in range(2):
        xe, xc, le, lc = torch.zeros(3, device=DEV), torch.zeros(3, device=DEV), [], []
        with pytest.raises(RuntimeError) as ee:
            g(xe, le)
        with traced() as t, pytest.raises(RuntimeError) as ec:
            c(xc, lc)
        assert str(ee.value) == str(ec.value) and le == lc == [1]
        assert torch.equal(xe, xc) and xc.tolist() == [1.0, 1.0, 1.0]
        assert t.reruns == 1 and t.internal_errors == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_graph_drawing_random_numbers_and_writing_running_stats_reruns_once(backend):
    """The CUDA RNG state and a leaf BatchNorm's running stats are put back before the rerun:
    after the call the next draw and the stats are eager's."""
    pool = [nn.BatchNorm1d(3).to(DEV), nn.BatchNorm1d(3).to(DEV)]

    def r(x, bn, lst):
        noise = torch.rand(4, 3, device=DEV) + torch.nn.functional.dropout(bn(x), 0.5, training=True)
        lst.append(1)
        return (noise > 0).relu()

    c = tracer.compile(r, backend=backend)
    with traced() as t:
        for _ in range(2):
            runs = []
            for fn, bn in ((r, pool[0]), (c, pool[1])):
                torch.manual_seed(7)
                lst = []
                with pytest.raises(RuntimeError, match="Boolean inputs"):
                    fn(torch.arange(12.0, device=DEV).view(4, 3), bn, lst)
                runs.append((lst, torch.rand(2, device=DEV), bn.running_mean.clone(), bn.num_batches_tracked.clone()))
            (le, de, me, ne), (lc, dc, mc, nc) = runs
            assert le == lc == [1] and torch.equal(de, dc) and torch.equal(me, mc) and torch.equal(ne, nc)
    assert t.reruns == 2 and t.internal_errors == 0 and t.fallbacks == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_on_an_input_without_a_raise_is_applied_once(backend):
    def g(x, lst):
        x.mul_(2)
        lst.append(1)
        x[0] += 1
        return x.sum()

    c = tracer.compile(g, backend=backend)
    xe, xc, le, lc = torch.ones(3, device=DEV), torch.ones(3, device=DEV), [], []
    torch.testing.assert_close(c(xc, lc), g(xe, le))
    assert torch.equal(xe, xc) and le == lc == [1]


def test_autocast_bf16_matches_eager_dtype_and_values():
    def f(x, w):
        with torch.autocast(DEV, dtype=torch.bfloat16):
            h = x @ w
            return h.relu(), h.float().softmax(-1)

    x, w = torch.randn(8, 16, device=DEV), torch.randn(16, 16, device=DEV)
    c = tracer.compile(f, backend="inductor")
    got, want = c(x, w), f(x, w)
    assert [t.dtype for t in got] == [t.dtype for t in want] == [torch.bfloat16, torch.float32]
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


# ---- models ------------------------------------------------------------------------------
def _models():
    from test_models import CNN, MLP, GPTBlock, encoder
    return {
        "mlp": (MLP, lambda: (torch.randn(4, 8),)),
        "cnn": (CNN, lambda: (torch.randn(2, 3, 8, 8),)),
        "gpt_block": (GPTBlock, lambda: (torch.randn(2, 8, 16),)),
        "transformer_encoder": (lambda: encoder(enable_nested_tensor=False), lambda: (torch.randn(2, 6, 16),)),
    }


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt_block", "transformer_encoder"])
def test_models_eval(name, backend):
    build, make = _models()[name]
    model = build().to(DEV).eval()
    args = tuple(a.to(DEV) for a in make())
    with torch.no_grad():
        t = _differential(model, args, backend, atol=1e-4, min_ops=3)
        tc, _ = _tc_graphs(model, args)
    assert t.graphs <= max(tc, 1), (t.graphs, tc)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt_block"])
def test_models_train_gradients(name, backend):
    """Train mode: forward and backward through the compiled graph (inductor: AOTAutograd's
    joint graph), gradients equal to eager's; BatchNorm's running stats move once per call."""
    build, make = _models()[name]
    torch.manual_seed(0)
    ref = build().to(DEV).train()
    model = copy.deepcopy(ref)
    args = tuple(a.to(DEV) for a in make())
    c = tracer.compile(model, backend=backend)
    exact = name != "gpt_block" or backend == "eager"  # inductor draws dropout's numbers its own way
    for step in range(3):  # first call traces; the next two are cache hits
        with traced() as t:
            torch.manual_seed(step)
            out = c(*args)
            out.float().pow(2).mean().backward()
        torch.manual_seed(step)
        want = ref(*args)
        want.float().pow(2).mean().backward()
        assert out.shape == want.shape and out.requires_grad
        for (n, p), q in zip(model.named_parameters(), ref.parameters()):
            assert p.grad is not None and p.grad.shape == q.grad.shape, n
            if exact:
                torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-3, msg=n)
            p.grad = q.grad = None
        if exact:
            torch.testing.assert_close(out, want, atol=1e-4, rtol=1e-4)
        for b, rb in zip(model.buffers(), ref.buffers()):
            torch.testing.assert_close(b, rb)
        if step:
            assert t.frames_traced == 0 and t.recompiles == 0, str(t)
        else:
            assert_captured(t, min_ops=3)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_hf_decoder_left_padded_inductor(name):
    """A tiny HF decoder (random weights, offline) on the GPU: a left-padded batch through
    inductor, equal to eager, warm calls trace nothing, graphs beside torch.compile's."""
    pytest.importorskip("transformers")
    from zoo.hf_specs import hf_specs
    _family, build, inputs = hf_specs()[name]
    torch.manual_seed(0)
    model = build().to(DEV).eval()
    gen = torch.Generator().manual_seed(0)
    kw1 = {k: v.to(DEV) for k, v in inputs(gen).items()}
    kw2 = {k: v.to(DEV) for k, v in inputs(gen).items()}

    def logits(**kw):
        return model(**kw).logits

    c = tracer.compile(logits, backend="inductor")
    with torch.no_grad():
        with traced() as t:
            got = c(**kw1)
        torch.testing.assert_close(got, logits(**kw1), atol=1e-3, rtol=1e-3)
        assert_captured(t, min_ops=20, breaks=None)
        with traced() as warm:
            c(**kw1)
            got2 = c(**kw2)
        torch.testing.assert_close(got2, logits(**kw2), atol=1e-3, rtol=1e-3)
        assert warm.frames_traced == 0 and warm.recompiles == 0, str(warm)
        tc, tc_breaks = _tc_graphs(logits, (), kw1)
    assert t.graphs <= max(tc, 1), (t.graphs, tc, tc_breaks, str(t))


def test_capture_on_the_gpu():
    """tracer.capture(): the frame hook intercepts the model's frames; the graphs run on CUDA."""
    from test_models import GPTBlock
    model = GPTBlock().to(DEV).eval()
    x = torch.randn(2, 8, 16, device=DEV)
    with torch.no_grad():
        want = model(x)
        with traced() as t:
            with tracer.capture(backend="inductor"):
                got = model(x)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        assert_captured(t, min_ops=5, breaks=None)
        with traced() as warm:
            with tracer.capture(backend="inductor"):
                model(x)
        assert warm.frames_traced == 0 and warm.cache_hits >= 1, str(warm)


# ---- torch's module_db samples on the GPU, inlined (called from a user module) -------------
def _db_on_device():
    if DEV == "cuda" and not torch.cuda.is_available():
        return []
    from capture_zoo import _db_cases
    return _db_cases(DEV)


DB = _db_on_device()


def _assert_same_tree(got, want, tol):
    from torch.utils._pytree import tree_flatten
    g, gspec = tree_flatten(got)
    w, wspec = tree_flatten(want)
    assert gspec == wspec, (gspec, wspec)
    for a, b in zip(g, w):
        if isinstance(b, torch.Tensor):
            assert a.device == b.device, (a.device, b.device)
            torch.testing.assert_close(a, b, atol=tol, rtol=tol, equal_nan=True)
        else:
            assert a == b


# inductor compiles a kernel set per sample: a spread quarter of the samples, the eager backend all
_DB_PARAMS = [pytest.param(c, "eager", id=f"{c.name}-eager") for c in DB] + \
             [pytest.param(c, "inductor", id=f"{c.name}-inductor") for c in DB[::4]]


@pytest.mark.parametrize("case,backend", _DB_PARAMS)
def test_module_db_samples_inlined_on_the_device(case, backend):
    """Every module_db sample with its module and inputs on the device, traced into (a stock
    module's forward is inlined as torch.compile does): equal to eager on the same device,
    captured, and a warm call traces nothing."""
    from capture_zoo import Caller, _call
    m, args, kwargs = case.make()
    with torch.no_grad():
        want = _call(m, args, kwargs)
        c = tracer.compile(Caller(copy.deepcopy(m)), backend=backend)
        with traced() as first:
            got = _call(c, args, kwargs)
        _assert_same_tree(got, want, 1e-5 if backend == "eager" else 1e-3)
        assert first.fallbacks == 0 and first.internal_errors == 0, str(first)
        assert first.graphs >= 1 or first.graph_breaks, str(first)
        with traced() as warm:
            again = _call(c, args, kwargs)
        _assert_same_tree(again, want, 1e-5 if backend == "eager" else 1e-3)
        assert warm.frames_traced == 0 and warm.recompiles == 0, str(warm)
