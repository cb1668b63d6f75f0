"""CPython 3.11: the instruction set the tracer was first written for.

Call layout: ``[NULL | method, callable | self, args...]`` then ``PRECALL n; CALL n``
(``KW_NAMES`` before ``PRECALL`` names the trailing keyword arguments). A NULL goes *below*
the callable. Conditional jumps come in FORWARD/BACKWARD flavours and accept any object.
"""
from __future__ import annotations

import dis as _dis

import bytecode as _bc

UNSET = _bc.UNSET
_EXTENDED_ARG = _dis.opmap["EXTENDED_ARG"]

#: raw opname -> the names the interpreter may see for it after ``normalize``.
ALIASES: dict[str, tuple[str, ...]] = {
    f"POP_JUMP_{d}_IF_{c}": (f"POP_JUMP_IF_{c}",)
    for d in ("FORWARD", "BACKWARD")
    for c in ("TRUE", "FALSE", "NONE", "NOT_NONE")
}

#: Instructions that belong to the CALL that follows them (copied with it at a graph break).
CALL_PREFIX_OPNAMES: tuple[str, ...] = ("KW_NAMES", "PRECALL")

#: Whether SEND, when its iterator is finished, leaves ``[iterator, value]`` for END_SEND to
#: drop the iterator (3.12+), rather than replacing the iterator by the value (3.11).
SEND_KEEPS_RECEIVER = False

#: Stack entries a running ``for`` loop's iterator occupies (3.15: the iterator and an index).
ITER_SLOTS = 1

#: Instructions ``dis`` lists as jumps whose argument control never follows.
NOT_JUMPS: frozenset[str] = frozenset()

#: Call instructions -> whether a tuple of keyword names is one of their stack operands.
CALL_OPNAMES: dict[str, bool] = {"CALL": False}


def _i(name, arg=UNSET, **loc):
    return _bc.Instr(name, **loc) if arg is UNSET else _bc.Instr(name, arg, **loc)


# ---- decoding ------------------------------------------------------------------------------
def normalize(inst, code):
    """Rename a decoded instruction of ``code`` to the shared vocabulary (in place; returns it).

    Only the name changes: ``opcode``/``arg`` stay the real ones (stack effects, dumps).
    3.11's ``dis`` leaves KW_NAMES unresolved (not in ``dis.hasconst`` until 3.12): its
    ``argval`` becomes the names tuple, as on 3.12."""
    names = ALIASES.get(inst.opname)
    if names is not None:
        inst.opname = names[0]
    elif inst.opname == "KW_NAMES" and not isinstance(inst.argval, tuple):
        inst.argval = code.co_consts[inst.arg]
        inst.argrepr = repr(inst.argval)
    return inst


def fix_decoded(bc, code):
    """``bc``, the ``bytecode`` package's decoding of ``code``, repaired where it is wrong on
    this version (in place; returns it). Nothing to repair before 3.14."""
    return bc


# ---- local-slot instructions on a closure variable's slot ------------------------------------
# 3.12 inlines comprehensions (PEP 709): one whose variable is a cell saves the frame's cell
# with LOAD_FAST_AND_CLEAR of its slot, makes a fresh one, and restores the saved cell with
# STORE_FAST. In resume code that slot is a free variable (the frame's cells are its closure),
# and ``bytecode`` 0.19.1 writes local-slot instructions only on locals before 3.13. Such an
# instruction is written on a marked stand-in local (a dead slot, never bound) and moved to the
# free variable's slot once assembled; for the ``bytecode`` package to decode the code again
# (a resume of resume code), it is moved back first. (The tracer reads code with ``dis``,
# which names the slot's variable either way.)
SLOT_MARK = ".slot"
_LOCAL_SLOT_OPS = frozenset(_dis.opmap[n] for n in ("LOAD_FAST", "STORE_FAST", "DELETE_FAST",
                                                    "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR")
                            if n in _dis.opmap)


def slot_of_cell(opname, name, **loc):
    """A local-slot instruction (``opname``) on the slot of closure variable ``name``."""
    return _bc.Instr(opname, name + SLOT_MARK, **loc)


def _free_slots(code):
    """stand-in local index -> its free variable's slot index (localsplus: locals, the cells
    that are not locals, then the free variables)."""
    names = code.co_varnames
    n_cells = sum(1 for c in code.co_cellvars if c not in names)
    return {i: len(names) + n_cells + code.co_freevars.index(n[:-len(SLOT_MARK)])
            for i, n in enumerate(names)
            if n.endswith(SLOT_MARK) and n[:-len(SLOT_MARK)] in code.co_freevars}


def _move_slot_args(code, moves):
    """``code`` with the oparg of every local-slot instruction found in ``moves`` replaced."""
    raw, ext, start = bytearray(code.co_code), 0, None
    for off in range(0, len(raw), 2):
        op, arg = raw[off], raw[off + 1]
        if op == _EXTENDED_ARG:
            ext, start = (ext | arg) << 8, off if start is None else start
            continue
        full, first, ext, start = ext | arg, off if start is None else start, 0, None
        if op in _LOCAL_SLOT_OPS and full in moves:
            to, width = moves[full], (off - first) // 2 + 1
            if to >= 256 ** width:  # (a longer instruction would move every jump)
                raise ValueError(f"{code.co_qualname}: slot {to} needs a longer instruction")
            for k in range(width):
                raw[off - 2 * k + 1] = (to >> (8 * k)) & 0xFF
    return code.replace(co_code=bytes(raw))


def decodable(code):
    """``code`` as the ``bytecode`` package can decode it: local-slot instructions on a free
    variable's slot moved back to their stand-in locals (see ``SLOT_MARK``)."""
    slots = _free_slots(code)
    return _move_slot_args(code, {v: k for k, v in slots.items()}) if slots else code


def finish_code(new, template=None):
    """``new``, assembled by the ``bytecode`` package with flags copied from ``template``,
    made consistent where this version needs it: instructions written on a stand-in local
    moved to their free variable's slot (see ``SLOT_MARK``)."""
    slots = _free_slots(new)
    return _move_slot_args(new, slots) if slots else new


def call_kw_names(instrs, i):
    """The keyword names of the call instruction ``instrs[i]`` (decoded), or ``()``."""
    j = i - 1
    while j >= 0 and instrs[j].opname in CALL_PREFIX_OPNAMES:
        if instrs[j].opname == "KW_NAMES":
            return tuple(instrs[j].argval)
        j -= 1
    return ()


def compare_to_bool(inst):
    """Whether COMPARE_OP also converts its result to bool (3.13 fuses a following TO_BOOL)."""
    return False


def call_ex_has_kwargs(inst):
    """Whether CALL_FUNCTION_EX reads a kwargs dict above its positional-arguments tuple."""
    return bool(inst.arg & 1)


def break_shape(inst):
    """(values popped, values pushed) of the instructions only some versions have that a
    graph break may be placed at (the shared ones: tracer/rewrite/graph_break.py); None otherwise."""
    return None


# ---- stack layout ---------------------------------------------------------------------------
def split_call(items, is_null):
    """``items``: the ``argc + 2`` stack entries a CALL reads, bottom first.
    Returns ``(callable, args)`` with a bound ``self`` prepended to the args."""
    first, second, args = items[0], items[1], list(items[2:])
    if is_null(first):
        return second, args
    return first, [second, *args]


def callable_and_null(fn, null):
    """Stack order (bottom first) of a callable loaded for a call with no ``self``."""
    return [null, fn]


# ---- emit helpers ---------------------------------------------------------------------------
def push_null(**loc):
    """A NULL stack entry (what a resumed stack needs where the frame had one)."""
    return [_i("PUSH_NULL", **loc)]


def load_callable(load):
    """Wrap the instructions ``load`` (which push one callable) with the NULL a plain call
    needs; follow with the arguments and ``call(n)``."""
    return [_i("PUSH_NULL"), *load]


def load_const_callable(fn):
    """``fn`` (any object) loaded as a constant, ready for arguments and ``call(n)``."""
    return load_callable([_i("LOAD_CONST", fn)])


def call(nargs, kw_names=(), **loc):
    """Call with ``nargs`` arguments on the stack, the last ``len(kw_names)`` by keyword.

    Works after ``load_callable``/``load_const_callable``, after ``load_method``, and after
    a callable followed by a value in the ``self`` slot (which becomes the first argument)."""
    out = [_i("KW_NAMES", tuple(kw_names), **loc)] if kw_names else []
    return out + [_i("PRECALL", nargs, **loc), _i("CALL", nargs, **loc)]


def call_const_on_tos(fn):
    """TOS -> ``fn(TOS)``: the constant goes below TOS, which then sits in the self slot."""
    return [_i("LOAD_CONST", fn), _i("SWAP", 2), *call(0)]


def subscr():
    """TOS1[TOS]."""
    return [_i("BINARY_SUBSCR")]


def load_method(name):
    """TOS -> the pair a method call reads; follow with the arguments and ``call(n)``."""
    return [_i("LOAD_METHOD", name)]


def load_attr(name):
    """TOS -> ``TOS.name``."""
    return [_i("LOAD_ATTR", name)]


def load_global(name, push_null=False):
    """A global (or builtin); with ``push_null`` also the NULL of a plain call."""
    return [_i("LOAD_GLOBAL", (bool(push_null), name))]


def load_closure(name, free):
    """Push the cell of a free (``free=True``) or cell variable, for a closure tuple."""
    return [_i("LOAD_CLOSURE", _bc.FreeVar(name) if free else _bc.CellVar(name))]


def make_function(code, closure=False):
    """A function from the constant ``code`` (with the closure tuple already on the stack
    when ``closure``); its globals are the running frame's."""
    return [_i("LOAD_CONST", code), _i("MAKE_FUNCTION", 0x08 if closure else 0)]


def cond_jump(opname, label, **loc):
    """A forward conditional jump to ``label`` for a normalised ``POP_JUMP_IF_*`` name."""
    cond = opname[len("POP_JUMP_IF_"):]
    return [_i(f"POP_JUMP_FORWARD_IF_{cond}", label, **loc)]


def relocatable(items):
    """``items`` (a ``bytecode`` instruction stream) made safe to assemble with a different
    local-variable layout than the code they came from (resume functions add arguments).
    Nothing to do before 3.13."""
    return list(items)


def return_value():
    return [_i("RETURN_VALUE")]


def return_const(value):
    return [_i("LOAD_CONST", value), _i("RETURN_VALUE")]


def native_plain_attr(original, i):
    """Instructions that run the method load ``original[i]`` (LOAD_METHOD) as a plain
    attribute load: one value pushed, the bound attribute (a graph break puts the NULL
    beside it, so that the CALL that follows is a plain call of it)."""
    return load_attr(original[i].arg)


def native(original, i, prefixes=CALL_PREFIX_OPNAMES):
    """Instructions that run ``original[i]`` (the ``bytecode.Instr`` of a code object) on
    its stack operands, whatever objects they are: a copy of it, with the ``prefixes`` just
    before it that belong to it (a CALL's KW_NAMES/PRECALL). Used at a graph break."""
    j = i
    if original[i].name == "CALL":
        while j > 0 and original[j - 1].name in prefixes:
            j -= 1
    return [ins.copy() for ins in original[j:i + 1]]
