"""A dict input keyed by objects (classes, typing forms, functions), read one key at a time;
and a class's `__dict__` (a mappingproxy), read the same way.

Registries keyed by types are common in library code (huggingface_hub's
`_BASIC_TYPE_VALIDATORS = {Union: ..., list: ..., dict: ...}`). A DictVariable needs
constant keys (it models every item, and can be mutated and rebuilt); this one only reads:
`d[k]`, `d.get(k, default)`, `k in d`, `len(d)`, where `k` is a constant or a Variable whose
real object the trace knows. Each read guards what it used: the item's value through its
own source, or the key's absence. `d[k] = v` is kept pending (later reads in the trace see
it) and made by the rewritten code after the graph (`operator.setitem` on the real dict: a
deferred call, in program order). Anything else (iteration, deletion) is Unsupported.
"""
import collections
import operator
import types

from guards import ConstMatch, LengthMatch, Predicate
from guards.sources import AttrSource, ItemSource, KeyedItemSource, KeyedPresenceSource

from ..exc import Unsupported
from .base import ConstantVariable, Variable, python_object
from .tensor import TensorVariable

_MISSING = object()


def _absent(k):
    return lambda d: not dict.__contains__(d, k)


def _present(k):
    return lambda d: dict.__contains__(d, k)


def _absent_in(k):
    return lambda d: k not in d


def _present_in(k):
    return lambda d: k in d


class ObjectKeyedDictVariable(Variable):
    mutable = True
    # (a dict subclass's own __contains__/__getitem__ are not run: the guards read the same way)
    _has = staticmethod(dict.__contains__)
    _get = staticmethod(dict.__getitem__)
    _absent = staticmethod(_absent)
    _present = staticmethod(_present)

    def __init__(self, value, source):
        super().__init__(source)
        self.value = value
        self.pending = {}  # real key -> Variable: stores the rewritten code makes after the graph

    def python_type(self):
        return type(self.value)

    def _real_key(self, tx, key):
        """The key as the trace looks it up: a constant; an object whose identity the guards
        already fix (a class, a function, a module: `_stable`), itself; any other object (a
        user object, an nn.Module, a tensor) read through its own source (`_InputKey`), so
        that a later call looks up the object it is given, not the one traced with."""
        if isinstance(key, TensorVariable):
            return _tensor_key(key)
        if key.is_constant():
            k = key.as_constant()
        else:
            k = python_object(key)
            if not _stable(k):
                if not _identity_hashed(k):
                    raise Unsupported(f"a dict key of type {type(k).__name__} with its own __hash__ or "
                                      f"__eq__ (user code the lookup would run)")
                if key.source is None:
                    raise Unsupported(f"a dict key {type(k).__name__} object that has no source "
                                      f"(made in the frame)")
                return _InputKey(key, k, key.source)
        try:
            hash(k)
        except TypeError:
            raise Unsupported(f"unhashable key {type(k).__name__} (the user code raises TypeError)")
        return k

    def _read(self, tx, key, default=_MISSING):
        k = self._real_key(tx, key)
        if k in self.pending:
            return self.pending[k]
        d = self.value
        if self._guard_presence(tx, k):
            return builder.wrap(tx, self._get(d, k.obj if isinstance(k, _InputKey) else k), self._item_source(k))
        if default is _MISSING and type(d) is collections.defaultdict:
            return self._missing(tx, key)
        if default is _MISSING:
            if isinstance(k, _InputKey):
                raise Unsupported(f"KeyError for the key {k.source.name()} (the user code raises KeyError)")
            raise exceptions.user_error(KeyError, k)
        return default

    def _item_source(self, k):
        return KeyedItemSource(self.source, k.source) if isinstance(k, _InputKey) else ItemSource(self.source, k)

    def _missing(self, tx, key):
        """defaultdict's __missing__: the factory's value, stored under the key."""
        factory = builder.wrap(tx, self.value.default_factory, AttrSource(self.source, "default_factory"))
        if factory.is_constant() and factory.as_constant() is None:
            raise Unsupported("KeyError of a defaultdict without a factory (the user code raises KeyError)")
        value = factory.call(tx, [], {})
        self.setitem(tx, key, value)
        return value

    def getitem(self, tx, key):
        return self._read(tx, key)

    def setitem(self, tx, key, value):
        if self.source is None:
            raise Unsupported("item assignment on a dict keyed by objects that has no source")
        k = self._real_key(tx, key)
        self._guard_presence(tx, k)  # (len() after the store counts on it)
        self.pending[k] = value
        tx.side_effects.defer_call(operator.setitem, [self, key, value], {})

    def _guard_presence(self, tx, k):
        if isinstance(k, _InputKey):
            present = dict.__contains__(self.value, k.obj)
            tx.guard(ConstMatch(KeyedPresenceSource(self.source, k.source), present))
            return present
        present = self._has(self.value, k)
        tx.guard(Predicate.made(self.source, self._present if present else self._absent, (k,),
                                f"{'has' if present else 'has no'} key {k!r}"))
        return present

    def length(self, tx):
        tx.guard(LengthMatch(self.source, len(self.value), type(self.value)))
        return len(self.value) + sum(1 for k in self.pending if not self._guard_presence(tx, k))

    def truthy(self, tx):
        return self.length(tx) != 0

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise Unsupported(f"dict.{name} with keyword arguments")
        if name == "get" and len(args) in (1, 2):
            return self._read(tx, args[0], args[1] if len(args) == 2 else ConstantVariable(None))
        if name == "__getitem__" and len(args) == 1:
            return self._read(tx, args[0])
        if name == "__contains__" and len(args) == 1:
            k = self._real_key(tx, args[0])
            return ConstantVariable(k in self.pending or self._guard_presence(tx, k))
        if name == "setdefault" and len(args) in (1, 2):
            k = self._real_key(tx, args[0])
            if k in self.pending or self._guard_presence(tx, k):
                return self._read(tx, args[0])
            value = args[1] if len(args) == 2 else ConstantVariable(None)
            self.setitem(tx, args[0], value)
            return value
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return ConstantVariable(None)
        if name == "__len__" and not args:
            return ConstantVariable(self.length(tx))
        raise Unsupported(f"dict.{name} on a dict keyed by objects (only reads by key are traced)")

    def reconstruct(self, cg):
        cg.load_source(self.source)

    def __repr__(self):
        return f"ObjectKeyedDict({len(self.value)} items)"




_STABLE_TYPES = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                 types.WrapperDescriptorType, types.ModuleType)


def _stable(obj):
    """Whether the trace may hold `obj` itself as the key: an object whose identity the guard
    that produced it fixes (a class, function or module reached through a source is guarded
    by identity; one without a source came from such a guarded value) and whose hash runs no
    user code. typing's forms hash their arguments."""
    if isinstance(obj, tuple):
        return all(_stable(o) for o in obj)
    return isinstance(obj, _STABLE_TYPES) and type(obj).__hash__ is object.__hash__ or \
        type(obj).__module__ in ("typing", "typing_extensions")


def _identity_hashed(obj):
    """Whether `obj`'s == is identity and its hash object's or a plain Enum member's: a lookup
    runs no user code (identity_keys.py)."""
    return identity_keys.keyed_by_identity(type(obj))


class _InputKey:
    """A key that is an input (an argument, a module's parameter, a user object): the real object
    stands for it within the trace (pending stores are found by it), its source for it in the
    guards and the rewritten code (KeyedItemSource), so no object is held by the entry."""

    def __init__(self, var, obj, source):
        self.var, self.obj, self.source = var, obj, source

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _InputKey) and other.obj is self.obj

    def __repr__(self):
        return self.source.name()


def _tensor_key(var):
    source = var.source if var.source is not None else var.real_source
    if var.real is None or source is None:
        raise Unsupported(f"a tensor made in the frame ({var}) as a key of a dict input keyed by objects")
    return _InputKey(var, var.real, source)


class MappingProxyVariable(ObjectKeyedDictVariable):
    """`C.__dict__` of a class with a source: the class's own namespace, without its bases
    (`"f" in C.__dict__`, `C.__dict__["k"]`, `.get`, `len`), each read guarded through the
    proxy's source as for a dict input. A mappingproxy cannot be written: item assignment
    raises TypeError, as in eager."""

    mutable = False
    _has = staticmethod(operator.contains)
    _get = staticmethod(operator.getitem)
    _absent = staticmethod(_absent_in)
    _present = staticmethod(_present_in)

    def setitem(self, tx, key, value):
        raise exceptions.user_error(TypeError, "'mappingproxy' object does not support item assignment")

    def _real_key(self, tx, key):
        if isinstance(key, TensorVariable):
            raise Unsupported("a tensor looked up in a class's __dict__")
        return super()._real_key(tx, key)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builder, exceptions, identity_keys  # noqa: E402
