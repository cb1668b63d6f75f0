"""Handlers of the operator instructions: BINARY_OP, COMPARE_OP, IS_OP, CONTAINS_OP and the
unary ones. What an operator does to Variables is tracer/variables/operators.py."""
from bytecode_utils import BINARY_OP_NAMES, versions

from ...variables.base import ConstantVariable
from ...variables.operators import binary_op, compare, contains, unary_op
from ...variables.tensor import TensorVariable
from .registry import handler

_SYMBOL_TO_NAME = {
    "+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
    "**": "pow", "@": "matmul", "&": "and_", "|": "or_", "^": "xor", "<<": "lshift",
    ">>": "rshift",
}


def _opname(arg):
    sym = BINARY_OP_NAMES[arg]
    if sym.endswith("=") and sym not in ("==",):
        base = _SYMBOL_TO_NAME[sym[:-1]]
        return "i" + base.rstrip("_") if base.endswith("_") else "i" + base
    return _SYMBOL_TO_NAME[sym]


@handler("BINARY_OP")
def BINARY_OP(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(binary_op(tx, _opname(inst.arg), a, b))


@handler("COMPARE_OP")
def COMPARE_OP(tx, inst):
    b, a = tx.pop(), tx.pop()
    result = compare(tx, inst.argval, a, b)
    if versions.compare_to_bool(inst) and not isinstance(result, TensorVariable):
        result = ConstantVariable(result.truthy(tx))
    # (a tensor result stays a tensor: the jump or `not` that reads it breaks the graph, and
    # its native form converts it, so the comparison itself stays in the graph)
    tx.push(result)


@handler("IS_OP")
def IS_OP(tx, inst):
    b, a = tx.pop(), tx.pop()
    tx.push(compare(tx, "is not" if inst.arg else "is", a, b))


@handler("CONTAINS_OP")
def CONTAINS_OP(tx, inst):
    b, a = tx.pop(), tx.pop()
    result = contains(tx, b, a)
    if inst.arg:
        result = unary_op(tx, "not_", result)
    tx.push(result)


def _unary(name):
    def h(tx, inst):
        tx.push(unary_op(tx, name, tx.pop()))
    return h


handler("UNARY_NEGATIVE")(_unary("neg"))
handler("UNARY_POSITIVE")(_unary("pos"))  # (3.12+: CALL_INTRINSIC_1 INTRINSIC_UNARY_POSITIVE)
handler("UNARY_INVERT")(_unary("invert"))
handler("UNARY_NOT")(_unary("not_"))
