"""Tuples, lists, dicts, sets and iterators whose items are Variables.

Lists, dicts and sets are mutable: when one that came from the frame (it has a source) is
changed by the traced code, it is registered with the side-effect log, and the rewritten
code writes the final contents back after the graph runs (`lst[:] = ...`,
`d.clear(); d.update(...)`). Containers created during tracing need no replay; they are
rebuilt only if they escape (returned, stored).
"""
import collections
import functools
import operator

from ..exc import Unsupported
from ..runtime import config
from .base import ConstantVariable, TempVariable, Variable, rely_on_identity
from guards import ItemSource, LengthMatch


def _const_key(tx, key):
    """A dict key or set member: a compile-time constant, or an object compared by identity
    (`_IdKey`, which iteration gives back as the object)."""
    key = sym.specialized(key)  # a symbolic size (or shape) as a key: its value, guarded
    if key.is_constant():
        return key.as_constant()
    ident = _identity_key(tx, key)
    if ident is not None:
        return ident
    raise Unsupported(f"dict key / set member {key} is not a constant")


def _identity_key(tx, key):
    """An object whose hash and == are object's (modules, functions, plain instances), or a
    tensor (its hash is its id, and two live tensors never share one, so == is never asked):
    as a key it is found exactly when the same object is used."""
    if isinstance(key, tensor.TensorVariable):
        return _IdKey(key, ("tensor", id(key.node)))
    ident = getattr(key, "identity_key", None)
    if ident is None:
        return None
    if not identity_keys.keyed_by_identity(key.python_type()):
        return None
    objects.guard_type_entries(tx, key, ("__hash__", "__eq__"))  # (one defined later changes lookups)
    rely_on_identity(tx, key)
    return _IdKey(key, ident())


def key_variable(key):
    """The Variable a stored dict key stands for (iteration, items(), popitem())."""
    return key.var if isinstance(key, _IdKey) else ConstantVariable(key)


def load_key(cg, key):
    """Push a stored dict key: the object itself for an identity key, else the constant."""
    if isinstance(key, _IdKey):
        cg.reconstruct(key.var)
    else:
        cg.load_const(key)


def key_error(key):
    """The exception for a missing key: the user's KeyError, or, for an object key (whose
    exception would have to carry the object), a break where the code raises it."""
    if isinstance(key, _IdKey):
        return Unsupported(f"KeyError for the object key {key.var} (the user code raises KeyError)")
    return exceptions.user_error(KeyError, key)


def sequence_index(key):
    """The int or slice a list or tuple is indexed by (a tensor only when the trace made it from a
    constant)."""
    if isinstance(key, tensor.TensorVariable):  # its __index__ reads its value: data-dependent,
        known = key.constant_index()            # unless the trace made it from a constant
        if known is None:
            raise Unsupported(f"a list or tuple indexed by a tensor ({key}) needs the tensor's value")
        return known
    value = key.as_constant()
    if not isinstance(value, (int, slice)):
        raise Unsupported(f"sequence index {value!r}")
    return value


class BaseSequence(Variable):
    kind = tuple
    error_kind = tuple  # the real container a failed operation runs on again (real_op)

    def __init__(self, items, source=None):
        super().__init__(source)
        self.items = list(items)

    def python_type(self):
        return self.kind

    def is_constant(self):
        return all(i.is_constant() for i in self.items)

    def as_constant(self):
        return self.kind(i.as_constant() for i in self.items)

    def truthy(self, tx):
        return bool(self.items)

    def iterate(self, tx):
        return list(self.items)

    def length(self, tx):
        return len(self.items)

    def real_op(self, op, what):
        """`op(items)` on the Python list of this container's Variables (a list and a tuple
        index, slice and repeat alike). Where it raises, the user's container raises too, with
        its own kind's message ("tuple index out of range"): `op` runs again on a real container
        of that kind, and what that raises is the user's exception, not an error of the tracer."""
        items = self.items
        try:
            return op(items)
        except Exception:  # noqa: BLE001 - the real container says what the user's raises
            real = self.error_kind(items)
        exceptions.user_errors(lambda: op(real), what)
        raise Unsupported(f"{what} fails on the trace's list, not on a {self.error_kind.__name__}")

    def getitem(self, tx, key):
        idx = sequence_index(key)
        got = self.real_op(lambda c: c[idx], f"{self.kind.__name__}[...]")
        if isinstance(idx, slice):
            if type(self) is TupleVariable and idx.indices(len(self.items)) == (0, len(self.items), 1):
                return self  # t[:] is t (a tuple is immutable; CPython gives it back)
            return type(self)(got)
        return got

    def call_method(self, tx, name, args, kwargs):
        if name == "index" and len(args) == 1:
            target = args[0]
            for i, item in enumerate(self.items):
                if operators.values_equal(tx, item, target):
                    return ConstantVariable(i)
            container_args.not_found(self.kind, "index", target)
        if name == "count" and len(args) == 1:
            return ConstantVariable(sum(1 for i in self.items if operators.values_equal(tx, i, args[0])))
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name in ("__getitem__", "__contains__"):
            container_args.check_arity(f"{self.kind.__name__}.{name}()", args, kwargs, 1, 1)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(any(operators.values_equal(tx, i, args[0]) for i in self.items))
        raise Unsupported(f"{self.kind.__name__}.{name}")

    def reconstruct(self, cg):
        if self.source is not None and (self.mutable or not tx_mutated(self)):
            # a mutated input list/dict/set keeps its identity: the replay writes its contents
            return cg.load_source(self.source)
        for item in self.items:
            cg.reconstruct(item)
        cg.build(self.kind, len(self.items))

    def __repr__(self):
        return f"{self.kind.__name__}Var({self.items!r})"


def bounded(tx):
    """Steps of a loop the tracer runs for the user's program (counted like instructions)."""
    while True:
        tx.ctx.steps += 1
        if tx.ctx.steps > config.MAX_STEPS:
            raise Unsupported(f"trace longer than {config.MAX_STEPS} steps (an endless iterator?)")
        yield


def pulled(tx, src):
    """The items `extend` takes from `src`, one at a time: an iterator (a generator over the
    very container being extended, say) is read one item at a time, each item added before
    the next is read, so later items see the container grow, as in CPython; anything else is
    read whole first (CPython copies `d.extend(d)`'s own items first)."""
    if not (isinstance(src, IteratorVariable) and src.lazy()):
        yield from src.iterate(tx)
        return
    for _ in bounded(tx):
        item = src.next(tx)
        if item is None:
            return
        yield item


def method_of(var, name):
    """`container.method` as a value (`f = lst.append`): a bound builtin method whose call is
    the container's call_method."""
    attr = getattr(var.python_type(), name, None)
    if attr is None or not callable(attr) or name.startswith("__") and name not in ("__len__", "__contains__",
                                                                                        "__getitem__"):
        raise Unsupported(f"{var.python_type().__name__} attribute {name!r}")
    return functions.BuiltinMethodVariable(var, name)


def tx_mutated(var):
    return getattr(var, "_mutated", False)


class TupleVariable(BaseSequence):
    kind = tuple
    # immutable, but its identity shows (`is`, id()): rebuilt once after a graph (CodeGen.reconstruct)
    rebuilt_once = True

    def getattr(self, tx, name):
        return method_of(self, name)


class SizeVariable(TupleVariable):
    """torch.Size built from symbolic items (e.g. `torch.Size([n, 4])`); `numel()` their product."""

    import torch as _torch
    kind = _torch.Size

    def call_method(self, tx, name, args, kwargs):
        if name != "numel" or args or kwargs:
            return super().call_method(tx, name, args, kwargs)
        return functools.reduce(lambda a, b: operators.binary_op(tx, "mul", a, b), self.items, ConstantVariable(1))


class _Unread:
    """The real list behind a ListVariable none of whose items has been read yet (not a
    container, so walks over Variables do not go through the user's list)."""

    def __init__(self, value, tx):
        self.value, self.tx = value, tx


def _same_items(items, made):
    return len(items) == len(made) and all(a is b for a, b in zip(items, made))


class ListVariable(BaseSequence):
    kind = list
    error_kind = list
    mutable = True
    # Methods that only move items, never compare or call them: run as the kind's own C method
    # on a real container of the Variables (real_op), so a bad index or argument raises CPython's
    # own exception. The number: how many leading arguments are indices (handed over as values).
    moves = {"append": 0, "insert": 1, "pop": 1, "clear": 0, "reverse": 0, "copy": 0}
    _unread = None   # _Unread while no item of an input list has been read (see lazy())
    _appended = ()   # ... and what the frame appended to it meanwhile

    @classmethod
    def lazy(cls, tx, value, source):
        """A list reached from the frame's inputs whose length and items are read, and
        guarded, only when something needs them. Until then `append` is recorded on its own
        and replayed as `lst.extend(appended)`: a frame that only appends to a list (a logger,
        a collector of activations, a hook) does not guard the list's length, so a list that
        grows on every call is not a recompile on every call (TorchDynamo guards the length
        and recompiles)."""
        var = cls([], source)
        var._unread, var._appended = _Unread(value, tx), []
        return var

    @property
    def items(self):
        if self._unread is not None:
            self._read()
        return self._items

    @items.setter
    def items(self, items):
        self._items = items

    @property
    def append_only(self):
        """True while the list's own items were never read: only appends were made."""
        return self._unread is not None

    @property
    def unread_by(self):
        """The trace whose input this list is, while its own items are unread (else None)."""
        return None if self._unread is None else self._unread.tx

    @property
    def appended(self):
        return list(self._appended)

    def _read(self):
        unread = self._unread
        tx, value = unread.tx, unread.value
        tx.guard(LengthMatch(self.source, len(value), list))
        read = [builder.wrap(tx, v, ItemSource(self.source, i)) for i, v in enumerate(value)]
        appended = self._appended
        self._unread, self._items, self._appended = None, read + appended, ()
        made = list(self._items)
        tx.ctx.lazy_reads.record(lambda: self._unread is None and _same_items(self._items, made),
                                 functools.partial(self._unread_again, unread, appended))

    def _unread_again(self, unread, appended):
        """The undo of a read taken back with its guards (lazy_reads.py)."""
        self._unread, self._items, self._appended = unread, [], appended

    def getattr(self, tx, name):
        return method_of(self, name)

    def is_constant(self):
        return False

    def _mutate(self, tx):
        tx.side_effects.mutated(self)

    def copied(self, items):
        """A new container of this kind holding `items` (`l.copy()`, `l * 2`)."""
        return ListVariable(list(items))

    def setitem(self, tx, key, value):
        idx = sequence_index(key)
        what = f"{self.kind.__name__}[...] = ..."
        self._mutate(tx)
        if isinstance(idx, slice):
            self.real_op(lambda c: c[idx], what)  # a bad slice raises before the value is read
            value = value.iterate(tx)
        self.real_op(lambda c: operator.setitem(c, idx, value), what)

    def delitem(self, tx, key):
        idx = sequence_index(key)
        self._mutate(tx)
        self.real_op(lambda c: operator.delitem(c, idx), f"del {self.kind.__name__}[...]")

    def _move(self, tx, name, args):
        """One of `moves`, run as the kind's own method on the real container."""
        n = self.moves[name]
        values = [container_args.index_value(a) for a in args[:n]] + list(args[n:])
        what = f"{self.kind.__name__}.{name}()"
        if name == "copy":
            return self.copied(self.real_op(lambda c: type(c).copy(c, *values), what))
        self._mutate(tx)
        if name == "append" and self._unread is not None:  # an unread input: appends kept apart (lazy)
            exceptions.user_errors(lambda: self._appended.append(*values), what)
            return ConstantVariable(None)
        out = self.real_op(lambda c: getattr(type(c), name)(c, *values), what)
        return ConstantVariable(None) if out is None else out

    def call_method(self, tx, name, args, kwargs):
        if kwargs and name != "sort":
            raise Unsupported(f"list.{name} with keyword arguments")
        if name in self.moves:
            return self._move(tx, name, args)
        if name == "extend":
            container_args.check_arity("list.extend()", args, kwargs, 1, 1)
            self._mutate(tx)
            for item in pulled(tx, args[0]):
                self.items.append(item)
        elif name == "remove":
            container_args.check_arity("list.remove()", args, kwargs, 1, 1)
            for i, item in enumerate(self.items):
                if operators.values_equal(tx, item, args[0]):
                    self._mutate(tx)
                    del self.items[i]
                    break
            else:
                container_args.not_found(self.kind, "remove", args[0])
        elif name == "sort":
            if args or any(k not in ("key", "reverse") for k in kwargs):
                raise Unsupported("list.sort() takes only key= and reverse= (the user code raises TypeError)")
            rev = bool(kwargs["reverse"].as_constant()) if "reverse" in kwargs else False
            ordered = builtins_impl.sort_variables(tx, list(self.items), kwargs.get("key"), rev)
            self._mutate(tx)
            self.items[:] = ordered
        elif name == "__setitem__":
            container_args.check_arity("list.__setitem__()", args, kwargs, 2, 2)
            self.setitem(tx, args[0], args[1])
        else:
            return super().call_method(tx, name, args, kwargs)
        return ConstantVariable(None)


class UnreadValue(Variable):
    """The value of an input dict not read yet, in the dict's storage in its place: the
    real dict's own value at that key (keys are guarded, values are not until read). Only
    DictVariable sees it: a read wraps the real value (`DictVariable.value_of`); the replay
    of a changed dict loads it from its source, the object as it is (base reconstruct)."""

    def __init__(self, source, key):
        super().__init__(source)
        self.key = key

    def __repr__(self):
        return f"Unread({self.key!r})"


class DictVariable(Variable):
    """A dict, OrderedDict (or, subclassed, defaultdict): its items by constant key. One
    passed in (`read_lazily`) holds its values unread until the trace reads them."""

    mutable = True
    _unread = None  # _Unread(real dict, tx) while some value of an input dict is unread

    def __init__(self, items, source=None, user_cls=dict):
        super().__init__(source)
        self._items = dict(items)  # constant key -> Variable (or UnreadValue)
        self.user_cls = user_cls

    def read_lazily(self, tx, value):
        """Hold the values of `value`, the real dict this Variable stands for, unread: each is
        wrapped, and guarded, when the trace reads it (`value_of`). A frame that reads
        `cfg["scale"]` relies on that value only; guarding every value recompiled a training
        loop that bumps `cfg["step"]` on every call. Its keys and their order are guarded
        (DictKeysMatch, by the caller): iteration, len() and `in` read them."""
        self._unread = _Unread(value, tx)
        self._items = {k: UnreadValue(ItemSource(self.source, k), k) for k in value}

    @property
    def items(self):
        """The storage with every value read: for code that reads the whole dict."""
        return self.read_all()

    @items.setter
    def items(self, items):
        self._items = items

    def read_all(self):
        """Every value read (wrapped and guarded); the storage."""
        if self._unread is not None:
            for k in [k for k, v in self._items.items() if isinstance(v, UnreadValue)]:
                self.value_of(k)
            self._unread = None  # (a refused trial's undo of a read puts it back)
        return self._items

    @property
    def stored(self):
        """The storage as it is: values not read yet are UnreadValues. For code that moves
        entries or reads keys only (the replay reloads an unread value from its source)."""
        return self._items

    @property
    def keys(self):
        """The keys, in order (reading them reads no value)."""
        return self._items.keys()

    def value_of(self, k):
        """The value at key `k` (present), read (wrapped and guarded) if it was not yet."""
        v = self._items[k]
        if isinstance(v, UnreadValue):
            unread = self._unread
            tx, real = unread.tx, unread.value
            if not dict.__contains__(real, k):  # (a call made for real while tracing removed it)
                raise Unsupported(f"the input dict lost its key {k!r} while tracing")
            v = read = self._items[k] = builder.wrap(tx, dict.__getitem__(real, k), v.source)
            tx.ctx.lazy_reads.record(lambda: self._items.get(k) is read,
                                     functools.partial(self._unread_again, k, unread))
        return v

    def _unread_again(self, k, unread):
        """The undo of a read taken back with its guards (lazy_reads.py)."""
        self._items[k] = UnreadValue(ItemSource(self.source, k), k)
        self._unread = unread

    def python_type(self):
        return self.user_cls

    def getattr(self, tx, name):
        return method_of(self, name)

    def truthy(self, tx):
        return bool(self._items)

    def iterate(self, tx):
        return [key_variable(k) for k in self._items]

    def length(self, tx):
        return len(self._items)

    def getitem(self, tx, key):
        k = _const_key(tx, key)
        if k not in self._items:
            raise key_error(k)
        return self.value_of(k)

    def setitem(self, tx, key, value):
        tx.side_effects.mutated(self)
        self._items[_const_key(tx, key)] = value

    def delitem(self, tx, key):
        k = _const_key(tx, key)
        if k not in self._items:
            raise key_error(k)
        tx.side_effects.mutated(self)
        del self._items[k]

    def call_method(self, tx, name, args, kwargs):
        container_args.check_dict_call(self.user_cls, name, args, kwargs)
        if name == "get":
            k = _const_key(tx, args[0])
            if k in self._items:
                return self.value_of(k)
            return args[1] if len(args) > 1 else ConstantVariable(None)
        if name in ("keys", "values", "items") and not args and not kwargs:
            return DictViewVariable(self, name)
        if name == "__contains__":
            return ConstantVariable(_const_key(tx, args[0]) in self._items)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__setitem__":
            self.setitem(tx, args[0], args[1])
            return ConstantVariable(None)
        if name == "__len__":
            return ConstantVariable(len(self._items))
        if name == "copy":
            return DictVariable(self.items, user_cls=self.user_cls)
        if name == "move_to_end" and self.user_cls is collections.OrderedDict:
            return collections_vars.move_to_end(tx, self, args, kwargs)
        if name == "popitem":
            return collections_vars.popitem(tx, self, args, kwargs)
        if name in ("pop", "setdefault", "update", "clear"):
            tx.side_effects.mutated(self)
            if name == "pop":
                k = _const_key(tx, args[0])
                if k in self._items:
                    value = self.value_of(k)
                    del self._items[k]
                    return value
                if len(args) > 1:
                    return args[1]
                raise key_error(k)
            if name == "setdefault":
                k = _const_key(tx, args[0])
                if k not in self._items:
                    self._items[k] = args[1] if len(args) > 1 else ConstantVariable(None)
                return self.value_of(k)
            if name == "update":
                if len(args) > 1:
                    raise Unsupported("dict.update with more than one positional argument (the user code raises TypeError)")
                for a in args:
                    if isinstance(a, DictVariable):
                        self._items.update(a.items)
                        continue
                    if not isinstance(a, (BaseSequence, IteratorVariable, DictViewVariable)):
                        raise Unsupported(f"dict.update from {a}")  # (one with keys() is read as a mapping)
                    for i, pair in enumerate(pulled(tx, a)):  # key/value pairs, each stored as pulled
                        kv = pair.iterate(tx)
                        if len(kv) != 2:
                            raise exceptions.user_error(ValueError, f"dictionary update sequence element #{i} "
                                                                    f"has length {len(kv)}; 2 is required")
                        self._items[_const_key(tx, kv[0])] = kv[1]
                for k, v in kwargs.items():
                    self._items[k] = v
                return ConstantVariable(None)
            if name == "clear":
                self._items.clear()
                return ConstantVariable(None)
        raise Unsupported(f"dict.{name}")

    def reconstruct(self, cg):
        if self.source is not None and (self.mutable or not tx_mutated(self)):
            # a mutated input list/dict/set keeps its identity: the replay writes its contents
            return cg.load_source(self.source)
        for k, v in self.items.items():
            load_key(cg, k)
            cg.reconstruct(v)
        cg.build(dict, len(self.items))
        if self.user_cls is not dict:
            cg.call_on_stack(self.user_cls)

    def __repr__(self):
        return f"DictVar({self._items!r})"


class DictViewVariable(Variable):
    """d.keys() / d.values() / d.items(): a live, re-iterable view of a DictVariable.

    Not an iterator: len() and `in` do not consume it, every `for` starts afresh, and it sees
    the dict's later changes, as CPython's views do."""

    _TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}

    def __init__(self, dict_var, kind):
        super().__init__(None)
        self.dict_var, self.kind = dict_var, kind

    def python_type(self):
        return self._TYPES[self.kind]

    def iterate(self, tx):
        d = self.dict_var
        keys = d.iterate(tx)
        if self.kind == "keys":
            return keys
        if self.kind == "values":
            return list(d.items.values())
        return [TupleVariable([k, v]) for k, v in zip(keys, d.items.values())]

    def length(self, tx):
        return len(self.dict_var.keys)

    def truthy(self, tx):
        return bool(self.dict_var.keys)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__":
            return ConstantVariable(self.length(tx))
        if name == "__contains__" and self.kind == "keys":
            return self.dict_var.call_method(tx, "__contains__", args, kwargs)
        if name == "__contains__":
            return ConstantVariable(any(operators.values_equal(tx, i, args[0]) for i in self.iterate(tx)))
        raise Unsupported(f"dict_{self.kind}.{name}")

    def reconstruct(self, cg):
        cg.reconstruct(self.dict_var)
        cg.load_method(self.kind)
        cg.call(0)


class _IdKey:
    """A dict key that is an object compared by identity (modules, functions, tensors)."""

    ESCAPE_WALK = True  # (graph/side_effects.escape follows its Variable)

    def __init__(self, var, key):
        self.var, self.key = var, key

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _IdKey) and other.key == self.key


class IteratorVariable(Variable):
    """An iterator over a finite list of Variables, advanced by FOR_ITER / next().

    `more(tx)`, when given, produces further items lazily (None when exhausted): inlined
    generators and map/filter/zip/enumerate over them, so that side effects happen exactly
    as far as the consumer advances (any() short-circuits, loops break, next() steps once).
    """

    mutable = True  # stateful: rebuilt once per codegen, `iter(it) is it`, distinct from others

    def __init__(self, items, more=None, source=None, py_type=None):
        super().__init__(source)
        self.items = list(items)
        self.pos = 0
        self._more = more
        self.py_type = py_type  # what type() says: enumerate, zip, map, generator, ...
        self.sized = None       # (dict/set Variable, its size) for iterators over a dict or set
        self.unstarted = None   # (callable, argument Variables): how a lazy one not yet advanced is made again

    def lazy(self):
        return self._more is not None

    def python_type(self):
        return self.py_type or type(iter([]))

    def next(self, tx):
        if self.sized is not None and container_size(self.sized[0]) != self.sized[1]:
            # CPython checks this on every step of a dict/set iterator
            kind = "dictionary" if isinstance(self.sized[0], DictVariable) else "Set"
            raise exceptions.user_error(RuntimeError, f"{kind} changed size during iteration")
        if self.pos >= len(self.items):
            if self._more is None:
                return None
            item = self._more(tx)
            if item is None:
                self._more = None
                return None
            self.items.append(item)
        if self.source is not None:  # a real iterator from the frame: advancing it is a mutation
            tx.side_effects.mutated(self)
        else:
            tx.side_effects.changed(self)  # (made here, and reached from shared state: an event)
        self.pos += 1
        return self.items[self.pos - 1]

    def iterate(self, tx):
        rest = []
        while (item := self.next(tx)) is not None:
            rest.append(item)
        return rest

    def call_method(self, tx, name, args, kwargs):
        if name == "__next__":
            item = self.next(tx)
            if item is None:
                raise exceptions.user_error(StopIteration)
            return item
        raise Unsupported(f"iterator.{name}")

    def reconstruct(self, cg):
        if self._more is not None and self.unstarted is not None and not self.items:
            # zip/map/filter over iterators, not advanced yet: made again over them, each
            # rebuilt where it stands (a generator where it stopped)
            fn, args = self.unstarted
            return cg.call_with(fn, args)
        if self._more is not None:
            raise Unsupported("a partly consumed generator/lazy iterator escapes the frame")
        if self.source is not None:
            return cg.load_source(self.source)  # the real iterator, advanced by the replay
        emit_iter_over(cg, self.items[self.pos:])


def container_size(var):
    """len() of a dict or set Variable (a dict's keys: its values may be unread)."""
    return len(var.keys) if isinstance(var, DictVariable) else len(var.items)


def emit_iter_over(cg, items):
    """`iter((item, ...))`: an iterator rebuilt over the Variables it has left."""
    for item in items:
        cg.reconstruct(item)
    cg.build(tuple, len(items))
    cg.call_on_stack(iter)


class ListIteratorVariable(IteratorVariable):
    """`iter(some_list)`: reads the list by index at each step, as CPython's list iterator
    does, so appends/pops/stores made to the list during the loop are seen."""

    def __init__(self, lst, pos=0, source=None):
        super().__init__([], source=source)
        self.lst = lst
        self.pos = pos

    def lazy(self):
        return True  # zip/enumerate over it pull one item at a time

    def next(self, tx):
        if self.source is not None:  # a real iterator from the frame: replayed by position
            tx.side_effects.mutated(self)
        else:
            tx.side_effects.changed(self)  # (made here, and reached from shared state: an event)
        if self.lst is None or self.pos >= len(self.lst.items):
            self.lst = None  # exhausted for good, like CPython's
            return None
        self.pos += 1
        return self.lst.items[self.pos - 1]

    def iterate(self, tx):
        rest = []
        while (item := self.next(tx)) is not None:
            rest.append(item)
        return rest

    @property
    def replay_pos(self):
        return -1 if self.lst is None else self.pos

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)  # the real iterator, set by the replay
        if self.lst is None:
            cg.load_const(())
            cg.call_on_stack(iter)
            return
        if self.lst.source is not None and tx_mutated(self.lst):
            # The real list gets its traced contents only when the side effects are written,
            # after this read: a position set now would be clamped to the old length. Make
            # the iterator now (identity), put it at its position after the writes.
            cg.reconstruct(self.lst)
            cg.call_on_stack(iter)
            cg.emit("COPY", 1)
            it = cg.store_tmp()
            with cg.after_writes():
                cg.call_with(set_list_iter, [TempVariable(it), ConstantVariable(self.pos)])
                cg.emit("POP_TOP")
            return
        cg.call_with(list_iter_at, [self.lst, ConstantVariable(self.pos)])


def list_iter_at(lst, pos):
    it = iter(lst)
    it.__setstate__(pos)
    return it


def iter_seq(it):
    """The list a list iterator reads ([] once exhausted)."""
    return it.__reduce__()[1][0]


def iter_pos(it):
    """A list iterator's position, -1 once exhausted."""
    r = it.__reduce__()
    return r[2] if len(r) > 2 else -1


def set_list_iter(it, pos):
    """Replay of a traced list iterator: put the real one at `pos` (-1: exhausted)."""
    if pos < 0:
        for _ in it:
            pass
    else:
        it.__setstate__(pos)


def iter_rest(it):
    """The items a list/tuple/range iterator has left, without advancing it."""
    reduced = it.__reduce__()
    seq = reduced[1][0]
    pos = reduced[2] if len(reduced) > 2 else 0
    return tuple(seq[pos:])


def advance(it, n):
    """Replay of a traced iterator's consumption: advance the real one by n items."""
    for _ in range(n):
        next(it)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import sym, tensor, objects, functions, builder, collections_vars, builtins_impl, container_args, exceptions, operators, identity_keys  # noqa: E402
