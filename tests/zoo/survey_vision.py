import sys, time, traceback, warnings, os
sys.path.insert(0, os.getcwd() + "/tests/zoo"); sys.path.insert(0, os.getcwd())
warnings.filterwarnings("ignore")
import torch, harness, vision_specs, tracer
specs = vision_specs.vision_specs()
sel = sys.argv[1:] or list(specs)
modes = os.environ.get("MODES", "eval").split(",")
for name in sel:
  lib, fam, build, inputs, train_ok = specs[name]
  for mode in modes:
    if mode == "train" and not train_ok: continue
    t = time.time()
    try:
        torch.manual_seed(0); m = build()
        c = harness.check(m, lambda g: inputs(g, mode == "train"), train=mode == "train")
        print(f"{name:24s} {mode:5s} ours {c.graphs:3d}g {c.breaks:3d}b fb{c.fallbacks}  tc {c.tc_graphs:3d}g {c.tc_breaks:3d}b  {time.time()-t:.1f}s", flush=True)
        if c.graphs > c.tc_graphs or c.fallbacks:
            for r, n in list(c.break_reasons.items())[:12]: print(f"     break x{n}: {r[:200]}")
            for r, n in list(c.fallback_reasons.items())[:4]: print(f"     fallback x{n}: {r[:200]}")
    except Exception as e:
        print(f"{name:24s} {mode:5s} FAIL {type(e).__name__}: {str(e)[:300]}  {time.time()-t:.1f}s", flush=True)
