"""The log of lazy reads of input containers, taken back with a refused trial inline.

A list or dict passed in is read lazily (containers.py): a list's length and items when
something needs them, a dict's values one at a time. Each read wraps the real items, which
guards them, and keeps the Variables in the container, so a later read of the same item
adds no guard. A call inlined on trial (speculate.py) that the trace refuses drops the
guards it made (TraceContext.checkpoint truncates them): a read made inside it would stay
read with its guards gone, and the trace's own read of that item after the trial would be
guarded by nothing (a wrong answer when the item changes). So each read is logged here with
its undo: a refused trial puts the containers it read back as unread, and the trace guards
them when it reads them itself. A container changed since the read (by the trial) cannot be
put back: the trial is then not restorable, and its refusal is a graph break.
"""


class LazyReads(list):
    """TraceContext.lazy_reads: (unchanged, undo) per read, in order. `unchanged()` says the
    container still holds what the read made; `undo()` makes it unread again."""

    def record(self, unchanged, undo):
        self.append((unchanged, undo))

    def checkpoint(self):
        return _Mark(self)

    def release(self):
        self.clear()


class _Mark:
    """LazyReads.checkpoint(): the reads made before the trial."""

    def __init__(self, log):
        self.log, self.n = log, len(log)

    def restorable(self):
        return all(unchanged() for unchanged, _undo in self.log[self.n:])

    def restore(self):
        while len(self.log) > self.n:  # the last read first
            _unchanged, undo = self.log.pop()
            undo()
