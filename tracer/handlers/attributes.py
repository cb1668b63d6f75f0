"""Attribute and subscript access."""
from ..variables.base import ConstantVariable, check_builtin_attr
from . import handler
from .load_store import NULL


@handler("LOAD_ATTR")
def LOAD_ATTR(f, inst):
    obj = f.pop()
    check_builtin_attr(obj, inst.argval)
    f.push(obj.getattr(f, inst.argval))


@handler("LOAD_METHOD")
def LOAD_METHOD(f, inst):
    # 3.11: pushes (NULL, bound attr); CALL then sees NULL + callable. We always bind here.
    obj = f.pop()
    check_builtin_attr(obj, inst.argval)  # raises here, as CPython does, not at the call
    f.push(NULL)
    f.push(_MethodRef(obj, inst.argval))




from ..variables.base import Variable  # noqa: E402


class _MethodRef(Variable):  # noqa: F811
    """obj.name before the call: calling it goes through obj.call_method (no attribute object
    is materialised, which is what lets Tensor/list/dict methods dispatch directly)."""

    def __init__(self, obj, name):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def getattr(self, tx, name):
        return self.obj.getattr(tx, self.name).getattr(tx, name)

    def reconstruct(self, cg):
        """At a graph break between LOAD_METHOD and CALL: the bound attribute (with the NULL
        below it, CALL then treats it as a plain callable)."""
        cg.reconstruct(self.obj)
        cg.load_attr(self.name)


@handler("STORE_ATTR")
def STORE_ATTR(f, inst):
    obj, value = f.pop(), f.pop()
    obj.setattr(f, inst.argval, value)


@handler("DELETE_ATTR")
def DELETE_ATTR(f, inst):
    obj = f.pop()
    obj.delattr(f, inst.argval)


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
