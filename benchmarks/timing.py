"""How the benchmark measures, so that it cannot print nonsense.

* Thread CPU time (`time.thread_time_ns`), with torch on one thread: time other processes
  take on a shared machine is not counted, only this thread's work.
* Interleaved blocks: each block times N calls of every system (eager, the tracer,
  torch.compile, ...) in a random order, drawn per block; a system's overhead is its block
  time minus eager's *in the same block* (paired), summarised over blocks by the median and
  the spread (quartiles, min and max). No minimum is subtracted from another minimum.
* Every timed call must be a cache hit: `Hits` snapshots the tracer's records
  (`tracer.stats()`: frames traced, cache hits, recompile limits) and torch._dynamo's
  counters (frames compiled, recompile-limit hits) around the timed blocks; a system that
  traced or compiled anything there, or ran past its recompile limit (then it runs as
  plain Python: about zero overhead, which is not a result), is flagged with the reason.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import random
import statistics
import time

import tracer
from torch._dynamo.utils import counters
from tracer.runtime.frame_hook import skip_code


def calls_per_block(eager_ns, target_ns=4_000_000, lo=5, hi=2_000):
    """N such that a block of eager calls takes about `target_ns` of CPU time."""
    return max(lo, min(hi, int(target_ns / max(eager_ns, 1.0))))


def block_ns(fn, args, n):
    """CPU time of this thread per call, over n calls."""
    t0 = time.thread_time_ns()
    for _ in range(n):
        fn(*args)
    return (time.thread_time_ns() - t0) / n


skip_code(block_ns.__code__)  # the timing loop is never traced (systems run under capture())


@dataclasses.dataclass
class Spread:
    median: float
    q1: float
    q3: float
    lo: float
    hi: float

    @classmethod
    def of(cls, xs):
        xs = sorted(xs)
        if len(xs) >= 4:
            q1, _m, q3 = statistics.quantiles(xs, n=4)
        else:
            q1, q3 = xs[0], xs[-1]
        return cls(statistics.median(xs), q1, q3, xs[0], xs[-1])


def interleaved(systems, args, n, blocks, rng, contexts=None):
    """{name: [ns per call, one per block]} for `systems` ({name: callable(*args)}), each
    block timing every system once, in a random order. `contexts` ({name: factory}): a
    system whose block runs inside a context (entered and left outside the timing)."""
    contexts = contexts or {}
    per = {name: [] for name in systems}
    names = list(systems)
    gc.collect()
    gc.disable()
    try:
        for _ in range(blocks):
            rng.shuffle(names)
            for name in names:
                with contexts.get(name, contextlib.nullcontext)():
                    per[name].append(block_ns(systems[name], args, n))
    finally:
        gc.enable()
    return per


def paired_overhead(per, system, base="eager"):
    """Spread of (system - base) over blocks, paired block by block."""
    return Spread.of([s - b for s, b in zip(per[system], per[base])])


def first_call_ns(compiled, args):
    """CPU time of one call (a first call: it compiles)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.thread_time_ns()
        compiled(*args)
        return time.thread_time_ns() - t0
    finally:
        gc.enable()


class Hits:
    """Were the calls made inside the block cache hits? `tracer_calls`: how many calls went
    through the tracer (each hits at least one cache entry); `dynamo`: whether torch.compile
    ran in the block."""

    def __init__(self, tracer_calls=0, dynamo=False):
        self.tracer_calls, self.dynamo = tracer_calls, dynamo
        self.problems = []

    def __enter__(self):
        self.t0 = tracer.stats()
        self.d0 = counters["frames"]["total"]
        self.limit0 = _dynamo_limit_hits()
        return self

    def __exit__(self, *exc):
        t1 = tracer.stats()
        if self.tracer_calls:
            if t1.frames_traced != self.t0.frames_traced:
                self.problems.append(f"tracer traced {t1.frames_traced - self.t0.frames_traced} "
                                     f"frame(s) during the timed calls")
            if t1.recompile_limits != self.t0.recompile_limits or _tracer_limited(t1):
                self.problems.append("tracer: past its recompile limit (the frame runs as Python)")
            hits = t1.cache_hits - self.t0.cache_hits
            if hits < self.tracer_calls:
                self.problems.append(f"tracer: {hits} cache hits for {self.tracer_calls} calls")
        if self.dynamo:
            if counters["frames"]["total"] != self.d0:
                self.problems.append(f"torch.compile compiled {counters['frames']['total'] - self.d0} "
                                     f"frame(s) during the timed calls")
            if _dynamo_limit_hits():
                self.problems.append("torch.compile: past its recompile limit (runs as Python)")
        return False


def _tracer_limited(stats):
    return bool(stats.of("limit"))


def _dynamo_limit_hits():
    return sum(v for k, v in counters["unimplemented"].items() if "recompile limit" in k.lower())


def rng_for(seed):
    return random.Random(seed)
