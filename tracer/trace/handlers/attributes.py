"""Attribute and subscript access."""
from bytecode_utils import versions

from ...exc import Unsupported
from ...variables.base import check_builtin_attr, python_object
from ...variables.stack_values import NULL, MethodRef
from .registry import SINCE_312, handler
from .containers import slice_of
from ...variables.objects import SuperVariable


def _push_callable(tx, fn):
    """A callable with the NULL of a call (below it up to 3.12, above it on 3.13)."""
    for v in versions.callable_and_null(fn, NULL):
        tx.push(v)


@handler("LOAD_ATTR")
def LOAD_ATTR(tx, inst):
    obj = tx.pop()
    check_builtin_attr(obj, inst.argval)
    tx.push(obj.getattr(tx, inst.argval))


@handler("LOAD_METHOD")  # (3.12+: LOAD_ATTR with the method bit, normalised to this name)
def LOAD_METHOD(tx, inst):
    # CPython pushes (method, self) or (NULL, attr) [3.13: (attr, NULL)]; we always push the
    # NULL and a reference that binds when called, which CALL reads the same way.
    obj = tx.pop()
    check_builtin_attr(obj, inst.argval)  # raises here, as CPython does, not at the call
    _push_callable(tx, MethodRef(obj, inst.argval))


@handler("LOAD_SUPER_ATTR", "LOAD_SUPER_METHOD", versions=SINCE_312)
def LOAD_SUPER_ATTR(tx, inst):
    """3.12+: `super().name` / `super(C, o).name` in one instruction: [super, class, self]."""
    obj, cls, fn = tx.pop(), tx.pop(), tx.pop()
    try:
        is_super = python_object(fn) is super
    except Unsupported:
        is_super = False
    if not is_super:
        raise Unsupported(f"LOAD_SUPER_ATTR with {fn} instead of the builtin super")
    sup = SuperVariable(python_object(cls), obj)
    if inst.opname == "LOAD_SUPER_METHOD":  # bound when called, as LOAD_METHOD (3.11's
        _push_callable(tx, MethodRef(sup, inst.argval))  # `super().m` is LOAD_METHOD)
    else:
        tx.push(sup.getattr(tx, inst.argval))




@handler("STORE_ATTR")
def STORE_ATTR(tx, inst):
    obj, value = tx.pop(), tx.pop()
    obj.setattr(tx, inst.argval, value)


@handler("DELETE_ATTR")
def DELETE_ATTR(tx, inst):
    tx.pop().delattr(tx, inst.argval)


@handler("BINARY_SUBSCR")
def BINARY_SUBSCR(tx, inst):
    key, obj = tx.pop(), tx.pop()
    tx.push(obj.getitem(tx, key))


@handler("STORE_SUBSCR")
def STORE_SUBSCR(tx, inst):
    key, obj, value = tx.pop(), tx.pop(), tx.pop()
    obj.setitem(tx, key, value)


@handler("DELETE_SUBSCR")
def DELETE_SUBSCR(tx, inst):
    key, obj = tx.pop(), tx.pop()
    obj.delitem(tx, key)


@handler("BINARY_SLICE", versions=SINCE_312)
def BINARY_SLICE(tx, inst):
    """3.12+: `obj[start:stop]` without BUILD_SLICE."""
    stop, start, obj = tx.pop(), tx.pop(), tx.pop()
    tx.push(obj.getitem(tx, slice_of([start, stop])))


@handler("STORE_SLICE", versions=SINCE_312)
def STORE_SLICE(tx, inst):
    """3.12+: `obj[start:stop] = value`."""
    stop, start, obj, value = tx.pop(), tx.pop(), tx.pop(), tx.pop()
    obj.setitem(tx, slice_of([start, stop]), value)
