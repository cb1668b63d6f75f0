"""Differential check of one generated program: compiled == eager, on several input sets,
and a record of what the tracer captured.

`check_source(src)` execs the source twice into fresh namespaces (one run eagerly, one
compiled, each with its own print sink and global counter), then for each input set (see
`input_sets`: the first one, the same values again, new values of the same shapes, aliased
inputs, inputs that require grad, then changed shapes, rank, dtype, constants, list lengths
and dict contents) compares:

  * the result: same types and structure, tensors by dtype/shape/requires_grad/allclose with
    equal_nan and by the attributes set on them; which parts of the result ARE inputs
    (returned inputs keep their identity);
  * when eager raises: the exception's type, message, and its __cause__/__context__ chain;
  * the inputs after the call (mutations, attributes set on input tensors);
  * the gradients of the inputs that require grad, after backward through the outputs;
  * the printed output and the globals COUNTER and ACC (fuzz_gen_effects.py).

Raises `Mismatch` with a readable description on the first difference, and also when the
call with the same input values again traces any frame although the program keeps no state
between calls (`stateful`: it writes a global or changes the global list COUNTER, or a
function attribute): a guard
that fails on the very inputs it was made for would recompile on every call. Returns a
`Report`: whether `f` itself was captured (its first cache entry has rewritten code, not a
whole-frame fallback, and the reason if not), the ops traced on the first call (resume
functions and inlined helpers included), and whether the later calls with inputs of the same
shapes hit the cache (traced no frame).
"""
import collections
import re
import dataclasses
import gc
import io
import math
import os
import sys
import types
import warnings
import weakref
import zlib

import numpy as np
import torch

import tracer


class Mismatch(AssertionError):
    pass


def _user_type(t):
    module = getattr(t, "__module__", None)
    return module == "fuzzprog" or (isinstance(module, str) and module.startswith("fz_"))  # (module_dir)


def _same_type(a, b):
    ta, tb = type(a), type(b)
    # classes defined by the program exist once per namespace: compare them by name
    return ta is tb or (_user_type(ta) and _user_type(tb) and ta.__qualname__ == tb.__qualname__)


def _tensor_attrs(t):
    return {k: v for k, v in vars(t).items()} if hasattr(t, "__dict__") else {}


def same(a, b, path="result"):
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"{path}: tensor vs {type(b).__name__}"
        if type(a) is not type(b):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if a.shape != b.shape or a.dtype != b.dtype or a.requires_grad != b.requires_grad:
            return (f"{path}: {a.dtype}{tuple(a.shape)} grad={a.requires_grad} vs "
                    f"{b.dtype}{tuple(b.shape)} grad={b.requires_grad}")
        if a.dtype == torch.bool or not (a.is_floating_point() or a.is_complex()):
            if not torch.equal(a, b):
                return f"{path}: values differ\n{a}\n{b}"
        elif not torch.allclose(a.detach(), b.detach(), equal_nan=True, rtol=1e-4, atol=1e-5):
            return f"{path}: values differ\n{a}\n{b}"
        return same(_tensor_attrs(a), _tensor_attrs(b), f"{path}.__dict__")
    if not _same_type(a, b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, (list, tuple)):  # torch.return_types too (a tuple subclass)
        if len(a) != len(b):
            return f"{path}: len {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        for k in a:
            d = same(a[k], b[k], f"{path}[{k!r}]")
            if d:
                return d
        if type(a) is not dict and hasattr(a, "__dict__"):  # a subclass's attributes too
            return same(vars(a), vars(b), f"{path}.__dict__")
        return None
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b) or math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4) or a == b:
            return None
        return f"{path}: {a!r} vs {b!r}"
    if _user_type(type(a)):
        if hasattr(a, "__dict__"):
            return same(vars(a), vars(b), f"{path}.__dict__")
        return None
    if isinstance(a, BaseException):
        return same_exception(a, b, path)
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def same_exception(a, b, path="exception", depth=0):
    """Type (by name for the program's own classes), message, and the cause/context chain."""
    if (a is None) != (b is None):
        return f"{path}: {a!r} vs {b!r}"
    if a is None or depth > 5:
        return None
    if not _same_type(a, b) and not (type(a).__qualname__ == type(b).__qualname__
                                     and _user_type(type(a)) == _user_type(type(b))):
        return f"{path}: {type(a).__name__}({a}) vs {type(b).__name__}({b})"
    if str(a) != str(b):
        return f"{path}: message {str(a)!r} vs {str(b)!r}"
    if a.__suppress_context__ != b.__suppress_context__:
        return f"{path}: __suppress_context__ {a.__suppress_context__} vs {b.__suppress_context__}"
    return (same_exception(a.__cause__, b.__cause__, f"{path}.__cause__", depth + 1)
            or same_exception(a.__context__, b.__context__, f"{path}.__context__", depth + 1))


# ---- input sets ----------------------------------------------------------------------------------
@dataclasses.dataclass
class InputSet:
    """`make()` builds fresh argument objects (the same values every time) and the leaves
    whose gradients are compared; `warm`: the same shapes and facts as an earlier set, so
    the call should hit the cache."""
    label: str
    make: object
    warm: bool = False


class Record(collections.OrderedDict):
    """An input dict of transformers' ModelOutput's shape: its items mirrored as attributes
    by the class's own __setitem__ (the program's writes go through super())."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


class Bag(dict):
    """An input dict of a subclass that overrides nothing."""


# the class of the dict argument `d`, picked per program from its source
DICT_CLASSES = (dict, Record, Bag)


def dict_class(src):
    return DICT_CLASSES[zlib.crc32(src.encode()) % len(DICT_CLASSES)]


def input_sets(seed=0, dict_cls=dict):
    """The first input set, then one per changed fact the trace may have specialised on."""

    def make_set(k, shape=(3, 4), dtype=torch.float32, n=2, s=0.5, lst=(1, 2, 3), dkeys=None,
                 alias=False, grad=False):
        def make():
            g = torch.Generator().manual_seed(seed * 1000 + k)

            def t(*sh):
                return torch.randn(*sh, generator=g).to(dtype)

            leaves = []
            x, y, a = t(*shape), t(*shape), t(*shape)
            if grad:  # non-leaf inputs that require grad: in-place ops on them stay legal
                leaves = [x.requires_grad_(), y.requires_grad_()]
                x, y = x * 1.0, y * 1.0
            if alias:
                y = x
                a = x
            d = dict_cls({"a": a, "b": 1})
            if dkeys:
                d = dict_cls({"a": a, "b": t(*shape), "k": 3})
            return (x, y, n, s, list(lst), d), leaves
        return make

    return [
        InputSet("first", make_set(0)),
        InputSet("same values again", make_set(0), warm=True),
        InputSet("new values, same shapes", make_set(1), warm=True),
        InputSet("aliased inputs (y is x, d['a'] is x)", make_set(2, alias=True)),
        InputSet("inputs that require grad", make_set(3, grad=True)),
        InputSet("shape", make_set(4, shape=(2, 5))),
        InputSet("constants", make_set(5, n=7, s=-1.5)),
        InputSet("list length", make_set(6, lst=(4, 0, 2, 9, 5))),
        InputSet("empty list, dict keys", make_set(7, lst=(), dkeys=True)),
        InputSet("rank", make_set(8, shape=(4,))),
        InputSet("dtype", make_set(9, dtype=torch.float64)),
    ]


# ---- running -----------------------------------------------------------------------------------
# writes that change what the next call sees (a guarded global, a decorator's call counter):
# a program that makes them may legitimately trace again when called with the same inputs
_STATEFUL = re.compile(r"COUNTER(\[0\] *(\+=|=)|\.(append|extend|insert|pop|clear|remove)\()"
                       r"|\.calls *\+=|^\s*global ", re.M)


def stateful(src):
    return bool(_STATEFUL.search(src))


def _namespace():
    return {"SINK": io.StringIO(), "COUNTER": [0], "ACC": 0, "__name__": "fuzzprog"}


def _module_namespace(src, module_dir, prelude):
    """The globals of a module `fz_<digest>` whose file in `module_dir` holds `src`."""
    name = f"fz_{zlib.crc32(src.encode()):08x}_{len(src)}"
    path = os.path.join(module_dir, name + ".py")
    if not os.path.exists(path):
        with open(path, "w") as fh:
            fh.write(src)
    module = types.ModuleType(name)
    module.__file__ = path
    vars(module).update({k: v for k, v in prelude.items() if k != "__name__"})
    sys.modules[name] = module
    return vars(module), path


def _call(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - comparing user exceptions is the point
        return None, e


def _input_paths(args):
    """id -> (object, path) of every mutable object reachable in the inputs (tensors, lists,
    dicts); the objects are kept, so no id is reused while the call mutates the inputs."""
    out = {}

    def walk(v, path):
        if isinstance(v, (torch.Tensor, list, dict)) and id(v) not in out:
            out[id(v)] = (v, path)
            items = enumerate(v) if isinstance(v, list) else v.items() if isinstance(v, dict) else ()
            for k, w in items:
                walk(w, f"{path}[{k!r}]")
    for i, a in enumerate(args):
        walk(a, f"arg{i}")
    return out


def _identities(result, paths, path="result", out=None):
    """Which parts of the result are input objects: [(result path, input path)]."""
    out = [] if out is None else out
    if isinstance(result, (torch.Tensor, list, dict)) and id(result) in paths:
        out.append((path, paths[id(result)][1]))
    if isinstance(result, (list, tuple)):
        for i, v in enumerate(result):
            _identities(v, paths, f"{path}[{i}]", out)
    elif isinstance(result, dict):
        for k, v in result.items():
            _identities(v, paths, f"{path}[{k!r}]", out)
    return out


def _backward(result):
    """Backward through every float output that requires grad (their sum); None if none do."""
    outs = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            if v.requires_grad and v.is_floating_point():
                outs.append(v)
        elif isinstance(v, (list, tuple)):
            for w in v:
                walk(w)
        elif isinstance(v, dict):
            for w in v.values():
                walk(w)
    walk(result)
    if not outs:
        return None
    try:
        sum(o.sum() for o in outs).backward()
    except Exception as e:  # noqa: BLE001 - compared like any other exception
        return e
    return None


@dataclasses.dataclass
class Report:
    compiled: object
    captured: bool = False        # f's first entry is rewritten code (not a whole-frame fallback)
    fallback_reason: str = None
    ops: int = 0                  # ops traced during the first call (every frame)
    graph_breaks: int = 0
    warm_calls: int = 0           # calls with the same shapes as an earlier set (not counted
                                  # for a program that keeps state between calls)
    warm_hits: int = 0            # ... that traced no frame
    warm_misses: list = dataclasses.field(default_factory=list)  # (warm set, events) that traced
    raised: bool = False          # eager raised on the first input set


def check_source(src, backend="eager", n_inputs=None, filename="<string>", module_dir=None):
    """`module_dir`: the compiled copy of the program is a real module, written to a file there
    and named by the program's digest, as user code is (the disk cache's entries name the
    functions of a module; tests/fuzz/long_run.py --cache-dir runs programs twice over one
    cache directory)."""
    try:
        return _check(src, backend, n_inputs, filename, module_dir)
    except Mismatch as e:
        raise Mismatch(f"{e}\n--- program ---\n{src}") from e.__cause__


def _check(src, backend, n_inputs, filename, module_dir=None):
    _warm_up()
    ns_e, ns_c = _namespace(), _namespace()
    if module_dir is not None:
        ns_c, filename = _module_namespace(src, module_dir, ns_c)
        ns_e["__name__"] = ns_c["__name__"]  # (classes compare by module and name)
    code = compile(src, filename, "exec")
    exec(code, ns_e)
    exec(code, ns_c)
    eager = ns_e["f"]
    compiled = tracer.compile(ns_c["f"], backend=backend)
    report = Report(compiled)
    keeps_state = stateful(src)
    sets = input_sets(dict_cls=dict_class(src))[:n_inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # recompile-limit warnings are expected here
        for k, inp in enumerate(sets):
            # the cyclic collector off: a value the compiled call keeps alive only through
            # a reference cycle stays alive, and the lifetime check below sees it
            gc_was = gc.isenabled()
            gc.disable()
            try:
                refs_e, refs_c = _check_set(k, inp, eager, compiled, report, keeps_state, ns_e, ns_c)
                alive_e = [i for i, r in enumerate(refs_e) if r() is not None]
                alive_c = [i for i, r in enumerate(refs_c) if r() is not None]
            finally:
                if gc_was:
                    gc.enable()
            if alive_c != alive_e:
                raise Mismatch(f"input set {k} ({inp.label}): after the call, of its tensor arguments "
                               f"and result tensors, {alive_c} are still alive compiled, "
                               f"{alive_e} eager (a reference cycle, or a reference the tracer keeps)")
    return report


_WARM = []


def _warm_up():
    """The first trace in a process imports parts of torch lazily; a failed optional import
    there can leave the importing frames (the tracer's among them, with the call's
    arguments) in a reference cycle. Once per process, outside any checked call."""
    if not _WARM:
        _WARM.append(tracer.compile(lambda a: a.sin() + 1)(torch.randn(2)))


def _check_set(k, inp, eager, compiled, report, keeps_state, ns_e, ns_c):
    """One input set through both functions, compared; returns weak references to the tensor
    arguments of each call, which the caller checks die alike once this frame is gone."""
    a_e, leaves_e = inp.make()
    a_c, leaves_c = inp.make()
    paths_e, paths_c = _input_paths(a_e), _input_paths(a_c)
    r_e, x_e = _call(eager, a_e)
    before = tracer.stats()
    r_c, x_c = _call(compiled, a_c)
    after = tracer.stats()
    where = f"input set {k} ({inp.label})"
    if k == 0:
        _first_call(report, compiled, before, after, x_e)
    if inp.warm and not keeps_state:  # (state changed between calls may fail a guard)
        report.warm_calls += 1
        if after.frames_traced == before.frames_traced:
            report.warm_hits += 1
        else:
            n = after.frames_traced - before.frames_traced
            traced_frames = [str(e) for e in after.events if e.kind in ("frame", "recompile")][-2 * n:]
            report.warm_misses.append((inp.label, traced_frames))
            if k == 1 and not keeps_state and x_e is None:
                raise Mismatch(f"{where}: the same inputs again traced {n} frame(s):\n  "
                               + "\n  ".join(traced_frames))
    if x_e is not None or x_c is not None:
        d = same_exception(x_e, x_c, "exception")
        if d:
            raise Mismatch(f"{where}: eager raised {x_e!r}, compiled raised {x_c!r}: {d}") from x_c
    else:
        d = same(r_e, r_c) or same(_identities(r_e, paths_e), _identities(r_c, paths_c),
                                   "returned inputs")
        if d:
            raise Mismatch(f"{where}: {d}")
        if leaves_e:
            g_e, g_c = _backward(r_e), _backward(r_c)
            d = same_exception(g_e, g_c, "backward") or same(
                [v.grad for v in leaves_e], [v.grad for v in leaves_c], "input grads")
            if d:
                raise Mismatch(f"{where}: {d}")
    d = same(list(a_e), list(a_c), "inputs")
    if d:
        raise Mismatch(f"{where}: inputs mutated differently: {d}")
    if ns_e["SINK"].getvalue() != ns_c["SINK"].getvalue():
        raise Mismatch(f"{where}: printed output differs:\n{ns_e['SINK'].getvalue()!r}\n"
                       f"{ns_c['SINK'].getvalue()!r}")
    for name in ("COUNTER", "ACC"):
        if ns_e[name] != ns_c[name]:
            raise Mismatch(f"{where}: global {name} {ns_e[name]} vs {ns_c[name]}")
    return _lifetimes(a_e, r_e), _lifetimes(a_c, r_c)


def _lifetimes(args, result):
    """Weak references to the tensors a call's caller lets go of: its arguments and those of
    its result (one level down). An exception kept in a local of a frame in its own
    traceback is a cycle that holds every local of those frames, the arguments among them:
    it shows here too (builtin exceptions take no weak reference themselves)."""
    parts = result if isinstance(result, (tuple, list)) else [result]
    return [weakref.ref(v) for v in list(args) + list(parts) if isinstance(v, torch.Tensor)]


def _first_call(report, compiled, before, after, raised):
    entries = compiled.entries
    report.raised = raised is not None
    if entries:
        e = entries[0]
        report.captured = e.code is not None
        report.fallback_reason = e.reason
    report.ops = after.ops - before.ops
    report.graph_breaks = after.graph_breaks - before.graph_breaks


__all__ = ["check_source", "Mismatch", "Report", "same", "same_exception", "input_sets", "np"]
