"""The benchmark scripts start. `python benchmarks/<name>.py` puts benchmarks/ first on
sys.path, so a script there named like one of our packages shadows it for every script
(benchmarks/guards.py once hid the `guards` package and `make bench` died at import). Two
checks: no script is named like a top-level package or module of the repository, and
`make bench`'s script imports in a fresh interpreter exactly as make runs it. Nothing is
timed here."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")


def _top_level_names():
    out = set()
    for name in os.listdir(ROOT):
        path = os.path.join(ROOT, name)
        if os.path.isfile(os.path.join(path, "__init__.py")):
            out.add(name)
        elif name.endswith(".py"):
            out.add(name[:-3])
    return out


def test_no_benchmark_script_shadows_a_package():
    ours = _top_level_names()
    assert {"tracer", "guards", "bytecode_utils"} <= ours
    clashes = sorted(n for n in os.listdir(BENCH) if n.endswith(".py") and n[:-3] in ours)
    assert not clashes, f"benchmarks/{clashes} would shadow the package of that name"


@pytest.mark.one_version  # a subprocess's imports
def test_make_bench_script_imports():
    path = os.path.join(BENCH, "run.py")
    proc = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "usage:" in proc.stdout and "--quick" in proc.stdout
