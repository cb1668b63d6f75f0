"""User-defined objects, classes, super(), and opaque objects compared only by identity.

Attribute reads follow Python's lookup order closely enough to be exact for ordinary
classes: data descriptors (property) on the type, then the instance dict, then methods and
other class attributes. Anything else (custom __getattr__/__getattribute__, metaclass
magic) is Unsupported rather than guessed.
"""
import abc
import types

import torch
from guards import IdMatch, Predicate
from guards.sources import AttrSource, ConstSource, GenericAttrSource, ItemSource, TypeSource

from ..exc import Unsupported, UserException
from ..runtime import compile_annotations as ann
from . import class_stand_ins
from .base import ConstantVariable, ObjectVariable, Variable, python_object
from .dict_storage import DictStorage


def lookup_type_attr(cls, name, start_after=None):
    """Find `name` in cls.__mro__ (optionally after `start_after`, for super()): (entry,
    owner), (None, None) when missing. The entry itself may be None (`flag = None` on the
    class): whether the attribute exists is whether `owner` is None."""
    mro = cls.__mro__
    if start_after is not None:
        mro = mro[mro.index(start_after) + 1:]
    for klass in mro:
        if name in klass.__dict__:
            return klass.__dict__[name], klass
    return None, None


def guard_class_entry(tx, cls_source, name, attr):
    """Guard that the class at `cls_source` still holds `attr` under `name` in its
    MRO: the raw entry, compared without running any descriptor (a class-level read of a
    property or a user descriptor runs user code). The C check freezes it by the class's
    version tag, which every change to the class or a base renews."""
    tx.guard(Predicate.class_entry(cls_source, name, attr,
                                   f"class attribute {name!r} is the {type(attr).__name__} seen while tracing"))


_IMMUTABLETYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: builtins and C types, whose entries never change


def class_can_change(cls):
    """Whether entries of `cls` (or its bases) can be set, deleted or patched."""
    return isinstance(cls, type) and not cls.__flags__ & _IMMUTABLETYPE  # (no static type has a heap base)


def class_source(var):
    """Where a guard reads the class a lookup on `var` went through: type() of the object's own
    source, the class a new object was made from (`cls_source`), else the class itself baked in
    (an object reached without a source has its class fixed by what made it; the class's
    contents are not fixed: patching a method of `type(o)` or of a new object's class is a
    change like any other). An object whose exact type is guarded (`type_guarded`: a module)
    has its class baked in too: the guard on `type(m).forward` is then one fact about the
    class, shared by every instance (a model's 48 layers), not one per instance."""
    if var.source is not None:
        if getattr(var, "type_guarded", False):
            return ConstSource(var.python_type())
        return TypeSource(var.source)
    cls_source = getattr(var, "cls_source", None)
    return cls_source if cls_source is not None else ConstSource(var.python_type())


def guarded_type_lookup(tx, cls_source, cls, name):
    """`name` looked up on `cls` as `_PyType_Lookup` does ((entry, owner) as lookup_type_attr
    gives it, (None, None) when missing), guarded on the class at `cls_source` still giving
    the same entry, or nothing."""
    attr, owner = lookup_type_attr(cls, name)
    if class_can_change(cls):
        _guard_resolution(tx, cls_source, name, attr, owner)
    return attr, owner


def guarded_super_lookup(tx, cls, name, start_after):
    """super(start_after, obj).name with type(obj) `cls`: the lookup continues after
    `start_after` in cls.__mro__. Guarded: the MRO itself (a `__bases__` assignment replaces
    it), and each class from there to the one that held the entry resolves `name` as it did
    (C3 keeps each one's MRO a subsequence of cls's, so none of them gained `name`).
    Unsupported when `start_after` is not in the MRO (the user code raises TypeError)."""
    mro = cls.__mro__
    if start_after not in mro:
        raise Unsupported(f"super({getattr(start_after, '__name__', start_after)}, obj) with obj not an "
                          f"instance or subclass of it (the user code raises TypeError)")
    attr, owner = lookup_type_attr(cls, name, start_after)
    if not class_can_change(cls):
        return attr, owner
    tx.guard(IdMatch(AttrSource(ConstSource(cls), "__mro__"), mro))
    for klass in mro[mro.index(start_after) + 1:]:
        if not class_can_change(klass):
            continue
        _guard_resolution(tx, ConstSource(klass), name, *lookup_type_attr(klass, name))
        if klass is owner:
            break
    return attr, owner


def guard_type_entries(tx, var, names):
    """Guard what type(var)'s MRO holds under each of `names` (a behaviour the trace relied on
    through the type: default ==, hashing), when the class can change."""
    for name in names:
        guarded_type_lookup(tx, class_source(var), var.python_type(), name)


def _guard_resolution(tx, cls_source, name, attr, owner):
    if owner is None:
        tx.guard(Predicate.class_lacks(cls_source, name, f"defines no {name!r}"))
    else:
        guard_class_entry(tx, cls_source, name, attr)


def guard_class_lookup(tx, obj_var, name, attr, *, instance_dict=True):
    """Guard what `obj.name` found on the object's class: that type(obj)'s MRO still gives
    `attr` for `name` and, where an instance attribute would win (`instance_dict`: not a data
    descriptor, not a dunder looked up on the type), that the instance dict still lacks it.
    Without these, patching a method on the class (`mock.patch.object`), setting it on the
    instance, or replacing a property kept the traced behaviour on later calls. The guards are
    on the class and the instance dict, not the object's identity: a fresh object of the same
    class hits the same entry. An object without a source (made in the frame) has its class
    guarded through `class_source`; its instance dict is the frame's own."""
    if not class_can_change(obj_var.python_type()):
        return
    guard_class_entry(tx, class_source(obj_var), name, attr)
    src = obj_var.source
    if src is not None and instance_dict and not hasattr(type(attr), "__set__") and \
            isinstance(getattr(obj_var.value, "__dict__", None), dict):
        tx.guard(Predicate.key_absent(_generic_attr_source(obj_var, "__dict__"), name,
                                      f"no instance attribute {name!r} (the class's is used)"))


def check_dict_not_written(tx, obj_var, what):
    """Unsupported (a break before `what`) when the frame wrote to the object's `__dict__`
    through the dict itself (`m.__dict__[k] = v`, `vars(o).update(...)`, reached after a break):
    that write is pending until after the graph, and reads through the object see the live
    dict, which does not have it yet."""
    inst = getattr(obj_var.value, "__dict__", None)
    if isinstance(inst, dict) and changed_in_trace(tx, inst) is not None:
        raise Unsupported(f"{what} of an object whose __dict__ this frame changed through another reference")


def changed_in_trace(tx, container):
    """The Variable of the real `container` (a dict) if this frame changed it: the change is
    pending until after the graph, so the live object does not have it yet; else None."""
    alias = tx.wrap_memo.get(id(container))
    if alias is not None and alias[0] is container and getattr(alias[1], "_mutated", False):
        return alias[1]
    return None


_OBJECT_CLASS = object.__dict__["__class__"]
_NAMESPACE_SETATTR = types.SimpleNamespace.__setattr__  # generic, like object's


def bind_class_attr(tx, attr, obj_var, cls, source=None):
    """What `obj.attr` gives when attr was found on the class."""
    if isinstance(attr, types.FunctionType):
        modelled = getattr(obj_var, "modelled_method", None)  # a method the value model answers itself
        answer = modelled(attr) if modelled is not None else None
        if answer is not None:
            return answer
        made = class_stand_ins.method_var(tx, attr)  # a method of a class made in the frame
        return functions.BoundMethodVariable(made or functions.UserFunctionVariable(attr), obj_var)
    if attr is _OBJECT_CLASS:  # obj.__class__: the type, fixed by the object's identity/type guard
        return ClassVariable(cls, ConstSource(cls))
    if hasattr(obj_var, "slot_call"):  # object/dict/list slot methods act on the object's state
        slot = new_objects.slot_method(attr, on_object=True)
        if slot is not None:
            return functions.BoundMethodVariable(slot, obj_var)
    if isinstance(attr, staticmethod):
        return builder.wrap(tx, attr.__func__, None)
    if isinstance(attr, classmethod):
        return functions.BoundMethodVariable(builder.wrap(tx, attr.__func__, None), ClassVariable(cls))
    if descriptors.python_get(attr) is not None:  # a user descriptor: its __get__ traced
        return descriptors.call_get(tx, attr, obj_var, ClassVariable(cls))
    if isinstance(attr, property) and type(attr).__get__ is property.__get__:
        if attr.fget is None:
            raise Unsupported("unreadable property")
        return functions.UserFunctionVariable(attr.fget).call(tx, [obj_var], {})
    if ann.wraps_original(type(attr)):  # a compiled method binds as the function it stands for
        return functions.BoundMethodVariable(builder.wrap(tx, attr, None), obj_var)
    if hasattr(type(attr), "__get__"):
        raise Unsupported(f"descriptor {type(attr).__name__} on {cls.__name__}")
    return builder.wrap(tx, attr, source)


def special_method(tx, obj, name):
    """`name` looked up on type(obj) and bound to obj, as CPython looks up special methods
    (`with`'s __enter__/__exit__, contextlib's _lookup_special); None when the type has none."""
    cls = obj.python_type()
    attr, _ = guarded_type_lookup(tx, class_source(obj), cls, name)
    if attr is None:
        return None
    return bind_class_attr(tx, attr, obj, cls)


def _binds(attr):
    """A class attribute whose read gives something other than itself, traced without a
    source of its own (bind_class_attr: methods, static/class methods, C methods): its
    identity on the class is guarded separately. Plain class data is wrapped with the
    instance read's source, which re-reads it through ordinary lookup on every check."""
    return isinstance(attr, (types.FunctionType, staticmethod, classmethod, property)) or \
        hasattr(type(attr), "__get__")


def drain_next(tx, call_next):
    """The items `call_next()` gives (an object's own __next__, traced) until it raises
    StopIteration, as list() of an object that is its own iterator takes them."""
    out = []
    for _ in containers.bounded(tx):
        try:
            out.append(call_next())
        except UserException as e:
            if not issubclass(e.exc_type, StopIteration):
                raise
            return out


class UserObjectVariable(DictStorage, ObjectVariable):
    mutable = True

    def length(self, tx):
        if self._plain_dict("__len__"):
            return self.dict_contents(tx).length(tx)
        return object_protocols.length(tx, self)

    def iterate(self, tx):
        if self._plain_dict("__iter__"):
            return self.dict_contents(tx).iterate(tx)
        if isinstance(lookup_type_attr(type(self.value), "__iter__")[0], types.FunctionType):
            # its own __iter__ (a generator, or iter() of what it holds), traced, then drained
            it = special_method(tx, self, "__iter__").call(tx, [], {})
            return it.iterate(tx) if it is not self else self._drain_next(tx)
        if lookup_type_attr(type(self.value), "__iter__")[1] is None:  # the old sequence protocol
            it = live_iterators.user_iterator(tx, self)
            if it is not None:
                return it.iterate(tx)
        return super().iterate(tx)

    def _drain_next(self, tx):
        """An object that is its own iterator: its __next__ called until StopIteration."""
        nxt = lookup_type_attr(type(self.value), "__next__")[0]
        if not isinstance(nxt, types.FunctionType):
            raise Unsupported(f"iterating over {type(self.value).__name__}, whose __next__ is not Python")
        return drain_next(tx, lambda: special_method(tx, self, "__next__").call(tx, [], {}))

    def truthy(self, tx):
        """As CPython's bool(): object_protocols.truthy."""
        return object_protocols.truthy(tx, self)

    def getattr(self, tx, name):
        cls = type(self.value)
        if type(cls).__getattribute__ is not type.__getattribute__:
            raise Unsupported(f"{cls.__name__} has a metaclass that customises attribute lookup")
        custom, _ = guarded_type_lookup(tx, class_source(self), cls, "__getattribute__")
        if any(custom is g for g in new_objects.GENERIC_GETATTRIBUTE):  # dict subclasses: dict's slot is generic
            return self.generic_getattr(tx, name)
        if not isinstance(custom, types.FunctionType):
            raise Unsupported(f"{cls.__name__} customises attribute lookup")
        # A Python __getattribute__ is inlined like any method; its super().__getattribute__
        # reaches generic_getattr. (An AttributeError it raises stops the trace, so a
        # __getattr__ fallback is never guessed.)
        return functions.UserFunctionVariable(custom).call(tx, [self, ConstantVariable(name)], {})

    def generic_getattr(self, tx, name):
        """object.__getattribute__(obj, name): data descriptors, instance dict, class attributes."""
        pending = tx.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        obj, cls = self.value, type(self.value)
        if name == "__dict__" and isinstance(getattr(obj, "__dict__", None), dict):
            attr, _ = lookup_type_attr(cls, name)
            if type(attr) is types.GetSetDescriptorType:
                return InstanceDictVariable(self)
        attr, owner = lookup_type_attr(cls, name)
        if attr is not None and hasattr(type(attr), "__set__") and not isinstance(attr, types.MemberDescriptorType):
            guard_class_lookup(tx, self, name, attr)
            return bind_class_attr(tx, attr, self, cls)
        inst = getattr(obj, "__dict__", None)
        src = _generic_attr_source(self, name)
        check_dict_not_written(tx, self, f"reading {name!r}")
        if inst is not None and name in inst:
            return builder.wrap(tx, inst[name], src)
        if isinstance(attr, types.MemberDescriptorType):
            try:
                return builder.wrap(tx, getattr(obj, name), src)
            except AttributeError:
                raise Unsupported(f"slot {name!r} is empty (the user code raises AttributeError)")
        if owner is not None:  # (by the owner: a class attribute may be None, `flag = None`)
            if _binds(attr):
                guard_class_lookup(tx, self, name, attr)
            return bind_class_attr(tx, attr, self, cls, src)
        fallback, _ = lookup_type_attr(cls, "__getattr__")
        if isinstance(fallback, types.FunctionType):  # a Python __getattr__ is inlined
            if self.source is not None:  # it stands in only while ordinary lookup finds nothing
                guard_class_lookup(tx, self, "__getattr__", fallback, instance_dict=False)
                tx.guard(Predicate.lacks_generic_attr(self.source, name, f"ordinary lookup finds no {name!r}"))
            return functions.UserFunctionVariable(fallback).call(tx, [self, ConstantVariable(name)], {})
        if fallback is not None:
            raise Unsupported(f"{cls.__name__}.__getattr__ is not a Python function")
        if self.source is not None:  # relied on when caught (getattr default, hasattr)
            if cls.__getattribute__ is object.__getattribute__:
                tx.guard(Predicate.lacks_attr(self.source, name, f"has no attribute {name!r}"))
            else:  # reached from the class's own __getattribute__, inlined and guarded
                tx.guard(Predicate.lacks_generic_attr(
                    self.source, name, f"object.__getattribute__ finds no {name!r}"))
        raise exceptions.attribute_error(cls.__name__, name)

    def setattr(self, tx, name, value):
        cls = type(self.value)
        custom, _ = guarded_type_lookup(tx, class_source(self), cls, "__setattr__")  # (one set later runs)
        if custom is not object.__setattr__ and custom is not _NAMESPACE_SETATTR:
            if not isinstance(custom, types.FunctionType):
                raise Unsupported(f"{cls.__name__} customises __setattr__ ({type(custom).__name__})")
            # A Python __setattr__ (ModelOutput's) is inlined; its super().__setattr__ or
            # object.__setattr__(self, ...) reaches generic_setattr.
            functions.UserFunctionVariable(custom).call(tx, [self, ConstantVariable(name), value], {})
            return
        self.generic_setattr(tx, name, value, raw=False)

    def generic_setattr(self, tx, name, value, raw=True):
        """object.__setattr__(obj, name, value). `raw`: replayed as that call, not as a
        store through the class's own __setattr__ (which the trace inlined). The store is
        replayed after the graph, so only one shown to succeed is recorded: one into the
        instance dict, or into a slot of the object's own `__slots__` (a plain store). Another
        data descriptor on the class (a property) runs code, and an object without a
        `__dict__` raises AttributeError; either is a break here, where it runs natively,
        before the effects that follow it. What the class holds under `name` is guarded."""
        cls = type(self.value)
        attr, _ = guarded_type_lookup(tx, class_source(self), cls, name)
        slot = descriptors.stores_to_slot(attr, self.value, name)
        if attr is not None and hasattr(type(attr), "__set__") and not slot or name in ("__class__", "__dict__"):
            raise Unsupported(f"setting {cls.__name__}.{name} runs a descriptor")
        if not cls.__dictoffset__ and not slot:
            raise Unsupported(f"{cls.__name__} object has no __dict__ to store {name!r} in "
                              f"(the user code raises AttributeError)")
        tx.side_effects.store_attr(self, name, value, raw=raw)

    def slot_call(self, tx, owner, name, args, kwargs):
        """object's/dict's/OrderedDict's C method applied to this object (`super().__setattr__`,
        `dict.__setitem__(self, k, v)`, `super().get(k)`)."""
        if owner is object and not kwargs:
            if name == "__setattr__" and len(args) == 2:
                self.generic_setattr(tx, new_objects._attr_name(args[0]), args[1])
                return ConstantVariable(None)
            if name == "__getattribute__" and len(args) == 1:
                return self.generic_getattr(tx, new_objects._attr_name(args[0]))
        if owner is not object and isinstance(self.value, dict):
            return self.storage_call(tx, owner, name, args, kwargs)
        raise Unsupported(f"{owner.__name__}.{name} on a {type(self.value).__name__} object")

    def hasattr(self, tx, name):
        try:
            self.getattr(tx, name)
            return True
        except UserException as e:
            if not issubclass(e.exc_type, AttributeError) or hasattr(self.value, name):
                raise
            return False  # the traced lookup raised it: its own guards decide, as in getattr()
        except Unsupported:
            if hasattr(self.value, name):
                raise
            if self.source is not None:  # the answer is specialised on: guard it
                tx.guard(Predicate.lacks_attr(self.source, name, f"has no attribute {name!r}"))
            return False

    def getitem(self, tx, key):
        return self._item_method(tx, "__getitem__", [key], "subscript")

    def setitem(self, tx, key, value):
        self._item_method(tx, "__setitem__", [key, value], "item assignment")

    def delitem(self, tx, key):
        self._item_method(tx, "__delitem__", [key], "item deletion")

    def _item_method(self, tx, name, args, what):
        """obj[k], obj[k] = v, del obj[k]: a Python method of the class is inlined; dict's
        own (a dict subclass that does not override it) acts on the object's storage."""
        cls = type(self.value)
        attr, _ = lookup_type_attr(cls, name)
        if not (isinstance(attr, types.FunctionType) or dict_storage.is_storage_method(attr) and isinstance(self.value, dict)):
            raise Unsupported(f"{what} of {self}")
        guard_class_lookup(tx, self, name, attr, instance_dict=False)
        return bind_class_attr(tx, attr, self, cls).call(tx, args, {})

    def call(self, tx, args, kwargs):
        attr, _ = lookup_type_attr(type(self.value), "__call__")
        if attr is None:
            raise Unsupported(f"{type(self.value).__name__} object is not callable")
        guard_class_lookup(tx, self, "__call__", attr, instance_dict=False)
        return bind_class_attr(tx, attr, self, type(self.value)).call(tx, args, kwargs)

    def __repr__(self):
        return f"UserObject({type(self.value).__name__})"


class WrapperObjectVariable(UserObjectVariable):
    """An object that stands for the Python function it wraps (compile_annotations.
    wraps_original: a tracer.compile'd function). Called, that function is inlined, as
    TorchDynamo inlines a nested torch.compile: the wrapper's own cache plays no part, the outer
    trace guards what the inlined code reads, and a break inside is a break at this call (which
    then runs the wrapper natively). Anything else (its attributes, identity, type) is the
    object's own."""

    def call(self, tx, args, kwargs):
        return self.original(tx).call(tx, args, kwargs)

    def original(self, tx):
        """The wrapped function, read through the wrapper's source (guarded as any function)."""
        src = AttrSource(self.source, ann.ORIGINAL) if self.source is not None else None
        return builder.wrap(tx, getattr(self.value, ann.ORIGINAL), src)

    def __repr__(self):
        return f"Wrapper({type(self.value).__name__} of {getattr(self.value, '__qualname__', '?')})"


class ClassVariable(ObjectVariable):
    """A class object: used for isinstance, attribute reads, and classmethod calls."""

    cls = property(lambda self: self.value)

    def __init__(self, cls, source=None):
        super().__init__(cls, source)




    def is_constant(self):
        return False

    def truthy(self, tx):
        meta = type(self.cls)
        if getattr(meta, "__bool__", None) is None and getattr(meta, "__len__", None) is None:
            return True  # a class is true unless its metaclass says otherwise
        return Variable.truthy(self, tx)

    def getitem(self, tx, key):
        return introspection.class_subscript(tx, self, key)  # collections.OrderedDict[str, int]

    def hasattr(self, tx, name):
        """Whether the class (or a base) defines `name`, for classes of an ordinary
        metaclass; the answer is guarded when the class came from a source."""
        if type(self.cls) not in (type, abc.ABCMeta):
            raise Unsupported(f"hasattr on a class with the metaclass {type(self.cls).__name__}")
        meta_attr, _ = lookup_type_attr(type(self.cls), name)
        if meta_attr is not None and hasattr(type(meta_attr), "__set__"):
            # a getter of type's own (`__annotations__`, `__abstractmethods__`): whether it
            # answers for this class is what the read finds (guarded there; on 3.14 the first
            # read of `__annotations__` evaluates them: a break while they are pending)
            return exceptions.hasattr_by_getattr(tx, self, name)
        found = lookup_type_attr(self.cls, name)[1] is not None or hasattr(type, name)
        if self.source is not None:
            tx.guard(Predicate.made(self.source, _class_defines, (name, found),
                                    f"{'defines' if found else 'does not define'} {name!r}"))
        return found

    def getattr(self, tx, name):
        if name == "apply":
            if autograd_function.is_autograd_function_class(self.cls):
                return autograd_function.AutogradFunctionApplyVariable(self.cls)
        meta = type(self.cls)
        if meta.__getattribute__ is not type.__getattribute__:
            raise Unsupported(f"the metaclass {meta.__name__} customises attribute lookup")
        with descriptors.metaclass_getattr_refused(tx, self, name):
            return self._type_getattribute(tx, name)

    def _type_getattribute(self, tx, name):
        """type.__getattribute__: a data descriptor of the metaclass (__name__, __mro__,
        __bases__, __doc__, __module__, __class__, a metaclass property...) first, then the
        class's own MRO (a descriptor there read as `__get__(None, cls)`), then the rest of
        the metaclass (its methods, bound to the class)."""
        meta_attr, meta_owner = lookup_type_attr(type(self.cls), name)
        if meta_attr is not None and hasattr(type(meta_attr), "__set__"):
            if type(meta_attr) not in (types.GetSetDescriptorType, types.MemberDescriptorType):
                return descriptors.metaclass_get(tx, self, name, meta_attr)  # user code: traced, never re-read
            if name == "__dict__":
                if type(self.cls.__dict__) is not types.MappingProxyType:
                    raise Unsupported(f"{self.cls.__name__}.__dict__ is not a mappingproxy")
                # (a class reached without a source, `type(a)`, is read through itself: the
                # guards that gave this very class hold it already)
                src = self.source if self.source is not None else ConstSource(self.cls)
                return keyed_dict.MappingProxyVariable(self.cls.__dict__, AttrSource(src, "__dict__"))
            src = self.source if self.source is not None else ConstSource(self.cls)
            if meta_attr is _TYPE_ANNOTATIONS and lazy_annotations.LAZY:  # (may run its __annotate__)
                return lazy_annotations.read(tx, self.cls, src)
            try:
                value = getattr(self.cls, name)
            except AttributeError as e:  # (the getter refuses this class: `C.__abstractmethods__`)
                tx.guard(Predicate.lacks_attr(src, name, f"has no attribute {name!r}"))
                raise exceptions.user_error(AttributeError, str(e))
            return builder.wrap(tx, value, AttrSource(self.source, name) if self.source is not None else None)
        attr, owner = lookup_type_attr(self.cls, name)
        if name == "fromkeys" and self.cls in collections_vars.FROMKEYS_CLASSES:
            return collections_vars.FromKeysVariable(self.cls)
        if owner is None:  # (not `attr is None`: `X = None` on the class is an attribute)
            if meta_owner is not None and _binds(meta_attr):
                if class_can_change(self.cls):  # (a class attribute set later would win)
                    _guard_resolution(tx, self.source if self.source is not None else ConstSource(self.cls), name, None, None)
                return descriptors.metaclass_get(tx, self, name, meta_attr)
            if meta_owner is not None and self.source is not None:
                # plain data on the metaclass, read through the class (re-read by the guard)
                return builder.wrap(tx, meta_attr, AttrSource(self.source, name))
            if meta_attr is None and self.source is not None:
                tx.guard(Predicate.lacks_attr(self.source, name, f"has no attribute {name!r}"))
                raise exceptions.user_error(AttributeError, f"type object {self.cls.__name__!r} has no attribute {name!r}")
            raise Unsupported(f"class {self.cls.__name__} has no attribute {name!r}")
        if self.source is None and class_can_change(self.cls):
            # type(o), a classmethod's cls, a new object's class: read through the class itself
            if _binds(attr):
                guard_class_entry(tx, ConstSource(self.cls), name, attr)
            else:
                return builder.wrap(tx, attr, AttrSource(ConstSource(self.cls), name))
        if isinstance(attr, (staticmethod, classmethod)) and self.source is not None:
            guard_class_entry(tx, self.source, name, attr)  # replaced on the class later
        if isinstance(attr, staticmethod):
            return builder.wrap(tx, attr.__func__, None)
        if isinstance(attr, classmethod):
            return functions.BoundMethodVariable(builder.wrap(tx, attr.__func__, None), self)
        slot = new_objects.slot_method(attr)  # OrderedDict.__setitem__ & co., applied to a new object
        if slot is not None:
            return slot
        if descriptors.python_get(attr) is not None:  # a user descriptor (a classproperty)
            if self.source is not None:
                guard_class_entry(tx, self.source, name, attr)
            return descriptors.call_get(tx, attr, ConstantVariable(None), self)
        if not descriptors.reads_as_itself(attr, self.cls):
            raise Unsupported(f"reading {self.cls.__name__}.{name} runs {type(attr).__name__}.__get__, "
                              f"which gives something other than the class attribute")
        src = AttrSource(self.source, name) if self.source is not None else None
        return builder.wrap(tx, attr, src)

    def call(self, tx, args, kwargs):
        if self.cls in _IMMUTABLE_INFO_CLASSES() and all(a.is_constant() for a in args) and \
                all(v.is_constant() for v in kwargs.values()):
            # torch.finfo(dtype)/iinfo(dtype): immutable facts about a constant dtype;
            # torch.device("cpu"): an immutable value (a constant of the trace)
            try:
                return ConstantVariable(self.cls(*[a.as_constant() for a in args],
                                                 **{k: v.as_constant() for k, v in kwargs.items()}))
            except (TypeError, ValueError, RuntimeError) as e:
                raise Unsupported(f"{self.cls.__name__}() raises {type(e).__name__} (the user code raises it)")
        if _is_plain_namedtuple(self.cls):
            import inspect
            try:
                bound = inspect.signature(self.cls).bind(*args, **kwargs)
            except TypeError as e:
                raise Unsupported(f"{self.cls.__name__}() does not bind: {e} (the user code raises TypeError)")
            bound.apply_defaults()
            items = [v if isinstance(v, Variable) else builder.wrap(tx, v, None) for v in bound.arguments.values()]
            return named_tuples.NamedTupleVariable(items, self.cls)
        manager = mode_blocks.make_manager(tx, self.cls, args, kwargs)
        if manager is not None:
            return manager
        make = collections_vars.constructor(self.cls)
        if make is not None:
            return make(tx, list(args), dict(kwargs))
        if exceptions.is_modelled_exception(self.cls) and not kwargs:
            return exceptions.ExceptionVariable(self.cls, list(args))
        if new_objects.is_user_class(self.cls) or new_objects.is_torch_module_class(self.cls):
            return new_objects.construct(tx, self, args, kwargs)
        if self.cls in torch_calls.LEGACY_TENSOR_TYPES:
            return torch_calls.legacy_constructor(tx, self.cls, args, kwargs)
        raise Unsupported(f"constructing a {self.cls.__name__} object inside the traced frame")

    def reconstruct(self, cg):
        class_stand_ins.load_class(cg, self.cls)  # (one made in the frame: made again, per call)

    def __repr__(self):
        return f"Class({self.cls.__name__})"


_TYPE_ANNOTATIONS = type.__dict__.get("__annotations__")  # (the getter of a class's annotations)


def _class_defines(name, found):
    return lambda c: any(name in k.__dict__ for k in c.__mro__) == found


def _IMMUTABLE_INFO_CLASSES():
    import torch
    return (torch.finfo, torch.iinfo, torch.device)


def _is_plain_namedtuple(cls):
    """A collections.namedtuple class (or a subclass) whose construction is the generated __new__."""
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        return False
    _new, owner = lookup_type_attr(cls, "__new__")
    _init, init_owner = lookup_type_attr(cls, "__init__")
    return owner is not None and "_make" in owner.__dict__ and "_fields" in owner.__dict__ and \
        init_owner in (object, tuple) and type(cls) is type


class SuperVariable(Variable):
    """super() inside a method: attribute lookup continues after `cls` in type(obj).__mro__."""

    def __init__(self, cls, obj):
        super().__init__(None)
        self.cls, self.obj = cls, obj

    def reconstruct(self, cg):
        """super(cls, obj), rebuilt after the graph (a break with super() on the stack)."""
        cg.call_with(super, [ConstantVariable(self.cls), self.obj])

    def getattr(self, tx, name):
        if name == "__class__":  # the super object's own class, not obj's (CPython's super_getattro)
            return ClassVariable(super, ConstSource(super))
        if isinstance(self.obj, ClassVariable):  # super() in a classmethod or __new__
            return self._class_getattr(tx, name)
        obj_type = self.obj.python_type()
        attr, owner = guarded_super_lookup(tx, obj_type, name, self.cls)
        if attr is None:
            raise Unsupported(f"super() has no attribute {name!r}")
        if attr is object.__init__:
            return functions.BuiltinVariable(lambda *a, **k: None)
        if any(attr is g for g in _generic_getattribute()) and isinstance(self.obj, UserObjectVariable):
            return GenericGetattrVariable(self.obj)
        return bind_class_attr(tx, attr, self.obj, obj_type)


    def _class_getattr(self, tx, name):
        """super(C, cls).name: lookup continues after C in cls.__mro__; functions come back
        unbound, classmethods bound to cls (object.__new__ and other builtins: Unsupported)."""
        klass = self.obj.value
        if not (isinstance(klass, type) and isinstance(self.cls, type) and issubclass(klass, self.cls)):
            raise Unsupported("super(C, x) where x is neither an instance nor a subclass of C")
        attr, _owner = guarded_super_lookup(tx, klass, name, self.cls)
        if attr is object.__new__:  # super().__new__(cls) in a custom __new__
            return functions.BuiltinVariable(object.__new__)
        if isinstance(attr, staticmethod):
            attr = attr.__func__
        if isinstance(attr, types.FunctionType):
            return builder.wrap(tx, attr, None)
        if isinstance(attr, classmethod) and isinstance(attr.__func__, types.FunctionType):
            return functions.BoundMethodVariable(builder.wrap(tx, attr.__func__, None), self.obj)
        raise Unsupported(f"super().{name} in a classmethod or __new__ reaches "
                          f"{type(attr).__name__} {getattr(attr, '__qualname__', '')}")


def zero_arg_super(tx):
    """`super()` without arguments in the method `tx` interprets: its `__class__` cell and
    its first argument."""
    if "__class__" not in tx.cells or tx.code.co_argcount == 0:
        raise Unsupported("super() outside a method")
    cls = python_object(tx.cells["__class__"].get(tx))
    first = tx.code.co_varnames[0]
    obj = tx.cells[first].get(tx) if first in tx.cells else tx.locals[first]
    return SuperVariable(cls, obj)


def _generic_getattribute():
    return new_objects.GENERIC_GETATTRIBUTE


class GenericGetattrVariable(Variable):
    """object.__getattribute__ bound to a user object (reached through super()), or another
    lookup the value model answers itself (`lookup(tx, name)`: nn.Module.__getattr__)."""

    def __init__(self, obj, lookup=None):
        super().__init__(None)
        self.obj, self.lookup = obj, lookup or obj.generic_getattr

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs or not args[0].is_constant() or not isinstance(args[0].as_constant(), str):
            raise Unsupported("an attribute lookup with a name that is not a constant string")
        return self.lookup(tx, args[0].as_constant())


_ABSENT = object()


class InstanceDictVariable(Variable):
    """obj.__dict__ of a user object, read key by key: each key read is guarded on its own
    (value guard, or an absence predicate), so the rest of the dict is not specialised on.
    Only reads are modelled; anything else is Unsupported."""

    def __init__(self, obj):
        super().__init__(_generic_attr_source(obj, "__dict__"))
        self.obj = obj

    def python_type(self):
        return dict

    def _read(self, tx, key):
        if not key.is_constant() or not isinstance(key.as_constant(), str):
            raise Unsupported("obj.__dict__ read with a key that is not a constant string")
        k = key.as_constant()
        pending = tx.side_effects.attr_stores.get(tx.side_effects.key(self.obj))
        if pending:
            # a store the trace made to a user object went to the instance dict (generic_setattr
            # refuses the ones a descriptor takes; one into a slot leaves the dict as it was):
            # the stored value is what the dict holds now
            stored = k in pending[1] and not descriptors.is_slot(lookup_type_attr(type(self.obj.value), k)[0])
            if stored and isinstance(self.obj, UserObjectVariable):
                tx.side_effects.pending_reads += 1
                return pending[1][k]
            if stored or not _stores_keep_other_keys(self.obj):
                raise Unsupported("obj.__dict__ read after attribute stores in the trace")
        d = self.obj.value.__dict__
        if k in d:
            return builder.wrap(tx, d[k], ItemSource(self.source, k) if self.source is not None else None)
        if self.source is not None:
            tx.guard(Predicate.key_absent(self.source, k, f"{k!r} not in __dict__"))
        return _ABSENT

    def call_method(self, tx, name, args, kwargs):
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            got = self._read(tx, args[0])
            if got is _ABSENT:
                return args[1] if len(args) == 2 else ConstantVariable(None)
            return got
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstantVariable(self._read(tx, args[0]) is not _ABSENT)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        raise Unsupported(f"obj.__dict__.{name}() is not modelled")

    def getitem(self, tx, key):
        got = self._read(tx, key)
        if got is _ABSENT:
            raise Unsupported(f"obj.__dict__[{key.as_constant()!r}] is missing (the user code raises KeyError)")
        return got

    def __repr__(self):
        return f"InstanceDict({type(self.obj.value).__name__})"


def _stores_keep_other_keys(var):
    """Whether the attribute stores the trace made to `var` left every other key of its
    `__dict__` as it was (those keys are the real dict's): a user object's (each store goes to
    its own key), a module's (nn.Module.__setattr__ writes or removes only the stored name, in
    `__dict__` or one of _parameters/_buffers/_modules: which one is not modelled, so a read of
    that name is a break). A module's `register_buffer` reads `"_buffers" in self.__dict__`:
    after `self.max_cached = n` (HF's grow-on-demand rotary caches) it was a graph break."""
    return isinstance(var, UserObjectVariable) or isinstance(getattr(var, "value", None), torch.nn.Module)


def _generic_attr_source(var, name):
    if var.source is None:
        return None
    if lookup_type_attr(type(var.value), "__getattribute__")[0] is object.__getattribute__:
        return AttrSource(var.source, name)
    return GenericAttrSource(var.source, name)


class OpaqueVariable(ObjectVariable):
    """A value we only compare by identity/equality or pass through (enum members, types)."""

    def __init__(self, value, source=None):
        super().__init__(value, source)




    def truthy(self, tx):
        t = type(self.value)
        if not hasattr(t, "__bool__") and not hasattr(t, "__len__"):
            return True  # plain objects are truthy; anything with __bool__/__len__ is not guessed
        return Variable.truthy(self, tx)

    def call(self, tx, args, kwargs):
        name = getattr(self.value, "__qualname__", type(self.value).__name__)
        module = getattr(self.value, "__module__", "") or ""
        raise Unsupported(f"call to {module + '.' if module else ''}{name}, which is not traced")

    def getattr(self, tx, name):
        import enum
        import functools
        if isinstance(self.value, enum.Enum) and name in ("name", "value"):
            return builder.wrap(tx, getattr(self.value, name), None)
        attr, _ = lookup_type_attr(type(self.value), name)
        if isinstance(attr, functools._lru_cache_wrapper) and name not in getattr(self.value, "__dict__", {}):
            # an lru_cache'd method (transformers' logger.warning_once): see LruCacheVariable
            return functions.LruCacheVariable(types.MethodType(attr, self.value))
        t = type(self.value)
        raise Unsupported(f"attribute {name!r} of {t.__module__}.{t.__qualname__} object (not traced)")

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        cg.load_const(self.value)

    def __repr__(self):
        return f"Opaque({self.value!r})"


  # noqa: E402,F401 (re-exported)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import functions, new_objects, object_protocols, dict_storage, mode_blocks, torch_calls, collections_vars, autograd_function, containers, named_tuples, exceptions, builder, introspection, keyed_dict, descriptors, lazy_annotations, live_iterators  # noqa: E402
