"""Values that exist only on the interpreter's stack, between two instructions: the NULL of a
call's stack layout, a closure cell on its way into MAKE_FUNCTION, a method looked up for the
call that follows. No Python code ever sees them."""
from .base import Variable


class NullVariable(Variable):
    """The NULL of a call's stack layout (PUSH_NULL, LOAD_GLOBAL/LOAD_ATTR with the low bit),
    or a saved unbound local (LOAD_FAST_AND_CLEAR)."""

    def __repr__(self):
        return "NULL"


class CellRef(Variable):
    """What LOAD_CLOSURE pushes: the cell itself, consumed by MAKE_FUNCTION's closure tuple."""

    def __init__(self, box):
        super().__init__(None)
        self.box = box


NULL = NullVariable()


class MethodRef(Variable):
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
