"""One way to run a zoo model: eager, tracer.compile and torch.compile side by side.

`check(...)` runs a model the way its users do (eval under no_grad, or train with labels and
backward), and asserts what the issue asks of every zoo model:

* the tracer's outputs (and gradients) equal eager's, on the first call and on a call with
  fresh inputs of the same shapes;
* warm calls compile nothing: the same inputs again and fresh inputs of the same shapes leave
  `tracer.stats().frames_traced` unchanged (no recompile, no new frame traced);
* graphs and breaks are counted, beside torch.compile's on the same model and inputs
  (a counting backend, after torch._dynamo.reset()), and returned for the caller's assertion.

Random ops (dropout) are compared by seeding the global generator before each run: the
tracer's graphs run the same kernels in the same order as eager, so the draws agree.
"""
from __future__ import annotations

import dataclasses
import warnings

import torch

import tracer

SEED = 1234


@dataclasses.dataclass
class Counts:
    graphs: int
    breaks: int
    frames: int
    fallbacks: int
    tc_graphs: int | None = None
    tc_breaks: int | None = None
    warm_frames: int = 0               # frames traced again on warm calls (warm="like_tc")
    warm_graphs: int = 0               # ... and the graphs compiled for them
    tc_warm_frames: int | None = None  # torch.compile's, counted alike: frames its callback
    tc_warm_graphs: int | None = None  # converted again, graphs its backend got
    break_reasons: dict = dataclasses.field(default_factory=dict)
    fallback_reasons: dict = dataclasses.field(default_factory=dict)
    tc_break_reasons: dict = dataclasses.field(default_factory=dict)
    stats: object = None

    def __str__(self):
        lines = [f"tracer: {self.graphs} graphs, {self.breaks} breaks, {self.frames} frames, "
                 f"{self.fallbacks} fallbacks, {self.warm_frames} warm retraces ({self.warm_graphs} graphs); "
                 f"torch.compile: {self.tc_graphs} graphs, {self.tc_breaks} breaks, {self.tc_warm_frames} "
                 f"warm retraces ({self.tc_warm_graphs} graphs)"]
        lines += [f"  break x{n}: {r}" for r, n in self.break_reasons.items()]
        lines += [f"  fallback x{n}: {r}" for r, n in self.fallback_reasons.items()]
        lines += [f"  torch.compile break x{n}: {r}" for r, n in self.tc_break_reasons.items()]
        if self.stats is not None:
            lines += ["  " + ln for ln in str(self.stats).splitlines() if "recompil" in ln or ":" in ln][:40]
        return "\n".join(lines)


# ---- what a call returns, as comparable leaves ---------------------------------------------------

def leaves(obj, depth=0):
    """Tensors and plain values in a model's output, in a fixed order (ModelOutput, tuples,
    dicts, cache objects)."""
    if depth > 8:
        return [type(obj).__name__]
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [type(obj).__name__] + [x for o in obj for x in leaves(o, depth + 1)]
    if isinstance(obj, dict):
        return [type(obj).__name__] + [x for k, v in obj.items() for x in [k] + leaves(v, depth + 1)]
    if obj is None or isinstance(obj, (int, float, bool, str)):
        return [obj]
    if hasattr(obj, "__dict__"):  # cache objects and the like
        return [type(obj).__name__] + leaves(dict(sorted(vars(obj).items())), depth + 1)
    return [type(obj).__name__]


def assert_same(got, want, atol, rtol, what):
    g, w = leaves(got), leaves(want)
    assert len(g) == len(w), f"{what}: structure differs\n  got  {_shape(g)}\n  want {_shape(w)}"
    for i, (a, b) in enumerate(zip(g, w)):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{what}[{i}]: {type(a).__name__} instead of a tensor"
            assert a.shape == b.shape and a.dtype == b.dtype, f"{what}[{i}]: {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}"
            if b.is_floating_point() or b.is_complex():
                err = (a.detach() - b.detach()).abs().max().item() if b.numel() else 0.0
                assert torch.allclose(a.detach(), b.detach(), atol=atol, rtol=rtol, equal_nan=True), \
                    f"{what}[{i}] differs from eager by up to {err:.3g}"
            else:
                assert torch.equal(a, b), f"{what}[{i}] differs from eager"
        else:
            assert a == b, f"{what}[{i}]: {a!r} vs eager {b!r}"


def _shape(ls):
    return [tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in ls][:30]


# ---- one call, the way users make it -------------------------------------------------------------

def default_loss(out):
    loss = getattr(out, "loss", None)
    if loss is not None:
        return loss
    if isinstance(out, dict):
        out = tuple(out.values())
    ts = [t for t in leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    return sum(t.float().pow(2).mean() for t in ts)


def run(fn, model, args, kwargs, train, loss_fn=default_loss, grad_enabled=None):
    """Seed, call, and in train mode take the loss's gradients. Returns (output, grads)."""
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    torch.manual_seed(SEED)
    if train:
        out = fn(*args, **kwargs)
        loss_fn(out).backward()
        grads = [None if p.grad is None else p.grad.clone() for p in params]
        for p in params:
            p.grad = None
        return out, grads
    with torch.no_grad() if grad_enabled is None else torch.set_grad_enabled(grad_enabled):
        return fn(*args, **kwargs), []


def tc_counts(call, model, args, kwargs, train, loss_fn=default_loss, fresh=None):
    """torch.compile's graphs and breaks on one call (the counting backend: dynamo only), and,
    given `fresh` inputs `(args, kwargs)`, what the warm calls (the same inputs again, then the
    fresh ones) compiled again, where data-dependent sizes (detection) or automatic dynamic
    shapes make it recompile: (frames, graphs). Frames are those its frame callback converted
    (counters["frames"]["total"]: recompiles, and frames that make no graph, as the tracer's
    frames_traced counts them); graphs are those its backend got."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounter()
    compiled = torch.compile(call, backend=cnt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(compiled, model, args, kwargs, train, loss_fn)
        frames, reasons = cnt.frame_count, dict(counters["graph_break"])
        warm = None
        if fresh is not None:
            converted = counters["frames"]["total"]
            run(compiled, model, args, kwargs, train, loss_fn)
            run(compiled, model, *fresh, train, loss_fn)
            warm = (counters["frames"]["total"] - converted, cnt.frame_count - frames)
    torch._dynamo.reset()
    return frames, sum(reasons.values()), reasons, warm


def check(model, make_inputs, *, train=False, call=None, loss_fn=default_loss, atol=1e-5, rtol=1e-4,
          compare_tc=True, warm=True, backend="eager", device=None, **compile_options):
    """Run `call(model, *args, **kwargs)` (default: `model(*args, **kwargs)`) eagerly and through
    tracer.compile, assert equal outputs/gradients and no compiles when warm, and return Counts.

    `make_inputs(gen)` returns `(args, kwargs)` (or just kwargs) drawn from `gen`.
    `warm="like_tc"` is for models whose sizes depend on the data (detectors: the boxes kept
    after NMS): fresh inputs may trace frames again, no more of them than torch.compile
    compiles again on the same calls (Counts.warm_frames beside Counts.tc_warm_frames; the
    caller asserts), and the outputs still equal eager's.

    `backend`, `device` and `compile_options` (mode, options): where and how the compiled side
    runs (tests/test_cuda.py: inductor on CUDA); eager runs on the same device.
    """
    if device is not None:
        model.to(device)
    model.train(train)
    gen = torch.Generator().manual_seed(0)
    in1, in2 = _split(make_inputs(gen)), _split(make_inputs(gen))
    if device is not None:
        in1, in2 = _to(in1, device), _to(in2, device)
    if call is None:
        def call(*a, **k):
            return model(*a, **k)
        compiled_call = tracer.compile(model, backend=backend, **compile_options)
    else:
        compiled_call = tracer.compile(call, backend=backend, **compile_options)

    ref1 = run(call, model, *in1, train, loss_fn)
    ref2 = run(call, model, *in2, train, loss_fn)

    tracer.reset()
    before = tracer.stats()
    got1 = run(compiled_call, model, *in1, train, loss_fn)
    s1 = tracer.stats()
    counts = Counts(graphs=s1.graphs - before.graphs, breaks=s1.graph_breaks - before.graph_breaks,
                    frames=s1.frames_traced - before.frames_traced,
                    fallbacks=s1.fallbacks - before.fallbacks,
                    break_reasons=_delta(s1.break_reasons, before.break_reasons),
                    fallback_reasons=_delta(s1.fallback_reasons, before.fallback_reasons), stats=s1)
    assert_same(got1[0], ref1[0], atol, rtol, "output")
    assert_same(got1[1], ref1[1], atol, rtol, "gradients")
    assert counts.graphs >= 1, f"nothing was captured\n{counts}"
    assert s1.internal_errors == before.internal_errors, \
        "internal error(s):\n" + "\n".join(str(e) for e in s1.of("internal_error"))

    if warm:
        run(compiled_call, model, *in1, train, loss_fn)
        got2 = run(compiled_call, model, *in2, train, loss_fn)
        s2 = tracer.stats()
        counts.warm_frames = s2.frames_traced - s1.frames_traced
        counts.warm_graphs = s2.graphs - s1.graphs
        assert warm == "like_tc" or s2.frames_traced == s1.frames_traced, \
            f"warm calls traced {s2.frames_traced - s1.frames_traced} frame(s)\n" + \
            "\n".join(str(e) for e in s2.of("recompile")[-10:])
        assert s2.cache_hits > s1.cache_hits
        assert s2.internal_errors == s1.internal_errors, \
            "internal error(s) on warm calls:\n" + "\n".join(str(e) for e in s2.of("internal_error"))
        assert_same(got2[0], ref2[0], atol, rtol, "output on fresh inputs")
        assert_same(got2[1], ref2[1], atol, rtol, "gradients on fresh inputs")

    if compare_tc:
        counts.tc_graphs, counts.tc_breaks, counts.tc_break_reasons, tc_warm = tc_counts(
            call, model, *in1, train, loss_fn, fresh=in2 if warm == "like_tc" else None)
        if tc_warm is not None:
            counts.tc_warm_frames, counts.tc_warm_graphs = tc_warm
    tracer.reset()
    return counts


def _to(inputs, device):
    return torch.utils._pytree.tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, inputs)


def _split(inputs):
    if isinstance(inputs, dict):
        return (), inputs
    args, kwargs = inputs
    return tuple(args), dict(kwargs)


def _delta(after, before):
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0)}
