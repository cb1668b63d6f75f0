"""Graph breaks: compile what was traced so far, run the unsupported instruction natively,
and continue in a resume function that is itself traced when it runs.

How a break is found: tracing stops with `Unsupported` at some instruction of the root frame
(a break inside an inlined call surfaces at the root's CALL). convert_frame then traces the
frame again and stops just *before* that instruction (the trace is deterministic, so the
state is exactly the state before it, with nothing half-done). From that state:

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
import weakref

import bytecode as bc

from bytecode_utils import live_locals, prologue, versions
from bytecode_utils.resume import EXC_ARG, STACK_ARG, STACK_NULL, make_resume_code, super_self_name

from .codegen import GRAPH_OUT, CodeGen, _GraphFnSlot, emit_stores, graph_call, side_effect_values
from .exc import Unsupported
from .handlers.load_store import NullVariable

# opname -> (values popped, values pushed); CALL/CALL_FUNCTION_EX computed from the arg.
_SHAPES = {
    "BINARY_OP": (2, 1), "BINARY_SUBSCR": (2, 1), "COMPARE_OP": (2, 1), "IS_OP": (2, 1),
    "CONTAINS_OP": (2, 1), "LOAD_ATTR": (1, 1), "STORE_ATTR": (2, 0), "STORE_SUBSCR": (3, 0),
    "DELETE_SUBSCR": (2, 0), "UNARY_NEGATIVE": (1, 1), "UNARY_POSITIVE": (1, 1),
    "UNARY_INVERT": (1, 1), "UNARY_NOT": (1, 1), "GET_ITER": (1, 1), "BUILD_STRING": None,
    "FORMAT_VALUE": None, "UNPACK_SEQUENCE": None, "CALL": None, "CALL_FUNCTION_EX": None,
    "POP_JUMP_IF_TRUE": (1, 0), "POP_JUMP_IF_FALSE": (1, 0),
    "STORE_GLOBAL": (1, 0), "DELETE_ATTR": (1, 0), "RAISE_VARARGS": None,
    "LOAD_METHOD": (1, 2),  # run as LOAD_ATTR: leaves (NULL, bound attribute), see _native
}


@dataclasses.dataclass
class BreakInfo:
    reason: str
    filename: str
    lineno: int
    opname: str
    user_stack: list  # [(filename, lineno, function)] from the root frame inwards


def instruction_shape(inst):
    shape = _SHAPES.get(inst.opname, False)
    if shape is False:
        return None
    if shape is not None:
        return shape
    op, arg = inst.opname, inst.arg
    if op == "CALL":
        return arg + 2, 1
    if op == "CALL_FUNCTION_EX":
        return 3 + (arg & 1), 1
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
    if code.co_cellvars:
        return False  # closures made in the frame share cells a resume function cannot
    if _READS_LOCALS.intersection(code.co_names):
        return False  # locals()/vars()/dir()/eval/exec read locals that liveness calls dead
    return not code.co_flags & (0x20 | 0x80 | 0x100 | 0x200)


_READS_LOCALS = frozenset({"locals", "vars", "dir", "eval", "exec"})


def loop_break_too_deep(code, instrs, inst):
    """A break at `inst` would nest one more resume function per loop iteration and this
    frame is already LOOP_RESUME_LIMIT resumes deep (see RESUME_CODES)."""
    return RESUME_CODES.get(code, 0) >= LOOP_RESUME_LIMIT and inside_loop(instrs, inst)


def inside_loop(instrs, inst):
    """Whether `inst` lies in a loop body: a backward jump at or after it goes back to it or
    before it."""
    return any(j.target is not None and j.index >= inst.index and j.target <= inst.index
               for j in instrs[inst.index:])


# Resume code objects are made once per (code, target, stack layout, locals, handler kind):
# repeated calls and recompiles reuse them, so their own caches hit.
_RESUME_CACHE = weakref.WeakKeyDictionary()
# Every resume code made, with how many resume steps separate it from the user's code: the
# frame hook traces them even where it skips the original's file (a torch module compiled by
# the user breaks, and the rest of its frame is still ours).
RESUME_CODES = weakref.WeakKeyDictionary()
# A break inside a loop makes a resume function per iteration (each one's trace breaks at the
# next iteration): the first iterations get their graphs, past this depth the frame runs as
# Python (its calls are still traced), so a long loop costs neither traces nor stack depth.
LOOP_RESUME_LIMIT = 8


def resume_code(code, target, stack_kinds, local_names, lasti=None, push_exc=False):
    per_code = _RESUME_CACHE.setdefault(code, {})
    key = (target, tuple(stack_kinds), tuple(local_names), lasti, push_exc)
    hit = per_code.get(key)
    if hit is None:
        hit = per_code[key] = make_resume_code(code, target, list(stack_kinds), list(local_names),
                                               lasti=lasti, push_exc=push_exc)
        RESUME_CODES[hit] = RESUME_CODES.get(code, 0) + 1
    return hit


def generate_break(frame, inst, reason):
    """Instructions for a frame that breaks at `inst` (the root frame stopped before it)."""
    code = frame.code
    pops, pushes = instruction_shape(inst)
    stack = list(frame.stack)
    if len(stack) < pops:
        raise Unsupported("graph break: stack shorter than the instruction's inputs")
    below, inputs = stack[:len(stack) - pops], stack[len(stack) - pops:]
    if inst.opname == "CALL_FUNCTION_EX" and not isinstance(inputs[0], NullVariable):
        raise Unsupported("graph break at CALL_FUNCTION_EX without NULL")
    liveness = live_locals(code)
    cg = CodeGen(code, frame.ctx.output)

    # Phase 1: read everything.
    below_tmps = [None if isinstance(v, NullVariable) else _into_tmp(cg, v) for v in below]
    input_tmps = [None if isinstance(v, NullVariable) else _into_tmp(cg, v) for v in inputs]
    falls_through = inst.opname != "RAISE_VARARGS"  # a raise continues only at a handler
    targets = [inst.index + 1] if falls_through else []
    is_jump = inst.opname in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE")
    if is_jump:
        targets.append(inst.target)
    handler = inst.exn
    needed = set()
    for t in targets:
        needed |= liveness[t]
    if handler is not None:
        needed |= liveness[handler.target]
    if super_self_name(code) is not None:  # zero-arg super() reads it without a LOAD_FAST
        needed.add(super_self_name(code))
    local_tmps = {}
    for name in sorted(needed):
        if name in frame.locals:
            local_tmps[name] = _into_tmp(cg, frame.locals[name])
    stores = side_effect_values(cg, frame)
    # Phase 2: write.
    emit_stores(cg, frame, stores)
    # Temporaries this frame holds; dropped before the resume call so that it keeps no object
    # alive longer than the original frame would (weakref callbacks, __del__ timing).
    held = [f"___tmp{i}" for i in range(1, cg._tmp + 1)]
    if frame.ctx.output.count_ops() or cg.outputs:
        held.append(GRAPH_OUT)

    # The instruction, natively, with its inputs.
    original = _bytecode_instrs(code)
    if handler is not None:  # the handler resumes at the original one (see module docstring)
        handler_label = bc.Label()
        try_begin = bc.TryBegin(handler_label, push_lasti=False)
        cg.instrs.append(try_begin)
    for v in input_tmps:
        cg.instrs.extend(versions.push_null() if v is None else [bc.Instr("LOAD_FAST", v)])
    jump_label = bc.Label() if is_jump else None
    for ins in _native(original, inst, jump_label, frame):
        cg.instrs.append(ins)
    if handler is not None:
        cg.instrs.append(bc.TryEnd(try_begin))

    # Continuation after the instruction (fall-through): results are on the stack.
    if inst.opname == "LOAD_METHOD":  # the attribute and a NULL, in this version's call order
        attr_tmp = cg.store_tmp()
        pair = versions.callable_and_null((attr_tmp, STACK_ARG), (None, STACK_NULL))
        _call_resume(cg, frame, inst.index + 1, below, below_tmps + [t for t, _k in pair], [k for _t, k in pair],
                     liveness, local_tmps, drop=held + [attr_tmp])
    elif falls_through:
        result_tmps = [cg.store_tmp() for _ in range(pushes)][::-1]
        _call_resume(cg, frame, inst.index + 1, below, below_tmps + result_tmps, [STACK_ARG] * pushes,
                     liveness, local_tmps, drop=held + result_tmps)
    if is_jump:
        cg.instrs.append(jump_label)
        _call_resume(cg, frame, inst.target, below, below_tmps, [], liveness, local_tmps, drop=held)
    if handler is not None:
        cg.instrs.append(handler_label)
        exc_tmp = cg.store_tmp()
        kept = below[:handler.depth]
        lasti = inst.offset if handler.lasti else None
        _call_resume(cg, frame, handler.target, kept, below_tmps[:handler.depth], [], liveness,
                     local_tmps, lasti=lasti, exc_tmp=exc_tmp, drop=held + [exc_tmp])

    head, slot = graph_call(frame, cg)
    return prologue(code) + head + cg.instrs, slot, cg.outputs


def _into_tmp(cg, var):
    cg.reconstruct(var)
    return cg.store_tmp()


def _bytecode_instrs(code):
    return [i for i in bc.Bytecode.from_code(code) if isinstance(i, bc.Instr)]


def _native(original, inst, jump_label, frame):
    """Copies of the original instruction (with what belongs to it, e.g. a CALL's KW_NAMES);
    a conditional jump becomes a forward jump to `jump_label`; a method load becomes a plain
    attribute load (the continuation puts the NULL beside it: a plain call of the attribute)."""
    if inst.opname == "LOAD_METHOD":
        return versions.load_attr(inst.argval)
    if jump_label is not None:
        return versions.cond_jump(inst.opname, jump_label, lineno=original[inst.index].lineno)
    return versions.call_instructions(original, inst.index)


def _call_resume(cg, frame, target, below, stack_tmps, extra_kinds, liveness, local_tmps,
                 lasti=None, exc_tmp=None, drop=()):
    kinds = [STACK_NULL if isinstance(v, NullVariable) else STACK_ARG for v in below] + list(extra_kinds)
    first = super_self_name(frame.code)
    names = [n for n in sorted(liveness[target]) if n in local_tmps]
    if first in local_tmps and first not in names:
        names.append(first)
    rcode = resume_code(frame.code, target, kinds, names, lasti=lasti, push_exc=exc_tmp is not None)
    # A function made here, not a constant function: the resume function must run with the
    # globals of the frame that runs this code, and one code object (hence one cache entry)
    # can be shared by functions with different globals (exec of the same code into two
    # namespaces).
    make = []
    for name in frame.code.co_freevars:
        make += versions.load_closure(name, free=True)
    if frame.code.co_freevars:
        make.append(bc.Instr("BUILD_TUPLE", len(frame.code.co_freevars)))
    make += versions.make_function(rcode, closure=bool(frame.code.co_freevars))
    cg.instrs.extend(versions.load_callable(make))
    args = [t for t in stack_tmps if t is not None]
    if exc_tmp is not None:
        args.append(exc_tmp)
    args += [local_tmps[n] for n in names if n != first]
    if first in names:  # signature order of make_resume_code (resume_arg_order)
        args.insert(0, local_tmps[first])
    for t in args:
        cg.emit("LOAD_FAST", t)
    for t in drop:
        cg.emit("DELETE_FAST", t)
    cg.instrs.extend(versions.call(len(args)) + versions.return_value())


__all__ = ["BreakInfo", "can_break_at", "loop_break_too_deep", "generate_break", "_GraphFnSlot"]
