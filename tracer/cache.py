"""Per-code-object cache of compiled entries, and the recompile limit.

An Entry is (guard set, rewritten code) plus what explain/dump want to show. The cache is
keyed weakly by code object. Guard sets hold weak references to guarded objects and only
metadata of tensors, so the cache does not keep user tensors alive.
"""
import dataclasses
import logging
import threading
import weakref

log = logging.getLogger("tracer.recompiles")

RECOMPILE_LIMIT = 8
LOCK = threading.RLock()  # lookup-then-compile is one step (api.CompiledFunction._miss, capture)


@dataclasses.dataclass
class Entry:
    guards: object               # guards.GuardSet
    code: object                 # rewritten flat-signature CodeType, or None: run the original
    graph: object = None         # fx.GraphModule (None when nothing was captured)
    reason: str | None = None    # why the frame fell back, when code is None
    ops: int = 0
    location: str | None = None
    breaks: list = dataclasses.field(default_factory=list)  # graph_break.BreakInfo, in order
    backend: object = None       # the backend and fullgraph flag it was made for: entries are
    fullgraph: bool = False      # only reused by callers that would have made the same one

    def made_for(self, backend, fullgraph):
        return self.backend is backend and self.fullgraph == fullgraph


class CodeCache:
    def __init__(self):
        self.entries = []
        self.compiles = 0
        self.warned = False

    def limit_reached(self):
        return self.compiles >= RECOMPILE_LIMIT


_CACHES = weakref.WeakKeyDictionary()
_VIEWS = weakref.WeakSet()  # objects holding their own view of entries (CompiledFunction._hits)


def cache_for(code):
    c = _CACHES.get(code)
    if c is None:
        c = _CACHES[code] = CodeCache()
    return c


def register_view(obj):
    """`obj._clear_cache()` is called by reset(), so no view keeps serving dropped entries."""
    _VIEWS.add(obj)


def reset():
    _CACHES.clear()
    for view in list(_VIEWS):
        view._clear_cache()
