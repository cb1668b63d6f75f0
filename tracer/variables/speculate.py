"""Inlining a call on trial: taken back when the trace refuses it, as if never tried.

Why: a torch Python function called with constants only (`get_fastpath_enabled()`,
`_detect_is_causal_mask(None, None, 16)`, `torch.jit.is_tracing()`) can be folded two ways.
Called for real at trace time, its answer must be re-asked on every cache hit (a QueryMatch
guard: a Python call inside every guard check, the largest part of a small model's check).
Inlined like user code, it guards only what it read (a module global or two, which the C
check's snapshot proves unchanged for free) and folds to the same constant. Inlining is
better when it works; when the function does something the tracer refuses (a warning, an
untraced library), the call must still be made the old way, not become a graph break.

`inline_on_trial` runs the inline; on Unsupported it restores the trace's bookkeeping
(guards, wrapped values, frames, generators, pending attribute and global stores: what
`TraceContext.checkpoint` saves, declared per field in trace/context.py) and returns None,
so the caller goes on as before. If the refused inline already changed what cannot be
restored (a graph node, a container of the frame mutated in place, a closure cell
written), the refusal propagates: a graph break with its reason, never a wrong trace.
"""
from ..exc import Unsupported


def inline_on_trial(tx, fn_var, args, kwargs):
    """fn_var inlined with these arguments (its result), or None: the inline was refused and
    left no trace (the caller makes the call its usual way)."""
    cp = tx.ctx.checkpoint()
    try:
        return tx.inline_call(fn_var, args, kwargs)
    except Unsupported:
        if not cp.restorable():
            raise
        cp.restore()
        return None
