"""Loads and stores: locals, constants, globals, closure cells."""
from ..exc import Unsupported
from ..variables.base import ConstantVariable
from ..variables.functions import CellBox
from . import handler


@handler("LOAD_FAST")
def LOAD_FAST(f, inst):
    name = inst.argval
    if name not in f.locals:
        raise Unsupported(f"local variable {name!r} referenced before assignment "
                          f"(the user code raises UnboundLocalError)")
    f.push(f.locals[name])


@handler("STORE_FAST")
def STORE_FAST(f, inst):
    f.locals[inst.argval] = f.pop()


@handler("DELETE_FAST")
def DELETE_FAST(f, inst):
    if inst.argval not in f.locals:
        raise Unsupported(f"del of unbound local {inst.argval!r}")
    del f.locals[inst.argval]


@handler("LOAD_CONST")
def LOAD_CONST(f, inst):
    # co_consts only holds immutable values (numbers, strings, tuples, frozensets, code objects)
    f.push(ConstantVariable(inst.argval))


@handler("LOAD_GLOBAL")
def LOAD_GLOBAL(f, inst):
    # 3.11: the low bit of the argument asks for a NULL pushed first (call convention)
    if inst.arg & 1:
        f.push(NULL)
    f.push(f.load_global(inst.argval))


@handler("STORE_GLOBAL")
def STORE_GLOBAL(f, inst):
    f.side_effects.store_global(f.f_globals, inst.argval, f.pop())


@handler("DELETE_GLOBAL")
def DELETE_GLOBAL(f, inst):
    raise Unsupported("del of a global")


@handler("MAKE_CELL")
def MAKE_CELL(f, inst):
    # Cells are created when the frame is set up (Frame / inline_call); nothing left to do.
    if inst.argval not in f.cells:
        f.cells[inst.argval] = CellBox(f.locals.pop(inst.argval)) if inst.argval in f.locals else CellBox()


@handler("COPY_FREE_VARS")
def COPY_FREE_VARS(f, inst):
    missing = [n for n in f.code.co_freevars if n not in f.cells]
    if missing:
        raise Unsupported(f"free variables {missing} have no cells")


@handler("LOAD_CLOSURE")
def LOAD_CLOSURE(f, inst):
    f.push(CellRef(f.cells[inst.argval]))


@handler("LOAD_DEREF", "LOAD_CLASSDEREF")
def LOAD_DEREF(f, inst):
    box = f.cells.get(inst.argval)
    if box is None:
        raise Unsupported(f"unknown cell {inst.argval!r}")
    f.push(box.get(f))


@handler("STORE_DEREF")
def STORE_DEREF(f, inst):
    box = f.cells[inst.argval]
    if f.parent is not None and box.real_cell is not None:
        # `nonlocal n; n += 1` in a called function: its real cell is written after the graph
        if box.source is None:
            raise Unsupported("nonlocal store into a closure cell that cannot be reached after the graph")
        f.side_effects.store_cell(box)
    box.set(f.pop())


@handler("DELETE_DEREF")
def DELETE_DEREF(f, inst):
    raise Unsupported("del of a closure variable")


@handler("LOAD_NAME", "STORE_NAME", "DELETE_NAME")
def NAME_OPS(f, inst):
    raise Unsupported(f"{inst.opname}: module or class body code is not traced")


from ..variables.base import Variable  # noqa: E402


class NullVariable(Variable):
    """The NULL that 3.11 pushes below a callable (PUSH_NULL / LOAD_GLOBAL with low bit)."""

    def __repr__(self):
        return "NULL"


class CellRef(Variable):
    """What LOAD_CLOSURE pushes: the cell itself, consumed by MAKE_FUNCTION's closure tuple."""

    def __init__(self, box):
        super().__init__(None)
        self.box = box


NULL = NullVariable()
