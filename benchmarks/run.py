"""frametracer vs torch.compile, side by side, in one process (`make bench`).

For every case (benchmarks/cases.py) both front ends compile the same function / nn.Module
with a backend that runs the graph's own forward, so the numbers compare the *frontends*:
tracing, guards, codegen and the per-call dispatch, not a compiler. How it measures
(benchmarks/timing.py): thread CPU time; the systems interleaved in a random order block by
block; overheads paired with eager in the same block; medians with their spread; every timed
call checked to be a cache hit (else the row is flagged, not reported as a result).

Measured per case:
  * first-call latency: CPU time of the first call on fresh caches, minus the eager call's
    median; repeated (the two front ends in a random order each time): median, min, max;
  * per-call overhead on a cache hit: compiled block - eager block, per block, over blocks:
    median and quartiles;
  * graphs and ops captured (the same counting backend for both front ends).

Ratios are tracer / torch.compile (below 1: the tracer is faster / smaller). Geomeans are
over the rows where both values are positive and every timed call was a cache hit; the rows
left out are named under the table, with the reason. Every row is printed.

    python benchmarks/run.py            # full run, writes benchmarks/results.md
    python benchmarks/run.py --quick    # fewer repeats (numbers noisier)
"""
import argparse
import contextlib
import math
import os
import platform
import statistics
import sys
import warnings

import torch
import torch._dynamo
import torch.nn as nn
from torch._dynamo.utils import counters

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import tracer  # noqa: E402
from cases import OVERHEAD_CASES, make_cases  # noqa: E402
from timing import (Hits, Spread, block_ns, calls_per_block, first_call_ns, interleaved,  # noqa: E402
                    paired_overhead, rng_for)


class Counter:
    """A torch.compile backend that counts graphs and op nodes, then runs the graph as is."""

    def __init__(self):
        self.graphs = 0
        self.ops = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.ops += sum(1 for n in gm.graph.nodes
                        if n.op in ("call_function", "call_method", "call_module"))
        return gm.forward


def compile_tracer(obj, backend="eager"):
    return tracer.compile(obj, backend=backend)


def compile_torch(obj, backend="eager"):
    return torch.compile(obj, backend=backend)


COMPILERS = {"tracer": compile_tracer, "torch.compile": compile_torch}


def reset_all():
    torch._dynamo.reset()
    tracer.reset()
    tracer.reset_stats()
    counters.clear()


def tracer_entries(compiled):
    cf = compiled._compiled_forward if isinstance(compiled, tracer.CompiledModule) else compiled
    return cf.entries


def tracer_notes(compiled):
    """(fallback reasons, graph-break reasons) from the root frame's entries."""
    entries = tracer_entries(compiled)
    reasons = [f"{e.reason}" + (f" ({e.location})" if e.location else "")
               for e in entries if e.code is None]
    breaks = [f"{b.reason} ({os.path.basename(b.filename)}:{b.lineno})"
              for e in entries for b in (getattr(e, "breaks", None) or [])]
    return reasons, breaks


def check_same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.allclose(a, b, atol=1e-5, equal_nan=True)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(check_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(check_same(a[k], b[k]) for k in a)
    return a == b


def warmup():
    """Pay one-time import/initialisation costs of both front ends on an unrelated function."""
    def unrelated(a, b):
        return torch.cos(a) * b - 1

    x = torch.randn(3, 5)
    reset_all()
    m = nn.Sequential(nn.Linear(5, 5), nn.ReLU()).eval()
    for comp in COMPILERS.values():
        for obj, args in ((unrelated, (x, x)), (m, (x,))):
            c = comp(obj)
            c(*args)
            c(*args)
    reset_all()


# ----------------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------------

def measure_case(name, make, cfg, rng, notes):
    """One row of the first table: capture counts, first-call latency, hit overhead."""
    # capture counts and correctness, both front ends with the same counting backend
    reset_all()
    torch.manual_seed(0)
    obj, args = make()
    expected = obj(*args)
    counts = {}
    for sys_name, comp in COMPILERS.items():
        counter = Counter()
        compiled = comp(obj, backend=counter)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = compiled(*args)
        counts[sys_name] = (counter.graphs, counter.ops)
        if not check_same(expected, out):
            notes.append(f"- **{name}**: {sys_name} output differs from eager!")
        if sys_name == "tracer":
            reasons, breaks = tracer_notes(compiled)
            if reasons:
                notes.append(f"- **{name}**: tracer fell back: " + "; ".join(reasons))
            if breaks:
                notes.append(f"- **{name}**: tracer graph breaks: " + "; ".join(breaks))
    (g_t, ops_t), (g_c, ops_c) = counts["tracer"], counts["torch.compile"]
    if ops_t != ops_c:
        notes.append(f"- **{name}**: op counts differ ({ops_t} vs {ops_c}): the tracer records a "
                     "torch.nn leaf module (e.g. nn.MultiheadAttention) as one call_module node, "
                     "torch.compile inlines modules into functions")

    # per-call overhead on a cache hit: eager, tracer, torch.compile interleaved
    reset_all()
    obj, args = make()
    systems = {"eager": obj, "tracer": compile_tracer(obj), "torch.compile": compile_torch(obj)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fn in systems.values():
            for _ in range(3):
                fn(*args)
    n = calls_per_block(block_ns(obj, args, 3))
    with Hits(tracer_calls=cfg["blocks"] * n, dynamo=True) as hits:
        per = interleaved(systems, args, n, cfg["blocks"], rng)
    eager = Spread.of(per["eager"])

    # first-call latency on fresh caches, the two front ends in a random order each time
    first = {s: [] for s in COMPILERS}
    for _ in range(cfg["compile_reps"]):
        order = list(COMPILERS)
        rng.shuffle(order)
        for sys_name in order:
            reset_all()
            obj, args = make()
            compiled = COMPILERS[sys_name](obj)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                first[sys_name].append(first_call_ns(compiled, args) - eager.median)
    row = dict(name=name, eager=eager, n=n, g_t=g_t, g_c=g_c, ops_t=ops_t, ops_c=ops_c,
               lat_t=Spread.of(first["tracer"]), lat_c=Spread.of(first["torch.compile"]),
               hit_t=paired_overhead(per, "tracer"), hit_c=paired_overhead(per, "torch.compile"),
               problems=hits.problems)
    for sys_name, key in (("tracer", "hit_t"), ("torch.compile", "hit_c")):
        sp = row[key]
        if sp.median <= 0:
            noise = sp.q3 - sp.q1 > -sp.median
            notes.append(f"- {NEGATIVE} **{name}**: the {sys_name} call on a cache hit was faster than "
                         f"eager by {us(-sp.median)} us (median; IQR {us(sp.q3 - sp.q1)} us): "
                         + ("within the noise" if noise else "the compiled graph skips Python work "
                            "the eager module does (nn.TransformerEncoder: its fast-path checks; "
                            "torch.compile also inlines nn.MultiheadAttention's)"))
    print(f"  {name}: first call {ms(row['lat_t'].median)} ms vs {ms(row['lat_c'].median)} ms; "
          f"hit overhead {us(row['hit_t'].median)} us vs {us(row['hit_c'].median)} us"
          + (f"  [{'; '.join(hits.problems)}]" if hits.problems else ""), file=sys.stderr)
    return row


def measure_overhead(name, fn, k, cfg, rng):
    """One row of the second table: a function of k small tensors, four ways."""
    reset_all()
    args = tuple(torch.randn(4, 4) for _ in range(k))
    systems = {"eager": fn, "tracer": compile_tracer(fn), "torch.compile": compile_torch(fn),
               "tracer hook": fn}
    contexts = {"tracer hook": tracer.capture}  # the plain function, inside capture()
    for sys_name, f in systems.items():
        with contexts.get(sys_name, contextlib.nullcontext)():
            for _ in range(3):
                f(*args)
    n = cfg["calls"]
    with Hits(tracer_calls=2 * cfg["blocks"] * n, dynamo=True) as hits:
        per = interleaved(systems, args, n, cfg["blocks"], rng, contexts=contexts)
    row = dict(name=name, eager=Spread.of(per["eager"]), n=n,
               ov_t=paired_overhead(per, "tracer"), ov_c=paired_overhead(per, "torch.compile"),
               ov_hook=paired_overhead(per, "tracer hook"), problems=hits.problems)
    print(f"  overhead {name}: tracer {us(row['ov_t'].median)} us, hook {us(row['ov_hook'].median)} us, "
          f"torch.compile {us(row['ov_c'].median)} us"
          + (f"  [{'; '.join(hits.problems)}]" if hits.problems else ""), file=sys.stderr)
    return row


def run(quick, seed):
    torch.set_num_threads(1)
    rng = rng_for(seed)
    cfg = dict(quick=quick, seed=seed, compile_reps=2 if quick else 5, blocks=9 if quick else 31,
               calls=200 if quick else 500)
    warmup()
    notes = []
    rows = [measure_case(name, make, cfg, rng, notes) for name, _kind, make in make_cases()]
    ov_rows = [measure_overhead(name, fn, k, cfg, rng) for name, fn, k in OVERHEAD_CASES]
    reset_all()
    return rows, ov_rows, notes, cfg


# ----------------------------------------------------------------------------------------------
# Reporting
# ----------------------------------------------------------------------------------------------

def us(x):
    return f"{x / 1e3:.1f}"


def ms(x):
    return f"{x / 1e6:.1f}"


NEGATIVE = "⚑"   # flags a value at or below zero: the compiled call was not slower than eager
NOT_HIT = "⚠"    # flags a row whose timed calls were not all cache hits


def fmt_spread(s, unit=us):
    """An overhead: its median and the spread (interquartile range). A median at or below zero
    is not printed as a negative overhead: it says the compiled call was faster, flagged."""
    spread = f" (IQR {unit(s.q3 - s.q1)})"
    if s.median <= 0:
        return f"faster by {unit(-s.median)} {NEGATIVE}{spread}"
    return f"{unit(s.median)}{spread}"


def fmt_range(s, unit=ms):
    if s.median <= 0:
        return f"faster by {unit(-s.median)} {NEGATIVE}"
    return f"{unit(s.median)} ({unit(s.lo)}–{unit(s.hi)})"


def fmt_value(x, unit=us):
    return f"faster than eager by {unit(-x)} us" if x <= 0 else f"{unit(x)} us"


def ratio(a, b):
    return a / b if a > 0 and b > 0 else None


def fmt_ratio(r):
    return f"n/a {NEGATIVE}" if r is None else f"{r:.2f}"


def geomean_line(title, rows, key_t, key_c, target):
    """The geomean over rows where both medians are positive and the calls were hits; every
    row left out is named, with why."""
    used, left_out = [], []
    for r in rows:
        a, b = r[key_t].median, r[key_c].median
        if r["problems"]:
            left_out.append(f"{r['name']} (not all cache hits: {'; '.join(r['problems'])})")
        elif ratio(a, b) is None:
            left_out.append(f"{r['name']} (tracer {fmt_value(a)}, torch.compile {fmt_value(b)}: "
                            f"not slower than eager, so no ratio)")
        else:
            used.append(a / b)
    gm = math.exp(statistics.mean(math.log(x) for x in used)) if used else float("nan")
    text = (f"**{title}: {gm:.2f}** ({target}; over {len(used)} of {len(rows)} rows)")
    if left_out:
        text += "; left out: " + "; ".join(left_out)
    return text, gm


def render(rows, ov_rows, notes, cfg):
    out = ["# frametracer vs torch.compile (backend=\"eager\")", ""]
    out.append(f"- python {platform.python_version()}, torch {torch.__version__}, "
               f"{platform.machine()}, {os.cpu_count()} cores, torch threads=1, "
               f"{'--quick' if cfg['quick'] else 'full run'} (seed {cfg['seed']}), load average at "
               f"the end {os.getloadavg()[0]:.2f}")
    out.append("- times are **thread CPU time** (time.thread_time_ns): other processes on the "
               "machine do not count; gc is off inside timed blocks; one-time import and setup "
               "costs of both front ends are paid before (an unrelated function and module)")
    out.append(f"- **hit overhead** = compiled block - eager block, paired within each of "
               f"{cfg['blocks']} blocks in which eager, the tracer and torch.compile run in a "
               f"random order (N calls each, N chosen per case so that a block takes ~4 ms): "
               f"median over blocks and its interquartile range (IQR), in us per call")
    out.append(f"- **first call** = CPU time of the first call on fresh caches minus the eager "
               f"call's median: median (min–max) of {cfg['compile_reps']} fresh compiles per "
               f"front end, in a random order each time, in ms")
    out.append("- every timed call is checked to be a cache hit (tracer.stats(): no frame traced, "
               "one hit per call, no recompile limit; torch._dynamo counters: no frame compiled, "
               f"no recompile limit); a row that fails is marked {NOT_HIT} and left out of geomeans")
    out.append(f"- {NEGATIVE} marks a median at or below zero, printed as \"faster by\" (the "
               "compiled call was not slower than eager: noise when within the IQR, else a real "
               "saving, see the notes); such rows have no ratio and are named under each geomean")
    out.append("- graphs/ops: the same counting backend for both (ops = call_function/call_method/"
               "call_module nodes), resume functions after graph breaks included")
    out += ["", "## First-call latency, capture and cache-hit overhead", "",
            "| case | eager call (us) | tracer first call (ms) | torch.compile first call (ms) | "
            "ratio | graphs tracer / tc | ops tracer / tc | tracer hit overhead (us) | "
            "torch.compile hit overhead (us) | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        name = r["name"] + (f" {NOT_HIT}" if r["problems"] else "")
        out.append(f"| {name} | {us(r['eager'].median)} | {fmt_range(r['lat_t'])} | "
                   f"{fmt_range(r['lat_c'])} | {fmt_ratio(ratio(r['lat_t'].median, r['lat_c'].median))} | "
                   f"{r['g_t']} / {r['g_c']} | {r['ops_t']} / {r['ops_c']} | {fmt_spread(r['hit_t'])} | "
                   f"{fmt_spread(r['hit_c'])} | {fmt_ratio(ratio(r['hit_t'].median, r['hit_c'].median))} |")
    lat_line, gm_lat = geomean_line("First-call latency geomean ratio", rows, "lat_t", "lat_c",
                                    "target <= 0.5")
    hit_line, _ = geomean_line("Cache-hit overhead geomean ratio (models and functions)", rows,
                               "hit_t", "hit_c", "lower is better")
    out += ["", lat_line, "", hit_line, "",
            "## Per-call overhead on a cache hit (4x4 float tensors)", "",
            f"Four systems interleaved per block ({cfg['calls']} calls each): eager, "
            "`tracer.compile`, torch.compile, and the plain function called inside "
            "`tracer.capture()` (the C frame hook finds the cache entry).", "",
            "| case | eager call (us) | tracer overhead (us) | hook overhead (us) | "
            "torch.compile overhead (us) | ratio tracer / tc | ratio hook / tc |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for r in ov_rows:
        name = r["name"] + (f" {NOT_HIT}" if r["problems"] else "")
        out.append(f"| {name} | {us(r['eager'].median)} | {fmt_spread(r['ov_t'])} | "
                   f"{fmt_spread(r['ov_hook'])} | {fmt_spread(r['ov_c'])} | "
                   f"{fmt_ratio(ratio(r['ov_t'].median, r['ov_c'].median))} | "
                   f"{fmt_ratio(ratio(r['ov_hook'].median, r['ov_c'].median))} |")
    ov_line, gm_ov = geomean_line("Per-call overhead geomean ratio", ov_rows, "ov_t", "ov_c",
                                  "target <= 0.5")
    hook_line, _ = geomean_line("Hook cache-hit overhead geomean ratio", ov_rows, "ov_hook", "ov_c",
                                "lower is better")
    out += ["", ov_line, "", hook_line, "", "## Notes", ""]
    problems = [f"- {NOT_HIT} **{r['name']}**: " + "; ".join(r["problems"]) for r in rows + ov_rows
                if r["problems"]]
    out.extend(problems + notes or ["- every case was captured by the tracer without fallback"])
    out.append("")
    return "\n".join(out), gm_lat, gm_ov


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats; noisier numbers")
    p.add_argument("--seed", type=int, default=0, help="seed of the random block orders")
    p.add_argument("--out", default=os.path.join(HERE, "results.md"),
                   help="where to write the markdown table ('' to skip)")
    a = p.parse_args(argv)
    print("warming up both front ends on an unrelated function and module "
          "(one-time import costs are excluded from the measurements)...", file=sys.stderr)
    rows, ov_rows, notes, cfg = run(a.quick, a.seed)
    text, _gl, _go = render(rows, ov_rows, notes, cfg)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
