"""Warm start: a second process's first call, with the tracer's disk cache and with torch.compile's
own caches, side by side (issue 33).

Each measurement is a fresh child process (a warm start is about processes): it builds the model,
then times the CPU seconds from the compile() call to the end of the first call (thread-independent
process CPU time), checks the output against eager, and prints JSON.

- tracer cold: an empty TRACER_CACHE_DIR (which also holds inductor's caches: TORCHINDUCTOR_CACHE_DIR
  defaults under it); tracer warm: the directory a cold run filled.
- torch.compile cold: an empty TORCHINDUCTOR_CACHE_DIR; torch.compile warm: one a cold run filled
  (its FX graph cache and AOTAutograd cache, on by default; Dynamo itself traces again: it has no
  cache of its own across processes).

Runs are interleaved (tracer cold, tracer warm, torch.compile cold, torch.compile warm, repeated);
the table shows medians and the ratio warm / cold of each tool.

    python benchmarks/warm_start.py [--reps 3] [--backends eager,inductor] [--out benchmarks/warm_start.md]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MODELS = ("encoder12", "gpt2", "two_breaks")


def build(name):
    import torch
    torch.manual_seed(0)
    if name == "encoder12":
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
        m = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval()
        return m, (torch.randn(2, 10, 64),)
    if name == "gpt2":
        import transformers
        transformers.logging.set_verbosity_error()
        cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=100, n_positions=64,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg).eval(), (torch.randint(0, 100, (1, 8)),)
    sys.path.insert(0, HERE)
    from warm_start_fn import two_breaks
    return two_breaks, (torch.randn(16), 3)


def on_device(m, args):
    """WARM_START_DEVICE=cuda: the model and its tensor inputs on that device (the GPU run:
    .ci/gpu-check); inductor keeps its Triton kernels under its cache directory."""
    dev = os.environ.get("WARM_START_DEVICE")
    if not dev:
        return m, args
    import torch
    m = m.to(dev) if isinstance(m, torch.nn.Module) else m
    return m, tuple(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args)


def child(model, tool, backend):
    import torch
    m, args = on_device(*build(model))
    if tool == "tracer":
        import tracer
    w0 = time.perf_counter()
    if tool == "tracer":
        t0 = time.process_time()
        compiled = tracer.compile(m, backend=backend)
    else:
        t0 = time.process_time()
        compiled = torch.compile(m, backend=backend)
    with torch.no_grad():
        out = compiled(*args)
    seconds = time.process_time() - t0
    wall = time.perf_counter() - w0
    with torch.no_grad():
        ref = m(*args)
    out, ref = (getattr(out, "logits", out), getattr(ref, "logits", ref))
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    result = {"ms": seconds * 1000, "wall": wall * 1000}
    if tool == "tracer":
        s = tracer.stats()
        result.update(traced=s.frames_traced, loaded=s.cache_loaded, unsaved=len(s.cache_unsaved))
    print(json.dumps(result))


def run_child(model, tool, backend, env_extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH")))), **env_extra)
    env.pop("TRACER_CACHE_DIR", None) if "TRACER_CACHE_DIR" not in env_extra else None
    env.pop("TORCHINDUCTOR_CACHE_DIR", None) if "TORCHINDUCTOR_CACHE_DIR" not in env_extra else None
    p = subprocess.run([sys.executable, __file__, "--child", model, tool, backend], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{model} {tool} {backend} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def _tracer_env(cache_dir):
    return {"TRACER_CACHE_DIR": cache_dir, "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, "inductor")}


def measure(model, backend, reps, key):
    rows = {k: [] for k in ("tracer cold", "tracer warm", "tc cold", "tc warm")}
    info = {}
    with tempfile.TemporaryDirectory() as tmp:
        warm_tracer = os.path.join(tmp, "tracer-warm")
        warm_tc = os.path.join(tmp, "tc-warm")
        # inductor's caches beside the tracer's, named outright: a library imported before the
        # tracer's first compile (transformers) may fix inductor's default directory first
        run_child(model, "tracer", backend, _tracer_env(warm_tracer))  # fill both
        run_child(model, "tc", backend, {"TORCHINDUCTOR_CACHE_DIR": warm_tc})
        for r in range(reps):
            cold = run_child(model, "tracer", backend, _tracer_env(os.path.join(tmp, f"tc{r}")))
            warm = run_child(model, "tracer", backend, _tracer_env(warm_tracer))
            rows["tracer cold"].append(cold)
            rows["tracer warm"].append(warm)
            info = {"traced cold": cold["traced"], "traced warm": warm["traced"], "loaded": warm["loaded"],
                    "unsaved": cold["unsaved"]}
            rows["tc cold"].append(run_child(model, "tc", backend,
                                             {"TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, f"ind{r}")}))
            rows["tc warm"].append(run_child(model, "tc", backend, {"TORCHINDUCTOR_CACHE_DIR": warm_tc}))
    return {key: {k: statistics.median(x[key] for x in v) for k, v in rows.items()}
            for key in ("ms", "wall")}, info


def _device_name():
    import torch
    dev = os.environ.get("WARM_START_DEVICE")
    return "CPU" if not dev or dev == "cpu" else f"models on {torch.cuda.get_device_name()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backends", default="eager,inductor")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=os.path.join(HERE, "warm_start.md"))
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    import torch
    header = ("| model | backend | tracer cold | tracer warm | warm / cold | frames traced warm (cold) | "
              "torch.compile cold | torch.compile warm | warm / cold | tracer warm / torch.compile warm |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    tables = {"ms": [], "wall": []}
    for backend in a.backends.split(","):
        for model in a.models.split(","):
            both, info = measure(model, backend, a.reps, None)
            for key, med in both.items():
                row = (f"| {model} | {backend} | {med['tracer cold']:.0f} | {med['tracer warm']:.0f} | "
                       f"{med['tracer warm'] / med['tracer cold']:.2f}x | {info['traced warm']} "
                       f"({info['traced cold']}) | {med['tc cold']:.0f} | {med['tc warm']:.0f} | "
                       f"{med['tc warm'] / med['tc cold']:.2f}x | {med['tracer warm'] / med['tc warm']:.2f}x |")
                tables[key].append(row)
            print(tables["ms"][-1], "| wall:", tables["wall"][-1], flush=True)
    lines = [
        "# Warm start: the second process's first call",
        "",
        f"`python benchmarks/warm_start.py` ({time.strftime('%Y-%m-%d')}; CPython {platform.python_version()}, "
        f"torch {torch.__version__}, {os.cpu_count()} cores, {_device_name()}). Each number is the median of {a.reps} "
        "fresh processes, from the `compile()` call to the end of the first call (the model built "
        "and torch imported before). cold: empty caches; warm: the caches a first process filled "
        "(tracer: `TRACER_CACHE_DIR`, which also holds inductor's caches; torch.compile: "
        "`TORCHINDUCTOR_CACHE_DIR`, its FX graph and AOTAutograd caches; Dynamo itself keeps "
        "nothing between processes). Outputs equal eager in every run.",
        "",
        "## CPU time of the process (ms)",
        "",
        header, *tables["ms"],
        "",
        "## Wall time (ms)",
        "",
        "inductor compiles its C++ kernels in child processes (gcc), whose CPU time the table above "
        "does not count; wall time does.",
        "",
        header, *tables["wall"],
        "",
        "Models: `encoder12` is nn.TransformerEncoder (d_model 64, 12 layers, eval); `gpt2` a "
        "tiny HF GPT2LMHeadModel (2 layers, random weights); `two_breaks` a function with a `print` "
        "and a data-dependent `if` (three frames: the function and two resume functions).",
        "",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
