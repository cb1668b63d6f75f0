"""Introspection folded at trace time: `inspect.signature(fn)` on a function, bound method,
module or class whose real object the trace knows.

Why fold instead of inline: inspect's implementation keeps memo dicts keyed by `id()` of the
callables it unwraps, builds Parameter objects and ordered mappings: hundreds of steps of
pure bookkeeping about an object the trace already guards by identity. Libraries ask it on
the hot path (transformers' `apply_chunking_to_forward` counts a forward's parameters on
every call). The answer depends only on the callable, so it is computed once, on the real
object, and the result is a frozen value: reads of its attributes, items and methods are
computed on the real object too, and it rebuilds as the object itself.
"""
import contextlib
import inspect
import types
import typing

import torch

from ..exc import Unsupported, UserException
from ..runtime import policy
from .base import ConstantVariable, ObjectVariable, is_constant_value, python_object
from .folds import folds
from guards import IdMatch

# Objects whose every attribute, item and method result is a pure function of the object
# and which nothing mutates in place (Signature and Parameter are immutable; the mapping
# views are read-only views of a Signature's private ordered dict).
FROZEN_TYPES = (inspect.Signature, inspect.Parameter, types.MappingProxyType,
                type({}.keys()), type({}.values()), type({}.items()))
_ODICT_VIEWS = tuple(type(v) for v in (__import__("collections").OrderedDict().keys(),
                                       __import__("collections").OrderedDict().values(),
                                       __import__("collections").OrderedDict().items()))
FROZEN_TYPES = FROZEN_TYPES + _ODICT_VIEWS
_READ_METHODS = {"keys", "values", "items", "get", "__contains__", "__len__", "__getitem__",
                 "__iter__", "__eq__", "__ne__", "__hash__", "__repr__", "__str__"}


class FrozenVariable(ConstantVariable):
    """A frozen introspection object computed at trace time; behaves as a constant."""

    def getattr(self, tx, name):
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            raise Unsupported(f"{type(self.value).__name__} has no attribute {name!r}") from e
        if isinstance(attr, (types.MethodType, types.BuiltinMethodType)) and \
                getattr(attr, "__self__", None) is self.value:
            return FrozenMethodVariable(self, name)
        return frozen(tx, attr)

    def call_method(self, tx, name, args, kwargs):
        return FrozenMethodVariable(self, name).call(tx, args, kwargs)

    def iterate(self, tx):
        return [frozen(tx, v) for v in self.value]

    def getitem(self, tx, key):
        try:
            return frozen(tx, self.value[key.as_constant()])
        except (KeyError, IndexError, TypeError) as e:
            raise UserException(type(e), f"{type(e).__name__} on a {type(self.value).__name__} "
                                          f"(the user code raises it)") from e

    def __repr__(self):
        return f"Frozen({type(self.value).__name__})"


class FrozenMethodVariable(ConstantVariable):
    """A read-only method of a frozen object, called with constant arguments."""

    def __init__(self, obj, name):
        super().__init__(getattr(obj.value, name))
        self.obj, self.name = obj, name

    def call(self, tx, args, kwargs):
        if self.name not in _READ_METHODS:
            raise Unsupported(f"{type(self.obj.value).__name__}.{self.name}() is not folded")
        try:
            cargs = [a.as_constant() for a in args]
            ckw = {k: v.as_constant() for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{type(self.obj.value).__name__}.{self.name}() with traced arguments")
        return frozen(tx, getattr(self.obj.value, self.name)(*cargs, **ckw))


def frozen(tx, value):
    """A value read from a frozen object, as a Variable."""
    if is_constant_value(value):
        return ConstantVariable(value)
    if isinstance(value, FROZEN_TYPES):
        return FrozenVariable(value)
    if type(value) is tuple:
        return containers.TupleVariable([frozen(tx, v) for v in value])
    if isinstance(value, type) or callable(value):
        return builder.wrap(tx, value, None)  # e.g. Parameter.empty, an annotation class
    raise Unsupported(f"{type(value).__name__} read from an inspect.Signature")


def real_callable(tx, var):
    """The real object a callable Variable stands for (a bound method is rebuilt on a
    stand-in instance: a signature does not depend on the instance)."""
    if isinstance(var, functions.BoundMethodVariable):
        func = real_callable(tx, var.func)
        try:
            self_obj = python_object(var.obj)
        except Unsupported:
            self_obj = _STAND_IN
        return types.MethodType(func, self_obj)
    get = getattr(var, "as_python_object", None)
    if get is None:
        raise Unsupported(f"inspect.signature of {var}, whose real object is not known")
    return get()


_STAND_IN = object()


def _pin_function(tx, var):
    """The signature is of this very function: its defaults and annotations are its own, not
    its code's (a closure made by a call, guarded by its code only, was another function with
    other defaults on a later call, and got the first one's signature)."""
    if isinstance(var, functions.BoundMethodVariable):
        var = var.func
    pin = getattr(var, "pin_identity", None)
    if pin is not None:
        pin(tx)


@folds(inspect.signature)
def fold_signature(tx, args, kwargs):
    if len(args) != 1:
        raise Unsupported("inspect.signature with extra positional arguments")
    real = real_callable(tx, args[0])
    _pin_function(tx, args[0])
    if lazy_annotations.signature_reads_pending(real):  # (3.14+: it would evaluate them now)
        raise Unsupported("inspect.signature of a function whose annotations are not evaluated "
                          "yet (PEP 649): it runs them, in order, as Python")
    try:
        ckw = {k: v.as_constant() for k, v in kwargs.items()}
    except Unsupported:
        raise Unsupported("inspect.signature with traced keyword arguments")
    try:
        sig = inspect.signature(real, **ckw)
    except (TypeError, ValueError) as e:
        raise UserException(type(e), f"inspect.signature raises {type(e).__name__}: {e} "
                                     f"(the user code raises it)") from e
    return FrozenVariable(sig)



# 3.15's contextlib looks special methods up with inspect.getattr_static (ExitStack.enter_context,
# AsyncExitStack...): type(obj).name found in the MRO and bound, as CPython's own lookup does.
_LOOKUP_SPECIAL = getattr(contextlib, "_lookup_special", None)
if _LOOKUP_SPECIAL is not None:
    @folds(_LOOKUP_SPECIAL)
    def fold_lookup_special(tx, args, kwargs):
        if len(args) != 3 or kwargs or not args[1].is_constant():
            raise Unsupported("contextlib._lookup_special with other arguments")
        obj, name, default = args
        method = objects.special_method(tx, obj, name.as_constant())
        return default if method is None else method


class AnnotationVariable(ObjectVariable):
    """A type annotation (runtime/policy.py ANNOTATIONS): `List`, `Optional[int]`,
    `Dict[str, Tensor]`. Immutable; a subscript on arguments the trace knows as Python objects
    (constants, classes, other annotations) is evaluated on the real object (typing caches it,
    the result is the same object each time), and so are attribute reads (`__origin__`,
    `__args__`). Pinned by identity where it has a source."""

    def getitem(self, tx, key):
        try:
            real = self.value[python_object(key)]
        except TypeError as e:
            raise UserException(TypeError, f"{self.value!r}[...] raises TypeError: {e} (the user code raises it)") from e
        return builder.wrap(tx, real, None)

    def getattr(self, tx, name):
        try:
            return _wrap_typing(tx, getattr(self.value, name))
        except AttributeError as e:
            raise UserException(AttributeError, f"{e} (the user code raises AttributeError)") from e

    def truthy(self, tx):
        return bool(self.value)

    def __repr__(self):
        return f"Annotation({self.value!r})"


def class_subscript(tx, cls_var, key):
    """`list[int]`, `dict[str, Tensor]`: a class whose `__class_getitem__` is C's (builtins,
    collections: it builds a types.GenericAlias and nothing else), on a known key."""
    cls = cls_var.as_python_object()
    entry = objects.lookup_type_attr(cls, "__class_getitem__")[0] if isinstance(cls, type) else None
    if not isinstance(entry, types.ClassMethodDescriptorType):
        raise Unsupported(f"subscript of {cls_var}")
    return builder.wrap(tx, cls[python_object(key)], None)


def _annotation_operand(value):
    return value is None or policy.is_annotation(value) or \
        isinstance(value, type) and type(value).__or__ is type.__or__


def annotation_union(tx, a, b):
    """`int | None`, `Tensor | list[int]`: a union of annotations (type.__or__, typing's
    __or__: pure constructors), or None when an operand is something else."""
    try:
        av, bv = python_object(a), python_object(b)
    except Unsupported:
        return None
    if not (_annotation_operand(av) and _annotation_operand(bv)) or (av is None and bv is None):
        return None
    return builder.wrap(tx, av | bv, None)


@folds(torch.jit.annotate)
def fold_jit_annotate(tx, args, kwargs):
    """torch.jit.annotate(the_type, the_value) returns the_value (the type is for TorchScript)."""
    bound = dict(zip(("the_type", "the_value"), args), **kwargs)
    if len(bound) != 2 or len(args) > 2:
        raise Unsupported("torch.jit.annotate with other arguments")
    return bound["the_value"]


def _fold_typing(fn):
    """typing.get_origin / get_args of an annotation: a pure function of an immutable typing
    object (Union[int, None], int | None, list[str]); specialised on its identity."""
    def fold(tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported(f"typing.{fn.__name__} with extra arguments")
        tp = args[0]
        real = tp.as_constant() if tp.is_constant() else python_object(tp)
        if tp.source is not None and not tp.is_constant():
            tx.guard(IdMatch(tp.source, real))
        return _wrap_typing(tx, fn(real))
    return fold


def _wrap_typing(tx, value):
    if type(value) is tuple:
        return containers.TupleVariable([_wrap_typing(tx, v) for v in value])
    if type(value) is list:  # Callable[[args], ret] unflattened
        return containers.ListVariable([_wrap_typing(tx, v) for v in value])
    return builder.wrap(tx, value, None)


folds(typing.get_origin)(_fold_typing(typing.get_origin))
folds(typing.get_args)(_fold_typing(typing.get_args))


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import functions, containers, builder, objects, lazy_annotations  # noqa: E402
