"""The vision zoo (timm, torchvision, diffusers) side by side with torch.compile: correctness,
graphs, breaks, warm retraces and first-call CPU time, per model and per family.

    python benchmarks/vision_zoo.py [name,name,...] [--modes eval,train] [--out benchmarks/vision_zoo.md]

Needs the extra "vision" (`make install TORCH=2.14.1 EXTRAS=test,vision`). Each model runs
through tests/zoo/harness.py's `check` (outputs and gradients equal eager's on the first call
and on fresh inputs, graphs and breaks beside torch.compile's, both with backend "eager"), then
its first call is timed: a fresh model, the tracer's first call and torch.compile's (after
`torch._dynamo.reset()`; which goes first alternates from model to model), CPU time
(time.process_time), torch._dynamo imported before timing.
A model whose check fails is listed with the failure. Not part of the tests.
"""
import os
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.join(HERE, "..", "tests", "zoo"))
warnings.simplefilter("ignore")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (imported up front: not counted in either first call)

import tracer  # noqa: E402
import harness  # noqa: E402
import vision_specs  # noqa: E402


def first_calls(build, inputs, train, flip=False):
    """CPU seconds of the tracer's and torch.compile's first call on a fresh model each
    (`flip`: torch.compile first; main() alternates, so neither always inherits the other's
    warmed caches)."""
    gen = torch.Generator().manual_seed(0)
    args, kwargs = inputs(gen, train)
    out = {}
    for front in (("torch.compile", "tracer") if flip else ("tracer", "torch.compile")):
        torch.manual_seed(0)
        model = build().train(train)
        harness.run(model, model, args, kwargs, train)  # eager warm-up (lazy init, allocator)
        tracer.reset()
        torch._dynamo.reset()
        fn = tracer.compile(model) if front == "tracer" else torch.compile(model, backend="eager")
        t = time.process_time()
        harness.run(fn, model, args, kwargs, train)
        out[front] = time.process_time() - t
    tracer.reset()
    torch._dynamo.reset()
    return out["tracer"], out["torch.compile"]


def measure(name, mode, flip=False):
    lib, family, build, inputs, _ = vision_specs.vision_specs()[name]
    train = mode == "train"
    row = dict(name=name, lib=lib, family=family, mode=mode)
    try:
        torch.manual_seed(0)
        c = harness.check(build(), lambda gen: inputs(gen, train), train=train,
                          warm="like_tc" if family == "detection" else True, atol=1e-4, rtol=1e-3)
        row.update(graphs=c.graphs, breaks=c.breaks, tc_graphs=c.tc_graphs, tc_breaks=c.tc_breaks,
                   fallbacks=c.fallbacks, warm=c.warm_frames, tc_warm=c.tc_warm_frames,
                   warm_graphs=c.warm_graphs, tc_warm_graphs=c.tc_warm_graphs, ok="yes",
                   reasons=list(c.break_reasons.items()) + list(c.fallback_reasons.items()))
        row["t_ours"], row["t_tc"] = first_calls(build, inputs, train, flip)
    except Exception as e:  # a failed check is a row, not the end of the run
        row.update(ok=f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        traceback.print_exc(limit=2)
    return row


def table(rows):
    lines = ["| model | library | family | mode | equal to eager | graphs tracer / tc | "
             "breaks tracer / tc | warm retraces tracer / tc: frames (graphs) | first call tracer / tc (s) | ratio |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["ok"] != "yes":
            lines.append(f"| {r['name']} | {r['lib']} | {r['family']} | {r['mode']} | {r['ok']} | | | | | |")
            continue
        tcw = "-" if r["tc_warm"] is None else f"{r['tc_warm']} ({r['tc_warm_graphs']})"
        ours = f"{r['warm']} ({r['warm_graphs']})" if r["tc_warm"] is not None else r["warm"]
        lines.append(f"| {r['name']} | {r['lib']} | {r['family']} | {r['mode']} | yes | {r['graphs']} / "
                     f"{r['tc_graphs']} | {r['breaks']} / {r['tc_breaks']} | {ours} / {tcw} | "
                     f"{r['t_ours']:.2f} / {r['t_tc']:.2f} | {r['t_ours'] / r['t_tc']:.2f}x |")
    return "\n".join(lines)


def family_table(rows):
    fams = {}
    for r in rows:
        if r["ok"] == "yes":
            f = fams.setdefault((r["lib"], r["family"]), [0, 0, 0, 0, 0.0, 0.0])
            for i, k in enumerate(("graphs", "tc_graphs", "breaks", "tc_breaks", "t_ours", "t_tc")):
                f[i] += r[k]
    lines = ["| library | family | graphs tracer / tc | breaks tracer / tc | first calls tracer / tc |",
             "|---|---|---:|---:|---:|"]
    tot = [0, 0, 0, 0, 0.0, 0.0]
    for (lib, fam), f in sorted(fams.items()):
        tot = [a + b for a, b in zip(tot, f)]
        lines.append(f"| {lib} | {fam} | {f[0]} / {f[1]} | {f[2]} / {f[3]} | {f[4] / f[5]:.2f}x |")
    if fams:
        lines.append(f"| all | | {tot[0]} / {tot[1]} | {tot[2]} / {tot[3]} | {tot[4] / tot[5]:.2f}x |")
    return "\n".join(lines)


def main(argv):
    values = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--modes", "--out")}
    names = [a for a in argv if not a.startswith("--") and a not in values]
    specs = vision_specs.vision_specs()
    if not specs:
        sys.exit("vision_zoo: torchvision, timm and diffusers are not installed (the extra 'vision')")
    names = names[0].split(",") if names else list(specs)
    modes = argv[argv.index("--modes") + 1].split(",") if "--modes" in argv else ["eval", "train"]
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    rows = []
    for name in names:
        for mode in modes:
            if mode == "train" and not specs[name][4]:
                continue
            r = measure(name, mode, flip=len(rows) % 2 == 1)
            rows.append(r)
            print(r["name"], r["mode"], r["ok"], r.get("graphs"), r.get("tc_graphs"), flush=True)
    versions = (f"torch {torch.__version__}, " + ", ".join(
        f"{m} {sys.modules[m].__version__}" for m in ("torchvision", "timm", "diffusers") if m in sys.modules))
    text = (f"# The vision zoo beside torch.compile\n\n`python benchmarks/vision_zoo.py` ({versions}; "
            f"CPython {sys.version.split()[0]}, CPU, backend \"eager\" for both).\n\n"
            f"## Per family\n\n{family_table(rows)}\n\n## Per model\n\n{table(rows)}\n")
    breaks = [f"- {r['name']} {r['mode']}: " + "; ".join(f"{reason[:140]} (x{n})" for reason, n in r["reasons"][:4])
              for r in rows if r["ok"] == "yes" and r["reasons"]]
    if breaks:
        text += "\n## What still breaks\n\n" + "\n".join(breaks) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
