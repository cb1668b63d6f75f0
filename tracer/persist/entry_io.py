"""One cache entry as a record of plain values, and back.

A record holds the entry's guards (guards_io.py), its rewritten code with every constant
described (portable.py: resume functions are nested code objects, written with it), its graph
(graph_io.py), the rerun plan that wraps the graph, what explain and stats show (breaks, the
reason of a frame run as Python), the backend it was compiled for, the digests of the
source files of the modules its descriptions name (`deps`): an edited helper or model file
makes the record unloadable, and what the trace read from library namespaces without guards
and the patches of torch's classes (library_io.py): another object under such a name (a
monkeypatched torch function) makes it stale too.

Reading rebuilds the Entry for the call that asked for it: guards first (they may need that
call's values to find a function again), then the graph, compiled by the backend on its first
call (graph_io.LazyCompiled: a backend needs example inputs, the first call has them), then the
code, whose graph constant is the rebuilt graph behind the same `untraced` wrapper and rerun
check the tracing process used.
"""
import hashlib
import importlib.util
import marshal
import sys
import types

from guards.codegen import precompiled

from ..graph.backends import Inductor, eager, inductor_with
from ..rewrite.graph_break import BreakInfo
from ..rewrite.rerun import RERUN, Plan, _Plain, graph_raised, _Rerun
from ..runtime.cache import Entry
from ..trace.handlers.exceptions import GradRestore
from ..variables.torch_vars import SavedHooksRestore
from ..runtime.frame_hook import skip_code, untraced
from . import graph_io, guards_io, library_io
from .portable import Reader, Stale, Unportable, Writer, register

FORMAT = 4  # (2: a rerun plan says whether the graph's ops are under a handler; 3: library reads;
            # 4: torch classes' patches)

# inductor with a mode or options: by its configuration (read back: the one object of it)
register(Inductor, "backend.inductor",
         lambda w, b: (b.mode, w.write(tuple(sorted(b.options.items()))), b.dynamic),
         lambda r, p: inductor_with(p[0], dict(r.read(p[1])), p[2]))


def _write_untraced(w, _obj):
    if getattr(w, "entry", None) is None or w.entry.graph is None:
        raise Unportable("a compiled graph that is not the entry's own")
    return ()


def _read_untraced(r, _payload):
    return r.graph_fn


def _write_plain(w, obj):
    return w.write(obj.code)


def _read_plain(r, payload):
    code = r.read(payload)
    skip_code(code)
    return _Plain(code)


register(untraced, "graph", _write_untraced, _read_untraced)
register(_Plain, "plain", _write_plain, _read_plain)
register(_Rerun, "rerun", lambda w, obj: (), lambda r, payload: RERUN)
register(GradRestore, "grad_restore", lambda w, obj: bool(obj.prev), lambda r, payload: GradRestore(payload))
register(SavedHooksRestore, "saved_hooks_restore", lambda w, obj: obj.prev, lambda r, payload: SavedHooksRestore(payload))


def write_entry(code, entry, frame):
    """The record of `entry` (made for `code` from the values `frame` reads: guards_io.
    FrameValues), or Unportable naming what cannot be written."""
    w = Writer()
    w.entry = entry
    record = {
        "format": FORMAT,
        "name": entry.name or code.co_qualname,
        "file": code.co_filename,
        "line": code.co_firstlineno,
        "backend": w.write(entry.backend),
        "fullgraph": bool(entry.fullgraph),
        "guards": guards_io.write_guards(w, entry.guards, frame),
        "guard_split": entry.guards.split,
        "guard_groups": guards_io.write_groups(w, entry.guards),
        # the code the guard set compiled from its generated text, and the getters writing the
        # guards compiled (guards_io._value), by the text's digest: a reader generating the same
        # text skips compile() (guards/codegen.py)
        "guard_code": tuple((digest, marshal.dumps(c)) for digest, c in dict(
            [*getattr(entry.guards, "compiled", ()), *w.__dict__.get("getter_code", ())]).items()),
        "reason": entry.reason,
        "location": entry.location,
        "ops": int(entry.ops),
        "breaks": tuple((str(b.reason), b.filename, b.lineno, b.opname, tuple(map(tuple, b.user_stack)))
                        for b in entry.breaks),
        "graph": None,
        "rerun": None,
        "code": None,
    }
    if entry.graph is not None:
        record["graph"] = graph_io.write_graph(w, entry.graph)
        if graph_io.is_symbolic(record["graph"]) and entry.backend is not eager:
            raise Unportable("a graph with symbolic sizes is saved for the eager backend only")
        plan = entry.rerun
        if plan is not None:
            if plan.tensors:
                raise Unportable("a graph whose rerun snapshot holds the module's own tensors")
            record["rerun"] = (plan.grad_mode, tuple(plan.args), w.write(plan.devices), plan.handled)
    if entry.code is not None:
        record["code"] = w.write(entry.code)
    record["library_reads"] = library_io.write_reads(w, entry.library_reads)
    record["class_patches"] = library_io.class_patches()
    record["deps"] = {name: module_digest(name) for name in sorted(w.deps)}
    return record


def read_entry(code, record, frame, builtins, backend_fn):
    """The Entry of `record` for the call whose values `frame` reads (guards_io.FrameValues).
    Raises Stale when it no longer applies (a dependency edited, a function changed)."""
    for name, digest in record["deps"].items():
        if module_digest(name) != digest:
            raise Stale(f"module {name} changed since the entry was written")
    r = Reader()
    library_io.check_reads(r, record["library_reads"])  # (what the trace trusted without guards)
    library_io.check_class_patches(record["class_patches"])
    precompiled((digest, marshal.loads(c)) for digest, c in record.get("guard_code", ()))
    guards = guards_io.read_guards(r, record["guards"], frame, builtins, record["guard_split"],
                                  record.get("guard_groups"))
    gm = None
    if record["graph"] is not None:
        gm = graph_io.read_graph(r, record["graph"])
        compiled = graph_io.LazyCompiled(gm, backend_fn)
        plan = None
        if record["rerun"] is not None:
            grad_mode, args, devices, handled = record["rerun"]
            plan = Plan(grad_mode, args, (), r.read(devices))
            plan.handled = handled
            compiled = plan.wrap(compiled)
        qualname = marshal.loads(record["code"][1]).co_qualname
        r.graph_fn = untraced(compiled, graph_raised(qualname, plan.grad_mode, plan.handled)
                              if plan is not None else None)
    new_code = None
    if record["code"] is not None:
        new_code = _here(r.read(record["code"]), record["file"], code.co_filename)
        skip_code(new_code)  # the rewritten code is never handed to the frame hook again
    entry = Entry(guards=guards, code=new_code, graph=gm, reason=record["reason"], location=record["location"],
                  ops=record["ops"], backend=backend_fn, fullgraph=record["fullgraph"], name=record["name"])
    entry.breaks = [_break_info(*b) for b in record["breaks"]]
    return entry


def _here(code, written_at, here):
    """`code` (and the code objects it holds: resume functions) with the file name of this
    process's copy of the source, where the entry was written from another path (a cache
    shipped from another machine or environment): tracebacks name the file that is here."""
    if written_at == here:
        return code
    consts = tuple(_here(c, written_at, here) if type(c) is types.CodeType else c for c in code.co_consts)
    return code.replace(co_filename=here if code.co_filename == written_at else code.co_filename,
                        co_consts=consts)


def _break_info(reason, filename, lineno, opname, stack):
    return BreakInfo(reason, filename, lineno, opname, [tuple(s) for s in stack])


_DIGESTS = {}  # module name -> (file, digest)
_NOT_HASHED = frozenset({"torch", "tracer", "guards", "bytecode_utils", "builtins"})


def module_digest(name):
    """A digest of the module's source file ("" for torch, the tracer, the standard library and
    modules without a file: their versions are in every key, or they cannot be edited)."""
    top = name.split(".")[0]
    if top in _NOT_HASHED or top in sys.stdlib_module_names:
        return ""
    module = sys.modules.get(name)
    if module is not None:
        path = getattr(module, "__file__", None)
    else:  # (not imported yet in this process: its file, without importing it)
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return "missing"
        path = spec.origin if spec is not None and spec.has_location else None
    if path is None:
        return ""
    hit = _DIGESTS.get(name)
    if hit is not None and hit[0] == path:
        return hit[1]
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:32]
    except OSError:
        digest = "unreadable"
    _DIGESTS[name] = (path, digest)
    return digest
