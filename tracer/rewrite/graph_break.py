"""Graph breaks: compile what was traced so far, run the unsupported instruction natively,
and continue in a resume function that is itself traced when it runs.

How a break is found: tracing stops with `Unsupported` at some instruction of the root frame
(a break inside an inlined call surfaces at the root's CALL). convert_frame then traces the
frame again and stops just *before* that instruction (the trace is deterministic, so the
state is exactly the state before it, with nothing half-done). From that state, `plan_break` decides what the break hands on (a BreakPlan: which stack
items are rebuilt, which locals go live into the resume functions, the instruction and the
continuations after it), reading the trace's state only; `emit_break` then writes it into
the sections of a codegen.Rewrite:

    prologue; graph call
    phase 1: every value needed later into temporaries (stack, live locals, side effects)
    phase 2: side effects written back
    push the instruction's inputs; the instruction itself, natively
    store its results; call resume(stack..., live locals...) and return what it returns

A conditional jump gets two continuations, one per target. If the instruction is inside a
`try`/`with` region, it is covered by a handler that resumes at the original handler with
the exception, so except/finally/__exit__ run exactly as in the original frame.
"""
import dataclasses
import dis

import bytecode as bc

from bytecode_utils import decode, live_locals, versions
from bytecode_utils.analysis import loop_components
from bytecode_utils.codegen import GENERATOR_FLAGS
from bytecode_utils.instructions import PerCode, to_bytecode
from bytecode_utils.resume import (STACK_ARG, STACK_EXC_INFO, STACK_NULL, make_resume_code, resume_origin,
                                   resume_target, super_self_name)

from .codegen import EXIT, GRAPH_OUT, INSTRUCTION, READS, CodeGen, emit_stores, side_effect_values
from .handoff import DATA_ROWS, hand_to_callee, hand_to_resume, link_return, symbolic_dims
from ..exc import Unsupported
from ..runtime import config
from ..variables.exceptions import ExcInfoSlot, OuterException
from ..variables.generators import holders_of_pending_generators
from ..variables.stack_values import NullVariable

# opname -> (values popped, values pushed); CALL/CALL_FUNCTION_EX computed from the arg.
_SHAPES = {
    "BINARY_OP": (2, 1), "BINARY_SUBSCR": (2, 1), "COMPARE_OP": (2, 1), "IS_OP": (2, 1),
    "CONTAINS_OP": (2, 1), "LOAD_ATTR": (1, 1), "STORE_ATTR": (2, 0), "STORE_SUBSCR": (3, 0),
    "DELETE_SUBSCR": (2, 0), "UNARY_NEGATIVE": (1, 1), "UNARY_POSITIVE": (1, 1),
    "UNARY_INVERT": (1, 1), "UNARY_NOT": (1, 1), "GET_ITER": (1, 1), "BUILD_STRING": None,
    "FORMAT_VALUE": None, "UNPACK_SEQUENCE": None, "CALL": None, "CALL_FUNCTION_EX": None,
    "POP_JUMP_IF_TRUE": (1, 0), "POP_JUMP_IF_FALSE": (1, 0),
    "STORE_GLOBAL": (1, 0), "DELETE_ATTR": (1, 0), "RAISE_VARARGS": None, "RERAISE": (1, 0),
    "LOAD_METHOD": (1, 2),  # run as LOAD_ATTR: leaves (NULL, bound attribute), see _native
    "BEFORE_WITH": (1, 2),  # an __enter__ that cannot be traced runs natively; the body resumes
}  # (+ the instructions only some versions have: versions.break_shape)

# Method loads: at a break they run as plain attribute loads and the NULL is put beside.
_METHOD_LOADS = ("LOAD_METHOD", "LOAD_SUPER_METHOD")


@dataclasses.dataclass
class BreakInfo:
    reason: str
    filename: str
    lineno: int
    opname: str
    user_stack: list  # [(filename, lineno, function)] from the root frame inwards


def instruction_shape(inst):
    """(values popped, values pushed) of an instruction a graph break can be placed at, or None."""
    shape = _SHAPES.get(inst.opname, False)
    if shape is False:
        return versions.break_shape(inst)
    if shape is not None:
        return shape
    op, arg = inst.opname, inst.arg
    if op == "CALL":
        return arg + 2, 1
    if op == "CALL_FUNCTION_EX":
        return 3 + versions.call_ex_has_kwargs(inst), 1
    if op == "BUILD_STRING":
        return arg, 1
    if op == "FORMAT_VALUE":
        return (2 if arg & 0x04 else 1), 1
    if op == "UNPACK_SEQUENCE":
        return 1, arg
    if op == "RAISE_VARARGS":
        return arg, 0
    return None


def can_break_at(code, inst):
    """Whether a break can be placed at this root instruction (else: whole-frame fallback)."""
    if inst is None or instruction_shape(inst) is None:
        return False
    if reads_locals(code):
        return False  # locals()/vars()/dir()/eval/exec read locals that liveness calls dead
    return not code.co_flags & GENERATOR_FLAGS


_READS_LOCALS = frozenset({"locals", "vars", "dir", "eval", "exec"})


def reads_locals(code):
    """Whether the frame may read its own locals by name: it names locals/dir/eval/exec, or
    `vars` other than as `vars(arg)` (which reads arg.__dict__): a load of `vars` not followed
    by the load of an argument (called bare, stored, passed on), or any star-call beside it."""
    names = _READS_LOCALS.intersection(code.co_names)
    if names != {"vars"}:
        return bool(names)
    ins = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "PUSH_NULL", "EXTENDED_ARG")]
    if any(i.opname == "CALL_FUNCTION_EX" for i in ins):
        return True
    return any(i.argval == "vars" and i.opname.startswith("LOAD_") and
               (k + 1 == len(ins) or not ins[k + 1].opname.startswith("LOAD_"))
               for k, i in enumerate(ins))


def loop_depth(code, target):
    """(iterations, resumes): how deep in a loop a resume of `code` at instruction `target`
    would be, counting only resumes that continue the same loop ((0, 0): `target` is in no
    loop).

    A break inside a loop body makes the frame call a resume function, whose trace runs the
    rest of that iteration and stops at the next break: later in the same iteration (a body
    with several breaks) or at the same break in the next one. That break calls a resume
    function one level deeper: one Python frame per break. A cached resume that called
    itself would recurse through cache hits until RecursionError, so the resume codes of one
    chain must all differ: `iterations` grows when the break is at or before the place the
    resume started (the trace went round the loop), otherwise a later place in the body
    keeps it, so within one iteration count the targets strictly increase and no code
    repeats. A chain stops at config.loop_resume_limit iterations (or LOOP_NEST_LIMIT
    resumes): then the frame refuses the break and runs as Python (its calls still traced).
    The limit counts iterations, not breaks, so a body with three breaks is captured as often
    as one with a single break. Its default is 0, TorchDynamo's choice (the whole frame runs
    as Python at the first break in a loop): a model called in a sampling loop or a per-image
    list comprehension is then one entry of its own, reused by every iteration, instead of
    one copy of its graph per iteration."""
    origin = resume_origin(code)
    if origin is not None:
        orig, index_map = origin
        start, here = resume_target(code), index_map.get(target)
        if start is not None and here is not None:
            if _same_loop(orig, start, here):
                iterations, resumes = _LOOP_DEPTH.get(code, (0, 0))
                return (iterations + 1 if here <= start else iterations, resumes + 1)
            return (1, 1) if _same_loop(orig, here, here) else (0, 0)
    return (1, 1) if _same_loop(code, target, target) else (0, 0)


def loop_limit_reason(code, target):
    """Why a break at `target` must not nest another resume function of its loop (None: it
    may); see loop_depth."""
    iterations, resumes = loop_depth(code, target)
    limit = config.loop_resume_limit
    if iterations > limit:
        if not limit:
            return "a break inside a loop: the frame runs as Python, its calls traced (as TorchDynamo)"
        return (f"a break in each iteration of a loop: after {limit} iterations "
                f"the rest runs as Python, its calls traced")
    if resumes > LOOP_NEST_LIMIT:
        return (f"{LOOP_NEST_LIMIT} breaks in one loop: the rest runs as Python, its calls "
                f"traced")
    return None


def _same_loop(code, a, b):
    """Whether one loop body holds the breaks that resume at instructions `a` and `b` of `code`
    (each reaches the other: bytecode_utils.loop_components)."""
    loop = _loop_at(code, a)
    return loop is not None and loop == _loop_at(code, b)


def _loop_at(code, target):
    """The loop (a component id) of a break that resumes at `target`, or None: the loop of
    `target` or, failing that, of the instruction before it, the break itself when `target`
    follows it. A break need not fall through into its own loop: `if t.sum() < 0: break`
    breaks at a conditional jump whose taken side stays in the loop, and a `raise` in a loop's
    `try` is followed (3.12+) by handler cleanup that is in no loop; tested on the next
    instruction alone, both would nest one resume function per iteration."""
    loops = loop_components(code)
    for t in (target, target - 1):
        if 0 <= t < len(loops) and loops[t] is not None:
            return loops[t]
    return None


# Resume code objects are made once per (code, target, stack layout, locals, handler kind):
# repeated calls and recompiles reuse them, so their own caches hit.
_RESUME_CACHE = PerCode()
_LOOP_DEPTH = PerCode()  # resume code -> loop_depth it was made for
LOOP_RESUME_LIMIT = 8  # (the value tests set config.loop_resume_limit to; TRACER_LOOP_RESUMES)
LOOP_NEST_LIMIT = 64  # resume frames one loop may nest (far below the recursion limit)


def resume_code(code, target, stack_kinds, local_names, lasti=None, push_exc=False):
    depth = loop_depth(code, target)
    origin = resume_origin(code)
    if origin is not None and target in origin[1]:  # a break in a resume function: resume the original
        orig, index_map = origin
        mapped_lasti = lasti
        if lasti is not None:  # the handler's lasti names an instruction of the code it runs in
            k = {ins.offset: ins.index for ins in decode(code)}.get(lasti)
            mapped_lasti = decode(orig)[index_map[k]].offset if k in index_map else None
        if lasti is None or mapped_lasti is not None:
            code, target, lasti = orig, index_map[target], mapped_lasti
    per_code = _RESUME_CACHE.setdefault(code, {})
    key = (target, tuple(stack_kinds), tuple(local_names), lasti, push_exc, depth)
    hit = per_code.get(key)
    if hit is None:
        hit = per_code[key] = make_resume_code(code, target, list(stack_kinds), list(local_names),
                                               lasti=lasti, push_exc=push_exc)
        _LOOP_DEPTH[hit] = depth
    return hit


# ---- the plan: what a break hands on, decided from the trace's state alone --------------------
# Kept apart from the emission so that what goes live into the resume functions, which stack
# items are rebuilt and how the frame goes on can be read (and checked) without the bytecode.

FALL_THROUGH, JUMP, HANDLER = "fall_through", "jump", "handler"


@dataclasses.dataclass(frozen=True)
class LiveLocal:
    """A local the rest of the frame may need, and what its resume functions get for it."""
    name: str
    value: object          # its Variable
    passed: bool           # its value is passed; else None is (it is never read again, only deleted
                           # or rebound: its value must not be kept alive by the resume call)
    held: bool = False     # not passed, but rebuilt into a temporary dropped at the resume call: a
                           # generator whose finally runs where the program drops it


@dataclasses.dataclass(frozen=True)
class Continuation:
    """One way the frame goes on after the instruction: a call of a resume function."""
    entry: str             # FALL_THROUGH (after the instruction), JUMP (at its jump target) or
                           # HANDLER (at the handler of its try region, with the exception)
    target: int            # index of the instruction the resume function starts at
    kept: int              # how many stack items below the instruction's inputs go on (the bottom ones)
    stack_kinds: tuple     # bytecode_utils.resume STACK_* of each stack argument: the kept items, then
                           # what the instruction pushed (each STACK_ARG there one of its `results`)
    local_names: tuple     # the live locals passed (LiveLocal names), in resume_code's order
    results: int = 0       # values the instruction leaves on the stack, stored before the call
    lasti: int | None = None   # the offset a handler with lasti pushes (HANDLER)
    takes_exc: bool = False    # the exception is passed (HANDLER)


@dataclasses.dataclass(frozen=True)
class BreakPlan:
    """What a frame that breaks at `inst` hands on: plan_break decides it, emit_break writes it."""
    inst: object           # the instruction (dis.Instruction), run natively
    below: tuple           # stack Variables under its inputs, rebuilt for the resume calls (a NullVariable: a NULL)
    inputs: tuple          # its inputs, rebuilt and pushed for it
    live_locals: tuple     # LiveLocals, in the order they are rebuilt
    handled: object        # the exception the frame was handling where it stopped, handled again
                           # while the instruction runs (None: none, or only its caller's)
    released_args: tuple   # argument slots the trace let go of, deleted before the instruction
    continuations: tuple   # in the order they are emitted
    sizes_from_data: bool = False  # the instruction's results have sizes that depend on tensor data

    @property
    def handler(self):
        """The instruction's exception-table entry (None: no try/with region covers it)."""
        return self.inst.exn

    @property
    def jumps(self):
        return any(c.entry == JUMP for c in self.continuations)


def generate_break(tx, inst, reason, sizes_from_data=False):
    """The Rewrite of a frame that breaks at `inst` (the root frame stopped before it).
    `sizes_from_data`: the break is an op whose output size depends on the data."""
    return emit_break(tx, plan_break(tx, inst, sizes_from_data))


def plan_break(tx, inst, sizes_from_data=False):
    """The BreakPlan for the root frame `tx` stopped before `inst`. Reads the trace's state and
    emits nothing; raises Unsupported where the break cannot be placed."""
    code = tx.code
    pops, pushes = instruction_shape(inst)
    stack = list(tx.stack)
    if len(stack) < pops:
        raise Unsupported("graph break: stack shorter than the instruction's inputs")
    below, inputs = stack[:len(stack) - pops], stack[len(stack) - pops:]
    if inst.opname == "CALL_FUNCTION_EX" and not any(isinstance(v, NullVariable) for v in inputs[:2]):
        raise Unsupported("graph break at CALL_FUNCTION_EX without NULL")
    liveness = live_locals(code)
    falls_through = inst.opname not in ("RAISE_VARARGS", "RERAISE")  # a raise continues only at a handler
    targets = [inst.index + 1] if falls_through else []
    is_jump = inst.opname in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE")
    if is_jump:
        targets.append(inst.target)
    handler = inst.exn
    first = super_self_name(code)
    needed = set()
    for t in targets:
        needed |= liveness[t]
    if handler is not None:
        needed |= liveness[handler.target]
    if first is not None:  # zero-arg super() reads it without a LOAD_FAST
        needed.add(first)
    # A local whose value is never read again, only deleted (`del obj` after the break), is
    # passed as None: its value must not be kept alive by the resume call's arguments (the
    # caller holds them until the call returns), so it is freed here, as near as possible
    # to where the original frame frees it.
    value_live = live_locals(code, values_only=True)
    read_later = set().union(*(value_live[t] for t in targets)) if targets else set()
    if handler is not None:
        read_later |= value_live[handler.target]
    # A local the rest of the frame overwrites or deletes, never reads (`del g`), may hold the
    # last reference to a generator whose finally must run where the program drops it: it is
    # rebuilt (held, below), not passed as None.
    passed_anyway = read_later | set(code.co_cellvars) | ({first} if first is not None else set())
    holders = holders_of_pending_generators(tx.ctx, tx.locals, passed_anyway)
    needed |= holders
    live = []
    for name in sorted(needed):
        if name not in tx.locals:
            continue
        if name in read_later or name == first or name in code.co_cellvars:
            live.append(LiveLocal(name, tx.locals[name], passed=True))
            continue
        # A generator whose finally runs when this local is dropped: rebuilt into a temporary
        # that goes before the resume call, i.e. right after the instruction. Exact only if
        # the rest of the frame drops it before doing anything else.
        if name in holders and not all(_dropped_first(tx.instrs, t, name) for t in targets):
            raise Unsupported("graph break could not be placed: a generator's finally would "
                              "run at another point of the rest of the frame")
        live.append(LiveLocal(name, tx.locals[name], passed=False, held=name in holders))
    handled = tx.ctx.exc_stack[-1]  # the exception handled where the frame stopped
    # An argument the traced code deleted or rebound before this point is still held by this
    # frame's argument slot: let it go before the instruction, where the original frame let
    # go of it (weakref callbacks, __del__, a generator's finally run where eager runs them).
    released = tuple(name for name, var in tx.ctx.root_args.items()
                     if name not in code.co_cellvars and tx.locals.get(name) is not var)

    passed = {loc.name for loc in live}

    def continuation(entry, target, kept, pushed=(), **kw):
        kinds = _stack_kinds(below[:kept], handled) + list(pushed)
        return Continuation(entry, target, kept, tuple(kinds), _resume_locals(code, liveness, target, passed), **kw)

    continuations = []
    if inst.opname in _METHOD_LOADS:  # the attribute and a NULL, in this version's call order
        pair = versions.callable_and_null((None, STACK_ARG), (None, STACK_NULL))
        continuations.append(continuation(FALL_THROUGH, inst.index + 1, len(below), [k for _t, k in pair],
                                          results=1))
    elif _iter_pair(inst):  # 3.15: the iterator and a NULL in its index slot
        continuations.append(continuation(FALL_THROUGH, inst.index + 1, len(below), [STACK_ARG, STACK_NULL],
                                          results=1))
    elif falls_through:
        continuations.append(continuation(FALL_THROUGH, inst.index + 1, len(below), [STACK_ARG] * pushes,
                                          results=pushes))
    if is_jump:
        continuations.append(continuation(JUMP, inst.target, len(below)))
    if handler is not None:
        continuations.append(continuation(HANDLER, handler.target, len(below[:handler.depth]),
                                          lasti=inst.offset if handler.lasti else None, takes_exc=True))
    return BreakPlan(inst, tuple(below), tuple(inputs), tuple(live),
                     None if handled is None or isinstance(handled, OuterException) else handled,
                     released, tuple(continuations), sizes_from_data)


def _stack_kinds(stack, handled):
    """STACK_* of each stack item a resume function takes (`handled`: the exception handled
    where the frame stopped, see _live_handler_slots)."""
    live = _live_handler_slots(stack, handled)
    return [STACK_NULL if isinstance(v, NullVariable) else STACK_EXC_INFO if id(v) in live
            else STACK_ARG for v in stack]


def _resume_locals(code, liveness, target, passed):
    """The locals (of `passed`) a resume function starting at `target` takes, in
    make_resume_code's order: the live ones sorted, then the zero-arg super()'s self."""
    first = super_self_name(code)
    names = [n for n in sorted(liveness[target]) if n in passed]
    if first in passed and first not in names:
        names.append(first)
    return tuple(names)


_INERT = frozenset({"NOP", "LOAD_CONST", "LOAD_FAST", "POP_TOP", "COPY", "SWAP", "RESUME", "CACHE"})


def _dropped_first(instrs, start, name):
    """Whether, from instruction `start` on, `name` is rebound or deleted before anything
    else that could be observed happens (only loads and stack shuffles in between)."""
    for inst in instrs[start:]:
        if inst.opname in ("STORE_FAST", "DELETE_FAST") and inst.argval == name:
            return True
        if inst.opname not in _INERT:
            return False
    return False


def _live_handler_slots(stack, handled):
    """ids of the ExcInfoSlots of handlers still running: the top one holds the handled
    exception, the one below it the exception that one replaced, and so on. (A cleanup
    handler's COPY 3; POP_EXCEPT leaves a finished slot on the stack until its RERAISE.)"""
    live = set()
    for v in reversed(stack):
        if isinstance(v, ExcInfoSlot) and v.exc is handled:
            live.add(id(v))
            handled = v.prev
    return live


# ---- the emission: the plan as the sections of a Rewrite (codegen.SECTIONS) --------------------

def emit_break(tx, plan):
    """The Rewrite for `plan`:

        READS        phase 1: the stack, the live locals, the handled exception, the side effects
        STORES       phase 2: the side effects written back
        INSTRUCTION  its inputs pushed; the instruction itself, natively
        EXIT         per continuation: its results stored; the resume function called, its
                     result returned
    """
    cg = CodeGen.for_frame(tx)
    with cg.section(READS):
        below_tmps = [None if isinstance(v, NullVariable) else cg.into_tmp(v) for v in plan.below]
        input_tmps = [None if isinstance(v, NullVariable) else cg.into_tmp(v) for v in plan.inputs]
        local_tmps = {}
        for loc in plan.live_locals:
            if loc.passed:
                local_tmps[loc.name] = cg.into_tmp(loc.value)
                continue
            if loc.held:
                cg.into_tmp(loc.value)
            cg.load_const(None)
            local_tmps[loc.name] = cg.store_tmp()
        handled_tmp = None if plan.handled is None else cg.into_tmp(plan.handled)
    # sizes handed on as dynamic (handoff.py), by the temporary that carries the value on
    handed = _Handed(hand_to_callee(tx.instrs, plan.inst, plan.inputs),
                     DATA_ROWS if plan.sizes_from_data else frozenset())
    for tmp, v in zip(below_tmps, plan.below):
        handed.add(tmp, v)
    for loc in plan.live_locals:
        if loc.passed:
            handed.add(local_tmps[loc.name], loc.value)
    emit_stores(cg, side_effect_values(cg, tx))
    # Temporaries this frame holds; dropped before the resume call so that it keeps no object
    # alive longer than the original frame would (weakref callbacks, __del__ timing).
    held = cg.temps()
    if cg.calls_graph():
        held.append(GRAPH_OUT)
    with cg.section(INSTRUCTION):
        # Inside except/finally bodies the instruction runs with their exception handled, as in
        # the original frame (a bare `raise`, sys.exc_info()); restored before the resume call.
        entered = [] if handled_tmp is None else [_enter_handler(cg, handled_tmp)]
        held += entered
        for name in plan.released_args:
            cg.emit("DELETE_FAST", name)
        labels = _emit_instruction(cg, plan, input_tmps)
    with cg.section(EXIT):
        for cont in plan.continuations:
            _emit_continuation(cg, cont, labels.get(cont.entry), below_tmps[:cont.kept], local_tmps,
                               entered, held, handed)
    return cg.finish()


def _emit_instruction(cg, plan, input_tmps):
    """The instruction with its inputs pushed, natively. If it is inside a `try`/`with` region,
    it is covered by a handler that resumes at the original one (see module docstring).
    Returns the labels the JUMP and HANDLER continuations start at."""
    labels = {}
    if plan.handler is not None:
        labels[HANDLER] = bc.Label()
        try_begin = bc.TryBegin(labels[HANDLER], push_lasti=False)
        cg.extend([try_begin])
    for v in input_tmps:
        cg.extend(versions.push_null() if v is None else [bc.Instr("LOAD_FAST", v)])
    if plan.jumps:
        labels[JUMP] = bc.Label()
    cg.extend(_native(_bytecode_instrs(cg.code), plan.inst, labels.get(JUMP)))
    if plan.handler is not None:
        cg.extend([bc.TryEnd(try_begin)])
    return labels


class _Handed:
    """The dimensions a break hands on as dynamic (handoff.py), by the temporary that carries
    each value to the resume call; `results`, those of what the instruction pushes; `callee`,
    the code of the Python function the instruction calls (None: not a plain call)."""

    def __init__(self, callee, results):
        self.callee, self.results, self.by_tmp = callee, results, {}

    def add(self, tmp, var):
        if tmp is not None:
            self.by_tmp[tmp] = symbolic_dims(var)

    def to_resume(self, rcode, args, result):
        """`args`: the temporaries passed, in order; `result`: the one holding the call's value."""
        hand_to_resume(rcode, [self.results if t == result else self.by_tmp.get(t) for t in args])
        if self.callee is not None and result is not None:
            link_return(self.callee, rcode, rcode.co_varnames[args.index(result)])


def _emit_continuation(cg, cont, label, stack_tmps, local_tmps, entered, held, handed):
    """Where the continuation starts (after the instruction, or at its label): store what the
    instruction left, leave the handled exception, call the resume function."""
    if label is not None:
        cg.extend([label])
    exc_tmp = cg.store_tmp() if cont.takes_exc else None
    results = [cg.store_tmp() for _ in range(cont.results)][::-1]
    _leave_handlers(cg, entered)
    pushed = iter(results)
    stack_tmps = list(stack_tmps) + [None if k == STACK_NULL else next(pushed) for k in cont.stack_kinds[cont.kept:]]
    drop = held + results + ([exc_tmp] if exc_tmp is not None else [])
    result = results[-1] if results and cont.entry == FALL_THROUGH else None  # (the top of the stack)
    _call_resume(cg, cont, stack_tmps, local_tmps, exc_tmp, drop, handed, result)


def _enter_handler(cg, exc_tmp):
    """Make the exception in `exc_tmp` the handled one (as the handler's PUSH_EXC_INFO did);
    returns the temporary holding the previous one, for _leave_handlers."""
    cg.emit("LOAD_FAST", exc_tmp)
    cg.emit("PUSH_EXC_INFO")
    cg.emit("POP_TOP")
    return cg.store_tmp()


def _leave_handlers(cg, prev_tmps):
    for t in reversed(prev_tmps):
        cg.emit("LOAD_FAST", t)
        cg.emit("POP_EXCEPT")


def _bytecode_instrs(code):
    """The code's instructions as bytecode.Instr, once per code object (shared: copy
    before changing one, as versions.call_instructions does)."""
    hit = _INSTRS.get(code)
    if hit is None:
        hit = _INSTRS[code] = [i for i in to_bytecode(code) if isinstance(i, bc.Instr)]
    return hit


_INSTRS = PerCode()


def _iter_pair(inst):
    """GET_ITER where an iterator is two stack entries (3.15): CPython's own may hold a
    sequence and a tagged int index, which no local can keep; at a break it runs as iter(x),
    and the continuation puts a NULL in the index slot (CPython's form for any iterator)."""
    return inst.opname == "GET_ITER" and versions.ITER_SLOTS == 2


def _native(original, inst, jump_label):
    """Copies of the original instruction (with what belongs to it, e.g. a CALL's KW_NAMES);
    a conditional jump becomes a forward jump to `jump_label`; a method load becomes a plain
    attribute load (the continuation puts the NULL beside it: a plain call of the attribute);
    3.15's GET_ITER becomes iter(x) (the same: its NULL goes beside)."""
    if inst.opname in _METHOD_LOADS:
        return versions.native_plain_attr(original, inst.index)
    if _iter_pair(inst):
        return versions.call_const_on_tos(iter)
    if inst.opname == "RERAISE":  # its lasti operand points into a stack that is not rebuilt here
        return [bc.Instr("RERAISE", 0, lineno=original[inst.index].lineno)]
    if jump_label is not None:
        return versions.cond_jump(inst.opname, jump_label, lineno=original[inst.index].lineno)
    return versions.native(original, inst.index)


def _call_resume(cg, cont, stack_tmps, local_tmps, exc_tmp, drop, handed, result):
    code = cg.code
    rcode = resume_code(code, cont.target, cont.stack_kinds, cont.local_names, lasti=cont.lasti,
                        push_exc=cont.takes_exc)
    # A function made here, not a constant function: the resume function must run with the
    # globals of the frame that runs this code, and one code object (hence one cache entry)
    # can be shared by functions with different globals (exec of the same code into two
    # namespaces).
    # The frame's cell variables are free variables of the resume code: it shares the cells
    # with the closures made before the break (bytecode_utils.resume).
    make = []
    for name in rcode.co_freevars:
        make += versions.load_closure(name, free=name in code.co_freevars)
    if rcode.co_freevars:
        make.append(bc.Instr("BUILD_TUPLE", len(rcode.co_freevars)))
    make += versions.make_function(rcode, closure=bool(rcode.co_freevars))
    cg.extend(versions.load_callable(make))
    first = super_self_name(code)
    args = [t for t in stack_tmps if t is not None]
    if exc_tmp is not None:
        args.append(exc_tmp)
    args += [local_tmps[n] for n in cont.local_names if n != first]
    if first in cont.local_names:  # signature order of make_resume_code (resume_arg_order)
        args.insert(0, local_tmps[first])
    handed.to_resume(rcode, args, result)
    for t in args:
        cg.emit("LOAD_FAST", t)
    for t in drop:
        cg.emit("DELETE_FAST", t)
    cg.extend(versions.call(len(args)) + versions.return_value())


__all__ = ["BreakInfo", "BreakPlan", "Continuation", "LiveLocal", "can_break_at", "loop_depth", "plan_break",
           "emit_break", "generate_break"]
