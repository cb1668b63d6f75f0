"""Building and unpacking tuples, lists, dicts, sets, slices and strings."""
from ..exc import Unsupported
from ..variables.base import ConstantVariable
from ..variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
from ..variables.sym import SliceVariable, is_sym, specialized
from . import handler


@handler("BUILD_TUPLE")
def BUILD_TUPLE(f, inst):
    f.push(TupleVariable(f.popn(inst.arg)))


@handler("BUILD_LIST")
def BUILD_LIST(f, inst):
    f.push(ListVariable(f.popn(inst.arg)))


@handler("BUILD_SET")
def BUILD_SET(f, inst):
    f.push(SetVariable(f.popn(inst.arg)))


@handler("BUILD_MAP")
def BUILD_MAP(f, inst):
    flat = f.popn(2 * inst.arg)
    f.push(DictVariable({_key(k): v for k, v in zip(flat[::2], flat[1::2])}))


@handler("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(f, inst):
    keys = f.pop().as_constant()
    values = f.popn(inst.arg)
    f.push(DictVariable(dict(zip(keys, values))))


def _key(var):
    var = specialized(var)
    if not var.is_constant():
        raise Unsupported(f"dict key {var} is not a constant")
    return var.as_constant()


@handler("BUILD_STRING")
def BUILD_STRING(f, inst):
    parts = f.popn(inst.arg)
    f.push(ConstantVariable("".join(p.as_constant() for p in parts)))


@handler("FORMAT_VALUE")
def FORMAT_VALUE(f, inst):
    spec = f.pop().as_constant() if inst.arg & 0x04 else ""
    value = specialized(f.pop())
    if not value.is_constant():
        raise Unsupported(f"f-string formatting of {value}")
    v = value.as_constant()
    conv = inst.arg & 0x03
    v = {0: v, 1: str(v), 2: repr(v), 3: ascii(v)}[conv]
    f.push(ConstantVariable(format(v, spec)))


@handler("BUILD_SLICE")
def BUILD_SLICE(f, inst):
    parts = f.popn(inst.arg)
    if any(is_sym(p) for p in parts):  # x[:, : n // 2] with a symbolic n
        f.push(SliceVariable(parts))
        return
    if not all(p.is_constant() for p in parts):
        raise Unsupported("slice with non-constant bounds")
    f.push(ConstantVariable(slice(*(p.as_constant() for p in parts))))


@handler("LIST_APPEND")
def LIST_APPEND(f, inst):
    v = f.pop()
    f.stack[-inst.arg].items.append(v)


@handler("SET_ADD")
def SET_ADD(f, inst):
    v = f.pop()
    f.stack[-inst.arg].call_method(f, "add", [v], {})


@handler("MAP_ADD")
def MAP_ADD(f, inst):
    v, k = f.pop(), f.pop()
    f.stack[-inst.arg].items[_key(k)] = v


@handler("LIST_EXTEND")
def LIST_EXTEND(f, inst):
    v = f.pop()
    f.stack[-inst.arg].items.extend(v.iterate(f))


@handler("SET_UPDATE")
def SET_UPDATE(f, inst):
    v = f.pop()
    target = f.stack[-inst.arg]
    for item in v.iterate(f):
        target.items[item.as_constant()] = item


@handler("DICT_UPDATE", "DICT_MERGE")
def DICT_UPDATE(f, inst):
    v = f.pop()
    target = f.stack[-inst.arg]
    if not isinstance(v, DictVariable):
        raise Unsupported(f"** unpacking of {v}")
    if inst.opname == "DICT_MERGE":
        dup = set(target.items) & set(v.items)
        if dup:
            raise Unsupported(f"duplicate keyword argument {sorted(map(str, dup))[0]} (the user code raises TypeError)")
    target.items.update(v.items)


@handler("LIST_TO_TUPLE")
def LIST_TO_TUPLE(f, inst):
    f.push(TupleVariable(f.pop().items))


@handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(f, inst):
    items = f.pop().iterate(f)
    if len(items) != inst.arg:
        raise Unsupported(f"unpacking {len(items)} values into {inst.arg} (the user code raises ValueError)")
    for item in reversed(items):
        f.push(item)


@handler("UNPACK_EX")
def UNPACK_EX(f, inst):
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = f.pop().iterate(f)
    if len(items) < before + after:
        raise Unsupported("not enough values to unpack (the user code raises ValueError)")
    head, rest = items[:before], items[before:]
    middle, tail = (rest[:len(rest) - after], rest[len(rest) - after:]) if after else (rest, [])
    for item in reversed(tail):
        f.push(item)
    f.push(ListVariable(middle))
    for item in reversed(head):
        f.push(item)
