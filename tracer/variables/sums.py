"""sum() and math.prod() applied to Variables, as CPython computes them.

Why a module of its own: since CPython 3.12 (gh-100425) sum() adds a run of floats with
compensation (Neumaier's), which pairwise `+` does not match: `sum([0.1] * 10)` is 1.0 there,
0.9999999999999999 added pairwise, and a trace that added them pairwise gave a wrong answer
with no break.
"""
import math
import sys

from ..exc import Unsupported
from .base import ConstantVariable
from .sym import SymNodeVariable

# sum() adds a run of floats with compensation from CPython 3.12 on (gh-100425)
_COMPENSATED_SUM = sys.version_info >= (3, 12)


def _sum(tx, iterable, start=None):
    """sum() as CPython computes it: since 3.12 a run of floats is added with compensation
    (Neumaier's, _COMPENSATED_SUM), which pairwise `+` does not match (`sum([0.1] * 10)` is
    1.0, not 0.9999999999999999). Constants are summed by sum() itself; there, a run of three
    or more numbers with a float among them and a traced one (a SymFloat) is Unsupported."""
    total = start if start is not None else ConstantVariable(0)
    items = list(iterable.iterate(tx))
    if all(type(v) is ConstantVariable for v in (total, *items)):
        try:
            return ConstantVariable(sum([v.value for v in items], total.value))
        except Exception:  # noqa: BLE001 - raised as the user's below, where eager raises it
            pass
    numbers = _leading_numbers(total if start is not None else None, items) if _COMPENSATED_SUM else ()
    if len(numbers) >= 3 and any(v.python_type() is float for v in numbers) and \
            not all(type(v) is ConstantVariable for v in numbers):
        raise Unsupported("sum() of three or more numbers with a float among traced ones (CPython adds "
                          "floats with compensation)")
    for item in items:
        total = operators.binary_op(tx, "add", total, item)
    return total


def _leading_numbers(start, items):
    """The int and float Variables sum() adds before its total stops being a number (a tensor
    or another object met: from there it adds with `+`); `start` first, unless defaulted."""
    out = []
    for v in ([start] if start is not None else []) + items:
        if not (type(v) is ConstantVariable or isinstance(v, SymNodeVariable)) or \
                v.python_type() not in (int, float):
            break
        out.append(v)
    return out


def _prod(tx, iterable, *, start=None):
    """math.prod(): `start * item * ...` in order, as CPython's (its fast paths for ints and
    floats multiply as `*` does), so the product of sizes is symbolic: `x.reshape(math.prod(
    x.shape))` folded the sizes to their values, a trace per size to the recompile limit."""
    total = start if start is not None else ConstantVariable(1)
    items = list(iterable.iterate(tx))
    if all(type(v) is ConstantVariable for v in (total, *items)):
        try:
            return ConstantVariable(math.prod([v.value for v in items], start=total.value))
        except Exception:  # noqa: BLE001 - raised as the user's below, where eager raises it
            pass
    for item in items:
        total = operators.binary_op(tx, "mul", total, item)
    return total


IMPLS = {sum: _sum, math.prod: _prod}


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions.
from . import operators  # noqa: E402
