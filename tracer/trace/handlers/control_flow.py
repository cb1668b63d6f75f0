"""Jumps, loops and return. Branches are decided at trace time on Python values; a branch
on a tensor's value is Unsupported (data-dependent).

Per version: 3.11 FOR_ITER pops the exhausted iterator; 3.12+ jumps to END_FOR, which pops
it (3.12: END_FOR pops two, the model `dis.stack_effect` uses; 3.13: one, then POP_TOP).
3.13 converts to bool explicitly (TO_BOOL) before conditional jumps and `not`.
"""
from ...exc import Unsupported
from ...variables.base import ConstantVariable
from ...variables.live_iterators import iterator_over
from ...variables.tensor import TensorVariable
from . import PY311, PY312, PY313, SINCE_312, handler


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def JUMP(f, inst):
    f.jump(inst)


def _is_none(f, v):
    return v.is_constant() and v.as_constant() is None


def _pop_jump(test):
    def h(f, inst):
        v = f.pop()
        if test(f, v):
            f.jump(inst)
    return h


def _truth(f, v):
    if isinstance(v, TensorVariable):
        raise Unsupported("data-dependent branch: `if` on a tensor value")
    return f.truthy(v)


# (3.11's POP_JUMP_FORWARD_IF_* / POP_JUMP_BACKWARD_IF_* arrive under these names: decode)
handler("POP_JUMP_IF_TRUE")(_pop_jump(lambda f, v: _truth(f, v)))
handler("POP_JUMP_IF_FALSE")(_pop_jump(lambda f, v: not _truth(f, v)))
handler("POP_JUMP_IF_NONE")(_pop_jump(_is_none))
handler("POP_JUMP_IF_NOT_NONE")(_pop_jump(lambda f, v: not _is_none(f, v)))


@handler("TO_BOOL", versions=PY313)
def TO_BOOL(f, inst):
    """3.13: `bool(TOS)` before a conditional jump or `not`. On a tensor this is where the
    value is needed: the graph breaks here and the native TO_BOOL converts it."""
    f.push(ConstantVariable(_truth(f, f.pop())))


@handler("JUMP_IF_TRUE_OR_POP", versions=PY311)
def JUMP_IF_TRUE_OR_POP(f, inst):
    if _truth(f, f.stack[-1]):
        f.jump(inst)
    else:
        f.pop()


@handler("JUMP_IF_FALSE_OR_POP", versions=PY311)
def JUMP_IF_FALSE_OR_POP(f, inst):
    if not _truth(f, f.stack[-1]):
        f.jump(inst)
    else:
        f.pop()


@handler("GET_ITER")
def GET_ITER(f, inst):
    f.push(iterator_over(f, f.pop()))


def _for_iter(f, inst, exhausted):
    item = f.stack[-1].next(f)
    if item is None:
        exhausted(f)
        f.jump(inst)
    else:
        f.push(item)


@handler("FOR_ITER", versions=PY311)
def FOR_ITER_311(f, inst):
    _for_iter(f, inst, lambda f: f.pop())


@handler("FOR_ITER", versions=SINCE_312)
def FOR_ITER(f, inst):
    # (CPython pops the iterator and skips END_FOR; `dis` and our stack analysis model the
    # jump as pushing a value for END_FOR to drop with the iterator: do as they count)
    _for_iter(f, inst, lambda f: f.push(ConstantVariable(None)))


@handler("END_FOR", versions=PY312)
def END_FOR_312(f, inst):
    f.popn(2)


@handler("END_FOR", versions=PY313)
def END_FOR_313(f, inst):
    f.pop()


@handler("RETURN_VALUE")
def RETURN_VALUE(f, inst):
    f.return_value = f.pop()
    return True


@handler("RETURN_CONST", versions=SINCE_312)
def RETURN_CONST(f, inst):
    f.return_value = ConstantVariable(inst.argval)
    return True


@handler("LOAD_ASSERTION_ERROR")
def LOAD_ASSERTION_ERROR(f, inst):
    f.push(f.wrap(AssertionError, None))
