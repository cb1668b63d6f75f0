"""A tuple of constants read from the frame's inputs, guarded by what the trace reads of it.

A tuple of constants (`(2.0, step)` passed in, a module's `kernel_size`) is a constant to the
trace, and was guarded whole (equality) when first met: a frame reading `t[0]` of an argument
whose `t[1]` changes on every call recompiled on every call (torch.compile: once). Here the
tuple is a ConstantVariable whose equality guard is made on the first use of its whole value
(`value`, which every use but the ones below goes through); an item read by a constant index
guards the tuple's type and length and the item alone (through its own source, so an int
item that changes may become symbolic, as an argument does), `len()` and truth the type and
length, and passing it on through the rewritten code reloads it (its identity) unguarded.
A whole use also records its ints (floats) as the frame's automatic dynamic sees int
arguments: one that changes makes the next trace read the tuple item by item
(builder._tuple), that item a symbol, so a `shape` tuple or torch.Size passed in is not a
new constant on every call. A torch.Size is one of these too, and stays a Size.
"""
from guards import LengthMatch
from guards.sources import ItemSource

from .base import ConstantVariable, Variable


class InputTupleVariable(ConstantVariable):
    """A tuple (or torch.Size) of constants with a source, guarded as it is used (see the
    module's docstring)."""

    def __init__(self, tx, value, source):
        Variable.__init__(self, source)
        self._value, self._tx = value, tx
        self._whole = self._length = False  # (the guards made so far)

    @property
    def value(self):
        """The tuple, its equality guarded: a use of the whole value."""
        if not self._whole:
            self._made("_whole", builder.const_guard(self.source, self._value))
            builder.note_number_items(self._tx, self._value, self.source)
        return self._value

    def _guard_length(self):
        if not self._length and not self._whole:
            self._made("_length", LengthMatch(self.source, len(self._value), type(self._value)))

    def _made(self, flag, guard):
        """Guard, and remember it is made (forgotten with the guard when a refused trial
        inline drops it: lazy_reads.py)."""
        tx = self._tx
        tx.guard(guard)
        setattr(self, flag, True)
        tx.ctx.lazy_reads.record(lambda: True, lambda: setattr(self, flag, False))

    def python_type(self):
        self._guard_length()
        return type(self._value)  # (tuple or torch.Size)

    def is_constant(self):
        return True

    def length(self, tx):
        self._guard_length()
        return len(self._value)

    def truthy(self, tx):
        self._guard_length()
        return bool(self._value)

    def getitem(self, tx, key):
        index = key.as_constant() if key.is_constant() else None
        if type(index) is not int or not -len(self._value) <= index < len(self._value) or self._whole:
            return super().getitem(tx, key)  # (the whole value: slices, an IndexError)
        self._guard_length()
        index %= len(self._value)
        return builder.wrap(tx, self._value[index], ItemSource(self.source, index))

    def reconstruct(self, cg):
        cg.load_source(self.source)  # the caller's object, whatever the trace read of it

    def __repr__(self):
        return f"InputTuple({self._value!r})"


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builder  # noqa: E402
