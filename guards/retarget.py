"""Guards and sources re-targeted: the same facts read through another root.

Why: a model's repeated blocks read the same things through different modules. A block traced
once is replayed on a sibling with its guards re-targeted to the sibling's source
(tracer/variables/blocks.py), and the rewritten code loads many graph inputs through one
shared prefix kept in a temporary (tracer/rewrite/codegen.py).
"""

import dataclasses
import types

from .guard import Guard, IdMatch, Predicate
from .sources import DERIVED_ATTRS, Source


class Retarget:
    """Called on a guard or a source: the same with source `old` replaced by `new` wherever it
    appears (a block's module by its sibling's). Sources and guards are frozen: a changed one
    is a copy with its changed fields (and no cached hash)."""

    def __init__(self, old, new, tag=False):
        # `tag`, for a replayed block's guards (old is the stand-in root), whose group check
        # text is then made once (guards/builder.py): each copy names its original
        self.old, self.new, self.memo, self.tag = old, new, {}, tag

    def __call__(self, obj):
        if obj is self.old:
            return self.new
        if isinstance(obj, Source):
            hit = self.memo.get(obj)  # (first: a block's sources share their prefixes)
            if hit is None:
                hit = self.new if obj == self.old else self._copy(obj)
                self.memo[obj] = hit
            return hit
        if isinstance(obj, Guard):
            return self._copy(obj)
        if type(obj) is tuple:
            if not any(isinstance(o, _HOLDS_SOURCES) for o in obj):  # (a dict's keys, a value)
                return obj
            new = tuple(self(o) for o in obj)
            return obj if all(a is b for a, b in zip(new, obj)) else new
        return obj

    def _copy(self, obj):
        # (a replayed block re-targets thousands: fields are read and written through the
        # instance dict, which frozen dataclasses still have)
        fields = obj.__dict__
        changed = {}
        kept = getattr(obj, "read_from_stand_in", ())
        for k, v in fields.items():
            if k not in DERIVED_ATTRS and k not in kept and isinstance(v, _HOLDS_SOURCES):
                new_v = self(v)
                if new_v is not v:
                    changed[k] = new_v
        if not changed:
            return obj
        if isinstance(obj, Predicate):
            # each predicate of an inlined trace has a check function of its own (made from its
            # arguments): a copy sharing it would make the guard set's text differ from the
            # one a disk-cache reader makes again, and its compiled code go unused
            changed["fn"] = _fresh(fields["fn"])
        new = object.__new__(type(obj))
        d = new.__dict__
        d.update(fields)
        for k in DERIVED_ATTRS:
            d.pop(k, None)
        d.update(changed)
        if self.tag:
            name_template(new, self.new, obj)
        return new


_HOLDS_SOURCES = (Source, Guard, tuple)


def name_template(obj, root, template):
    """Note on `obj` (a guard or source read through `root`) that `template` is the same read
    through the stand-in root (`_template`, one of sources.DERIVED_ATTRS): guards/builder.py
    knows a guard group's text by these without making it."""
    obj.__dict__["_template"] = (root, template)


def _fresh(fn):
    """Another function object with `fn`'s code, closure and defaults (fn itself if not a
    plain function)."""
    if type(fn) is not types.FunctionType:
        return fn
    new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    return new


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class StandIn(Source):
    """A root that stands for whichever module a re-targeted copy will read through: `V` in
    generated code. A replayed block's guards are kept from it (tracer/variables/blocks.py),
    and a guard group's text is known by its guards read from it (guards/builder.py)."""

    def _key(self):
        return ()

    def name(self):
        return "<block>"

    def guard_expr(self, ctx):
        return "V"


STAND_IN = StandIn()


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BlockGuards(Guard):
    """A replayed block's guards as one: the facts of `template` (guards read from the stand-in
    root, in evaluation order) read through `source`, the sibling module.

    Why: a replayed layer re-checks about a hundred facts of its first block. Copied one by
    one for each of 48 layers, they were most of the guard set's build: each copy made,
    hashed, deduplicated, sorted and grouped again, though every layer's are the same facts.
    As one guard, a layer costs the set one entry; its group check's text (guards/builder.py)
    and C ops (guards/fastpath.py) are made from the template, which every sibling shares.
    It means exactly the conjunction of its copies (`expand()`): what needs them one by one
    (the slow path naming a failed guard, `describe`, the disk cache) gets them, copied
    then and only then. `template` is the same tuple object for every sibling of a block,
    and the guard is known by it (`_key`)."""

    source: Source
    template: tuple
    read_from_stand_in = ("template",)  # (fields Retarget leaves as they are)

    def _key(self):
        return (self.source, id(self.template))

    def depth(self):
        return self.source.depth()

    def expand(self) -> list:
        """The template's guards re-targeted to `source` (made once)."""
        got = self.__dict__.get("_expanded")
        if got is None:
            to = Retarget(STAND_IN, self.source)
            got = [to(g) for g in self.template]
            object.__setattr__(self, "_expanded", got)
        return got

    def conditions(self, ctx):
        # (a group check of the block's root is made from the template: builder._group_check)
        return [c for g in self.expand() for c in g.conditions(ctx)]

    def flat(self) -> list:
        """The guards it stands for, one by one (a block replayed inside the block: its own
        guards too)."""
        return [f for g in self.expand() for f in (g.flat() if type(g) is BlockGuards else (g,))]

    def width(self) -> int:
        """len(self.flat()), without copying anything."""
        n = self.__dict__.get("_width")
        if n is None:
            n = sum(g.width() if type(g) is BlockGuards else 1 for g in self.template)
            object.__setattr__(self, "_width", n)
        return n

    def expired(self) -> bool:
        return any(g.expired() for g in self.template if type(g) in (IdMatch, BlockGuards))

    def describe(self):
        return f"the {len(self.template)} facts of a replayed block, read through {self.source.name()}"
