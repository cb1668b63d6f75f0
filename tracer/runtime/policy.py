"""Trace it, skip it, or treat it as a library: the one answer, for every caller.

Three questions are asked about code the tracer meets, by three callers:

* the frame hook (`tracer.capture`, face/capture.py): may a trace *start* at this frame?
  Asked by the code object's filename, before anything of the frame is known (`frame_rule`,
  the skip prefixes);
* the value model (variables/builder.py, new_objects.py, torch_vars.py): when traced code
  reaches a function, an object or a class of this module, is it inlined, or is it an opaque
  value (a call to it is a graph break that names it)? Asked by the module's name;
* the interpreter (trace/frame.py) and module attributes (torch_vars.py): is this module's
  namespace code, treated as immutable (its functions and classes are not guarded)? Asked by
  a frame's globals, or by a module's name.

Each is answered here from the categories below, all by the top-level package name (so
`numpy.linalg` is numpy's), except the hook's, which works on directories found without
importing anything (`_package_dir`: importing scipy or sympy to learn where they live would
run their import-time code under a hook that may be tracing).

Categories (top-level package names)
------------------------------------
TORCH  torch itself. The hook skips its frames (the module call machinery, functional wrappers,
       fx, autograd, dynamo), except the `forward` of an `nn.Module` (`MODULE_DIRS`): stock
       modules' forward is model code, traced as `tracer.compile(model)` traces it. Traced
       code still inlines torch's Python functions the value model does not put in the graph,
       and its namespaces are library namespaces. Only the package `torch` (and its
       submodules, `torch._ops.torchvision` where a library's registered ops live) is torch:
       packages whose names merely begin with "torch" (torchvision, torchaudio, torchtext,
       torch_geometric...) are libraries written on top of it, user code to the tracer (their
       Python functions are inlined, their objects are ordinary objects, their classes are
       built symbolically), as torch.compile treats them; only their registered ops
       (`torch.ops.torchvision.nms`) are torch's. `is_torch_module` / `is_torch_value` answer
       this for every caller (a prefix test on the name once made torchvision's functions
       opaque graph nodes and its objects unsupported values).

INLINED_TORCH  torch.nn.utils, torch.optim (and their helpers, torch.utils._foreach_utils):
       torch's Python code that works on parameters and their state (gradient clipping reads
       each `p.grad` and scales it in place, vector_to_parameters assigns `p.data`, the
       functional optimizers `torch.optim.sgd.sgd` & co. update parameters in place) rather
       than computing a tensor from tensors. Its functions are inlined like user code, as
       TorchDynamo inlines them (trace_rules' MOD_INLINELIST holds torch.nn, torch.optim and
       torch.utils._foreach_utils), so their in-place ops, `.grad` reads and `.data` writes are
       traced or break with a reason. Recorded as one opaque node they were wrong: a function
       returning None (vector_to_parameters, sgd) was erased as a pure op that computed nothing,
       and AOTAutograd re-ran clip_grad_norm_ on fakes whose .grad is None (it returned 0 and
       clipped nothing; its grouping of the grads by device and dtype is evaluated by the
       trace: variables/foreach_groups.py). Left out: torch.optim.lr_scheduler (TorchDynamo
       skips it: it reads the optimizer's Python state) and torch.nn.utils.parametrize, whose
       functions keep their cache in a module-level dict (`parametrize.cached()`): a library
       namespace's globals are read without guards, so an inlined cache lookup would not be
       guarded (reading it stays a graph break, as it was).

UNTRACED_LIBRARIES  numpy, scipy, pandas, sympy, mpmath, networkx, PIL, matplotlib: libraries
       with no tensor programs inside. Never traced: the hook skips their frames, and inside a
       trace their functions and callables are opaque values (a call is a graph break with
       their name as the reason), their objects are opaque (guarded by type), their classes are
       not constructed symbolically. Their internals are not tensor programs: a trace through
       them gains no graph, and a break that names the library tells the user more than one
       deep inside it. numpy/scipy/pandas were the first (then PIL, matplotlib in the value
       model); sympy, mpmath and networkx were added to the hook's list because torch's
       compilers call back into them (sympy for symbolic shapes, networkx for partitioning)
       and torch.cond's lazy imports ran decorators under the hook whose tracing imported a
       half-initialised module.

UNTRACED_STDLIB  logging, warnings: modules of the standard library whose functions are called,
       never inlined, for the same reason as UNTRACED_LIBRARIES (a log or warning call inside
       a model is a graph break at that call that names it, not a trace through the logging
       machinery). The hook skips them with the rest of the standard library.

NOT_CONSTRUCTED_STDLIB  builtins, typing, abc, enum, functools, threading, weakref: standard
       library modules whose Python classes are not built symbolically inside a trace (their
       instances wrap C state, locks or weak references, or are typing machinery); the value
       model's `SomeClass(...)` builds only user classes (new_objects.is_user_class).

LIBRARY_NAMESPACES  torch, math, operator, functools, itertools, collections, builtins, typing,
       dataclasses, numbers: modules whose globals and attributes are code, treated as
       immutable: a frame of one reads its globals without guards (trace/frame.py), and an
       attribute read on one (`torch.relu`, `math.pi`'s module) is not guarded unless it is
       data (a tensor, a constant: how a library keeps a switch, e.g.
       torch.backends.cudnn.enabled, is guarded by value).

ANNOTATIONS  typing, typing_extensions: modules whose objects (List, Optional, a Union,
       List[Tensor]) are type annotations: immutable values, pinned by identity, whose
       subscripts (`List[torch.Tensor]`, `Optional[int]`, evaluated in a forward as the
       argument of torch.jit.annotate) are computed at trace time on known arguments. typing's
       own __getitem__ goes through an lru_cache and a sys._getframe call: a break per
       subscript. (types.GenericAlias and types.UnionType, `list[int]` and `int | None`, are
       annotations too, by type.) The hook skips their frames, typing_extensions' included
       (a site-packages module, not the standard library: torch's decorators call it when an
       optimizer's step runs, and its frames were traced as the user's, breaking on
       sys._getframe).

TOOLING  _pytest, pluggy, and the tracer itself (tracer, guards, bytecode_utils): the hook skips
       their frames (pytest's log capture formats torch.compile's log records under the hook;
       the tracer never traces itself); code that calls them from a trace is ordinary Python.

The standard library (by its directory) is skipped by the hook as a whole; a trace still
inlines its Python functions (functools, dataclasses, contextlib...), apart from
UNTRACED_STDLIB. Everything else is user code: traced by the hook, inlined, guarded.

Where the lists this module replaced disagreed (capture.py, trace/frame.py, builder.py,
new_objects.py, torch_vars.py), the decisions were:

* PIL and matplotlib were opaque in the value model but traced by the hook: the hook now skips
  them too (an untraced library whose frames the hook traced would be a trace rooted in code
  the value model refuses to inline). sympy, mpmath and networkx were skipped by the hook but
  inlined from traced code: they are untraced libraries now in both.
* new_objects' list of modules whose classes are not user classes lacked PIL and matplotlib
  (and now sympy, mpmath, networkx): it is TORCH + UNTRACED_LIBRARIES + UNTRACED_STDLIB +
  NOT_CONSTRUCTED_STDLIB.
* trace/frame.py's library globals (torch, numpy, math, functools, collections, typing,
  operator) and torch_vars.py's trusted module attributes (the same without numpy, plus
  itertools, builtins, dataclasses, numbers) answered the same question: one list,
  LIBRARY_NAMESPACES. numpy is not in it: its frames are never traced (it is an untraced
  library), so its globals were never read by a trace, and an attribute read on the numpy
  module stays guarded by identity as before. dataclasses and numbers frames (inlined:
  `dataclasses.fields`, `dataclasses.replace`) now read their module's globals unguarded,
  like functools'.
* builder.py (`_is_torch_callable`, the objects refused as torch values) and torch_vars.py
  (is_compiling queries, autocast classes) tested `__module__.startswith("torch")`, which
  took torchvision & co. for torch (torchvision's functions became opaque graph nodes whose
  tuples had no graph meaning, its helper objects unsupported values, its callable objects
  FX targets without a name): they ask is_torch_module / is_torch_value now.
* _pytest and pluggy stay hook-only (TOOLING): they were skipped because their own frames ran
  under capture(), not because traced code calls them.
"""
import importlib.util
import os
import sys
import sysconfig
import types

import torch

TORCH = ("torch",)
INLINED_TORCH = ("torch.nn.utils", "torch.optim", "torch.utils._foreach_utils")
NOT_INLINED_TORCH = ("torch.optim.lr_scheduler", "torch.nn.utils.parametrize")
UNTRACED_LIBRARIES = ("numpy", "scipy", "pandas", "sympy", "mpmath", "networkx", "PIL", "matplotlib")
UNTRACED_STDLIB = ("logging", "warnings")
NOT_CONSTRUCTED_STDLIB = ("builtins", "typing", "abc", "enum", "functools", "threading", "weakref")
LIBRARY_NAMESPACES = ("torch", "math", "operator", "functools", "itertools", "collections", "builtins",
                      "typing", "dataclasses", "numbers")
TOOLING = ("_pytest", "pluggy")
ANNOTATIONS = ("typing", "typing_extensions")

_TORCH = frozenset(TORCH)
_UNTRACED = frozenset(UNTRACED_LIBRARIES + UNTRACED_STDLIB)
_NOT_CONSTRUCTED = frozenset(TORCH + UNTRACED_LIBRARIES + UNTRACED_STDLIB + NOT_CONSTRUCTED_STDLIB)
_LIBRARY_NAMESPACES = frozenset(LIBRARY_NAMESPACES)


def top_package(module_name):
    """`numpy` for `numpy.linalg`; "" for None (or a `__module__` that is not a string)."""
    return module_name.split(".")[0] if isinstance(module_name, str) else ""


# ---- by module name (the value model) --------------------------------------------------------
def is_torch_module(module_name):
    """Code of this module is torch's (the package `torch`, not a package whose name begins with
    "torch": torchvision is a library on top of it, user code here)."""
    return top_package(module_name) in _TORCH


def is_torch_value(value):
    """A function, callable or class whose `__module__` is torch's."""
    return is_torch_module(getattr(value, "__module__", None))


def _in_packages(module_name, packages):
    """`module_name` is one of `packages` or a submodule of one."""
    return isinstance(module_name, str) and any(
        module_name == p or module_name.startswith(p + ".") for p in packages)


def is_inlined_torch_module(module_name):
    """torch's code of this module is inlined like user code, not called as one graph op
    (INLINED_TORCH)."""
    return _in_packages(module_name, INLINED_TORCH) and not _in_packages(module_name, NOT_INLINED_TORCH)


def is_inlined_torch_function(value):
    """A Python function of torch's that a trace inlines (INLINED_TORCH); a C function or an
    op of the same module stays an op."""
    return isinstance(value, types.FunctionType) and is_inlined_torch_module(value.__module__)


def is_untraced_module(module_name):
    """Code of this module is never inlined: its callables and objects are opaque values."""
    return top_package(module_name) in _UNTRACED


def is_untraced_value(value):
    """A function or callable object whose `__module__` is an untraced module's."""
    return is_untraced_module(getattr(value, "__module__", None))


def constructs_symbolically(module_name):
    """Whether Python classes defined in this module may be built symbolically inside a trace
    (new_objects.is_user_class adds: a heap type)."""
    return top_package(module_name) not in _NOT_CONSTRUCTED


def is_library_namespace(module_name):
    """This module's globals and attributes are code, treated as immutable: not guarded."""
    return top_package(module_name) in _LIBRARY_NAMESPACES


def is_annotation(value):
    """A type annotation object (not a class): an instance of a class of ANNOTATIONS, or a
    builtin generic alias / union (`list[int]`, `int | None`)."""
    t = type(value)
    if isinstance(value, type):
        return False
    return t in (types.GenericAlias, types.UnionType) or getattr(t, "__module__", None) in ANNOTATIONS


# ---- by globals (the interpreter) ------------------------------------------------------------
def is_library_globals(g):
    """A frame running with these globals is library code: its global reads are not guarded."""
    return is_library_namespace(g.get("__name__"))


# ---- by code object (the frame hook) ---------------------------------------------------------
def _package_dir(name):
    """The package's directory (a single-file module: its file), found without importing it
    (None if it is not installed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if not spec.submodule_search_locations:
        return os.path.abspath(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    return os.path.abspath(list(spec.submodule_search_locations)[0]) + os.sep


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_TRACER_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (
    sys.modules["tracer"], __import__("guards"), __import__("bytecode_utils")))

# The hook's default rule: frames of code under these directories are not traced (unless a
# resume function, or an nn.Module forward under MODULE_DIRS). `tracer.capture(skip_prefixes=)`
# takes another tuple; `DEFAULT_SKIP_PREFIXES + (dir,)` extends this one.
DEFAULT_SKIP_PREFIXES = tuple(p for p in (_package_dir(n) for n in UNTRACED_LIBRARIES + TOOLING + ANNOTATIONS)
                              if p) + (
    _TORCH_DIR,
    sysconfig.get_paths()["stdlib"] + os.sep,
    *_TRACER_DIRS,
)
# Where torch keeps nn.Module classes whose `forward` is model code (traced even though it
# lives under a skipped prefix).
MODULE_DIRS = (os.path.join(_TORCH_DIR, "nn") + os.sep, os.path.join(_TORCH_DIR, "ao", "nn") + os.sep)

TRACE, SKIP, SKIP_ONCE = "trace", "skip", "skip once"
# The qualified name of the stand-in frames a rebuilt exception's traceback points at
# (variables/exceptions.make_exception): the hook never traces them.
TRACEBACK_STAND_IN = "<traceback stand-in>"


def _stdlib_generated(code):
    """Code the standard library writes as text and compiles as "<string>", like a user's
    exec'd code: a dataclass's `__init__`/`__eq__`... (`__create_fn__`, 3.11-3.15) and a
    namedtuple's `__new__` (a lambda over `_tuple_new`). Called natively (importlib.metadata
    makes a namedtuple per entry point), each was traced as a frame of its own, with no graph
    to gain, and recompiled per argument value until the recompile limit warned; inside a
    traced frame they are inlined as before."""
    return code.co_qualname.startswith("__create_fn__.<locals>.") or (
        code.co_name == "<lambda>" and code.co_names == ("_tuple_new",))


def frame_rule(code, args, prefixes=DEFAULT_SKIP_PREFIXES):
    """TRACE this frame, SKIP it (and every frame of this code: the answer depends on the
    code alone), or SKIP_ONCE (this frame only: the answer depended on its arguments)."""
    if ".<resume@" in code.co_qualname:  # made by bytecode_utils.resume for a frame we traced
        return TRACE
    if code.co_qualname == TRACEBACK_STAND_IN:
        return SKIP
    filename = code.co_filename
    if filename.startswith("<") and (filename != "<string>" or _stdlib_generated(code)):
        return SKIP  # <frozen ...>, fx's <eval_with_key>, generated code
    if code.co_name == "<module>":
        return SKIP  # a module body, run once by an import (a lazy import inside a call)
    if not filename.startswith(prefixes):
        if args and isinstance(args[0], torch.nn.Module) and "_parameters" not in args[0].__dict__:
            # a module's own code before Module.__init__ ran (a user's `__init__` building the
            # model under capture()): the value model needs a constructed module to wrap it
            return SKIP_ONCE
        return TRACE
    if code.co_name == "forward" and filename.startswith(MODULE_DIRS):
        return TRACE if args and isinstance(args[0], torch.nn.Module) else SKIP_ONCE
    return SKIP


def should_skip(code, prefixes=DEFAULT_SKIP_PREFIXES, args=None):
    """Whether the frame hook leaves a frame of `code` (called with `args`) alone."""
    return frame_rule(code, args, prefixes) is not TRACE
