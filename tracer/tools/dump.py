"""`tracer-dump TARGET [options]`: trace one call and show everything the tracer made of it.

    tracer-dump path/to/script.py:function [--inputs "randn(4, 8), randn(8)"]
    tracer-dump package.module:function --json
    tracer-dump examples/dump_target.py:encoder --html report.html --export graphs.py
    python -m tracer dump ...                     (the same)

TARGET names a function (or an nn.Module instance) in a script file or an importable module.
Example inputs come from `--inputs` or, by convention, from the target's module:

    def example_inputs_<function>():   # preferred when present, else:
    def example_inputs():
        return (torch.randn(2, 8),)                      # the positional args, or
        return (torch.randn(2, 8),), {"scale": 2.0}      # (args, kwargs)

`--inputs` is parsed with `ast`, never evaluated: tensor constructors `randn rand zeros ones
arange randint` with torch's own signatures (`randn(2, 8)`, `randn((2, 8))`, `randint(0, 100,
(2, 8))`) and an optional `dtype=float32|float64|int64|...`, plus literal numbers, strings,
True/False/None, tuples and lists; `name=value` gives a keyword.

A mistake (a target that cannot be imported or called, inputs that do not fit it, an unknown
backend, an output file in a missing directory) is one line on stderr and exit code 2.

The target is compiled with `tracer.compile` and called once; every frame traced during the
call (callees traced through the frame hook included) is reported, in the order traced.

JSON schema (`--json`, schema_version 1):
    {"schema_version": 1, "target": str, "inputs": [str], "kwargs": {name: str},
     "frames": [{"index": int, "name": str, "qualname": str, "filename": str, "firstlineno": int,
                 "entry_index": int,            # position in the code's cache entries
                 "status": "captured" | "fallback",
                 "graphs": [{"index": int, "ops": int, "code": str,
                             "nodes": [{"op", "name", "target", "args", "kwargs", "shape",
                                        "source",    # "file:line" of the user code that made it
                                        "module"}]}],# innermost nn.Module path ("" outside any)
                 "guards": [str],               # GuardSet.describe(), one guard per item
                 "breaks": [{"reason", "filename", "lineno", "line", "user_stack": [str]}],
                 "lines": {"captured": [int], "fallback": [int], "break": [int]},
                 "bytecode": {"original": str, "rewritten": str | null},
                 "rewritten_python": str | null}]}
"""
import argparse
import contextlib
import json
import os
import sys

import torch

import tracer
from tracer.api import uncompiled
from tracer.runtime import cache, logs
from .pyrender import render_code
from .trace_report import write_trace_html
from .text import cache_listing, render_text
from .html_report import write_html
from .targets import (UsageError, check_arity, check_output_path, example_inputs, load_target, parse_inputs,
                      user_frame)
from ..graph.backends import NAMED as _BACKENDS
from .export import export_graphs

SCHEMA_VERSION = 1


def describe_value(v):
    import torch
    if isinstance(v, torch.Tensor):
        return f"tensor {str(v.dtype).replace('torch.', '')} {tuple(v.shape)}"
    return f"{type(v).__name__} {v!r}"[:80]


# ---- one traced call --------------------------------------------------------------------------
def trace_call(obj, args, kwargs, backend="eager"):
    """Compile `obj`, call it once; returns (output, [(code, entry)] traced during the call)."""
    tracer.reset()
    compiled = tracer.compile(uncompiled(obj), backend=backend)
    with logs.record() as recorded, contextlib.redirect_stdout(sys.stderr):  # keep stdout for the report
        out = compiled(*args, **kwargs)
    return out, list(recorded)


def _qualified(target):
    if isinstance(target, str):
        return target
    mod = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    if mod in (None, "builtins", "_operator"):
        return f"operator.{name}" if mod == "_operator" else name
    if mod.startswith("torch._C") or mod.startswith("torch._tensor"):
        mod = "torch"
    short = getattr(target, "__name__", None)
    if mod == "torch" and short and getattr(__import__("torch"), short, None) is target:
        name = short  # torch.sin, not torch._VariableFunctionsClass.sin
    return f"{mod}.{name}"


def node_rows(gm):
    rows = []
    for n in gm.graph.nodes:
        ev = n.meta.get("example_value")
        shape = _shape(ev)
        rows.append({"op": n.op, "name": n.name, "target": _qualified(n.target), "args": str(n.args),
                     "kwargs": str(n.kwargs) if n.kwargs else "", "shape": shape,
                     "source": _innermost_line(n.meta.get("stack_trace")),
                     "module": _innermost_module(n.meta.get("nn_module_stack"))})
    return rows


def _innermost_line(stack_trace):
    """'file:line' of the last frame of a node's stack_trace (node_meta writes it)."""
    import re
    found = re.findall(r'File "([^"]*)", line (\d+)', stack_trace or "")
    return f"{found[-1][0]}:{found[-1][1]}" if found else ""


def _innermost_module(nn_module_stack):
    if not nn_module_stack:
        return ""
    path, _cls = list(nn_module_stack.values())[-1]
    return path


def _shape(value):
    import torch
    if isinstance(value, torch.Tensor):
        return str(tuple(value.shape))
    if isinstance(value, (tuple, list)) and value:
        return "(" + ", ".join(_shape(v) or "-" for v in value) + ")"
    return ""


def _code_lines(code):
    return sorted({ln for _s, _e, ln in code.co_lines() if ln is not None})


def frame_report(index, code, entry):
    entries = cache.cache_for(code).entries
    graphs = getattr(entry, "graphs", None) or ([entry.graph] if entry.graph is not None else [])
    breaks = []
    for b in logs.breaks_of(entry):
        breaks.append({**b, "line": logs.source_line(b["filename"], b["lineno"]).strip()})
    lines = _code_lines(code)
    captured = entry.code is not None
    break_lines = sorted({b["lineno"] for b in breaks if b["lineno"] and b["filename"] == code.co_filename})
    return {
        "index": index, "name": code.co_name, "qualname": entry.name or code.co_qualname,
        "filename": code.co_filename, "firstlineno": code.co_firstlineno,
        "entry_index": next((i for i, e in enumerate(entries) if e is entry), -1),
        "status": "captured" if captured else "fallback",
        "graphs": [{"index": i, "ops": _count_ops(gm), "code": gm.code.strip("\n"), "nodes": node_rows(gm)}
                   for i, gm in enumerate(graphs)],
        "guards": entry.guards.describe().splitlines(),
        "breaks": breaks,
        "lines": {"captured": lines if captured else [], "fallback": [] if captured else lines, "break": break_lines},
        "bytecode": {"original": logs.dis_text(code),
                     "rewritten": logs.dis_text(entry.code) if captured else None},
        "rewritten_python": render_code(entry.code, graphs) if captured else None,
    }


def _count_ops(gm):
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def build_report(target, args, kwargs, recorded):
    return {"schema_version": SCHEMA_VERSION, "target": target,
            "inputs": [describe_value(a) for a in args],
            "kwargs": {k: describe_value(v) for k, v in kwargs.items()},
            "frames": [frame_report(i, code, entry) for i, (code, entry) in enumerate(recorded)]}


# ---- command line -----------------------------------------------------------------------------
def make_parser():
    p = argparse.ArgumentParser(prog="tracer-dump", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="?", help="path/to/script.py:function or package.module:function")
    p.add_argument("--trace", metavar="TRACE.jsonl",
                   help="instead of a target: draw a whole run's structured trace (TRACER_TRACE=dir) "
                        "as an HTML timeline, written to --html")
    p.add_argument("--cache", metavar="DIR",
                   help="instead of a target: list what a disk cache directory (TRACER_CACHE_DIR) holds: "
                        "entries per code object, their guards, graphs, breaks and sizes")
    p.add_argument("--inputs", help='example inputs, e.g. "randn(4, 8), randn(8)" (parsed, never evaluated)')
    p.add_argument("--backend", default="eager", help="backend name (default: eager)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema_version %d)" % SCHEMA_VERSION)
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")
    p.add_argument("--export", metavar="FILE.py|FILE.pt2",
                   help="also write the graphs as an importable Python module (.py), or the call as a "
                        "torch.export ExportedProgram (.pt2; the frame must be captured whole)")
    p.add_argument("--no-color", action="store_true", help="no ANSI colour (default: colour only on a TTY)")
    return p


def main(argv=None):
    """Run the command; a user's mistake is one line on stderr and exit code 2 (targets.py)."""
    try:
        return _main(argv)
    except UsageError as e:
        print(f"tracer-dump: {e}", file=sys.stderr)
        return 2


def _main(argv):
    opts = make_parser().parse_args(argv)
    if opts.cache:
        if opts.target or opts.trace:
            raise UsageError("--cache lists a cache directory; give it without a TARGET or --trace")
        if not os.path.isdir(opts.cache):
            raise UsageError(f"--cache {opts.cache}: no such directory")
        print(cache_listing(opts.cache, as_json=opts.json))
        return 0
    if opts.trace:
        if opts.target:
            raise UsageError("--trace draws a trace file already written; give it without a TARGET")
        if not opts.html:
            raise UsageError("--trace needs --html OUT.html")
        if not os.path.isfile(opts.trace):
            raise UsageError(f"--trace {opts.trace}: no such file (TRACER_TRACE=dir writes dir/trace_<pid>.jsonl)")
        check_output_path("--html", opts.html)
        try:
            n = write_trace_html(opts.trace, opts.html)
        except ValueError as e:
            raise UsageError(f"--trace {opts.trace}: {e}") from None
        print(f"tracer-dump: wrote {opts.html} ({n} events)", file=sys.stderr)
        return 0
    if not opts.target:
        raise UsageError("a TARGET (file.py:function or package.module:function) or --trace FILE is needed; "
                         "tracer-dump --help says more")
    if opts.backend not in _BACKENDS:
        raise UsageError(f"--backend {opts.backend}: unknown; use one of {', '.join(sorted(_BACKENDS))}")
    for option in ("html", "export"):
        if getattr(opts, option):
            check_output_path(f"--{option}", getattr(opts, option))
    with contextlib.redirect_stdout(sys.stderr):
        module, obj = load_target(opts.target)
    name = opts.target.rpartition(":")[2]
    try:
        args, kwargs = parse_inputs(opts.inputs) if opts.inputs else example_inputs(module, name)
    except ValueError as e:
        raise UsageError(str(e)) from None
    check_arity(name, obj, args, kwargs)
    try:
        _out, recorded = trace_call(obj, args, kwargs, backend=opts.backend)
    except tracer.BackendError as e:
        raise UsageError(f"--backend {opts.backend}: {e}") from None
    except Exception as e:  # the target's own code raised (its eager run would too)
        where = user_frame(e)
        raise UsageError(f"{name}{describe_call(args, kwargs)} raised {type(e).__name__}: {e}"
                         + (f" (at {where})" if where else "")) from None
    report = build_report(opts.target, args, kwargs, recorded)
    with _quiet_broken_pipe():
        if opts.json:
            print(json.dumps(report, indent=1))
        else:
            color = sys.stdout.isatty() and not opts.no_color and not os.environ.get("NO_COLOR")
            sys.stdout.write(render_text(report, color=color))
        sys.stdout.flush()
    if opts.html:
        write_html(report, recorded, opts.html)
        print(f"tracer-dump: wrote {opts.html}", file=sys.stderr)
    if opts.export and opts.export.endswith(".pt2"):
        try:
            ep = tracer.export(obj, args, kwargs)
        except tracer.ExportError as e:
            raise UsageError(f"--export {opts.export}: {e}") from None
        torch.export.save(ep, opts.export)
        print(f"tracer-dump: wrote {opts.export} (torch.export.load it; "
              f"{len(ep.tracer_assumptions)} assumptions export does not check)", file=sys.stderr)
    elif opts.export:
        written = export_graphs(recorded, opts.export, target=opts.target)
        print(f"tracer-dump: wrote {', '.join(written)}", file=sys.stderr)
    return 0


def describe_call(args, kwargs):
    parts = [describe_value(a) for a in args] + [f"{k}={describe_value(v)}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts)[:120] + ")"


@contextlib.contextmanager
def _quiet_broken_pipe():
    """`tracer-dump ... | head`: the reader closed the pipe after what it wanted, which is not an
    error. The rest of stdout goes nowhere and the files asked for (--html, --export) are still
    written."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
