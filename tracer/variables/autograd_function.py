"""`F.apply(*args)` for a user `torch.autograd.Function` subclass F: one graph node.

The node calls the real `F.apply` when the graph runs, so forward, `ctx`, and the user's
`backward` behave exactly as in eager (autograd records F's backward node; nothing about
F's gradient is guessed). The tracer only needs the outputs' metadata: F.forward is traced
symbolically, with a stand-in ctx, into a scratch graph that is thrown away (its ops are
not part of the program; the real forward runs inside the node). What that trace reads is
guarded like any other read. A forward that would have effects outside itself (stores to
inputs, globals), `mark_dirty`, `mark_non_differentiable`, or new-style `setup_context`
is Unsupported: the call breaks the graph and runs natively.

The outputs' `requires_grad` follows autograd.Function's rule, not the scratch trace (which
ran under no_grad, as forward does): a floating-point output requires grad when grad mode
is on and some tensor input requires grad.
"""
import weakref

import torch

from ..exc import Unsupported
from .base import Variable
from ..graph import node_meta

_FUNCTION_BASE_SETUP = torch.autograd.Function.setup_context
_APPLY_FNS = weakref.WeakKeyDictionary()


class TraceCtx:
    """The ctx F.forward sees while its outputs' metadata are traced (never run for real)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = value


def is_autograd_function_class(cls):
    return isinstance(cls, type) and issubclass(cls, torch.autograd.Function) and \
        cls is not torch.autograd.Function


def apply_fn(cls):
    """A plain function calling cls.apply: the FX node's target (FX would spell a bound
    classmethod by its defining class, torch.autograd.Function, and lose the subclass)."""
    fn = _APPLY_FNS.get(cls)
    if fn is None:
        def fn(*args):
            return cls.apply(*args)
        fn.__name__ = fn.__qualname__ = f"{cls.__name__}_apply"
        _APPLY_FNS[cls] = fn
    return fn


class AutogradFunctionApplyVariable(Variable):
    def __init__(self, fn_cls):
        super().__init__(None)
        self.fn_cls = fn_cls

    def call(self, tx, args, kwargs):
        cls = self.fn_cls
        name = cls.__name__
        if kwargs:
            raise Unsupported(f"{name}.apply with keyword arguments")
        if getattr(cls, "setup_context", _FUNCTION_BASE_SETUP) is not _FUNCTION_BASE_SETUP:
            raise Unsupported(f"{name} uses setup_context (new-style autograd.Function)")
        forward = _static_function(cls, "forward")
        if forward is None:
            raise Unsupported(f"{name}.forward is not a Python staticmethod")
        for a in args:
            if not (isinstance(a, tensor.TensorVariable) or a.is_constant()):
                raise Unsupported(f"{name}.apply with an argument that is not a tensor or a constant")
        grad = torch.is_grad_enabled()
        needs = tuple(bool(isinstance(a, tensor.TensorVariable) and a.example.requires_grad and grad)
                      for a in args)
        outputs = _scratch_forward(tx, cls, forward, args, needs)
        example = _with_autograd_flags(outputs, any(needs))
        fx_args = [a.node if isinstance(a, tensor.TensorVariable) else a.as_constant() for a in args]
        node = tx.output.graph.create_node("call_function", apply_fn(cls), tuple(fx_args), {})
        node_meta.annotate(tx, node, example, cls.apply)
        return torch_calls.wrap_result(tx, node, example)

    def __repr__(self):
        return f"AutogradFunctionApply({self.fn_cls.__name__})"


def _static_function(cls, name):
    import types
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            if isinstance(attr, staticmethod) and isinstance(attr.__func__, types.FunctionType):
                return attr.__func__
            return None
    return None


def _scratch_forward(tx, cls, forward, args, needs):
    """Trace F.forward(ctx, *args) into a throw-away graph; the fake outputs."""
    ctx = tx.ctx
    with ctx.scratch_trace():
        prev_grad = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)  # forward runs under no_grad
        try:
            fctx = new_objects.construct(tx, objects.ClassVariable(TraceCtx), [base.ConstantVariable(needs)], {})
            result = functions.UserFunctionVariable(forward).call(tx, [fctx, *args], {})
            if not ctx.side_effects.is_empty():
                raise Unsupported(f"{cls.__name__}.forward changes state outside itself")
        finally:
            torch._C._set_grad_enabled(prev_grad)
    if isinstance(result, tensor.TensorVariable):
        return result.example
    if isinstance(result, containers.BaseSequence) and result.python_type() is tuple and \
            all(isinstance(r, tensor.TensorVariable) for r in result.items):
        return tuple(r.example for r in result.items)
    raise Unsupported(f"{cls.__name__}.forward returns {result}, not tensors")


def _with_autograd_flags(outputs, any_needs_grad):
    """The outputs' fakes as F.apply makes them: one that requires grad has autograd history
    (F's backward node), not a leaf. (A leaf requiring grad among a graph's outputs is one the
    graph made itself, `torch.ones(2, requires_grad=True)`, which the graph's caller makes a
    leaf again after a compiling backend: graph/aot_outputs.made_leaves. F's output taken so
    lost its backward node, and every gradient through it.)"""
    def one(t):
        with t.fake_mode:
            out = t.detach()
            if any_needs_grad and (t.is_floating_point() or t.is_complex()):
                with torch.enable_grad():
                    grown = out.requires_grad_(True) * 1
                    out = grown if grown.stride() == t.stride() else out.clone()
        return out
    if isinstance(outputs, tuple):
        return tuple(one(t) for t in outputs)
    return one(outputs)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import base, containers, functions, new_objects, objects, tensor, torch_calls  # noqa: E402
