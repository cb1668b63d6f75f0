"""Long run of the dynamic-shapes fuzz profile: programs for a seed range, each over its call
sequence; counts programs, failures and programs with internal tracer errors.

    python tests/fuzz/long_run_shapes.py --start 0 --count 5000 [--out build/fuzz_shapes]

A failing program is written to OUT/fail_<seed>.py with its message; one with an internal
error to OUT/internal_<seed>.py, one past the per-program limit to OUT/hang_<seed>.py. A
summary line every 100 programs and at the end (also in OUT/summary.txt) gives beside the
failures the capture rate (programs whose f was traced, not run whole as Python) and the
cache entries per program (compiles over the whole size sequence), with the commonest
whole-frame fallback reasons. Guards are verified as in the test suite (verify_guards).
"""
import collections
import argparse
import os
import random
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tracer  # noqa: E402
from fuzz_gen_shapes import generate_shapes, sequences  # noqa: E402
from fuzz_harness import Mismatch  # noqa: E402
from fuzz_shapes_check import check_shapes  # noqa: E402


class Hang(BaseException):
    """Not an Exception: the tracer's fail-safe must not catch it."""


def _alarm(signum, frame):
    raise Hang("program took longer than the per-program limit")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--out", default="build/fuzz_shapes")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per program")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    tracer.config.verify_guards = True  # as in the test suite: guard bugs are internal errors
    signal.signal(signal.SIGALRM, _alarm)
    done = fails = internal = hangs = captured = entries = checked = 0
    reasons = collections.Counter()
    t0 = time.time()

    def summary():
        line = (f"programs {done}  failures {fails}  with internal errors {internal}  hangs {hangs}  "
                f"captured {captured / max(checked, 1):.1%}  entries/program {entries / max(checked, 1):.2f}  "
                f"python {sys.version.split()[0]}  seeds {args.start}..{args.start + done - 1}  "
                f"{time.time() - t0:.0f}s")
        lines = [line, "whole-frame fallbacks of f, by reason:"]
        lines += [f"  {k:6d}  {r}" for r, k in reasons.most_common(15)]
        print(line, flush=True)
        with open(os.path.join(args.out, "summary.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")

    for seed in range(args.start, args.start + args.count):
        tracer.reset()
        rnd = random.Random(seed)
        src = generate_shapes(rnd)
        calls = sequences(rnd, seed)
        dynamic = None if seed % 4 else True
        before = tracer.stats().internal_errors
        signal.alarm(args.timeout)
        try:
            rep = check_shapes(src, calls, dynamic=dynamic, filename=f"<shapes {seed}>")
            checked += 1
            captured += rep.captured
            entries += rep.entries
            if not rep.captured:
                reasons[(rep.fallback_reason or "?").split(" at <")[0][:160]] += 1
        except Mismatch as e:
            fails += 1
            with open(os.path.join(args.out, f"fail_{seed}.py"), "w") as f:
                f.write(src + "\n'''\n" + str(e) + "\n'''\n")
        except Hang:
            hangs += 1
            with open(os.path.join(args.out, f"hang_{seed}.py"), "w") as f:
                f.write(src + "\n" + "'''" + "\n" + traceback.format_exc() + "\n" + "'''" + "\n")
        except Exception:  # noqa: BLE001 - a harness error is a failure too
            fails += 1
            with open(os.path.join(args.out, f"fail_{seed}.py"), "w") as f:
                f.write(src + "\n'''\n" + traceback.format_exc() + "\n'''\n")
        finally:
            signal.alarm(0)
        s = tracer.stats()
        if s.internal_errors > before:
            internal += 1
            with open(os.path.join(args.out, f"internal_{seed}.py"), "w") as f:
                new = s.of("internal_error")[-(s.internal_errors - before):]
                f.write(src + "\n'''\n" + "\n".join(str(e) for e in new) + "\n'''\n")
        done += 1
        if done % 100 == 0:
            summary()
    summary()
    return 1 if fails or internal else 0


if __name__ == "__main__":
    sys.exit(main())
