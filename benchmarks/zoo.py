"""The zoo side by side with torch.compile: graphs, breaks, first-call latency and
steady-state per-call time, each as a ratio to eager (CPU time, interleaved, medians).

    python benchmarks/zoo.py [name,name,...] [--mode eval|train] [--reps 20]

First call: the compiled model's first call (trace + compile + run) divided by an eager call
(both backends "eager"; torch._dynamo is imported before timing, so neither pays its import).
Steady state: blocks of calls of eager, tracer and torch.compile interleaved, per-call CPU
time (time.process_time) median over blocks, as a ratio to eager. Not part of the tests.
"""
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# (a script here named like one of our packages would shadow it: keep this folder off the path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.join(HERE, "..", "tests", "zoo"))
warnings.simplefilter("ignore")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (imported up front: not counted in either first call)
from torch._dynamo.testing import CompileCounter  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import tracer  # noqa: E402
import hf_specs  # noqa: E402


def cpu(fn):
    t = time.process_time()
    fn()
    return time.process_time() - t


def measure(name, mode="eval", reps=20, block=3):
    family, build, inputs = hf_specs.hf_specs()[name]
    torch.manual_seed(0)
    model = build().train(mode == "train")
    kw = inputs(torch.Generator().manual_seed(0), labels=mode == "train")
    grad = torch.enable_grad() if mode == "train" else torch.no_grad()

    def call(fn):
        def run():
            with (torch.enable_grad() if mode == "train" else torch.no_grad()):
                out = fn(**kw)
                if mode == "train":
                    out.loss.backward()
        return run

    eager = call(model)
    eager()  # warm the eager path (allocator, lazy init)
    t_eager = statistics.median(cpu(eager) for _ in range(5))

    tracer.reset()
    tracer.reset_stats()
    ours = call(tracer.compile(model))
    t_first_ours = cpu(ours)
    s = tracer.stats()

    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounter()
    theirs = call(torch.compile(model, backend=cnt))
    t_first_tc = cpu(theirs)
    tc_breaks = sum(counters["graph_break"].values())

    per = {"eager": [], "tracer": [], "tc": []}
    for _ in range(reps):
        for key, fn in (("eager", eager), ("tracer", ours), ("tc", theirs)):
            per[key].append(cpu(lambda: [fn() for _ in range(block)]) / block)
    med = {k: statistics.median(v) for k, v in per.items()}
    del grad
    return dict(name=name, mode=mode, graphs=s.graphs, breaks=s.graph_breaks, tc_graphs=cnt.frame_count,
                tc_breaks=tc_breaks, first_tracer=t_first_ours / t_eager, first_tc=t_first_tc / t_eager,
                steady_tracer=med["tracer"] / med["eager"], steady_tc=med["tc"] / med["eager"],
                eager_ms=med["eager"] * 1e3)


def main(argv):
    names = argv[0].split(",") if argv and not argv[0].startswith("--") else list(hf_specs.hf_specs())
    mode = argv[argv.index("--mode") + 1] if "--mode" in argv else "eval"
    reps = int(argv[argv.index("--reps") + 1]) if "--reps" in argv else 20
    print("| model | mode | graphs tracer / tc | breaks tracer / tc | first call vs eager: tracer / tc "
          "| steady state vs eager: tracer / tc | eager (ms) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in names:
        r = measure(name, mode, reps)
        print(f"| {r['name']} | {r['mode']} | {r['graphs']} / {r['tc_graphs']} | {r['breaks']} / {r['tc_breaks']} "
              f"| {r['first_tracer']:.0f}x / {r['first_tc']:.0f}x | {r['steady_tracer']:.2f} / {r['steady_tc']:.2f} "
              f"| {r['eager_ms']:.2f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
