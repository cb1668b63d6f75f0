"""frametracer vs torch.compile, side by side, in one process (`make bench`).

For every case both front ends compile the same function / nn.Module with an eager backend
(the graph's own forward), so the numbers compare the *frontends*: tracing, guards, codegen
and the per-call dispatch, not a compiler.

Measured per case:
  * compile latency: time of the first call minus one eager call (caches reset first);
  * per-call overhead on a cache hit: (compiled call - eager call), median over repeats of
    N calls each, gc disabled while timing, eager and compiled blocks interleaved;
  * graphs and ops captured (tracer: its cache entries; torch.compile: a counting backend).

Ratios are tracer / torch.compile (below 1: the tracer is faster / smaller).  The issue's
targets: compile-latency geomean ratio <= 0.5 and per-call overhead geomean ratio <= 0.5.

    python benchmarks/run.py            # full run, writes benchmarks/results.md
    python benchmarks/run.py --quick    # fewer repeats (numbers noisier)
"""
import argparse
import gc
import math
import io
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np
import torch
import torch._dynamo
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tracer  # noqa: E402

ns = time.perf_counter_ns


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------

def pw_sin_add_relu(x, y):
    return (x.sin() + y).relu()


def pw_gelu_chain(x):
    a = torch.tanh(x) * 0.5 + x.sigmoid()
    b = F.gelu(a) - a.abs().sqrt()
    return (a * b).exp().clamp(max=10.0)


def pw_scaled_sum(x, y, z):
    return (x * 2.0 + y / 3.0 - z).pow(2).mean(dim=-1)


def _helper(t, k):
    return t * k + 1


def control_flow(x, n):
    acc = x
    for i in range(n):
        if i % 2 == 0:
            acc = _helper(acc, i + 1)
        else:
            acc = acc.relu() - 0.5
    if x.shape[0] > 2:
        acc = acc.sum(0)
    return acc


def list_dict(x, y):
    parts = [x, y, x * y]
    d = {"a": parts[0] + 1, "b": parts[1] * 2}
    d["c"] = sum(parts)
    out = [v.cos() for v in d.values()]
    return {"sum": out[0] + out[1] + out[2], "n": len(out)}


_SINK = io.StringIO()


def brk_print(x, y):
    """A print in the middle: one graph on each side of the break."""
    a = torch.sin(x) + y
    print("checkpoint", file=_SINK)
    return torch.relu(a * 2).sum(0)


def brk_branch(x):
    """A branch on a tensor's value: the graph before it, then one per taken side."""
    y = x * 3 + 1
    if y.sum() > 0:
        return y.exp().mean(0)
    return y.neg().mean(0)


def brk_numpy(x):
    """A numpy call in the middle of tensor work (a random draw: neither tool traces it).

    torch.compile translates numpy *math* (np.linalg.norm, ...) into torch ops, which the
    tracer does not: on such calls it captures fewer ops (see the README)."""
    y = x.cos() * 2
    n = float(np.random.default_rng(0).random())
    return (y + n).tanh()


def args1(a):
    return a + 1


def args4(a, b, c, d):
    return a + b + c + d


def args16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    return (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
            + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15)


class MLP(nn.Module):
    def __init__(self, d=64, h=128, n_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, h)
        self.fc3 = nn.Linear(h, n_out)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.drop(F.relu(self.fc2(x)))
        return self.fc3(x)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.pool(x).flatten(1)
        return self.fc(x)


class GPTBlock(nn.Module):
    """A GPT-2 style pre-norm block written in plain PyTorch (no nn.MultiheadAttention)."""

    def __init__(self, d=64, n_head=4):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.ones(T, T).tril().view(1, 1, T, T)
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.fc_out(F.gelu(self.fc(self.ln2(x))))
        return x


def _t(*shape):
    return torch.randn(*shape)


def make_cases():
    """(name, kind, factory) -- factory() -> (callable, args); kind 'fn' or 'module'."""
    torch.manual_seed(0)

    def transformer():
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                           dropout=0.1, batch_first=True)
        m = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
        return m, (_t(2, 16, 64),)

    return [
        ("pointwise: sin+add+relu", "fn", lambda: (pw_sin_add_relu, (_t(8, 8), _t(8, 8)))),
        ("pointwise: gelu chain", "fn", lambda: (pw_gelu_chain, (_t(8, 8),))),
        ("pointwise: scaled sum/mean", "fn", lambda: (pw_scaled_sum, (_t(8, 8), _t(8, 8), _t(8, 8)))),
        ("control flow + helper", "fn", lambda: (control_flow, (_t(4, 8), 5))),
        ("list/dict building", "fn", lambda: (list_dict, (_t(8, 8), _t(8, 8)))),
        ("MLP (eval)", "module", lambda: (MLP().eval(), (_t(4, 64),))),
        ("small CNN (eval)", "module", lambda: (SmallCNN().eval(), (_t(2, 3, 16, 16),))),
        ("TransformerEncoder x2 (eval)", "module", transformer),
        ("GPT block (eval)", "module", lambda: (GPTBlock().eval(), (_t(2, 16, 64),))),
        ("break: print in the middle", "fn", lambda: (brk_print, (_t(8, 8), _t(8, 8)))),
        ("break: data-dependent branch", "fn", lambda: (brk_branch, (_t(8, 8).abs(),))),
        ("break: numpy call", "fn", lambda: (brk_numpy, (_t(8, 8),))),
    ]


OVERHEAD_CASES = [
    ("1 tensor arg", args1, 1),
    ("4 tensor args", args4, 4),
    ("16 tensor args", args16, 16),
]


# ----------------------------------------------------------------------------------------------
# Front ends
# ----------------------------------------------------------------------------------------------

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


def reset_all():
    torch._dynamo.reset()
    tracer.reset()


def tracer_entries(compiled):
    cf = compiled._compiled_forward if isinstance(compiled, tracer.CompiledModule) else compiled
    return cf.entries


def tracer_stats(compiled):
    """(graphs, ops, fallback reasons, graph-break reasons) from the root frame's entries."""
    entries = tracer_entries(compiled)
    ops = sum(e.ops for e in entries if e.code is not None)
    graphs = sum(1 for e in entries if e.code is not None and e.graph is not None)
    reasons = [f"{e.reason}" + (f" ({e.location})" if e.location else "")
               for e in entries if e.code is None]
    breaks = [f"{b.reason} ({os.path.basename(b.filename)}:{b.lineno})"
              for e in entries for b in (getattr(e, "breaks", None) or [])]
    return graphs, ops, reasons, breaks


# ----------------------------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------------------------

def _block(fn, args, n):
    t0 = ns()
    for _ in range(n):
        fn(*args)
    return ns() - t0


def hook_overhead_ns(fn, args, n, reps):
    """Per-call overhead of a cache hit through the C frame hook: `fn` called plainly inside
    `tracer.capture()` (the loop itself is marked skip so only `fn`'s frames are seen)."""
    from tracer.frame_hook import skip_code
    skip_code(_block.__code__)
    diffs = []
    with tracer.capture():
        for _ in range(3):
            fn(*args)
    gc.disable()
    try:
        for _ in range(reps):
            e = _block(fn, args, n)
            with tracer.capture():
                c = _block(fn, args, n)
            diffs.append((c - e) / n)
    finally:
        gc.enable()
    return statistics.median(diffs)


def median_eager_ns(fn, args, reps=7):
    for _ in range(2):
        fn(*args)
    gc.disable()
    try:
        return statistics.median(_block(fn, args, 1) for _ in range(reps))
    finally:
        gc.enable()


def per_call_overhead_ns(eager, compiled, args, n, reps):
    """Median over `reps` of (compiled block - eager block) / n; blocks interleaved."""
    for _ in range(3):
        eager(*args)
        compiled(*args)
    diffs, e_times, c_times = [], [], []
    gc.collect()
    gc.disable()
    try:
        for _ in range(reps):
            te = _block(eager, args, n)
            tc = _block(compiled, args, n)
            diffs.append((tc - te) / n)
            e_times.append(te / n)
            c_times.append(tc / n)
    finally:
        gc.enable()
    per_call_overhead_ns.last_min = min(c_times) - min(e_times)  # robust to load spikes
    return statistics.median(diffs), statistics.median(e_times), statistics.median(c_times)


def first_call_ns(make, compile_fn, eager_ns):
    """Compile and call once on fresh caches; return (first-call ns - eager ns, compiled)."""
    obj, args = make()
    reset_all()
    compiled = compile_fn(obj)
    gc.collect()
    gc.disable()
    try:
        t0 = ns()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(*args)
        t = ns() - t0
    finally:
        gc.enable()
    return t - eager_ns, compiled, obj, args


def check_same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.allclose(a, b, atol=1e-5, equal_nan=True)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(check_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(check_same(a[k], b[k]) for k in a)
    return a == b


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def warmup():
    """Pay one-time import/initialisation costs of both front ends on an unrelated function."""
    def unrelated(a, b):
        return torch.cos(a) * b - 1

    x = torch.randn(3, 5)
    reset_all()
    for comp in (compile_torch, compile_tracer):
        c = comp(unrelated)
        c(x, x)
        c(x, x)
    m = nn.Sequential(nn.Linear(5, 5), nn.ReLU()).eval()
    for comp in (compile_torch, compile_tracer):
        c = comp(m)
        c(x)
        c(x)
    reset_all()


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------

def us(x):
    return f"{x / 1e3:.1f}"


def ms(x):
    return f"{x / 1e6:.1f}"


def ratio(a, b):
    return a / b if b and b > 0 and a > 0 else float("nan")


def fmt_ratio(r):
    return "n/a (<0)" if not math.isfinite(r) else f"{r:.2f}"


def run(quick):
    torch.set_num_threads(1)
    compile_reps = 1 if quick else 3
    n_calls, reps = (200, 5) if quick else (500, 31)
    hit_n, hit_reps = (50, 5) if quick else (100, 11)

    warmup()

    rows = []
    notes = []
    for name, kind, make in make_cases():
        obj, args = make()
        eager_ns = median_eager_ns(obj, args)

        lat_t, lat_c = [], []
        for _ in range(compile_reps):
            t, ctr, _o, _a = first_call_ns(make, compile_tracer, eager_ns)
            lat_t.append(t)
            t, _ctc, _o, _a = first_call_ns(make, compile_torch, eager_ns)
            lat_c.append(t)
        lat_t, lat_c = statistics.median(lat_t), statistics.median(lat_c)

        # counts + correctness + per-call overhead on this case
        reset_all()
        torch.manual_seed(0)
        obj, args = make()
        expected = obj(*args)
        ct = compile_tracer(obj)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out_t = ct(*args)
        g_t, ops_t, reasons, breaks = tracer_stats(ct)
        # cross-check with the same counting backend torch.compile gets: it also sees graphs
        # compiled for resume functions after a graph break (not in the root's entries)
        reset_all()
        tcount = Counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile_tracer(obj, backend=tcount)(*args)
        if (tcount.graphs, tcount.ops) != (g_t, ops_t):
            notes.append(f"- **{name}**: tracer root entries: {g_t} graph(s), {ops_t} ops; the "
                         f"counting backend saw {tcount.graphs} graph(s), {tcount.ops} ops "
                         "(resume functions after graph breaks); the table shows the latter")
            g_t, ops_t = tcount.graphs, tcount.ops
        if breaks:
            notes.append(f"- **{name}**: tracer graph breaks: " + "; ".join(breaks))
        counter = Counter()
        cc = compile_torch(obj, backend=counter)
        out_c = cc(*args)
        ok_t = check_same(expected, out_t)
        ok_c = check_same(expected, out_c)
        per_call_overhead_ns(obj, ct, args, hit_n, hit_reps)
        hit_t = per_call_overhead_ns.last_min  # min-based: these calls are long, load spikes hit them
        per_call_overhead_ns(obj, cc, args, hit_n, hit_reps)
        hit_c = per_call_overhead_ns.last_min
        if reasons:
            notes.append(f"- **{name}**: tracer fell back: " + "; ".join(reasons))
        if ops_t != counter.ops and not reasons:
            notes.append(f"- **{name}**: op counts differ ({ops_t} vs {counter.ops}): the tracer "
                         "records a torch.nn leaf module (e.g. nn.MultiheadAttention, nn.Linear) "
                         "as one call_module node, torch.compile inlines modules into functions")
        if not ok_t:
            notes.append(f"- **{name}**: tracer output differs from eager!")
        if not ok_c:
            notes.append(f"- **{name}**: torch.compile output differs from eager!")
        rows.append(dict(name=name, eager=eager_ns, lat_t=lat_t, lat_c=lat_c,
                         g_t=g_t, g_c=counter.graphs, ops_t=ops_t, ops_c=counter.ops,
                         hit_t=hit_t, hit_c=hit_c, fallback=bool(reasons)))
        print(f"  {name}: compile {ms(lat_t)} ms vs {ms(lat_c)} ms; graphs {g_t}/{counter.graphs} "
              f"ops {ops_t}/{counter.ops}; hit overhead {us(hit_t)} us vs {us(hit_c)} us"
              + ("  [tracer fallback]" if reasons else ""), file=sys.stderr)

    ov_rows = []
    for name, fn, k in OVERHEAD_CASES:
        args = tuple(torch.randn(4, 4) for _ in range(k))
        reset_all()
        ct = compile_tracer(fn)
        cc = compile_torch(fn)
        ov_t, eag_t, comp_t = per_call_overhead_ns(fn, ct, args, n_calls, reps)
        ov_t_min = per_call_overhead_ns.last_min
        ov_c, eag_c, comp_c = per_call_overhead_ns(fn, cc, args, n_calls, reps)
        ov_c_min = per_call_overhead_ns.last_min
        fallback = any(e.code is None for e in tracer_entries(ct))
        reset_all()
        ov_hook = hook_overhead_ns(fn, args, n_calls, reps)
        ov_rows.append(dict(name=name, eager=(eag_t + eag_c) / 2, ov_t=ov_t, ov_c=ov_c,
                            ov_t_min=ov_t_min, ov_c_min=ov_c_min, fallback=fallback,
                            ov_hook=ov_hook))
        print(f"  overhead {name}: tracer {us(ov_t)} us, torch.compile {us(ov_c)} us", file=sys.stderr)

    reset_all()
    return rows, ov_rows, notes, dict(quick=quick, compile_reps=compile_reps, n_calls=n_calls,
                                      reps=reps, hit_n=hit_n, hit_reps=hit_reps)


def render(rows, ov_rows, notes, cfg):
    out = []
    out.append("# frametracer vs torch.compile (backend=\"eager\")")
    out.append("")
    out.append(f"- python {platform.python_version()}, torch {torch.__version__}, "
               f"{platform.machine()}, {os.cpu_count()} cores, torch threads=1, "
               f"{'--quick' if cfg['quick'] else 'full run'}, load average at the end "
               f"{os.getloadavg()[0]:.2f} (a shared machine: small differences are noise)")
    out.append("- both front ends run in one process; before any measurement each compiled an "
               "unrelated function and an unrelated nn.Module once, so one-time import and "
               "initialisation costs (torch._dynamo imports and setup, fake-tensor setup, "
               "the tracer's own imports) are paid outside the measurements")
    out.append("- compile latency = first call on fresh caches (`torch._dynamo.reset()` + "
               "`tracer.reset()`) minus one eager call; median of "
               f"{cfg['compile_reps']} fresh compile(s)")
    out.append(f"- hit overhead = compiled call - eager call on a cache hit; median of "
               f"{cfg['reps']} interleaved blocks of {cfg['n_calls']} calls (gc disabled); "
               f"in the first table (all cases) min-based instead: fastest of {cfg['hit_reps']} "
               f"compiled blocks - fastest of {cfg['hit_reps']} eager blocks of {cfg['hit_n']} calls")
    out.append("- graphs/ops: tracer from its cache entries (ops = call_function/call_method/"
               "call_module nodes), torch.compile from a counting backend")
    out.append("- ratio = tracer / torch.compile (below 1: the tracer is faster).  A negative "
               "overhead means the compiled call was faster than eager: noise for tiny "
               "differences, real for TransformerEncoder (the graph skips the eager module's "
               "Python fast-path checks; torch.compile also inlines nn.MultiheadAttention's); "
               "such rows have no ratio (n/a) and are left out of geomeans")
    out.append("")
    out.append("## Compile latency and capture")
    out.append("")
    out.append("| case | eager call (us) | tracer compile (ms) | torch.compile (ms) | ratio | "
               "graphs tracer / tc | ops tracer / tc | hit overhead tracer / tc (us) | ratio |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        name = r["name"] + (" **(tracer fallback)**" if r["fallback"] else "")
        out.append(f"| {name} | {us(r['eager'])} | {ms(r['lat_t'])} | {ms(r['lat_c'])} | "
                   f"{fmt_ratio(ratio(r['lat_t'], r['lat_c']))} | {r['g_t']} / {r['g_c']} | "
                   f"{r['ops_t']} / {r['ops_c']} | {us(r['hit_t'])} / {us(r['hit_c'])} | "
                   f"{fmt_ratio(ratio(r['hit_t'], r['hit_c']))} |")
    gm_lat = geomean([ratio(r["lat_t"], r["lat_c"]) for r in rows])
    gm_lat_nf = geomean([ratio(r["lat_t"], r["lat_c"]) for r in rows if not r["fallback"]])
    out.append("")
    out.append(f"**Compile latency geomean ratio: {gm_lat:.2f}** (target <= 0.5); "
               f"over cases the tracer captured (no fallback): {gm_lat_nf:.2f}")
    out.append("")
    out.append("## Per-call overhead on a cache hit (4x4 float tensors)")
    out.append("")
    out.append("| case | eager call (us) | tracer overhead (us) | torch.compile overhead (us) | "
               "ratio | min-based: tracer / tc (us) | min-based ratio |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in ov_rows:
        name = r["name"] + (" **(tracer fallback)**" if r["fallback"] else "")
        out.append(f"| {name} | {us(r['eager'])} | {us(r['ov_t'])} | {us(r['ov_c'])} | "
                   f"{fmt_ratio(ratio(r['ov_t'], r['ov_c']))} | "
                   f"{us(r['ov_t_min'])} / {us(r['ov_c_min'])} | "
                   f"{fmt_ratio(ratio(r['ov_t_min'], r['ov_c_min']))} |")
    gm_ov = geomean([ratio(r["ov_t"], r["ov_c"]) for r in ov_rows])
    gm_ov_min = geomean([ratio(r["ov_t_min"], r["ov_c_min"]) for r in ov_rows])
    out.append("")
    out.append(f"**Per-call overhead geomean ratio: {gm_ov:.2f}** (target <= 0.5; median of "
               f"interleaved block differences).  Min-based (fastest compiled block - fastest "
               f"eager block, less sensitive to other load on the machine): {gm_ov_min:.2f}")
    out.append("")
    out.append("## Per-call overhead of a cache hit through the C frame hook (`tracer.capture()`)")
    out.append("")
    out.append("The plain function called inside `with tracer.capture():` (the PEP 523 hook finds the "
               "cache entry and runs the rewritten code) vs the same function through torch.compile.")
    out.append("")
    out.append("| case | hook overhead (us) | torch.compile overhead (us) | ratio |")
    out.append("|---|---:|---:|---:|")
    for r in ov_rows:
        out.append(f"| {r['name']} | {us(r['ov_hook'])} | {us(r['ov_c'])} | "
                   f"{fmt_ratio(ratio(r['ov_hook'], r['ov_c']))} |")
    gm_hook = geomean([ratio(r["ov_hook"], r["ov_c"]) for r in ov_rows])
    out.append("")
    out.append(f"**Hook cache-hit overhead geomean ratio: {gm_hook:.2f}**")
    out.append("")
    out.append("## Notes")
    out.append("")
    out.extend(notes or ["- every case was captured by the tracer without fallback"])
    out.append("")
    return "\n".join(out), gm_lat, gm_ov


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats; noisier numbers")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "results.md"),
                   help="where to write the markdown table ('' to skip)")
    a = p.parse_args(argv)
    print("warming up both front ends on an unrelated function and module "
          "(one-time import costs are excluded from the measurements)...", file=sys.stderr)
    rows, ov_rows, notes, cfg = run(a.quick)
    text, _gl, _go = render(rows, ov_rows, notes, cfg)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
        print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
