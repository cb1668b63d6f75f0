"""Objects of user-defined classes constructed inside the traced frame.

`SomeClass(...)` for a plain Python class (a dataclass, a ModelOutput-style OrderedDict
subclass, a helper object) makes a `NewObjectVariable`: no real object exists while
tracing. Its instance attributes live in a pending dict of Variables (and, for dict
subclasses, its items in a DictVariable); `__init__` (dataclass-generated ones and their
`__post_init__` included) is inlined with it as `self`, and so are a Python `__setattr__`,
`__getattribute__`, `__getattr__`, `__getitem__`, properties and methods. Since the object
did not exist before the frame, its mutations are not side effects: only its final state
matters, and only if it escapes (returned, stored into an input, live at a graph break).

Then the rewritten code builds the real object once per piece of generated code, without
running user code again: `new(cls)`, `object.__setattr__` for each attribute (the traced
`__setattr__` already ran), the builtin base's `__setitem__` for each item, in order
(`rebuild_object`). A class's own `__new__` (a Python function) is inlined with the class
first; the object it makes with `object.__new__(cls)` / `super().__new__(cls)` is a
NewObjectVariable, and `__init__` follows when it returns an instance of the class, as
`type.__call__` does (the rebuild calls object.__new__, not the custom one: its effects were
traced). A list subclass keeps its elements in a ListVariable, which list's own methods act
on. `__slots__` values are kept beside the instance dict (which a slotted class may not have)
and set the same way. Classes whose construction or state cannot be modelled exactly
(`__slots__` beside a dict or list base, `__del__`, a
metaclass other than type/ABCMeta, a C base other than object/dict/OrderedDict/list, a
`__new__` that is not a Python function) are Unsupported.
"""
import abc
import collections
import types

from bytecode_utils import versions
from guards.sources import AttrSource, ConstSource

from . import class_stand_ins
from ..exc import Unsupported, UserException
from ..runtime import policy
from .base import ConstantVariable, Variable
from .dict_storage import ODICT_THROUGH_SELF, odict_through_self

_HEAPTYPE = 1 << 9
_DICT_BASES = (dict, collections.OrderedDict)
_ALLOWED_C_BASES = (object, dict, collections.OrderedDict, list)
_DICT_AND_OBJECT = (object, dict, collections.OrderedDict)
# builtin types whose methods read off the class (`list.append`) apply to a value of the type
_CLASS_READ_BASES = (*_DICT_AND_OBJECT, list, tuple, set, frozenset, str, bytes, int, float, bool,
                     collections.deque, collections.defaultdict)
_ALLOWED_NEW = (object.__dict__["__new__"], dict.__dict__["__new__"], list.__dict__["__new__"])
_SLOT_TYPES = (types.WrapperDescriptorType, types.MethodDescriptorType)
# (all PyObject_GenericGetAttr; 3.13's SimpleNamespace inherits object's instead of its own)
GENERIC_GETATTRIBUTE = tuple({id(f): f for f in (object.__getattribute__, *(
    vars(t).get("__getattribute__", object.__getattribute__) for t in (dict, list, types.SimpleNamespace)))}.values())
_MISSING = object()


def constructible_reason(cls, new_allowed=False):
    """None when instances of `cls` can be built symbolically; else why not. `new_allowed`:
    a custom `__new__` written in Python is fine (construct inlines it; object.__new__(cls)
    inside it makes the object)."""
    name = cls.__qualname__
    if type(cls) not in (type, abc.ABCMeta):
        return f"{name} has the metaclass {type(cls).__name__}"
    if issubclass(cls, BaseException):
        return f"{name} is an exception class"
    for klass in cls.__mro__:
        if not klass.__flags__ & _HEAPTYPE and klass not in _ALLOWED_C_BASES:
            return f"{name} derives from the builtin type {klass.__qualname__}"
        slots = klass.__dict__.get("__slots__", ()) if klass.__flags__ & _HEAPTYPE else ()
        if isinstance(slots, str):
            slots = (slots,)
        if any(s not in ("__dict__", "__weakref__") for s in slots) and \
                (_dict_base(cls) is not None or issubclass(cls, list)):
            return f"{name} uses __slots__ beside a dict or list base"
        if "__del__" in klass.__dict__:
            return f"{name} defines __del__"
    if not cls.__dictoffset__ and not has_slots(cls):
        return f"{name} instances have no __dict__"
    new = _type_attr(cls, "__new__")
    if new not in _ALLOWED_NEW and not (new_allowed and custom_new(cls) is not None and _dict_base(cls) is None):
        return f"{name} has a custom __new__ that is not a Python function"
    return None


def has_slots(cls):
    """Whether instances of `cls` keep attributes in slots (`__slots__` naming more than
    `__dict__` / `__weakref__` in a Python class of its MRO)."""
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ()) if klass.__flags__ & _HEAPTYPE else ()
        if any(s not in ("__dict__", "__weakref__") for s in ((slots,) if isinstance(slots, str) else slots)):
            return True
    return False


def _is_slot(attr):
    """A slot of the object's own class (a member descriptor a `__slots__` made)."""
    return type(attr) is types.MemberDescriptorType and attr.__objclass__.__flags__ & _HEAPTYPE


def custom_new(cls):
    """The Python function of `cls`'s own `__new__` (a staticmethod in a class body), or None."""
    new = _type_attr(cls, "__new__")
    fn = new.__func__ if isinstance(new, staticmethod) else new
    return fn if isinstance(fn, types.FunctionType) else None


def object_new(tx, cls_var):
    """`object.__new__(cls)` (and `super().__new__(cls)` reaching it) for a user class: a new
    object, no __init__ run (the caller, or type.__call__ after a custom __new__, runs it)."""
    cls = getattr(cls_var, "cls", None)
    if not isinstance(cls, type) or not is_user_class(cls):
        raise Unsupported(f"object.__new__({cls_var}) of a class not built symbolically")
    reason = constructible_reason(cls, new_allowed=True)
    if reason is not None:
        raise Unsupported(f"constructing a {cls.__qualname__} object inside the traced frame: {reason}")
    return _new_instance(cls)


def _new_instance(cls):
    """A new object of `cls`, or the TypeError object.__new__ raises for an abstract class
    (an ABC with abstract methods left), with CPython's own message."""
    if getattr(cls, "__abstractmethods__", None):
        try:
            object.__new__(cls)  # (raises before it allocates anything)
        except TypeError as e:
            raise exceptions.user_error(TypeError, *e.args) from None
    return NewObjectVariable(cls)


def is_user_class(cls):
    """A class of the user's, built symbolically by `construct`: a heap type not defined in
    torch, an untraced library or the standard library modules runtime/policy.py names."""
    return cls.__flags__ & _HEAPTYPE and policy.constructs_symbolically(getattr(cls, "__module__", None))


def is_torch_module_class(cls):
    """torch.nn's own module classes (nn.ReLU() made inside a forward): their __init__ and
    nn.Module.__init__ are Python and are traced like a user class's."""
    import torch
    return isinstance(cls, type) and issubclass(cls, torch.nn.Module) and \
        (getattr(cls, "__module__", None) or "").startswith("torch.nn.")


def _type_attr(cls, name, missing=None):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return missing


def _dict_base(cls):
    for klass in cls.__mro__:
        if klass in _DICT_BASES:
            return klass
    return None


def construct(tx, cls_var, args, kwargs):
    """`cls(*args, **kwargs)` for a user class: a NewObjectVariable, __init__ inlined."""
    cls = cls_var.cls
    reason = constructible_reason(cls, new_allowed=True)
    if reason is not None:
        raise Unsupported(f"constructing a {cls.__qualname__} object inside the traced frame: {reason}")
    new = custom_new(cls)
    if new is not None:
        objects.guarded_type_lookup(tx, ConstSource(cls), cls, "__new__")
        obj = functions.UserFunctionVariable(new).call(tx, [cls_var, *args], kwargs)
        if not (isinstance(obj, NewObjectVariable) and issubclass(obj.cls, cls)):
            # type.__call__ runs __init__ on any instance of the class: an existing one (a
            # singleton kept on the class) would need it run on the real object
            try:
                returned = obj.python_type()
            except Unsupported:
                returned = None
            if returned is None or issubclass(returned, cls):
                raise Unsupported(f"{cls.__qualname__}.__new__ returned an instance made before the call "
                                  f"(its __init__ would run on it)")
            return obj
    else:
        obj = _new_instance(cls)
    init = obj._class_attr(tx, "__init__")
    if isinstance(init, types.FunctionType):
        ret = functions.UserFunctionVariable(init).call(tx, [obj, *args], kwargs)
        if not (ret.is_constant() and ret.as_constant() is None):
            raise Unsupported(f"{cls.__qualname__}.__init__ returned a value (the user code raises TypeError)")
    elif init is object.__init__:
        if (args or kwargs) and new is None:  # (object.__init__ takes them when __new__ is the class's)
            raise Unsupported(f"{cls.__qualname__}() takes no arguments (the user code raises TypeError)")
    elif isinstance(init, _SLOT_TYPES) and init.__objclass__ in (*_DICT_BASES, list):
        obj.slot_call(tx, init.__objclass__, "__init__", list(args), kwargs)
    else:
        raise Unsupported(f"{cls.__qualname__}.__init__ is {type(init).__name__}, not traced")
    return obj


def list_put(obj, _index, item):
    """How rebuild_object fills a list subclass: its elements in order (keys are positions)."""
    list.append(obj, item)


def rebuild_object(cls, new, names, values, setitem, keys, items):
    """The real object for a NewObjectVariable, from its final state (no user code runs)."""
    obj = new(cls)
    for name, value in zip(names, values):
        object.__setattr__(obj, name, value)
    for key, item in zip(keys, items):
        setitem(obj, key, item)
    return obj


class SlotMethodVariable(Variable):
    """A C slot method of object/dict/OrderedDict (`object.__setattr__`, `super().__setitem__`,
    `dict.keys`): called with a NewObjectVariable first, it acts on the symbolic state."""

    def __init__(self, descriptor):
        super().__init__(None)
        self.descriptor = descriptor

    def call(self, tx, args, kwargs):
        owner, name = self.descriptor.__objclass__, self.descriptor.__name__
        if args and hasattr(args[0], "slot_call"):
            return args[0].slot_call(tx, owner, name, list(args[1:]), kwargs)
        if args and self._is_own_method_of(args[0]):
            # list.append(xs, v), dict.get(d, k), str.join(sep, parts): the method of the
            # value's own type, called through its class: what xs.append(v) does
            return args[0].call_method(tx, name, list(args[1:]), kwargs)
        raise Unsupported(f"{owner.__name__}.{name} on {args[0] if args else 'nothing'}")

    def _is_own_method_of(self, value):
        """Whether `value` is exactly of a builtin value type (not a subclass, not an object
        whose methods bind back to this variable) that finds this very descriptor."""
        try:
            cls = value.python_type()
        except Unsupported:
            return False
        return cls in _CLASS_READ_BASES and cls is not object and \
            objects.lookup_type_attr(cls, self.descriptor.__name__)[0] is self.descriptor

    def reconstruct(self, cg):
        cg.load_const(self.descriptor)

    def __repr__(self):
        return f"SlotMethod({self.descriptor.__objclass__.__name__}.{self.descriptor.__name__})"


def slot_method(attr, on_object=False):
    """A SlotMethodVariable for a slot or method descriptor of a builtin type, else None.
    `on_object`: bound to an object whose state the value model holds (objects.bind_class_attr),
    where only object/dict/OrderedDict/list methods count (a subclass's state); read off a
    class (`list.append`, `dict.get`, `str.join`), any builtin value type's, applied to the
    value it is called with."""
    bases = _ALLOWED_C_BASES if on_object else _CLASS_READ_BASES
    if isinstance(attr, _SLOT_TYPES) and getattr(attr, "__objclass__", None) in bases:
        return SlotMethodVariable(attr)
    return None


class InstanceAttrsVariable(Variable):
    """`obj.__dict__` of a new object: reads and writes go to its pending attributes."""

    def __init__(self, obj):
        super().__init__(None)
        self.obj = obj

    def python_type(self):
        return dict

    def _dict(self):
        return self.obj.attrs

    def getitem(self, tx, key):
        return self._dict().getitem(tx, key)

    def setitem(self, tx, key, value):
        if not (key.is_constant() and isinstance(key.as_constant(), str)):
            raise Unsupported("obj.__dict__ store with a key that is not a constant string")
        self._dict().setitem(tx, key, value)

    def delitem(self, tx, key):
        self._dict().delitem(tx, key)

    def iterate(self, tx):
        return self._dict().iterate(tx)

    def length(self, tx):
        return self._dict().length(tx)

    def truthy(self, tx):
        return self._dict().truthy(tx)

    def call_method(self, tx, name, args, kwargs):
        if name in ("get", "keys", "values", "items", "__contains__", "__getitem__", "__len__", "copy",
                    "__setitem__"):
            return self._dict().call_method(tx, name, args, kwargs)
        raise Unsupported(f"obj.__dict__.{name}() of a new object")

    def __repr__(self):
        return f"NewObjectDict({self.obj.cls.__name__})"


def _state(name):
    """A NewObjectVariable's state holder (its instance dict, slots, items, elements), read
    through a property: a block being recorded that took the object as an argument must not
    read its state outside the calls it hands the object to (variables/block_holes.py)."""
    private = "_" + name

    def get(self):
        for w in self.watchers:
            w.touched(self, name)
        return self.__dict__[private]

    def set(self, value):
        self.__dict__[private] = value
    return property(get, set)


class NewObjectVariable(Variable):
    mutable = True
    watchers = ()  # recordings of blocks that took it as an argument (variables/block_holes.py)
    attrs, slots, items, elements = _state("attrs"), _state("slots"), _state("items"), _state("elements")

    def __init__(self, cls):
        super().__init__(None)
        self.cls = cls
        self.cls_source = ConstSource(cls)
        self.attrs = containers.DictVariable({})       # instance __dict__: name -> Variable, in store order
        self.slots = {}  # __slots__ values: name -> Variable (not in __dict__, which may not exist)
        self.has_dict = bool(cls.__dictoffset__)
        base = _dict_base(cls)
        self.dict_base = base
        self.items = containers.DictVariable({}) if base is not None else None
        # a list subclass: its elements (list's own methods act on them: slot_call)
        self.elements = containers.ListVariable([]) if issubclass(cls, list) else None

    def _class_attr(self, tx, name, missing=None):
        """`name` as type(self)'s MRO holds it (or `missing`), guarded: the class is not the
        frame's own, and a method patched on it later must recompile."""
        attr, owner = objects.guarded_type_lookup(tx, self.cls_source, self.cls, name)
        return missing if owner is None else attr

    # ---- identity ------------------------------------------------------------------------
    def python_type(self):
        return self.cls

    def identity_key(self):
        return ("new", id(self))

    # ---- attributes ----------------------------------------------------------------------
    def getattr(self, tx, name):
        ga = self._class_attr(tx, "__getattribute__")
        if any(ga is g for g in GENERIC_GETATTRIBUTE):
            return self.generic_getattr(tx, name)
        if isinstance(ga, types.FunctionType):
            return functions.UserFunctionVariable(ga).call(tx, [self, ConstantVariable(name)], {})
        raise Unsupported(f"{self.cls.__name__} customises attribute lookup")

    def _lookup(self, tx, name):
        """object.__getattribute__(self, name), or _MISSING (no __getattr__ fallback)."""
        if name == "__class__":
            return objects.ClassVariable(self.cls, self.cls_source)
        if name == "__dict__" and self.has_dict:
            return InstanceAttrsVariable(self)
        attr = self._class_attr(tx, name, _MISSING)
        if _is_slot(attr):
            return self.slots.get(name, _MISSING)
        if attr is not _MISSING and hasattr(type(attr), "__set__"):  # data descriptor: property & co.
            return objects.bind_class_attr(tx, attr, self, self.cls)
        if self._has_own(name):
            return self.attrs.items[name]
        if attr is not _MISSING:  # (a class attribute may be None: nn.Module._compiled_call_impl)
            return objects.bind_class_attr(tx, attr, self, self.cls, AttrSource(self.cls_source, name))
        return _MISSING

    def _has_own(self, name):
        """Whether `name` is in the instance dict. A method looked up on an object a block
        being recorded took as an argument reads only that it is not (checked again where
        the block is replayed: variables/block_holes.py)."""
        found = name in self.__dict__["_attrs"].items
        for w in self.watchers:
            w.looked_up(self, name, found)
        return found

    def generic_getattr(self, tx, name):
        got = self._lookup(tx, name)
        if got is not _MISSING:
            return got
        fallback = self._class_attr(tx, "__getattr__")
        if isinstance(fallback, types.FunctionType):
            return functions.UserFunctionVariable(fallback).call(tx, [self, ConstantVariable(name)], {})
        if fallback is not None:
            raise Unsupported(f"{self.cls.__name__}.__getattr__ is not a Python function")
        raise exceptions.attribute_error(self.cls.__name__, name)

    def hasattr(self, tx, name):
        if self._class_attr(tx, "__getattr__") is None and \
                any(self._class_attr(tx, "__getattribute__") is g for g in GENERIC_GETATTRIBUTE):
            return self._lookup(tx, name) is not _MISSING
        try:  # the class's own lookup runs (symbolically), as CPython's hasattr runs it
            self.getattr(tx, name)
            return True
        except UserException as e:
            if issubclass(e.exc_type, AttributeError):
                return False
            raise

    def setattr(self, tx, name, value):
        sa = self._class_attr(tx, "__setattr__")
        if sa is object.__setattr__:
            return self.generic_setattr(tx, name, value)
        if isinstance(sa, types.FunctionType):
            functions.UserFunctionVariable(sa).call(tx, [self, ConstantVariable(name), value], {})
            return
        raise Unsupported(f"{self.cls.__name__}.__setattr__ is {type(sa).__name__}, not traced")

    def delattr(self, tx, name):
        da = self._class_attr(tx, "__delattr__")
        if da is object.__delattr__:
            return self.generic_delattr(tx, name)
        if isinstance(da, types.FunctionType):
            functions.UserFunctionVariable(da).call(tx, [self, ConstantVariable(name)], {})
            return
        raise Unsupported(f"{self.cls.__name__}.__delattr__ is {type(da).__name__}, not traced")

    def generic_delattr(self, tx, name):
        tx.side_effects.changed(self)
        if _is_slot(self._class_attr(tx, name)):
            if name not in self.slots:
                raise exceptions.attribute_error(self.cls.__name__, name)
            del self.slots[name]
            return
        if hasattr(type(self._class_attr(tx, name)), "__delete__"):
            raise Unsupported(f"del of {self.cls.__name__}.{name} runs a descriptor")
        if name not in self.attrs.items:
            raise exceptions.attribute_error(self.cls.__name__, name)
        del self.attrs.items[name]

    def generic_setattr(self, tx, name, value):
        if name in ("__class__", "__dict__"):
            raise Unsupported(f"assignment to {name} of a new object")
        attr = self._class_attr(tx, name)
        tx.side_effects.changed(self, value)  # (logged once shared state can reach it)
        if _is_slot(attr):
            self.slots[name] = value
            return
        if not self.has_dict and (attr is None or not hasattr(type(attr), "__set__")):
            raise Unsupported(f"{self.cls.__name__} object has no slot {name!r} and no __dict__ "
                              f"(the user code raises AttributeError)")
        if attr is not None and hasattr(type(attr), "__set__"):
            if isinstance(attr, property) and attr.fset is not None:
                functions.UserFunctionVariable(attr.fset).call(tx, [self, value], {})
                return
            raise Unsupported(f"setting {self.cls.__name__}.{name} runs a descriptor")
        self.attrs.items[name] = value

    # ---- special methods: looked up on the type ----------------------------------------------
    def _special(self, tx, name, args, what):
        attr = self._class_attr(tx, name)
        if attr is None:
            raise Unsupported(f"{what} of a {self.cls.__name__} object (the user code raises TypeError)")
        return objects.bind_class_attr(tx, attr, self, self.cls).call(tx, args, {})

    def getitem(self, tx, key):
        return self._special(tx, "__getitem__", [key], "subscript")

    def setitem(self, tx, key, value):
        self._special(tx, "__setitem__", [key, value], "item assignment")

    def delitem(self, tx, key):
        self._special(tx, "__delitem__", [key], "item deletion")

    def iterate(self, tx):
        if self._class_attr(tx, "__iter__", _MISSING) is _MISSING:  # the old sequence protocol
            it = live_iterators.sequence_iterator(tx, self)
            if it is not None:
                return it.iterate(tx)
        it = self._special(tx, "__iter__", [], "iteration")
        if it is not self:
            return it.iterate(tx)
        # its own iterator: __next__ until StopIteration
        return objects.drain_next(tx, lambda: self._special(tx, "__next__", [], "next()"))

    def live_iterator(self, tx):
        """`iter(obj)` of a list subclass that keeps list's __iter__: a live iterator over its
        elements (a loop that appends sees the new ones), as for a plain list; None otherwise."""
        if self.elements is not None and self._class_attr(tx, "__iter__") is list.__iter__:
            return containers.ListIteratorVariable(self.elements)
        return None

    def length(self, tx):
        return object_protocols.length(tx, self)

    def truthy(self, tx):
        return object_protocols.truthy(tx, self)

    def call(self, tx, args, kwargs):
        attr = self._class_attr(tx, "__call__")
        if attr is None:
            raise Unsupported(f"{self.cls.__name__} object is not callable (the user code raises TypeError)")
        return objects.bind_class_attr(tx, attr, self, self.cls).call(tx, args, kwargs)

    # ---- C slot methods of object / dict / OrderedDict ----------------------------------------
    def slot_call(self, tx, owner, name, args, kwargs):
        if owner is list:
            return self._list_call(tx, name, args, kwargs)
        if owner is object:
            if name == "__setattr__" and len(args) == 2 and not kwargs:
                self.generic_setattr(tx, _attr_name(args[0]), args[1])
                return ConstantVariable(None)
            if name == "__getattribute__" and len(args) == 1 and not kwargs:
                return self.generic_getattr(tx, _attr_name(args[0]))
            if name == "__delattr__" and len(args) == 1 and not kwargs:
                self.generic_delattr(tx, _attr_name(args[0]))
                return ConstantVariable(None)
            if name == "__init__" and not args and not kwargs:
                return ConstantVariable(None)
            raise Unsupported(f"object.{name} on a new {self.cls.__name__} object")
        if self.items is None or not issubclass(self.cls, owner):
            raise Unsupported(f"{owner.__name__}.{name} on a {self.cls.__name__} object")
        if owner is collections.OrderedDict and name not in _ODICT_AS_DICT:
            raise Unsupported(f"OrderedDict.{name} on a new object")
        if owner is collections.OrderedDict and name in ODICT_THROUGH_SELF:
            return odict_through_self(tx, self, self.items, name, args, kwargs)
        if name in ("__init__", "update"):
            self._update(tx, args, kwargs)
            return ConstantVariable(None)
        if name == "__iter__" and not args:
            return functions.iterator_of(self.items.iterate(tx))
        if name == "__delitem__":
            self.items.delitem(tx, args[0])
            return ConstantVariable(None)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self._dict_subscript(tx, args[0])
        if name == "copy":
            return containers.DictVariable(self.items.items)
        if name in _DICT_METHODS:
            return self.items.call_method(tx, name, args, kwargs)
        raise Unsupported(f"{owner.__name__}.{name} on a new {self.cls.__name__} object")

    def _dict_subscript(self, tx, key):
        """dict's `[]` on an instance of a subclass: a missing key is given to the class's
        `__missing__` (Counter's 0), looked up on the type (guarded), as CPython's
        dict_subscript does; without one, dict's KeyError."""
        if not self.items.call_method(tx, "__contains__", [key], {}).as_constant():
            missing = self._class_attr(tx, "__missing__")
            if missing is not None:
                return objects.bind_class_attr(tx, missing, self, self.cls).call(tx, [key], {})
        return self.items.call_method(tx, "__getitem__", [key], {})

    def _list_call(self, tx, name, args, kwargs):
        """list's own methods on a list subclass's elements (those the class does not define)."""
        if self.elements is None or name not in _LIST_METHODS:
            raise Unsupported(f"list.{name} on a new {self.cls.__name__} object")
        if name == "__init__":
            if len(args) > 1 or kwargs:
                raise Unsupported("list() with more than one argument (the user code raises TypeError)")
            self.elements.items[:] = args[0].iterate(tx) if args else []
            return ConstantVariable(None)
        if name == "__iter__" and not args:  # live, as CPython's list iterator: appends in the loop are seen
            return containers.ListIteratorVariable(self.elements)
        if name == "copy":
            return containers.ListVariable(list(self.elements.items))
        return self.elements.call_method(tx, name, args, kwargs)

    def _update(self, tx, args, kwargs):
        if len(args) > 1:
            raise Unsupported("dict update with more than one positional argument (the user code raises TypeError)")
        if args:
            self.items.items.update(collections_vars._pairs(tx, args[0]))
        for k, v in kwargs.items():
            self.items.items[k] = v

    # ---- after the graph -------------------------------------------------------------------
    def reconstruct(self, cg):
        # (built once per rewritten code, and refused if it contains itself: CodeGen.reconstruct)
        base = self.dict_base
        cg.extend(versions.load_const_callable(rebuild_object))
        class_stand_ins.load_class(cg, self.cls)
        cg.load_const(dict.__new__ if base is not None else list.__new__ if self.elements is not None
                      else object.__new__)
        names = tuple(self.attrs.items) + tuple(self.slots)  # (object.__setattr__ fills a slot too)
        cg.load_const(names)
        for n, v in zip(names, [*self.attrs.items.values(), *self.slots.values()]):
            cg.reconstruct(v)
        cg.build(tuple, len(names))
        cg.load_const(base.__setitem__ if base is not None else list_put if self.elements is not None else None)
        pairs = list(self.items.items.items()) if self.items is not None else \
            list(enumerate(self.elements.items)) if self.elements is not None else []
        for k, _ in pairs:
            containers.load_key(cg, k)
        cg.build(tuple, len(pairs))
        for _, v in pairs:
            cg.reconstruct(v)
        cg.build(tuple, len(pairs))
        cg.call(7)

    def __repr__(self):
        return f"NewObject({self.cls.__name__})"


_LIST_METHODS = ("__init__", "__iter__", "__len__", "__getitem__", "__setitem__", "__contains__", "append",
                 "extend", "insert", "pop", "index", "count", "reverse", "clear", "remove", "copy", "sort")
_DICT_METHODS = ("__getitem__", "__setitem__", "__contains__", "__len__", "get", "keys", "values", "items",
                 "pop", "setdefault", "clear")
_ODICT_AS_DICT = ("__init__", "__setitem__", "__delitem__", "__iter__", "keys", "values", "items", "update",
                  "pop", "setdefault", "clear")


def _attr_name(var):
    if not (var.is_constant() and isinstance(var.as_constant(), str)):
        raise Unsupported("attribute name that is not a constant string")
    return var.as_constant()


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import functions, containers, object_protocols, objects, collections_vars, exceptions, live_iterators  # noqa: E402
