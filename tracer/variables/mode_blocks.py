"""torch modes whose block is part of the graph: `torch.autocast(...)` and `torch.inference_mode()`.

As under torch.compile, entering such a block records a node that enters the mode
(`torch.amp._enter_autocast(...)`, `torch.autograd.grad_mode._enter_inference_mode(mode)`) and
leaving it a node that leaves it, so every backend sees where the mode applies. While tracing,
the real mode is entered too, so fake tensors take what the graph will produce: autocast's
dtypes; inference tensors (`is_inference()`, no autograd, an in-place write outside the block
refused as eager refuses it). The blocks entered and not left yet are a stack on the trace
(`ctx.mode_blocks`, innermost last): at the end of a trace the real modes are left
(leave_mode_blocks); a graph break inside blocks ends the graph with the blocks left
(`exit_node`, innermost first: convert_frame), and the rewritten code enters a real manager of
each again before the resume function (BlockReentry), whose `with` exit leaves it.

A manager made outside the frame (a module-level `AC = torch.autocast(...)`, the instance a
`@torch.autocast(...)` or `@torch.inference_mode()` decorator keeps, a global `torch.no_grad()`)
is the same Variable as one made in the frame (`of_instance`), from the state it holds, which
the builder guards by value (an attribute can be set again), the object by its type.

Inference mode also switches grad mode (off inside `inference_mode()`, on inside
`inference_mode(False)`): the mode a block was entered in (`grad_before`) is what its exit
gives back, in the trace and in the graph, and what a re-entry after a break enters it in.

Torch internals read here: torch.amp.autocast_mode's _enter_autocast/_exit_autocast/
_UnmanagedAutocast, torch.autograd.grad_mode's _enter_inference_mode/_exit_inference_mode and
torch._C._InferenceMode; checked on torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them
all; tests/test_torch_internals.py resolves each).
"""
import copy
import functools
import inspect
import threading
import warnings

import torch
from guards import QueryMatch

from ..exc import Unsupported
from ..graph import node_meta
from ..runtime import policy
from .base import ConstantVariable, ObjectVariable
from .torch_vars import ContextManagerVariable, GradModeVariable

_GRAD_MODE = torch.autograd.grad_mode


def is_autocast_class(cls) -> bool:
    """torch.autocast (torch.amp.autocast) and its torch subclasses (torch.cpu.amp.autocast,
    torch.cuda.amp.autocast)."""
    return (isinstance(cls, type) and issubclass(cls, torch.amp.autocast)
            and policy.is_torch_value(cls))


def make_manager(tx, cls, args, kwargs):
    """`cls(*args, **kwargs)` called in the frame, for a manager class whose block is part of
    the graph; None for any other class."""
    if is_autocast_class(cls):
        return AutocastVariable.make(tx, cls, args, kwargs)
    if cls is torch.inference_mode:
        return InferenceModeVariable.make(tx, args, kwargs)
    return None


class ModeBlockVariable(ContextManagerVariable):
    """A manager whose block is a region of the graph, between an enter node (`enter_fn(*args)`)
    and an exit node (`exit_fn(enter node)`). Subclasses say how the real mode is entered and
    left while tracing (`_enter_real`, `leave_real`) and what manager a re-entry makes."""

    enter_fn = exit_fn = None

    def __init__(self, source=None):
        super().__init__(source)
        self.node = None         # the enter node of the open block
        self.grad_before = None  # the grad mode the open block was entered in

    @property
    def args(self):
        raise NotImplementedError

    def enter(self, tx):
        if self.node is not None:
            raise Unsupported(f"entering a torch.{self.what}() object again while its block is open")
        self.grad_before = torch.is_grad_enabled()
        self.node = tx.output.graph.create_node("call_function", self.enter_fn, self.args, {})
        node_meta.stamp(self.node, tx.ctx)  # (where a compiling backend may break: convert_frame)
        self._enter_real()
        tx.ctx.mode_blocks.append(self)
        return self.entered_value()

    def exit(self, tx):
        if not tx.ctx.mode_blocks or tx.ctx.mode_blocks[-1] is not self:
            raise Unsupported(f"leaving a torch.{self.what}() block the traced code did not enter, or out of order")
        self.exit_node(tx.output.graph)
        tx.ctx.mode_blocks.pop()
        self.leave_real()
        self.node = None
        return ConstantVariable(None)

    def exit_node(self, graph):
        """The node that leaves the block (at its end, or at the graph's end at a break)."""
        graph.create_node("call_function", self.exit_fn, (self.node,), {})

    def grad_after_exit(self, grad_inside):
        """The grad mode once the block is left, `grad_inside` the mode inside it."""
        return grad_inside

    def entered_value(self):
        """What `with ... as v` binds."""
        return ConstantVariable(None)

    def _enter_real(self):
        raise NotImplementedError

    def leave_real(self):
        raise NotImplementedError

    def reentry(self):
        """The BlockReentry a graph break inside the block leaves for the resume function."""
        raise NotImplementedError

    def reconstruct(self, cg):
        if self.source is not None:  # (made outside the frame: that very object)
            return cg.load_source(self.source)
        raise Unsupported(f"a torch.{self.what}() object made in the frame live at a graph break")


class AutocastVariable(ModeBlockVariable):
    """`torch.autocast(device_type, dtype, enabled, cache_enabled)`: the block is part of the
    graph as `_enter_autocast(device, dtype, enabled, cache_enabled)` / `_exit_autocast(mode)`
    nodes (inductor and torch.export know them). `real` is an autocast of the same arguments
    that the trace enters and leaves: built from the constant arguments at trace time (it
    validates them as eager does; defaults read from global state, dtype and cache, are
    guarded), or a copy of a manager made outside the frame (never the user's own object,
    whose `prev*` attributes the trace must not write)."""

    what = "autocast"
    enter_fn = staticmethod(torch.amp.autocast_mode._enter_autocast)
    exit_fn = staticmethod(torch.amp.autocast_mode._exit_autocast)

    def __init__(self, real, source=None):
        super().__init__(source)
        self.real = real

    @classmethod
    def make(cls, tx, klass, args, kwargs):
        try:
            cargs = [a.as_constant() for a in args]
            ckw = {k: v.as_constant() for k, v in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{klass.__name__}() with arguments that are not constants")
        try:
            bound = inspect.signature(klass).bind(*cargs, **ckw)
        except TypeError as e:
            raise Unsupported(f"{klass.__name__}() does not bind: {e}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the user's own call warns when it runs eagerly
            real = klass(*cargs, **ckw)
        if bound.arguments.get("dtype") is None:
            tx.guard(QueryMatch(torch.get_autocast_dtype, (real.device,), (), real.fast_dtype))
        if bound.arguments.get("cache_enabled") is None:
            tx.guard(QueryMatch(torch.is_autocast_cache_enabled, (), (), real._cache_enabled))
        return cls(real)

    def python_type(self):
        return type(self.real)

    @property
    def args(self):
        """What `_enter_autocast` takes: the real object's resolved arguments."""
        r = self.real
        return (r.device, r.fast_dtype, r._enabled, r._cache_enabled)

    def entered_value(self):
        return self  # (autocast's __enter__ returns the manager)

    def _enter_real(self):
        self.real.__enter__()

    def leave_real(self):
        self.real.__exit__(None, None, None)

    def reentry(self):
        return BlockReentry(self.what, functools.partial(_UNMANAGED_AUTOCAST, *self.args), self.grad_before)


def inference_mode_decorated(mode, fn):
    """The real `torch.inference_mode(mode)(fn)`."""
    return torch.inference_mode(mode)(fn)


class InferenceModeVariable(ModeBlockVariable):
    """`torch.inference_mode(mode=True)`: the block is part of the graph as
    `_enter_inference_mode(mode)` / `_exit_inference_mode(guard)` nodes, as torch.compile
    emits them. While tracing, the real mode is entered (a `torch._C._InferenceMode` guard), so
    tensors made in the block have inference fakes: `is_inference()` answers as eager, and what
    eager refuses of an inference tensor (an in-place write outside the block, saving it for
    backward) is refused on the fake, a graph break where eager raises. A compiling backend
    runs the block's ops in the frame's mode: a tensor made in the block that leaves the graph
    breaks the frame at the block's start (convert_frame._inference_escapes_at)."""

    what = "inference_mode"
    enter_fn = staticmethod(_GRAD_MODE._enter_inference_mode)
    exit_fn = staticmethod(_GRAD_MODE._exit_inference_mode)

    def __init__(self, mode, source=None):
        super().__init__(source)
        self.mode = mode
        self.guard = None  # the real torch._C._InferenceMode while the block is open in the trace

    @classmethod
    def make(cls, tx, args, kwargs):
        """`torch.inference_mode(mode=True)`, or `torch.inference_mode(fn)`: the function run
        inside one (the class's __new__ takes it for `cls()(fn)`)."""
        if len(args) + len(kwargs) > 1 or set(kwargs) - {"mode"}:
            raise Unsupported("inference_mode() takes one argument, the mode")
        arg = args[0] if args else kwargs.get("mode")
        if arg is None:
            return cls(True)
        if arg.is_constant() and type(arg.as_constant()) is bool:
            return cls(arg.as_constant())
        return cls(True).call(tx, [arg], {})

    def python_type(self):
        return torch.inference_mode

    @property
    def args(self):
        return (self.mode,)

    def _enter_real(self):
        self.guard = torch._C._InferenceMode(self.mode)

    def leave_real(self):
        guard, self.guard = self.guard, None
        guard.__exit__(None, None, None)

    def grad_after_exit(self, grad_inside):
        return self.grad_before

    def reconstruct(self, cg):
        """Live at a graph break (on the stack of a `with` the frame breaks at): a new one of
        the same mode (one made outside the frame: that object)."""
        if self.source is not None:
            return cg.load_source(self.source)
        cg.call_with(torch.inference_mode, [ConstantVariable(self.mode)])

    def reentry(self):
        return BlockReentry(self.what, functools.partial(torch.inference_mode, self.mode), self.grad_before)

    decorator = staticmethod(inference_mode_decorated)

    def fresh(self):
        return InferenceModeVariable(self.mode)

    def decorator_args(self):
        return [ConstantVariable(self.mode)]


class BlockReentry:
    """At a graph break inside a mode block: the graph left the block at its end; the rewritten
    code calls `enter()`, which enters a real manager made by `make()` and returns this object,
    kept where the `with` statement keeps its bound __exit__. The resume function's block end
    calls it (a graph break: the call leaves the mode natively).

    The manager is entered in the grad mode the block was entered in (`grad_before`: inference
    mode gives it back on exit), and the mode the traced code had reached inside, which the
    rewritten code set after the graph, is set again after it.

    One object per break site, held as a constant of the rewritten code: the resume function
    sees the same object on every call (its guards pin its identity), so a new bound method
    per call cannot make it recompile. The entered managers are kept per thread."""

    def __init__(self, what, make, grad_before):
        self.what, self.make, self.grad_before = what, make, grad_before
        self._local = threading.local()

    def enter(self):
        inside = torch.is_grad_enabled()
        torch._C._set_grad_enabled(self.grad_before)
        mode = self.make()
        mode.__enter__()
        torch._C._set_grad_enabled(inside)
        self._local.__dict__.setdefault("modes", []).append(mode)
        return self

    def __call__(self, exc_type, exc, tb):
        return self._local.modes.pop().__exit__(exc_type, exc, tb)


# (torch 2.11 has no such subclass; it only tells an autocast entered outside a `with` apart)
_UNMANAGED_AUTOCAST = getattr(torch.amp.autocast_mode, "_UnmanagedAutocast", torch.amp.autocast_mode.autocast)


class BlockReentryVariable(ObjectVariable):
    """A BlockReentry met by a resume function: calling it is the block's exit, a break."""

    def call(self, tx, args, kwargs):
        raise Unsupported(f"leaving a torch.{self.value.what}() block that a graph break split (runs as Python)")

    def reconstruct(self, cg):
        cg.load_const(self.value)


def leave_mode_blocks(ctx):
    """After a trace (complete or not): leave the real modes still entered, innermost first."""
    while ctx.mode_blocks:
        ctx.mode_blocks.pop().leave_real()


def grad_after_exits(ctx, grad_inside):
    """The grad mode once the blocks open where the trace stopped are left, innermost first."""
    for block in reversed(ctx.mode_blocks_at_stop):
        grad_inside = block.grad_after_exit(grad_inside)
    return grad_inside


# ---- managers made outside the frame ----------------------------------------------------------

def _grad_mode(mode):
    return lambda value, source: GradModeVariable(mode, source=source)


def _set_grad_enabled(value, source):
    """set_grad_enabled(b) switched at its construction; its __exit__ puts back `prev`."""
    return GradModeVariable.switched(value.mode, value.prev, source)


def _autocast(value, source):
    return AutocastVariable(copy.copy(value), source)


def _inference_mode(value, source):
    return InferenceModeVariable(value.mode, source)


# type -> (the attributes its behaviour reads, guarded by value; the Variable of an instance)
_INSTANCES = {
    torch.no_grad: ((), _grad_mode(False)),
    torch.enable_grad: ((), _grad_mode(True)),
    torch.set_grad_enabled: (("mode", "prev"), _set_grad_enabled),
    torch.inference_mode: (("mode",), _inference_mode),
}
_AUTOCAST_STATE = ("device", "fast_dtype", "_enabled", "_cache_enabled")


def instance_state(value):
    """The attributes (name -> value) by which a manager the trace models, made outside the
    frame, behaves; None for any other object."""
    t = type(value)
    known = _INSTANCES.get(t)
    names = known[0] if known is not None else _AUTOCAST_STATE if is_autocast_class(t) else None
    if names is None:
        return None
    return {name: getattr(value, name) for name in names}


def of_instance(value, source):
    """The Variable of such a manager (instance_state is not None)."""
    t = type(value)
    known = _INSTANCES.get(t)
    return (known[1] if known is not None else _autocast)(value, source)
