"""inductor on a GPU, beside torch.compile: first-call and warm-call time per model, with and
without CUDA graphs (mode="reduce-overhead"). Results: benchmarks/gpu.md.

    python benchmarks/gpu.py --out DIR [--models gpt2,llama,resnet50,vit,t5] [--device cuda]
    (GPU_BENCH_LAYERS=N: the transformers' depth, 6 by default)

How it measures, and why so:
* First call (compile + first run, wall and CPU time of the process, GPU synchronised) in a
  fresh process per (model, tool, mode), each with its own empty inductor and Triton cache
  directories: compiled kernels are cached on disk and in memory, so a second compile in the
  same process (or the same cache directory) would be warm and flatter the later tool. The four
  processes of one model run at once (same machine load for each).
* Warm calls in those same processes once all four have compiled: they take turns, one block
  of N calls at a time under a file lock (interleaved blocks, one process on the GPU at a
  time); per call = wall time of the block, synchronised, / N; the median over blocks. Each
  timed call must be a cache hit: a process that traced or compiled during its blocks says so.
* Every compiled output is compared with eager on the same inputs first.
The card and the torch version are printed beside every number.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ("tracer", "torch.compile")
MODES = ("default", "reduce-overhead")
# beside them: the tracer with its repeated blocks given to inductor as one subgraph each
# (config.inductor_subgraphs, off by default), default mode: what that changes
VARIANTS = [(tool, mode) for tool in TOOLS for mode in MODES] + [("tracer-subgraphs", "default")]


# ---- models (random weights, nothing downloaded) --------------------------------------------
def build(name, device, tiny=False):
    """(model, args, kwargs, loss-free call) for `name`: eval, no_grad, the serving shape."""
    import torch
    torch.manual_seed(0)
    L = int(os.environ.get("GPU_BENCH_LAYERS", 1 if tiny else 6))
    if name in ("gpt2", "llama", "t5", "vit"):
        import transformers as tf
    if name == "gpt2":
        m = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=L, n_embd=64 if tiny else 768, n_head=4 if tiny else 12,
                                             vocab_size=1000 if tiny else 50257))
        kw = dict(input_ids=torch.randint(0, m.config.vocab_size, (8, 128)))
    elif name == "llama":
        m = tf.LlamaForCausalLM(tf.LlamaConfig(num_hidden_layers=L, hidden_size=64 if tiny else 768,
                                               num_attention_heads=4 if tiny else 12, num_key_value_heads=2 if tiny else 4,
                                               intermediate_size=128 if tiny else 2048,
                                               vocab_size=1000 if tiny else 32000))
        kw = dict(input_ids=torch.randint(0, m.config.vocab_size, (8, 128)))
    elif name == "t5":
        m = tf.T5ForConditionalGeneration(tf.T5Config(num_layers=L, num_decoder_layers=L, d_model=64 if tiny else 512,
                                                      d_ff=128 if tiny else 2048, num_heads=4 if tiny else 8,
                                                      d_kv=16 if tiny else 64, vocab_size=1000 if tiny else 32128))
        kw = dict(input_ids=torch.randint(0, 1000, (8, 64)), decoder_input_ids=torch.randint(0, 1000, (8, 32)))
    elif name == "vit":
        m = tf.ViTModel(tf.ViTConfig(num_hidden_layers=L, hidden_size=64 if tiny else 768,
                                     num_attention_heads=4 if tiny else 12, intermediate_size=128 if tiny else 3072,
                                     image_size=32 if tiny else 224, patch_size=16))
        kw = dict(pixel_values=torch.randn(8 if not tiny else 2, 3, m.config.image_size, m.config.image_size))
    elif name == "resnet50":
        import torchvision
        m = torchvision.models.resnet50(weights=None) if not tiny else torchvision.models.resnet18(weights=None)
        kw = dict(x=torch.randn(16 if not tiny else 2, 3, 224 if not tiny else 64, 224 if not tiny else 64))
    else:
        raise SystemExit(f"unknown model {name!r}")
    m = m.to(device).eval()
    kw = {k: v.to(device) for k, v in kw.items()}
    if name == "resnet50":
        return m, (kw["x"],), {}
    return m, (), kw


def _main_output(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state"):
        if hasattr(out, key):
            return getattr(out, key)
    return out[0]


# ---- one process: one model, one tool, one mode ---------------------------------------------
def one(args):
    import torch
    import tracer
    from torch._dynamo.utils import counters
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    model, a, kw = build(args.model, args.device, args.tiny)
    mode = None if args.mode == "default" else args.mode
    with torch.no_grad():
        want = _main_output(model(*a, **kw)).clone()
        sync()
        w0, c0 = time.perf_counter(), time.process_time()
        if args.tool.startswith("tracer"):
            tracer.config.inductor_subgraphs = args.tool == "tracer-subgraphs"
            compiled = tracer.compile(model, backend="inductor", mode=mode)
        else:
            compiled = torch.compile(model, backend="inductor", mode=mode)
        got = _main_output(compiled(*a, **kw)).clone()
        sync()
        first_wall, first_cpu = time.perf_counter() - w0, time.process_time() - c0
        err = (got.float() - want.float()).abs().max().item()
        ok = torch.allclose(got.float(), want.float(), atol=2e-2, rtol=2e-2)
        for _ in range(5):
            compiled(*a, **kw)
        sync()
        snap = (tracer.stats().frames_traced, counters["stats"]["unique_graphs"])
        _ready(args.sync_dir, args.expect)
        per_call, cpu_per_call = [], []
        for _ in range(args.blocks):
            with _turn(args.sync_dir):
                sync()
                w, c = time.perf_counter(), time.process_time()
                for _ in range(args.calls):
                    compiled(*a, **kw)
                sync()
                per_call.append((time.perf_counter() - w) / args.calls)
                cpu_per_call.append((time.process_time() - c) / args.calls)
        retraced = (tracer.stats().frames_traced, counters["stats"]["unique_graphs"]) != snap
    s = tracer.stats()
    print(json.dumps(dict(model=args.model, tool=args.tool, mode=args.mode, first_wall_s=first_wall,
                          first_cpu_s=first_cpu, warm_ms=statistics.median(per_call) * 1e3,
                          warm_cpu_ms=statistics.median(cpu_per_call) * 1e3, max_abs_err=err, equal=bool(ok),
                          compiled_during_warm=retraced,
                          tracer_graphs=s.graphs if args.tool.startswith("tracer") else None,
                          tc_graphs=counters["stats"]["unique_graphs"] if args.tool == "torch.compile" else None)))


def _ready(sync_dir, expect):
    """Wait until the `expect` processes of this model have compiled (their warm blocks then
    interleave, none of them compiling while another is timed)."""
    open(os.path.join(sync_dir, f"ready.{os.getpid()}"), "w").close()
    while sum(n.startswith("ready.") for n in os.listdir(sync_dir)) < expect:
        time.sleep(0.05)


class _turn:
    def __init__(self, sync_dir):
        self.path = os.path.join(sync_dir, "lock")

    def __enter__(self):
        self.f = open(self.path, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()
        time.sleep(0.001)  # (let a waiting process take the next turn)


# ---- the driver ------------------------------------------------------------------------------
def run_model(name, args):
    sync_dir = tempfile.mkdtemp(prefix=f"gpu-{name}-")
    procs = []
    for tool, mode in VARIANTS:
        cache = tempfile.mkdtemp(prefix="cache-")
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
                   TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        cmd = [sys.executable, __file__, "--one", "--model", name, "--tool", tool, "--mode", mode,
               "--device", args.device, "--sync-dir", sync_dir, "--expect", str(len(VARIANTS)),
               "--blocks", str(args.blocks), "--calls", str(args.calls)] + (["--tiny"] if args.tiny else [])
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    rows = []
    for p in procs:
        out, err = p.communicate(timeout=args.timeout)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if p.returncode or not lines:
            rows.append(dict(model=name, error=(err.strip().splitlines() or ["?"])[-1][:300]))
            # (a failed process never reaches the barrier: the others are waiting on it)
            for q in procs:
                q.kill()
            break
        rows.append(json.loads(lines[-1]))
    return rows


def table(rows, card, torch_version):
    by = {(r["model"], r["tool"], r["mode"]): r for r in rows if "error" not in r}
    lines = [f"Card: {card}; torch {torch_version}; inductor; eval under no_grad; times in a fresh "
             f"process each (first call) and interleaved blocks (warm, median).", "",
             "| model | mode | first call tracer s | first call torch.compile s | ratio | warm tracer ms | "
             "warm torch.compile ms | ratio | graphs (tracer / tc) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for (model, tool, mode), r in sorted(by.items()):
        if not tool.startswith("tracer") or (model, "torch.compile", mode) not in by:
            continue
        t = by[(model, "torch.compile", mode)]
        label = mode if tool == "tracer" else f"{mode}, blocks as subgraphs"
        lines.append(f"| {model} | {label} | {r['first_wall_s']:.1f} | {t['first_wall_s']:.1f} | "
                     f"{r['first_wall_s'] / t['first_wall_s']:.2f}x | {r['warm_ms']:.3f} | {t['warm_ms']:.3f} | "
                     f"{r['warm_ms'] / t['warm_ms']:.2f}x | {r['tracer_graphs']} / {t['tc_graphs']} |")
    for r in rows:
        if "error" in r:
            lines.append(f"\n{r['model']}: {r['error']}")
        elif not r["equal"] or r["compiled_during_warm"]:
            lines.append(f"\n{r['model']} {r['tool']} {r['mode']}: equal={r['equal']} (max err "
                         f"{r['max_abs_err']:.3g}), compiled during warm calls={r['compiled_during_warm']}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--models", default="gpt2,llama,resnet50,vit,t5")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="one-layer models (to check the script itself)")
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--one", action="store_true")
    ap.add_argument("--model"), ap.add_argument("--tool"), ap.add_argument("--mode")
    ap.add_argument("--sync-dir"), ap.add_argument("--expect", type=int, default=1)
    args = ap.parse_args()
    if args.one:
        return one(args)
    import torch
    card = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    rows = []
    for name in args.models.split(","):
        t0 = time.perf_counter()
        got = run_model(name, args)
        rows += got
        print(f"{name}: {time.perf_counter() - t0:.0f} s", *(json.dumps(r) for r in got), sep="\n", flush=True)
        if args.out:
            with open(os.path.join(args.out, "gpu_rows.json"), "w") as f:
                json.dump(rows, f, indent=1)
    text = table(rows, card, torch.__version__)
    print(text)
    if args.out:
        with open(os.path.join(args.out, "gpu_table.md"), "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
