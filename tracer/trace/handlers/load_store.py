"""Loads and stores: locals, constants, globals, closure cells."""
import types

from bytecode_utils import versions

from ...exc import Unsupported
from ...variables.base import ConstantVariable
from ...variables.builder import wrap
from ...variables.functions import CellBox
from ...variables.stack_values import NULL, CellRef, NullVariable
from .registry import SINCE_313, SINCE_312, UNTIL_312, handler


def _load_fast(tx, name):
    if name in tx.cells and name not in tx.locals:
        # 3.13 loads a cell for a closure tuple with LOAD_FAST (LOAD_CLOSURE is a pseudo-op);
        # on 3.11/3.12 a cell variable is never the argument of LOAD_FAST.
        return CellRef(tx.cells[name])
    if name not in tx.locals:
        raise Unsupported(f"local variable {name!r} referenced before assignment "
                          f"(the user code raises UnboundLocalError)")
    return tx.locals[name]


def _store_fast(tx, name, value):
    # 3.12+: an inlined comprehension restores the saved outer binding of its variable:
    # NULL (it was unbound) or, for a cell variable, the cell itself (LOAD_FAST_AND_CLEAR)
    if isinstance(value, NullVariable):
        tx.locals.pop(name, None)
    elif isinstance(value, CellRef):
        tx.cells[name] = value.box
        tx.locals.pop(name, None)
    else:
        tx.locals[name] = value


@handler("LOAD_FAST")  # (and 3.12+'s LOAD_FAST_CHECK, normalised to it)
def LOAD_FAST(tx, inst):
    tx.push(_load_fast(tx, inst.argval))


@handler("STORE_FAST")
def STORE_FAST(tx, inst):
    _store_fast(tx, inst.argval, tx.pop())


@handler("LOAD_FAST_AND_CLEAR", versions=SINCE_312)
def LOAD_FAST_AND_CLEAR(tx, inst):
    """PEP 709: an inlined comprehension saves the outer binding of its variable (NULL when
    unbound; the cell of a cell variable, which MAKE_CELL then replaces by a fresh one) and
    unbinds it; the matching STORE_FAST restores it."""
    name = inst.argval
    if name in tx.cells:
        tx.push(CellRef(tx.cells.pop(name)))
        return
    value = tx.locals.pop(name, None)
    tx.push(NULL if value is None else value)


@handler("LOAD_FAST_LOAD_FAST", versions=SINCE_313)
def LOAD_FAST_LOAD_FAST(tx, inst):
    first, second = inst.argval
    tx.push(_load_fast(tx, first))
    tx.push(_load_fast(tx, second))


@handler("STORE_FAST_LOAD_FAST", versions=SINCE_313)
def STORE_FAST_LOAD_FAST(tx, inst):
    store, load = inst.argval
    _store_fast(tx, store, tx.pop())
    tx.push(_load_fast(tx, load))


@handler("STORE_FAST_STORE_FAST", versions=SINCE_313)
def STORE_FAST_STORE_FAST(tx, inst):
    first, second = inst.argval
    _store_fast(tx, first, tx.pop())
    _store_fast(tx, second, tx.pop())


@handler("DELETE_FAST")
def DELETE_FAST(tx, inst):
    if inst.argval not in tx.locals:
        raise Unsupported(f"del of unbound local {inst.argval!r}")
    del tx.locals[inst.argval]


@handler("LOAD_CONST")
def LOAD_CONST(tx, inst):
    # co_consts only holds immutable values (numbers, strings, tuples, frozensets, code objects);
    # 3.14's LOAD_COMMON_CONSTANT (normalised to LOAD_CONST) also loads builtins: AssertionError,
    # tuple, all, any... (the compiler's inlined all()/any() compares the global with them)
    value = inst.argval
    if isinstance(value, (type, types.BuiltinFunctionType)):
        tx.push(wrap(tx, value, None))
    else:
        tx.push(ConstantVariable(value))


@handler("LOAD_GLOBAL")
def LOAD_GLOBAL(tx, inst):
    value = tx.load_global(inst.argval)
    # the low bit of the argument asks for the NULL of a call (below it up to 3.12, above on 3.13)
    for v in versions.callable_and_null(value, NULL) if inst.arg & 1 else [value]:
        tx.push(v)


@handler("STORE_GLOBAL")
def STORE_GLOBAL(tx, inst):
    tx.side_effects.store_global(tx.f_globals, inst.argval, tx.pop())


@handler("DELETE_GLOBAL")
def DELETE_GLOBAL(tx, inst):
    raise Unsupported("del of a global")


@handler("MAKE_CELL")
def MAKE_CELL(tx, inst):
    # Cells of inlined frames are made with the frame (inline_call); a root frame's here.
    # On 3.12+ an inlined comprehension's MAKE_CELL follows LOAD_FAST_AND_CLEAR, which took
    # the outer cell away: a fresh one is made.
    if inst.argval not in tx.cells:
        tx.cells[inst.argval] = CellBox(tx.locals.pop(inst.argval)) if inst.argval in tx.locals else CellBox()


@handler("COPY_FREE_VARS")
def COPY_FREE_VARS(tx, inst):
    missing = [n for n in tx.code.co_freevars if n not in tx.cells]
    if missing:
        raise Unsupported(f"free variables {missing} have no cells")


@handler("LOAD_CLOSURE", versions=UNTIL_312)
def LOAD_CLOSURE(tx, inst):
    tx.push(CellRef(tx.cells[inst.argval]))


@handler("LOAD_CLASSDEREF", versions=[(3, 11)])
def LOAD_CLASSDEREF(tx, inst):
    """A class body's read of a free variable: its namespace first, then the cell."""
    if tx.namespace is not None and inst.argval in tx.namespace.items:
        return tx.push(tx.namespace.items[inst.argval])
    LOAD_DEREF(tx, inst)


@handler("LOAD_DEREF")
def LOAD_DEREF(tx, inst):
    box = tx.cells.get(inst.argval)
    if box is None:
        raise Unsupported(f"unknown cell {inst.argval!r}")
    tx.push(box.get(tx))


@handler("STORE_DEREF")
def STORE_DEREF(tx, inst):
    box = tx.cells[inst.argval]
    if tx.parent is not None and box.real_cell is not None:
        # `nonlocal n; n += 1` in a called function: its real cell is written after the graph
        if box.source is None:
            raise Unsupported("nonlocal store into a closure cell that cannot be reached after the graph")
        tx.side_effects.store_cell(box)
    value = tx.pop()
    if box.real_cell is not None:  # (the root frame's own too: a called function may read it)
        tx.side_effects.cell_written(value)
    box.set(value)


@handler("DELETE_DEREF")
def DELETE_DEREF(tx, inst):
    raise Unsupported("del of a closure variable")


def _namespace(tx, inst):
    """The namespace of a class body being traced (variables/frame_classes.py). Module code,
    and class-scope code run on its own (a class's `__annotate__` on 3.14), is not traced."""
    if tx.namespace is None:
        raise Unsupported(f"{inst.opname}: module or class body code is not traced (only the body of a class "
                          f"made in the traced frame is)")
    return tx.namespace.items


@handler("LOAD_NAME")
def LOAD_NAME(tx, inst):
    """The namespace, then globals, then builtins."""
    ns = _namespace(tx, inst)
    tx.push(ns[inst.argval] if inst.argval in ns else tx.load_global(inst.argval))


@handler("STORE_NAME")
def STORE_NAME(tx, inst):
    _namespace(tx, inst)[inst.argval] = tx.pop()


@handler("DELETE_NAME")
def DELETE_NAME(tx, inst):
    ns = _namespace(tx, inst)
    if inst.argval not in ns:
        raise Unsupported(f"del of {inst.argval!r}, not in the class namespace (the user code raises NameError)")
    del ns[inst.argval]


@handler("LOAD_LOCALS", versions=SINCE_312)
def LOAD_LOCALS(tx, inst):
    _namespace(tx, inst)
    tx.push(tx.namespace)


@handler("LOAD_FROM_DICT_OR_DEREF", "LOAD_FROM_DICT_OR_GLOBALS", versions=SINCE_312)
def LOAD_FROM_DICT(tx, inst):
    """3.12+: a class body's read through its namespace (LOAD_LOCALS pushed it), else the
    cell or the globals."""
    _namespace(tx, inst)
    ns = tx.pop()
    if ns is not tx.namespace:
        raise Unsupported(f"{inst.opname} on a mapping other than the class namespace")
    if inst.argval in ns.items:
        return tx.push(ns.items[inst.argval])
    if inst.opname == "LOAD_FROM_DICT_OR_DEREF":
        return LOAD_DEREF(tx, inst)
    tx.push(tx.load_global(inst.argval))
