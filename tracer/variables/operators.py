"""Binary, unary, comparison, identity and membership operators on Variables.

One dispatch for all of them: tensors become graph ops (`operator.add` etc. as the FX
target), constants are folded with the real operator, sequences are combined item-wise,
and anything else is Unsupported rather than guessed.
"""
import collections
import itertools
import operator
import types

from ..exc import Unsupported, UserException
from .exceptions import folding_error, user_errors
from .base import ConstantVariable, UntracedValue, rely_on_identity
from .containers import (BaseSequence, DictVariable, DictViewVariable, ListVariable, SizeVariable,
                         TupleVariable)
from .sets import SetVariable
from .sym import is_relation, is_sym, sym_binary, sym_compare, sym_unary
from .numpy_vars import NdarrayVariable
from .tensor import TensorVariable

_CMP = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
        ">": operator.gt, ">=": operator.ge}


def _fold(fn, *values):
    try:
        return ConstantVariable(fn(*values))
    except Exception as e:  # noqa: BLE001 - the user's operator raises it
        raise folding_error(e, f"{fn.__name__}{values!r}") from None


def _items_of(v):
    """A constant tuple or torch.Size as a Variable of its items (of its kind), else v."""
    if isinstance(v, ConstantVariable) and type(v.as_constant()) in (tuple, SizeVariable.kind):
        kind = SizeVariable if type(v.as_constant()) is SizeVariable.kind else TupleVariable
        return kind([ConstantVariable(x) for x in v.as_constant()])
    return v


def _beside_sequence(a, b):
    """(a, b) with a constant tuple or torch.Size beside a sequence of traced values as a
    sequence of its items: the constant's items are values too (`acc = ()`, then `acc +=
    (hidden,)`, as models collect every layer's output; `x.shape == (5, 4)` or `(1,) +
    x.shape` where x's sizes are symbolic; a static `y.shape + (n,)`)."""
    if isinstance(a, BaseSequence):
        return a, _items_of(b)
    if isinstance(b, BaseSequence):
        return _items_of(a), b
    return a, b


def binary_op(tx, name, a, b):
    if object_protocols.handles_binary(name, a, b):  # a user class's own __add__, __radd__...
        return object_protocols.binary_op(tx, name, a, b)
    if isinstance(a, NdarrayVariable) or isinstance(b, NdarrayVariable):
        return numpy_vars.binary_op(tx, name, a, b)
    fn = getattr(operator, name)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if a.is_constant() and name.startswith("i") and name not in ("is_", "is_not"):
            # `n += t` with an immutable n is `n + t` (no __iadd__ on numbers); FX cannot print
            # an in-place op whose target is a literal ("0 += t")
            fn = getattr(operator, name[1:], None) or getattr(operator, name[1:] + "_")
        return torch_calls.call_torch(tx, "call_function", fn, [a, b], {})
    if is_sym(a) or is_sym(b):
        return sym_binary(tx, name, a, b)
    if a.is_constant() and b.is_constant():
        av, bv = a.as_constant(), b.as_constant()
        out = _fold(fn, av, bv)
        value = out.as_constant()
        if type(value) is tuple and value:  # `t * 1`, `t + ()`: CPython gives the operand itself
            return a if value is av else b if value is bv else out
        return out
    inplace = name.startswith("i") and name not in ("is_", "is_not")
    base = name[1:] if inplace else name
    a, b = _beside_sequence(a, b)
    if base == "add" and isinstance(a, BaseSequence) and isinstance(b, BaseSequence):
        if isinstance(a, ListVariable) and isinstance(b, ListVariable):
            if inplace:
                a.call_method(tx, "extend", [b], {})
                return a
            return ListVariable(a.items + b.items)
        if isinstance(a, TupleVariable) and isinstance(b, TupleVariable):
            return _tuple_kind(a, b)(a.items + b.items)
        if isinstance(a, ListVariable) and inplace:
            a.call_method(tx, "extend", [b], {})
            return a
    if base == "add" and isinstance(a, ListVariable) and inplace:
        a.call_method(tx, "extend", [b], {})
        return a
    if base == "mul" and isinstance(a, BaseSequence) and b.is_constant():
        return _repeat(tx, a, b.as_constant(), inplace, lambda seq, n: seq * n)
    if base == "mul" and isinstance(b, BaseSequence) and a.is_constant():
        # (`n *= seq` with an immutable n is `n * seq`: a new sequence)
        return _repeat(tx, b, a.as_constant(), False, lambda seq, n: n * seq)
    if base in ("or_", "or"):  # (ior's base is "or"); `int | None` in an annotation evaluated at run time
        union = introspection.annotation_union(tx, a, b)
        if union is not None:
            return union
        merged = _dict_union(tx, a, b, inplace)
        if merged is not None:
            return merged
    if base == "mod" and a.is_constant() and isinstance(a.as_constant(), str):
        raise Unsupported("%-formatting with non-constant values")
    raise Unsupported(f"operator {name} on {a} and {b}")


def _repeat(tx, seq, n, inplace, op):
    """`seq * n` or `n * seq` (`op`, in the user's order, so that a count that is not an int
    raises CPython's own TypeError naming the right operand), on the sequence's real items."""
    if type(seq) is TupleVariable and n == 1 and type(n) in (int, bool):
        return seq  # CPython gives the tuple itself (`t * 1 is t`; CPython's test_repeat)
    items = list(seq.real_op(lambda c: op(c, n), "sequence repetition"))
    if not isinstance(seq, ListVariable):
        return _tuple_kind(seq)(items)
    if inplace:
        tx.side_effects.mutated(seq)
        seq.items = items
        return seq
    return seq.copied(items)


def _tuple_kind(*operands):
    """The kind of tuple `+` or `*` makes of tuple operands: a torch.Size where either is one
    (torch.Size's __add__, __radd__, __mul__ and __rmul__ answer first: a tuple, a named tuple
    has no number slot of its own), else a plain tuple (a named tuple's are tuple's)."""
    return SizeVariable if any(isinstance(v, SizeVariable) for v in operands) else TupleVariable


def _plain_dict(var):
    """A dict or OrderedDict the trace models whole (not a user subclass with its own methods)."""
    return isinstance(var, DictVariable) and var.user_cls in (dict, collections.OrderedDict)


def _dict_union(tx, a, b, inplace):
    """`a | b` (PEP 584: a copy of a updated from b, a's type) and `a |= b` (a updated from any
    mapping or iterable of pairs, as dict.update), or None when CPython would not get there
    through dict's own operators (a subclass, b's reflected `__ror__` first)."""
    if not _plain_dict(a):
        return None
    if inplace:
        a.call_method(tx, "update", [b], {})
        return a
    if not _plain_dict(b) or (b.user_cls is not a.user_cls and b.user_cls is collections.OrderedDict):
        return None  # (dict | OrderedDict: OrderedDict.__ror__ answers, an OrderedDict)
    new = a.call_method(tx, "copy", [], {})
    new.call_method(tx, "update", [b], {})
    return new


def _never_a_dict(var):
    """A value that `==` with a dict is False for: a builtin constant (None, a str, a number),
    a list or tuple, a set (their __eq__ and dict's refuse each other: identity decides)."""
    if var.is_constant():
        return type(var.as_constant()).__module__ == "builtins"
    return isinstance(var, (BaseSequence, SetVariable)) and var.python_type().__eq__ in (
        list.__eq__, tuple.__eq__, set.__eq__)


def unary_op(tx, name, a):
    if name == "not_" and is_relation(a):
        return sym_unary(tx, name, a)  # (`n not in (5,)`: the relation negated stays symbolic)
    if name in ("not_", "truth"):
        value = a.truthy(tx)
        return ConstantVariable(not value if name == "not_" else value)
    if isinstance(a, NdarrayVariable):
        return numpy_vars.unary_op(tx, name, a)
    fn = getattr(operator, name)
    if isinstance(a, TensorVariable):
        return torch_calls.call_torch(tx, "call_function", fn, [a], {})
    if is_sym(a):
        return sym_unary(tx, name, a)
    if a.is_constant():
        return _fold(fn, a.as_constant())
    if object_protocols.is_user_object(a):
        return object_protocols.unary_op(tx, name, a)
    raise Unsupported(f"unary {name} on {a}")


def identical(tx, a, b):
    """`a is b` when it can be decided at trace time."""
    if isinstance(a, UntracedValue) and b.is_constant() or isinstance(b, UntracedValue) and a.is_constant():
        return False  # (`if sched is not None`: no constant is of a type the tracer does not model; its type is guarded)
    if a is b:
        if not a.is_constant():  # (one Variable reached twice: a block's root found again, blocks.py)
            rely_on_identity(tx, a)
        return True
    if not a.is_constant() and not b.is_constant():  # (vs a constant, the type decides)
        for v in (a, b):
            rely_on_identity(tx, v)
    if a.is_constant() and b.is_constant():
        va, vb = a.as_constant(), b.as_constant()
        if va is None or vb is None or isinstance(va, bool) or isinstance(vb, bool):
            return va is vb
        if type(va) is not type(vb):
            return False
        if a.source is None and b.source is None:
            # both made by this frame's code: the trace made them as CPython does (a literal
            # is its code's constant, `n + 1000` a new int each time), so identity is theirs
            return va is vb
    ka, kb = getattr(a, "identity_key", None), getattr(b, "identity_key", None)
    if ka is not None and kb is not None:
        return ka() == kb()
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        return a.node is b.node
    try:
        if a.python_type() is not b.python_type():
            return False
    except Unsupported:
        pass
    if a.mutable or b.mutable or isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return False  # distinct Variables of mutable kinds are distinct objects (aliasing is memoised)
    raise Unsupported(f"'is' between {a} and {b}")


def _key_set(var):
    """The members of a set made or passed in, or of a dict's keys view, as a real set (keys
    that are objects are compared by identity, as dict keys are), else None."""
    if isinstance(var, SetVariable):
        return var.table
    if isinstance(var, DictViewVariable) and var.kind == "keys" and isinstance(var.dict_var, DictVariable):
        return set(var.dict_var.keys)
    return None


def compare(tx, op, a, b):
    if op in ("is", "is not"):
        same = identical(tx, a, b)
        return ConstantVariable(same if op == "is" else not same)
    if isinstance(a, NdarrayVariable) or isinstance(b, NdarrayVariable):
        return numpy_vars.compare(tx, op, a, b)
    folded = numpy_vars.dtype_compare(op, a, b)
    if folded is not None:
        return folded
    fn = _CMP[op]
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return torch_calls.call_torch(tx, "call_function", fn, [a, b], {})
    if is_sym(a) or is_sym(b):
        return sym_compare(tx, op, a, b)
    if a.is_constant() and b.is_constant():
        return _fold(fn, a.as_constant(), b.as_constant())
    if object_protocols.handles_compare(tx, op, a, b):  # a user class's own __eq__, __lt__...
        return object_protocols.compare(tx, op, a, b)
    a, b = _beside_sequence(a, b)
    if isinstance(a, BaseSequence) and isinstance(b, BaseSequence) and _ordered_alike(op, a, b):
        return _lexicographic(tx, op, a, b)
    if isinstance(a, BaseSequence) and isinstance(b, BaseSequence) and op in ("==", "!="):
        joined = _int_equality(tx, op, a, b)
        if joined is not None:
            return joined
        same = type(a.items) is type(b.items) and len(a.items) == len(b.items) and all(
            values_equal(tx, x, y) for x, y in zip(a.items, b.items))
        if a.python_type() is not b.python_type() and not (
                issubclass(a.python_type(), tuple) and issubclass(b.python_type(), tuple)):
            same = False
        return ConstantVariable(same if op == "==" else not same)
    if isinstance(a, DictVariable) and isinstance(b, DictVariable) and op in ("==", "!="):
        # dict's ==: the same keys, each value equal; two OrderedDicts: in the same order too
        same = a.items.keys() == b.items.keys() and all(
            values_equal(tx, a.items[k], b.items[k]) for k in a.items)
        if same and all(issubclass(v.python_type(), collections.OrderedDict) for v in (a, b)):
            same = list(a.items) == list(b.items)
        return ConstantVariable(same if op == "==" else not same)
    if op in ("==", "!=") and (_plain_dict(a) and _never_a_dict(b) or _plain_dict(b) and _never_a_dict(a)):
        return ConstantVariable(op == "!=")  # (`rope_type == "longrope"` with a dict)
    ka, kb = _key_set(a), _key_set(b)
    if ka is not None and kb is not None:  # sets and keys views compare as sets (<= is subset)
        return ConstantVariable(fn(ka, kb))
    if op in ("==", "!="):
        ka, kb = getattr(a, "identity_key", None), getattr(b, "identity_key", None)
        default_eq = _default_eq(a, op) and _default_eq(b, op)
        if default_eq and (ka is not None or kb is not None or a.is_constant() or b.is_constant()):
            _guard_default_eq(tx, a, op)
            _guard_default_eq(tx, b, op)
            same = identical(tx, a, b)
            return ConstantVariable(same if op == "==" else not same)
    raise Unsupported(f"comparison {op} between {a} and {b}")


def _int_like(var):
    """An int or bool, constant or symbolic: its == is the value's, and never NaN."""
    if is_sym(var):
        return var.python_type() in (int, bool)
    return var.is_constant() and type(var.as_constant()) in (int, bool)


def _int_equality(tx, op, a, b):
    """`a == b` / `a != b` of two tuples (or two lists) of ints of one length, some symbolic
    (`x.shape == (5, 4)`): the items' equalities as _joined answers them. None where that does
    not apply."""
    if len(a.items) != len(b.items) or not _ints_with_a_size((*a.items, *b.items)):
        return None
    kinds = (a.python_type(), b.python_type())
    if not (kinds[0] is kinds[1] or all(issubclass(k, tuple) for k in kinds)):
        return None
    return _joined(tx, op, zip(a.items, b.items), any_=op == "!=")


def _int_membership(tx, container, item):
    """`n in (5, 6)` (a list display after `in` is a constant tuple) or `5 in x.shape`, of ints
    some symbolic, in a tuple, list or torch.Size: any of the items equal to the item, as
    _joined answers it, not the int specialised (a trace per value). None where that does not
    apply."""
    seq = _items_of(container)
    if not isinstance(seq, BaseSequence) or seq.python_type() not in (tuple, list, SizeVariable.kind) or \
            not _ints_with_a_size((item, *seq.items)):
        return None
    return _joined(tx, "==", [(v, item) for v in seq.items], any_=True)


def _ints_with_a_size(values):
    return all(_int_like(v) for v in values) and any(is_sym(v) for v in values)


def _joined(tx, op, pairs, any_):
    """all() (or any(), `any_`) of `x op y` over pairs of ints, as CPython's containers compare
    them: an item equal to itself without asking, the first pair that decides the whole ends
    it (ints compare without side effects: where the trace decides it does not change).

    With one pair of sizes its relation stays symbolic (one graph for every size, as
    torch.compile's); decided, it would be guarded, a trace for the sizes that match and one
    for those that do not. Several are decided pair by pair, each relation guarded: joined,
    they would be a sympy And/Or, which inductor cannot lower where a tensor op uses it
    ("'Or' object has no attribute 'expand'", as in torch.compile's graphs)."""
    pairs = list(pairs)
    several = sum(is_sym(x) or is_sym(y) for x, y in pairs) > 1
    out = None
    for x, y in pairs:
        one = ConstantVariable(op == "==") if x is y else compare(tx, op, x, y)
        if several or one.is_constant():
            if one.truthy(tx) is any_:
                return ConstantVariable(any_)
            continue
        out = one
    return ConstantVariable(not any_) if out is None else out


_ORDER_METHODS = {"<": "__lt__", "<=": "__le__", ">": "__gt__", ">=": "__ge__"}


def _ordered_alike(op, a, b):
    """Whether `a op b` is CPython's ordering of two tuples (torch.Size, named tuples) or two
    lists: both of one of those kinds, neither with a method of its own for `op`."""
    name = _ORDER_METHODS.get(op)
    if name is None:
        return False
    types = (a.python_type(), b.python_type())
    return any(all(issubclass(t, base) and getattr(t, name) is getattr(base, name) for t in types)
               for base in (tuple, list))


def _lexicographic(tx, op, a, b):
    """`a op b` as tuple's and list's richcompare: the first pair of items that is not equal
    (by values_equal, each equality the trace relies on guarded, as a relation for sizes)
    answers with `op` on that pair, which stays symbolic for a size; all equal, the lengths."""
    for x, y in zip(a.items, b.items):
        if not values_equal(tx, x, y):
            return compare(tx, op, x, y)
    return ConstantVariable(_CMP[op](len(a.items), len(b.items)))


def _default_eq(var, op):
    """Whether `==`/`!=` on var is object's identity comparison (a class, whose metaclass is
    type, included: type's slots are object's)."""
    if var.is_constant():  # (a constant of a library type with an __eq__ of its own: no)
        return type(var.as_constant()).__module__ in ("builtins", "torch")
    try:
        t = var.python_type()
    except Unsupported:
        return False
    return t.__eq__ is object.__eq__ and (op == "==" or t.__ne__ is object.__ne__)


def _guard_default_eq(tx, var, op):
    """An identity answer holds while the class still defines no __eq__ (nor __ne__ for
    `!=`): one added later (assigned, patched) must recompile."""
    if not var.is_constant():
        objects.guard_type_entries(tx, var, ("__eq__", "__ne__") if op == "!=" else ("__eq__",))


def contains(tx, container, item):
    if isinstance(container, TensorVariable):
        raise Unsupported("'in' on a tensor needs its values")
    if container.is_constant() and item.is_constant():
        return _fold(operator.contains, container.as_constant(), item.as_constant())
    if isinstance(container, (objects.UserObjectVariable, new_objects.NewObjectVariable)):
        found = _user_contains(tx, container, item)
        if found is not None:
            return found
    joined = _int_membership(tx, container, item)
    if joined is not None:
        return joined
    if _is_plain_iterator(container):
        # an iterator or generator has no __contains__: `in` advances it up to the first
        # equal item (PySequence_Contains), and what follows stays for the next reader
        for _ in containers.bounded(tx):
            got = container.next(tx)
            if got is None:
                return ConstantVariable(False)
            if values_equal(tx, got, item):
                return ConstantVariable(True)
    return container.call_method(tx, "__contains__", [item], {})


def _user_contains(tx, obj, item):
    """`item in obj` for an object of a user class, as CPython's PySequence_Contains: the
    class's own __contains__ (its answer made a bool); without one, the object searched one
    item at a time up to the first equal one (_PySequence_IterSearch), so a search that stops
    early runs no more of the user's __iter__/__next__/__getitem__ than eager does; with no
    way to search it, CPython's TypeError. What the class defines of these is guarded. None:
    a C __contains__ of a builtin base (a dict subclass's), which the object models itself."""
    attr, owner = _type_entry(tx, obj, "__contains__")
    if owner is not None:
        if attr is None:  # (`__contains__ = None`: the class says it is not a container)
            _raise_membership_error(obj, {"__contains__": None})
        if not isinstance(attr, types.FunctionType):
            return None
        return ConstantVariable(_call_special(tx, obj, "__contains__", attr, [item]).truthy(tx))
    step = _search_steps(tx, obj)
    for _ in containers.bounded(tx):
        got = step()
        if got is None:
            return ConstantVariable(False)
        if values_equal(tx, got, item):
            return ConstantVariable(True)


def _search_steps(tx, obj):
    """A function giving the next item of the search `in` makes of a user object without
    __contains__ (None when exhausted): its iterator (PyObject_GetIter: the class's __iter__,
    whose TypeError CPython replaces with its own), else the old sequence protocol (__getitem__
    with 0, 1, 2... until IndexError), else CPython's TypeError."""
    attr, owner = _type_entry(tx, obj, "__iter__")
    if owner is not None:
        if attr is None:  # (`__iter__ = None`: not iterable, even beside a __getitem__)
            _raise_membership_error(obj, {})
        try:
            it = _call_special(tx, obj, "__iter__", attr, [])
        except UserException as e:
            if issubclass(e.exc_type, TypeError):
                _raise_membership_error(obj, {})
            raise
        if not hasattr(_type_of(it), "__next__"):  # "iter() returned non-iterator", replaced
            _raise_membership_error(obj, {})
        return lambda: _next_item(tx, it)
    getitem, owner = _type_entry(tx, obj, "__getitem__")
    if owner is None:
        _raise_membership_error(obj, {})
    index = itertools.count()
    return lambda: _item_or_end(tx, obj, "__getitem__", getitem, next(index))


def _next_item(tx, it):
    """next(it) of the iterator a user __iter__ gave, None when exhausted: a user class's own
    Python __next__ inlined (StopIteration ends the search), any other iterator advanced as
    the value model advances it (one it cannot advance is a break)."""
    if isinstance(it, (objects.UserObjectVariable, new_objects.NewObjectVariable)):
        return _item_or_end(tx, it, "__next__", _type_entry(tx, it, "__next__")[0], None)
    return it.next(tx)


def _item_or_end(tx, obj, name, attr, index):
    """obj.__next__() (index None) or obj.__getitem__(index) of a user class, traced; None
    where CPython's iteration ends: StopIteration, or IndexError from __getitem__."""
    ends = StopIteration if index is None else (IndexError, StopIteration)
    try:
        return _call_special(tx, obj, name, attr, [] if index is None else [ConstantVariable(index)])
    except UserException as e:
        if issubclass(e.exc_type, ends):
            return None
        raise


def _type_entry(tx, obj, name):
    """type(obj)'s entry for `name` as CPython looks a special method up ((entry, owner);
    owner None when missing), guarded on the class still giving it."""
    return objects.guarded_type_lookup(tx, objects.class_source(obj), obj.python_type(), name)


def _call_special(tx, obj, name, attr, args):
    """The special method `attr` found on obj's class, inlined on obj; one that is not a
    Python function (a C slot of a builtin base, a descriptor) is a break."""
    if not isinstance(attr, types.FunctionType):
        raise Unsupported(f"{name} of {obj} is a {type(attr).__name__}, not a Python function")
    return objects.bind_class_attr(tx, attr, obj, obj.python_type()).call(tx, args, {})


def _type_of(var):
    """The type of what a user __iter__ gave, which decides whether it is an iterator."""
    try:
        return var.python_type()
    except Unsupported:
        raise Unsupported(f"'in' of an object whose __iter__ gave {var}") from None


def _raise_membership_error(obj, entries):
    """Raise the TypeError CPython raises for `x in obj` when obj's class (holding `entries`)
    cannot be searched: CPython's own, from a bare class of the same name, as the wording
    changes between versions (3.14: "is not a container or iterable")."""
    bare = type(obj.python_type().__name__, (), dict(entries))()
    user_errors(lambda: None in bare, "'in'")
    raise Unsupported(f"'in' of {obj}")  # (not reached: the bare class cannot be searched)


def _is_plain_iterator(var):
    try:
        cls = var.python_type()
    except Unsupported:
        return False
    return hasattr(cls, "__next__") and not hasattr(cls, "__contains__")


def values_equal(tx, a, b):
    """Two items compared by a container's `==` (PyObject_RichCompareBool): an object is
    equal to itself without its `__eq__` being asked, so a NaN held twice compares equal.
    One Variable is one object; two Variables holding NaNs may or may not be one object,
    which only an identity guard could tell: refused."""
    if a is b:
        return True
    for v in (a, b):
        if v.is_constant() and isinstance(v.as_constant(), (float, complex)) and \
                v.as_constant() != v.as_constant():
            raise Unsupported("a container comparison of NaN items (their identity decides)")
    result = compare(tx, "==", a, b)
    return result.truthy(tx)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, introspection, new_objects, numpy_vars, object_protocols, objects, torch_calls  # noqa: E402
