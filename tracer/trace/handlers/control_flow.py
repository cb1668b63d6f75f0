"""Jumps, loops and return. Branches are decided at trace time on Python values; a branch
on a tensor's value is Unsupported (data-dependent).

Per version: 3.11 FOR_ITER pops the exhausted iterator; 3.12+ jumps to END_FOR, which pops
it (3.12: END_FOR pops two, the model `dis.stack_effect` uses; 3.13: one, then POP_TOP).
3.13 converts to bool explicitly (TO_BOOL) before conditional jumps and `not`. 3.14 drops the
iterator with POP_ITER (normalised to POP_TOP); on 3.15 an iterator is two stack entries
(versions.ITER_SLOTS: the iterator and a NULL here) and POP_ITER drops both.
"""
from bytecode_utils import versions

from ...exc import Unsupported
from ...variables.base import ConstantVariable
from ...variables.builder import wrap
from ...variables.live_iterators import iterator_over
from ...variables.tensor import TensorVariable
from ...variables.stack_values import NULL
from .misc import from_iter
from .registry import PY311, PY312, SINCE_312, SINCE_313, SINCE_315, UNTIL_313, handler


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def JUMP(tx, inst):
    tx.jump(inst)


def _is_none(tx, v):
    return v.is_constant() and v.as_constant() is None


def _pop_jump(test):
    def h(tx, inst):
        v = tx.pop()
        if test(tx, v):
            tx.jump(inst)
    return h


def _truth(tx, v):
    if isinstance(v, TensorVariable):
        raise Unsupported("data-dependent branch: `if` on a tensor value")
    return v.truthy(tx)


# (3.11's POP_JUMP_FORWARD_IF_* / POP_JUMP_BACKWARD_IF_* arrive under these names: decode)
handler("POP_JUMP_IF_TRUE")(_pop_jump(lambda f, v: _truth(f, v)))
handler("POP_JUMP_IF_FALSE")(_pop_jump(lambda f, v: not _truth(f, v)))
handler("POP_JUMP_IF_NONE")(_pop_jump(_is_none))
handler("POP_JUMP_IF_NOT_NONE")(_pop_jump(lambda f, v: not _is_none(f, v)))


@handler("TO_BOOL", versions=SINCE_313)
def TO_BOOL(tx, inst):
    """3.13: `bool(TOS)` before a conditional jump or `not`. On a tensor this is where the
    value is needed: the graph breaks here and the native TO_BOOL converts it."""
    tx.push(ConstantVariable(_truth(tx, tx.pop())))


@handler("JUMP_IF_TRUE_OR_POP", versions=PY311)
def JUMP_IF_TRUE_OR_POP(tx, inst):
    if _truth(tx, tx.stack[-1]):
        tx.jump(inst)
    else:
        tx.pop()


@handler("JUMP_IF_FALSE_OR_POP", versions=PY311)
def JUMP_IF_FALSE_OR_POP(tx, inst):
    if not _truth(tx, tx.stack[-1]):
        tx.jump(inst)
    else:
        tx.pop()


@handler("GET_ITER")
def GET_ITER(tx, inst):
    """iter(TOS). 3.15's GET_ITER 1-3 is `yield from`'s GET_YIELD_FROM_ITER (misc.py), and both
    forms push the iterator's second entry."""
    if inst.arg:
        from_iter(tx)
    else:
        tx.push(iterator_over(tx, tx.pop()))
    for _ in range(versions.ITER_SLOTS - 1):
        tx.push(NULL)


@handler("POP_ITER", versions=SINCE_315)
def POP_ITER(tx, inst):
    tx.popn(versions.ITER_SLOTS)


def _for_iter(tx, inst, exhausted):
    item = tx.stack[-versions.ITER_SLOTS].next(tx)
    if item is None:
        exhausted(tx)
        tx.jump(inst)
    else:
        tx.push(item)


@handler("FOR_ITER", versions=PY311)
def FOR_ITER_311(tx, inst):
    _for_iter(tx, inst, lambda f: f.pop())


@handler("FOR_ITER", versions=SINCE_312)
def FOR_ITER(tx, inst):
    # (CPython pops the iterator and skips END_FOR; `dis` and our stack analysis model the
    # jump as pushing a value for END_FOR to drop with the iterator: do as they count)
    _for_iter(tx, inst, lambda f: f.push(ConstantVariable(None)))


@handler("END_FOR", versions=PY312)
def END_FOR_312(tx, inst):
    tx.popn(2)


@handler("END_FOR", versions=SINCE_313)
def END_FOR_313(tx, inst):
    tx.pop()


@handler("RETURN_VALUE")
def RETURN_VALUE(tx, inst):
    tx.return_value = tx.pop()
    return True


@handler("RETURN_CONST", versions=[(3, 12), (3, 13)])
def RETURN_CONST(tx, inst):
    tx.return_value = ConstantVariable(inst.argval)
    return True


@handler("LOAD_ASSERTION_ERROR", versions=UNTIL_313)
def LOAD_ASSERTION_ERROR(tx, inst):
    tx.push(wrap(tx, AssertionError, None))
