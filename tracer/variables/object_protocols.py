"""bool() and len() of objects of user classes, as CPython's type slots run them.

`if o:` and `len(o)` call the class's `__bool__` or `__len__` (looked up on the type, the
lookup guarded), and CPython checks their answers before using them: `__bool__` must return
a bool exactly (slot_nb_bool: TypeError otherwise), `__len__` an index that is >= 0 and fits
a Py_ssize_t (slot_sq_length: TypeError, ValueError, OverflowError). Taking the answer's
truth instead turned the user's TypeError into a result. A constant answer is checked by
CPython itself, on a bare class that returns it, so the exception and its wording are the
running version's.
"""
from ..exc import Unsupported
from .base import known_type, tp_name
from .exceptions import user_error, user_errors


def truthy(tx, obj):
    """bool(obj): the class's __bool__ (its answer a bool, checked), else len(obj) != 0, else
    True."""
    attr, owner = _type_entry(tx, obj, "__bool__")
    if owner is None:
        if _type_entry(tx, obj, "__len__")[1] is None:
            return True
        return obj.length(tx) != 0  # (the object's own: a dict subclass's storage, say)
    return _bool_answer(tx, _call_special(tx, obj, attr))


def length(tx, obj):
    """len(obj): the class's __len__, its answer checked; CPython's TypeError without one."""
    attr, owner = _type_entry(tx, obj, "__len__")
    if owner is None:
        raise user_error(TypeError, f"object of type '{tp_name(obj.python_type())}' has no len()")
    n = _call_special(tx, obj, attr)
    if not n.is_constant():  # (a symbolic size: which exception, if any, is not known here)
        raise Unsupported(f"len() of a {obj.python_type().__name__} object is not a constant")
    value = n.as_constant()
    return user_errors(lambda: len(_answering("__len__", value)), "len()")


def _bool_answer(tx, result):
    """What bool() makes of __bool__'s answer: a bool is itself; anything else is CPython's
    TypeError naming its type (a tensor's included, which eager never asks for its value)."""
    if result.is_constant():
        value = result.as_constant()
        return user_errors(lambda: bool(_answering("__bool__", value)), "bool()")
    t = known_type(result)
    if t is None:
        raise Unsupported(f"bool() of an object whose __bool__ gave {result}")
    if t is not bool:
        raise user_error(TypeError, f"__bool__ should return bool, returned {tp_name(t)}")
    return result.truthy(tx)


def _answering(name, value):
    """An object of a bare class whose special method `name` returns `value`: CPython's own
    check of that answer, run on it, raises what the user's class raises."""
    return type("answer", (), {name: lambda self: value})()


def _type_entry(tx, obj, name):
    """type(obj)'s entry for `name` ((entry, owner), owner None when missing), guarded on the
    class still giving it."""
    return objects.guarded_type_lookup(tx, objects.class_source(obj), obj.python_type(), name)


def _call_special(tx, obj, attr):
    """The special method `attr` of obj's class called on obj: a Python function inlined, a
    builtin base's method on the object's own storage (bind_class_attr); others a break."""
    return objects.bind_class_attr(tx, attr, obj, obj.python_type()).call(tx, [], {})


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import objects  # noqa: E402
