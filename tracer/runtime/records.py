"""What the tracer did, as records users can read: `tracer.stats()` and `tracer.reset_stats()`.

Why one module: every frame traced, graph, graph break, recompile, fallback and internal
error happens in a few places (convert_frame, the cache lookup, the frame hook callback);
each of them calls one function here, and everything that reports (stats(), explain,
tracer-dump, TRACER_LOGS, the test suite's fixtures) reads what is kept here. Nothing else
counts.

Kept: counters (cheap, never reset except by reset_stats) and the most recent events (a
bounded deque, so a long-running program does not grow memory). Cache hits are counted by
the callers' hot paths as one integer add (`HITS[0] += 1`).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import sys
import threading
import time
import weakref

from . import logs
from .frame_hook import is_unhooked

MAX_EVENTS = 10_000

# One-element lists: the hot paths increment them without a global statement or lookup.
HITS = [0]

try:  # CompiledFunction's hits taken in C (tracer/runtime/_dispatch.c) are counted there
    from ._dispatch import hits as _c_hits, reset_hits as _reset_c_hits
except ImportError:
    def _c_hits():
        return 0

    def _reset_c_hits():
        pass

_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Event:
    """One thing that happened. `kind` is one of KINDS; `where` is "file:line" or None."""
    kind: str
    frame: str            # the code object's qualified name
    reason: str = ""      # break / fallback / recompile / internal-error text
    where: str | None = None
    time: float = dataclasses.field(default_factory=time.time)
    details: dict = dataclasses.field(default_factory=dict, compare=False)  # for the trace file

    def __str__(self):
        at = f" at {self.where}" if self.where else ""
        return f"{self.kind:<15} {self.frame}{at}: {self.reason}" if self.reason else f"{self.kind:<15} {self.frame}{at}"


KINDS = ("frame", "graph", "break", "fallback", "recompile", "limit", "internal_error", "rerun", "given_up",
         "disk_saved", "disk_unsaved", "disk_loaded", "disk_stale")


class _State:
    def __init__(self):
        self.counts = collections.Counter()
        self.ops = 0
        self.trace_seconds = 0.0
        self.backend_seconds = 0.0
        self.break_reasons = collections.Counter()     # reason -> count
        self.fallback_reasons = collections.Counter()
        self.given_up = {}  # frame -> why it runs as Python for good (give_up.py), each once
        self.given_up_codes = {}  # frame -> weakref to its code (is it running unhooked now?)
        self.unsaved = {}   # frame -> why its entry was not written to the disk cache (persist/)
        self.events = collections.deque(maxlen=MAX_EVENTS)


_state = _State()


def _add(event):
    with _LOCK:
        _state.counts[event.kind] += 1
        _state.events.append(event)
        if _trace_file is not None:
            _write_trace(event)


# ---- the structured trace: TRACER_TRACE=dir -----------------------------------------------------

_trace_file = None


def open_trace(directory):
    """Append every event, as one JSON object per line, to `directory`/trace_<pid>.jsonl
    (`tracer-dump --trace FILE --html OUT` draws it). Returns the file's path."""
    global _trace_file
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"trace_{os.getpid()}.jsonl")
    _trace_file = open(path, "a", encoding="utf-8", buffering=1)  # line-buffered: a crash keeps what was written
    return path


def close_trace():
    global _trace_file
    if _trace_file is not None:
        _trace_file.close()
        _trace_file = None


def _write_trace(event):
    row = {"kind": event.kind, "frame": event.frame, "reason": event.reason, "where": event.where,
           "time": event.time, "thread": threading.get_ident(), **event.details}
    _trace_file.write(json.dumps(row, default=str) + "\n")


# ---- what a frame is called ----------------------------------------------------------------------
_naming = threading.local()


@contextlib.contextmanager
def naming(code, name):
    """While `code` is looked up and traced for a compiled function whose name is not its code's,
    the reports call the frame by the function's name. A decorator made with functools.wraps
    gives its wrapper the wrapped function's name but not its code: every HF model's forward
    runs the code `can_return_tuple.<locals>.wrapper`, and the user wrote
    `GPT2LMHeadModel.forward`. Per thread and per trace, since one wrapper code serves many
    functions."""
    prev = getattr(_naming, "names", None)
    _naming.names = {**(prev or {}), code: name}
    try:
        yield
    finally:
        _naming.names = prev


def name_of(code):
    """The frame's name in every report: the compiled function's (naming), else the code's."""
    names = getattr(_naming, "names", None)
    return names.get(code, code.co_qualname) if names else code.co_qualname


# ---- what the tracer calls --------------------------------------------------------------------
_backend_here = threading.local()


def backend_compiled(seconds):
    """A backend compiled a graph in `seconds` (inductor: most of a first call): counted apart
    from tracing, so `tracing` in stats() is the tracer's own cost."""
    with _LOCK:
        _state.backend_seconds += seconds
    _backend_here.total = getattr(_backend_here, "total", 0.0) + seconds


def backend_seconds_here():
    """This thread's backend seconds so far (convert_frame subtracts a trace's share)."""
    return getattr(_backend_here, "total", 0.0)



def frame_traced(code, entry, seconds):
    """convert_frame made `entry` for `code` (captured, broken or fallen back)."""
    name = entry.name = name_of(code)
    with _LOCK:
        _state.trace_seconds += seconds
    _add(Event("frame", name, where=f"{code.co_filename}:{code.co_firstlineno}",
               details={"seconds": round(seconds, 6), "guards": len(entry.guards), "captured": entry.code is not None}))
    if entry.graph is not None:
        with _LOCK:
            _state.ops += entry.ops
        _add(Event("graph", name, f"{entry.ops} ops",
                   details={"ops": entry.ops, "code": entry.graph.code.strip() if _trace_file is not None else ""}))
    for b in entry.breaks:
        reason = str(b.reason)
        with _LOCK:
            _state.break_reasons[reason] += 1
        _add(Event("break", name, reason, f"{b.filename}:{b.lineno}"))
    if entry.code is None:
        with _LOCK:
            _state.fallback_reasons[entry.reason or "?"] += 1
        _add(Event("fallback", name, entry.reason or "", entry.location))
    logs.entry_created(code, entry)


def recompile(code, failed):
    """`code` is traced again; `failed` says which guard of each existing entry failed."""
    _add(Event("recompile", name_of(code), "; ".join(failed), details={"failed": list(failed)}))


def limit_reached(code, limit):
    _add(Event("limit", name_of(code), f"recompiled {limit} times; runs as Python from now on"))


def given_up(code, reason):
    """`code` made no tensor work: it runs as Python from now on (runtime/give_up.py). Once per
    code; not a warning."""
    name = code.co_qualname
    with _LOCK:
        _state.given_up[name] = reason
        _state.given_up_codes[name] = weakref.ref(code)
    _add(Event("given_up", name, reason, f"{code.co_filename}:{code.co_firstlineno}"))


def disk_saved(code):
    """An entry of `code` was written to the disk cache (TRACER_CACHE_DIR)."""
    _add(Event("disk_saved", name_of(code)))


def disk_unsaved(code, reason):
    """An entry of `code` could not be written exactly (a guard on an object only this process
    has...): it was not written."""
    name = name_of(code)
    with _LOCK:
        _state.unsaved[name] = reason
    _add(Event("disk_unsaved", name, reason, f"{code.co_filename}:{code.co_firstlineno}"))


def disk_loaded(code, n):
    """`n` entries of `code` were read from the disk cache instead of traced."""
    with _LOCK:
        _state.counts["disk_entries_loaded"] += n
    _add(Event("disk_loaded", name_of(code), f"{n} entries"))


def blocks_replayed(n):
    """`n` module calls were replayed from an earlier sibling's trace (variables/blocks.py)."""
    with _LOCK:
        _state.counts["blocks_replayed"] += n


def disk_stale(code, reason):
    """An entry on disk no longer applies (an edited module, a changed function): not loaded."""
    _add(Event("disk_stale", name_of(code), reason))


def graph_rerun(frame_name, exc):
    """A cache entry's graph raised: the frame ran again as Python from its start (rerun.py)."""
    _add(Event("rerun", frame_name, f"the graph raised {type(exc).__name__}: {exc}; the frame ran as Python"))


def internal_error(frame_name, message, where=None):
    """A bug in the tracer (caught by the fail-safe: the user's call still runs as Python)."""
    _add(Event("internal_error", frame_name, message, where))


# ---- what users read --------------------------------------------------------------------------

@dataclasses.dataclass
class Stats:
    """A snapshot of the counters (see `tracer.stats()`)."""
    frames_traced: int
    graphs: int
    ops: int
    graph_breaks: int
    fallbacks: int
    recompiles: int
    recompile_limits: int
    internal_errors: int
    cache_hits: int
    trace_seconds: float   # the tracer's own time (the backends' compiles are backend_seconds)
    reruns: int  # calls whose graph raised, so the frame ran again as Python (rerun.py)
    break_reasons: dict
    fallback_reasons: dict
    events: list
    given_up: dict = dataclasses.field(default_factory=dict)  # frame -> why (no tensor work)
    unhooked: tuple = ()  # given-up frames that now run with the evaluator uninstalled
    backend_seconds: float = 0.0  # compiling the graphs in the backend (inductor's compile)
    # the disk cache (TRACER_CACHE_DIR): entries written, read instead of traced, not written
    # (frame -> why), and found stale (an edited module: traced again)
    cache_saved: int = 0
    cache_loaded: int = 0
    cache_unsaved: dict = dataclasses.field(default_factory=dict)
    cache_stale: int = 0
    blocks_replayed: int = 0  # module calls copied from an earlier sibling's trace, not traced

    def of(self, kind):
        return [e for e in self.events if e.kind == kind]

    def __str__(self):
        out = [f"frames traced {self.frames_traced}   graphs {self.graphs}   ops {self.ops}   "
               f"graph breaks {self.graph_breaks}   fallbacks {self.fallbacks}   "
               f"recompiles {self.recompiles}   cache hits {self.cache_hits}   "
               f"internal errors {self.internal_errors}   tracing {self.trace_seconds:.3f} s   "
               f"backend compile {self.backend_seconds:.3f} s   blocks replayed {self.blocks_replayed}"]
        if self.break_reasons:
            out.append("graph breaks by reason:")
            out += [f"  {n:>4}  {r}" for r, n in sorted(self.break_reasons.items(), key=lambda kv: -kv[1])]
            out.append("  at:")
            out += [f"    {e.where}  {e.frame}" for e in self.of("break")[-20:]]
        if self.fallback_reasons:
            out.append("frames run as Python, by reason:")
            out += [f"  {n:>4}  {r}" for r, n in sorted(self.fallback_reasons.items(), key=lambda kv: -kv[1])]
        if self.cache_saved or self.cache_loaded or self.cache_unsaved or self.cache_stale:
            out.append(f"disk cache: {self.cache_loaded} entries loaded, {self.cache_saved} saved, "
                       f"{self.cache_stale} stale")
            if self.cache_unsaved:
                out.append("  not saved:")
                out += [f"    {name}: {why}" for name, why in list(self.cache_unsaved.items())[:20]]
        if self.given_up:
            out.append(f"frames given up on (no tensor work; they run as Python): {len(self.given_up)}")
            out += [f"  {name}: {why}{' (runs unhooked)' if name in self.unhooked else ''}"
                    for name, why in list(self.given_up.items())[:20]]
        for kind, title in (("recompile", "recompiles (guard that failed):"),
                            ("limit", "recompile limits reached:"),
                            ("rerun", "graphs that raised (their frame ran as Python):"),
                            ("internal_error", "internal errors:")):
            events = self.of(kind)
            if events:
                out.append(title)
                out += [f"  {e.frame}: {e.reason}" for e in events[-20:]]
        return "\n".join(out)


def stats():
    """What the tracer did since the process started (or since `tracer.reset_stats()`).

    Returns a `Stats` snapshot: the counts of frames traced, graphs, ops, graph breaks, frames
    run as Python (fallbacks), recompiles, recompile limits reached, cache hits, graphs that
    raised and ran again as Python (reruns), module calls replayed from an earlier sibling's
    trace instead of traced (blocks_replayed), tracer internal errors (each one a bug; the call
    still ran as Python) and the seconds spent tracing; `break_reasons` and `fallback_reasons`
    (reason -> count), `given_up` (frames with no tensor work, run as Python, and why),
    `unhooked` (those of them that now run with the frame evaluator uninstalled), and
    the recent events (up to 10,000), each with its kind, frame, reason and `file:line`.
    `print(tracer.stats())` shows a summary; `tracer.stats().of("break")` lists the recent
    events of one kind ("frame", "graph", "break", "fallback", "recompile", "limit",
    "rerun", "given_up", "internal_error")."""
    # The snapshot is taken under the lock and the Stats built after releasing it: building it
    # runs Python code (the dataclass __init__), which the frame hook traces when stats() is
    # called inside `tracer.capture()`, and tracing records (it would wait on the lock forever).
    with _LOCK:
        c = dict(_state.counts)
        snap = dict(ops=_state.ops, cache_hits=HITS[0] + _c_hits(), trace_seconds=_state.trace_seconds,
                    backend_seconds=_state.backend_seconds,
                    break_reasons=dict(_state.break_reasons),
                    fallback_reasons=dict(_state.fallback_reasons), events=list(_state.events),
                    given_up=dict(_state.given_up), cache_unsaved=dict(_state.unsaved),
                    cache_loaded=_state.counts.get("disk_entries_loaded", 0))
        codes = list(_state.given_up_codes.items())
    snap["unhooked"] = tuple(name for name, ref in codes if (code := ref()) is not None and is_unhooked(code))
    return Stats(frames_traced=c.get("frame", 0), graphs=c.get("graph", 0),
                 graph_breaks=c.get("break", 0), fallbacks=c.get("fallback", 0),
                 recompiles=c.get("recompile", 0), recompile_limits=c.get("limit", 0),
                 internal_errors=c.get("internal_error", 0), reruns=c.get("rerun", 0),
                 cache_saved=c.get("disk_saved", 0), cache_stale=c.get("disk_stale", 0),
                 blocks_replayed=c.get("blocks_replayed", 0), **snap)


def reset_stats():
    global _state
    with _LOCK:
        _state = _State()
        HITS[0] = 0
        _reset_c_hits()


def _open_trace_from_env(directory):
    """TRACER_TRACE=dir at import. A path that cannot be a directory of traces (a file, no
    permission) is reported on one line and the program runs on without the trace: a switch
    for looking at a run must never be the reason the run does not start."""
    try:
        open_trace(directory)
    except OSError as e:
        print(f"tracer: TRACER_TRACE={directory}: cannot write a trace there ({e.strerror or e}); "
              "running without it", file=sys.stderr)


if os.environ.get("TRACER_TRACE"):
    _open_trace_from_env(os.environ["TRACER_TRACE"])

__all__ = ["stats", "reset_stats", "Stats", "Event", "open_trace", "close_trace"]
