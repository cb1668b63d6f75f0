"""Structural pattern matching (`match` statements): MATCH_SEQUENCE, MATCH_MAPPING,
MATCH_KEYS, MATCH_CLASS. (GET_LEN, UNPACK_*, COPY and the jumps are shared with other code.)

Each decides on what the trace knows exactly: the subject's type (guarded), the keys of a
dict, the attributes of an object. A subject whose type is not known is Unsupported.
"""
from ...exc import Unsupported, UserException
from ...variables.exceptions import user_error
from ...variables.base import ConstantVariable, python_object
from ...variables.builder import wrap
from ...variables.containers import TupleVariable
from ...variables.new_objects import NewObjectVariable
from .registry import handler
from ...variables.builtins_impl import call_builtin
from ...variables.operators import values_equal

_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
# Builtins whose single positional sub-pattern matches the subject itself (`case int(n)`).
_SELF_MATCH = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _subject_type(var):
    return var.python_type()


@handler("MATCH_SEQUENCE")
def MATCH_SEQUENCE(tx, inst):
    t = _subject_type(tx.stack[-1])
    tx.push(ConstantVariable(bool(t.__flags__ & _TPFLAGS_SEQUENCE)))


@handler("MATCH_MAPPING")
def MATCH_MAPPING(tx, inst):
    t = _subject_type(tx.stack[-1])
    tx.push(ConstantVariable(bool(t.__flags__ & _TPFLAGS_MAPPING)))


@handler("MATCH_KEYS")
def MATCH_KEYS(tx, inst):
    """TOS: the tuple of keys; TOS1: the mapping. Push the tuple of values, or None. As
    CPython's match_keys: the mapping's `get`, read once, called as get(key, sentinel) for each
    key after the duplicate check, the sentinel back meaning "missing": a dict subclass's own
    get decides, and neither its __contains__ nor its __getitem__ (nor __missing__) runs."""
    keys = tx.stack[-1].iterate(tx)
    subject = tx.stack[-2]
    if not keys:  # (no keys: no lookup at all)
        tx.push(TupleVariable([]))
        return
    get = subject.getattr(tx, "get")
    missing = NewObjectVariable(object)  # CPython's fresh `object()`, passed as the default
    seen = []
    values = []
    for key in keys:
        if not key.is_constant():
            raise Unsupported("a mapping pattern key that is not a constant")
        if any(values_equal(tx, key, s) for s in seen):
            raise user_error(ValueError, f"mapping pattern checks duplicate key ({key.as_constant()!r})")
        seen.append(key)
        value = get.call(tx, [key, missing], {})
        if value is missing:
            tx.push(ConstantVariable(None))
            return
        values.append(value)
    tx.push(TupleVariable(values))


@handler("MATCH_CLASS")
def MATCH_CLASS(tx, inst):
    """TOS: keyword attribute names; TOS1: the class; TOS2: the subject. Push the tuple of
    the attributes the sub-patterns match against, or None when the subject is not one."""
    names = tx.pop().as_constant()
    cls = python_object(tx.pop())
    subject = tx.pop()
    if not isinstance(cls, type):
        raise user_error(TypeError, "called match pattern must be a class")
    if not call_builtin(tx, isinstance, [subject, wrap(tx, cls, None)], {}).truthy(tx):
        tx.push(ConstantVariable(None))
        return
    count = inst.arg
    attrs = []
    if count:
        match_args = getattr(cls, "__match_args__", None)
        if match_args is None:
            if cls in _SELF_MATCH and count == 1:
                match_args = None
            else:
                raise user_error(TypeError, f"{cls.__name__}() accepts 0 positional sub-patterns ({count} given)")
        elif not isinstance(match_args, tuple):
            raise user_error(TypeError, f"{cls.__name__}.__match_args__ must be a tuple (got {type(match_args).__name__})")
        elif count > len(match_args):
            raise user_error(TypeError, f"{cls.__name__}() accepts {len(match_args)} positional sub-pattern"
                                        f"{'' if len(match_args) == 1 else 's'} ({count} given)")
        attrs = list(match_args[:count]) if match_args is not None else [None]
    attrs += list(names)
    values = []
    for name in attrs:
        if name is None:
            values.append(subject)
            continue
        try:
            values.append(subject.getattr(tx, name))
        except UserException as e:
            if issubclass(e.exc_type, AttributeError):
                tx.push(ConstantVariable(None))
                return
            raise
    tx.push(TupleVariable(values))
