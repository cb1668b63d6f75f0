"""Shared assertions for end-to-end tests: compiled == eager is not enough.

A silent whole-frame fallback returns the eager answer, so a test that only compares values
passes whether or not anything was traced. Every end-to-end test therefore also says what
the tracer did:

    with traced() as t:                      # what the tracer did inside the block
        out = c(x)
    assert_captured(t, min_ops=3, breaks=0)  # captured: graphs, ops, breaks, no fallback

    assert_captured(c, min_ops=3)            # or: a compiled function's own cache entries
    assert_warm(c, x)                        # calls again (same, then fresh same-shape
                                             # inputs): nothing traced, every call a cache hit
    assert_recompiled(t, "x.shape")          # a fact changed: recompiled, naming the guard

Counts come from `tracer.stats()` (tracer/runtime/records.py), which every frame the tracer handles
reports to: compile(), capture(), the frame hook's resume functions.
"""
from __future__ import annotations

import contextlib
import dataclasses

import torch

import tracer

_COUNTS = ("frames_traced", "graphs", "ops", "graph_breaks", "fallbacks", "recompiles",
           "recompile_limits", "cache_hits", "internal_errors", "reruns")


@dataclasses.dataclass
class Traced:
    """What the tracer did between two snapshots (counter differences and the new events)."""
    frames_traced: int = 0
    graphs: int = 0
    ops: int = 0
    graph_breaks: int = 0
    fallbacks: int = 0
    recompiles: int = 0
    recompile_limits: int = 0
    cache_hits: int = 0
    internal_errors: int = 0
    reruns: int = 0
    events: list = dataclasses.field(default_factory=list)

    def of(self, kind):
        return [e for e in self.events if e.kind == kind]

    def __str__(self):
        counts = "  ".join(f"{k}={getattr(self, k)}" for k in _COUNTS)
        return counts + "".join(f"\n    {e}" for e in self.events[-30:])


def _n_events(s):
    return s.frames_traced + s.graphs + s.graph_breaks + s.fallbacks + s.recompiles + \
        s.recompile_limits + s.internal_errors + s.reruns


def _diff(before, after, out):
    for k in _COUNTS:
        setattr(out, k, getattr(after, k) - getattr(before, k))
    new = _n_events(after) - _n_events(before)
    out.events = list(after.events)[-new:] if new > 0 else []
    return out


@contextlib.contextmanager
def traced():
    """`with traced() as t:` -- t holds what the tracer did inside the block (on exit)."""
    t = Traced()
    before = tracer.stats()
    try:
        yield t
    finally:
        _diff(before, tracer.stats(), t)


def _entries(target):
    if isinstance(target, tracer.CompiledModule):
        target = target._compiled_forward
    return target.entries


def assert_captured(target, *, min_ops=1, graphs=None, breaks=0, fallbacks=0, entries=None,
                    recompiles=None):
    """The tracer captured the work: no fallback (unless `fallbacks` says how many), at
    least `min_ops` ops, exactly `breaks` graph breaks (None: any), `graphs` graphs (None:
    at least one when min_ops > 0).

    `target` is a `Traced` (everything traced in the block, resume functions and frames
    traced through the hook included) or a compiled function/module (its cache entries:
    the root frame only; `entries` is their number)."""
    if isinstance(target, Traced):
        got = dict(graphs=target.graphs, ops=target.ops, breaks=target.graph_breaks,
                   fallbacks=target.fallbacks, recompiles=target.recompiles, entries=None)
        why = str(target)
        assert target.internal_errors == 0, f"internal errors:\n{why}"
    else:
        es = _entries(target)
        got = dict(graphs=sum(e.graph is not None for e in es), ops=sum(e.ops for e in es),
                   breaks=sum(len(e.breaks) for e in es), fallbacks=sum(e.code is None for e in es),
                   recompiles=max(len(es) - 1, 0), entries=len(es))
        why = "\n".join(f"  entry {i}: ops={e.ops} graph={e.graph is not None} reason={e.reason!r} "
                        f"breaks={[str(b.reason) for b in e.breaks]}" for i, e in enumerate(es))
        assert es, "nothing was compiled (no cache entry)"
    assert got["fallbacks"] == fallbacks, f"fallbacks: {got['fallbacks']} (expected {fallbacks})\n{why}"
    if breaks is not None:
        assert got["breaks"] == breaks, f"graph breaks: {got['breaks']} (expected {breaks})\n{why}"
    assert got["ops"] >= min_ops, f"ops: {got['ops']} (expected at least {min_ops})\n{why}"
    if graphs is not None:
        assert got["graphs"] == graphs, f"graphs: {got['graphs']} (expected {graphs})\n{why}"
    elif min_ops > 0:
        assert got["graphs"] >= 1, f"no graph\n{why}"
    if entries is not None:
        assert got["entries"] == entries, f"cache entries: {got['entries']} (expected {entries})\n{why}"
    if recompiles is not None:
        assert got["recompiles"] == recompiles, \
            f"recompiles: {got['recompiles']} (expected {recompiles})\n{why}"
    return target


def fresh_like(value):
    """Same structure and tensor metadata, new tensor values (other objects kept as they are)."""
    if isinstance(value, torch.nn.Parameter):
        return value
    if isinstance(value, torch.Tensor):
        with torch.no_grad():
            if value.dtype == torch.bool:
                new = torch.rand(value.shape) > 0.5
            elif value.is_floating_point() or value.is_complex():
                new = torch.randn(value.shape, dtype=value.dtype)
            else:
                new = torch.randint(-3, 4, value.shape).to(value.dtype)
            try:
                new = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype).copy_(new)
            except RuntimeError:  # overlapping strides (an expanded tensor): keep the original
                return value
        return new.requires_grad_(value.requires_grad)
    if type(value) in (list, tuple):
        return type(value)(fresh_like(v) for v in value)
    if type(value) is dict:
        return {k: fresh_like(v) for k, v in value.items()}
    return value


def assert_warm(fn, *args, fresh=True, **kwargs):
    """Warm calls compile nothing: `fn(*args)` once (it may trace), then again with the same
    inputs and with fresh inputs of the same shapes (`fresh=True`: made by `fresh_like`; a
    tuple: those args; False: none); each later call must trace no frame and hit the cache.
    Returns the outputs of the later calls."""
    fn(*args, **kwargs)
    calls = [args]
    if fresh is True:
        calls.append(fresh_like(args))
    elif fresh:
        calls.append(tuple(fresh))
    outs = []
    for a in calls:
        with traced() as t:
            outs.append(fn(*a, **kwargs))
        assert t.frames_traced == 0 and t.recompiles == 0, \
            f"a warm call traced again ({'same' if a is args else 'fresh'} inputs):\n{t}"
        assert t.cache_hits >= 1 and t.recompile_limits == 0, f"a warm call was not a cache hit:\n{t}"
    return outs


def assert_recompiled(t, guard=None, times=1):
    """`t` (a Traced) covers a call after a guarded fact changed: exactly `times` recompiles,
    the recompile event naming the failed guard (`guard`: a substring of its description)."""
    assert isinstance(t, Traced)
    assert t.recompiles == times, f"recompiles: {t.recompiles} (expected {times})\n{t}"
    if guard is not None:
        reasons = [e.reason for e in t.of("recompile")]
        assert any(guard in r for r in reasons), f"no recompile names {guard!r}: {reasons}"
    return t


__all__ = ["Traced", "traced", "assert_captured", "assert_warm", "assert_recompiled", "fresh_like"]


def run_leak_check(name):
    """Run leak_checks.<name>() in a fresh interpreter; its assertion message on failure."""
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run([sys.executable, os.path.join(here, "leak_checks.py"), name], cwd=here,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout[-3000:] + proc.stderr[-3000:]
