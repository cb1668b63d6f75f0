"""`copy.deepcopy(x)` and `copy.copy(x)` on Variables.

Why a fold: the stdlib implementation keys its memo by `id()` and reaches objects through
the C reduce protocol (`object.__reduce_ex__(4)`), which the interpreter cannot see into.
Libraries copy small configuration objects on the hot path (transformers deep-copies a
seq2seq model's config several times per forward to build its cache). The model below is
CPython's algorithm on Variables:

* atomic values (constants, functions, classes, code) are the value itself;
* lists, tuples, dicts, sets are new containers of copied items (a tuple whose items are
  all unchanged is the tuple itself);
* an object of a plain class goes the default reduce way: `cls.__new__(cls)`, then its
  `__dict__` copied into the new object's `__dict__` (no `__setstate__`). Its `__deepcopy__`
  / `__setstate__` lookups run the class's own attribute lookup symbolically, as CPython's
  `getattr(x, "__deepcopy__", None)` does. An input object's `__dict__` keys are guarded and
  each value is read through its own guarded source.

Anything else (tensors, modules, classes with `__reduce__`/`__getstate__`/`__copy__`/
`__deepcopy__`, `__slots__`) is Unsupported: the call breaks the graph and runs natively.
"""
import copy
import types
import weakref

from guards import DictKeysMatch
from guards.sources import ItemSource

from ..exc import Unsupported, UserException
from .base import ConstantVariable, Variable
from .folds import folds

_ATOMIC_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.CodeType, type, range,
                 property, weakref.ref, types.ModuleType)


@folds(copy.deepcopy)
def fold_deepcopy(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("copy.deepcopy with a memo argument")
    return _Copier(tx, deep=True).copy(args[0])


@folds(copy.copy)
def fold_copy(tx, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("copy.copy with extra arguments")
    return _Copier(tx, deep=False).copy(args[0])


class _Copier:
    def __init__(self, tx, deep):
        self.tx, self.deep = tx, deep
        self.memo = {}  # identity of the original (Variable or real object) -> its copy

    def item(self, var):
        return self.copy(var) if self.deep else var

    def copy(self, var):
        key = _identity(var)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        out = self._copy(var, key)
        self.memo[key] = out
        return out

    def _copy(self, var, key):
        if var.is_constant():
            return var
        if isinstance(var, tensor.TensorVariable):
            raise Unsupported("copy of a tensor")
        real = _real(var)
        if real is not None and isinstance(real, _ATOMIC_TYPES):
            return var
        t = var.python_type()
        if t is list and isinstance(var, containers.ListVariable):
            new = containers.ListVariable([])
            self.memo[key] = new  # a list may contain itself
            new.items = [self.item(v) for v in var.items]
            return new
        if t is tuple and isinstance(var, containers.TupleVariable):
            items = [self.item(v) for v in var.items]
            return var if all(a is b for a, b in zip(items, var.items)) else containers.TupleVariable(items)
        if isinstance(var, containers.DictVariable) and t in (dict, __import__("collections").OrderedDict):
            new = containers.DictVariable({}, user_cls=t)
            self.memo[key] = new
            for k, v in var.items.items():
                if not isinstance(k, (str, int, float, bool, bytes, type(None))):
                    raise Unsupported("copy of a dict with keys that are not plain constants")
                new.items[k] = self.item(v)
            return new
        if isinstance(var, sets.SetVariable) and t is set:  # (items are constants: copies are themselves)
            var.refuse_objects("copying it")
            return sets.SetVariable.of_table(set(var.table), var, "copy")
        if isinstance(var, (objects.UserObjectVariable, new_objects.NewObjectVariable)):
            return self._copy_object(var, key)
        if isinstance(var, new_objects.InstanceAttrsVariable):  # new_obj.__dict__
            return self._copy(var.obj.attrs, key)
        if isinstance(var, objects.InstanceDictVariable):    # input_obj.__dict__
            new = containers.DictVariable({})
            self.memo[key] = new
            for k, v in self._input_state(var.obj):
                new.items[k] = self.item(v)
            return new
        raise Unsupported(f"copy of {var}")

    # ---- objects: the default reduce protocol -----------------------------------------------
    def _copy_object(self, var, key):
        cls = var.python_type()
        hook = "__deepcopy__" if self.deep else "__copy__"
        if self._has_attr(var, hook):
            raise Unsupported(f"copy of a {cls.__name__}, which defines {hook}")
        for name in ("__reduce_ex__", "__reduce__", "__getstate__"):
            if objects.lookup_type_attr(cls, name)[0] is not objects.lookup_type_attr(object, name)[0]:
                raise Unsupported(f"copy of a {cls.__name__}, which defines {name}")
        if isinstance(var, new_objects.NewObjectVariable) and var.items is not None or isinstance(cls, type) and \
                issubclass(cls, (dict, list, set, tuple)):
            raise Unsupported(f"copy of a {cls.__name__} (a container subclass)")
        reason = new_objects.constructible_reason(cls)
        if reason is None and new_objects.has_slots(cls):  # (copyreg copies slots apart from __dict__)
            reason = "it uses __slots__"
        if reason is not None:
            raise Unsupported(f"copy of a {cls.__name__}: {reason}")
        new = new_objects.NewObjectVariable(cls)
        self.memo[key] = new
        if isinstance(var, objects.UserObjectVariable):
            state = self._input_state(var)
        else:
            state = list(var.attrs.items.items())
        if self._has_attr(new, "__setstate__"):
            raise Unsupported(f"copy of a {cls.__name__}, which defines __setstate__")
        for name, value in state:  # y.__dict__.update(state)
            new.attrs.items[name] = self.item(value)
        return new

    def _input_state(self, var):
        """The items of an input object's __dict__: keys guarded, each value from its source."""
        obj = var.value
        d = getattr(obj, "__dict__", None)
        if not isinstance(d, dict) or var.source is None:
            raise Unsupported(f"copy of a {type(obj).__name__} without a readable __dict__")
        if var.mutable and self.tx.side_effects.attr_stores.get(self.tx.side_effects.key(var)):
            raise Unsupported(f"copy of a {type(obj).__name__} after attribute stores in the trace")
        src = objects._generic_attr_source(var, "__dict__")
        keys = tuple(d.keys())
        if not all(type(k) is str for k in keys):
            raise Unsupported("copy of an object whose __dict__ has keys that are not strings")
        self.tx.guard(DictKeysMatch(src, keys, dict))
        return [(k, builder.wrap(self.tx, d[k], ItemSource(src, k))) for k in keys]

    def _has_attr(self, var, name):
        """hasattr(var, name) as CPython's copy module asks it: the class's own attribute
        lookup runs (symbolically); an AttributeError means no."""
        try:
            var.getattr(self.tx, name)
            return True
        except UserException as e:
            if issubclass(e.exc_type, AttributeError):
                return False
            raise


def _real(var):
    get = getattr(var, "as_python_object", None)
    if get is None:
        return None
    try:
        return get()
    except Unsupported:
        return None


def _identity(var):
    real = _real(var)
    if real is not None and getattr(var, "source", None) is not None:
        return ("real", id(real))
    return ("var", id(var))


__all__ = ["fold_deepcopy", "fold_copy", "Variable", "ConstantVariable"]


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builder, containers, new_objects, objects, sets, tensor  # noqa: E402
