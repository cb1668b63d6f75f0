"""CPython 3.13: what changed from 3.12 (everything else is inherited from ``py312``).

The NULL of a call goes *above* the callable: ``[callable, self | NULL, args...]``
(LOAD_GLOBAL and LOAD_ATTR push it after the value). KW_NAMES is gone: the names tuple is
a stack operand of CALL_KW. MAKE_FUNCTION takes no flags (SET_FUNCTION_ATTRIBUTE sets
the closure). Conditional jumps and UNARY_NOT read an exact bool, so a TO_BOOL precedes
them. A cell is loaded for a closure tuple by LOAD_FAST of its slot (LOAD_CLOSURE is a
pseudo-instruction).
"""
from __future__ import annotations

from . import py311, py312
from .py312 import (ALIASES, INTRINSIC_ALIASES, _i, call_const_on_tos,  # noqa: F401
                    load_attr, load_global, load_method, normalize, push_null, return_const,
                    return_value)

CALL_PREFIX_OPNAMES: tuple[str, ...] = ()

CALL_OPNAMES: dict[str, bool] = {"CALL": False, "CALL_KW": True}


def call_kw_names(instrs, i):
    """CALL_KW's names are the constant loaded just before it (as the compiler and the
    ``call`` helper emit it); ``None`` when that is not a constant."""
    if instrs[i].opname != "CALL_KW":
        return ()
    prev = instrs[i - 1]
    return tuple(prev.argval) if prev.opname == "LOAD_CONST" else None


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
    """LOAD_CLOSURE is a pseudo-instruction on 3.13: LOAD_FAST of a cell slot pushes the cell."""
    return [_i("LOAD_FAST", name)]


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


def call_instructions(original, i):
    return py311.call_instructions(original, i, CALL_PREFIX_OPNAMES)


del py312
