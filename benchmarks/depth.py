"""First-call cost against depth: the tracer and torch.compile on the same model at 2 to 48
layers (issue 34).

Each measurement is a fresh child process: it builds the model (random weights, eval), then
times the process CPU time from the compile() call to the end of the first call, checks the
output against eager and prints JSON. Both tools pay the same imports on the first trace of a
process (torch._dynamo and what it imports, pulled in by FakeTensorMode's decompositions and a
ShapeEnv; transformers imports it anyway): the child imports it before the clock starts, and
the header gives that cost measured alone, so the table shows what the trace costs. Runs are interleaved (tracer, torch.compile, per depth,
repeated); the table shows medians.

    python benchmarks/depth.py [--reps 3] [--models encoder,llama] [--out benchmarks/depth.md]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

DEPTHS = {"encoder": (2, 6, 12, 24, 48), "llama": (2, 6, 12, 24), "llama_cache": (2, 6, 12, 24)}
WHAT = {
    "encoder": "nn.TransformerEncoder, d_model 64, 4 heads, eval, input (2, 10, 64)",
    "llama": "tiny HF LlamaForCausalLM (hidden 64), eval, `model(ids, use_cache=False)`, 8 tokens",
    "llama_cache": "the same LLaMA called as `model(ids)`: it makes a DynamicCache that every layer "
                   "updates; a layer is replayed, and its cache update traced again (a hole: "
                   "variables/block_holes.py)",
}


def build(name, layers):
    import torch
    torch.manual_seed(0)
    if name == "encoder":
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
        m = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
        return m, (torch.randn(2, 10, 64),)
    import transformers
    transformers.logging.set_verbosity_error()
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                   num_key_value_heads=2, num_hidden_layers=layers, vocab_size=100,
                                   max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 100, (1, 8))
    if name == "llama":
        return (lambda i: model(i, use_cache=False).logits), (ids,)
    return model, (ids,)


def child(model, layers, tool):
    import torch
    m, args = build(model, int(layers))
    import torch._dynamo  # noqa: F401 - both tools' first trace imports it: paid before the clock
    if tool == "tracer":
        import tracer
    t0 = time.process_time()
    compiled = tracer.compile(m, backend="eager") if tool == "tracer" else torch.compile(m, backend="eager")
    out = compiled(*args)
    seconds = time.process_time() - t0
    ref = m(*args)
    out, ref = getattr(out, "logits", out), getattr(ref, "logits", ref)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    result = {"ms": seconds * 1000}
    if tool == "tracer":
        s = tracer.stats()
        result.update(traced=s.frames_traced, graphs=s.graphs, breaks=s.graph_breaks, replayed=s.blocks_replayed)
    print(json.dumps(result))


def imports_alone():
    """CPU ms of the imports a first trace makes torch do (what both tools pay once)."""
    import torch
    t0 = time.process_time()
    import torch._dynamo  # noqa: F401 - the package FakeTensorMode's decompositions import
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    with FakeTensorMode(shape_env=ShapeEnv()):
        torch.empty(2, 3).transpose(0, 1).sum()
    print(json.dumps({"ms": (time.process_time() - t0) * 1000}))


def run_child(*argv):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("TRACER_CACHE_DIR", None)
    p = subprocess.run([sys.executable, __file__, "--child", *argv], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{argv} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs="+")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default="encoder,llama,llama_cache")
    ap.add_argument("--out", default=os.path.join(HERE, "depth.md"))
    a = ap.parse_args()
    if a.child:
        imports_alone() if a.child == ["imports"] else child(*a.child)
        return
    import torch
    imp = statistics.median(run_child("imports")["ms"] for _ in range(a.reps))
    lines = []
    for model in a.models.split(","):
        rows = {}
        for _ in range(a.reps):
            for n in DEPTHS[model]:
                for tool in ("tracer", "tc"):
                    rows.setdefault((n, tool), []).append(run_child(model, str(n), tool))
        lines += [f"\n## {model}\n", WHAT[model] + "\n",
                  "| layers | tracer | torch.compile | tracer / torch.compile | tracer x its 2-layer | "
                  "torch.compile x its 2-layer | tracer min, x its 2-layer min | tracer graphs, breaks, blocks replayed |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        med = {k: statistics.median(r["ms"] for r in v) for k, v in rows.items()}
        low = {k: min(r["ms"] for r in v) for k, v in rows.items()}  # (this machine's noise is one-sided)
        lo = DEPTHS[model][0]
        for n in DEPTHS[model]:
            t, c = med[(n, "tracer")], med[(n, "tc")]
            info = rows[(n, "tracer")][-1]
            tmin = low[(n, "tracer")]
            lines.append(f"| {n} | {t:.0f} | {c:.0f} | {t / c:.2f}x | {t / med[(lo, 'tracer')]:.1f}x | "
                         f"{c / med[(lo, 'tc')]:.1f}x | {tmin:.0f}, {tmin / low[(lo, 'tracer')]:.1f}x | "
                         f"{info['graphs']}, {info['breaks']}, {info['replayed']} |")
        hi = DEPTHS[model][-1]
        per_t = (med[(hi, "tracer")] - med[(lo, "tracer")]) / (hi - lo)
        per_c = (med[(hi, "tc")] - med[(lo, "tc")]) / (hi - lo)
        lines.append(f"\nPer layer ({lo} -> {hi}): tracer {per_t:.1f} ms, torch.compile {per_c:.1f} ms.")
        print("\n".join(lines[-len(DEPTHS[model]) - 5:]), flush=True)
    head = (f"# First call against depth\n\n`python benchmarks/depth.py` ({time.strftime('%Y-%m-%d')}; "
            f"CPython {platform.python_version()}, torch {torch.__version__}, {os.cpu_count()} cores, CPU, "
            f"backend \"eager\"). CPU ms of the process from the `compile()` call to the end of the first "
            f"call, fresh process each, median of {a.reps} (and the tracer's minimum), runs interleaved; "
            f"outputs equal eager in every run. Not in the "
            f"numbers: torch._dynamo's import, which both tools' first trace makes torch do "
            f"({imp:.0f} ms alone on this machine; transformers makes it anyway).\n")
    notes = ""  # what follows the tables (hand-written analyses) is kept
    if os.path.exists(a.out):
        with open(a.out) as fh:
            old = fh.read()
        if NOTES in old:
            notes = "\n" + old[old.index(NOTES):]
    with open(a.out, "w") as fh:
        fh.write(head + "\n".join(lines) + "\n" + notes)
    print("wrote", a.out)


NOTES = "<!-- notes: kept when the tables are written again -->"


if __name__ == "__main__":
    main()
