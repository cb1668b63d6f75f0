"""Guard kinds: one fact the trace relied on, checkable on the next call.

Why: rule 2 -- every Python value the trace specialised on is guarded.  Each guard knows
the sources it reads (``sources()``), how to say itself in plain words (``describe()``)
and how to spell itself as conditions over generated identifiers (``conditions(ctx)``).
``rank`` orders cheap, likely-to-fail guards first (0: type/id, 1: tensor, 2: the rest).

Guards compare equal by a canonical key, so the builder can deduplicate them without
merging facts that only look equal (``x == 1`` vs ``x == True`` vs ``x == 1.0``).

Torch internals read here: GlobalStateMatch's torch._C state readers, torch._C._functorch's
interpreter stack and torch._dynamo.eval_frame._stance; checked on torch 2.13.0, 2.14.1 and
2.15.0 (docs/torch.md lists them all; tests/test_torch_internals.py resolves each).
"""

from __future__ import annotations

import collections
import dataclasses
import copy
import functools
import math
import sys
import types
import weakref
from typing import Any, Callable

import torch

from .sources import DERIVED_ATTRS, Source, cached_hash, const_key
from .codegen import ExprContext


class Guard:
    """Base class; concrete guards are frozen dataclasses with ``eq=False``."""

    rank = 2

    def sources(self) -> tuple[Source, ...]:
        return (self.source,)  # type: ignore[attr-defined]

    def conditions(self, ctx) -> list[str]:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def _key(self) -> tuple:
        raise NotImplementedError

    def depth(self) -> int:
        return max((s.depth() for s in self.sources()), default=0)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return type(self) is type(other) and hash(self) == hash(other) and \
            self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        # computed once, as a Source's: a model's guard set hashes thousands of guards while
        # deduplicating. A copy made with other fields drops it (uncached()).
        try:
            return self._hash
        except AttributeError:
            return cached_hash(self)

    def uncached(self):
        """A shallow copy without what is derived from its fields (sources.DERIVED_ATTRS), to be
        given other field values."""
        twin = copy.copy(self)
        for k in DERIVED_ATTRS:
            twin.__dict__.pop(k, None)
        return twin

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.describe()}>"


def _tname(t: type) -> str:
    mod = getattr(t, "__module__", "")
    qn = getattr(t, "__qualname__", getattr(t, "__name__", "?"))
    return qn if mod in ("builtins", None, "") else f"{mod}.{qn}"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TypeMatch(Guard):
    """``type(v) is T`` (exact type; the type object is held strongly)."""

    source: Source
    type: type
    rank = 0

    def _key(self):
        return (self.source, id(self.type))

    def conditions(self, ctx):
        return [f"type({ctx.value(self.source)}) is {ctx.const(self.type)}"]

    def describe(self):
        return f"type({self.source.name()}) is {_tname(self.type)}"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class IdMatch(Guard):
    """``v is obj``.  Weak-referenceable objects are held by weakref (a dead object fails)."""

    source: Source
    obj_id: int
    type_name: str
    _ref: Any = dataclasses.field(compare=False)
    rank = 0

    def __init__(self, source: Source, obj: Any) -> None:
        try:
            ref = ("weak", weakref.ref(obj))
        except TypeError:
            ref = ("strong", obj)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "obj_id", id(obj))
        object.__setattr__(self, "type_name", _tname(type(obj)))
        object.__setattr__(self, "_ref", ref)

    def _key(self):
        return (self.source, self.obj_id)

    def expired(self) -> bool:
        kind, r = self._ref
        return kind == "weak" and r() is None

    def conditions(self, ctx):
        kind, r = self._ref
        v = ctx.value(self.source)
        if kind == "weak":
            return [f"{v} is {ctx.const(r)}() is not None"]
        return [f"{v} is {ctx.const(r)}"]

    def describe(self):
        kind, r = self._ref
        if kind == "strong" and (r is None or type(r) in (bool, type(Ellipsis))):
            return f"{self.source.name()} is {r!r}"
        return f"{self.source.name()} is the {self.type_name} object at 0x{self.obj_id:x}"


_SIMPLE_LEAVES = (int, str, bytes, bool, type(None))


def _is_plain_float(v: Any) -> bool:
    return type(v) is float and v == v and v != 0.0


def _const_cond(ctx, e: str, value: Any) -> str:
    """Condition that ``e`` is a constant indistinguishable from ``value``."""
    t = type(value)
    if value is None or value is Ellipsis or value is NotImplemented or t is bool:
        return f"{e} is {ctx.const(value)}"
    if t is torch.dtype:
        return f"{e} is {ctx.const(value)}"
    if t in (int, str, bytes, torch.device, torch.Size):
        return f"type({e}) is {ctx.const(t)} and {e} == {ctx.const(value)}"
    if t is float:
        base = f"type({e}) is {ctx.const(float)}"
        if value == value and value != 0.0:
            return f"{base} and {e} == {ctx.const(value)}"
        sign = (f"{ctx.const(math.copysign)}({ctx.const(1.0)}, {e})"
                f" == {ctx.const(math.copysign(1.0, value))}")
        if value != value:  # nan: only test is v != v; keep the sign bit too
            return f"{base} and {e} != {e} and {sign}"
        return f"{base} and {e} == {ctx.const(value)} and {sign}"  # 0.0 vs -0.0
    if t is complex:
        if _is_plain_float(value.real) and _is_plain_float(value.imag):
            return f"type({e}) is {ctx.const(complex)} and {e} == {ctx.const(value)}"
        # a zero or nan part: each part as a float (0.0 and -0.0 differ, nan matches nan)
        parts = [_const_cond(ctx, f"getattr({e}, {ctx.const(attr)})", getattr(value, attr))
                 for attr in ("real", "imag")]
        return f"type({e}) is {ctx.const(complex)} and ({parts[0]}) and ({parts[1]})"
    if t is slice:
        parts = [f"type({e}) is {ctx.const(slice)}"]
        for attr in ("start", "stop", "step"):
            parts.append(_const_cond(ctx, f"getattr({e}, {ctx.const(attr)})", getattr(value, attr)))
        return " and ".join(f"({p})" for p in parts)
    if t is tuple:
        if all(type(x) in _SIMPLE_LEAVES or _is_plain_float(x) or type(x) is torch.dtype
               for x in value):
            # element types first, compared by id so no user __eq__ (or metaclass
            # __eq__) can run; then the values, now known to be builtin scalars
            type_ids = tuple(id(type(x)) for x in value)
            ctx.const(tuple(type(x) for x in value))  # keeps the types (and ids) alive
            return (f"type({e}) is {ctx.const(tuple)} and len({e}) == {len(value)}"
                    f" and tuple(map(id, map(type, {e}))) == {ctx.const(type_ids)}"
                    f" and {e} == {ctx.const(value)}")
        parts = [f"type({e}) is {ctx.const(tuple)}", f"len({e}) == {len(value)}"]
        for i, x in enumerate(value):
            parts.append(_const_cond(ctx, f"{e}[{i}]", x))
        return " and ".join(f"({p})" for p in parts)
    raise TypeError(f"ConstMatch: unsupported constant type {_tname(t)}")


def exact_equal(a: Any, b: Any) -> bool:
    """Whether two constants are indistinguishable to the code that reads them: the same types
    all the way down, items in the same iteration order (two equal sets may iterate
    differently), 0.0 and -0.0 apart, nan equal to nan. For the constants ConstMatch cannot
    write as a condition (frozensets, sets, tuples holding them)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, frozenset, set)):
        return len(a) == len(b) and all(exact_equal(x, y) for x, y in zip(a, b))
    if type(a) is float:
        return (a != a and b != b) or (a == b and math.copysign(1.0, a) == math.copysign(1.0, b))
    if type(a) is complex:
        return exact_equal(a.real, b.real) and exact_equal(a.imag, b.imag)
    return a == b


def check_const_supported(value: Any) -> bool:
    """True if ConstMatch can guard ``value`` exactly."""

    try:
        _const_cond(ExprContext(), "L", value)
        return True
    except TypeError:
        return False


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ConstMatch(Guard):
    """Value equals a constant, with exact types (1, True, 1.0 differ; so do 0.0 and -0.0).

    Supports int, float (nan included), complex, str, bytes, bool, None, Ellipsis, slice,
    torch.dtype, torch.device, torch.Size and tuples of those; anything else is TypeError.
    """

    source: Source
    value: Any
    rank = 2

    def __post_init__(self):
        if not check_const_supported(self.value):
            raise TypeError(f"ConstMatch: unsupported constant {type(self.value).__name__}")

    def _key(self):
        return (self.source, const_key(self.value))

    def conditions(self, ctx):
        return [_const_cond(ctx, ctx.value(self.source), self.value)]

    def describe(self):
        r = repr(self.value)
        if len(r) > 80:
            r = r[:77] + "..."
        return f"{self.source.name()} == {r} ({type(self.value).__name__})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LengthMatch(Guard):
    """``type(v) is T and len(v) == n``."""

    source: Source
    length: int
    type: type

    def _key(self):
        return (self.source, int(self.length), id(self.type))

    def conditions(self, ctx):
        v = ctx.value(self.source)
        return [f"type({v}) is {ctx.const(self.type)} and len({v}) == {int(self.length)}"]

    def describe(self):
        return f"len({self.source.name()}) == {int(self.length)} ({_tname(self.type)})"


# torch's descriptor types: C types whose == compares their fields (a dtype, layout or memory
# format is a singleton; a device is its type and index), never user code, and each hashes
# consistently with its ==: safe dict keys, as a model's `{torch.float16: ...}` tables use them.
_TORCH_KEY_TYPES = (torch.dtype, torch.device, torch.layout, torch.memory_format)


def _safe_key(k: Any) -> bool:
    t = type(k)  # no tuples: (1,) == (True,) would pass the key-type check
    if t is float:
        return k != 0.0
    # (a torch.Size holds exact ints whatever it was made from: torch.Size([True]) is [1])
    return t in _SIMPLE_LEAVES or t is type or t in _TORCH_KEY_TYPES or t is torch.Size


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DictKeysMatch(Guard):
    """Exact type, then the same keys in the same order with the same key types.

    Keys must be str/int/bool/bytes/None/non-zero float, type objects or torch dtypes, devices,
    layouts, memory formats and sizes (exact types), so comparing them never runs user ``__eq__``;
    otherwise TypeError.
    """

    source: Source
    keys: tuple
    type: type = dict

    def __post_init__(self):
        object.__setattr__(self, "keys", tuple(self.keys))
        if not all(_safe_key(k) for k in self.keys):
            raise TypeError("DictKeysMatch: key types must be plain constants or types")

    def _key(self):
        return (self.source, const_key(self.keys), id(self.type))

    def conditions(self, ctx):
        v = ctx.value(self.source)
        # key types first (by id: no user __eq__ can run), then the keys themselves
        ctx.const(tuple(type(k) for k in self.keys))  # keeps the types (and ids) alive
        kt_ids = tuple(id(type(k)) for k in self.keys)
        if self.type is dict:
            n, keys = f"len({v})", v
        else:  # a subclass: its storage, never its own __len__/__iter__ (user code in a guard)
            base = collections.OrderedDict if issubclass(self.type, collections.OrderedDict) else dict
            n, keys = f"{ctx.const(base.__len__)}({v})", f"{ctx.const(base.keys)}({v})"
        return [f"type({v}) is {ctx.const(self.type)} and {n} == {len(self.keys)}",
                f"tuple(map(id, map(type, {keys}))) == {ctx.const(kt_ids)}"
                f" and tuple({keys}) == {ctx.const(self.keys)}"]

    def describe(self):
        return f"{self.source.name()} is a {_tname(self.type)} with keys {list(self.keys)!r}"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SameObject(Guard):
    """``a is b``: two sources were the same object at trace time."""

    source_a: Source
    source_b: Source

    def sources(self):
        return (self.source_a, self.source_b)

    def _key(self):
        return (self.source_a, self.source_b)

    def conditions(self, ctx):
        return [f"{ctx.value(self.source_a)} is {ctx.value(self.source_b)}"]

    def describe(self):
        return f"{self.source_a.name()} is {self.source_b.name()}"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NoAliasing(Guard):
    """The given sources are pairwise distinct objects (``len({id(a), ...}) == n``)."""

    sources_: tuple

    def __init__(self, sources) -> None:
        object.__setattr__(self, "sources_", tuple(sources))

    def sources(self):
        return self.sources_

    def _key(self):
        return (frozenset(self.sources_),)

    def conditions(self, ctx):
        ids = ", ".join(f"id({ctx.value(s)})" for s in self.sources_)
        return [f"len({{{ids}}}) == {len(self.sources_)}"]

    def describe(self):
        return ", ".join(s.name() for s in self.sources_) + " are distinct objects"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Predicate(Guard):
    """Escape hatch: ``fn(v)`` is true.  ``fn`` is bound as a constant (held strongly).

    ``kind`` (set only by the constructors below, which build ``fn`` from ``arg`` themselves)
    says what ``fn`` reads, so the C check (fastpath.py) can tell when its answer cannot have
    changed and equal predicates deduplicate; a Predicate without a kind is re-run every call.
    ``maker`` (``Predicate.made``): a module-level function with ``fn == maker(*arg)``, so
    that another process can make ``fn`` again (the disk cache, tracer/persist/).
    """

    source: Source
    fn: Callable[[Any], bool]
    description: str
    kind: str | None = None
    arg: tuple = ()
    maker: Callable[..., Callable[[Any], bool]] | None = None

    def _key(self):
        if self.kind is not None:
            return (self.source, self.kind, const_key(self.arg))
        if self.maker is not None:  # the same maker and arguments make the same check
            return (self.source, "made", id(self.maker), const_key(self.arg))
        return (self.source, id(self.fn), self.description)

    def conditions(self, ctx):
        return [f"{ctx.const(self.fn)}({ctx.value(self.source)})"]

    def describe(self):
        return f"{self.source.name()}: {self.description}"

    @classmethod
    def made(cls, source: Source, maker, arg: tuple, description: str) -> "Predicate":
        """``maker(*arg)(v)`` is true: a check without a kind of its own (re-run every call)
        that another process can rebuild from its maker's name and plain arguments."""
        return cls(source, maker(*arg), description, None, tuple(arg), maker)

    @classmethod
    def key_absent(cls, source: Source, key: Any, description: str) -> "Predicate":
        """``key not in v`` (v a dict: a globals dict, an instance __dict__)."""
        return cls(source, lambda d, _k=key: _k not in d, description, "key_absent", (key,))

    @classmethod
    def attrs_are(cls, source: Source, attrs: dict, description: str) -> "Predicate":
        """``v.__dict__`` maps each name to a value of exactly this type, equal to it."""
        expected = tuple((k, type(v), v) for k, v in attrs.items())

        def check(obj):
            d = obj.__dict__
            for k, t, v in expected:
                got = d.get(k, _MISSING)
                if type(got) is not t or got != v:
                    return False
            return True
        kind = "attrs" if all(_immutable(v) for v in attrs.values()) else None
        return cls(source, check, description, kind, expected)

    @classmethod
    def falsy_attrs(cls, source: Source, names, description: str) -> "Predicate":
        """No entry of ``v.__dict__`` named in ``names`` is truthy (absent counts as falsy):
        e.g. a module's four hook dicts are empty."""
        names = tuple(names)

        def check(obj):
            d = obj.__dict__
            return not any(d.get(n) for n in names)
        return cls(source, check, description, "falsy", names)

    @classmethod
    def lacks_attr(cls, source: Source, name: str, description: str) -> "Predicate":
        """``not hasattr(v, name)``."""
        return cls(source, lambda obj, _n=name: not hasattr(obj, _n), description, "lacks", (name,))

    @classmethod
    def same_function(cls, source: Source, code, f_globals: dict, description: str) -> "Predicate":
        """``v`` is a plain function with this code object and these globals (compared by id:
        the module keeps its globals alive; the guard does not)."""
        return cls(source, _function_check(code, id(f_globals)), description, "same_function",
                   (code, id(f_globals)))

    @classmethod
    def class_entry(cls, source: Source, name: str, entry: Any, description: str) -> "Predicate":
        """``v`` is a class whose MRO holds exactly ``entry`` under ``name`` (the raw entry, as
        `_PyType_Lookup` finds it: no descriptor's ``__get__`` runs, so user code never does).
        The entry is held strongly, as a class holds it."""
        return cls(source, lambda k, _n=name, _e=entry: _mro_entry(k, _n) is _e, description,
                   "class_entry", (name, entry))

    @classmethod
    def class_lacks(cls, source: Source, name: str, description: str) -> "Predicate":
        """``v`` is a class whose MRO holds nothing under ``name`` (class_entry of absence)."""
        return cls.class_entry(source, name, _MISSING, description)

    @classmethod
    def lacks_generic_attr(cls, source: Source, name: str, description: str) -> "Predicate":
        """``object.__getattribute__(v, name)`` raises AttributeError: what a class's own
        ``__getattribute__`` (inlined while tracing, its other reads guarded on their own) found
        when it deferred to ``super().__getattribute__``.  Unlike ``hasattr`` this never runs the
        class's Python ``__getattribute__``, so the C check can prove it from the type and the
        instance dict alone (a config object's 13 absent options cost 2 us each as hasattr)."""
        return cls(source, lambda obj, _n=name: _generic_lacks(obj, _n), description,
                   "lacks_generic", (name,))


def _function_check(code, f_globals_id):
    return lambda fn: (type(fn) is types.FunctionType and fn.__code__ is code
                       and id(fn.__globals__) == f_globals_id)


def _mro_entry(k: Any, name: str) -> Any:
    for klass in getattr(k, "__mro__", ()):
        d = klass.__dict__
        if name in d:
            return d[name]
    return _MISSING


def _generic_lacks(obj: Any, name: str) -> bool:
    try:
        object.__getattribute__(obj, name)
    except AttributeError:
        return True
    return False


_MISSING = object()


def _immutable(v: Any) -> bool:
    t = type(v)
    if t in (int, float, complex, str, bytes, bool, type(None), torch.dtype, torch.device,
             torch.layout, torch.memory_format):
        return True
    return t in (tuple, frozenset, torch.Size) and all(_immutable(x) for x in v)


# the devices whose autocast state GlobalStateMatch compares (a folded query of another
# device's autocast state is guarded on its own: tracer/trace/frame.py)
AUTOCAST_DEVICES = ("cpu", "cuda")


def _autocast_state() -> tuple:
    out = []
    for dev in AUTOCAST_DEVICES:
        out.append((dev, torch.is_autocast_enabled(dev), torch.get_autocast_dtype(dev)))
    return tuple(out)


def _function_modes() -> tuple:
    """The torch-function mode stack, innermost last: each mode's type, and the device of a
    default-device context (`torch.set_default_device` pushes one; factory calls read it)."""
    return tuple((type(m), str(getattr(m, "device", None)))
                 for m in (torch._C._get_function_stack_at(i)
                           for i in range(torch._C._len_torch_function_stack())))


def _functorch_levels() -> tuple:
    """The functorch transforms the call runs under (vmap, grad, ...), outermost first."""
    stack = torch._C._functorch.get_interpreter_stack() or ()
    return tuple((str(i.key()), i.level()) for i in stack)


# What not_forced_eager reads: (module, attribute chain, the value that forces eager). The C
# check reads the same without calling it (guards/fastpath.py, O_MODULE_NE).
STANCE_READ = ("torch._dynamo.eval_frame", ("_stance", "stance"), "force_eager")


def not_forced_eager() -> bool:
    """False while torch.compiler.set_stance("force_eager") is in effect: no compiled entry
    may run then (the caller runs the function as Python). torch._dynamo is only looked up,
    never imported: a program that never imported it cannot have set a stance."""
    module, chain, forced = STANCE_READ
    m = sys.modules.get(module)
    return m is None or functools.reduce(getattr, chain, m) != forced


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GlobalStateMatch(Guard):
    """Torch global state captured at creation: grad mode, inference mode, default dtype,
    deterministic algorithms, autocast (cpu and cuda: enabled flag and dtype), the
    torch-function mode stack (which holds the default device), whether torch functions
    dispatch to __torch_function__ at all, and the functorch transform levels (vmap/grad).
    The common case (no modes, no transforms) costs one C call per fact."""

    grad_enabled: bool = dataclasses.field(default_factory=torch.is_grad_enabled)
    inference_mode: bool = dataclasses.field(default_factory=torch.is_inference_mode_enabled)
    default_dtype: torch.dtype = dataclasses.field(default_factory=torch.get_default_dtype)
    deterministic: bool = dataclasses.field(
        default_factory=torch.are_deterministic_algorithms_enabled)
    deterministic_warn_only: bool = dataclasses.field(
        default_factory=torch.is_deterministic_algorithms_warn_only_enabled)
    any_autocast: bool = dataclasses.field(default_factory=torch._C._is_any_autocast_enabled)
    autocast: tuple = dataclasses.field(default_factory=_autocast_state)
    function_modes: tuple = dataclasses.field(default_factory=_function_modes)
    torch_function: bool = dataclasses.field(default_factory=torch._C._is_torch_function_enabled)
    functorch: tuple = dataclasses.field(default_factory=_functorch_levels)
    rank = 2

    def sources(self):
        return ()

    def _key(self):
        return (self.grad_enabled, self.inference_mode, self.default_dtype, self.deterministic,
                self.deterministic_warn_only, self.any_autocast, self.autocast,
                tuple((id(t), d) for t, d in self.function_modes), self.torch_function, self.functorch)

    def calls(self) -> list[tuple[Callable[[], Any], Any]]:
        """(fn, expected): the state holds iff ``fn() is expected`` for each (the C check
        calls the same functions), and, when ``needs_equality()``, the == comparisons of
        ``conditions`` hold too (the C check then runs this guard's Python condition)."""
        out = [
            (torch.is_grad_enabled, bool(self.grad_enabled)),
            (torch.is_inference_mode_enabled, bool(self.inference_mode)),
            (torch.get_default_dtype, self.default_dtype),
            (torch._C._get_deterministic_algorithms, bool(self.deterministic)),
            (torch._C._get_deterministic_algorithms_warn_only, bool(self.deterministic_warn_only)),
            (torch._C._is_torch_function_enabled, bool(self.torch_function)),
            (not_forced_eager, True),
        ]
        # on or off: while on, the == comparison below covers cpu and cuda only, and a trace
        # may have folded the answer of _is_any_autocast_enabled() itself
        out.append((torch._C._is_any_autocast_enabled, bool(self.any_autocast)))
        if not self.function_modes:
            out.append((torch._C._len_torch_function_stack, 0))  # (small ints are unique objects)
        if not self.functorch:
            out.append((torch._C._functorch.peek_interpreter_stack, None))
        return out

    def needs_equality(self) -> bool:
        """Whether some fact is a tuple compared with == (autocast on, modes, transforms)."""
        return bool(self.any_autocast or self.function_modes or self.functorch)

    def conditions(self, ctx):
        k = ctx.const
        conds = [f"{k(fn)}() is {k(expected)}" for fn, expected in self.calls()]
        if self.any_autocast:
            conds.append(f"{k(_autocast_state)}() == {k(self.autocast)}")
        if self.function_modes:
            conds.append(f"{k(_function_modes)}() == {k(self.function_modes)}")
        if self.functorch:
            conds.append(f"{k(_functorch_levels)}() == {k(self.functorch)}")
        return conds

    def describe(self):
        ac = ", ".join(f"{d}:{'on ' + str(dt).replace('torch.', '') if en else 'off'}"
                       for d, en, dt in self.autocast)
        extra = ""
        if self.function_modes:
            extra += " function_modes(" + ", ".join(
                f"{t.__name__}{'' if d == 'None' else ' ' + d}" for t, d in self.function_modes) + ")"
        if not self.torch_function:
            extra += " torch_function=off"
        if self.functorch:
            extra += " functorch(" + ", ".join(f"{k} level {lv}" for k, lv in self.functorch) + ")"
        return (f"global state: grad_enabled={self.grad_enabled} "
                f"inference_mode={self.inference_mode} "
                f"default_dtype={str(self.default_dtype).replace('torch.', '')} "
                f"deterministic={self.deterministic} autocast({ac}){extra}")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class QueryMatch(Guard):
    """``fn(*args, **kwargs)`` still returns ``value`` (same type): a query of global state
    the trace folded to a constant (`torch.autograd._profiler_enabled()`,
    `torch.cuda.is_available()`, ...). The call is made on every check, so it is kept for
    queries no cheaper guard (GlobalStateMatch) covers."""

    fn: Callable[..., Any]
    args: tuple
    kwargs: tuple
    value: Any
    rank = 2

    def sources(self):
        return ()

    def _key(self):
        return (id(self.fn), const_key(self.args), const_key(self.kwargs), const_key(self.value))

    def conditions(self, ctx):
        return [f"{ctx.const(_same_result)}({ctx.const(self.fn)}, {ctx.const(self.args)}, "
                f"{ctx.const(self.kwargs)}, {ctx.const(self.value)})"]

    def describe(self):
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", repr(self.fn))
        if name.startswith("pybind11_"):  # a pybind11 function's qualname names pybind's record type
            name = getattr(self.fn, "__name__", name)
        mod = getattr(self.fn, "__module__", None)
        call = ", ".join([repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs])
        return f"{mod + '.' if mod else ''}{name}({call}) == {self.value!r}"


def _same_result(fn, args, kwargs, value):
    got = fn(*args, **dict(kwargs))
    return type(got) is type(value) and got == value
