"""Attribute and subscript access."""
from bytecode_utils import versions

from ...exc import Unsupported
from ...variables.base import check_builtin_attr
from ...variables.stack_values import NULL, MethodRef
from . import SINCE_312, handler
from .containers import slice_of
from ...variables.objects import SuperVariable


def _push_callable(f, fn):
    """A callable with the NULL of a call (below it up to 3.12, above it on 3.13)."""
    for v in versions.callable_and_null(fn, NULL):
        f.push(v)


@handler("LOAD_ATTR")
def LOAD_ATTR(f, inst):
    obj = f.pop()
    check_builtin_attr(obj, inst.argval)
    f.push(obj.getattr(f, inst.argval))


@handler("LOAD_METHOD")  # (3.12+: LOAD_ATTR with the method bit, normalised to this name)
def LOAD_METHOD(f, inst):
    # CPython pushes (method, self) or (NULL, attr) [3.13: (attr, NULL)]; we always push the
    # NULL and a reference that binds when called, which CALL reads the same way.
    obj = f.pop()
    check_builtin_attr(obj, inst.argval)  # raises here, as CPython does, not at the call
    _push_callable(f, MethodRef(obj, inst.argval))


@handler("LOAD_SUPER_ATTR", "LOAD_SUPER_METHOD", versions=SINCE_312)
def LOAD_SUPER_ATTR(f, inst):
    """3.12+: `super().name` / `super(C, o).name` in one instruction: [super, class, self]."""
    obj, cls, fn = f.pop(), f.pop(), f.pop()
    try:
        is_super = f.python_object(fn) is super
    except Unsupported:
        is_super = False
    if not is_super:
        raise Unsupported(f"LOAD_SUPER_ATTR with {fn} instead of the builtin super")
    sup = SuperVariable(f.python_object(cls), obj)
    if inst.opname == "LOAD_SUPER_METHOD":  # bound when called, as LOAD_METHOD (3.11's
        _push_callable(f, MethodRef(sup, inst.argval))  # `super().m` is LOAD_METHOD)
    else:
        f.push(sup.getattr(f, inst.argval))




@handler("STORE_ATTR")
def STORE_ATTR(f, inst):
    obj, value = f.pop(), f.pop()
    obj.setattr(f, inst.argval, value)


@handler("DELETE_ATTR")
def DELETE_ATTR(f, inst):
    f.pop().delattr(f, inst.argval)


@handler("BINARY_SUBSCR")
def BINARY_SUBSCR(f, inst):
    key, obj = f.pop(), f.pop()
    f.push(obj.getitem(f, key))


@handler("STORE_SUBSCR")
def STORE_SUBSCR(f, inst):
    key, obj, value = f.pop(), f.pop(), f.pop()
    obj.setitem(f, key, value)


@handler("DELETE_SUBSCR")
def DELETE_SUBSCR(f, inst):
    key, obj = f.pop(), f.pop()
    obj.delitem(f, key)


@handler("BINARY_SLICE", versions=SINCE_312)
def BINARY_SLICE(f, inst):
    """3.12+: `obj[start:stop]` without BUILD_SLICE."""
    stop, start, obj = f.pop(), f.pop(), f.pop()
    f.push(obj.getitem(f, slice_of([start, stop])))


@handler("STORE_SLICE", versions=SINCE_312)
def STORE_SLICE(f, inst):
    """3.12+: `obj[start:stop] = value`."""
    stop, start, obj, value = f.pop(), f.pop(), f.pop(), f.pop()
    obj.setitem(f, slice_of([start, stop]), value)
