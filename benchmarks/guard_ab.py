"""A/B of the C guard check: the same guard program built by this checkout's guards._fastcheck
and by another build of it, timed in one process (interleaved blocks, thread CPU time).

    python benchmarks/guard_ab.py te12,te2,gpt2,llama --old DIR

DIR holds the other build's extension files under DIR/oldguards/ (_fastcheck*.so and
_tensormeta*.so, e.g. copied from a checkout of the commit to compare with, after
`make install`). Why in one process: on a shared machine two runs minutes apart differ by
more than the change being measured; blocks of the two builds side by side do not.
"""
import argparse
import glob
import importlib.util
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import guards.fastpath as fp  # noqa: E402
import tracer  # noqa: E402
from cache_hits import MODELS, check_inputs  # noqa: E402


def _load(old_dir, name):
    path = glob.glob(os.path.join(old_dir, "oldguards", f"{name}.cpython-{sys.version_info[0]}{sys.version_info[1]}*.so"))[0]
    spec = importlib.util.spec_from_file_location(f"oldguards.{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("keys", help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--old", required=True)
    ap.add_argument("--blocks", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    old_fc, old_tm = _load(a.old, "_fastcheck"), _load(a.old, "_tensormeta")
    old_fc.set_tensor_api(old_tm._C_API)
    built = []
    real = fp.fc.Program

    class Recording:  # keeps the arguments each Program of this checkout is built from
        def __call__(self, *args):
            prog = real(*args)
            built.append((prog, args))
            return prog

    fp.fc = type("fc", (), {k: getattr(fp.fc, k) for k in dir(fp.fc) if not k.startswith("__")})
    fp.fc.Program = Recording()
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)  # as cache_hits.py measures: models in eval, under no_grad
    for key in a.keys.split(","):
        label, make, _kind = MODELS[key]
        torch.manual_seed(0)
        obj, args, kwargs = make()
        tracer.reset()
        built.clear()
        compiled = tracer.compile(obj)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                compiled(*args, **kwargs)
        check, L, G, C = check_inputs(compiled, obj, args, kwargs)
        full, slow, nodes, ops = next(a_ for p, a_ in built if p is check)
        gs = slow.__self__

        def old_slow(L, G, C):  # the protocol of GuardSet._slow_check, for the old program
            token = old.capture(L, G, C)
            ok = gs.full_check(L, G, C)
            if token:
                old.commit(L, G, C, bool(ok), token)
            return ok

        old = old_fc.Program(full, old_slow, nodes, ops)
        for _ in range(3):
            assert old(L, G, C) and check(L, G, C)
        res = {"new": [], "old": []}
        for b in range(a.blocks):
            for name, fn in ((("new", check), ("old", old)) if b % 2 else (("old", old), ("new", check))):
                t = time.thread_time_ns()
                for _ in range(a.calls):
                    fn(L, G, C)
                res[name].append((time.thread_time_ns() - t) / a.calls / 1000)
        assert check.stats()["slow_calls"] <= 2 and old.stats()["slow_calls"] <= 2, "not the fast path"
        med = {k: statistics.median(v) for k, v in res.items()}
        print(f"{label}: check us new {med['new']:.2f} (min {min(res['new']):.2f}), old {med['old']:.2f} "
              f"(min {min(res['old']):.2f}); new/old {med['new'] / med['old']:.3f}")


if __name__ == "__main__":
    main()
