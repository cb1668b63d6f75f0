"""Guards on symbolic sizes (dynamic shapes): one fact of torch's ShapeEnv per guard.

Why: a graph traced with symbolic sizes is valid for every input whose sizes satisfy the
relations the trace relied on (``2 <= x.size(0)``, ``y.size(0) == x.size(0)``,
``x.size(0) > 8``).  torch's ShapeEnv decides those relations; the tracer has it print each
one as a Python expression over *tokens* ``_z0, _z1, ...`` (our own names, one per size,
stride or int input it reads) and hands it here with the Source each token stands for.

Rule 6 holds: the expression is parsed with ``ast``; every token becomes the generated
expression of its Source, every other name (``Max``, ``Mod``, ``math.floor``, ...) is looked
up in torch's sympy-to-Python namespace and bound as a constant; anything else -- a string,
an unknown name, an attribute of a value -- is rejected when the guard is made.

A token may also stand for a float the trace computed by Python arithmetic on sizes
(``x.shape[0] / (h * w / 4)``): ``ComputedNumberSource`` computes it again, with the function
the program applied, from operands spelled the same way.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
import re
from typing import Any

import torch
from bytecode import Instr

from bytecode_utils import versions

from .guard import Guard
from .sources import Source

_TOKEN = re.compile(r"^_z(\d+)$")
_PROPS = ("size", "stride", "storage_offset")
_METHODS = {"size": torch.Tensor.size, "stride": torch.Tensor.stride,
            "storage_offset": torch.Tensor.storage_offset}


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TensorPropSource(Source):
    """``base.size(i)``, ``base.stride(i)`` or ``base.storage_offset()`` of a tensor source."""

    base_: Source
    prop: str
    idx: int | None

    def __init__(self, base: Source, prop: str, idx: int | None = None) -> None:
        if prop not in _PROPS:
            raise ValueError(f"unknown tensor property {prop!r}")
        object.__setattr__(self, "base_", base)
        object.__setattr__(self, "prop", prop)
        object.__setattr__(self, "idx", None if idx is None else int(idx))

    @property
    def base(self) -> Source:
        return self.base_

    def _key(self):
        return (self.base_, self.prop, self.idx)

    def name(self) -> str:
        arg = "" if self.idx is None else str(self.idx)
        return f"{self.base_.name()}.{self.prop}({arg})"

    def guard_expr(self, ctx) -> str:
        # the unbound method is a bound constant: no attribute name in the generated text
        args = ctx.value(self.base_) + ("" if self.idx is None else f", {int(self.idx)}")
        return f"{ctx.const(_METHODS[self.prop])}({args})"

    def reconstruct(self) -> list[Instr]:
        args = [] if self.idx is None else [Instr("LOAD_CONST", self.idx)]
        return self.base_.reconstruct() + versions.load_method(self.prop) + args + versions.call(len(args))


def _namespace() -> dict[str, Any]:
    """Names torch's shape-guard printer may use, besides tokens."""
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP
    ns = dict(SYMPY_INTERP)
    ns.update({"math": math, "torch": torch, "min": min, "max": max, "abs": abs, "int": int,
               "float": float, "round": round, "bool": bool})
    return ns


_NS: dict[str, Any] = {}


def _names() -> dict[str, Any]:
    if not _NS:
        _NS.update(_namespace())
    return _NS


class _Render(ast.NodeTransformer):
    """Tokens -> a placeholder name per source; library names -> bound constants."""

    def __init__(self, token, const):
        self.token, self.const = token, const

    def visit_Name(self, node):
        m = _TOKEN.match(node.id)
        if m:
            return ast.copy_location(ast.Name(self.token(int(m.group(1))), ast.Load()), node)
        ns = _names()
        if node.id not in ns:
            raise ValueError(f"shape guard uses an unknown name {node.id!r}")
        return ast.copy_location(ast.Name(self.const(ns[node.id], node.id), ast.Load()), node)

    def visit_Attribute(self, node):
        path, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            path.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in ("math", "torch"):
            raise ValueError("shape guard reads an attribute of a value")
        obj = _names()[base.id]
        for part in reversed(path):
            obj = getattr(obj, part)
        dotted = ".".join([base.id, *reversed(path)])
        return ast.copy_location(ast.Name(self.const(obj, dotted), ast.Load()), node)

    def visit_Constant(self, node):
        if type(node.value) not in (int, float, bool):
            raise ValueError("shape guard holds a non-numeric literal")
        return node


_ALLOWED_NODES = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call,
                  ast.Name, ast.Constant, ast.Attribute, ast.Load, ast.operator, ast.unaryop,
                  ast.cmpop, ast.boolop, ast.IfExp)


def _render(tree: ast.Expression, token, const) -> str:
    """The expression as text: token i spelled `token(i)`, a library object `const(obj, name)`."""
    return ast.unparse(_Render(token, const).visit(copy.deepcopy(tree)))


def _parse(expr: str, n_tokens: int) -> ast.Expression:
    """The parsed expression, checked: only the node kinds above, tokens below `n_tokens`,
    names of torch's namespace (raises ValueError otherwise)."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"shape guard uses {type(node).__name__}")

    def known(i):
        if i >= n_tokens:
            raise ValueError(f"shape guard token _z{i} has no source")
        return _PLACE.format(i)
    _render(tree, known, lambda _v, n: n)  # raises on an unknown name or token
    return tree


def _spell(tree: ast.Expression, tokens, ctx) -> str:
    """Generated text of a parsed expression: each token the expression of its Source (read
    once), each library name a bound constant."""
    values = {}

    def token(i):
        if i not in values:
            values[i] = ctx.value(tokens[i])
        return _PLACE.format(i)
    text = _render(tree, token, lambda v, _n: ctx.const(v))
    # token placeholders are our own identifiers; substitute the source expressions
    return re.sub(r"__tok(\d+)__", lambda m: f"({values[int(m.group(1))]})", text)


def _described(tree: ast.Expression, tokens) -> str:
    """The expression with each token named by its Source (messages, never code)."""
    text = _render(tree, lambda i: _PLACE.format(i), lambda _v, n: n)
    return re.sub(r"__tok(\d+)__", lambda m: tokens[int(m.group(1))].name(), text)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ComputedNumberSource(Source):
    """``fn(*args)``: a float the trace computed by Python arithmetic from sizes and dynamic
    numbers (``x.shape[0] / (h * w / 4)``), read again by the guards on it.

    Why: float arithmetic is not algebra (sympy would make ``(a + b) - b`` into ``a``), so the
    ShapeEnv holds each such result as a symbol of its own, and a guard that relies on its
    value (``int(v) == 8``, ``v == 1.525`` where an op needs a Python float) must compute it as
    the program does. ``fn`` is the function the program applied (``operator.truediv``,
    ``math.floor``...), each of ``args`` Python over ``tokens`` as a ShapeMatch's expression (an
    operand's own expression: ``(_z0 * _z1) / 2``, a literal, a token of another such number).
    Never loaded by the rewritten code: no graph input or local is read through it.
    """

    fn: Any
    args: tuple
    tokens: tuple

    def __init__(self, fn, args, tokens) -> None:
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "tokens", tuple(tokens))
        self._parsed()  # (raises ValueError on an operand a guard cannot spell)

    def _key(self):
        return (id(self.fn), self.args, self.tokens)

    def _parsed(self):
        """The operands parsed and checked, once (kept beside the fields: a copy read back
        from the disk cache is made without __init__)."""
        trees = self.__dict__.get("_trees")
        if trees is None:
            trees = tuple(_parse(a, len(self.tokens)) for a in self.args)
            object.__setattr__(self, "_trees", trees)
        return trees

    def depth(self) -> int:
        """Below every source it reads: its guards are checked after theirs."""
        d = self.__dict__.get("_depth")
        if d is None:
            d = 1 + max((t.depth() for t in self.tokens), default=0)
            object.__setattr__(self, "_depth", d)
        return d

    def ancestors(self) -> list[Source]:
        """The sources it is computed from (and theirs): a guard on it is not evaluated once
        one of those failed."""
        out = []
        for t in self.tokens:
            for s in (t, *t.ancestors()):
                if s not in out:
                    out.append(s)
        return out

    def name(self) -> str:
        args = ", ".join(_described(t, self.tokens) for t in self._parsed())
        return f"{getattr(self.fn, '__name__', 'fn')}({args})"

    def guard_expr(self, ctx) -> str:
        args = ", ".join(_spell(t, self.tokens, ctx) for t in self._parsed())
        return f"{ctx.const(self.fn)}({args})"

    def reconstruct(self) -> list[Instr]:
        raise NotImplementedError("a computed number is read by guards only")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ShapeMatch(Guard):
    """One relation between input sizes that the graph relies on (from torch's ShapeEnv).

    ``expr`` is Python over tokens ``_z0 .. _zN``; token i reads ``tokens[i]`` (a size,
    stride or storage offset of an input tensor, or an int input).
    """

    expr: str
    tokens: tuple
    _tree: Any = dataclasses.field(compare=False)
    rank = 2

    def __init__(self, expr: str, tokens) -> None:
        object.__setattr__(self, "expr", expr)
        object.__setattr__(self, "tokens", tuple(tokens))
        object.__setattr__(self, "_tree", _parse(expr, len(self.tokens)))

    def sources(self):
        return self.tokens

    def _key(self):
        return (self.expr, self.tokens)

    def conditions(self, ctx):
        return [_spell(self._tree, self.tokens, ctx)]

    def describe(self):
        return _described(self._tree, self.tokens)


_PLACE = "__tok{}__"
