"""Symbolic sizes as Python values: `n = x.shape[0]`, `n // h`, `n > 8`, `max(n, 1)`.

A `SymNodeVariable` is an int (float, bool) whose value is a SymInt (SymFloat, SymBool) of
the trace's ShapeEnv plus the FX node that computes it in the graph (`x.size(0)`, an int
placeholder, `operator.floordiv(size, 4)`...). Arithmetic and comparisons run on the sym
values, so the ShapeEnv learns every relation; a comparison whose truth decides control flow
(`if n > 8:`) is decided by the ShapeEnv, which guards the *relation*, not the value.

What needs a real Python value (`int(n)`, `range(n)`, a list index, a dict key, `str(n)`)
specialises: `as_constant()` asks the ShapeEnv for the value, which guards `n == value`.
That is always correct; it only makes the graph less general.
"""
import math
import operator

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, guard_scalar

from ..exc import Unsupported
from ..graph.shapes import SYM_TYPES, constant_of
from .base import ConstantVariable, Variable
from ..graph.output_graph import getitem_node

_PY_TYPE = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


class SymNodeVariable(Variable):
    def __init__(self, node, value, source=None):
        super().__init__(source)
        self.node = node
        self.value = value  # SymInt / SymFloat / SymBool

    @staticmethod
    def create(tx, node, value, source=None):
        """A Variable for a sym value computed by `node`: a constant when it simplified."""
        if isinstance(value, SYM_TYPES):
            c = constant_of(value)
            if c is None:
                node.meta["example_value"] = value
                return SymNodeVariable(node, value, source)
            value = c
        if node.op != "placeholder" and not node.users:
            tx.output.graph.erase_node(node)
        return ConstantVariable(value)

    def python_type(self):
        return _PY_TYPE[type(self.value)]

    def as_constant(self):
        """The value, specialised: the ShapeEnv guards `self == value`."""
        try:
            return guard_scalar(self.value)
        except Exception as e:
            raise Unsupported(f"symbolic size {self.value} cannot be specialised "
                              f"({type(e).__name__})") from e

    def specialize(self):
        return ConstantVariable(self.as_constant())

    def truthy(self, tx):
        try:
            return bool(self.value)  # the ShapeEnv guards the relation it decided
        except Exception as e:
            raise Unsupported(f"bool() of symbolic size {self.value} ({type(e).__name__})") from e

    def getattr(self, tx, name):
        return self.specialize().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        dunder = _DUNDER_OPS.get(name)
        if dunder is not None and len(args) == 1 and not kwargs:
            return sym_binary(tx, dunder, self, args[0])
        if name in ("__index__", "__int__") and not args:
            return self.specialize()
        return self.specialize().call_method(tx, name, args, kwargs)

    def hasattr(self, tx, name):
        return hasattr(self.python_type(), name)

    def reconstruct(self, cg):
        cg.load_tensor(self)  # a graph output (or the int input itself)

    def __repr__(self):
        return f"Sym({self.node.name}: {self.value})"


_DUNDER_OPS = {f"__{n}__": n for n in ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow",
                                       "lt", "le", "gt", "ge", "eq", "ne")}

# How each operator is applied to sym values, and which FX target records it.
_TORCH_SYM = {"max": torch.sym_max, "min": torch.sym_min}


def is_sym(var):
    return isinstance(var, SymNodeVariable)


def is_relation(var):
    """A symbolic bool that is one relation of numbers (`n == 5`, `n < m`), whose negation is
    one too (`n != 5`): not an And/Or of several, which inductor cannot lower where a tensor
    op uses it."""
    return isinstance(var, SymNodeVariable) and isinstance(var.value, torch.SymBool) and \
        isinstance(var.value.node.expr, sympy.core.relational.Relational)


def is_unbacked(var):
    """A sym value the graph computes from tensor data (`t.item()`): no value at trace time."""
    return isinstance(var, SymNodeVariable) and bool(free_unbacked_symbols(var.value))


_CONVERT = {int: torch.sym_int, float: torch.sym_float}


def sym_convert(tx, cls, var):
    """`int(v)` / `float(v)` of an unbacked number: a node (int() truncates, as in eager); the
    value cannot be specialised. A bool converted is a break (its truth is the data's)."""
    if var.python_type() is cls:
        return var
    if var.python_type() is bool:
        raise Unsupported(f"{cls.__name__}() of a bool computed from tensor data")
    return sym_apply(tx, _CONVERT[cls], [_sym_arg(var)])


def specialized(var):
    """`var` itself, or its specialised constant where a real Python value is needed
    (a dict key, str(), an f-string); a torch.Size or tuple of numbers some of which are
    symbolic (`x.shape` of a dynamic x, a shape tuple argument whose sizes became dynamic)
    item by item: a tuple argument used as a cache key is a key, not a graph break. (A tuple
    with a source stays the caller's object: its type, length and items are guarded.)"""
    if _number_tuple(var) and not var.is_constant():
        return ConstantVariable(var.kind(specialized(i).as_constant() for i in var.items), var.source)
    return var.specialize() if isinstance(var, SymNodeVariable) else var


def _number_tuple(var):
    """A tuple or torch.Size (not a subclass: a namedtuple) whose items are constants, symbolic
    numbers or such tuples."""
    return type(var) in (containers.TupleVariable, containers.SizeVariable) and \
        all(i.is_constant() or isinstance(i, SymNodeVariable) or _number_tuple(i) for i in var.items)


def _sym_arg(var):
    """(FX argument, sym value) of a number operand; None if it is not a number."""
    if isinstance(var, SymNodeVariable):
        return var.node, var.value
    if var.is_constant():
        c = var.as_constant()
        if type(c) in (int, float, bool):
            return c, c
    return None


def sym_binary(tx, name, a, b):
    """`a <op> b` where one side is symbolic and the other a number (else: specialise)."""
    base = name[1:] if name.startswith("i") and name not in ("is_", "is_not") else name
    fn = getattr(operator, base, None) or getattr(operator, base + "_", None)
    pa, pb = _sym_arg(a), _sym_arg(b)
    if pa is not None and pb is not None and fn is not None and base not in ("matmul", "is_", "is_not"):
        try:
            return sym_apply(tx, fn, [pa, pb])
        except _NotSymbolic:
            pass
    # an operation sym values do not support (a list times n, n in a string...): specialise
    a = a.specialize() if is_sym(a) else a
    b = b.specialize() if is_sym(b) else b
    return operators.binary_op(tx, name, a, b) if base not in _CMP else operators.compare(tx, _CMP[base], a, b)


class _NotSymbolic(Unsupported):
    """The sym values do not support this operation; the caller may specialise instead."""


_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def sym_compare(tx, op, a, b):
    return sym_binary(tx, {v: k for k, v in _CMP.items()}[op], a, b)


def sym_unary(tx, name, a):
    fn = {"neg": operator.neg, "pos": operator.pos, "abs": abs, "not_": torch.sym_not}.get(name)
    if fn is not None:
        try:
            return sym_apply(tx, fn, [_sym_arg(a)])
        except _NotSymbolic:
            pass
    return operators.unary_op(tx, name, a.specialize())


def sym_minmax(tx, fn, items):
    """max()/min() of numbers, some symbolic: torch.sym_max/sym_min pairwise."""
    target = _TORCH_SYM[fn.__name__]
    parts = [_sym_arg(i) for i in items]
    if any(p is None for p in parts) or not parts:
        raise Unsupported(f"{fn.__name__}() of symbolic sizes and non-numbers")
    if len({i.python_type() for i in items}) > 1:
        # max(7, 0.5) is the int 7: which item wins decides the type (torch.sym_max would
        # give a float), so the values are specialised
        return builtins_impl._fold(fn, [ConstantVariable(tuple(specialized(i).as_constant() for i in items))], {})
    out = items[0]
    for p in parts[1:]:
        out = sym_apply(tx, target, [_sym_arg(out), p])
    return out


_SYM_MATH = {math.floor: math.floor, math.ceil: math.ceil, math.trunc: math.trunc}
_SYM_MATH.update({getattr(math, name): getattr(torch, f"_sym_{name}")
                  for name in ("sqrt", "cos", "sin", "tan", "cosh", "sinh", "tanh", "acos", "asin", "atan",
                               "log2") if hasattr(torch, f"_sym_{name}")})


def sym_math(tx, fn, args):
    """math.floor/ceil/trunc and the math functions torch has symbolic forms of (sqrt, the
    trigonometric and hyperbolic ones, log2) of a symbolic number; others specialise."""
    if len(args) == 1 and is_sym(args[0]):
        target = _SYM_MATH.get(fn)
        if target is not None:
            return sym_apply(tx, target, [_sym_arg(args[0])])
    return None


def sym_round(tx, args):
    """round(v) / round(v, ndigits) of a symbolic number (`round(x.shape[0] / 3)`): round(n) of
    an int is n; of a float a symbol (SymFloat.__round__ rounds half to even, as Python does),
    not the size specialised (one trace per size). None where torch has no symbolic form: the
    caller specialises."""
    if args[0].python_type() is int and len(args) == 1:
        return args[0]
    parts = [_sym_arg(a) for a in args]
    if args[0].python_type() not in (int, float) or any(p is None for p in parts):
        return None
    try:
        return sym_apply(tx, round, parts)
    except _NotSymbolic:
        return None


def sym_divmod(tx, args):
    """divmod(a, b) of ints, one symbolic (`divmod(n, 3)`): int's divmod is exactly `(a // b,
    a % b)`, both symbolic, not the int specialised (a trace per value). None for a float,
    whose floor division Python corrects where a symbolic floor of the quotient does not
    (`1 // 0.1` is 9.0), and a bool: the caller specialises."""
    if len(args) != 2 or not all(is_sym(a) and a.python_type() is int or
                                 a.is_constant() and type(a.as_constant()) is int for a in args):
        return None
    return containers.TupleVariable([sym_binary(tx, "floordiv", *args), sym_binary(tx, "mod", *args)])


_COMPARISONS = frozenset({operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne})


def sym_apply(tx, fn, parts):
    """Apply `fn` to sym values, recording one FX node; a constant result folds."""
    nodes, values = [p[0] for p in parts], [p[1] for p in parts]
    try:
        result = fn(*values)
    except ZeroDivisionError as e:
        raise _NotSymbolic(f"{getattr(fn, '__name__', fn)} of symbolic sizes divides by zero") from e
    except Exception as e:
        raise _NotSymbolic(f"{getattr(fn, '__name__', fn)} on symbolic sizes: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from e
    if isinstance(result, torch.SymFloat) and fn not in _COMPARISONS and \
            (any(isinstance(v, torch.SymFloat) for v in values) or _sign_lost(values, result)):
        # Float arithmetic is not algebra: sympy would simplify (a + b) - b to a, or fold it
        # to a constant, and decide comparisons on it the same way. The result is a symbol of
        # its own, computed by its node at run time, with the program's value as its hint;
        # a guard on it computes it again as the program does (Shapes.computed_float).
        # (not pending where unbacked: no node output binds it, a backend that traces the
        # graph again computes the sum itself)
        result = tx.output.shapes.computed_float(fn, values)
    if not isinstance(result, SYM_TYPES):
        return ConstantVariable(result)
    try:
        const = constant_of(result)
    except ValueError as e:
        raise _NotSymbolic(f"{getattr(fn, '__name__', fn)} on symbolic sizes: {e}") from e
    if const is not None:
        return ConstantVariable(const)
    node = tx.output.graph.create_node("call_function", fn, tuple(nodes), {})
    node.meta["example_value"] = result
    tx.output.bind_unbacked(node, result)
    return SymNodeVariable(node, result)


def _sign_lost(values, result):
    """Whether sympy's answer for a float result of sizes may differ from Python's: a zero,
    an infinity or a NaN operand (`-0.0 * n` is -0.0 for n > 0, `(1 - n) * 0.0` is -0.0 for
    n > 1; sympy folds both to 0), or a result it folded to zero (`0 / -n` is -0.0)."""
    for v in values:
        if type(v) is float and (v == 0.0 or not math.isfinite(v)):
            return True
    return constant_of(result) == 0.0


class SliceVariable(Variable):
    """`a:b:c` with a symbolic bound (`x[:, : n // 2]`); constant slices stay constants."""

    def __init__(self, parts):
        super().__init__(None)
        self.parts = list(parts)

    def python_type(self):
        return slice

    def as_constant(self):
        return slice(*(p.as_constant() for p in self.parts))

    def fx_arg(self):
        """(slice of FX arguments, slice of sym values) for a torch op's index."""
        pairs = []
        for p in self.parts:
            pair = _sym_arg(p) or ((None, None) if p.is_constant() and p.as_constant() is None else None)
            if pair is None:
                raise Unsupported(f"slice bound {p} is not a number")
            pairs.append(pair)
        return slice(*(p[0] for p in pairs)), slice(*(p[1] for p in pairs))

    def reconstruct(self, cg):
        cg.call_with(slice, self.parts)

    def __repr__(self):
        return f"Slice({self.parts!r})"


def wrap_sym_result(tx, node, example):
    """A torch call that returned a sym number (`torch.numel(x)`) or a torch.Size with
    symbolic items (`torch.broadcast_shapes`)."""
    if isinstance(example, SYM_TYPES):
        return SymNodeVariable.create(tx, node, example)
    items = []
    for i, v in enumerate(example):
        if isinstance(v, SYM_TYPES) and constant_of(v) is None:
            items.append(SymNodeVariable(getitem_node(tx.output, node, i), v))
        else:
            items.append(ConstantVariable(constant_of(v) if isinstance(v, SYM_TYPES) else v))
    return containers.SizeVariable(items)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, builtins_impl, operators  # noqa: E402
