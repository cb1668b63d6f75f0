"""CPython's own test suite as a semantics oracle for the tracer.

    python tests/cpython_oracle.py [test_list test_dict ...] [--plain] [--json]

Runs each `test.<module>` (installed with the interpreter) with every TestCase test method
wrapped by `tracer.compile` (strict: frames with no tensor work still run their rewritten
code; the tracer does not skip them), and, unless --plain alone is given, the same module
without the tracer, then prints run / failures / errors / skipped for both. Each module runs
in its own subprocess (a crash or hang in one does not hide the others).
"""
import json
import subprocess
import sys
import time
import unittest

MODULES = ["test_list", "test_dict", "test_set", "test_tuple", "test_scope", "test_with",
           "test_exceptions", "test_generators", "test_keywordonlyarg", "test_unpack",
           "test_contextlib", "test_functools", "test_bool", "test_int", "test_range",
           "test_enumerate"]


def _wrap_cases(suite, compile_fn, seen):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            _wrap_cases(t, compile_fn, seen)
        elif isinstance(t, unittest.TestCase):
            cls = type(t)
            name = t._testMethodName
            if (cls, name) in seen:
                continue
            seen.add((cls, name))
            fn = cls.__dict__.get(name)
            if fn is None:  # inherited: wrap on the class that defines it, via this class
                fn = getattr(cls, name, None)
                fn = getattr(fn, "__func__", fn)
            if hasattr(fn, "__code__"):
                setattr(cls, name, compile_fn(fn))


def run_module(name, traced):
    import io
    import warnings
    warnings.simplefilter("ignore")
    mod = __import__(f"test.{name}", fromlist=["_"])
    suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
    if traced:
        import tracer
        _wrap_cases(suite, tracer.compile, set())
    t0 = time.time()
    res = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
    out = {"module": name, "traced": traced, "run": res.testsRun, "failures": len(res.failures),
           "errors": len(res.errors), "skipped": len(res.skipped),
           "bad": sorted(t.id() for t, _ in res.failures + res.errors), "seconds": round(time.time() - t0, 1)}
    if traced:  # what the tracer made of it: equal results alone would pass if nothing was traced
        s = tracer.stats()
        out.update(frames_traced=s.frames_traced, fallbacks=s.fallbacks, graph_breaks=s.graph_breaks,
                   internal_errors=s.internal_errors, cache_hits=s.cache_hits)
    return out


def run_isolated(name, traced, timeout=600):
    cmd = [sys.executable, __file__, "--child", name, "traced" if traced else "plain"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except Exception as e:  # noqa: BLE001 - a crash or hang of the child is a result too
        return {"module": name, "traced": traced, "crash": f"{type(e).__name__}: {e}"}


def compare(names, timeout=600):
    rows = []
    for name in names:
        rows.append((run_isolated(name, False, timeout), run_isolated(name, True, timeout)))
    return rows


def main(argv):
    if argv[:1] == ["--child"]:
        print(json.dumps(run_module(argv[1], argv[2] == "traced")))
        return 0
    names = [a for a in argv if not a.startswith("--")] or MODULES
    rows = compare(names)
    if "--json" in argv:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'module':22} {'plain run/fail/err/skip':>24} {'traced run/fail/err/skip':>25}  same")
    for plain, traced in rows:
        def fmt(r):
            return r.get("crash") or f"{r['run']}/{r['failures']}/{r['errors']}/{r['skipped']}"
        same = "crash" not in traced and "crash" not in plain and plain["bad"] == traced["bad"] \
            and plain["run"] == traced["run"]
        print(f"{plain['module']:22} {fmt(plain):>24} {fmt(traced):>25}  {'yes' if same else 'NO'}")
        if not same and "bad" in traced:
            for t in sorted(set(traced["bad"]) - set(plain.get("bad", []))):
                print(f"    only traced fails: {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
