"""Trace one frame into a cache Entry: interpreter -> guards -> graph -> backend -> code.

`convert_frame` is the frame boundary of rule 1: any failure while tracing, building
guards, compiling or generating code is caught here and turned into a fallback Entry that
runs the original code (with the reason kept for explain/logs), unless fullgraph=True, in
which case the user gets a FullGraphError naming the construct and its source line. A backend
that fails (raises, or returns no callable) is the user's error, not the tracer's: it raises
tracer.BackendError to the caller, naming the backend and the frame, unless
config.suppress_errors is set (then it falls back like the rest, with the reason logged).

Torch internals read here: torch._C._autograd's saved-tensor hooks and
torch.autograd.grad_mode._enter_inference_mode; checked on torch 2.13.0, 2.14.1 and 2.15.0
(docs/torch.md lists them all; tests/test_torch_internals.py resolves each).
"""
import logging
import os
import sys
import time
import traceback

import bytecode as bc
import bytecode_utils
import guards
import torch
from bytecode_utils import arg_names, versions
from guards import CellSource, GlobalStateMatch, LocalSource, NoAliasing, SameObject, StorageSharing, compile_guards
from guards.tensor import storage_id, storage_layout

from ..rewrite import codegen
from ..runtime import config, gc_pause, records
from ..graph import inference_blocks, node_meta
from ..graph.backends import compile_graph, eager as eager_backend, input_writes
from ..graph.output_graph import repoints_input
from ..runtime.cache import Entry, cache_for
from ..runtime.frame_hook import skip_code
from ..exc import BackendError, FullGraphError, StockLeaf, TraceAgain, Unsupported
from ..rewrite.graph_break import BreakInfo, can_break_at, generate_break, loop_limit_reason
from ..rewrite.handoff import hand_return, hand_to_callees, root_call_dims
from ..rewrite.rerun import HISTORY, check_instrs as rerun_check, plan as rerun_plan
from ..graph.shapes import SizePolicy, tensor_guards_with_dynamic_dims
from .frame import BREAK, Frame, TraceContext
from ..variables import blocks
from ..variables.base import UntracedValue
from ..variables.builder import wrap
from ..variables.functions import real_cell_box
from ..variables.generators import collect_generators
from ..variables.mode_blocks import grad_after_exits, leave_mode_blocks
from ..variables.torch_vars import hooks_message, set_hooks_message
from .coverage import saw_every_call

log = logging.getLogger("tracer")


def convert_frame(code, L, G, C, builtins, backend_fn, fullgraph=False, dynamic=None):
    """`dynamic`: None (automatic dynamic shapes), True (every input size symbolic) or False."""
    t0, backend_before = time.perf_counter(), records.backend_seconds_here()
    state = GlobalStateMatch()  # captured before tracing can change grad mode
    handled = sys.exc_info()[1]  # the caller's handled exception (read before our own handlers)
    ctx = None
    policy = SizePolicy(dynamic, cache_for(code).sizes)
    policy.scalar_outputs = fullgraph or config.capture_scalar_outputs
    policy.static_views = backend_fn is not eager_backend
    caught = []  # the exceptions handled here: their frames are let go of at the end
    leaves = set()  # stock nn modules kept as leaves (_trace)
    try:
        try:
            ctx, frame, ret = _trace(code, L, G, C, builtins, policy, handled=handled, stock_leaves=leaves)
            entry = _finish(frame, ret, state, builtins, backend_fn)
        except Unsupported as e:
            caught.append(e)
            if fullgraph or not e.breakable or not can_break_at(code, e.root_inst):
                raise
            too_deep = loop_limit_reason(code, e.root_inst.index + 1)
            if too_deep:
                e.reason = f"{e.reason} ({too_deep})"
                raise
            # Graph break: trace again, stopping just before the failing root instruction;
            # once more if the break must go to an earlier instruction (_late_break).
            for retry in (True, False):
                _release(ctx)
                ctx, frame, ret = _trace(code, L, G, C, builtins, policy, break_at=e.root_step, handled=handled,
                                         stock_leaves=leaves)
                if ret is not BREAK:
                    raise Unsupported(f"graph break could not be placed: {e}") from e
                try:
                    entry = _finish_break(frame, e, state, builtins, backend_fn)
                    break
                except _LateBreak as h:
                    caught.append(h)
                    if not retry:
                        raise
                    e = h
    except (Unsupported, BackendError) as e:
        caught.append(e)
        if isinstance(e, BackendError) and _learn_from_refusal(e, code, policy, leaves):
            _release(ctx)
            _forget_frames(caught, handled)
            return convert_frame(code, L, G, C, builtins, backend_fn, fullgraph, dynamic)
        if isinstance(e, BackendError) and not config.suppress_errors:
            loud = _loud_backend_error(e, code)
            _release(ctx)
            _forget_frames(caught, handled)
            raise loud from e.__cause__  # (None when the backend returned a non-callable)
        if fullgraph:
            raise FullGraphError(f"frame {code.co_name} ({code.co_filename}:{code.co_firstlineno}) "
                                 f"could not be captured whole: {e}") from e
        if isinstance(e, Unsupported):  # the frame runs as Python: its calls run natively
            hand_to_callees(e.root_calls)
        entry = _fallback(code, ctx, state, builtins, str(e), getattr(e, "location", None))
    except Exception as e:  # an internal error must never reach the user (rule 1)
        caught.append(e)
        if fullgraph:
            raise FullGraphError(f"internal error while tracing {code.co_name}: "
                                 f"{type(e).__name__}: {e}") from e
        log.warning("tracer internal error in %s, running it as Python:\n%s",
                    code.co_name, traceback.format_exc())
        records.internal_error(records.name_of(code), f"{type(e).__name__}: {e}", _where(ctx))
        entry = _fallback(code, ctx, state, builtins, f"internal error: {type(e).__name__}: {e}", None)
    entry = _verified(code, entry, L, G, C, state, builtins)
    entry.backend, entry.fullgraph = backend_fn, fullgraph
    if entry.code is None:  # a fallback: what the failed trace saw (_trace_once)
        entry.saw_every_call = bool(caught) and isinstance(caught[-1], Unsupported) and caught[-1].saw_every_call
    else:
        entry.saw_every_call = saw_every_call(ctx, G, builtins)
    backend = records.backend_seconds_here() - backend_before  # (the backend's compile is its own line)
    records.frame_traced(code, entry, time.perf_counter() - t0 - backend)
    _release(ctx)
    _forget_frames(caught, handled)
    return entry


def _loud_backend_error(e, code):
    """The BackendError the caller of the compiled function gets (config.suppress_errors is
    off): the backend's failure, naming the frame whose graph it was compiling. The backend's
    own exception is chained as its __cause__ (as torch.compile's BackendCompilerFailed)."""
    where = f"{code.co_filename}:{code.co_firstlineno}"
    loud = BackendError(f"{e} (compiling the graph of {records.name_of(code)} at {where}; "
                        f"tracer.config.suppress_errors = True runs such frames as Python instead)")
    loud.backend = getattr(e, "backend", None)
    loud.frame = records.name_of(code)
    loud.location = where
    return loud


def _learn_from_refusal(e, code, policy, leaves):
    """What a backend's failure on this trace's graph changes for the next trace of the code,
    if anything (True: trace again). SymFloat inputs it refused (inductor's and AOTAutograd's
    lowering of some float ops) become constants; `x[t]` by a 0-d int tensor, which it could
    not retrace (torch_calls.scalar_index_stand_in), becomes a graph break; stock modules the
    graph held as leaves (they could not be inlined) are called as Python, as torch.compile
    runs the RNNs."""
    if policy.made_float_symbols:
        policy.frame.static_floats = True
        policy.frame.notes.append(f"backend refused symbolic floats ({e}): floats are constants")
        return True
    if policy.made_scalar_index:
        policy.frame.no_scalar_index = True
        policy.frame.notes.append(f"backend refused indexing by a 0-d tensor ({e}): a graph break")
        return True
    breaks = cache_for(code).leaf_breaks
    if leaves <= breaks:
        return False
    breaks |= leaves
    return True


def _release(ctx):
    if ctx is not None:  # (None: the first trace failed before it was made)
        ctx.release()


# the folders of our own code, whose frames _forget_frames may clear
_OUR_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                  for m in (sys.modules["tracer"], bytecode_utils, guards))


def _forget_frames(caught, handled):
    """Clear the tracer's frames in the tracebacks of exceptions the trace raised and handled.
    Such an exception is held by a frame of its own traceback (a local, or the chain of one
    raised from it), so those frames, and the user's values in their locals (the call's
    arguments, the real tensors a trace reads), would otherwise live on in a cycle until the
    next cyclic collection: tensors would outlive the call (memory), and autograd, which
    names a saved tensor's node by what is still alive, would word its errors differently
    from eager (fuzz seed 920003). Only our own frames are cleared (a user's frame in such a
    chain keeps its locals, a suspended generator is not closed), and the chains end at the
    user's own exception (`handled`, the one being handled when the frame was entered)."""
    todo, seen = list(caught), {id(handled)}
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith(_OUR_DIRS):
                try:
                    tb.tb_frame.clear()
                except RuntimeError:  # a frame still running (this one)
                    pass
            tb = tb.tb_next
        todo += [e.__cause__, e.__context__]
    caught.clear()  # (their tracebacks, through f_back, reach convert_frame's frame, which holds this list)


def _verified(code, entry, L, G, C, state, builtins):
    """A new entry's guards must pass on the inputs it was built from: otherwise it would
    never be hit and every call would trace again. That is a tracer bug; the call runs as
    Python (an entry guarded on global state only, so there is no recompile loop)."""
    if entry.guards.check(L, G, C):
        if config.verify_guards:
            why = entry.guards.failures(L, G, C)
            if why:
                records.internal_error(records.name_of(code), "check() passes but failures() says: " + "; ".join(why))
        return entry
    why = "; ".join(entry.guards.failures(L, G, C)) or "no guard names itself (check and failures disagree)"
    message = f"guards fail on the inputs they were built from: {why}"
    log.warning("tracer internal error in %s: %s; running it as Python", code.co_name, message)
    records.internal_error(records.name_of(code), message)
    return Entry(guards=compile_guards([state], builtins=builtins), code=None,
                 reason=f"internal error: {message}")


def _where(ctx):
    inst = ctx.root_frame.current if ctx is not None and ctx.root_frame is not None else None
    return f"{ctx.code.co_filename}:{inst.lineno}" if inst is not None else None


_STOCK_RETRIES = 32


def _trace(code, L, G, C, builtins, policy, break_at=None, handled=None, stock_leaves=None):
    """Interpret the frame; a stock nn module whose forward cannot be inlined (StockLeaf)
    becomes a leaf in `stock_leaves` and the frame is interpreted again. The caller passes
    the same set to a later trace of the frame (a graph break's), which then takes the same
    path. A trace that changed real state on purpose (TraceAgain: a lazy module
    materialised) is interpreted again too."""
    leaves = set() if stock_leaves is None else stock_leaves
    for _ in range(_STOCK_RETRIES):
        try:
            with gc_pause.paused():
                return _trace_once(code, L, G, C, builtins, policy, break_at, handled, leaves)
        except StockLeaf as e:  # (a type in `leaves` is called as a leaf: it cannot raise this)
            leaves.add(e.key)
        except TraceAgain:  # (the state it changed is now as a second trace reads it)
            pass
    raise Unsupported(f"more than {_STOCK_RETRIES} torch.nn modules could not be inlined or initialised",
                      breakable=False)


def _trace_once(code, L, G, C, builtins, policy, break_at, handled, stock_leaves):
    """Interpret the frame once; the real grad mode is restored whatever happens."""
    ctx = TraceContext(code, G, builtins, policy)
    ctx.stock_leaves = stock_leaves
    ctx.leaf_breaks = cache_for(code).leaf_breaks
    ctx.break_at = break_at
    ctx.handled_at_entry = handled
    frame = ctx.root_frame = Frame(ctx, code, G, {}, {})
    prev_grad = torch.is_grad_enabled()
    ctx.grad_at_start = prev_grad
    ctx.hooks_off_at_start = hooks_message()
    try:
        with _own_saved_tensor_hooks(ctx):
            _bind_root(frame, code, L, C)
            ret = frame.run()
        if ret is not BREAK and ctx.generators:
            # the frame's locals die at return: generators only they held are finalized now
            # (one still reachable escapes: it is rebuilt where it stopped, GeneratorVariable.reconstruct)
            collect_generators(ctx, extra_roots=[ret])
        ctx.grad_at_stop = torch.is_grad_enabled()
        ctx.hooks_off_at_stop = hooks_message()
        ctx.mode_blocks_at_stop = list(ctx.mode_blocks)  # (at a graph break: still open)
        return ctx, frame, ret
    except BaseException as e:
        if isinstance(e, Unsupported) and e.breakable and ctx.frame_classes:
            # the code after a break would get a new class (or instance) each call: a
            # recompile each time; the frame runs as Python, its calls traced
            e.breakable = False
            e.reason = f"{e.reason} (after a class made in the frame: no graph break there)"
        if isinstance(e, Unsupported):  # (read before the release clears the frames)
            e.saw_every_call = saw_every_call(ctx, G, builtins)
            e.root_calls = root_call_dims(ctx.root_calls)
        _release(ctx)  # (the caller never sees this trace; its guards are not used)
        raise
    finally:
        leave_mode_blocks(ctx)
        torch._C._set_grad_enabled(prev_grad)
        if hooks_message() != ctx.hooks_off_at_start:
            set_hooks_message(ctx.hooks_off_at_start)


def _keep(t):
    return t


class _own_saved_tensor_hooks:
    """Fake-tensor work while tracing saves tensors for autograd like real work does; inside
    a user's `saved_tensors_hooks` (torch.utils.checkpoint's non-reentrant mode counts every
    save) those saves must not reach the user's hooks. Pass-through hooks are pushed on top
    for the trace (hooks are a stack: only the innermost pair runs). The context says whether
    the pair is pushed: traced code that switches hooks off takes it off (torch_vars)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __enter__(self):
        ctx = self.ctx
        ctx.user_saved_hooks = torch._C._autograd._top_saved_tensors_default_hooks(True) is not None
        try:
            torch._C._autograd._push_saved_tensors_default_hooks(_keep, _keep)
            ctx.own_saved_hooks = True
        except RuntimeError:  # hooks disabled by the user (disable_saved_tensors_hooks)
            ctx.own_saved_hooks = False

    def __exit__(self, *exc):
        if self.ctx.own_saved_hooks:
            torch._C._autograd._pop_saved_tensors_default_hooks()
            self.ctx.own_saved_hooks = False
        return False


def _bind_root(tx, code, L, C):
    tx.ctx.frame_values = (L, tx.ctx.f_globals, C)
    names = arg_names(code)
    for i, (name, value) in enumerate(zip(names, L)):
        try:
            tx.locals[name] = wrap(tx, value, LocalSource(name, i))
        except Unsupported as e:
            if getattr(e, "untraced_value", None) is not value:
                raise
            tx.locals[name] = UntracedValue(value, e.reason, LocalSource(name, i))
    tx.ctx.root_args = dict(tx.locals)  # (graph_break: arguments the trace let go of)
    for i, name in enumerate(code.co_freevars):
        tx.cells[name] = real_cell_box(tx, C[i], CellSource(name, i))


def _finish_break(tx, error, state, builtins, backend_fn):
    inst = error.root_inst
    entry = _build_entry(tx, generate_break(tx, inst, error.reason, error.sizes_from_data), state, builtins, backend_fn)
    stack = list(error.user_stack)  # outermost (this frame) first
    entry.breaks.append(BreakInfo(error.reason, tx.code.co_filename, inst.lineno, inst.opname, stack))
    return entry


def _finish(tx, ret, state, builtins, backend_fn):
    hand_return(tx.code, ret)
    with gc_pause.paused():
        rewrite = codegen.generate(tx, ret)
    return _build_entry(tx, rewrite, state, builtins, backend_fn)


def _build_entry(tx, rewrite, state, builtins, backend_fn):
    """The Entry for a codegen.Rewrite: guards, the graph compiled by the backend, and the code
    that calls it. Code that depends on the compiled graph goes in at the rewrite's
    AFTER_GRAPH_CALL section, right after the graph call."""
    ctx = tx.ctx
    slot = rewrite.slot
    out = ctx.output
    guards = [state, *tensor_guards_with_dynamic_dims(ctx.guards, out.shapes)]
    distinct, same = _distinct_sources(ctx)
    guards.extend(same)
    if len(distinct) > 1:
        guards.append(NoAliasing(tuple(distinct)))
    if slot is not None and backend_fn is not eager_backend:
        guards.extend(_storage_sharing(out))
    set_grad = []
    if slot is not None:  # stopped inside mode blocks: the graph leaves them at its end
        for block in reversed(ctx.mode_blocks_at_stop):
            block.exit_node(out.graph)
        set_grad = _hand_grad_mode_to_bytecode(ctx)
    gm = None
    compiled = None
    rerun = None
    if slot is not None:
        with gc_pause.paused():
            gm = out.build_module(rewrite.outputs)
        rerun = rerun_plan(tx.code, gm, ctx.ops_under_handler or not ctx.side_effects.is_empty(),
                           ctx.grad_at_start, out.history_changed, input_writes(backend_fn))
        _late_break(ctx, _history_write_at(ctx) if rerun is HISTORY else None,
                    *(_refused_by_compilers(gm) if backend_fn is not eager_backend else ()))
        if rerun is HISTORY:
            rerun = None
        if rerun is not None:
            rerun.handled = bool(ctx.ops_under_handler)
        real_inputs = [t for _s, _n, t in out.inputs]
        t_backend = time.perf_counter()
        with out.shapes.backend_context(real_inputs):
            compiled = compile_graph(backend_fn, gm, out.shapes.example_inputs(real_inputs))
        records.backend_compiled(time.perf_counter() - t_backend)
        if rerun is not None:
            compiled = rerun.wrap(compiled)
    if rerun is not None:  # a graph that raises makes the frame run again as Python (rerun.py)
        rewrite.add(codegen.AFTER_GRAPH_CALL, rerun_check(tx.code, codegen.GRAPH_OUT))
    # after the check: a graph that raised reruns the frame in the mode it found (graph_raised
    # puts it back); the mode the traced code reached is set only after a graph that returned
    rewrite.add(codegen.AFTER_GRAPH_CALL, set_grad)
    if ctx.hooks_off_at_stop != ctx.hooks_off_at_start:  # (torch_vars: the saved-tensors-hooks switch)
        rewrite.add(codegen.AFTER_GRAPH_CALL, versions.load_const_callable(set_hooks_message)
                    + [bc.Instr("LOAD_CONST", ctx.hooks_off_at_stop)] + versions.call(1) + [bc.Instr("POP_TOP")])
    # after the backend: it may have added guards on sizes of its own
    with gc_pause.paused():  # (not the backend's compile: see gc_pause)
        guard_set = compile_guards(guards + out.shapes.guards(), builtins=builtins, groups=blocks.group_roots(ctx))
        out.shapes.note_specialised_floats()
        new_code = codegen.assemble(tx.code, rewrite, compiled, rerun=rerun)
    _never_intercept(new_code)
    return Entry(guards=guard_set, code=new_code, graph=gm, ops=out.count_ops() if gm else 0, rerun=rerun,
                 library_reads=tuple(ctx.library_reads.values()))


class _LateBreak(Unsupported):
    """A graph break decided once the graph is built, at an earlier instruction of the root
    frame (_late_break): convert_frame traces again and stops there."""


def _late_break(ctx, *wanted):
    """Raise _LateBreak at the earliest of `wanted` ((root step, root instruction, reason) or
    None) that the trace did not already stop before."""
    wanted = [w for w in wanted if w is not None and (ctx.break_at is None or w[0] < ctx.break_at)]
    if not wanted:
        return
    step, inst, reason = min(wanted, key=lambda w: w[0])
    code = ctx.code
    e = _LateBreak(reason, location=f"{code.co_filename}:{inst.lineno}")
    e.root_step, e.root_inst = step, inst
    e.user_stack = [(code.co_filename, inst.lineno, code.co_name)]
    raise e


def _history_write_at(ctx):
    """The graph must be able to rerun (a handler of the frame around one of its ops, or
    Python writes to replay) but writes an input in place with autograd history, which
    nothing can undo: break at that write, so that it runs as Python where eager runs it.
    Once a break is placed (or where none can be), the graph raises as it is: the known gap
    in docs/reliability.md."""
    at = ctx.history_write_at
    if at is None:
        return None
    return (*at, f"{HISTORY}, and a handler of the frame or a replayed write needs it to rerun if it raises")


def _refused_by_compilers(gm):
    """The places where the frame must break because a compiling backend (AOTAutograd under
    aot_eager and inductor) cannot take the graph as it is: (root step, root instruction,
    reason) or None, each."""
    return _made_leaf_at(gm), _repointed_input_at(gm), _inference_escapes_at(gm)


def _inference_escapes_at(gm):
    """Where an inference_mode block starts whose tensor leaves the graph: AOTAutograd traces
    the block's ops in inference mode, but the graph it compiles runs them in the mode the
    frame was entered in (torch.compile's aot_eager hands `y` made in the block back as a
    normal tensor, one that a later in-place write or autograd accepts where eager raises; and
    the other way round for an `inference_mode(False)` block of a frame under inference mode).
    Break at the block's start, so that its body is a resume function traced in the block's
    mode, whose graph any backend runs in that mode. A tensor made in the block that stays in
    the graph is the same either way."""
    outside = torch.is_inference_mode_enabled()  # (the trace is over: the frame's mode, the compiled graph's)
    regions = inference_blocks.regions(gm.graph)
    for node in gm.graph.output_node().all_input_nodes:
        start = regions.get(node)
        ex = node.meta.get("example_value")
        if start is None or not isinstance(ex, torch.Tensor) or ex.is_inference() == outside:
            continue
        return _step_of(start, node_meta.MADE_AT,
                        f"{node.name}, made in an inference_mode block, leaves the graph: a compiling backend "
                        f"would give it back as another kind of tensor",
                        "a tensor made in an inference_mode block leaves the graph: a compiling backend runs "
                        "the block in the frame's mode")
    return None


def _repointed_input_at(gm):
    """Where the graph points one of its inputs at other memory (`x.set_(y)`, any overload of
    set_): break at that op, so that it runs as Python and the input is read again after it,
    as torch.compile breaks there. AOTAutograd refuses such a graph once the input has another
    mutation ("Encountered a set_ on a graph input, but the input has other mutations": a
    BackendError where eager runs), and gives `x.set_()` the wrong sizes."""
    for node in gm.graph.nodes:
        if not repoints_input(node):
            continue
        return _step_of(node, node_meta.MADE_AT,
                        f"{node.name} points a graph input at other memory, which a compiling backend refuses",
                        "set_ of a graph input: a compiling backend cannot point an input at other memory "
                        "(torch.compile breaks here too)")
    return None


def _made_leaf_at(gm):
    """Where the graph made a leaf that requires grad (`w = torch.ones(2, requires_grad=True)`)
    that another of its nodes uses, under a compiling backend: break at the op that made it,
    so the leaf is made as Python and is an input of the graph after the break (as
    torch.compile breaks at every such op). AOTAutograd differentiates a graph's outputs with
    respect to its inputs only: `w * x` would have no gradient to w (none at all where no
    input needs one). A leaf that is only an output is made a leaf again after the graph
    (graph/aot_outputs.py with_leaves), so `return w, x * 2` keeps its one graph. A node making
    such a leaf without a recorded step (none is known) makes the frame run as Python."""
    for node in gm.graph.nodes:
        ex = node.meta.get("example_value")
        if node.op in ("placeholder", "get_attr", "output") or not isinstance(ex, torch.Tensor) or \
                not node_meta.makes_leaf(ex) or all(u.op == "output" for u in node.users):
            continue
        return _step_of(node, node_meta.MADE_LEAF,
                        f"{node.name} makes a leaf that requires grad, which other ops use: a compiling backend "
                        f"cannot differentiate with respect to it",
                        "a tensor made with requires_grad=True is used by the graph: a compiling backend "
                        "differentiates with respect to the graph's inputs only (torch.compile breaks here too)")
    return None


def _step_of(node, key, unplaced, reason):
    """(root step, instruction, reason) of a late break at the op that made `node` (its
    meta[key]); with no step recorded, the frame runs as Python, with `unplaced` as the reason."""
    at = node.meta.get(key)
    if at is None:
        raise Unsupported(unplaced, breakable=False)
    return (*at, reason)


def _hand_grad_mode_to_bytecode(ctx):
    """The graph ends in the grad mode it started in (so any backend can compile it), once
    the mode blocks it stopped in are left (leaving an inference-mode block gives back the mode
    it was entered in); the rewritten code then sets the mode the traced code had reached
    (e.g. a break inside `with torch.no_grad()`), right after the graph call: returns those
    instructions."""
    if grad_after_exits(ctx, ctx.grad_at_stop) != ctx.grad_at_start:
        ctx.output.graph.create_node("call_function", torch._C._set_grad_enabled, (ctx.grad_at_start,), {})
    if ctx.grad_at_stop == ctx.grad_at_start:
        return []
    return (versions.load_const_callable(torch._C._set_grad_enabled)
            + [bc.Instr("LOAD_CONST", ctx.grad_at_stop)]
            + versions.call(1) + [bc.Instr("POP_TOP")])


def _distinct_sources(ctx):
    """Inputs that are tensors or mutable containers, or whose identity the trace compared,
    must stay distinct objects, as traced: (their sources, SameObject guards). An object
    whose Variable holds no state of its own reached through two sources that the memo did
    not join (a module of a ModuleList and the same module in a global list; stores on a
    module are kept per object) was one object in the trace: it must stay one, and only its
    first source joins the others in NoAliasing."""
    seen, out, same, first = set(), [], [], {}
    for src in ctx.input_tensor_sources:
        if src not in seen:
            seen.add(src)
            out.append(src)
    for v in (*ctx.mutable_inputs, *_stored_on(ctx)):
        src = v.source
        if src in seen:
            continue
        seen.add(src)
        obj = getattr(v, "value", None)
        if obj is not None and not v.mutable:  # (two Variables of one container would disagree)
            earlier = first.setdefault(id(obj), src)
            if earlier is not src:
                same.append(SameObject(earlier, src))
                continue
        out.append(src)
    return out, same


def _storage_sharing(out):
    """[StorageSharing] over the graph's tensor inputs other than module state when the graph
    writes into one of them: a compiling backend (AOTAutograd) functionalises the writes for
    the storage sharing and overlap it saw, so views that overlap where the traced ones did
    not (or at other offsets) must trace again (eager runs the ops in order and needs no
    such guard). Module parameters and buffers are left out: a model's BatchNorm would pay
    for hundreds of them on every call."""
    inputs = [(source, node, real) for source, node, real in out.inputs
              if isinstance(real, torch.Tensor) and not node.meta.get("static_address")]
    if len(inputs) < 2:
        return []
    written = set()
    for node in out.graph.nodes:
        written.update(node.meta.get("writes", ()))
    if not any(storage_id(node.meta["example_value"]) in written for _s, node, _r in inputs):
        return []
    groups, offsets = storage_layout(*(r for _s, _n, r in inputs))
    return [StorageSharing(tuple(s for s, _n, _r in inputs), groups, offsets)]


def _stored_on(ctx):
    """The inputs an attribute store of the trace may have reached: the objects it stored on,
    and every other object of one of their types (their type is guarded) the trace reached
    through a source. They must stay the objects they were: `a.v = 1; return b.v` read b's
    real attribute, which is a's new one when a later call passes one object as both."""
    stored = {id(var) for var, _names in ctx.side_effects.attr_stores.values() if var.source is not None}
    if not stored:
        return ()
    types = {type(value) for value, var in ctx.wrap_memo.values() if id(var) in stored}
    return [var for value, var in ctx.wrap_memo.values()
            if var.source is not None and (id(var) in stored or type(value) in types)]


def _fallback(code, ctx, state, builtins, reason, location):
    log.info("frame %s runs as Python: %s", code.co_name, reason)
    try:
        # dynamic dimensions unchecked: the original code is right for every size
        made = tensor_guards_with_dynamic_dims(ctx.guards, ctx.output.shapes) if ctx else []
        guard_set = compile_guards([state, *made], builtins=builtins)
    except Exception as e:  # guards the failed trace made: keep only global state
        records.internal_error(records.name_of(code), f"guards of a fallback could not be built: {type(e).__name__}: {e}")
        guard_set = compile_guards([state], builtins=builtins)
    return Entry(guards=guard_set, code=None, reason=reason, location=location)


def _never_intercept(code):
    """Rewritten code must not be handed to the frame hook again (it would be traced)."""
    skip_code(code)
