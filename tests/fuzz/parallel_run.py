"""Run long_run.py in parallel over disjoint seed ranges and add up the results.

    python tests/fuzz/parallel_run.py --jobs 16 --start 600000 --per-job 2000 --minutes 9 --out build/fuzz

Each job writes OUT/job<k>/ (failing programs, summary.txt); the totals line sums the jobs'
programs, failures, internal errors, captured programs and cache hits, and names the seed
ranges actually run (a job stopped by --minutes ran fewer seeds than --per-job).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--start", type=int, default=600000)
    ap.add_argument("--per-job", type=int, default=2000)
    ap.add_argument("--minutes", type=float, default=None)
    ap.add_argument("--out", default="build/fuzz")
    ap.add_argument("--enable", default="all")
    args = ap.parse_args()
    procs = []
    for k in range(args.jobs):
        out = os.path.join(args.out, f"job{k}")
        os.makedirs(out, exist_ok=True)
        cmd = [sys.executable, os.path.join(HERE, "long_run.py"), "--start", str(args.start + k * args.per_job),
               "--count", str(args.per_job), "--out", out, "--enable", args.enable]
        if args.minutes:
            cmd += ["--minutes", str(args.minutes)]
        procs.append(subprocess.Popen(cmd, stdout=open(os.path.join(out, "log.txt"), "w"), stderr=subprocess.STDOUT))
    for p in procs:
        p.wait()
    totals = dict(programs=0, failures=0, internal_errors=0, captured=0, hits=0, warm=0)
    ranges = []
    for k in range(args.jobs):
        path = os.path.join(args.out, f"job{k}", "summary.txt")
        if not os.path.exists(path):
            print(f"job{k}: no summary (crashed?)")
            totals["failures"] += 1
            continue
        first = open(path).readline()
        kv = dict(re.findall(r"(\w+)=([^\s]+)", first))
        n = int(kv["programs"])
        totals["programs"] += n
        totals["failures"] += int(kv["failures"])
        totals["internal_errors"] += int(kv["internal_errors"])
        totals["captured"] += round(float(kv["captured"].rstrip("%")) / 100 * n)
        hits, warm = kv["cache_hits"].split("=")[0].split("/")
        totals["hits"] += int(hits)
        totals["warm"] += int(warm)
        ranges.append(kv.get("seeds", "?"))
    t = totals
    line = (f"TOTAL programs={t['programs']} failures={t['failures']} internal_errors={t['internal_errors']} "
            f"captured={t['captured'] / max(t['programs'], 1):.1%} cache_hits={t['hits']}/{t['warm']} "
            f"python={sys.version.split()[0]} seeds={','.join(ranges)}")
    print(line)
    with open(os.path.join(args.out, "total.txt"), "w") as fh:
        fh.write(line + "\n")


if __name__ == "__main__":
    main()
