"""Long fuzz run: generate programs for a seed range, check each, count programs / failures.

    python tests/fuzz/long_run.py --start 0 --count 20000 [--out build/fuzz] [--minutes 40]

Each failing program's source and message is written to OUT/fail_<seed>.py; internal tracer
errors (caught by the frame boundary, so the answer was still right, but a bug) are counted
and saved as OUT/internal_<seed>.py. Beside the failure count it reports, from each program's
Report (fuzz_harness): the capture rate (programs whose f was traced into rewritten code, not
run whole as Python), the ops captured, and the cache-hit rate (calls with inputs of the same
shapes as an earlier call that traced no frame), plus the commonest whole-frame fallback
reasons. A summary line is printed every 200 programs and at the end (also to
OUT/summary.txt).
"""
import argparse
import collections
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
import fuzz_shapes  # noqa: E402
import fuzz_gen_semantics  # noqa: E402
from fuzz_gen import generate  # noqa: E402
from fuzz_harness import Mismatch, check_source  # noqa: E402


class Hang(BaseException):
    """Not an Exception: the tracer's fail-safe must not catch it (it would record an
    internal error and carry on)."""


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
    ap.add_argument("--timeout", type=int, default=300, help="seconds per program (wall clock)")
    ap.add_argument("--inputs", type=int, default=None, help="input sets per program (default all)")
    ap.add_argument("--cache-dir", default=None,
                    help="the disk cache (TRACER_CACHE_DIR): each program's compiled copy is a module "
                         "file under it; a second run over the same directory loads the entries the "
                         "first wrote (the share loaded is reported)")
    ap.add_argument("--enable", default="", help="comma-separated fuzz_shapes FEATURES to switch on "
                                                 "(e.g. those DISABLED_WHY lists), or 'all'")
    ap.add_argument("--focus", default=None, help="a fuzz_gen_semantics shape (e.g. numpy_arrays) made "
                                                  "about a third of all statements")
    args = ap.parse_args()
    if args.focus:
        fuzz_gen_semantics.focus(args.focus)
    for name in (fuzz_shapes.FEATURES if args.enable == "all" else filter(None, args.enable.split(","))):
        fuzz_shapes.FEATURES[name] = True
    fuzz_gen_semantics.USE_OPTIONAL = args.enable == "all"
    off = sorted(k for k, v in fuzz_shapes.FEATURES.items() if not v)
    print(f"fuzz shapes off: {off or 'none'}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    tracer.config.verify_guards = True  # as in the test suite: guard bugs are internal errors
    module_dir = None
    if args.cache_dir:
        tracer.config.cache_dir = args.cache_dir
        module_dir = os.path.join(args.cache_dir, "programs")
        os.makedirs(module_dir, exist_ok=True)
    handler = InternalErrors()
    lg = logging.getLogger("tracer")
    lg.addHandler(handler)
    lg.propagate = False
    # torch logs the errors of ops that raise on fake tensors (programs that raise on purpose)
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.time()
    n = fails = internal = 0
    stat = collections.Counter()
    fallback_reasons = collections.Counter()
    summary = ""
    for seed in range(args.start, args.start + args.count):
        if args.minutes and time.time() - t0 > args.minutes * 60:
            break
        src = generate(random.Random(seed))
        handler.messages.clear()
        errors_before = tracer.stats().internal_errors
        signal.alarm(args.timeout)
        try:
            rep = check_source(src, n_inputs=args.inputs, module_dir=module_dir)
            stat["checked"] += 1
            stat["captured"] += rep.captured
            stat["ops"] += rep.ops
            stat["breaks"] += rep.graph_breaks
            stat["warm_calls"] += rep.warm_calls
            stat["warm_hits"] += rep.warm_hits
            if not rep.captured:
                fallback_reasons[_short(rep.fallback_reason)] += 1
        except Mismatch as e:
            fails += 1
            _save(args.out, f"fail_{seed}", src, str(e))
        except Hang:
            stat["hangs"] += 1
            _save(args.out, f"hang_{seed}", src, traceback.format_exc())
        except Exception:  # the harness itself or the tracer leaked an exception
            fails += 1
            _save(args.out, f"fail_{seed}", src, traceback.format_exc())
        finally:
            signal.alarm(0)
        new_errors = tracer.stats().internal_errors - errors_before
        if handler.messages or new_errors:
            internal += 1
            recorded = [str(e) for e in tracer.stats().of("internal_error")[-new_errors:]] if new_errors else []
            _save(args.out, f"internal_{seed}", src, "\n".join(handler.messages + recorded))
        n += 1
        if n % 50 == 0:
            tracer.reset()
        if n % 200 == 0 or seed == args.start + args.count - 1:
            summary = (f"programs={n} failures={fails} internal_errors={internal} {_rates(stat)} "
                       f"seconds={time.time() - t0:.0f} last_seed={seed}")
            print(summary, flush=True)
    summary = (f"programs={n} failures={fails} internal_errors={internal} {_rates(stat)} "
               f"seconds={time.time() - t0:.0f} seeds={args.start}..{args.start + n - 1}")
    if args.cache_dir:
        s = tracer.stats()
        summary += (f"\ndisk cache: {s.cache_loaded} entries loaded, {s.frames_traced} frames traced "
                    f"(loaded share {s.cache_loaded / max(s.cache_loaded + s.frames_traced, 1):.1%}), "
                    f"{s.cache_saved} saved, {len(s.of('disk_unsaved'))} not saved, {s.cache_stale} stale")
        unsaved = collections.Counter(_short(e.reason) for e in s.of("disk_unsaved"))
        summary += "".join(f"\n  not saved {k:5d}  {r}" for r, k in unsaved.most_common(8))
        stale = collections.Counter(_short(e.reason) for e in s.of("disk_stale"))
        summary += "".join(f"\n  stale {k:5d}  {r}" for r, k in stale.most_common(8))
    lines = [summary, f"fuzz shapes off: {off or 'none'}", "whole-frame fallbacks of f, by reason:"]
    lines += [f"  {k:6d}  {r}" for r, k in fallback_reasons.most_common(25)]
    print("\n".join(lines), flush=True)
    with open(os.path.join(args.out, "summary.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def _rates(stat):
    checked = max(stat["checked"], 1)
    return (f"captured={stat['captured'] / checked:.1%} ops/program={stat['ops'] / checked:.1f} "
            f"breaks/program={stat['breaks'] / checked:.2f} "
            f"cache_hits={stat['warm_hits']}/{stat['warm_calls']}"
            f"={stat['warm_hits'] / max(stat['warm_calls'], 1):.1%} hangs={stat['hangs']}")


def _short(reason):
    """A fallback reason without its source location (so reasons group)."""
    reason = reason or "?"
    return reason.split(" at <string>")[0].split(" at /")[0][:160]


def _save(out, name, src, msg):
    with open(os.path.join(out, name + ".py"), "w") as fh:
        fh.write(src + "\n'''\n" + msg.replace("'''", '"""') + "\n'''\n")


if __name__ == "__main__":
    main()
