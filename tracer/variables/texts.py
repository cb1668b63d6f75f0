"""str() and repr() of values whose text the trace can know without a real object.

A class object's default text names it; a builtin exception with constant arguments is made
for real and asked; an object of a user class whose own `__str__` / `__repr__` is Python has
that method traced. Object's default text holds the object's address, which only the real
object has: those are graph breaks (the call runs natively).
"""
import types

from ..exc import Unsupported
from .base import ConstantVariable


def str_of(tx, var):
    """`str(var)` of a value that is not a constant."""
    text = _user_text(tx, var, ("__str__", "__repr__"))
    if text is not None:
        return text
    meta = type(var.cls) if isinstance(var, objects.ClassVariable) else None
    if meta is not None and meta.__repr__ is type.__repr__ and meta.__str__ is object.__str__:
        return ConstantVariable(str(var.cls))  # "<class 'm.C'>": fixed by the class's identity
    text = _exception_str(var)
    if text is not None:
        return ConstantVariable(text)
    raise Unsupported(f"str() of {var}")


def repr_of(tx, var):
    """`repr(var)`, or None when the caller should fold it from a constant."""
    text = _user_text(tx, var, ("__repr__",))
    if text is not None:
        return text
    exc = _constant_exception(var)
    return ConstantVariable(repr(exc)) if exc is not None else None


def _user_text(tx, var, names):
    """str(obj) / repr(obj) of an object of a user class whose own `__str__` / `__repr__` (the
    first of `names` the class defines beyond object's) is a Python function: that method,
    traced; None when the text would be object's default (it holds the object's address)."""
    try:
        cls = var.python_type()
    except Unsupported:
        return None
    if not isinstance(cls, type) or not new_objects.is_user_class(cls) or \
            not isinstance(var, (new_objects.NewObjectVariable, objects.UserObjectVariable)):
        return None
    for name in names:
        attr, owner = objects.lookup_type_attr(cls, name)
        if owner is object:
            continue  # object.__str__ is repr(): the next name
        if not isinstance(attr, types.FunctionType):
            return None
        out = objects.special_method(tx, var, name).call(tx, [], {})
        if not (out.is_constant() and type(out.as_constant()) is str):
            raise Unsupported(f"{cls.__name__}.{name} returned {out} (the user code raises TypeError "
                              f"unless it is a str)")
        return out
    return None


def _exception_str(var):
    """str(e) for a builtin exception with constant arguments (e.g. the AttributeError of a
    traced attribute miss, caught by `except AttributeError as e`); None otherwise."""
    if not isinstance(var, exceptions.ExceptionVariable) or not exceptions.is_modelled_exception(var.cls):
        return None
    if not all(a.is_constant() for a in var.args):
        return None
    return str(var.cls(*(a.as_constant() for a in var.args)))


def _constant_exception(var):
    """A real exception equal to an ExceptionVariable whose args are constants (for str/repr)."""
    if isinstance(var, exceptions.ExceptionVariable) and all(a.is_constant() for a in var.args):
        return var.cls(*(a.as_constant() for a in var.args))
    return None


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import exceptions, new_objects, objects  # noqa: E402
