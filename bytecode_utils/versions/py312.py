"""CPython 3.12: what changed from 3.11 (everything else is inherited from ``py311``).

PRECALL is gone (``KW_NAMES; CALL n``); LOAD_METHOD is LOAD_ATTR with bit 0 of the oparg
(LOAD_SUPER_ATTR likewise); conditional jumps are forward-only ``POP_JUMP_IF_*``;
RETURN_CONST; LOAD_FAST_CHECK (a LOAD_FAST that raises UnboundLocalError, which is what the
interpreter's LOAD_FAST does anyway); CALL_INTRINSIC_1 carries LIST_TO_TUPLE and
UNARY_POSITIVE. The call layout (NULL below the callable) is 3.11's.
"""
from __future__ import annotations

from . import py311
from .py311 import (CALL_OPNAMES, ITER_SLOTS, NOT_JUMPS, _i, call_ex_has_kwargs, decodable, fix_decoded, finish_code, slot_of_cell, callable_and_null, call_kw_names,  # noqa: F401
                    compare_to_bool, subscr, load_callable, load_closure, load_const_callable, load_global, make_function,
                    push_null, relocatable, return_value, split_call)

#: The intrinsics of CALL_INTRINSIC_1 that are a 3.11 instruction under another name.
INTRINSIC_ALIASES = {"INTRINSIC_LIST_TO_TUPLE": "LIST_TO_TUPLE",
                     "INTRINSIC_UNARY_POSITIVE": "UNARY_POSITIVE"}

ALIASES: dict[str, tuple[str, ...]] = {
    "LOAD_ATTR": ("LOAD_ATTR", "LOAD_METHOD"),
    "LOAD_SUPER_ATTR": ("LOAD_SUPER_ATTR", "LOAD_SUPER_METHOD"),
    "LOAD_FAST_CHECK": ("LOAD_FAST",),
    "CALL_INTRINSIC_1": ("CALL_INTRINSIC_1", *INTRINSIC_ALIASES.values()),
}

CALL_PREFIX_OPNAMES: tuple[str, ...] = ("KW_NAMES",)

#: See py311.SEND_KEEPS_RECEIVER: END_SEND (and CLEANUP_THROW) since 3.12.
SEND_KEEPS_RECEIVER = True


def normalize(inst, code):
    """See py311.normalize. The method forms of LOAD_ATTR/LOAD_SUPER_ATTR (bit 0 of the
    oparg) get the names 3.12's own ``dis.opmap`` gives them as pseudo-instructions."""
    op = inst.opname
    if op == "LOAD_ATTR" and inst.arg & 1:
        inst.opname = "LOAD_METHOD"
    elif op == "LOAD_SUPER_ATTR" and inst.arg & 1:
        inst.opname = "LOAD_SUPER_METHOD"
    elif op == "LOAD_FAST_CHECK":
        inst.opname = "LOAD_FAST"
    elif op == "CALL_INTRINSIC_1" and inst.argrepr in INTRINSIC_ALIASES:
        inst.opname = INTRINSIC_ALIASES[inst.argrepr]
    return inst


_SHAPES = {"BINARY_SLICE": (3, 1), "STORE_SLICE": (4, 0),
           "LOAD_SUPER_ATTR": (3, 1), "LOAD_SUPER_METHOD": (3, 2)}  # (method: see native_plain_attr)


def break_shape(inst):
    """See py311.break_shape."""
    return _SHAPES.get(inst.opname)


def call(nargs, kw_names=(), **loc):
    """See py311.call (no PRECALL since 3.12)."""
    out = [_i("KW_NAMES", tuple(kw_names), **loc)] if kw_names else []
    return out + [_i("CALL", nargs, **loc)]


def call_const_on_tos(fn):
    """TOS -> ``fn(TOS)``: the constant goes below TOS, which then sits in the self slot."""
    return [_i("LOAD_CONST", fn), _i("SWAP", 2), *call(0)]


def load_method(name):
    """TOS -> the pair a method call reads (LOAD_ATTR with the method bit)."""
    return [_i("LOAD_ATTR", (True, name))]


def load_attr(name):
    """TOS -> ``TOS.name``."""
    return [_i("LOAD_ATTR", (False, name))]


def cond_jump(opname, label, **loc):
    """3.12 conditional jumps are forward-only and named without a direction."""
    return [_i(opname, label, **loc)]


def return_const(value):
    return [_i("RETURN_CONST", value)]


def native_plain_attr(original, i):
    """See py311.native_plain_attr: LOAD_ATTR or LOAD_SUPER_ATTR with the method bit clear
    (a zero-argument ``super()`` keeps its form: it reads the frame's ``__class__`` cell and
    first argument, which the rewritten frame keeps)."""
    ins = original[i]
    if ins.name == "LOAD_SUPER_ATTR":
        _method, two_args, name = ins.arg
        return [_i("LOAD_SUPER_ATTR", (False, two_args, name), location=ins.location)]
    return load_attr(ins.arg[1])


def native(original, i):
    return py311.native(original, i, CALL_PREFIX_OPNAMES)

