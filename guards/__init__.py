"""frametracer guards: sources, guard kinds, and compiling a guard set into one fast check.

Why a separate package: the design keeps guards independent of the interpreter
(``guards`` knows sources and values, never ``tracer``).  A compiled set is called as
``check(L, G, C) -> bool`` with L = the frame's argument values in co_varnames order,
G = its globals dict, C = its closure tuple (or None); it never raises.
"""

from .builder import GuardSet, compile_guards, order_guards
from .guard import (ConstMatch, DictKeysMatch, GlobalStateMatch, Guard, IdMatch, LengthMatch,
                    NoAliasing, Predicate, QueryMatch, SameObject, TypeMatch, check_const_supported, exact_equal)
from .sources import (AttrSource, BuiltinSource, CellSource, ConstSource, GlobalSource,
                      ItemSource, DictItemSource, LocalSource, Source, TypeSource, const_key, is_from_cell,
                      is_from_const, is_from_global, is_from_local)
from .shape import ComputedNumberSource, ShapeMatch, TensorPropSource
from .tensor import StorageSharing, TensorFact, TensorMatch

__all__ = [
    "AttrSource", "BuiltinSource", "CellSource", "ConstMatch", "ConstSource", "DictKeysMatch",
    "GlobalSource", "GlobalStateMatch", "Guard", "GuardSet", "IdMatch", "ItemSource", "DictItemSource",
    "LengthMatch", "LocalSource", "NoAliasing", "Predicate", "QueryMatch", "SameObject", "ShapeMatch", "Source", "StorageSharing",
    "TensorFact", "TensorMatch", "TensorPropSource", "TypeMatch", "TypeSource", "check_const_supported", "exact_equal", "compile_guards",
    "ComputedNumberSource", "const_key", "is_from_cell", "is_from_const", "is_from_global", "is_from_local",
    "order_guards",
]
