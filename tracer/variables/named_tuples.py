"""Tuples with names: namedtuple instances (fields plus the class's methods, properties and
data) and C struct sequences (`torch.return_types.*`, `os.stat_result`).

Why a module of their own: both are TupleVariables whose attribute reads go through the
class (guarded like any object's), which the plain containers never need.
"""
from ..exc import Unsupported
from .base import ConstantVariable
from .containers import TupleVariable, sequence_index
from guards import ItemSource, Predicate
from guards.sources import AttrSource
from bytecode_utils import versions


class NamedTupleVariable(TupleVariable):
    """A namedtuple instance: items plus field names; attribute reads by field, then as
    `object.__getattribute__` goes on (the class's methods, properties and data, and, for a
    subclass whose instances have a __dict__, attributes set on one made in the frame)."""

    def __init__(self, items, cls, source=None):
        super().__init__(items, source)
        self.cls = cls
        self.kind = cls
        self.attrs = {}  # set on it in this frame, in order (it has no source: nothing to replay)
        self.instance_dict = None  # an input's own __dict__ (builder), read through its source

    def getattr(self, tx, name):
        if name in self.cls._fields:
            return self.items[self.cls._fields.index(name)]
        if name in self.attrs:
            return self.attrs[name]
        cls_source = objects.class_source(self)
        attr, owner = objects.guarded_type_lookup(tx, cls_source, self.cls, name)
        if self.source is not None and _has_instance_dict(self.cls) and not hasattr(type(attr), "__set__"):
            # an input whose instance dict may hold `name` (a data descriptor would win)
            if self.instance_dict is None:
                raise Unsupported(f"attribute {name!r} of a {self.cls.__name__}, whose instances have a __dict__")
            dict_source = AttrSource(self.source, "__dict__")
            if name in self.instance_dict:
                return builder.wrap(tx, self.instance_dict[name], ItemSource(dict_source, name))
            tx.guard(Predicate.key_absent(dict_source, name, f"no instance attribute {name!r} (the class's is used)"))
        if owner is None:
            raise exceptions.attribute_error(self.cls.__name__, name)
        return objects.bind_class_attr(tx, attr, self, self.cls, AttrSource(cls_source, name))

    def call_method(self, tx, name, args, kwargs):
        _attr, owner = objects.lookup_type_attr(self.cls, name)
        if name in self.attrs or (owner is not None and owner not in (tuple, object)):
            return self.getattr(tx, name).call(tx, args, kwargs)  # the class's own method
        return super().call_method(tx, name, args, kwargs)

    def setattr(self, tx, name, value):
        attr, owner = objects.lookup_type_attr(self.cls, name)
        if self.source is not None or not _has_instance_dict(self.cls) or name in self.cls._fields or \
                (owner is not None and hasattr(type(attr), "__set__")):
            return super().setattr(tx, name, value)
        self.attrs[name] = value

    def getitem(self, tx, key):
        if isinstance(sequence_index(key), slice):  # a slice of a namedtuple is a plain tuple
            return TupleVariable(self.items[sequence_index(key)])
        return super().getitem(tx, key)

    def as_constant(self):
        if self.attrs:
            raise Unsupported(f"a {self.cls.__name__} with attributes set on it as a constant")
        return self.cls(*(i.as_constant() for i in self.items))

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        if self.attrs:
            cg.extend(versions.load_const_callable(with_attrs))
        # tuple.__new__(cls, items), as the class's generated __new__ makes it: not cls(*items),
        # which runs that __new__, a frame of its own (compiled too, it would rebuild its own
        # result by calling itself)
        cg.extend(versions.load_const_callable(tuple.__new__))
        cg.load_const(self.cls)
        for item in self.items:
            cg.reconstruct(item)
        cg.build(tuple, len(self.items))
        cg.call(2)
        if not self.attrs:
            return
        cg.load_const(tuple(self.attrs))
        for value in self.attrs.values():
            cg.reconstruct(value)
        cg.call(2 + len(self.attrs))


def with_attrs(obj, names, *values):
    """`obj` with the attributes `names` set to `values` (a namedtuple made in a traced frame)."""
    for name, value in zip(names, values):
        setattr(obj, name, value)
    return obj


def _has_instance_dict(cls):
    """Instances of this tuple subclass have a __dict__ (a class of the MRO above tuple
    declares no __slots__)."""
    return any("__slots__" not in vars(c) for c in cls.__mro__ if c not in (tuple, object))


def is_structseq(cls):
    """A C struct sequence type: torch.return_types.min, os.stat_result, time.struct_time..."""
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields")


class StructSeqVariable(TupleVariable):
    """A struct sequence (`torch.return_types.*` from min(dim)/max(dim)/sort/topk/...):
    a tuple whose items are also readable by field name (`.values`, `.indices`)."""

    def __init__(self, items, cls, source=None):
        super().__init__(items, source)
        if cls.n_fields != cls.n_sequence_fields:
            raise Unsupported(f"struct sequence {cls.__name__} with fields beyond its items")
        self.cls = cls
        self.kind = cls
        self.fields = tuple(cls.__match_args__)

    def getattr(self, tx, name):
        if name in self.fields:
            return self.items[self.fields.index(name)]
        if name in ("n_fields", "n_sequence_fields", "n_unnamed_fields"):
            return ConstantVariable(getattr(self.cls, name))
        raise Unsupported(f"{self.cls.__name__} attribute {name!r}")

    def getitem(self, tx, key):
        if isinstance(sequence_index(key), slice):  # a slice of a struct sequence is a plain tuple
            return TupleVariable(self.items[sequence_index(key)])
        return super().getitem(tx, key)

    def as_constant(self):
        return self.cls(tuple(i.as_constant() for i in self.items))

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        for item in self.items:
            cg.reconstruct(item)
        cg.build(tuple, len(self.items))
        cg.call_on_stack(self.cls)  # cls(sequence)

    def __repr__(self):
        return f"{self.cls.__name__}Var({self.items!r})"


# imported as modules, after this module's own definitions (the value model's one import
# cycle, see docs/design.md); their names are read when a function runs
from . import objects, builder, exceptions  # noqa: E402
