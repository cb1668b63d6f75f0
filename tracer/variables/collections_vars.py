"""collections.deque, collections.defaultdict and collections.OrderedDict, made in the frame or
passed in, and the constructors of the containers torch.compile programs build.

A deque is a list with two open ends (a ListVariable whose rebuild is `deque(items, maxlen)`
and whose replay is `clear(); extend(items)`, keeping identity). A defaultdict is a dict that
calls its factory for a missing key on `d[k]` (the factory is inlined like any call, and the
new item is a mutation like any other). An OrderedDict is a DictVariable with
`user_cls=OrderedDict`, plus move_to_end/popitem(last=).
"""
import collections
import types

from ..exc import Unsupported
from .base import ConstantVariable, Variable
from .containers import DictVariable, ListVariable


class DequeVariable(ListVariable):
    kind = collections.deque
    moves = {**ListVariable.moves, "appendleft": 0, "popleft": 1, "rotate": 1}

    def __init__(self, items, source=None, maxlen=None):
        super().__init__(items, source)
        self.maxlen = maxlen
        self._trim(left=False)

    def python_type(self):
        return collections.deque

    def _trim(self, left):
        """A bounded deque drops from the other end, as CPython's does."""
        if self.maxlen is not None:
            while len(self.items) > self.maxlen:
                self.items.pop(0 if not left else -1)

    def real_op(self, op, what):
        """`op` on a real deque of the Variables, whose own rules hold (its maxlen, no slices,
        an index checked as deque checks it) and whose messages the user's exception carries;
        what it holds after is kept."""
        real = collections.deque(self.items, self.maxlen)
        out = exceptions.user_errors(lambda: op(real), what)
        self.items[:] = real
        return out

    def copied(self, items):
        return DequeVariable(list(items), maxlen=self.maxlen)

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            raise Unsupported(f"deque.{name} with keyword arguments")
        if name in ("extend", "extendleft"):
            container_args.check_arity(f"deque.{name}()", args, kwargs, 1, 1)
            self._mutate(tx)
            for item in containers.pulled(tx, args[0]):
                self.items.insert(len(self.items) if name == "extend" else 0, item)
                self._trim(left=name == "extendleft")
        elif name == "sort":
            raise Unsupported(f"deque.{name}")
        else:
            return super().call_method(tx, name, args, kwargs)
        return ConstantVariable(None)

    def getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return containers.method_of(self, name)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        cg.call_with(collections.deque, [containers.TupleVariable(self.items), ConstantVariable(self.maxlen)])

    def __repr__(self):
        return f"dequeVar({self.items!r})"


class DefaultDictVariable(DictVariable):
    """collections.defaultdict: `d[k]` for a missing k stores and returns factory()."""

    def __init__(self, items, factory, source=None):
        super().__init__(items, source, user_cls=collections.defaultdict)
        self.factory = factory  # a callable Variable, or Constant(None)

    def getitem(self, tx, key):
        k = containers._const_key(tx, key)
        if k in self.keys:
            return self.value_of(k)
        if self.factory.is_constant() and self.factory.as_constant() is None:
            raise containers.key_error(k)
        value = self.factory.call(tx, [], {})
        self.setitem(tx, key, value)
        return value

    def getattr(self, tx, name):
        if name == "default_factory":
            return self.factory
        return containers.method_of(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "copy":
            return DefaultDictVariable(self.items, self.factory)
        if name == "__missing__":
            return self.getitem(tx, args[0])
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        cg.call_with(collections.defaultdict, [self.factory, DictVariable(self.items)])


def move_to_end(tx, d, args, kwargs):
    """OrderedDict.move_to_end(key, last=True)."""
    last = kwargs.get("last", args[1] if len(args) > 1 else ConstantVariable(True)).as_constant()
    k = containers._const_key(tx, args[0])
    if k not in d.keys:
        raise containers.key_error(k)
    tx.side_effects.mutated(d)
    value = d.stored.pop(k)  # (moved unread: the value at k, wherever k goes)
    if last:
        d.stored[k] = value
    else:
        d.items = {k: value, **d.stored}
    return ConstantVariable(None)


def popitem(tx, d, args, kwargs):
    """dict.popitem() (LIFO); OrderedDict.popitem(last=True)."""
    last = True
    if d.user_cls is collections.OrderedDict:
        last = kwargs.get("last", args[0] if args else ConstantVariable(True)).as_constant()
    elif args or kwargs:
        raise Unsupported("dict.popitem() takes no arguments (the user code raises TypeError)")
    if not d.keys:
        raise exceptions.user_error(KeyError, "dictionary is empty" if d.user_cls is collections.OrderedDict
                         else "popitem(): dictionary is empty")
    tx.side_effects.mutated(d)
    k = next(reversed(d.keys)) if last else next(iter(d.keys))
    value = d.value_of(k)
    del d.stored[k]
    return containers.TupleVariable([containers.key_variable(k), value])


# ---- constructors ------------------------------------------------------------------------------
def _pairs(tx, src):
    """Items of a dict or of an iterable of pairs, as (constant key, Variable). Another
    mapping (a dict subclass, an object with keys()) is read by CPython through its own
    keys() and []: refused (its keys were once unpacked as pairs)."""
    if isinstance(src, DictVariable):
        return list(src.items.items())
    try:
        mapping = hasattr(src.python_type(), "keys")
    except Unsupported:
        mapping = True
    if mapping:
        if not _reads_by_keys(src):
            raise Unsupported(f"dict items from {src} (read through its own keys())")
        # what PyDict_Merge does with a mapping that is not a dict: keys(), then [key]
        keys = src.getattr(tx, "keys").call(tx, [], {})
        return [(containers._const_key(tx, k), src.getitem(tx, k)) for k in keys.iterate(tx)]
    out = []
    for pair in src.iterate(tx):
        kv = pair.iterate(tx)
        if len(kv) != 2:
            raise exceptions.user_error(ValueError, f"dictionary update sequence element has length {len(kv)}; 2 is required")
        out.append((containers._const_key(tx, kv[0]), kv[1]))
    return out


def mapping_as_dict(tx, src):
    """`{**src}` / `f(**src)` of an object of a user mapping class: its keys() and [] read
    as CPython's dict merge reads them, as a new DictVariable; None for anything else."""
    if not _reads_by_keys(src):
        return None
    pairs = _pairs(tx, src)
    if len({k for k, _ in pairs}) != len(pairs):  # f(**m) raises on a repeated key, {**m} does not
        raise Unsupported("a mapping whose keys() repeats a key, unpacked (the user code may raise TypeError)")
    return DictVariable(dict(pairs))


def _reads_by_keys(src):
    """A mapping CPython reads through its own keys() and [] (an object of a user class that
    is not a dict: a dict subclass is read from its storage, whatever it overrides)."""
    try:
        cls = src.python_type()
    except Unsupported:
        return False
    return isinstance(cls, type) and not issubclass(cls, dict) and new_objects.is_user_class(cls) and \
        isinstance(src, (objects.UserObjectVariable, new_objects.NewObjectVariable))


def make_dict(tx, cls, args, kwargs):
    """dict(...) / OrderedDict(...): a new DictVariable of that class."""
    if len(args) > 1:
        raise Unsupported(f"{cls.__name__}() with more than one positional argument (the user code raises TypeError)")
    items = dict(_pairs(tx, args[0])) if args else {}
    items.update(kwargs)
    return DictVariable(items, user_cls=cls)


class FromKeysVariable(Variable):
    """`dict.fromkeys` / `OrderedDict.fromkeys` / `defaultdict.fromkeys` (a classmethod of a C class: the bound method
    is a new object at each read, so it is modelled by the class it belongs to)."""

    def __init__(self, cls):
        super().__init__(None)
        self.cls = cls

    def python_type(self):
        return types.BuiltinMethodType

    def call(self, tx, args, kwargs):
        """Every key bound to the one value (the same object under each key), as CPython does."""
        if set(kwargs) - {"value"} or not 1 <= len(args) + len(kwargs) <= 2 or (len(args) == 2 and kwargs) \
                or not args:
            raise Unsupported(f"{self.cls.__name__}.fromkeys() takes an iterable and a value")
        value = args[1] if len(args) == 2 else kwargs.get("value", ConstantVariable(None))
        keys = [containers._const_key(tx, k) for k in args[0].iterate(tx)]
        if self.cls is collections.defaultdict:  # (its factory None: a missing key raises)
            return DefaultDictVariable({k: value for k in keys}, ConstantVariable(None))
        return DictVariable({k: value for k in keys}, user_cls=self.cls)

    def reconstruct(self, cg):
        cg.load_const(self.cls)
        cg.load_attr("fromkeys")

    def __repr__(self):
        return f"{self.cls.__name__}.fromkeys"


FROMKEYS_CLASSES = (dict, collections.OrderedDict, collections.defaultdict)


def make_defaultdict(tx, args, kwargs):
    factory = args[0] if args else ConstantVariable(None)
    rest = make_dict(tx, dict, list(args[1:]), kwargs)
    return DefaultDictVariable(rest.items, factory)


def make_deque(tx, args, kwargs):
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen = args[1] if len(args) > 1 else kwargs.get("maxlen", ConstantVariable(None))
    return DequeVariable(iterable.iterate(tx) if iterable is not None else [], maxlen=maxlen.as_constant())


def make_method(tx, args, kwargs):
    """types.MethodType(fn, obj): fn bound to obj."""
    if len(args) != 2 or kwargs:
        raise Unsupported("types.MethodType() takes a function and an object")
    return functions.BoundMethodVariable(args[0], args[1])


class NamespaceVariable(Variable):
    """types.SimpleNamespace(**kwargs) made in the frame: its attributes are its state."""

    mutable = True

    def __init__(self, attrs):
        super().__init__(None)
        self.attrs = DictVariable(attrs)

    def python_type(self):
        return types.SimpleNamespace

    def truthy(self, tx):
        return True

    def getattr(self, tx, name):
        if name in self.attrs.items:
            return self.attrs.items[name]
        if name == "__dict__":
            return self.attrs
        raise exceptions.attribute_error("types.SimpleNamespace", name)

    def hasattr(self, tx, name):
        return name in self.attrs.items

    def setattr(self, tx, name, value):
        tx.side_effects.changed(self, value)
        self.attrs.items[name] = value

    def delattr(self, tx, name):
        if name not in self.attrs.items:
            raise exceptions.attribute_error("types.SimpleNamespace", name)
        tx.side_effects.changed(self)
        del self.attrs.items[name]

    def reconstruct(self, cg):
        names = tuple(self.attrs.items)
        cg.call_with(make_namespace, [ConstantVariable(names), containers.TupleVariable([self.attrs.items[n] for n in names])])


def make_namespace(names, values):
    return types.SimpleNamespace(**dict(zip(names, values)))


def _make_namespace_var(tx, args, kwargs):
    if len(args) > 1:
        raise Unsupported("SimpleNamespace() takes at most one positional argument (the user code raises TypeError)")
    attrs = dict(_pairs(tx, args[0])) if args else {}
    if not all(isinstance(k, str) for k in attrs):
        raise Unsupported("SimpleNamespace keys must be strings (the user code raises TypeError)")
    attrs.update(kwargs)
    return NamespaceVariable(attrs)


def count_elements(tx, mapping, iterable):
    """`_collections._count_elements(mapping, iterable)`, the C helper of Counter.update and
    Counter(iterable): its loop, run on Variables as collections' own Python fallback states it
    (`mapping[elem] = mapping.get(elem, 0) + 1` for each item, one item at a time), through
    the mapping's own `get` and item assignment as the C code calls them when they are not
    dict's (and as dict's own when they are, which gives the same)."""
    it = live_iterators.iterator_over(tx, iterable)
    for _ in containers.bounded(tx):
        elem = it.next(tx)
        if elem is None:
            return ConstantVariable(None)
        old = mapping.call_method(tx, "get", [elem, ConstantVariable(0)], {})
        mapping.setitem(tx, elem, operators.binary_op(tx, "add", old, ConstantVariable(1)))


IMPLS = {collections._count_elements: count_elements}


def constructor(cls):
    """The Variable-building constructor for a builtin collection class, or None."""
    if cls is collections.OrderedDict:
        return lambda tx, args, kwargs: make_dict(tx, collections.OrderedDict, args, kwargs)
    if cls is collections.defaultdict:
        return make_defaultdict
    if cls is collections.deque:
        return make_deque
    if cls is types.MethodType:
        return make_method
    if cls is types.SimpleNamespace:
        return _make_namespace_var
    return None


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import container_args, containers, functions, exceptions, live_iterators, new_objects, objects, operators  # noqa: E402
