"""`tracer.export(fn_or_module, args, kwargs=None, *, dynamic_shapes=None)` ->
`torch.export.ExportedProgram`.

The frame is captured whole by the tracer (a graph break is an `ExportError` naming it and
its file:line, as fullgraph=True does); then torch's own export machinery takes over. It
traces, non-strictly, a module whose `forward` has the user's signature and runs the
captured entry's rewritten code: the inputs are loaded from their sources, the captured
graph runs, the return value is rebuilt. So the ExportedProgram holds exactly our graph
(lowered to ATen by torch.export), takes the user's arguments, returns the user's output
structure, and saves/loads with `torch.export.save`/`load` in a process that never imports
the tracer. No serializer of our own.

What export cannot express is reported, not dropped: every guard of the entry that is not
a tensor-metadata check on an argument (export checks those itself) is listed in
`ExportedProgram.tracer_assumptions` and logged on `tracer.export`; a Python argument whose
value the graph was specialised on also gives an `ExportAssumptionWarning`, because the
exported program silently assumes that value on every call.
"""
import inspect
import logging
import warnings

import torch
from bytecode_utils import make_binder, make_function
from guards import ConstMatch, LocalSource
from guards.tensor import TensorMatch

from .api import CompiledFunction
from .exc import FullGraphError
from .runtime.cache import FrameSizes, cache_for

log = logging.getLogger("tracer.export")


class ExportError(RuntimeError):
    """The frame could not be captured whole, or torch.export rejected the captured graph."""


class ExportAssumptionWarning(UserWarning):
    """The exported program assumes a Python argument keeps the value it had when exported."""


def export(fn_or_module, args, kwargs=None, *, dynamic_shapes=None):
    """Capture `fn_or_module(*args, **kwargs)` whole and export it with torch.export."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"tracer.export: args must be a tuple of inputs (as torch.export takes them), "
                        f"not {type(args).__name__}; for one input write (x,)")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"tracer.export: kwargs must be a dict, not {type(kwargs).__name__}")
    kwargs = dict(kwargs or {})
    module = fn_or_module if isinstance(fn_or_module, torch.nn.Module) else None
    fn = type(module).forward if module is not None else fn_or_module
    if not inspect.isfunction(fn):
        raise TypeError(f"tracer.export expects a Python function or an nn.Module, got {type(fn_or_module).__name__}")
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = CompiledFunction(fn, backend=keep, fullgraph=True)
    call_args = (module, *args) if module is not None else tuple(args)
    # what earlier calls and exports saw of the sizes and ints is not this export's business:
    # an int that changed between two exports would otherwise be traced symbolic, its value
    # then fixed by torch.export without a word in the assumptions
    code_cache = cache_for(fn.__code__)
    seen, code_cache.sizes = code_cache.sizes, FrameSizes()
    try:
        compiled(*call_args, **kwargs)
    except FullGraphError as e:
        raise ExportError(f"tracer.export needs the whole frame in one graph: {e}") from e
    finally:
        code_cache.sizes = seen
    entry = compiled.entries[-1]
    if entry.breaks or entry.code is None:
        raise ExportError(f"tracer.export: {fn.__qualname__} was not captured whole")
    runner = make_function(entry.code, fn.__globals__, closure=fn.__closure__)
    wrapper = _Exported(module, graphs[-1] if graphs else None, fn, runner)
    assumptions = _assumptions(entry.guards.guards)
    try:
        ep = torch.export.export(wrapper, tuple(args), kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:  # noqa: BLE001 - torch.export's own message says what it could not express
        raise ExportError(f"torch.export rejected the graph captured from {fn.__qualname__}: "
                          f"{type(e).__name__}: {e}") from e
    ep.tracer_assumptions = assumptions
    for line in assumptions:
        log.info("export of %s assumes: %s", fn.__qualname__, line)
    first = fn.__code__.co_varnames[0] if module is not None else None  # `self`: the model's own config
    specialised = [g for g in entry.guards.guards if isinstance(g, ConstMatch) and _argument(g.source) not in (None, first)]
    if specialised:
        warnings.warn(f"tracer.export: the exported {fn.__qualname__} is specialised on the value of "
                      + ", ".join(g.describe() for g in specialised)
                      + "; a call with another value returns what a call with this value would", ExportAssumptionWarning, stacklevel=2)
    return ep


class _Exported(torch.nn.Module):
    """What torch.export traces: the user's signature outside, the rewritten frame inside.

    The captured graph module is a submodule, so export sees its parameters and buffers
    (the same objects as the model's) as the program's state, once. The model is held but
    not registered (its parameters would be saved twice): the rewritten code reads the rest
    of what it needs from it."""

    def __init__(self, module, gm, fn, runner):
        super().__init__()
        if gm is not None:
            self.graph_module = gm
        object.__setattr__(self, "model", module)
        self._runner = runner
        code = fn.__code__
        self._bind = make_binder(code, fn.__defaults__, fn.__kwdefaults__)
        sig = inspect.signature(fn)
        if module is not None:  # forward(self, ...): the model is not an argument of the export
            sig = sig.replace(parameters=list(sig.parameters.values())[1:])
        bind, run = self._bind, runner

        if module is not None:
            def forward(*args, **kwargs):
                return run(*bind(self.model, *args, **kwargs))
        else:
            def forward(*args, **kwargs):
                return run(*bind(*args, **kwargs))
        forward.__signature__ = sig  # export binds the example inputs to the user's names
        self.forward = forward


def _argument(source):
    """The name of the argument a source reads from, or None (globals, constants...)."""
    root = source.base_root()
    return root.name_ if isinstance(root, LocalSource) else None


def _assumptions(guards):
    """Guards export does not check itself, in words (tensor checks on arguments it does)."""
    out = []
    for g in guards:
        if isinstance(g, TensorMatch) and _argument(g.source) is not None:
            continue
        out.append(g.describe())
    return out
