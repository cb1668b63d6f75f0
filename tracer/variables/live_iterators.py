"""Iterators that read their container live, as CPython's do: a dict's (a real iterator over the
Variable's own storage) and reversed(list)'s (by index from the end); `iterator_over` picks the
iterator `iter(v)` gives (GET_ITER, the iter() builtin). A list's is ListIteratorVariable
(containers.py)."""
import collections
import collections.abc
import types

from ..exc import Unsupported, UserException
from .base import ConstantVariable
from .exceptions import user_error
from .containers import (DictVariable, DictViewVariable, IteratorVariable, ListIteratorVariable, ListVariable,
                         TupleVariable, UnreadValue, container_size, emit_iter_over, key_variable)
from .sets import SetVariable


class DictIteratorVariable(IteratorVariable):
    """`iter(d)`, `iter(d.items())`... over a dict made or passed in: a real iterator over the
    Variable's own storage (a Python dict changed by the trace exactly as the program changes
    the real one), so a value stored during the loop is seen, a size change raises CPython's
    RuntimeError at the next step, and a key removed and added again moves to the end."""

    _TYPES = {"keys": type(iter({})), "values": type(iter({}.values())), "items": type(iter({}.items()))}

    def __init__(self, dict_var, kind):
        super().__init__([], py_type=self._TYPES[kind])
        self.dict_var, self.kind = dict_var, kind
        self._storage = dict_var.stored  # (values read as the loop reaches them: _variable)
        self._it = iter(getattr(self._storage, kind)())

    def lazy(self):
        return True

    def _variable(self, entry):
        if self.kind == "keys":
            return key_variable(entry)
        if self.kind == "values":
            return self._read(entry)
        return TupleVariable([key_variable(entry[0]), self._read(entry[1])])

    def _read(self, value):
        """A value of an input dict not read before is read (and guarded) when the loop
        reaches it."""
        return self.dict_var.value_of(value.key) if isinstance(value, UnreadValue) else value

    def next(self, tx):
        if self.dict_var.stored is not self._storage:
            raise Unsupported("a dict rebuilt while an iterator over it is live")
        try:
            entry = next(self._it)
        except StopIteration:
            return None
        except RuntimeError as e:  # "dictionary changed size during iteration", as CPython's
            raise user_error(RuntimeError, str(e)) from None
        return self._variable(entry)

    def reconstruct(self, cg):
        """At a break: an iterator over what this one has left (a copy of its state, as
        pickling reads it): the rest of the loop reads that, not the live dict (a real dict
        iterator could not be wrapped as the resume function's input)."""
        try:
            rest = self._it.__reduce__()[1][0]
        except RuntimeError as e:
            raise Unsupported(f"a dict iterator that would raise {e} crosses a graph break") from None
        emit_iter_over(cg, [self._variable(entry) for entry in rest])


class ReversedListIteratorVariable(IteratorVariable):
    """`reversed(some_list)`: reads the list by index from the end at each step, as CPython's
    list_reverseiterator does (an insert at the front during the loop is seen)."""

    def __init__(self, lst):
        super().__init__([], py_type=type(reversed([])))
        self.lst, self.index = lst, len(lst.items) - 1

    def lazy(self):
        return True

    def next(self, tx):
        if self.lst is None or not 0 <= self.index < len(self.lst.items):
            self.lst = None  # exhausted for good
            return None
        self.index -= 1
        return self.lst.items[self.index + 1]

    def reconstruct(self, cg):
        """At a break: an iterator over the items it has left, as they are now."""
        emit_iter_over(cg, [] if self.lst is None else self.lst.items[:self.index + 1][::-1])


def iterator_over(tx, v):
    """`iter(v)` (GET_ITER, the iter() builtin) for a Variable that is not an iterator."""
    if isinstance(v, IteratorVariable):
        return v
    if isinstance(v, ListVariable):
        return ListIteratorVariable(v)  # live view: appends/pops during the loop are seen
    live = getattr(v, "live_iterator", None)  # (a list subclass made in the frame)
    if live is not None and (it := live(tx)) is not None:
        return it
    base, kind = (v.dict_var, v.kind) if isinstance(v, DictViewVariable) else (v, "keys")
    if isinstance(base, DictVariable) and base.user_cls in (dict, collections.defaultdict):
        return DictIteratorVariable(base, kind)
    if (it := user_iterator(tx, v)) is not None:
        return it
    refuse_one_at_a_time(v)
    it = IteratorVariable(v.iterate(tx), py_type=builtins_impl.iter_type(v))
    if isinstance(base, (DictVariable, SetVariable)):
        it.sized = (base, container_size(base))  # (an OrderedDict's: its own, order-keeping checks)
    return it


def user_iterator(tx, v):
    """`iter(obj)` of an object of a user class, as CPython's PyObject_GetIter, or None where
    the object is its own iterator (`refuse_one_at_a_time` decides) or not a user object. The
    class's own Python `__iter__` is called, traced like any method and guarded on the class's
    entry: its result is the iterator, a generator its body makes advanced only as far as the
    loop pulls (draining it here would run more of it than eager does, when the loop stops
    half-way). With no `__iter__`, a Python `__getitem__` is the old sequence protocol
    (`sequence_iterator`)."""
    if not is_user_object(v):
        return None
    cls = v.python_type()
    attr, owner = objects.guarded_type_lookup(tx, objects.class_source(v), cls, "__iter__")
    if owner is None:
        return sequence_iterator(tx, v)
    if attr is _SEQUENCE_MIXIN_ITER:
        # collections.abc.Sequence's own `__iter__` is the sequence protocol written as a
        # generator (self[0], self[1]... until IndexError): read the same way, without a
        # generator left suspended in its try (every later step of the trace would look for
        # who still holds it: an HF LLaMA's first call took twice as long)
        return sequence_iterator(tx, v, stops=(IndexError,))
    if not isinstance(attr, types.FunctionType) or objects.lookup_type_attr(cls, "__next__")[1] is not None:
        return None
    it = objects.bind_class_attr(tx, attr, v, cls).call(tx, [], {})
    if not isinstance(it, IteratorVariable):  # (self without a __next__, a list...: eager's TypeError)
        raise Unsupported(f"{cls.__name__}.__iter__ returned a {it}, not an iterator the trace models")
    return it


def is_user_object(v):
    """An object of a user class (passed in or made in the frame): its iteration is its class's."""
    return isinstance(v, (objects.UserObjectVariable, new_objects.NewObjectVariable))


class SequenceIteratorVariable(IteratorVariable):
    """`iter(obj)` of an object whose class has a Python `__getitem__` and no `__iter__`:
    CPython's sequence iterator reads obj[0], obj[1]... through the class's method (traced)
    until it raises IndexError or StopIteration, one item per step, so a loop that stops early
    reads no further. Made again unstarted at a break: `iter(obj)`."""

    def __init__(self, obj, stops=(IndexError, StopIteration), py_type=None):
        super().__init__([], more=self._step, py_type=py_type or _SEQUENCE_ITERATOR)
        self.obj, self.index, self.stops = obj, 0, stops
        self.unstarted = (iter, [obj])

    def _step(self, tx):
        try:
            item = self.obj.getitem(tx, ConstantVariable(self.index))
        except UserException as e:
            if issubclass(e.exc_type, self.stops):
                return None
            if issubclass(e.exc_type, StopIteration):  # (inside Sequence.__iter__: a RuntimeError)
                raise Unsupported("StopIteration raised by __getitem__ inside Sequence.__iter__") from None
            raise
        self.index += 1
        return item

    def reconstruct(self, cg):
        """At a break: CPython's own sequence iterator over the object, at the index this one
        reached (exhausted: an empty iterator)."""
        if self._more is None:
            return emit_iter_over(cg, [])
        cg.call_with(sequence_iterator_at, [self.obj, ConstantVariable(self.index)])


def sequence_iterator_at(obj, index):
    """`iter(obj)` advanced to `index` without reading the items before it (as pickling
    restores it)."""
    it = iter(obj)
    it.__setstate__(index)
    return it


class _Indexed:
    def __getitem__(self, i):
        raise IndexError


_SEQUENCE_ITERATOR = type(iter(_Indexed()))  # (CPython's `iterator`)


def sequence_iterator(tx, v, stops=(IndexError, StopIteration)):
    """The old sequence protocol's iterator of `v` (a user object whose class has no
    `__iter__`, or collections.abc.Sequence's, which stops at IndexError only), when its class
    has a Python `__getitem__` (guarded on the class's entry when the first item is read);
    None otherwise (iteration is refused where it is asked for)."""
    if not isinstance(objects.lookup_type_attr(v.python_type(), "__getitem__")[0], types.FunctionType):
        return None
    if stops == (IndexError,):
        return SequenceIteratorVariable(v, stops, py_type=types.GeneratorType)
    return SequenceIteratorVariable(v)


_SEQUENCE_MIXIN_ITER = collections.abc.Sequence.__iter__


def refuse_one_at_a_time(v):
    """iter() / zip() of an object whose own __iter__ (or __next__) is Python, when it is passed
    in or is its own iterator: taken one item at a time, its iteration may be left half-way, so
    draining it here would run more of it than eager does: a break."""
    if isinstance(v, (objects.UserObjectVariable, new_objects.NewObjectVariable)):
        cls = v.python_type()
        own_iter = isinstance(objects.lookup_type_attr(cls, "__iter__")[0], types.FunctionType)
        if own_iter and (isinstance(v, objects.UserObjectVariable) or objects.lookup_type_attr(cls, "__next__")[0]):
            raise Unsupported(f"iter() of a {cls.__name__} object, taken one item at a time")


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builtins_impl, new_objects, objects  # noqa: E402
