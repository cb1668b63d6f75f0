"""CPython 3.13: what changed from 3.12 (everything else is inherited from ``py312``).

The NULL of a call goes *above* the callable: ``[callable, self | NULL, args...]``
(LOAD_GLOBAL and LOAD_ATTR push it after the value). KW_NAMES is gone: the names tuple is
a stack operand of CALL_KW. MAKE_FUNCTION takes no flags (SET_FUNCTION_ATTRIBUTE sets
the closure). Conditional jumps and UNARY_NOT read an exact bool, so a TO_BOOL precedes
them. A cell is loaded for a closure tuple by LOAD_FAST of its slot (LOAD_CLOSURE is a
pseudo-instruction).
"""
from __future__ import annotations

import bytecode as _bc

from . import py311, py312
from .py311 import decodable, finish_code  # noqa: F401  (3.13 writes local-slot instructions on any slot)
from .py312 import (ALIASES, INTRINSIC_ALIASES, ITER_SLOTS, NOT_JUMPS, fix_decoded, SEND_KEEPS_RECEIVER, _i, call_const_on_tos,  # noqa: F401
                    call_ex_has_kwargs, subscr, load_attr, load_global, load_method, native_plain_attr, normalize, push_null, return_const,
                    return_value)

CALL_PREFIX_OPNAMES: tuple[str, ...] = ()

CALL_OPNAMES: dict[str, bool] = {"CALL": False, "CALL_KW": True}


def compare_to_bool(inst):
    """Bit 4 of COMPARE_OP's oparg: the compiler fused a TO_BOOL into it (``bool(<)``)."""
    return bool(inst.arg & 16)


def call_kw_names(instrs, i):
    """CALL_KW's names are the constant loaded just before it (as the compiler and the
    ``call`` helper emit it); ``None`` when that is not a constant."""
    if instrs[i].opname != "CALL_KW":
        return ()
    prev = instrs[i - 1]
    return tuple(prev.argval) if prev.opname == "LOAD_CONST" else None


_SHAPES = {**py312._SHAPES, "TO_BOOL": (1, 1), "CONVERT_VALUE": (1, 1), "FORMAT_SIMPLE": (1, 1),
           "FORMAT_WITH_SPEC": (2, 1)}


def break_shape(inst):
    """See py311.break_shape. CALL_KW's operands: callable, self/NULL, args, the names."""
    if inst.opname == "CALL_KW":
        return inst.arg + 3, 1
    return _SHAPES.get(inst.opname)


def split_call(items, is_null):
    """``items``: the ``argc + 2`` stack entries a CALL reads, bottom first: the callable,
    then ``self`` or NULL, then the arguments."""
    fn, second, args = items[0], items[1], list(items[2:])
    if is_null(second):
        return fn, args
    return fn, [second, *args]


def callable_and_null(fn, null):
    return [fn, null]


def load_callable(load):
    return [*load, _i("PUSH_NULL")]


def load_const_callable(fn):
    return load_callable([_i("LOAD_CONST", fn)])


def call(nargs, kw_names=(), **loc):
    """See py311.call: keyword names travel as a constant operand of CALL_KW."""
    if kw_names:
        return [_i("LOAD_CONST", tuple(kw_names), **loc), _i("CALL_KW", nargs, **loc)]
    return [_i("CALL", nargs, **loc)]


def load_closure(name, free):
    """LOAD_CLOSURE is a pseudo-instruction on 3.13: LOAD_FAST of a cell slot pushes the cell
    (the ``bytecode`` package needs the FreeVar/CellVar to find the slot; a plain name would
    make a new, unbound local)."""
    return [_i("LOAD_FAST", _bc.FreeVar(name) if free else _bc.CellVar(name))]


def make_function(code, closure=False):
    out = [_i("LOAD_CONST", code), _i("MAKE_FUNCTION")]
    if closure:
        out.append(_i("SET_FUNCTION_ATTRIBUTE", 0x08))
    return out


def cond_jump(opname, label, **loc):
    """POP_JUMP_IF_TRUE/FALSE need an exact bool on 3.13: TO_BOOL first (a no-op on a bool)."""
    jump = _i(opname, label, **loc)
    if opname in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"):
        return [_i("TO_BOOL", **loc), jump]
    return [jump]


_SPLIT = {"LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
          "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
          "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST")}


def slot_of_cell(opname, name, **loc):
    """See py311.slot_of_cell: since 3.13 ``bytecode`` writes it on the free variable."""
    return _bc.Instr(opname, _bc.FreeVar(name), **loc)


def relocatable(items):
    """See py311.relocatable. 3.13's superinstructions pack two local indices into 4 bits
    each (the compiler fuses only slots < 16); with locals renumbered they may not fit, and
    ``bytecode`` 0.19.1 then emits a wrong EXTENDED_ARG. Split them into the two plain
    instructions they stand for (same meaning, one more dispatch)."""
    out = []
    for item in items:
        names = _SPLIT.get(getattr(item, "name", None))
        if names is None:
            out.append(item)
            continue
        for name, arg in zip(names, item.arg):
            out.append(_bc.Instr(name, arg, location=item.location))
    return out


def native(original, i):
    """See py311.native. UNARY_NOT reads an exact bool on 3.13 (the compiler puts a TO_BOOL
    or a bool-producing instruction before it): our operand may be any object."""
    out = py311.native(original, i, CALL_PREFIX_OPNAMES)
    if original[i].name == "UNARY_NOT":
        out.insert(0, _i("TO_BOOL", lineno=original[i].lineno))
    return out


