"""Long fuzz run: generate programs for a seed range, check each, count programs / failures.

    python tests/fuzz/long_run.py --start 0 --count 20000 [--out build/fuzz] [--minutes 40]

Each failing program's source and message is written to OUT/fail_<seed>.py; internal tracer
errors (caught by the frame boundary, so the answer was still right, but a bug) are counted
and saved as OUT/internal_<seed>.py. A summary line is printed every 200 programs and at the end
(also to OUT/summary.txt).
"""
import argparse
import logging
import os
import random
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
# Imported lazily by fake-tensor conversion of a view: a per-program timeout (SIGALRM) that
# lands inside that first import leaves it half-imported for the rest of the run.
import torch._dynamo.source  # noqa: E402,F401

import tracer  # noqa: E402
from fuzz_gen import generate  # noqa: E402
from fuzz_harness import Mismatch, check_source  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang("program took longer than the per-program limit")


class InternalErrors(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        msg = record.getMessage()
        if "internal error" in msg or "callback failed" in msg:
            self.messages.append(msg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--minutes", type=float, default=None)
    ap.add_argument("--out", default="build/fuzz")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per program")
    ap.add_argument("--inputs", type=int, default=None, help="input sets per program (default all)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    handler = InternalErrors()
    lg = logging.getLogger("tracer")
    lg.addHandler(handler)
    lg.propagate = False
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.time()
    n = fails = internal = 0
    summary = ""
    for seed in range(args.start, args.start + args.count):
        if args.minutes and time.time() - t0 > args.minutes * 60:
            break
        src = generate(random.Random(seed))
        handler.messages.clear()
        signal.alarm(args.timeout)
        try:
            check_source(src, n_inputs=args.inputs)
        except Mismatch as e:
            fails += 1
            _save(args.out, f"fail_{seed}", src, str(e))
        except Exception:  # the harness itself or the tracer leaked an exception
            fails += 1
            _save(args.out, f"fail_{seed}", src, traceback.format_exc())
        finally:
            signal.alarm(0)
        if handler.messages:
            internal += 1
            _save(args.out, f"internal_{seed}", src, "\n".join(handler.messages))
        n += 1
        if n % 50 == 0:
            tracer.reset()
        if n % 200 == 0 or seed == args.start + args.count - 1:
            summary = (f"programs={n} failures={fails} internal_errors={internal} "
                       f"seconds={time.time() - t0:.0f} last_seed={seed}")
            print(summary, flush=True)
    summary = (f"programs={n} failures={fails} internal_errors={internal} "
               f"seconds={time.time() - t0:.0f} seeds={args.start}..{args.start + n - 1}")
    print(summary, flush=True)
    with open(os.path.join(args.out, "summary.txt"), "w") as fh:
        fh.write(summary + "\n")


def _save(out, name, src, msg):
    with open(os.path.join(out, name + ".py"), "w") as fh:
        fh.write(src + "\n'''\n" + msg.replace("'''", '"""') + "\n'''\n")


if __name__ == "__main__":
    main()
