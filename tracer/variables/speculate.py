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
(guards, wrapped values, frames, generators, pending attribute and global stores) and
returns None, so the caller goes on as before. If the refused inline already changed what
cannot be restored (a graph node, a container of the frame mutated in place, a closure cell
written), the refusal propagates: a graph break with its reason, never a wrong trace.
"""
from ..exc import Unsupported


def _effects_mark(effects):
    """What the restore below cannot take back, as counts: equal marks, nothing changed."""
    return (len(effects.mutated_containers), len(effects.cell_stores), len(effects.deferred_calls))


def _output_mark(output):
    return (len(output.graph.nodes), len(output.inputs), len(output._attr_names), len(output.sym_inputs))


class _Checkpoint:
    def __init__(self, ctx):
        self.ctx = ctx
        fx = ctx.side_effects
        self.n_guards = len(ctx.guards)
        self.memo = dict(ctx.wrap_memo)
        self.n_frames = len(ctx.frames)
        self.n_generators = len(ctx.generators)
        self.n_foreign = len(ctx.foreign_generators)
        self.n_marks = len(ctx.shape_marks)
        self.cell_boxes = dict(ctx.cell_boxes)
        self.attr_stores = {k: (v, dict(d)) for k, (v, d) in fx.attr_stores.items()}
        self.raw_attr_stores = set(fx.raw_attr_stores)
        self.global_stores = {k: (g, dict(d)) for k, (g, d) in fx.global_stores.items()}
        self.flags = (ctx.module_hooks_guarded, ctx.ops_under_handler, ctx.history_write_at)
        self.effects = _effects_mark(fx)
        self.output = _output_mark(ctx.output)

    def restorable(self):
        return _effects_mark(self.ctx.side_effects) == self.effects and \
            _output_mark(self.ctx.output) == self.output

    def restore(self):
        ctx, fx = self.ctx, self.ctx.side_effects
        del ctx.guards[self.n_guards:]
        ctx.wrap_memo.clear()
        ctx.wrap_memo.update(self.memo)
        del ctx.frames[self.n_frames:]
        del ctx.generators[self.n_generators:]
        del ctx.foreign_generators[self.n_foreign:]
        del ctx.shape_marks[self.n_marks:]
        ctx.cell_boxes.clear()
        ctx.cell_boxes.update(self.cell_boxes)
        fx.attr_stores.clear()
        fx.attr_stores.update(self.attr_stores)
        fx.raw_attr_stores.clear()
        fx.raw_attr_stores.update(self.raw_attr_stores)
        fx.global_stores.clear()
        fx.global_stores.update(self.global_stores)
        ctx.module_hooks_guarded, ctx.ops_under_handler, ctx.history_write_at = self.flags


def inline_on_trial(tx, fn_var, args, kwargs):
    """fn_var inlined with these arguments (its result), or None: the inline was refused and
    left no trace (the caller makes the call its usual way)."""
    cp = _Checkpoint(tx.ctx)
    try:
        return tx.inline_call(fn_var, args, kwargs)
    except Unsupported:
        if not cp.restorable():
            raise
        cp.restore()
        return None
