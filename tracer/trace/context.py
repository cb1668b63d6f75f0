"""The state of one trace, shared by the root frame and every frame inlined into it.

Each field of `TraceContext` is declared once, below, with what happens to it

* on `release()`, when the trace is done (convert_frame): the trace's structures refer to each
  other in cycles, so the user's objects they hold (through Variables, frames and cells) are let
  go of then, not at the next cyclic garbage collection: a generator or an object with __del__
  passed in must be finalized when the program drops it, as in eager;
* on `checkpoint()`, taken before a call is inlined on trial (variables/speculate.py): if the
  trace refuses the call, `restorable()` says whether it changed nothing that cannot be taken
  back, and `restore()` puts the rest back as it was.

`scratch_trace()` swaps in a throw-away graph for code traced only for the metadata of its
outputs (an autograd.Function's forward, a checkpointed function). tests/test_trace_context.py
fails for a field of the context that is not declared here.

Torch internals read here: torch._C's dispatch TLS include/exclude sets; checked on torch
2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them all; tests/test_torch_internals.py resolves
each).
"""
import contextlib
import dataclasses
import types

import torch

from ..graph.output_graph import OutputGraph
from ..graph.side_effects import SideEffects
from ..variables.exceptions import OuterException
from ..variables.lazy_reads import LazyReads

# What release() does to a field:
KEEP = "kept"         # nothing (and for checkpoint(): a trial leaves it as it was, or what the
                      # trial did to it stays)
CLEAR = "cleared"     # emptied in place
RESET = "reset"       # replaced by a new empty container (whatever else holds the old one keeps it)
DROP = "dropped"      # set to None
OWN = "own"           # the object's own release() / checkpoint() (OutputGraph, SideEffects)
# What checkpoint() saves of a field, and restore() does with it:
TRUNCATE = "truncated"    # a list that only grows: its length; cut back to it
COPY = "copied"           # a list or dict: a shallow copy; put back in place
VALUE = "value"           # a flag: its value; set back
MARK = "must not change"  # its mark(): changed, the trial cannot be taken back (not restorable)

RELEASE_KINDS = (KEEP, CLEAR, RESET, DROP, OWN)
TRIAL_KINDS = (KEEP, TRUNCATE, COPY, VALUE, MARK, OWN)


def _given(*, release, trial):
    """A field passed to the constructor."""
    return dataclasses.field(metadata={"release": release, "trial": trial})


def _state(initial, *, release, trial):
    """A field that starts as `initial`, or as a new `initial()` for a type or a function
    (list, dict, SideEffects)."""
    make = initial if callable(initial) else lambda: initial  # (set by __init__ either way)
    return dataclasses.field(default_factory=make, init=False, metadata={"release": release, "trial": trial})


def _dispatch_tls():
    return (torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set())


@dataclasses.dataclass(eq=False, repr=False)
class TraceContext:
    """State shared by the root frame and every inlined frame of one trace."""

    code: types.CodeType = _given(release=KEEP, trial=KEEP)
    f_globals: dict = _given(release=KEEP, trial=KEEP)
    f_builtins: dict = _given(release=KEEP, trial=KEEP)
    size_policy: dataclasses.InitVar = None  # the output graph's (graph/shapes.py)
    root_frame: object = _state(None, release=DROP, trial=KEEP)
    # (made by __post_init__) a trial that added a node, an input or an attribute to the graph
    # cannot be taken back
    output: OutputGraph = _state(None, release=OWN, trial=MARK)
    guards: list = _state(list, release=KEEP, trial=TRUNCATE)  # on what the trace read
    # pending stores and what cannot be undone (graph/side_effects.py declares which is which)
    side_effects: SideEffects = _state(SideEffects, release=DROP, trial=OWN)
    # id(real object) -> (object, its Variable): an object read twice is one Variable
    wrap_memo: dict = _state(dict, release=CLEAR, trial=COPY)
    # inputs that must stay distinct objects (convert_frame._distinct_sources): the sources of
    # tensor inputs, the Variables of mutable ones and of those whose identity was compared
    input_tensor_sources: list = _state(list, release=KEEP, trial=TRUNCATE)
    mutable_inputs: list = _state(list, release=RESET, trial=TRUNCATE)
    # (L, G, C) of the root frame: what guards read, read at trace time (variables/blocks.py)
    frame_values: object = _state(None, release=DROP, trial=KEEP)
    # reads through a source answered by an object met before without one: nothing guards
    # that the source still finds it (variables/blocks.py: a block that did is not replayed)
    unsourced_reads: list = _state(list, release=RESET, trial=TRUNCATE)
    # Variables with a source handed out again by the wrap memo (no guard added on that read:
    # variables/blocks.py does not record a block that read one wrapped before its call)
    memo_reads: list = _state(list, release=RESET, trial=TRUNCATE)
    # (kind, id(namespace), name) -> (kind, namespace, name, value): what the trace took from a
    # library namespace without a guard, kept with the entry (variables/library_reads.py; a
    # refused trial's reads stay: the entry then names more than it used, never less)
    library_reads: dict = _state(dict, release=RESET, trial=KEEP)
    # names of the classes the trace made (variables/frame_classes.py): a class made in the
    # frame is a new object on every call, and code after a graph break would see a new one
    # each time (its guards by identity fail: a recompile per call), so such a trace does not
    # break (convert_frame._trace_once)
    frame_classes: list = _state(list, release=RESET, trial=KEEP)
    # sources of the modules whose forward was inlined or replayed: the guards read through
    # one of them are checked by a function of its own, shared by its siblings (guards/builder.py)
    module_roots: dict = _state(dict, release=KEEP, trial=KEEP)
    block_roots: dict = _state(dict, release=KEEP, trial=KEEP)  # ... of replayed blocks, and theirs
    # block kind -> the first such module call, recorded for its siblings (variables/blocks.py)
    blocks: dict = _state(dict, release=CLEAR, trial=COPY)
    # the blocks being recorded, innermost last (pushed and popped in a finally: blocks.py)
    recordings: list = _state(list, release=RESET, trial=KEEP)
    # instructions executed (a trial's count too: the limits are on the work done)
    steps: int = _state(0, release=KEEP, trial=KEEP)
    # the guard that no global nn.Module hook is registered is made (guard_global_module_hooks)
    module_hooks_guarded: bool = _state(False, release=KEEP, trial=VALUE)
    # the saved-tensors-hooks switch (torch_vars: its message, None when on) when the trace
    # started and where it stopped; whether the first is guarded yet
    hooks_off_at_start: object = _state(None, release=KEEP, trial=KEEP)
    hooks_off_at_stop: object = _state(None, release=KEEP, trial=KEEP)
    hooks_off_guarded: bool = _state(False, release=KEEP, trial=VALUE)
    hooks_absent_guarded: bool = _state(False, release=KEEP, trial=VALUE)  # ... that no hooks are pushed
    # saved-tensors hooks: the user's were pushed when the trace started; the trace's own
    # pass-through pair is pushed now (convert_frame._own_saved_tensor_hooks)
    user_saved_hooks: bool = _state(False, release=KEEP, trial=KEEP)
    own_saved_hooks: bool = _state(False, release=KEEP, trial=KEEP)
    # instructions executed by the root frame
    root_steps: int = _state(0, release=KEEP, trial=KEEP)
    # stop the root frame before this step (graph break)
    break_at: object = _state(None, release=KEEP, trial=KEEP)
    # real grad mode around the trace
    grad_at_start: object = _state(None, release=KEEP, trial=KEEP)
    grad_at_stop: object = _state(None, release=KEEP, trial=KEEP)
    # autocast and inference-mode blocks entered (for real too) and not left yet, innermost
    # last (variables/mode_blocks.py; entering one makes a graph node: a trial that did is not
    # restorable, by the output's mark)
    mode_blocks: list = _state(list, release=KEEP, trial=KEEP)
    mode_blocks_at_stop: list = _state(list, release=KEEP, trial=KEEP)  # ... when the trace stopped
    # the thread's dispatch key sets at entry, where guards run (torch_vars.tensor_match)
    entry_dispatch_tls: tuple = _state(_dispatch_tls, release=KEEP, trial=KEEP)
    # NNModuleVariables whose forward is being inlined (node_meta; pushed and popped in a finally)
    module_calls: list = _state(list, release=RESET, trial=KEEP)
    # types of stock nn modules kept as call_module (StockLeaf)
    stock_leaves: set = _state(set, release=KEEP, trial=KEEP)
    # stock nn module types to call as Python (CodeCache.leaf_breaks)
    leaf_breaks: set = _state(set, release=KEEP, trial=KEEP)
    # every Frame of this trace (release() clears each one's locals, stack and cells first)
    frames: list = _state(list, release=CLEAR, trial=TRUNCATE)
    # the root frame's arguments as bound (convert_frame._bind_root)
    root_args: dict = _state(dict, release=RESET, trial=KEEP)
    # (code, {parameter: its symbolic dimensions}) of Python functions the root frame called with
    # symbolic sizes: a frame that then runs as Python hands them on (rewrite/handoff.py)
    root_calls: list = _state(list, release=RESET, trial=KEEP)
    # frames whose run() is executing, innermost last (pushed and popped in a finally)
    frame_stack: list = _state(list, release=RESET, trial=KEEP)
    # GeneratorVariables made by the trace, not finished
    generators: list = _state(list, release=RESET, trial=TRUNCATE)
    # [when, the generators that would run code on close]: recomputed only when a generator's
    # state or the list above changed (variables/generators.py pending)
    generator_memo: list = _state(list, release=RESET, trial=KEEP)
    # real generators from outside that would run code on close
    foreign_generators: list = _state(list, release=RESET, trial=TRUNCATE)
    # closing an unreachable generator (variables/generators.py)
    finalizing: bool = _state(False, release=KEEP, trial=KEEP)
    # the handled exception per exception state (variables/exceptions.py): the thread's,
    # then one per running generator; the caller's is not known until needed (a trial refused
    # inside an `except` block leaves its exception there: put back)
    exc_stack: list = _state(lambda: [OuterException()], release=KEEP, trial=COPY)
    # the lazy reads of input lists and dicts, each with its undo (variables/lazy_reads.py): a
    # refused trial's reads are unread again, as its guards are dropped
    lazy_reads: LazyReads = _state(LazyReads, release=OWN, trial=OWN)
    # id(real closure cell) -> its CellBox (variables/functions.py)
    cell_boxes: dict = _state(dict, release=CLEAR, trial=COPY)
    # torch._dynamo.mark_dynamic & co. seen (compile_annotations.py)
    shape_marks: list = _state(list, release=KEEP, trial=TRUNCATE)
    # sys.exc_info()[1] when the frame was called
    handled_at_entry: object = _state(None, release=KEEP, trial=KEEP)
    # an op was traced where a try/with of the traced code would catch its exception:
    # if the graph raises there, the frame must rerun as Python (rerun.py)
    ops_under_handler: bool = _state(False, release=KEEP, trial=VALUE)
    # (root step, root instruction) of the first op that wrote a graph input in place
    # while recording autograd history: where to break if the graph must rerun (rerun.py)
    history_write_at: object = _state(None, release=KEEP, trial=VALUE)

    def __post_init__(self, size_policy):
        self.output = OutputGraph(size_policy)

    def release(self):
        """Let go of the user's objects the trace held, now (see the module's docstring). The
        context is not used after it; a second release does nothing more."""
        for frame in self.frames:
            frame.locals.clear()
            frame.stack.clear()
            frame.cells.clear()
            frame.generator = None
            frame.return_value = None
        for f in FIELDS:
            how = f.metadata["release"]
            if how == CLEAR:
                getattr(self, f.name).clear()
            elif how == RESET:
                setattr(self, f.name, f.default_factory())
            elif how == DROP:
                setattr(self, f.name, None)
            elif how == OWN:
                getattr(self, f.name).release()

    def checkpoint(self):
        """The state to go back to if the call about to be inlined on trial is refused."""
        return Checkpoint(self)

    @contextlib.contextmanager
    def scratch_trace(self, output=None):
        """Trace into `output` (else a new scratch of the trace's graph, which it yields) with
        an empty side-effect log (the caller checks it stays empty) and a copy of the wrap
        memo; after, the trace's own are back, and so are the inputs registered so far (what
        the scratch trace wrapped is not an input of the trace). Guards it adds are kept: what
        it read is guarded like any other read."""
        saved = (self.output, self.side_effects, self.wrap_memo, list(self.input_tensor_sources),
                 list(self.mutable_inputs))
        self.output = self.output.scratch() if output is None else output
        self.side_effects = SideEffects()
        self.wrap_memo = dict(self.wrap_memo)
        try:
            yield self.output
        finally:
            self.output, self.side_effects, self.wrap_memo = saved[:3]
            self.input_tensor_sources[:], self.mutable_inputs[:] = saved[3], saved[4]


FIELDS = dataclasses.fields(TraceContext)


class Checkpoint:
    """TraceContext.checkpoint(): what each field's `trial` kind saves of it."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.saved = []  # [(field name, kind, what was saved)]
        for f in FIELDS:
            how, value = f.metadata["trial"], getattr(ctx, f.name)
            if how == TRUNCATE:
                self.saved.append((f.name, how, len(value)))
            elif how == COPY:
                self.saved.append((f.name, how, value.copy()))
            elif how == VALUE:
                self.saved.append((f.name, how, value))
            elif how == MARK:
                self.saved.append((f.name, how, value.mark()))
            elif how == OWN:
                self.saved.append((f.name, how, value.checkpoint()))

    def restorable(self):
        """Whether the trial changed nothing that cannot be taken back."""
        for name, how, saved in self.saved:
            if how == MARK and getattr(self.ctx, name).mark() != saved:
                return False
            if how == OWN and not saved.restorable():
                return False
        return True

    def restore(self):
        for name, how, saved in self.saved:
            value = getattr(self.ctx, name)
            if how == TRUNCATE:
                del value[saved:]
            elif how == COPY:
                if isinstance(value, list):
                    value[:] = saved
                else:
                    value.clear()
                    value.update(saved)
            elif how == VALUE:
                setattr(self.ctx, name, saved)
            elif how == OWN:
                saved.restore()
