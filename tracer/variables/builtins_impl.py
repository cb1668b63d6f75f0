"""Python builtins, `math` and `operator` functions applied to Variables.

Each supported builtin has one small function here, registered in `_IMPLS`. On constants
they compute the real result (a constant fold); on tensors they become graph ops through the
same operator dispatch the bytecode handlers use; on containers they work item by item.
"""
import collections
import inspect
import functools
import math
import operator

import torch

from ..exc import Unsupported, UserException
from .exceptions import folding_error, user_error
from .base import ConstantVariable, ObjectVariable, check_builtin_attr, known_type, python_object, tp_name
from .functions import library_object
from .containers import IteratorVariable, ListIteratorVariable, ListVariable, TupleVariable
from .named_tuples import NamedTupleVariable, is_structseq
from .sets import SetVariable
from .sym import (SliceVariable, is_sym, is_unbacked, specialized, sym_convert, sym_divmod, sym_math,
                  sym_minmax, sym_round)
from .tensor import TensorVariable
from guards import ConstSource, IdMatch, Predicate

_IMPLS = {}


def impl(*fns):
    def register(f):
        for fn in fns:
            _IMPLS[fn] = f
        return f
    return register


def call_builtin(tx, fn, args, kwargs):
    if fn in (int, float) and len(args) == 1 and not kwargs:
        arg = args[0]
        if isinstance(arg, TensorVariable) and tx.output.shapes.policy.scalar_outputs:
            arg = arg.scalar_item(tx)  # int(t) is t.__int__(): the item, converted
            if not is_sym(arg):
                return call_builtin(tx, fn, [arg], kwargs)
        if is_unbacked(arg) or (is_sym(arg) and arg.python_type() is _OTHER_NUMBER.get(fn)):
            # (float(n) of a dynamic size, int(n * 0.5) of a float made from one, stay dynamic,
            # as torch.compile keeps them (torch.sym_float, torch.sym_int: truncation):
            # specialised, a loop over sizes recompiled per size)
            return sym_convert(tx, fn, arg)
    if fn in (int, float) and len(args) == 1 and not kwargs and args[0].python_type() is fn:
        # int(n) of an int, float(v) of a float: the argument itself, as in CPython; a symbolic
        # one stays symbolic (specialised, it became a new object: `float(v) is v` was False)
        return args[0]
    if fn is round and args and is_sym(args[0]) and not kwargs:
        out = sym_round(tx, args)
        if out is not None:
            return out
    if fn is divmod and not kwargs and any(is_sym(a) for a in args):
        out = sym_divmod(tx, args)
        if out is not None:
            return out
    if fn in _SPECIALISING:  # str(n), hex(n), divmod(n, m), str(shape) of symbolic sizes...
        args = [specialized(a) for a in args]
    f = _IMPLS.get(fn)
    if f is not None:
        try:
            return f(tx, *args, **kwargs)
        except Unsupported:
            raise
        except Exception as e:
            _user_error_on_constants(fn, args, kwargs, e)
            if isinstance(e, TypeError) and not _binds(f, tx, args, kwargs):
                # a call form not modelled (`type(name, bases, ns)`): the whole frame runs as
                # Python, as for a class statement (a new class per call would recompile)
                raise Unsupported(f"{getattr(fn, '__name__', fn)}() with {len(args)} positional "
                                  f"argument(s) and keywords {sorted(kwargs)} is not modelled",
                                  breakable=False) from None
            raise
    if fn in _OPERATOR_FUNCS:
        return _OPERATOR_FUNCS[fn](tx, args, kwargs)
    if getattr(fn, "__module__", None) == "math" or getattr(fn, "__self__", None) is math:
        if any(is_sym(a) for a in args) and not kwargs:
            out = sym_math(tx, fn, args)
            if out is not None:
                return out
        return _fold(fn, args, kwargs)  # (a symbolic argument is specialised)
    raise Unsupported(f"builtin {getattr(fn, '__qualname__', fn)}() "
                      f"{'(prints / does I/O)' if fn is print else 'is not supported'}")


def _binds(f, tx, args, kwargs):
    """Whether the implementation `f` accepts this call's shape (a TypeError from binding
    is a form it does not model, not a tracer bug)."""
    import inspect
    try:
        inspect.signature(f).bind(tx, *args, **kwargs)
    except TypeError:
        return False
    except ValueError:  # no signature to check
        return True
    return True


def _class_or_tuple(cls):
    """What isinstance/issubclass accept as their second argument."""
    if isinstance(cls, tuple):
        return all(_class_or_tuple(c) for c in cls)
    return isinstance(cls, type) or any("__instancecheck__" in k.__dict__ for k in type(cls).__mro__) or \
        any("__args__" in k.__dict__ for k in type(cls).__mro__)  # a union, a generic alias


def _user_error_on_constants(fn, args, kwargs, error):
    """An implementation failed on constant arguments: if the builtin itself raises the same
    exception on them, the user code raises it (`len(3)`), with CPython's message, catchable
    by the traced code's own try blocks (exc.folding_error). Otherwise `error` is a tracer
    bug (re-raised by the caller)."""
    if not (_all_const(args) and _all_const(kwargs.values())):
        return
    try:
        fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except type(error) as e:
        raise folding_error(e, f"{getattr(fn, '__name__', fn)}(...)") from error
    except Exception:  # noqa: BLE001 - a different failure: report the original one
        return


def _fold(fn, args, kwargs):
    cargs = [a.as_constant() for a in args]
    ckw = {k: v.as_constant() for k, v in kwargs.items()}
    try:
        value = fn(*cargs, **ckw)
    except Exception as e:  # noqa: BLE001 - the user's call raises it
        raise folding_error(e, f"{getattr(fn, '__name__', fn)}(...)") from None
    for a in args:  # float(v), tuple(t), str(s) give the argument itself: keep its identity
        if a.as_constant() is value:
            return a
    return ConstantVariable(value)


def _all_const(args):
    return all(a.is_constant() for a in args)


# ---- operator module: binary/unary operators by function ------------------------------
def _binop(name):
    return lambda tx, args, kwargs: operators.binary_op(tx, name, args[0], args[1])


def _unop(name):
    return lambda tx, args, kwargs: operators.unary_op(tx, name, args[0])


def _cmp(symbol):
    """operator.eq, operator.is_...: the comparison `a == b`, `a is b` makes (COMPARE_OP, IS_OP)."""
    return lambda tx, args, kwargs: operators.compare(tx, symbol, args[0], args[1])


_OPERATOR_FUNCS = {
    **{getattr(operator, n): _cmp(symbol) for n, symbol in (
        ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="), ("ne", "!="), ("is_", "is"),
        ("is_not", "is not"))},
    **{getattr(operator, n): _binop(n) for n in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_",
        "xor", "lshift", "rshift",
        "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand",
        "ior", "ixor", "ilshift", "irshift")},
    **{getattr(operator, n): _unop(n) for n in ("neg", "pos", "not_", "invert", "abs", "truth")},
    operator.getitem: lambda tx, args, kwargs: args[0].getitem(tx, args[1]),
    operator.contains: lambda tx, args, kwargs: operators.contains(tx, args[0], args[1]),  # (a, b): `b in a`
    operator.setitem: lambda tx, args, kwargs: (args[0].setitem(tx, args[1], args[2]), ConstantVariable(None))[1],
    operator.index: lambda tx, args, kwargs: ConstantVariable(operator.index(args[0].as_constant())),
}


# ---- builtins ---------------------------------------------------------------------------
@impl(len)
def _len(tx, obj):
    if isinstance(obj, (TensorVariable, numpy_vars.NdarrayVariable)):
        return obj.len_var(tx)  # symbolic when its first dimension is
    t = known_type(obj)
    if t is not None and not hasattr(t, "__len__"):  # (length() counts what iterating gives)
        raise user_error(TypeError, f"object of type '{tp_name(t)}' has no len()")
    return ConstantVariable(obj.length(tx))


@impl(operator.length_hint)
def _length_hint(tx, obj, default=None):
    """operator.length_hint of a sized value: its len() (what CPython asks first)."""
    try:
        sized = hasattr(obj.python_type(), "__len__")
    except Unsupported:
        sized = False
    if not sized:
        raise Unsupported(f"operator.length_hint of {obj}")
    return _len(tx, obj)


@impl(isinstance)
def _isinstance(tx, obj, classes):
    cls = python_object(classes)
    if not _class_or_tuple(cls):  # CPython's own check says what the user code raises
        try:
            isinstance(None, cls)
        except TypeError as e:
            raise user_error(TypeError, str(e)) from None
        raise Unsupported(f"isinstance() with a {type(cls).__name__} as its second argument")
    try:
        t = obj.python_type()
    except Unsupported:
        raise
    if isinstance(obj, TensorVariable) and isinstance(cls, type) and issubclass(cls, torch.Tensor):
        return ConstantVariable(issubclass(t, cls) or cls is torch.Tensor)
    import abc
    for c in _flat_classes(cls):
        check = getattr(type(c), "__instancecheck__", None)
        if check is not type.__instancecheck__ and check is not abc.ABCMeta.__instancecheck__ and \
                (getattr(c, "_is_protocol", False) or not library_object(type(c))):
            # a runtime-checkable Protocol looks at the instance's attributes, not its type; a
            # user's metaclass may too (torch's own, Parameter's, answer by the type)
            raise Unsupported(f"isinstance() against {getattr(c, '__name__', c)!r}, whose metaclass "
                              "answers it itself")
    return ConstantVariable(_guarded_subclass(tx, t, cls))


@impl(issubclass)
def _issubclass(tx, a, b):
    return ConstantVariable(_guarded_subclass(tx, python_object(a), python_object(b)))


def _guarded_subclass(tx, t, cls):
    """issubclass(t, cls), guarded where the answer can change without t or cls changing: a
    user's ABC (`Proto.register(A)` later makes A a subclass). Library ABCs
    (collections.abc, typing) are trusted like library globals. What issubclass raises (a
    TypedDict, a subscripted generic: no class checks) is the user code's TypeError."""
    try:
        result = issubclass(t, cls)
    except TypeError as e:
        raise user_error(TypeError, str(e)) from None
    classes = cls if isinstance(cls, tuple) else (cls,)
    if any(_custom_check(type(c)) and not library_object(c) for c in classes):
        tx.guard(Predicate(ConstSource(cls), lambda c, _t=t, _r=result: issubclass(_t, c) is _r,
                           f"issubclass({getattr(t, '__name__', t)}, ...) is {result}"))
    return result


def _flat_classes(cls):
    """The classes of isinstance's second argument: tuples and unions (`int | str`,
    `typing.Union[...]`, which answer by the type alone) flattened."""
    import types
    import typing
    if isinstance(cls, tuple):
        return [c for x in cls for c in _flat_classes(x)]
    if isinstance(cls, types.UnionType) or getattr(cls, "__origin__", None) is typing.Union:
        return _flat_classes(cls.__args__)
    return [cls]


def _custom_check(meta):
    """A metaclass that answers issubclass/isinstance itself (ABCMeta: its registry)."""
    return any(getattr(meta, n, None) is not getattr(type, n) for n in ("__subclasscheck__", "__instancecheck__"))


@impl(callable)
def _callable(tx, obj):
    if isinstance(obj, (functions.BaseFunctionVariable, functions.BuiltinVariable, functions.BoundMethodVariable, functions.PartialVariable)):
        return ConstantVariable(True)
    if isinstance(obj, new_objects.NewObjectVariable):
        return ConstantVariable(_type_calls(obj.cls))
    try:
        return ConstantVariable(callable(python_object(obj)))
    except Unsupported:  # a list, a dict...: callable() asks the type for __call__
        return ConstantVariable(_type_calls(obj.python_type()))


def _type_calls(cls):
    return any("__call__" in k.__dict__ for k in cls.__mro__)


@impl(slice)
def _slice(tx, *args):
    if any(is_sym(a) for a in args):
        return SliceVariable(args)
    if not _all_const(args):
        raise Unsupported("slice() with non-constant bounds")
    return ConstantVariable(slice(*(a.as_constant() for a in args)))


@impl(object.__new__)
def _object_new(tx, cls, *args, **kwargs):
    """`object.__new__(cls)` / `super().__new__(cls)` inside a custom __new__: a new object
    of a user class (new_objects.object_new). Extra arguments are object.__new__'s to check
    against the class's __init__: not modelled."""
    if args or kwargs:
        raise Unsupported("object.__new__ with arguments beyond the class")
    return new_objects.object_new(tx, cls)


@impl(tuple.__new__)
def _tuple_new(tx, cls, iterable=None):
    """`tuple.__new__(cls, iterable)`: what a namedtuple class's generated `_make` and
    `__new__` call (`_replace` goes through `_make`); another tuple subclass is not modelled."""
    klass = getattr(cls, "cls", None)
    items = iterable.iterate(tx) if iterable is not None else []
    if klass is tuple:
        return TupleVariable(items)
    fields = getattr(klass, "_fields", None)
    if not (isinstance(klass, type) and issubclass(klass, tuple) and type(fields) is tuple) or \
            is_structseq(klass):
        raise Unsupported(f"tuple.__new__({cls}) of a tuple subclass that is not a namedtuple")
    if len(items) != len(fields):  # (_make raises TypeError after the call: eager's answer)
        raise Unsupported(f"tuple.__new__ of a {klass.__name__} with {len(items)} items for {len(fields)} fields")
    return NamedTupleVariable(items, klass)


@impl(getattr)
def _getattr(tx, obj, name, *default):
    if not (name.is_constant() and isinstance(name.as_constant(), str)):
        if name.is_constant():
            raise user_error(TypeError, f"attribute name must be string, not '{type(name.as_constant()).__name__}'")
        raise Unsupported("getattr() with a name that is not a constant")
    try:
        check_builtin_attr(obj, name.as_constant())
        return obj.getattr(tx, name.as_constant())
    except UserException as e:
        if default and issubclass(e.exc_type, AttributeError):
            return default[0]
        raise
    except Unsupported:
        if default and not obj.hasattr(tx, name.as_constant()):
            return default[0]
        raise


@impl(hasattr)
def _hasattr(tx, obj, name):
    try:
        check_builtin_attr(obj, name.as_constant())
        return ConstantVariable(bool(obj.hasattr(tx, name.as_constant())))
    except UserException as e:
        if issubclass(e.exc_type, AttributeError):
            return ConstantVariable(False)
        raise
    except Unsupported:
        answer = _hasattr_of_type(obj, name.as_constant())
        if answer is None:
            raise
        objects.guard_type_entries(tx, obj, (name.as_constant(),))  # (the class may gain or lose it)
        return ConstantVariable(answer)


def _hasattr_of_type(obj, name):
    """hasattr() of an object whose attributes are all its type's (no instance __dict__, no
    __getattr__, the attribute no property): the type answers, e.g. `hasattr(d, "items")` of a
    dict or a namedtuple. None where the type cannot tell."""
    try:
        cls = obj.python_type()
    except Unsupported:
        return None
    if not isinstance(cls, type) or "__dict__" in dir(cls) or hasattr(cls, "__getattr__"):
        return None
    found = inspect.getattr_static(cls, name, _MISSING)
    if isinstance(found, property) or (found is not _MISSING and hasattr(type(found), "__set__") and
                                       type(found).__module__ != "builtins" and type(found) is not _FIELD):
        return None
    return found is not _MISSING


_MISSING = object()
_FIELD = type(collections.namedtuple("_Probe", "a").a)  # a namedtuple field (a data descriptor)


@impl(setattr)
def _setattr(tx, obj, name, value):
    obj.setattr(tx, name.as_constant(), value)
    return ConstantVariable(None)


@impl(delattr)
def _delattr(tx, obj, name):
    obj.delattr(tx, name.as_constant())
    return ConstantVariable(None)




@impl(vars)
def _vars(tx, *args):
    """vars(o) is o.__dict__ read through o's own attribute lookup (CPython's
    PyObject_GetAttr), an AttributeError turned into TypeError."""
    if len(args) != 1:
        raise Unsupported("vars() without an argument (the frame's locals)")
    try:
        return args[0].getattr(tx, "__dict__")
    except UserException as e:
        if issubclass(e.exc_type, AttributeError):
            raise user_error(TypeError, "vars() argument must have __dict__ attribute")
        raise


@impl(range)
def _range(tx, *args):
    return _fold(range, args, {})


def _lazy(iterable):
    # a list is read lazily too: the loop body may append to or pop from it (as CPython sees);
    # and an object of a user class, whose own iteration may run code (zip stops pulling early)
    return isinstance(iterable, IteratorVariable) and iterable.lazy() or isinstance(iterable, ListVariable) or \
        live_iterators.is_user_object(iterable)


def _lazy_map(tx, iterables, step, py_type=None, leading=(), trailing=()):
    """Like the builtin, pull from lazy iterators one item at a time; `step(items)` -> Variable/None.
    Made again where it leaves the frame unstarted: `py_type(*leading, *iterators, *trailing)`."""
    its = [it if isinstance(it, IteratorVariable) else ListIteratorVariable(it) if isinstance(it, ListVariable)
           else live_iterators.iterator_over(tx, it) if live_iterators.is_user_object(it)
           else IteratorVariable(it.iterate(tx)) for it in iterables]

    def more(tx):
        while True:
            items = []
            for it in its:
                item = it.next(tx)
                if item is None:
                    return None
                items.append(item)
            out = step(items)
            if out is not None:
                return out
    out = IteratorVariable([], more=more, py_type=py_type)
    if py_type is not None:
        out.unstarted = (py_type, [*leading, *its, *trailing])
    return out


@impl(enumerate)
def _enumerate(tx, iterable, start=None):
    s = start.as_constant() if start is not None else 0
    if _lazy(iterable):
        counter = iter(range(s, 1 << 62))
        return _lazy_map(tx, [iterable], lambda items: TupleVariable([ConstantVariable(next(counter)), items[0]]),
                         enumerate, trailing=[ConstantVariable(s)])
    return IteratorVariable([TupleVariable([ConstantVariable(i + s), v])
                             for i, v in enumerate(iterable.iterate(tx))], py_type=enumerate)


@impl(zip)
def _zip(tx, *iterables, strict=None):
    if any(_lazy(it) for it in iterables) and not (strict is not None and strict.as_constant()):
        return _lazy_map(tx, iterables, TupleVariable, zip)
    lists = [it.iterate(tx) for it in iterables]
    if strict is not None and strict.as_constant() and len({len(x) for x in lists}) > 1:
        raise Unsupported("zip(strict=True) length mismatch (the user code raises ValueError)")
    return IteratorVariable([TupleVariable(list(items)) for items in zip(*lists)], py_type=zip)


@impl(reversed)
def _reversed(tx, seq):
    t = known_type(seq)
    if t is not None and not (hasattr(t, "__reversed__") or hasattr(t, "__len__") and hasattr(t, "__getitem__")):
        # (a set, a generator, an iterator: eager raises, whatever iterating them gives)
        raise user_error(TypeError, f"'{tp_name(t)}' object is not reversible")
    if type(seq) is ListVariable:
        return live_iterators.ReversedListIteratorVariable(seq)
    return IteratorVariable(list(reversed(seq.iterate(tx))), py_type=_reversed_type(seq))


@impl(iter)
def _iter(tx, obj):
    return live_iterators.iterator_over(tx, obj)


def iter_type(obj):
    """type(iter(x)) for a builtin container Variable (None: unknown, list_iterator is shown)."""
    try:
        t = obj.python_type()
        if t in (tuple, list, dict, set, frozenset, str, bytes):
            return type(iter(t()))
        if t is range:
            return type(iter(obj.as_constant()))
    except Exception:  # noqa: BLE001 - only a display type
        return None
    return None


def _reversed_type(seq):
    try:
        t = seq.python_type()
        if t in (list, tuple, dict, str):
            return type(reversed(t()))
        if t is range:
            return type(reversed(range(0)))
    except Exception:  # noqa: BLE001
        return None
    return None


@impl(next)
def _next(tx, it, *default):
    if not isinstance(it, IteratorVariable):
        raise Unsupported(f"next() on {it}")
    if isinstance(it, generators.GeneratorVariable):  # StopIteration carries the return value
        try:
            return it.call_method(tx, "__next__", [], {})
        except UserException as e:
            if default and issubclass(e.exc_type, StopIteration):
                return default[0]
            raise
    item = it.next(tx)
    if item is None:
        if default:
            return default[0]
        raise user_error(StopIteration)
    return item


@impl(map)
def _map(tx, fn, *iterables):
    return _lazy_map(tx, iterables, lambda items: fn.call(tx, list(items), {}), map, leading=[fn])


@impl(filter)
def _filter(tx, fn, iterable):
    def keep(items):
        item = items[0]
        test = item if (isinstance(fn, ConstantVariable) and fn.value is None) else fn.call(tx, [item], {})
        return item if test.truthy(tx) else None
    return _lazy_map(tx, [iterable], keep, filter, leading=[fn])


@impl(list)
def _list(tx, iterable=None):
    return ListVariable(iterable.iterate(tx) if iterable is not None else [])


@impl(tuple)
def _tuple(tx, iterable=None):
    if isinstance(iterable, TupleVariable) and type(iterable) is TupleVariable or \
            iterable is not None and iterable.is_constant() and type(iterable.as_constant()) is tuple:
        return iterable  # tuple(t) is t
    return TupleVariable(iterable.iterate(tx) if iterable is not None else [])


@impl(dict)
def _dict(tx, *args, **kwargs):
    if args and isinstance(args[0], objects.UserObjectVariable) and isinstance(args[0].value, dict):
        # a dict subclass from the frame: CPython copies its storage unless the class changes
        # iteration, then reads it through keys() and the class's own []
        t = type(args[0].value)
        if not (t.__iter__ is dict.__iter__ or args[0]._plain_dict("__iter__") and dict_storage.is_storage_method(t.__getitem__)):
            raise Unsupported(f"dict() of a {t.__name__} (read through its own iteration and [])")
        args = (args[0].dict_contents(tx), *args[1:])
    return collections_vars.make_dict(tx, dict, list(args), kwargs)


@impl(set)
def _set(tx, iterable=None):
    out = SetVariable([])
    if iterable is not None:
        out.update_from(tx, iterable)  # (set(d) of a dict presizes: CPython's table layout)
    return out


@impl(frozenset)
def _frozenset(tx, iterable=None):
    """Immutable: a constant (never a SetVariable, which is a mutable, unhashable set)."""
    if iterable is None:
        return ConstantVariable(frozenset())
    if isinstance(iterable, ConstantVariable) and type(iterable.value) is frozenset:
        return iterable  # frozenset(f) is f
    items = iterable.iterate(tx)
    if not all(isinstance(v, ConstantVariable) for v in items):
        raise Unsupported("frozenset of non-constant values")
    return ConstantVariable(frozenset(v.as_constant() for v in items))


def _constant_keys(tx, items, key=None):
    """The sort keys of items (key(item) called once per item, in order, as Python does);
    they must be constants: ordering by tensor values would need the data."""
    keys = [key.call(tx, [i], {}) if key is not None else i for i in items]
    if not all(k.is_constant() for k in keys):
        raise Unsupported("ordering by values that are not compile-time constants")
    return [k.as_constant() for k in keys]


def sort_variables(tx, items, key=None, reverse=False):
    """items (any Variables) in the order Python's stable sort gives their keys."""
    if key is not None and key.is_constant() and key.as_constant() is None:
        key = None
    keys = _constant_keys(tx, items, key)
    try:
        order = sorted(range(len(items)), key=keys.__getitem__, reverse=reverse)
    except TypeError as e:
        raise user_error(TypeError, str(e))
    return [items[i] for i in order]


@impl(sorted)
def _sorted(tx, iterable, key=None, reverse=None):
    rev = bool(reverse.as_constant()) if reverse is not None else False
    return ListVariable(sort_variables(tx, iterable.iterate(tx), key, rev))


@impl(bool)
def _bool(tx, obj=None):
    if obj is None:
        return ConstantVariable(False)
    return ConstantVariable(obj.truthy(tx))


@impl(int, float, str, complex)
def _numeric_ctor(tx, *args, **kwargs):
    raise Unsupported("unreachable")  # replaced below per type


def _make_ctor(cls):
    def ctor(tx, *args, **kwargs):
        if any(isinstance(a, TensorVariable) for a in args):
            raise Unsupported(f"{cls.__name__}() of a tensor needs its value")
        if cls is str and len(args) == 1 and not args[0].is_constant():
            return texts.str_of(tx, args[0])
        return _fold(cls, args, kwargs)
    return ctor


for _cls in (int, float, str, complex):
    _IMPLS[_cls] = _make_ctor(_cls)


@impl(abs)
def _abs(tx, x):
    return operators.unary_op(tx, "abs", x)


@impl(min, max)
def _minmax(tx, *args, **kwargs):
    raise Unsupported("unreachable")


def _make_minmax(fn):
    def minmax(tx, *args, key=None, default=None):
        items = args[0].iterate(tx) if len(args) == 1 else list(args)
        if not items and default is not None:
            return default
        if key is not None and not (key.is_constant() and key.as_constant() is None):
            if not items:
                raise user_error(ValueError, f"{fn.__name__}() arg is an empty sequence")
            keys = _constant_keys(tx, items, key)
            return items[fn(range(len(items)), key=keys.__getitem__)]  # the first extreme, as Python
        if all(i.is_constant() for i in items):
            return _fold(fn, [ConstantVariable(tuple(i.as_constant() for i in items))], {})
        if any(is_sym(i) for i in items) and all(is_sym(i) or i.is_constant() for i in items):
            return sym_minmax(tx, fn, items)  # torch.sym_max / sym_min
        if len(items) == 2 and any(isinstance(i, TensorVariable) for i in items):
            raise Unsupported(f"{fn.__name__}() of tensors compares their values")
        raise Unsupported(f"{fn.__name__}() of non-constant values")
    return minmax


_IMPLS[min] = _make_minmax(min)
_IMPLS[max] = _make_minmax(max)


@impl(any, all)
def _anyall(tx, iterable):
    raise Unsupported("unreachable")


def _make_anyall(is_any):
    def anyall(tx, iterable):
        it = iterable if isinstance(iterable, IteratorVariable) else IteratorVariable(iterable.iterate(tx))
        while (item := it.next(tx)) is not None:  # stop where Python stops: generators are lazy
            if item.truthy(tx) == is_any:
                return ConstantVariable(is_any)
        return ConstantVariable(not is_any)
    return anyall


_IMPLS[any] = _make_anyall(True)
_IMPLS[all] = _make_anyall(False)


@impl(functools.partial)
def _partial(tx, fn, *args, **kwargs):
    return functions.make_partial(tx, fn, list(args), kwargs)


@impl(functools.reduce)
def _reduce(tx, fn, iterable, *initial):
    items = iterable.iterate(tx)
    acc = initial[0] if initial else items.pop(0)
    for item in items:
        acc = fn.call(tx, [acc, item], {})
    return acc


@impl(super)
def _super(tx, *args):
    if args:
        return objects.SuperVariable(python_object(args[0]), args[1])
    return objects.zero_arg_super(tx)


@impl(id)
def _id(tx, obj):
    """id() of an object the frame reads from somewhere (a module, a user object, a function,
    a class: `REG[id(self)]`): its id, pinned by an identity guard. Of a tensor or a value
    made in the frame (its id is only known when the frame runs): a graph break."""
    if isinstance(obj, ObjectVariable) and obj.source is not None:
        tx.guard(IdMatch(obj.source, obj.value))
        return ConstantVariable(id(obj.value))
    raise Unsupported("id() of a traced value")


@impl(print)
def _print(tx, *args, **kwargs):
    raise Unsupported("print() is I/O, not traceable")


@impl(round)
def _round(tx, x, ndigits=None):
    if isinstance(x, TensorVariable):
        raise Unsupported("round() of a tensor")
    return _fold(round, [x] + ([ndigits] if ndigits is not None else []), {})


@impl(divmod, pow, chr, ord, hex, oct, bin, hash, repr, ascii, format)
def _pure(tx, *args):
    raise Unsupported("unreachable")


for _fn in (divmod, chr, ord, hex, oct, bin, repr, ascii, format):
    _IMPLS[_fn] = (lambda f: lambda tx, *args: _fold(f, args, {}))(_fn)


@impl(repr)
def _repr(tx, obj):
    text = texts.repr_of(tx, obj)
    return text if text is not None else _fold(repr, [obj], {})
_IMPLS[pow] = lambda tx, a, b, *m: operators.binary_op(tx, "pow", a, b) if not m else _fold(pow, [a, b, *m], {})


@impl(hash)
def _hash(tx, obj):
    """hash() of an immutable constant folds: within one process it is a fixed function of
    the value (str hashing is salted per process, and a trace never outlives its process),
    and the value itself is guarded. Anything else has no hash the trace can know."""
    if obj.is_constant() and _hashable_constant(obj.as_constant()):
        return _fold(hash, [obj], {})
    if object_protocols.is_user_object(obj):  # its class's own __hash__, traced
        return ConstantVariable(object_protocols.hash_of(tx, obj))
    raise Unsupported(f"hash() of {obj}")


def _hashable_constant(v):
    if type(v) in (int, float, complex, bool, str, bytes, type(None), range, type(Ellipsis)):
        return True
    return type(v) in (tuple, frozenset) and all(_hashable_constant(x) for x in v)


from .itertools_impl import IMPLS as _ITERTOOLS_IMPLS  # noqa: E402
from .sums import IMPLS as _SUM_IMPLS  # noqa: E402
from .operator_getters import IMPLS as _GETTER_IMPLS  # noqa: E402
from .collections_vars import IMPLS as _COLLECTIONS_IMPLS  # noqa: E402

_IMPLS.update(_ITERTOOLS_IMPLS)
_IMPLS.update(_SUM_IMPLS)
_IMPLS.update(_GETTER_IMPLS)
_IMPLS.update(_COLLECTIONS_IMPLS)
_IMPL_IDS = {id(fn): fn for fn in _IMPLS}


_OTHER_NUMBER = {int: float, float: int}  # int(v) of a float, float(n) of an int: a conversion node

# builtins that need the real value of a symbolic size: it is specialised (and guarded)
_SPECIALISING = {int, float, str, complex, repr, format, hash, chr, ord, hex, oct, bin, ascii,
                 divmod, round, operator.index}


def is_known_builtin(fn):
    """Identity lookup (a user value's __eq__/__hash__ is never called)."""
    return _IMPL_IDS.get(id(fn)) is fn or any(fn is f for f in _OPERATOR_FUNCS)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import functions, new_objects, objects, object_protocols, texts, live_iterators, generators, collections_vars, exceptions, dict_storage, operators, numpy_vars  # noqa: E402
