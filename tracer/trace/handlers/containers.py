"""Building and unpacking tuples, lists, dicts, sets, slices and strings."""
from ...exc import Unsupported
from ...variables.base import ConstantVariable
from ...variables.builtins_impl import call_builtin
from ...variables.collections_vars import mapping_as_dict
from ...variables.containers import DictVariable, _const_key, ListVariable, TupleVariable
from ...variables.objects import lookup_type_attr
from ...variables.sets import SetVariable
from ...variables.sym import SliceVariable, is_sym, specialized
from ...variables.templates import CONVERSIONS, InterpolationVariable, build_template
from .registry import SINCE_313, SINCE_314, UNTIL_312, UNTIL_313, handler


@handler("BUILD_TUPLE")
def BUILD_TUPLE(tx, inst):
    tx.push(TupleVariable(tx.popn(inst.arg)))


@handler("BUILD_LIST")
def BUILD_LIST(tx, inst):
    tx.push(ListVariable(tx.popn(inst.arg)))


@handler("BUILD_SET")
def BUILD_SET(tx, inst):
    tx.push(SetVariable(tx.popn(inst.arg), tx=tx))


@handler("BUILD_MAP")
def BUILD_MAP(tx, inst):
    flat = tx.popn(2 * inst.arg)
    tx.push(DictVariable({_const_key(tx, k): v for k, v in zip(flat[::2], flat[1::2])}))


@handler("BUILD_CONST_KEY_MAP", versions=UNTIL_313)
def BUILD_CONST_KEY_MAP(tx, inst):
    keys = tx.pop().as_constant()
    values = tx.popn(inst.arg)
    tx.push(DictVariable(dict(zip(keys, values))))


@handler("BUILD_STRING")
def BUILD_STRING(tx, inst):
    parts = tx.popn(inst.arg)
    tx.push(ConstantVariable("".join(p.as_constant() for p in parts)))


def _format(tx, value, conv, spec):
    """f-string piece: conversion (0 none, 1 !s, 2 !r, 3 !a), then format(v, spec). An object
    of a user class: !s / !r, and a plain `{obj}` whose class keeps object.__format__ (which is
    str()), go through str()/repr() as traced (its own __str__ / __repr__)."""
    value = specialized(value)
    if not value.is_constant() and (conv in (1, 2) or (conv == 0 and not spec and _formats_as_str(value))):
        value = call_builtin(tx, repr if conv == 2 else str, [value], {})
        conv = 0
    if not value.is_constant():
        raise Unsupported(f"f-string formatting of {value}")
    v = value.as_constant()
    v = {0: v, 1: str(v), 2: repr(v), 3: ascii(v)}[conv]
    return ConstantVariable(format(v, spec) if spec is not None else v)


def _formats_as_str(value):
    try:
        cls = value.python_type()
    except Unsupported:
        return False
    return isinstance(cls, type) and lookup_type_attr(cls, "__format__")[0] is object.__format__ and \
        cls.__module__ not in ("builtins", "torch")


@handler("FORMAT_VALUE", versions=UNTIL_312)
def FORMAT_VALUE(tx, inst):
    spec = tx.pop().as_constant() if inst.arg & 0x04 else ""
    tx.push(_format(tx, tx.pop(), inst.arg & 0x03, spec))


@handler("CONVERT_VALUE", versions=SINCE_313)
def CONVERT_VALUE(tx, inst):
    """3.13 splits FORMAT_VALUE: the !s/!r/!a conversion..."""
    tx.push(_format(tx, tx.pop(), inst.arg, None))


@handler("FORMAT_SIMPLE", versions=SINCE_313)
def FORMAT_SIMPLE(tx, inst):
    """...then format(v) or format(v, spec)."""
    tx.push(_format(tx, tx.pop(), 0, ""))


@handler("FORMAT_WITH_SPEC", versions=SINCE_313)
def FORMAT_WITH_SPEC(tx, inst):
    spec = tx.pop()
    if not spec.is_constant():
        raise Unsupported("f-string format spec that is not a constant")
    tx.push(_format(tx, tx.pop(), 0, spec.as_constant()))


@handler("BUILD_SLICE")
def BUILD_SLICE(tx, inst):
    tx.push(slice_of(tx.popn(inst.arg)))


def slice_of(parts):
    """The slice of `parts` (start, stop[, step]): constant, or symbolic when a bound is a
    symbolic int (x[:, : n // 2] with a dynamic n). Also 3.12+'s BINARY_SLICE/STORE_SLICE."""
    if any(is_sym(p) for p in parts):
        return SliceVariable(parts)
    if not all(p.is_constant() for p in parts):
        raise Unsupported("slice with non-constant bounds")
    return ConstantVariable(slice(*(p.as_constant() for p in parts)))


def _target(tx, inst):
    """The container a comprehension (or a display with *unpacking) builds, about to be
    changed in place. Usually made in this frame, but in a resume function that continues a
    comprehension it is an input (a stack argument): then the change is a side effect to
    replay after the graph."""
    target = tx.stack[-inst.arg]
    tx.side_effects.mutated(target)
    return target


@handler("LIST_APPEND")
def LIST_APPEND(tx, inst):
    v = tx.pop()
    _target(tx, inst).items.append(v)


@handler("SET_ADD")
def SET_ADD(tx, inst):
    v = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "add", [v], {})


@handler("MAP_ADD")
def MAP_ADD(tx, inst):
    v, k = tx.pop(), tx.pop()
    _target(tx, inst).items[_const_key(tx, k)] = v


@handler("LIST_EXTEND")
def LIST_EXTEND(tx, inst):
    v = tx.pop()
    items = v.iterate(tx)
    _target(tx, inst).items.extend(items)


@handler("SET_UPDATE")
def SET_UPDATE(tx, inst):
    v = tx.pop()
    _target(tx, inst).update_from(tx, v)  # (a constant literal merges a frozenset whole)


@handler("DICT_UPDATE", "DICT_MERGE")
def DICT_UPDATE(tx, inst):
    v = tx.pop()
    target = _target(tx, inst)
    if not isinstance(v, DictVariable):
        as_dict = mapping_as_dict(tx, v)  # a user mapping class: its keys() and []
        if as_dict is None:
            raise Unsupported(f"** unpacking of {v}")
        v = as_dict
    if inst.opname == "DICT_MERGE":
        dup = set(target.items) & set(v.items)
        if dup:
            raise Unsupported(f"duplicate keyword argument {sorted(map(str, dup))[0]} (the user code raises TypeError)")
    target.items.update(v.items)


@handler("LIST_TO_TUPLE")  # (3.12+: CALL_INTRINSIC_1 INTRINSIC_LIST_TO_TUPLE)
def LIST_TO_TUPLE(tx, inst):
    tx.push(TupleVariable(tx.pop().items))


@handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(tx, inst):
    items = tx.pop().iterate(tx)
    if len(items) != inst.arg:
        raise Unsupported(f"unpacking {len(items)} values into {inst.arg} (the user code raises ValueError)")
    for item in reversed(items):
        tx.push(item)


@handler("UNPACK_EX")
def UNPACK_EX(tx, inst):
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = tx.pop().iterate(tx)
    if len(items) < before + after:
        raise Unsupported("not enough values to unpack (the user code raises ValueError)")
    head, rest = items[:before], items[before:]
    middle, tail = (rest[:len(rest) - after], rest[len(rest) - after:]) if after else (rest, [])
    for item in reversed(tail):
        tx.push(item)
    tx.push(ListVariable(middle))
    for item in reversed(head):
        tx.push(item)


@handler("BUILD_INTERPOLATION", versions=SINCE_314)
def BUILD_INTERPOLATION(tx, inst):
    """A t-string's field (PEP 750): value, its source text and, when the oparg's low bit is
    set, its format spec; the conversion is oparg >> 2 (bit 1 is always set: 2 + the spec
    bit is how many operands it pops)."""
    spec = tx.pop() if inst.arg & 1 else ConstantVariable("")
    expression = tx.pop()
    value = tx.pop()
    tx.push(InterpolationVariable(value, expression, CONVERSIONS[inst.arg >> 2], spec))


@handler("BUILD_TEMPLATE", versions=SINCE_314)
def BUILD_TEMPLATE(tx, inst):
    """A t-string (PEP 750): the tuple of its strings below the tuple of its fields."""
    interpolations = tx.pop()
    tx.push(build_template(tx, tx.pop(), interpolations))
