"""operator.itemgetter and operator.attrgetter made in the traced frame.

Why a module of their own: each is a C object with no `__dict__` and no Python code to
inline, so the trace could neither build one nor call one (a break at each). Their whole
behaviour is CPython's `itemgetter_call` / `attrgetter_call`: `obj[key]` for each key,
`getattr(obj, part)` for each dotted part of each name, one result or a tuple of them. The
trace models exactly that, through its own subscript and attribute operators, so what they
read of `obj` is guarded as a plain `obj[1]` or `obj.shape` would be.
"""
import operator

from guards import Predicate, TypeMatch

from ..exc import Unsupported
from .base import ConstantVariable, Variable, check_builtin_attr, is_constant_value
from .containers import TupleVariable
from .exceptions import user_error

class _GetterVariable(Variable):
    """A getter made in the frame: `args` are the Variables it was made from (rebuilt from
    them at a break); calling it applies `_get` to its one argument for each of them."""

    CLS = None

    def __init__(self, args, source=None):
        super().__init__(source)
        self.args = list(args)

    def python_type(self):
        return self.CLS

    def truthy(self, tx):
        return True

    def call(self, tx, args, kwargs):
        name = self.CLS.__name__
        if kwargs:
            raise user_error(TypeError, f"{name}() takes no keyword arguments")
        if len(args) != 1:
            raise user_error(TypeError, f"{name} expected 1 argument, got {len(args)}")
        values = [self._get(tx, args[0], a) for a in self.args]
        return values[0] if len(values) == 1 else TupleVariable(values)

    def _get(self, tx, obj, arg):
        raise NotImplementedError

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        cg.call_with(self.CLS, self.args)

    def __repr__(self):
        return f"{self.CLS.__name__}({', '.join(map(repr, self.args))})"


class ItemGetterVariable(_GetterVariable):
    """`operator.itemgetter(*keys)`: `obj[key]` for each key (any Variable: the subscript
    decides what it means for `obj`)."""

    CLS = operator.itemgetter

    def _get(self, tx, obj, key):
        return obj.getitem(tx, key)


class AttrGetterVariable(_GetterVariable):
    """`operator.attrgetter(*names)`: `obj.a.b` for a name "a.b", read as LOAD_ATTR reads it
    (a builtin type's missing attribute is CPython's AttributeError at the call)."""

    CLS = operator.attrgetter

    def _get(self, tx, obj, name):
        for part in name.as_constant().split("."):
            check_builtin_attr(obj, part)
            obj = obj.getattr(tx, part)
        return obj


def _made_from(args):
    return lambda getter: getter.__reduce__()[1] == args


def wrap_input(tx, value, source, g):
    """A getter passed in (or made before a break and handed to the resume function): its
    exact type and the constants it was made from (what its __reduce__ gives, compared on
    every call); a getter of other keys (a tensor) is not modelled."""
    t = type(value)
    args = value.__reduce__()[1]
    if not all(is_constant_value(a) for a in args):
        raise Unsupported(f"an operator.{t.__name__} of keys that are not constants")
    g(TypeMatch(source, t))
    g(Predicate.made(source, _made_from, (args,), f"an operator.{t.__name__} of {args!r}"))
    cls = ItemGetterVariable if t is operator.itemgetter else AttrGetterVariable
    return cls([ConstantVariable(a) for a in args], source)


def _made_with(name, args, kwargs):
    """CPython's TypeErrors for a getter made without arguments or with keywords."""
    if kwargs:
        raise user_error(TypeError, f"{name}() takes no keyword arguments")
    if not args:
        raise user_error(TypeError, f"{name} expected 1 argument, got 0")


def _itemgetter(tx, *keys, **kwargs):
    _made_with("itemgetter", keys, kwargs)
    return ItemGetterVariable(keys)


def _attrgetter(tx, *names, **kwargs):
    """Names are checked when the getter is made, as CPython checks them: strings only."""
    _made_with("attrgetter", names, kwargs)
    for n in names:
        if not n.is_constant():
            raise Unsupported("operator.attrgetter() of a name that is not a constant")
        if not isinstance(n.as_constant(), str):
            raise user_error(TypeError, "attribute name must be a string")
    return AttrGetterVariable([ConstantVariable(n.as_constant()) for n in names])


IMPLS = {operator.itemgetter: _itemgetter, operator.attrgetter: _attrgetter}
