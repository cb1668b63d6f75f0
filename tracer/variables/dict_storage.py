"""The dict storage of a dict-subclass object passed into the frame (transformers' ModelOutput,
a user's `class Config(dict)`), as UserObjectVariable reads and writes it.

Reads go to the storage as dict's own C methods see it, never through the subclass's
overrides (which are traced where the code calls them): one item is wrapped and guarded on
its first read, the keys once, in order (DictKeysMatch).

Writes (`dict.__setitem__(obj, k, v)`, `super().__setitem__(k, v)` from a subclass's own
`__setitem__`, `super().__setattr__` beside it) are made on a DictVariable of the whole
storage, which then carries the object's source, so the rewritten code replays it after the
graph like any mutated input container, but at the level the trace wrote it: the storage
base's own `clear` and `__setitem__` (`refill_storage`), never the subclass's methods, which
may refuse (ModelOutput.update raises) or do more (ModelOutput.__setitem__ also sets an
attribute, replayed on its own as a raw `object.__setattr__`).
"""
import collections
import types

from guards.sources import DictItemSource, ItemSource

from ..exc import Unsupported
from .base import ConstantVariable, Variable
from guards import DictKeysMatch

_DICT_READS = frozenset({"get", "__getitem__", "__contains__", "keys", "values", "items", "__len__",
                         "__iter__", "copy"})
_DICT_WRITES = frozenset({"__setitem__", "__delitem__", "pop", "setdefault", "clear", "update"})


def storage_base(value):
    """OrderedDict or dict: the C class whose methods hold a dict subclass's items."""
    return collections.OrderedDict if isinstance(value, collections.OrderedDict) else dict


def refill_storage(base, target, items):
    """The replay of a changed dict-subclass input: its storage set to `items`, through the
    storage base's own methods (emitted by codegen after the graph)."""
    base.clear(target)
    for k, v in items.items():
        base.__setitem__(target, k, v)


class DictStorage:
    """Mixed into UserObjectVariable: the items of a dict-subclass object with a source."""

    def dict_keys(self, tx):
        """The keys of a dict-subclass input (guarded once, in order)."""
        contents = getattr(self, "_contents", None)
        if contents is not None:  # after a write, and reads after it, go to the Variable
            return tuple(contents.items)
        cached = getattr(self, "_keys", None)
        if cached is not None:
            return cached
        d, t = self.value, type(self.value)
        if self.source is None:
            raise Unsupported(f"reading items of a {t.__name__} that has no source")
        if t.keys is not dict.keys and t.keys is not collections.OrderedDict.keys:
            raise Unsupported(f"reading items of a {t.__name__} with its own keys()")
        keys = tuple(d.keys())
        try:
            tx.guard(DictKeysMatch(self.source, keys, t))
        except TypeError:
            raise Unsupported(f"{t.__name__} has keys that cannot be guarded")
        self._keys = keys
        self._items = {}
        return keys

    def dict_item(self, tx, key):
        """One stored item, wrapped (and guarded) on first read. Items are read as the dict
        stores them: a subclass's own __getitem__ is not the storage (transformers'
        ClassInstantier builds an object per lookup), so it must not run in guards."""
        self.dict_keys(tx)
        contents = getattr(self, "_contents", None)
        if contents is not None:
            return contents.items[key]
        hit = self._items.get(key)
        if hit is None:
            t = type(self.value)
            item_source = ItemSource if t.__getitem__ is dict.__getitem__ else DictItemSource
            hit = self._items[key] = builder.wrap(tx, dict.__getitem__(self.value, key), item_source(self.source, key))
        return hit

    def dict_contents(self, tx):
        """The items of a dict-subclass input, as a DictVariable (keys guarded). It is
        read-only until `writable_contents` gives it the object's source."""
        cached = getattr(self, "_contents", None)
        if cached is not None:
            return cached
        keys = self.dict_keys(tx)
        contents = containers.DictVariable({k: self.dict_item(tx, k) for k in keys}, None)
        self._contents = contents
        return contents

    def writable_contents(self, tx, owner, name):
        """The storage as a DictVariable whose writes are replayed (refill_storage)."""
        base = storage_base(self.value)
        if self.source is None:
            raise Unsupported(f"writing items of a {type(self.value).__name__} that cannot be "
                              "reached after the graph")
        if owner is not base:  # dict.__setitem__ on an OrderedDict skips its order links
            raise Unsupported(f"{owner.__name__}.{name} on a {type(self.value).__name__} "
                              f"(stored as {base.__name__})")
        contents = self.dict_contents(tx)
        if contents.source is None:
            contents.source, contents.user_cls, contents.storage_base = self.source, base, base
        return contents

    def _plain_dict(self, slot):
        """Whether the class leaves `slot` (__len__, __iter__) to its storage base."""
        if not isinstance(self.value, dict):
            return False
        own = getattr(type(self.value), slot)
        return own is getattr(dict, slot) or own is getattr(storage_base(self.value), slot)

    def storage_call(self, tx, owner, name, args, kwargs):
        """dict's or OrderedDict's own method `name` applied to this object (reached through
        `super()`, the class, or a subclass that does not override it)."""
        if not isinstance(self.value, owner):
            raise Unsupported(f"{owner.__name__}.{name} on a {type(self.value).__name__} object")
        if name in _DICT_READS:
            if name == "copy" and owner is collections.OrderedDict:
                raise Unsupported("OrderedDict.copy of a subclass (it constructs the subclass)")
            return DictReadMethod(self, name).call(tx, args, kwargs)
        if owner is collections.OrderedDict and name in ODICT_THROUGH_SELF:
            return odict_through_self(tx, self, self.dict_contents(tx), name, args, kwargs)
        if name in _DICT_WRITES:
            contents = self.writable_contents(tx, owner, name)
            if name == "__setitem__" and len(args) == 2 and not kwargs:
                contents.setitem(tx, args[0], args[1])
                return ConstantVariable(None)
            if name == "__delitem__" and len(args) == 1 and not kwargs:
                contents.delitem(tx, args[0])
                return ConstantVariable(None)
            if name in ("pop", "setdefault") and 1 <= len(args) <= 2 and not kwargs or \
                    name == "clear" and not args and not kwargs or name == "update":
                return contents.call_method(tx, name, args, kwargs)
        raise Unsupported(f"{owner.__name__}.{name} on a {type(self.value).__name__} object")


# OrderedDict's methods that CPython runs through the object's own item methods
# (PyObject_SetItem, PySequence_Contains, PyObject_GetItem, PyObject_DelItem) unless the type
# is exactly OrderedDict: on a subclass, its __setitem__ runs for each item they store.
ODICT_THROUGH_SELF = frozenset({"__init__", "update", "setdefault", "pop"})


def odict_through_self(tx, obj, items, name, args, kwargs):
    """OrderedDict.`name` applied to `obj`, an instance of a subclass (a new object or an
    input): writes go through `obj.setitem`/`obj.delitem` (the class's own methods, inlined,
    or the storage), reads of `items` (its storage, a DictVariable) stand for `in` and `[]`,
    which the class must then not override."""
    cls = obj.python_type()
    if name in ("__init__", "update"):
        if len(args) > 1:
            raise Unsupported(f"OrderedDict.{name} with more than one positional argument "
                              "(the user code raises TypeError)")
        pairs = [(containers.key_variable(k), v) for k, v in collections_vars._pairs(tx, args[0])] if args else []
        pairs += [(ConstantVariable(k), v) for k, v in kwargs.items()]
        for k, v in pairs:
            obj.setitem(tx, k, v)
        return ConstantVariable(None)
    for slot in ("__contains__", "__getitem__", "__delitem__"):
        if not is_storage_method(getattr(cls, slot, None)):
            raise Unsupported(f"OrderedDict.{name} on a {cls.__name__} with its own {slot}")
    if kwargs or not 1 <= len(args) <= 2:
        raise Unsupported(f"OrderedDict.{name} with these arguments (the user code raises TypeError)")
    key = containers._const_key(tx, args[0])
    if name == "setdefault":
        if key in items.items:
            return items.items[key]
        default = args[1] if len(args) > 1 else ConstantVariable(None)
        obj.setitem(tx, args[0], default)
        return default
    if key in items.items:  # pop
        value = items.items[key]
        obj.delitem(tx, args[0])
        return value
    if len(args) > 1:
        return args[1]
    raise containers.key_error(key)


def is_storage_method(attr):
    """A C method of dict or OrderedDict (a slot wrapper or method descriptor)."""
    return isinstance(attr, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        getattr(attr, "__objclass__", None) in (dict, collections.OrderedDict)


class DictReadMethod(Variable):
    """A read-only `dict` method (get, [], in, keys, ...) reached on a dict-subclass input,
    e.g. through `super().get(k)`: it reads the object's items, whose keys are guarded."""

    def __init__(self, obj, name):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call(self, tx, args, kwargs):
        name = self.name
        if name in ("__getitem__", "get", "__contains__") and args and args[0].is_constant() and not kwargs:
            # one item: only its value is wrapped (and guarded), not the whole dict's
            key = args[0].as_constant()
            keys = self.obj.dict_keys(tx)
            if name == "__contains__":
                return ConstantVariable(key in keys)
            if key in keys:
                return self.obj.dict_item(tx, key)
            if name == "get":
                return args[1] if len(args) > 1 else ConstantVariable(None)
            missing = objects.special_method(tx, self.obj, "__missing__")  # dict's [] calls it (Counter's 0)
            if missing is not None:
                return missing.call(tx, [args[0]], {})
            raise exceptions.user_error(KeyError, key)
        if name in ("__len__", "keys", "__iter__") and not args and not kwargs:
            keys = [ConstantVariable(k) for k in self.obj.dict_keys(tx)]
            if name == "__len__":
                return ConstantVariable(len(keys))
            return containers.IteratorVariable(keys) if name == "__iter__" else \
                self.obj.dict_contents(tx).call_method(tx, "keys", [], {})
        return self.obj.dict_contents(tx).call_method(tx, name, args, kwargs)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builder, collections_vars, containers, exceptions, objects  # noqa: E402
