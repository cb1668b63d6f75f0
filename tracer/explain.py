"""`tracer.explain(fn, *args, **kwargs)`: what one call captured, and why it broke.

It compiles `fn` with a recording backend, runs it once on the given inputs (so, as with
TorchDynamo's explain, the function's own effects happen once), and reports every frame
that was traced during the call — the root frame, its resume functions after graph
breaks, and callees traced through the frame hook — with their graphs, op counts, breaks
(reason, file:line, source line) and guards.
"""
import dataclasses

import torch

from .runtime import logs
from .api import compile as _compile, uncompiled
from .options import check_callable


@dataclasses.dataclass
class FrameReport:
    name: str
    filename: str
    firstlineno: int
    graph: object            # fx.GraphModule or None
    ops: list                # op targets, in graph order
    breaks: list             # dicts: reason, filename, lineno, user_stack
    guards: list             # one line per guard
    captured: bool           # False: the frame ran as plain Python


@dataclasses.dataclass
class ExplainOutput:
    frames: list
    result: object = None

    @property
    def graphs(self):
        return [f.graph for f in self.frames if f.graph is not None]

    @property
    def graph_count(self):
        return len(self.graphs)

    @property
    def breaks(self):
        return [b for f in self.frames for b in f.breaks]

    @property
    def break_count(self):
        return len(self.breaks)

    @property
    def op_count(self):
        return sum(len(f.ops) for f in self.frames)

    def __str__(self):
        out = [f"Graph count: {self.graph_count}    Graph break count: {self.break_count}    "
               f"Op count: {self.op_count}", ""]
        for i, f in enumerate(self.frames, 1):
            if not f.captured:
                state = "ran as Python"
            elif f.graph is None:  # rewritten code with no tensor work of its own (a break's caller)
                state = "traced, no tensor ops (no graph)"
            else:
                state = f"captured, {len(f.ops)} ops in 1 graph"
            out.append(f"Frame {i}: {f.name} ({f.filename}:{f.firstlineno}) — {state}")
            if f.ops:
                out.append("  ops: " + ", ".join(f.ops))
            for b in f.breaks:
                where = f"{b['filename']}:{b['lineno']}" if b["lineno"] else "unknown location"
                out.append(f"  break: {b['reason']}")
                out.append(f"    at {where}")
                line = logs.source_line(b["filename"], b["lineno"])
                if line:
                    out.append(f"      {line.strip()}")
                    out.append(f"      {logs.caret(line.strip())}")
                for item in b["user_stack"][1:]:
                    out.append(f"    inside {item}")
            out.append("  guards:")
            out.extend(f"    {g}" for g in f.guards)
            out.append("")
        return "\n".join(out)


def _op_name(node):
    if node.op == "call_module":
        return str(node.target)
    if node.op == "call_method":
        return f".{node.target}"
    return getattr(node.target, "__name__", str(node.target))


def explain(fn, *args, **kwargs):
    """Run `fn(*args, **kwargs)` once under the tracer and report what was captured."""
    check_callable("tracer.explain", fn)
    def recording_backend(gm, example_inputs):
        return gm.forward

    compiled = _compile(uncompiled(fn), backend=recording_backend)
    with logs.record() as made:
        result = compiled(*args, **kwargs)
    frames = []
    for code, entry in made:
        gm = entry.graph
        ops = [_op_name(n) for n in gm.graph.nodes if n.op.startswith("call")] if gm is not None else []
        frames.append(FrameReport(entry.name or code.co_qualname, code.co_filename, code.co_firstlineno, gm, ops,
                                  logs.breaks_of(entry), entry.guards.describe().splitlines(),
                                  entry.code is not None))
    report = ExplainOutput(frames, result)
    return report


__all__ = ["explain", "ExplainOutput", "FrameReport", "torch"]
