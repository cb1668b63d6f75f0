"""Reading `__annotations__` of a real function, class or module on 3.14+ (PEP 649).

Why this module exists: 3.14 evaluates annotations lazily. The first read of
`obj.__annotations__` calls `obj.__annotate__`, which runs the annotation expressions (user
code: a global read, a call) and caches the dict. Read while tracing, that ran them at trace
time, before the frame's own earlier statements (a global it sets, a side effect it logs),
and the guard on the dict ran them again at guard time on the next call. So a read whose
annotations are not evaluated yet is a graph break there: it runs as Python, in order. Once
evaluated (the cache below), reading is free of user code and the dict is read as before,
through `AnnotationsSource`, which never evaluates anything: on a later call where they are
pending again (a fresh function of the same code, a new `__annotate__`), the source gives no
dict and the dict's type guard fails.

What CPython caches, read without running anything:
- a function: its `func_annotations` slot, set by the first read (or by assigning
  `__annotations__`). Python cannot read that slot without filling it; the garbage collector's
  view of the function lists it: a dict among its referents that is none of its other dicts.
- a class: `__annotations_cache__` in its own `__dict__` (or `__annotations__` there, which
  `from __future__ import annotations` writes); its `__annotate__` is `__annotate__` or
  `__annotate_func__` there.
- a module: `__annotations__` in its `__dict__`, its `__annotate__` there.
"""
import functools
import gc
import inspect
import types

from guards.sources import CallSource

from ..exc import Unsupported

#: PEP 649's lazy annotations (3.14+): functions have `__annotate__`.
LAZY = "__annotate__" in types.FunctionType.__dict__


def pending(obj):
    """Whether reading `obj.__annotations__` now would call its `__annotate__` (run user code)."""
    if not LAZY:
        return False
    if isinstance(obj, types.FunctionType):
        return callable(obj.__annotate__) and not _function_cached(obj)
    if isinstance(obj, type):
        return _class_pending(obj)
    if isinstance(obj, types.ModuleType):
        d = obj.__dict__
        return "__annotations__" not in d and callable(d.get("__annotate__"))
    return False


def _function_cached(fn):
    """Whether the function holds its annotations dict already (see the module docstring).
    The other dicts it may refer to: its globals, builtins, keyword defaults, `__dict__`, and
    whatever was assigned to `__module__` or `__doc__`. A dict it does not tell apart counts
    as not cached: a graph break, never an early evaluation."""
    others = {id(fn.__globals__), id(fn.__builtins__), id(fn.__kwdefaults__), id(fn.__module__),
              id(fn.__doc__), id(fn.__dict__)}
    return any(isinstance(r, dict) and id(r) not in others for r in gc.get_referents(fn))


def _class_pending(cls):
    """type.__annotations__'s getter: the class's own cached dict if there is one (anything
    else there may be a descriptor, whose __get__ would run: counted as pending), else its
    `__annotate__` called, unless it has none (then an empty dict, nothing run)."""
    d = cls.__dict__
    for name in ("__annotations__", "__annotations_cache__"):
        if name in d:
            return type(d[name]) is not dict
    return d.get("__annotate__", d.get("__annotate_func__")) is not None


def signature_reads_pending(obj, depth=0):
    """Whether `inspect.signature(obj)` may evaluate annotations not evaluated yet (it reads
    its function's `__annotations__`). Which function that is, told statically, without
    running code, and on the safe side: obj, and what it wraps or binds (`__wrapped__`,
    `__func__`, a partial's func); for a class, its metaclass's `__call__`, its `__new__` and
    `__init__`; for another callable object, its class's `__call__`."""
    if not LAZY:
        return False
    if depth > _MAX_WRAPS:
        return True
    if isinstance(obj, types.FunctionType) and pending(obj):
        return True
    if isinstance(obj, types.MethodType):
        nexts = [obj.__func__]
    elif isinstance(obj, functools.partial):
        nexts = [obj.func]
    elif isinstance(obj, type):
        nexts = [_class_function(type(obj), "__call__"), _class_function(obj, "__new__"),
                 _class_function(obj, "__init__")]
    elif isinstance(obj, types.FunctionType):
        nexts = []
    else:
        nexts = [_class_function(type(obj), "__call__")]
    nexts.append(inspect.getattr_static(obj, "__wrapped__", None))
    return any(signature_reads_pending(n, depth + 1) for n in nexts if n is not None)


_MAX_WRAPS = 32


def _class_function(cls, name):
    """The function `cls.name` finds in its MRO, read from the class dicts (a static or class
    method: its function)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            return attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
    return None


_NOT_EVALUATED = object()  # (what the source gives for pending annotations: no dict)


def evaluated_annotations(obj):
    """`obj.__annotations__` when reading it runs nothing, else a non-dict (the guards on the
    dict read through this, so that checking them never evaluates annotations)."""
    return _NOT_EVALUATED if pending(obj) else obj.__annotations__


class AnnotationsSource(CallSource):
    """The evaluated annotations of the function, class or module at `base`."""

    def function(self):
        return evaluated_annotations


def read(tx, obj, source):
    """The Variable for `obj.__annotations__` (obj found again at `source`), or a graph break
    where that read would evaluate them now."""
    if pending(obj):
        raise Unsupported("__annotations__ not evaluated yet (PEP 649): its first read runs "
                          "the annotations, in order, as Python")
    try:
        value = obj.__annotations__
    except AttributeError as e:  # (a class written in C has none: `int.__annotations__`)
        raise exceptions.user_error(AttributeError, str(e))
    return builder.wrap(tx, value, AnnotationsSource(source))


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builder, exceptions  # noqa: E402
