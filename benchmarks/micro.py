"""Micro-benchmarks of the two per-call costs under every cache hit (printed, never asserted;
moved here from the test suite, where timing "tests" could not fail):

  * the C frame hook: a tiny function called with no hook, with the hook on but the code
    skipped, with a callback returning None, returning a cached replacement, and reading
    the frame's argument tuple;
  * a batched guard check over 4 tensors (+ the global-state guard), and tensors only.

    python benchmarks/micro.py [--calls 200000] [--repeats 7]

Each number is nanoseconds per call, thread CPU time (time.thread_time_ns, so other load on
the machine does not count), median and minimum over the repeats, loop overhead included.
"""
import argparse
import builtins
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from guards import GlobalStateMatch, LocalSource, TensorMatch, compile_guards  # noqa: E402
from tracer.runtime import frame_hook as fh  # noqa: E402
from tracer.runtime.frame_hook import flatten_code, hook  # noqa: E402


def per_call_ns(fn, arg, n, repeats):
    runs = []
    for _ in range(repeats):
        t0 = time.thread_time_ns()
        for _ in range(n):
            fn(arg)
        runs.append((time.thread_time_ns() - t0) / n)
    return statistics.median(runs), min(runs)


def frame_hook_rows(n, repeats):
    def tiny(x):
        return x

    def tiny_skipped(x):
        return x

    fh.skip_code(tiny_skipped.__code__)
    replacement = {tiny.__code__: flatten_code(tiny.__code__)}

    def none_cb(frame):
        return None

    def cached_cb(frame):
        return replacement.get(frame.f_code)

    def args_cb(frame):
        frame.f_args  # noqa: B018
        return replacement.get(frame.f_code)

    try:
        rows = [("no hook", per_call_ns(tiny, 1, n, repeats))]
        with hook(none_cb):
            rows.append(("hook on, code skipped", per_call_ns(tiny_skipped, 1, n, repeats)))
            rows.append(("callback returns None", per_call_ns(tiny, 1, n, repeats)))
        with hook(cached_cb):
            rows.append(("callback returns cached replacement", per_call_ns(tiny, 1, n, repeats)))
        with hook(args_cb):
            rows.append(("... and reads f_args", per_call_ns(tiny, 1, n, repeats)))
    finally:
        fh.unskip_code(tiny_skipped.__code__)
    return rows


def guard_rows(n, repeats):
    ts = [torch.randn(8, 8), torch.randn(8), torch.randn(3, 8, requires_grad=True),
          torch.randn(2, 2, dtype=torch.float64)]
    srcs = [LocalSource(f"t{i}", i) for i in range(4)]
    with_state = compile_guards([*[TensorMatch(s, t) for s, t in zip(srcs, ts)], GlobalStateMatch()],
                                builtins=builtins.__dict__)
    tensors_only = compile_guards([TensorMatch(s, t) for s, t in zip(srcs, ts)], builtins=builtins.__dict__)
    L, G = tuple(ts), {}
    assert with_state.check(L, G, None) and tensors_only.check(L, G, None)
    return [("4-tensor guard set + global state", per_call_ns(lambda a: with_state.check(a, G, None), L, n, repeats)),
            ("4-tensor guard set, tensors only", per_call_ns(lambda a: tensors_only.check(a, G, None), L, n, repeats))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args(argv)
    print(f"ns per call (thread CPU time; median / min of {a.repeats} x {a.calls} calls):")
    for title, rows in (("frame hook", frame_hook_rows(a.calls, a.repeats)),
                        ("guard checks", guard_rows(a.calls, a.repeats))):
        print(f"  {title}:")
        for name, (med, lo) in rows:
            print(f"    {name:40s} {med:8.1f} / {lo:8.1f}")


if __name__ == "__main__":
    main()
