"""Iterators given to a traced frame (a loop's iterator at a resume function's entry, one
passed in): list, tuple and range iterators, modelled from their position and what they read,
never advanced by a guard. `builder` wraps them through this module."""
from guards import ConstMatch, LengthMatch, TypeMatch
from guards.sources import CallSource, ItemSource

from ..exc import Unsupported
from .containers import ListVariable

SEQ_ITERATORS = (type(iter(())), type(iter([])), type(iter(range(0))))
MAX_ITERATOR_ITEMS = 100_000  # (a range iterator over 2**32 items reached a break: MemoryError)


class IterRestSource(CallSource):
    """The remaining items of a list/tuple/range iterator, as a tuple (not advancing it)."""

    def function(self):
        return containers.iter_rest


class IterSeqSource(CallSource):
    """The list a list iterator reads (`iter_seq(it)`)."""

    def function(self):
        return containers.iter_seq


class IterPosSource(CallSource):
    """A list iterator's position (`iter_pos(it)`)."""

    def function(self):
        return containers.iter_pos


def list_iterator(tx, value, source, g):
    """A list iterator: its type and position; the list it reads is wrapped (and guarded) as
    itself, live: the same Variable as a local holding it (memo by id), so the loop body's
    appends/pops are seen, as by CPython's list iterator."""
    if source is None:
        raise Unsupported("an iterator without a source")
    t = type(value)
    g(TypeMatch(source, t))
    pos = containers.iter_pos(value)
    g(ConstMatch(IterPosSource(source), pos))
    lst = builder.wrap(tx, containers.iter_seq(value), IterSeqSource(source))
    if pos >= 0 and not isinstance(lst, ListVariable):  # a list subclass: its items are not modelled
        raise Unsupported(f"iterator over a {type(containers.iter_seq(value)).__name__}")
    return containers.ListIteratorVariable(lst if pos >= 0 else None, pos=max(pos, 0), source=source)


def seq_iterator(tx, value, source, g):
    """A tuple or range iterator: its type and the number of items left; those items are
    wrapped through the remaining-items source (not advancing it)."""
    t = type(value)
    left = value.__length_hint__()
    if left > MAX_ITERATOR_ITEMS:  # its items would be Variables each
        raise Unsupported(f"an iterator with {left} items left is too long to model")
    rest = containers.iter_rest(value)
    if source is None:
        raise Unsupported("an iterator without a source")
    g(TypeMatch(source, t))
    rest_src = IterRestSource(source)
    g(LengthMatch(rest_src, len(rest), tuple))
    items = [builder.wrap(tx, v, ItemSource(rest_src, i)) for i, v in enumerate(rest)]
    return containers.IteratorVariable(items, source=source, py_type=t)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions.
from . import builder, containers  # noqa: E402
