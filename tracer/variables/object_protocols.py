"""bool(), len(), hash() and the operators of objects of user classes, as CPython's type
slots run them.

`if o:` and `len(o)` call the class's `__bool__` or `__len__` (looked up on the type, the
lookup guarded), and CPython checks their answers before using them: `__bool__` must return
a bool exactly (slot_nb_bool: TypeError otherwise), `__len__` an index that is >= 0 and fits
a Py_ssize_t (slot_sq_length: TypeError, ValueError, OverflowError). Taking the answer's
truth instead turned the user's TypeError into a result. A constant answer is checked by
CPython itself, on a bare class that returns it, so the exception and its wording are the
running version's.

`a + b`, `-a`, `a += b`, `a < b` with a user object as an operand follow CPython's protocol
(binary_op1, binary_iop1, do_richcompare): the left operand's method, NotImplemented passing
the turn to the right operand's reflected one (first when the right one's class is a subclass
that overrides it), `__iadd__` before `__add__`; the methods, Python functions looked up on the
classes (guarded), are inlined. The other operand may be a builtin value whose own operator
refuses a type it does not know (numbers, strings, None, tuples, lists: `declines`); anything
that would reach another operand's method, or a TypeError's fallback to sequence
concatenation, is a break, where it runs natively.
"""
import functools
import operator
import types

from ..exc import Unsupported
from .base import ConstantVariable, is_heap_type, known_type, tp_name
from .exceptions import user_error, user_errors

_REFLECTED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_RICH = {"<": "__lt__", "<=": "__le__", ">": "__gt__", ">=": "__ge__", "==": "__eq__", "!=": "__ne__"}
_DECLINED = object()  # an operand's method is missing or answered NotImplemented
_DECLINING_TYPES = (int, float, complex, bool, type(None), str, bytes, tuple, list)


def truthy(tx, obj):
    """bool(obj): the class's __bool__ (its answer a bool, checked), else len(obj) != 0, else
    True."""
    attr, owner = _type_entry(tx, obj, "__bool__")
    if owner is None:
        if _type_entry(tx, obj, "__len__")[1] is None:
            return True
        return obj.length(tx) != 0  # (the object's own: a dict subclass's storage, say)
    return _bool_answer(tx, _call_special(tx, obj, attr), obj.python_type())


def length(tx, obj):
    """len(obj): the class's __len__, its answer checked; CPython's TypeError without one."""
    attr, owner = _type_entry(tx, obj, "__len__")
    if owner is None:
        raise user_error(TypeError, f"object of type '{tp_name(obj.python_type())}' has no len()")
    n = _call_special(tx, obj, attr)
    if not n.is_constant():  # (a symbolic size: which exception, if any, is not known here)
        raise Unsupported(f"len() of a {obj.python_type().__name__} object is not a constant")
    value = n.as_constant()
    return user_errors(lambda: len(_answering("__len__", value, obj.python_type())), "len()")


def _bool_answer(tx, result, cls):
    """What bool() makes of __bool__'s answer: a bool is itself; anything else is CPython's
    TypeError naming its type (a tensor's included, which eager never asks for its value),
    raised by CPython's own check on an answer of that type."""
    if result.is_constant():
        value = result.as_constant()
        return user_errors(lambda: bool(_answering("__bool__", value, cls)), "bool()")
    t = known_type(result)
    if t is None:
        raise Unsupported(f"bool() of an object whose __bool__ gave {result}")
    if t is not bool:
        try:
            value = t.__new__(t)  # (any object of the type: CPython's check reads only its type)
        except Exception:  # noqa: BLE001 - a type that cannot be made bare: not known here
            raise Unsupported(f"bool() of an object whose __bool__ gave a {tp_name(t)}") from None
        user_errors(lambda: bool(_answering("__bool__", value, cls)), "bool()")
    return result.truthy(tx)


def _answering(name, value, cls):
    """An object of a bare class whose special method `name` returns `value`: CPython's own
    check of that answer, run on it, raises what the user's class `cls` raises (the stand-in
    is named as `cls` is: CPython 3.15 names the class in the message)."""
    stand_in = type(cls.__name__, (), {name: lambda self: value})
    stand_in.__module__, stand_in.__qualname__ = cls.__module__, cls.__qualname__
    return stand_in()


def _type_entry(tx, obj, name):
    """type(obj)'s entry for `name` ((entry, owner), owner None when missing), guarded on the
    class still giving it."""
    return objects.guarded_type_lookup(tx, objects.class_source(obj), obj.python_type(), name)


def _call_special(tx, obj, attr):
    """The special method `attr` of obj's class called on obj: a Python function inlined, a
    builtin base's method on the object's own storage (bind_class_attr); others a break."""
    return objects.bind_class_attr(tx, attr, obj, obj.python_type()).call(tx, [], {})


def hash_of(tx, obj):
    """hash(obj): the class's Python __hash__, its answer converted as CPython does (an int
    that does not fit is hashed, -1 becomes -2; anything else a TypeError); `__hash__ = None`
    (a class defining __eq__ alone) is CPython's "unhashable type" TypeError. object's own
    hash (the object's address) is not known to the trace: a break."""
    attr, owner = _type_entry(tx, obj, "__hash__")
    if owner is not None and attr is None:
        bare = type(obj.python_type().__name__, (), {"__hash__": None})()
        user_errors(lambda: hash(bare), "hash()")
    if not isinstance(attr, types.FunctionType):
        raise Unsupported(f"hash() of {obj} (its class's __hash__ is {type(attr).__name__})")
    n = _call_special(tx, obj, attr)
    if not n.is_constant():
        raise Unsupported(f"hash() of {obj}: its __hash__ gave {n}")
    value = n.as_constant()
    return user_errors(lambda: hash(_answering("__hash__", value, obj.python_type())), "hash()")


# ---- operators ----------------------------------------------------------------------------
def is_user_object(var):
    """An object of a user class whose only builtin base is object: its operators are its
    class's Python methods or object's (a builtin base's own slots, int's or dict's, are not
    modelled here)."""
    if not isinstance(var, (objects.UserObjectVariable, new_objects.NewObjectVariable)):
        return False
    return all(is_heap_type(k) or k is object for k in var.python_type().__mro__)


def declines(var, name):
    """Whether var's own operator `name` answers NotImplemented against a user object, as the
    builtin types' operators do for a type they do not know (a string's `%` formats it)."""
    t = known_type(var)
    if t not in _DECLINING_TYPES or t in (str, bytes) and name in ("mod", "imod"):
        return False
    return var.is_constant() or t in (tuple, list) and isinstance(var, containers.BaseSequence)


def handles_binary(name, a, b):
    """Whether `a <name> b` is the user-object protocol's: the left operand a user object, or a
    declining value beside one."""
    if name in ("is_", "is_not"):
        return False
    return is_user_object(a) or is_user_object(b) and declines(a, name)


def binary_op(tx, name, a, b):
    """`a <name> b` (operator-module names: "add", "iadd", "and_"), as binary_iop1/binary_op1."""
    inplace = name.startswith("i")
    dunder = (name[1:] if inplace else name).rstrip("_")
    if inplace and is_user_object(a):
        found = _answer(_method(tx, a, f"__i{dunder}__", [b]))
        if found is not _DECLINED:
            return found
    ta, tb = a.python_type(), b.python_type()
    left = functools.partial(_side, tx, a, f"__{dunder}__", b, name)
    right = functools.partial(_side, tx, b, f"__r{dunder}__", a, name)
    tried_right = False
    if ta is not tb and is_user_object(b) and issubclass(tb, ta) and _overrides(tx, b, a, f"__r{dunder}__"):
        tried_right, found = True, right()
        if found is not _DECLINED:
            return found
    found = left()
    if found is _DECLINED and ta is not tb and not tried_right:
        found = right()
    if found is _DECLINED:
        _raise_unsupported_operands(name, a, b)
    return found


def _raise_unsupported_operands(name, a, b):
    """Neither operand answered: CPython's TypeError ("unsupported operand type(s) for +: 'V'
    and 'int'"), from the operator run on stand-ins (a bare class of the same name, the
    constant itself). A sequence operand would be concatenated or repeated instead (`[1] + v`
    iterates v), and a non-constant one cannot stand in: a break, where it runs natively."""
    stand_ins = []
    for v in (a, b):
        if is_user_object(v):
            stand_ins.append(type(v.python_type().__name__, (), {})())
        elif v.is_constant() and not isinstance(v.as_constant(), (str, bytes, tuple, list)):
            stand_ins.append(v.as_constant())
        else:
            raise Unsupported(f"operator {name} on {a} and {b}: neither operand's method answers "
                              f"(the user code falls back to the sequence's own operator)")
    user_errors(lambda: getattr(operator, name)(*stand_ins), f"operator {name}")
    raise Unsupported(f"operator {name} on {a} and {b}")  # (not reached: stand-ins have no operators)


def unary_op(tx, name, a):
    """`-a`, `+a`, `~a`, abs(a): the class's method, its answer whatever it is."""
    found = _method(tx, a, f"__{name}__", [])
    if found is None:
        raise Unsupported(f"unary {name} of {a}, whose class has no __{name}__ (the user code raises TypeError)")
    return found


def handles_compare(tx, op, a, b):
    """Whether `a <op> b` is the user-object protocol's: a user object beside a user object or
    a declining value; for `==`/`!=`, one of whose classes defines it (or its reflection)
    itself (object's alone, identity decides: operators.compare)."""
    users = [v for v in (a, b) if is_user_object(v)]
    if not users or not all(is_user_object(v) or declines(v, op) for v in (a, b)):
        return False
    if op not in ("==", "!="):  # (object's orderings answer nothing: CPython's TypeError)
        return True
    names = {_RICH[op], _RICH[_REFLECTED[op]]} | ({"__eq__"} if op == "!=" else set())
    return any(_type_entry(tx, v, n)[0] not in _OBJECT_SLOTS for v in users for n in names)


def compare(tx, op, a, b):
    """`a <op> b`, as do_richcompare: the reflected method of a right operand whose class is a
    subclass first, the left operand's, the right one's reflected; neither answering, `==`
    and `!=` are identity, an ordering CPython's TypeError."""
    ta, tb = a.python_type(), b.python_type()
    reflected = _REFLECTED[op]
    checked_reverse = ta is not tb and issubclass(tb, ta)
    if checked_reverse:
        found = _rich(tx, b, reflected, a)
        if found is not _DECLINED:
            return found
    found = _rich(tx, a, op, b)
    if found is _DECLINED and not checked_reverse:
        found = _rich(tx, b, reflected, a)
    if found is not _DECLINED:
        return found
    if op in ("==", "!="):
        same = operators.identical(tx, a, b)
        return ConstantVariable(same if op == "==" else not same)
    raise user_error(TypeError, f"'{op}' not supported between instances of '{tp_name(ta)}' and '{tp_name(tb)}'")


def _rich(tx, obj, op, other):
    """obj's comparison `op` with other: its class's Python method; object's own (`==`: True
    when they are one object, `!=`: the class's `==` inverted, orderings: NotImplemented); a
    builtin value's: NotImplemented."""
    if not is_user_object(obj):
        return _DECLINED
    name = _RICH[op]
    attr, _ = _type_entry(tx, obj, name)
    if attr is object.__eq__:
        return ConstantVariable(True) if operators.identical(tx, obj, other) else _DECLINED
    if attr is object.__ne__:
        eq = _rich(tx, obj, "==", other)
        return eq if eq is _DECLINED else ConstantVariable(not eq.truthy(tx))
    if attr in _OBJECT_SLOTS:
        return _DECLINED
    return _answer(_method(tx, obj, name, [other]))


_OBJECT_SLOTS = tuple(object.__dict__[n] for n in _RICH.values())


def _side(tx, obj, method, other, name):
    """One operand's turn in a binary operator: a user object's method (or _DECLINED), a
    declining builtin value's NotImplemented; any other value's method is not modelled here."""
    if is_user_object(obj):
        return _answer(_method(tx, obj, method, [other]))
    if declines(obj, name):
        return _DECLINED
    raise Unsupported(f"operator {name}: {method} of {obj} beside {other}")


def _overrides(tx, sub, base, name):
    """Whether the right operand's class (a subclass of the left one's) has its own reflected
    method, not the one the left one's class has (CPython's method_is_overloaded)."""
    mine, owner = _type_entry(tx, sub, name)
    return owner is not None and mine is not _type_entry(tx, base, name)[0]


def _method(tx, obj, name, args):
    """obj's special method `name` called with args: a Python function of its class inlined;
    None when the class has none; anything else (a C function, `__add__ = None`) a break."""
    attr, owner = _type_entry(tx, obj, name)
    if owner is None:
        return None
    if not isinstance(attr, types.FunctionType):
        raise Unsupported(f"{obj.python_type().__name__}.{name} is a {type(attr).__name__}, not a Python function")
    return objects.bind_class_attr(tx, attr, obj, obj.python_type()).call(tx, args, {})


def _answer(result):
    """A method's answer in the operator protocols: None (no method) and NotImplemented pass
    the turn on."""
    if result is None or result.is_constant() and result.as_constant() is NotImplemented:
        return _DECLINED
    return result


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, new_objects, objects, operators  # noqa: E402
