"""Guards and sources re-targeted: the same facts read through another root.

Why: a model's repeated blocks read the same things through different modules. A block traced
once is replayed on a sibling with its guards re-targeted to the sibling's source
(tracer/variables/blocks.py), and the rewritten code loads many graph inputs through one
shared prefix kept in a temporary (tracer/rewrite/codegen.py).
"""

import types

from .guard import Guard, Predicate
from .sources import Source


class Retarget:
    """Called on a guard or a source: the same with source `old` replaced by `new` wherever it
    appears (a block's module by its sibling's). Sources and guards are frozen: a changed one
    is a copy with its changed fields (and no cached hash)."""

    def __init__(self, old, new):
        self.old, self.new, self.memo = old, new, {}

    def __call__(self, obj):
        if isinstance(obj, Source):
            if obj == self.old:
                return self.new
            hit = self.memo.get(obj)
            if hit is None:
                hit = self.memo[obj] = self._copy(obj)
            return hit
        if isinstance(obj, Guard):
            return self._copy(obj)
        if type(obj) is tuple:
            new = tuple(self(o) for o in obj)
            return obj if all(a is b for a, b in zip(new, obj)) else new
        return obj

    def _copy(self, obj):
        # (a replayed block re-targets thousands: fields are read and written through the
        # instance dict, which frozen dataclasses still have)
        fields = obj.__dict__
        changed = {}
        for k, v in fields.items():
            if k not in _CACHED and isinstance(v, _HOLDS_SOURCES):
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
        for k in _CACHED:
            d.pop(k, None)
        d.update(changed)
        return new


_HOLDS_SOURCES = (Source, Guard, tuple)
_CACHED = ("_hash", "_depth")  # (computed from the fields a copy changes)


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
