"""NumPy programs through both front ends: does each give eager's answer, in how many graphs?

    python benchmarks/numpy_corpus.py [--out benchmarks/numpy.md]

Runs the 18 programs of tests/test_numpy_corpus.py (NumPy traced as tensor operations, issue
35) through `tracer.compile` and `torch.compile` (backend "eager" for both), in one process,
and compares each result with eager's the way the tests do (every leaf's type, dtype, shape
and values: an `ndarray` where NumPy gives `np.float64` is a difference). Prints a table;
nothing is timed.
"""
import copy
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import tracer  # noqa: E402
import test_numpy_corpus as corpus  # noqa: E402
from semantics_helpers import same  # noqa: E402


def _run(compile_fn, fn, args):
    try:
        return compile_fn(fn)(*copy.deepcopy(args)), None
    except Exception as e:  # noqa: BLE001 - a compiler's error is a row of the table
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"


def _diff(ref, got):
    if same(got, ref):
        return ""
    if isinstance(ref, tuple) and isinstance(got, tuple) and len(ref) == len(got):
        return "; ".join(f"item {i}: {type(g).__name__} {getattr(g, 'dtype', '')} vs eager "
                         f"{type(r).__name__} {getattr(r, 'dtype', '')}"
                         for i, (g, r) in enumerate(zip(got, ref)) if not same(g, r))
    return f"{type(got).__name__} vs eager {type(ref).__name__}"


def main(argv):
    out = argv[argv.index("--out") + 1] if "--out" in argv else None
    rows, ours_wrong, theirs_wrong = [], 0, 0
    for name, (fn, make) in corpus.CASES.items():
        args = make()
        ref = fn(*copy.deepcopy(args))
        tracer.reset()
        before = tracer.stats().graphs
        got, err = _run(lambda f: tracer.compile(f, backend="eager"), fn, args)
        our_graphs = tracer.stats().graphs - before
        ours = err or _diff(ref, got)
        torch._dynamo.reset()
        count = [0]

        def backend(gm, example_inputs):
            count[0] += 1
            return gm.forward
        got, err = _run(lambda f: torch.compile(f, backend=backend), fn, args)
        theirs = err or _diff(ref, got)
        ours_wrong += bool(ours)
        theirs_wrong += bool(theirs)
        rows.append(f"| {name} | {our_graphs} / {count[0]} | {ours or 'equal'} | {theirs or 'equal'} |")
    text = "\n".join([
        f"torch {torch.__version__}, CPython {sys.version.split()[0]}, backend eager for both",
        "",
        "| program | graphs tracer / tc | tracer vs eager | torch.compile vs eager |",
        "|---|---:|---|---|", *rows, "",
        f"results that differ from eager: tracer {ours_wrong} of {len(rows)}, torch.compile {theirs_wrong} of {len(rows)}",
    ])
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
