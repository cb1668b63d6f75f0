"""The disk cache and torch functions patched in another process (a kernel library, a shim).

A trace reads torch's namespaces without guards (rule 7: library code is trusted), so an entry
traced before `torch.nn.functional.gelu` was replaced was served to a later process holding the
replacement, which it ignored: eager, torch.compile and a trace without the cache all gave the
patched answer, the loaded entry the old one. The environment digest that stood for those
guards (every entry under a directory per set of patches) missed four kinds of patch, each
tested here as it was found (tests/test_persist.py shows how the children run):

1. a replacement whose `__module__` begins with "torch" (torchao, torch_npu, `torchfast` here)
   was taken for torch's own;
2. a C function (operator.neg, a pybind11 kernel) was skipped;
3. a patch made after the first compile (which opened the cache and computed the digest) was
   never seen;
4. only torch, torch.nn.functional, torch.Tensor and torch.nn.Module were scanned: a
   torch.linalg function patched was not.

Now each entry lists the names it read from library namespaces and what it found there, and
loading it checks them against the live namespaces (tracer/persist/library_io.py): a patched
name makes the entry stale and the frame is traced again; a process that patched nothing
still loads every entry.
"""
import json
import subprocess
import sys
import textwrap

import pytest

from test_persist import ROOT, child_env


MODULES = {
    "torchfast.py": '''
        def fast_gelu(t, approximate="none"):
            return t * 100

        def numel(self):
            return 10
    ''',
    "kernels.py": '''
        def norm(t, *args, **kwargs):
            return t.sum() * 100

        def logsigmoid(t):
            return t * 7

        def dim(self):
            return 7

        def smart_apply(module, fn):
            return module
    ''',
    "usepatched.py": '''
        import torch
        import torch.nn.functional as F

        def warm(x):
            return x + 1

        def f_gelu(x):
            return F.gelu(x) * 2

        def f_softplus(x):
            return F.softplus(x) * 2

        def f_norm(x):
            return torch.linalg.vector_norm(x) + 1

        def f_logsigmoid(x):
            return F.logsigmoid(x) - 1

        def f_numel(x):
            return x + x.numel()

        def f_dim(x):
            return x * x.dim()
    ''',
}

CHILD = r"""
import json, operator, os, sys
sys.path.insert(0, os.environ["PT_MODDIR"])
import torch, tracer
import torch.nn.functional as F

PLAN = json.loads(os.environ["PLAN"])  # statements to run before and after the first compile
exec("\n".join(PLAN["before"]))
import usepatched

def run(fn):
    before = tracer.stats()
    x = torch.linspace(-1.0, 2.0, 5)
    ok = torch.allclose(tracer.compile(fn)(x), fn(x))
    after = tracer.stats()
    return dict(ok=bool(ok), traced=after.frames_traced - before.frames_traced,
                loaded=after.cache_loaded - before.cache_loaded, stale=after.cache_stale - before.cache_stale,
                saved=after.cache_saved - before.cache_saved, fallbacks=after.fallbacks - before.fallbacks,
                internal=after.internal_errors - before.internal_errors)

out = {"warm": run(usepatched.warm)}   # the first compile: the cache directory is open
exec("\n".join(PLAN["after"]))
for name in PLAN["funcs"]:
    out[name] = run(getattr(usepatched, name))
print("RESULT " + json.dumps(out))
"""

# (torch's C functions each: a Python one of torch.nn.functional is written with its code's
# fingerprint, which caught a patch before)
SCENARIOS = {"f_gelu": "a module named torch*", "f_softplus": "a C function",
             "f_norm": "torch.linalg", "f_logsigmoid": "after the first compile"}
NAMES = dict(funcs=sorted(SCENARIOS), before=[], after=[])
NAMES_PATCHED = dict(NAMES, before=[
    "import kernels, torchfast",
    "F.gelu = torchfast.fast_gelu",              # 1. a module whose name begins with "torch"
    "F.softplus = operator.neg",                 # 2. a C function
    "torch.linalg.vector_norm = kernels.norm",   # 4. a namespace the digest did not scan
], after=["F.logsigmoid = kernels.logsigmoid"])  # 3. patched after the first compile


def _run(base, plan):
    env = child_env(base / "cache", base / "mods")
    env["PLAN"] = json.dumps(plan)
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=str(ROOT), capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.split("RESULT ")[-1])
    for name, res in out.items():
        assert res["internal"] == 0 and res["fallbacks"] == 0, (name, res, done.stderr[-3000:])
    return out


def _runs(tmp_path_factory, plans):
    base = tmp_path_factory.mktemp("patches")
    (base / "mods").mkdir()
    for name, src in MODULES.items():
        (base / "mods" / name).write_text(textwrap.dedent(src).lstrip())
    return [_run(base, plan) for plan in plans]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Unpatched (writes), patched (each patched name traced again), patched again (loads what
    the patched one wrote), unpatched again (loads what the first wrote)."""
    return _runs(tmp_path_factory, [NAMES, NAMES_PATCHED, NAMES_PATCHED, NAMES])


def test_the_first_process_writes_every_entry(runs):
    first = runs[0]
    assert all(r["ok"] and r["traced"] == 1 and r["saved"] == 1 for r in first.values()), first


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_patched_torch_function_makes_the_entry_stale(runs, name):
    """The entry traced with torch's function is not served where the name holds another: the
    frame is traced again (counted stale) and gives the patched answer, as eager does."""
    patched = runs[1][name]
    assert patched["ok"], (SCENARIOS[name], patched)
    assert patched["stale"] == 1 and patched["traced"] == 1 and patched["loaded"] == 0, (SCENARIOS[name], patched)
    assert patched["saved"] == 1, patched  # (and what it traced is written, for the next such process)
    again = runs[2][name]
    assert again["ok"] and again["traced"] == 0 and again["loaded"] == 1, (SCENARIOS[name], again)


def test_a_process_that_patched_nothing_still_loads_every_entry(runs):
    """The reads an entry records hold in any process that patched nothing: the first
    process's entries load (the patched process's are stale here, and skipped)."""
    unpatched = runs[3]
    assert all(r["ok"] and r["traced"] == 0 and r["loaded"] == 1 for r in unpatched.values()), unpatched
    assert runs[2]["warm"]["traced"] == 0 and runs[1]["warm"]["stale"] == 0, runs[1]["warm"]


# ---- torch.Tensor and nn.Module --------------------------------------------------------------
# Their methods are reached through the objects: what they hold under torch's names that is not
# torch's own is written with every entry and compared when it is read. It had the same holes
# as the namespaces: a dim() the trace folded from torch's own method was served where
# Tensor.dim was patched after the first compile, and a numel() where numel was patched from a
# torch* module.

CLASSES = dict(funcs=["f_numel", "f_dim"], before=[], after=[])
CLASSES_PATCHED = dict(CLASSES, before=["import torchfast", "torch.Tensor.numel = torchfast.numel"],
                       after=["import kernels", "torch.Tensor.dim = kernels.dim"])
# a name torch's class lacks, added after the first compile (transformers sets
# nn.Module.smart_apply when a model initialises its weights): no patch of torch's code
CLASSES_ADDED = dict(CLASSES, after=["import kernels", "torch.nn.Module.smart_apply = kernels.smart_apply"])


@pytest.fixture(scope="module")
def class_runs(tmp_path_factory):
    return _runs(tmp_path_factory, [CLASSES, CLASSES_PATCHED, CLASSES_ADDED])


def test_a_patched_tensor_method_makes_the_entries_stale(class_runs):
    first, patched, added = class_runs
    assert all(r["ok"] and r["traced"] == 1 and r["saved"] == 1 for r in first.values()), first
    for name in ("f_numel", "f_dim"):  # (patched before and after the first compile)
        assert patched[name]["ok"] and patched[name]["traced"] == 1 and patched[name]["stale"] == 1, patched
    assert all(r["ok"] and r["traced"] == 0 and r["loaded"] == 1 for r in added.values()), added
