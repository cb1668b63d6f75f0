"""Differential check of one dynamic-shapes program over a call sequence whose sizes change.

Each call: the compiled function and the eager one get deep copies of the same inputs;
results (or exceptions: type, message and cause/context chain), printed output and the
accumulated Python values must agree. Then the last call is repeated: a warm call must trace
nothing. Returns a `ShapesReport`: whether `f` was captured (its first entry is rewritten code,
not a whole-frame fallback) and how many entries it compiled over the sequence. Internal
tracer errors are counted by the caller (tests/conftest.py fails the test;
long_run_shapes.py reports them).
"""
import dataclasses
import copy
import io
import warnings

import tracer
from fuzz_harness import Mismatch, same, same_exception


@dataclasses.dataclass
class ShapesReport:
    compiled: object
    captured: bool = False      # f's first entry is rewritten code, not a whole-frame fallback
    fallback_reason: str = None
    entries: int = 0            # cache entries of f after the whole sequence
    calls: int = 0


def _call(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - comparing user exceptions is the point
        return None, e


def check_shapes(src, calls, dynamic=None, backend="eager", filename="<string>"):
    try:
        return _check(src, calls, dynamic, backend, filename)
    except Mismatch as e:
        shapes = [tuple(tuple(a.shape) if hasattr(a, "shape") else a for a in call) for call in calls]
        raise Mismatch(f"{e}\n--- dynamic={dynamic}, calls {shapes}\n--- program ---\n{src}") from e.__cause__


def _check(src, calls, dynamic, backend, filename):
    code = compile(src, filename, "exec")
    ns_e, ns_c = {"SINK": io.StringIO()}, {"SINK": io.StringIO()}
    exec(code, ns_e)
    exec(code, ns_c)
    eager = ns_e["f"]
    compiled = tracer.compile(ns_c["f"], backend=backend, dynamic=dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a recompile limit is allowed here (never a wrong answer)
        for k, args in enumerate(list(calls) + [calls[-1]]):
            before = tracer.stats().frames_traced
            r_e, x_e = _call(eager, copy.deepcopy(args))
            r_c, x_c = _call(compiled, copy.deepcopy(args))
            where = f"call {k} {[tuple(a.shape) if hasattr(a, 'shape') else a for a in args]}"
            if x_e is not None or x_c is not None:
                d = same_exception(x_e, x_c, "exception")
                if d:
                    raise Mismatch(f"{where}: eager raised {x_e!r}, compiled raised {x_c!r}: {d}") from x_c
            else:
                d = same(r_e, r_c)
                if d:
                    raise Mismatch(f"{where}: {d}")
            if ns_e["SINK"].getvalue() != ns_c["SINK"].getvalue():
                raise Mismatch(f"{where}: printed output differs:\n{ns_e['SINK'].getvalue()!r}\n"
                               f"{ns_c['SINK'].getvalue()!r}")
            if k == len(calls) and tracer.stats().frames_traced != before:
                raise Mismatch(f"{where}: the same call again traced "
                               f"{tracer.stats().frames_traced - before} frame(s)")
    entries = compiled.entries
    report = ShapesReport(compiled, calls=len(calls) + 1, entries=len(entries))
    if entries:
        report.captured = entries[0].code is not None
        report.fallback_reason = entries[0].reason
    return report
