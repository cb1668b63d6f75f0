"""Whether a trace saw every call its frame can make: what lets a given-up frame run unhooked.

Under `capture()` a frame whose trace made no tensor work is given up on and runs as Python
(runtime/give_up.py). It still runs under our PEP 523 evaluator, and while one is installed
CPython does not inline Python-to-Python calls: every call under the frame costs a trip
through the evaluator, 1.3-1.4x on call-heavy pure Python even when the hook does nothing. The
C hook can run such a frame with the evaluator uninstalled (`_eval_frame.c`, UNHOOKED_FLAG),
but then nothing the frame calls is seen: a call it did not make when it was traced (the other
arm of an `if`, a model called every tenth epoch) would run as plain Python, uncaptured.

So a code may run unhooked only when its trace *saw every call it can make*: every call
instruction of every code object the trace ran (the frame's own and those it inlined) was run
by the trace, except calls whose callable is plainly a builtin that runs no Python (`len`,
`print`, `str`), which this module recognises by reading back from the call to the
`LOAD_GLOBAL` that loaded the callable (straight-line code only; anything else counts as
unseen), and no inlined function was reached from the frame's arguments (a callback). A call
target that changes between calls otherwise (a table of functions) is still possible: the
hook watches one run in RECHECK_EVERY, and a watched run that reaches a traced frame ends
the unhooked runs for good.
"""
import builtins as _builtins_module
import dis
import types

from bytecode_utils import versions
from guards import CellSource, LocalSource

# The instructions that call something (this version's, bytecode_utils/versions). Implicit
# calls (dunder methods, properties) on the path the trace took were inlined like any call; on
# a path it did not take they are not looked for: the watched runs are the net for them.
_CALLS = frozenset({*versions.CALL_OPNAMES, "CALL_FUNCTION_EX"})
# Instructions that only push (their stack effect is what they push), in the decoded,
# normalised vocabulary (LOAD_FAST_CHECK and the like are LOAD_FAST there).
_PUSHES = frozenset({"LOAD_FAST", "LOAD_FAST_LOAD_FAST", "LOAD_CONST", "LOAD_DEREF", "LOAD_CLOSURE",
                     "LOAD_GLOBAL", "LOAD_NAME", "PUSH_NULL"})


def saw_every_call(ctx, f_globals, f_builtins):
    """Whether the trace `ctx` ran every call instruction of each code it ran, or the callable
    of the calls it did not run is a builtin function or builtin type (looked up now in the
    root's globals and builtins). False when nothing was called at all (a frame that calls
    nothing gains nothing by running unhooked), and, without looking, when the trace made a
    graph op: only a trace without tensor work is given up on, so only its answer is read."""
    frames = ctx.frames
    if not frames or ctx.output.has_ops():
        return False
    seen = {}  # code -> (instrs, indices run), over every frame of the code
    for frame in frames:
        if frame.code not in seen:
            seen[frame.code] = (frame.instrs, set())
        seen[frame.code][1].update(frame.seen)
    if len(seen) < 2:
        return False  # nothing inlined: no Python call under the frame to give back to CPython
    if any(_handed_in(frame.func) for frame in frames[1:]):
        return False
    for code, (instrs, run) in seen.items():
        root = code is frames[0].code
        for inst in instrs:
            if inst.opname in _CALLS and inst.index not in run:
                if not (root and _builtin_call(instrs, inst, f_globals, f_builtins)):
                    return False
    return True


def _handed_in(func):
    """Whether an inlined function was reached from the frame's arguments (`fn()`,
    `callbacks[0]()`, `self.hook()` of an instance attribute): the next call may hand in
    another, one that makes tensor work (a utility `run_timed(fn)` traced with a logging
    callback, then given a training step). Methods found on the class are not: the class is
    the same for every object the frame's code runs on, as far as its call sites go."""
    src = getattr(func, "source", None)
    return src is not None and isinstance(src.base_root(), (LocalSource, CellSource))


def _builtin_call(instrs, call, f_globals, f_builtins):
    """Whether the callable of `call` (not run by the trace) is loaded by a LOAD_GLOBAL of a
    name that is now a builtin function or a builtin type."""
    if versions.CALL_OPNAMES.get(call.opname, True) or call.arg is None or \
            versions.call_kw_names(instrs, call.index):
        return False  # (not a plain positional call: `key=` is how builtins take a callable)
    # Stack at the call, top first: the n arguments, then two slots that hold the callable
    # (with NULL or self beside it, in an order that changed in 3.13): both are read back,
    # walking back over straight-line code, each depth followed through what each
    # instruction pops and pushes, to the instruction that pushed it.
    wanted = {call.arg: None, call.arg + 1: None}  # depth at the call -> what pushed it
    depths = {d: d for d in wanted}  # depth at the call -> the same item's depth here
    i = call.index - 1
    while i >= 0 and instrs[i].opname in versions.CALL_PREFIX_OPNAMES:
        i -= 1  # (the call's own prefix, 3.11's PRECALL n: the same stack)
    while i >= 0 and depths:
        inst = instrs[i]
        pushed = _pushed(inst)
        if pushed is None:
            return False  # control flow merges here, or an instruction we do not follow
        popped = pushed - dis.stack_effect(inst.opcode, inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None)
        for d0, d in list(depths.items()):
            if d < pushed:
                wanted[d0] = inst
                del depths[d0]
            else:
                depths[d0] = d - pushed + popped
        i -= 1
    if depths:
        return False
    loads = [inst for inst in wanted.values() if inst.opname not in ("PUSH_NULL",)]
    if len(set(map(id, loads))) != 1 or loads[0].opname != "LOAD_GLOBAL":
        return False
    name = loads[0].argval
    value = f_globals.get(name, _MISSING)
    if value is _MISSING:
        value = (f_builtins if isinstance(f_builtins, dict) else vars(_builtins_module)).get(name, _MISSING)
    return _runs_no_python(value)


# Instructions that push one value made from what they pop (their other stack effects are
# read from dis.stack_effect).
_ONE_RESULT = frozenset({
    "BINARY_OP", "BINARY_SUBSCR", "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP", "BUILD_SET",
    "BUILD_STRING", "BUILD_SLICE", "BINARY_SLICE", "FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC",
    "CONVERT_VALUE", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "UNARY_NEGATIVE", "UNARY_NOT",
    "UNARY_INVERT", "CALL", "LIST_EXTEND", "LIST_APPEND", "DICT_UPDATE",
    "SET_UPDATE", "MAP_ADD", "LIST_TO_TUPLE", "CALL_INTRINSIC_1",
})


def _pushed(inst):
    """How many values `inst` leaves on top of what it popped; None where not followed."""
    if inst.is_jump_target:
        return None
    if inst.opname in _PUSHES:
        return dis.stack_effect(inst.opcode, inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None)
    if inst.opname in _ONE_RESULT:
        return 1
    if inst.opname in versions.CALL_PREFIX_OPNAMES or inst.opname in ("NOP", "RESUME"):
        return 0
    if inst.opname == "LOAD_METHOD":  # (3.12+'s LOAD_ATTR with the method bit, normalised)
        return 2
    if inst.opname == "LOAD_ATTR":
        return 1
    return None


_MISSING = object()


# Builtins whose job is to call what they are given (map(f, xs) runs f on every item).
_CALLERS = frozenset({"map", "filter", "iter", "next", "reduce"})


def _runs_no_python(value):
    if getattr(value, "__name__", None) in _CALLERS:
        return False
    if isinstance(value, types.BuiltinFunctionType):
        return getattr(value, "__self__", None) is None or isinstance(value.__self__, types.ModuleType)
    if isinstance(value, type):
        return not value.__flags__ & (1 << 9)  # Py_TPFLAGS_HEAPTYPE: a class written in Python
    return False
