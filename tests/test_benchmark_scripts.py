"""The benchmark scripts start: each imports as `python benchmarks/<name>.py` would (its own
folder first on sys.path), so a module there that shadows one of our packages, or an import
that moved, fails here instead of in `make bench` (benchmarks/guards.py once shadowed the
`guards` package and `make bench` died at import). Nothing is timed here."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")

_IMPORT_ALL = r"""
import os, runpy, sys
bench = sys.argv[1]
for name in sorted(os.listdir(bench)):
    if name.endswith(".py"):
        sys.path[0] = bench            # as when the script itself is run
        runpy.run_path(os.path.join(bench, name), run_name="benchmark_import_check")
        print("ok", name)
"""


def test_every_benchmark_script_imports():
    scripts = sorted(n for n in os.listdir(BENCH) if n.endswith(".py"))
    proc = subprocess.run([sys.executable, "-c", _IMPORT_ALL, BENCH], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("ok ")] == scripts
