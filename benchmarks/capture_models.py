"""capture() vs compile() on the real-model zoo (tests/capture_zoo.py): per-call cost of a warm
call, and the ops each captured (issue 15).

For every model, three ways of calling it, each warmed up first (traced, then cached):
  eager      m(*args)
  compile    tracer.compile(m)(*args)
  capture    m(*args) inside one `with tracer.capture():` block around the timing loop
             (the loop's own frame is skipped, so only the model's frames reach the hook)
and optionally torch.compile(m, backend="eager") (--torch). Per-call time: this thread's CPU
time (not wall time: the machine is shared), the minimum over repeats of the mean of N
calls, the ways interleaved, gc off while timing, torch on one thread.
Reported: microseconds per call, capture/compile (the target: at most 1.10), the overheads
over eager, and the ops each front end captured.

    python benchmarks/capture_models.py [--quick] [--filter SUBSTR] [--torch] [--out FILE]
"""
import argparse
import gc
import math
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import torch  # noqa: E402

import tracer  # noqa: E402
from capture_zoo import zoo  # noqa: E402
from tracer.runtime.frame_hook import skip_code  # noqa: E402

# CPU time of this thread, not wall time: the machine is shared (load far above its cores),
# and time spent descheduled is not the code's cost. Torch runs on one thread here.
ns = time.thread_time_ns


def _loop(fn, args, kwargs, n):
    t0 = ns()
    for _ in range(n):
        fn(*args, **kwargs)
    return (ns() - t0) / n / 1000.0


skip_code(_loop.__code__)  # under capture(): the loop is not traced, the model's frames are


def _ops(stats):
    return stats.ops, stats.graphs, stats.graph_breaks


def measure(case, n, repeats, with_torch):
    torch.manual_seed(0)
    m, args, kwargs = case.make()
    ways = {"eager": m}
    tracer.reset()
    tracer.reset_stats()
    cm = tracer.compile(m)
    cm(*args, **kwargs)
    compile_ops = _ops(tracer.stats())
    ways["compile"] = cm
    tracer.reset()  # capture() traces afresh (the caches are per code object)
    tracer.reset_stats()
    cap = tracer.capture()
    with cap:
        m(*args, **kwargs)
    capture_ops = _ops(tracer.stats())
    if with_torch:
        import torch._dynamo as dynamo
        dynamo.reset()
        tc = torch.compile(m, backend="eager")
        tc(*args, **kwargs)
        ways["torch.compile"] = tc
    times = {k: [] for k in list(ways) + ["capture"]}
    frames_before = tracer.stats().frames_traced
    gc.disable()
    try:
        for _ in range(repeats):
            for k, fn in ways.items():
                _loop(fn, args, kwargs, 2)  # warm
                times[k].append(_loop(fn, args, kwargs, n))
            with cap:
                _loop(m, args, kwargs, 2)
                times["capture"].append(_loop(m, args, kwargs, n))
    finally:
        gc.enable()
    warm_frames = tracer.stats().frames_traced - frames_before
    tracer.reset()
    return {k: min(v) for k, v in times.items()}, compile_ops, capture_ops, warm_frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--filter", default="")
    ap.add_argument("--torch", action="store_true", help="also torch.compile(backend='eager')")
    ap.add_argument("--out", default=os.path.join(HERE, "capture_results.md"))
    opts = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    repeats = 25 if opts.quick else 60
    rows = []
    for case in zoo():
        if opts.filter not in case.name:
            continue
        probe_m, probe_a, probe_k = case.make()
        t0 = ns()
        with torch.no_grad():
            probe_m(*probe_a, **probe_k)
        once = (ns() - t0) / 1000.0
        n = int(max(5, min(500, 2000 / max(once, 1.0))))  # blocks of ~2 ms: short enough to fit between preemptions
        with torch.no_grad():
            t, c_ops, k_ops, warm = measure(case, n, repeats, opts.torch)
        ratio = t["capture"] / t["compile"]
        rows.append((case.name, t, c_ops, k_ops, warm, ratio))
        extra = f" torch.compile {t['torch.compile']:8.1f}" if "torch.compile" in t else ""
        print(f"{case.name:32s} eager {t['eager']:8.1f}  compile {t['compile']:8.1f}  capture {t['capture']:8.1f}"
              f"{extra}  capture/compile {ratio:5.2f}  ops {c_ops[0]}/{k_ops[0]}  warm frames {warm}", flush=True)
    _report(rows, opts)


def _report(rows, opts):
    ratios = [r[5] for r in rows]
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else float("nan")
    within = sum(1 for x in ratios if x <= 1.10)
    same_ops = sum(1 for r in rows if r[2] == r[3])
    lines = [
        "# capture() vs compile() on the model zoo (benchmarks/capture_models.py)",
        "",
        f"Python {sys.version.split()[0]}, torch {torch.__version__}, 1 thread, "
        f"{'quick' if opts.quick else 'full'} run; microseconds of CPU per warm call (min over repeats of the mean of N calls).",
        "`capture` is `m(*args)` inside one `with tracer.capture():` around the loop; ops are "
        "(ops, graphs, breaks) from tracer.stats().",
        "",
        f"**{len(rows)} models: capture/compile geomean {geo:.3f}; {within}/{len(rows)} within 1.10; "
        f"ops equal on {same_ops}/{len(rows)}; warm calls traced {sum(r[4] for r in rows)} frames.**",
        "",
        "| model | eager | compile | capture | capture/compile | ops compile | ops capture |"
        + (" torch.compile |" if opts.torch else ""),
        "|---|---:|---:|---:|---:|---|---|" + ("---:|" if opts.torch else ""),
    ]
    for name, t, c_ops, k_ops, _warm, ratio in rows:
        line = (f"| {name} | {t['eager']:.1f} | {t['compile']:.1f} | {t['capture']:.1f} | {ratio:.2f} | "
                f"{c_ops} | {k_ops} |")
        if opts.torch:
            line += f" {t.get('torch.compile', float('nan')):.1f} |"
        lines.append(line)
    with open(opts.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines[:7]))


if __name__ == "__main__":
    main()
