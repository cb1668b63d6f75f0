"""Descriptors found on a class: what reading one gives, and the one store into one that the
trace records (a `__slots__` member).

A class attribute whose type has `__get__` is not what a read of it gives: CPython calls
`type(d).__get__(d, obj, cls)` (obj None for a read on the class itself, `Cls.attr`). A guard
that read such an attribute again would run that `__get__` on every check: user code, whose
value may change from one read to the next (a `classproperty`). So the trace never reads
through a descriptor that runs Python: a Python `__get__` is inlined like any method, the
descriptor object pinned by the caller's guard on the class's raw entry; a C `__get__` is
relied on only where it gives the descriptor itself back (a function, a property, a C method
read on the class), which the class's own guard may then re-read.
"""
import contextlib
import types

from guards.sources import ConstSource

from ..exc import Unsupported, UserException
from .base import is_heap_type

# C descriptors whose `__get__(None, cls)` is the descriptor itself, known without calling it
_ITSELF_ON_CLASS = (types.FunctionType, property, types.GetSetDescriptorType, types.MemberDescriptorType,
                    types.MethodDescriptorType, types.WrapperDescriptorType)


def python_get(attr):
    """`type(attr).__get__` where it is a Python function (a user descriptor's), else None:
    no `__get__`, or a C one."""
    get = objects.lookup_type_attr(type(attr), "__get__")[0]
    return get if isinstance(get, types.FunctionType) else None


def call_get(tx, attr, instance, owner):
    """`type(attr).__get__(attr, instance, owner)`, inlined. The caller has guarded that the
    class still holds `attr` itself (its raw entry), so the descriptor is read through a
    constant source: what `__get__` reads of it (`self.fget`) is guarded on that object. Which
    `__get__` its type has is guarded here (patching the descriptor class recompiles)."""
    dtype = type(attr)
    get, _ = objects.guarded_type_lookup(tx, ConstSource(dtype), dtype, "__get__")
    desc = builder.wrap(tx, attr, ConstSource(attr))
    return functions.UserFunctionVariable(get).call(tx, [desc, instance, owner], {})


def metaclass_get(tx, cls_var, name, meta_attr):
    """`Cls.name` answered by the metaclass's `meta_attr` (a property, a descriptor, a
    method): bound to the class as to an instance of the metaclass. Which entry the metaclass
    holds is guarded; the class's own guards fix which metaclass it is."""
    meta = type(cls_var.value)
    objects.guarded_type_lookup(tx, objects.class_source(cls_var), meta, name)
    return objects.bind_class_attr(tx, meta_attr, cls_var, meta)


@contextlib.contextmanager
def metaclass_getattr_refused(tx, cls_var, name):
    """Around `Cls.name` as type.__getattribute__ gives it: an AttributeError it raises (no
    such attribute, or one a descriptor's `__get__` raised) is the read's answer only where the
    metaclass has no `__getattr__` (guarded); CPython asks that one otherwise (3.11's EnumType
    has one): a break there, not a guess."""
    try:
        yield
    except UserException as e:
        if not issubclass(e.exc_type, AttributeError):
            raise
        meta = type(cls_var.value)
        if objects.guarded_type_lookup(tx, objects.class_source(cls_var), meta, "__getattr__")[1] is None:
            raise
        raise Unsupported(f"{cls_var.value.__name__}.{name} raised AttributeError, which the metaclass "
                          f"{meta.__name__}'s __getattr__ answers") from None


def reads_as_itself(attr, cls):
    """Whether `Cls.name`, with the class's MRO holding `attr`, gives `attr` itself: plain
    data, or a C descriptor that gives itself back on the class. A C descriptor of a kind not
    known here is asked once (its `__get__` is a C slot, as the guard that re-reads it would
    run on every call); a `__get__` written in Python is never called here."""
    get = objects.lookup_type_attr(type(attr), "__get__")[0]
    if get is None or type(attr) in _ITSELF_ON_CLASS:
        return True
    if type(get) is not types.WrapperDescriptorType:  # Python code (a staticmethod __get__ too)
        return False
    try:
        return get(attr, None, cls) is attr
    except Exception:  # noqa: BLE001 - a C __get__ that refuses the class: not read through
        return False


def is_slot(attr):
    """A member descriptor a Python class's `__slots__` made (by the mangled name it holds):
    storing any object into it, or deleting it, succeeds on an instance of that class. A C
    type's members (a heap type's too: functools.partial's `func`) may be read-only."""
    if type(attr) is not types.MemberDescriptorType:
        return False
    owner = attr.__objclass__
    return is_heap_type(owner) and attr.__name__ in _slot_names(owner)


def stores_to_slot(attr, obj, name):
    """Whether `obj.name = v`, with type(obj)'s MRO holding `attr` under `name`, is a plain
    store into obj's own slot `name` (so it cannot fail, and a read of `obj.name` gives `v`)."""
    return is_slot(attr) and attr.__name__ == name and isinstance(obj, attr.__objclass__)


def _slot_names(owner):
    """The member names `owner`'s own `__slots__` declared, mangled as the class statement
    mangled them. A `__slots__` that is not a plain collection (an iterator, spent once the
    class was made) declares nothing here."""
    slots = owner.__dict__.get("__slots__", ())
    if isinstance(slots, str):
        slots = (slots,)
    if not isinstance(slots, (tuple, list, dict, set, frozenset)):
        return ()
    return {_mangle(owner.__name__, s) for s in slots if isinstance(s, str)}


def _mangle(cls_name, name):
    """`__x` declared in class `_C` is the member `_C__x` (CPython's _Py_Mangle)."""
    stripped = cls_name.lstrip("_")
    if not name.startswith("__") or name.endswith("__") or "." in name or not stripped:
        return name
    return f"_{stripped}{name}"


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions.
from . import builder, functions, objects  # noqa: E402
