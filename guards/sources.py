"""Sources: how to fetch a value again, from the frame's arguments, globals or closure.

Why: every value the tracer specialises on must be re-checked on the next call (a guard)
and, in the rewritten frame, re-loaded (reconstruct).  A Source is the one description
that yields both: ``guard_expr`` for the generated check function ``check(L, G, C)`` and
``reconstruct`` for bytecode.  Sources are frozen and hashable so guard sets can be
deduplicated and values hoisted once per source.

Equality is by a canonical key (``_key``) rather than by ``==`` of fields, so that
``x[1]`` and ``x[True]`` or ``ConstSource(1)`` and ``ConstSource(1.0)`` stay distinct.
"""

from __future__ import annotations

import dataclasses
import keyword
from typing import Any

import bytecode
from bytecode import Instr

from bytecode_utils import versions


def const_key(value: Any) -> Any:
    """A hashable key that is equal only for values that behave identically.

    Plain ``==`` merges 1, 1.0 and True, and 0.0 with -0.0; this does not.  Unhashable or
    unknown objects are keyed by identity (the caller keeps them alive).
    """
    t = type(value)
    if t is tuple:
        return (tuple, tuple(const_key(v) for v in value))
    if t is float or t is complex:
        return (t, repr(value))
    if t is slice:
        return (slice, const_key(value.start), const_key(value.stop), const_key(value.step))
    if t in (int, bool, str, bytes, type(None), type(Ellipsis)):
        return (t, value)
    return (t, id(value))


# Attributes a source or guard keeps beside its fields, computed from them (or, for
# `_template`, naming what it was re-targeted from: guards/retarget.py): never compared or
# written, and dropped from a copy given other fields.
DERIVED_ATTRS = ("_hash", "_depth", "_template", "_trees", "_expanded", "_width")


def cached_hash(obj) -> int:
    """The hash of a frozen source or guard, by its type's name and `_key()`, computed once
    and kept as `_hash` (one of DERIVED_ATTRS: a copy given other fields drops it)."""
    try:
        return obj._hash
    except AttributeError:
        h = hash((type(obj).__name__, obj._key()))
        object.__setattr__(obj, "_hash", h)
        return h


class Source:
    """Base class. Subclasses are frozen dataclasses declared with ``eq=False``."""

    def _key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return type(self) is type(other) and hash(self) == hash(other) and \
            self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        # a source is immutable and nested ones hash their whole path: computed once (guard
        # sets hash each source many times while deduplicating and hoisting: a 48-layer
        # model's ~150,000 times, so the cached value is read here without another call)
        try:
            return self._hash
        except AttributeError:
            return cached_hash(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name()}>"

    def name(self) -> str:
        """Human-readable path, e.g. ``x.weight[0]`` or ``G['scale']``."""
        raise NotImplementedError

    def guard_expr(self, ctx) -> str:
        """Python expression (generated identifiers only) evaluating to the value."""
        raise NotImplementedError

    def reconstruct(self) -> list[Instr]:
        """CPython 3.11 instructions that push the value onto the stack."""
        raise NotImplementedError

    @property
    def base(self) -> "Source | None":
        return None

    def base_root(self) -> "Source":
        s = self
        while s.base is not None:
            s = s.base
        return s

    def depth(self) -> int:
        """Number of steps from the root; guards are ordered by it (computed once)."""
        d = self.__dict__.get("_depth")
        if d is None:
            b = self.base
            d = 0 if b is None else b.depth() + 1
            object.__setattr__(self, "_depth", d)
        return d

    def ancestors(self) -> list["Source"]:
        """Strict bases, nearest first."""
        out, s = [], self.base
        while s is not None:
            out.append(s)
            s = s.base
        return out

    def is_root_cheap(self) -> bool:
        """True if the expression is already as cheap as a local (no hoisting needed)."""
        return False


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LocalSource(Source):
    """Argument number ``index`` of the frame, named ``name`` (``L[index]``)."""

    name_: str
    index: int

    def __init__(self, name: str, index: int) -> None:
        object.__setattr__(self, "name_", name)
        object.__setattr__(self, "index", int(index))

    def _key(self):
        return (self.name_, self.index)

    def name(self) -> str:
        return self.name_

    def guard_expr(self, ctx) -> str:
        return f"L[{int(self.index)}]"

    def reconstruct(self) -> list[Instr]:
        return [Instr("LOAD_FAST", self.name_)]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GlobalSource(Source):
    """``G[name]``: a module global of the frame."""

    name_: str

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name_", name)

    def _key(self):
        return (self.name_,)

    def name(self) -> str:
        return f"G[{self.name_!r}]"

    def guard_expr(self, ctx) -> str:
        return f"G[{ctx.const(self.name_)}]"

    def reconstruct(self) -> list[Instr]:
        return versions.load_global(self.name_)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BuiltinSource(GlobalSource):
    """A builtin, read from the builtins dict bound when the guard set is built. Reloaded like
    a global (LOAD_GLOBAL falls through to builtins).

    Correct only together with a guard that ``name`` is not shadowed by a global; the
    builder does not add that itself.
    """

    def name(self) -> str:
        return f"B[{self.name_!r}]"

    def guard_expr(self, ctx) -> str:
        return f"{ctx.const(ctx.builtins)}[{ctx.const(self.name_)}]"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CellSource(Source):
    """Contents of closure cell ``index`` (free variable ``name``): ``C[index].cell_contents``."""

    name_: str
    index: int

    def __init__(self, name: str, index: int) -> None:
        object.__setattr__(self, "name_", name)
        object.__setattr__(self, "index", int(index))

    def _key(self):
        return (self.name_, self.index)

    def name(self) -> str:
        return f"cell({self.name_})"

    def guard_expr(self, ctx) -> str:
        return f"C[{int(self.index)}].cell_contents"

    def reconstruct(self) -> list[Instr]:
        return [Instr("LOAD_DEREF", bytecode.FreeVar(self.name_))]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AttrSource(Source):
    """``getattr(base, attr)``."""

    base_: Source
    attr: str

    def __init__(self, base: Source, attr: str) -> None:
        if type(attr) is not str:
            raise TypeError("attribute name must be a str")
        object.__setattr__(self, "base_", base)
        object.__setattr__(self, "attr", attr)

    @property
    def base(self) -> Source:
        return self.base_

    def _key(self):
        return (self.base_, self.attr)

    def name(self) -> str:
        if self.attr.isidentifier() and not keyword.iskeyword(self.attr):
            return f"{self.base_.name()}.{self.attr}"
        return f"getattr({self.base_.name()}, {self.attr!r})"

    def guard_expr(self, ctx) -> str:
        return f"getattr({ctx.value(self.base_)}, {ctx.const(self.attr)})"

    def reconstruct(self) -> list[Instr]:
        return self.base_.reconstruct() + versions.load_attr(self.attr)


class GenericAttrSource(AttrSource):
    """``object.__getattribute__(base, attr)``: an attribute read that bypasses a class's own
    __getattribute__ (which may be the very frame being traced: re-entering it would recurse)."""

    def name(self) -> str:
        return f"object.__getattribute__({self.base_.name()}, {self.attr!r})"

    def guard_expr(self, ctx) -> str:
        return f"{ctx.const(object.__getattribute__)}({ctx.value(self.base_)}, {ctx.const(self.attr)})"

    def reconstruct(self) -> list[Instr]:
        return [*versions.load_const_callable(object.__getattribute__), *self.base_.reconstruct(),
                Instr("LOAD_CONST", self.attr), *versions.call(2)]


class GlobalsDictSource(Source):
    """The frame's globals dict itself (for 'name is not shadowed' guards on builtins)."""

    def _key(self):
        return ()

    def name(self) -> str:
        return "G"

    def guard_expr(self, ctx) -> str:
        return "G"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ItemSource(Source):
    """``base[key]`` with a constant, hashable key."""

    base_: Source
    key: Any

    def __init__(self, base: Source, key: Any) -> None:
        hash(key)  # must be hashable
        object.__setattr__(self, "base_", base)
        object.__setattr__(self, "key", key)

    @property
    def base(self) -> Source:
        return self.base_

    def _key(self):
        return (self.base_, const_key(self.key))

    def name(self) -> str:
        return f"{self.base_.name()}[{self.key!r}]"

    def guard_expr(self, ctx) -> str:
        return f"{ctx.value(self.base_)}[{ctx.const(self.key)}]"

    def reconstruct(self) -> list[Instr]:
        return self.base_.reconstruct() + [Instr("LOAD_CONST", self.key), *versions.subscr()]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DictItemSource(ItemSource):
    """``dict.__getitem__(base, key)``: an item of a dict subclass whose own ``__getitem__``
    does something else (transformers' ClassInstantier builds an object per lookup); reading
    it must not run that code, in a guard or in the rewritten frame."""

    def _key(self):
        return ("dict_item", self.base_, const_key(self.key))

    def name(self) -> str:
        return f"dict.__getitem__({self.base_.name()}, {self.key!r})"

    def guard_expr(self, ctx) -> str:
        return f"{ctx.const(dict.__getitem__)}({ctx.value(self.base_)}, {ctx.const(self.key)})"

    def reconstruct(self) -> list[Instr]:
        return [*versions.load_const_callable(dict.__getitem__), *self.base_.reconstruct(),
                Instr("LOAD_CONST", self.key), *versions.call(2)]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class KeyedItemSource(Source):
    """``dict.get(base, key)`` where the key is itself read through a source: a dict
    keyed by objects that are inputs (an optimizer's state keyed by the model's parameters).
    The guard and the rewritten frame look the item up by whatever object the key's source
    gives on that call, so the entry serves another model whose state is keyed by its own
    parameters; no key object is held. ``base`` is the dict: the key's source is read in full
    where the item is."""

    base_: Source
    key_: Source

    def __init__(self, base: Source, key: Source) -> None:
        object.__setattr__(self, "base_", base)
        object.__setattr__(self, "key_", key)

    @property
    def base(self) -> Source:
        return self.base_

    def _key(self):
        return (self.base_, self.key_)

    def name(self) -> str:
        return f"{self.base_.name()}[{self.key_.name()}]"

    # dict.get: a defaultdict's __missing__ must not run (it would insert the key)
    _read = staticmethod(dict.get)

    def guard_expr(self, ctx) -> str:
        return f"{ctx.const(self._read)}({ctx.value(self.base_)}, {ctx.value(self.key_)})"

    def reconstruct(self) -> list[Instr]:
        return [*versions.load_const_callable(self._read), *self.base_.reconstruct(),
                *self.key_.reconstruct(), *versions.call(2)]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class KeyedPresenceSource(KeyedItemSource):
    """``dict.__contains__(base, key)``, the key read through a source (KeyedItemSource): a
    guard that the key is, or is not, in the dict on this call."""

    def _key(self):
        return ("in", self.base_, self.key_)

    _read = staticmethod(dict.__contains__)

    def name(self) -> str:
        return f"({self.key_.name()} in {self.base_.name()})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TypeSource(Source):
    """``type(base)``."""

    base_: Source

    def __init__(self, base: Source) -> None:
        object.__setattr__(self, "base_", base)

    @property
    def base(self) -> Source:
        return self.base_

    def _key(self):
        return (self.base_,)

    def name(self) -> str:
        return f"type({self.base_.name()})"

    def guard_expr(self, ctx) -> str:
        return f"type({ctx.value(self.base_)})"

    def reconstruct(self) -> list[Instr]:
        return versions.load_const_callable(type) + self.base_.reconstruct() + versions.call(1)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ConstSource(Source):
    """A value baked into the guard / code (kept alive by it); equal by identity."""

    value: Any

    def __init__(self, value: Any) -> None:
        object.__setattr__(self, "value", value)

    def _key(self):
        return (type(self.value), id(self.value))

    def name(self) -> str:
        r = repr(self.value)
        return f"const({r if len(r) <= 60 else r[:57] + '...'})"

    def guard_expr(self, ctx) -> str:
        return ctx.const(self.value)

    def reconstruct(self) -> list[Instr]:
        return [Instr("LOAD_CONST", self.value)]

    def is_root_cheap(self) -> bool:
        return True


class CallSource(Source):
    """``fn(base)``: a value computed from another source by a module-level function of the
    tracer's (the rest of a list iterator, the tensor of a NumPy array). Subclasses say which
    function with `function()`; their only field is `base_` (the disk cache writes it)."""

    def __init__(self, base: Source) -> None:
        object.__setattr__(self, "base_", base)

    @property
    def base(self) -> Source:
        return self.base_

    def function(self):
        raise NotImplementedError

    def _key(self):
        return (self.base_,)

    def name(self) -> str:
        return f"{self.function().__name__}({self.base_.name()})"

    def guard_expr(self, ctx) -> str:
        return f"{ctx.const(self.function())}({ctx.value(self.base_)})"

    def reconstruct(self) -> list[Instr]:
        return [*versions.load_const_callable(self.function()), *self.base_.reconstruct(), *versions.call(1)]


def is_from_local(source: Source) -> bool:
    return isinstance(source.base_root(), LocalSource)


def is_from_global(source: Source) -> bool:
    return isinstance(source.base_root(), (GlobalSource, BuiltinSource))


def is_from_cell(source: Source) -> bool:
    return isinstance(source.base_root(), CellSource)


def is_from_const(source: Source) -> bool:
    return isinstance(source.base_root(), ConstSource)
