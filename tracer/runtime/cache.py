"""Per-code-object cache of compiled entries, the recompile limit, and the one lookup path.

The recompile limit (`config.recompile_limit`) is counted per code object *and* module
structure: the classes of the nn.Modules among the frame's arguments (`structure_key`). One
code object serving several model classes (transformers' `can_return_tuple` wrapper runs the
forward of every HF model) gives each class its own budget, so eleven GPT2s that recompile
do not make a LLaMA compiled afterwards run as Python. Instances of one class share one
budget (and, modules being graph inputs, usually one entry).

An Entry is (guard set, rewritten code) plus what explain/dump want to show. The cache is
keyed weakly by code object. Guard sets hold weak references to guarded objects and only
metadata of tensors, so the cache does not keep user tensors alive.

`lookup_or_compile` is the miss path shared by `tracer.compile` (api.py) and the frame hook
callback (capture.py): look for an entry whose guards pass, else trace a new one, under one
lock, with recompiles and the recompile limit recorded (records.py) the same way for both.
"""
import dataclasses
import logging
import threading
import warnings
import weakref

from torch.nn import Module as _Module

from bytecode_utils.instructions import PerCode
from guards.sources import ItemSource

from . import compile_annotations, config, records

log = logging.getLogger("tracer.recompiles")

LOCK = threading.RLock()  # lookup-then-compile is one step


class RecompileLimitWarning(RuntimeWarning):
    """A frame was traced `config.recompile_limit` times for one module structure; it runs as
    plain Python from now on for that structure."""


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
    name: str | None = None      # the frame's name in reports (records.name_of): the compiled
                                 # function's where a functools.wraps wrapper runs its code
    rerun: object = None         # the graph's rerun.Plan (None: it raises as it is)
    saw_every_call: bool = False  # the trace ran every call its code can make (trace/coverage.py)
    # (kind, namespace, name, value) the trace took from library namespaces without guards
    # (variables/library_reads.py): the disk cache checks them again when it loads the entry
    library_reads: tuple = ()

    def made_for(self, backend, fullgraph):
        return self.backend is backend and self.fullgraph == fullgraph


NUMBER = ("number", ())  # handed for an int or float argument: symbolic from its first trace


def number_at(path):
    """Handed for the int (float) at `path` (item indices) under an argument: `("number",
    (0,))` is item 0 of a tuple or torch.Size argument; NUMBER is the argument itself."""
    return ("number", tuple(path))


def _item_path(source):
    """(the name of the local `source` is read from, the item keys on the way): `sz[0]` is
    ("sz", (0,)); (None, ()) when it is not a local read through items."""
    path = []
    while isinstance(source, ItemSource):
        path.append(source.key)
        source = source.base
    return getattr(source, "name_", None), tuple(reversed(path))


class FrameSizes:
    """What earlier traces of one code object saw, per source (automatic dynamic).

    A tensor: its sizes, with None for a dimension that already differed between traces.
    An int: its value, or None once it differed. `notes` says what became dynamic and why,
    for the recompile record.

    `handed`: sizes that were already dynamic where the value came from, per argument name
    (tracer/rewrite/handoff.py): a resume function's argument that held a symbolic size in
    the trace that broke, or the result of an op whose output size depends on the data
    (nonzero, nms). Every tensor reached through that argument has those dimensions dynamic
    from its first trace, so the first change of such a size is not a trace of its own. A
    dimension is handed as (rank, dim): it applies to the tensors of that rank (None: any);
    NUMBER, to an int (float) argument that was symbolic where it came from; `number_at(path)`,
    to the int at that item path under it (a torch.Size kept across the break).

    `float_pins`: how many traces specialised a float computed from sizes (an op needed its
    value as a Python float); past half the recompile limit such floats stay opaque
    (graph/shapes.py, SizePolicy.computed_floats)."""

    def __init__(self):
        self.seen = {}
        self.notes = []
        self.handed = {}
        self.returned = frozenset()  # dimensions the code's traces returned symbolic
        self.returns_to = set()      # (resume code, argument name) that get what the code returns
        self.static_floats = False  # a backend refused SymFloat inputs: floats stay constants
        self.float_pins = 0  # traces that specialised a float computed from sizes (graph/shapes.py)
        self.no_scalar_index = False  # a backend refused `x[t]`, t a 0-d int tensor: a graph break

    def hand(self, name, dims):
        """Make `dims` ((rank or None, dim)) of the tensors under argument `name` dynamic, from
        the next trace on."""
        self.handed[name] = self.handed.get(name, frozenset()) | frozenset(dims)

    def handed_under(self, source):
        """What was handed to the argument `source` is read through (hand())."""
        return self.handed.get(getattr(source.base_root(), "name_", None), frozenset())

    def tensor_dims(self, source, sizes):
        """Dimensions of `source` that differ from an earlier trace (now and for good), and
        those handed on to it."""
        prev = self.seen.get(source)
        if prev is None or not isinstance(prev, list) or len(prev) != len(sizes):
            prev = self.seen[source] = list(sizes)
        dims = set()
        if self.handed:
            for rank, i in self.handed_under(source):
                if rank in (None, len(prev)) and i < len(prev):
                    prev[i] = None
                    dims.add(i)
        for i, (was, now) in enumerate(zip(prev, sizes)):
            if was is None:
                dims.add(i)
            elif was != now:
                prev[i] = None
                dims.add(i)
                self.notes.append(f"{source.name()}.size({i}) changed {was} -> {now}: now dynamic")
        return dims

    def _handed_number(self, source):
        """Whether the int (float) at `source`, an argument or an item under one, was handed
        on as symbolic (hand())."""
        if not self.handed:
            return False
        name, path = _item_path(source)
        return number_at(path) in self.handed.get(name, ())

    def int_changed(self, source, value):
        """Whether the int (float) at `source` is dynamic by what earlier traces saw (handed on,
        or differing from an earlier trace's), without recording anything: a tuple argument
        asks this of its items before deciding whether to read them one by one."""
        if self._handed_number(source):
            return True
        prev = self.seen.get(source, _UNSEEN)
        return prev is None or not (prev is _UNSEEN or isinstance(prev, list) or prev == value)

    def int_dynamic(self, source, value):
        """int_changed, recorded: a first value is remembered, a changed one made symbolic for
        the traces after (noted, unless it was handed on as such)."""
        prev = self.seen.get(source, _UNSEEN)
        if not self.int_changed(source, value):
            if prev is _UNSEEN or isinstance(prev, list):
                self.seen[source] = value
            return False
        if prev is not None and not self._handed_number(source):
            kind = "float" if isinstance(value, float) else "int"
            self.notes.append(f"{source.name()} changed {prev} -> {value}: now a symbolic {kind}")
        self.seen[source] = None
        return True

    def take_notes(self):
        out, self.notes = self.notes, []
        return out


_UNSEEN = object()


class CodeCache:
    def __init__(self):
        self.entries = []
        self.compiles = 0          # all traces of this code object
        self.by_structure = {}     # structure_key -> traces made for it (the limit's count)
        self.warned = set()        # structure keys the limit was reported for
        self.sizes = FrameSizes()  # what the traces saw: a size that changes becomes dynamic
        # stock nn module types kept as graph leaves that a backend then could not compile
        # (inductor on cuDNN's LSTM): this code's traces call them as Python (a graph break)
        self.leaf_breaks = set()
        self.disk_read = set()     # (backend, fullgraph) whose entries were read from the disk cache

    def limit_reached(self, key=()):
        return self.by_structure.get(key, 0) >= config.recompile_limit

    def count_compile(self, key=()):
        self.compiles += 1
        self.by_structure[key] = self.by_structure.get(key, 0) + 1


def structure_key(L):
    """What the recompile limit is counted per, besides the code object: the classes of the
    nn.Modules among the frame's argument slots, in order (() for a frame given none)."""
    return tuple(type(v) for v in L if isinstance(v, _Module))


# The disk cache (tracer/persist/store.py), when config.cache_dir is set: the face registers
# how to open one (OPEN_STORE); this layer only calls load() on a code object's first miss and
# save() after each trace.
OPEN_STORE = [None]
_STORE = [None, None]  # (the directory, its Store)


def store():
    """The Store of config.cache_dir, or None."""
    path = config.cache_dir
    if not path or OPEN_STORE[0] is None:
        return None
    if _STORE[0] != path:
        _STORE[:] = [path, OPEN_STORE[0](path)]
    return _STORE[1]


_CACHES = PerCode()  # by code identity (see PerCode)
_VIEWS = weakref.WeakSet()  # objects holding their own view of entries (CompiledFunction._hits)


def cache_for(code):
    c = _CACHES.get(code)
    if c is None:
        c = _CACHES[code] = CodeCache()
    return c


def lookup(code, L, G, C, backend, fullgraph):
    """The first entry made for (backend, fullgraph) whose guards pass, or None."""
    for entry in cache_for(code).entries:
        if entry.made_for(backend, fullgraph) and entry.guards.check(L, G, C):
            return entry
    return None


def lookup_or_compile(code, L, G, C, backend, fullgraph, make_entry):
    """An entry for this call: a cached one whose guards pass, else `make_entry()` (which
    traces the frame). None when the recompile limit is reached, or torch.compiler.set_stance
    says so (force_eager; eager_on_recompile on a recompile): run the frame as Python.

    One thread at a time looks up and compiles: threads calling with new shapes would
    otherwise trace the same entry twice and exhaust the limit."""
    with LOCK:
        hit = lookup(code, L, G, C, backend, fullgraph)
        if hit is not None:  # (a caller's own view of the entries was out of date)
            records.HITS[0] += 1
            return hit
        code_cache = cache_for(code)
        disk = store()
        if disk is not None and (backend, fullgraph) not in code_cache.disk_read:
            code_cache.disk_read.add((backend, fullgraph))
            code_cache.entries.extend(disk.load(code, L, G, C, backend, fullgraph))
            hit = lookup(code, L, G, C, backend, fullgraph)
            if hit is not None:
                return hit
        stance = compile_annotations.stance()  # torch.compiler.set_stance
        if stance == "force_eager":
            return None
        if stance in ("eager_on_recompile", "fail_on_recompile") and \
                any(e.made_for(backend, fullgraph) for e in code_cache.entries):
            if stance == "fail_on_recompile":
                raise RuntimeError(f"{records.name_of(code)} would recompile, and torch.compiler.set_stance"
                                   f"('fail_on_recompile') is in effect")
            return None
        key = structure_key(L)
        if code_cache.limit_reached(key):
            if key not in code_cache.warned:
                code_cache.warned.add(key)
                limit = config.recompile_limit
                records.limit_reached(code, limit)
                what = f" for {', '.join(t.__name__ for t in key)}" if key else ""
                warnings.warn(f"tracer: {records.name_of(code)} recompiled {limit} times{what}; running it as "
                              f"plain Python from now on (tracer.stats() lists the guards that failed)",
                              RecompileLimitWarning, stacklevel=4)
            return None
        mine = [e for e in code_cache.entries if e.made_for(backend, fullgraph)]
        failed = _failed_guards(code, mine, L, G, C) if mine else None
        if failed is not None:  # (logged before the new trace, whose own logs follow)
            log.info("recompiling %s: %s", records.name_of(code), _one_line(failed))
        entry = make_entry()
        code_cache.count_compile(key)
        code_cache.entries.append(entry)
        if disk is not None:
            disk.save(code, entry, L, G, C)
        now_dynamic = code_cache.sizes.take_notes()
        if failed is not None:
            records.recompile(code, failed + now_dynamic)
            if now_dynamic:
                log.info("%s: %s", records.name_of(code), " | ".join(now_dynamic))
        return entry


_GUARD_TEXT = 240  # characters of one failing guard's description in a record
_GUARDS_PER_ENTRY = 3


def _one_line(failed, entries=3):
    """The recompile log line: the first entries' failures (each already bounded)."""
    more = f" | ... {len(failed) - entries} more entries" if len(failed) > entries else ""
    return " | ".join(failed[:entries]) + more


def _bounded(why):
    """A failing guard may describe a whole module dict or a long tuple: each is cut to a line,
    and an entry names its first few failing guards, so that one recompile is one readable
    line however large the model."""
    texts = [w if len(w) <= _GUARD_TEXT else w[:_GUARD_TEXT - 3] + "..." for w in why[:_GUARDS_PER_ENTRY]]
    if len(why) > _GUARDS_PER_ENTRY:
        texts.append(f"{len(why) - _GUARDS_PER_ENTRY} more")
    return texts


def _failed_guards(code, entries, L, G, C):
    """Why each existing entry rejected this call, for the recompile record."""
    failed = []
    for i, entry in enumerate(entries):
        why = _bounded(entry.guards.failures(L, G, C))
        if not why and config.verify_guards:
            records.internal_error(records.name_of(code), f"entry {i}: check() is False but failures() "
                                   f"names no failing guard (the two disagree)")
        failed.append(f"entry {i}: " + ("; ".join(why) if why else "?"))
    return failed


def register_view(obj):
    """`obj._clear_cache()` is called by reset(), so no view keeps serving dropped entries."""
    _VIEWS.add(obj)


def reset():
    _CACHES.clear()
    for view in list(_VIEWS):
        view._clear_cache()
