"""Deleted models are freed: RSS around five compiled 32 MiB models, tracer vs torch.compile.

Each front end runs in a fresh subprocess (RSS is per process): after a warm-up (imports and a
small compile, so that one-time costs are paid), five MLPs with 32 MiB of parameters each are
built, compiled (backend "eager"), called and deleted one after another, with no
`tracer.reset()` / `torch._dynamo.reset()`. Printed per front end: RSS growth while the five
exist (what the models cost) and after they are gone (what the cache kept). Resident memory
from /proc/self/statm; `gc.collect()` and `malloc_trim` before each reading.

    python benchmarks/memory.py          # writes benchmarks/memory.md
"""
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20

CHILD = r"""
import ctypes, gc, json, os, sys, weakref
import torch
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[1]))))
import tracer
torch.set_num_threads(1)

def rss():
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

front = sys.argv[2]
def compile_(m):
    if front == "tracer":
        return tracer.compile(m, backend="eager")
    return torch.compile(m, backend="eager")

class MLP(torch.nn.Module):                   # 2048*2048*2 floats = 32 MiB of parameters
    def __init__(self, d=2048):
        super().__init__()
        self.a = torch.nn.Linear(d, d, bias=False)
        self.b = torch.nn.Linear(d, d, bias=False)
    def forward(self, x):
        return self.b(self.a(x).relu())

warm = compile_(torch.nn.Sequential(torch.nn.Linear(4, 4)))
warm(torch.randn(2, 4))
del warm
x = torch.randn(4, 2048)
start = rss()
refs, peak = [], 0
for i in range(5):
    m = MLP()
    c = compile_(m)
    with torch.no_grad():
        ok = torch.allclose(c(x), m(x))
    assert ok
    refs.append(weakref.ref(m))
    peak = max(peak, rss())
    del m, c
end = rss()
print(json.dumps({"start": start, "peak": peak, "end": end, "alive": sum(r() is not None for r in refs)}))
"""


def run(front):
    out = subprocess.run([sys.executable, "-c", CHILD, os.path.abspath(__file__), front],
                         capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{front} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    rows = {}
    for front in ("tracer", "torch.compile"):
        runs = [run(front) for _ in range(3)]
        rows[front] = {
            "peak": statistics.median((r["peak"] - r["start"]) / MIB for r in runs),
            "end": statistics.median((r["end"] - r["start"]) / MIB for r in runs),
            "alive": max(r["alive"] for r in runs),
        }
    lines = [
        "# Deleted models are freed (benchmarks/memory.py)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        "torch (see below). Five MLPs with 32 MiB of parameters each, built, compiled (backend "
        "\"eager\"), called and deleted one after another, no reset; RSS growth over the start (after a "
        "warm-up compile), median of 3 fresh processes per front end.",
        "",
        "| front end | RSS growth, peak (MiB) | RSS growth after the five are deleted (MiB) | models still alive |",
        "|---|---:|---:|---:|",
    ]
    for front, r in rows.items():
        lines.append(f"| {front} | {r['peak']:.1f} | {r['end']:.1f} | {r['alive']} |")
    import torch
    lines += ["", f"torch {torch.__version__}. Target (issue 29): the tracer's growth after deletion within 10 MiB."]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(HERE, "memory.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
