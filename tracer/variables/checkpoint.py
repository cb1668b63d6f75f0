"""`torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False)`: fn traced into a
subgraph that the graph hands to checkpoint when it runs.

Why not inline fn: activation checkpointing re-runs fn during backward and checks that the
recomputation saves exactly the tensors the first run saved. Inlined into the frame's graph,
the first run would be the graph's work and the recomputation eager code, which a backend
may not match tensor for tensor. So fn's tensor work becomes a GraphModule of its own, and
the frame's graph calls `checkpoint(subgraph, *inputs, use_reentrant=False, ...)`: both
runs execute the same subgraph, with checkpoint's own semantics (saved-tensor hooks, RNG
state restored for the recomputation).

Keyword arguments that are not checkpoint's own are fn's (checkpoint passes them on), lifted
like its positional ones. Reentrant mode (`use_reentrant=True`, the old default) runs fn under
no_grad and recomputes it in backward through an autograd.Function whose backward calls
`torch.autograd.backward`: with a tensor argument requiring grad, the gradients it gives are
non-reentrant mode's, which the graph then calls (as torch.compile does); with none, its
result requires no grad and parameters get none, so that call breaks (a user's mistake torch
warns about), and so do checkpoint's keyword arguments reentrant mode refuses.

Requirements, else Unsupported (the call breaks the graph and runs natively, and frames it
starts are not traced: see frame_hook's skip of checkpoint): fn has no
effects outside itself (they would run once here but twice in eager); fn's result is a
tensor or a tuple/list of tensors and constants; fn reads no tensor computed earlier in the
frame except through its arguments.
"""
import torch
import torch.fx as fx

from guards.tensor import storage_id

from ..exc import Unsupported
from .base import ConstantVariable

CHECKPOINT = torch.utils.checkpoint.checkpoint
_PLAIN_KWARGS = {"use_reentrant", "preserve_rng_state", "determinism_check", "debug", "early_stop"}
# checkpoint's own keywords that are not constants (any other keyword is fn's)
_OWN_KWARGS = {"context_fn"}


def checkpoint_call(tx, args, kwargs):
    if not args:
        raise Unsupported("checkpoint() without a function")
    ckw, fkw = {}, {}
    for k, v in kwargs.items():
        if k in _OWN_KWARGS or (k in _PLAIN_KWARGS and not v.is_constant()):
            raise Unsupported(f"checkpoint(..., {k}=...) is not traced")
        if k in _PLAIN_KWARGS:
            ckw[k] = v.as_constant()
        else:
            fkw[k] = v
    fn, fargs = args[0], list(args[1:])
    if ckw.get("use_reentrant", None) is not False:
        _as_non_reentrant(ckw, fargs, fkw)

    main = tx.output
    scratch = main.scratch()
    lifted = {}  # id(main TensorVariable) -> its placeholder in the subgraph
    inputs = []  # main TensorVariables, in placeholder order

    def lift(var):
        if isinstance(var, tensor.TensorVariable):
            hit = lifted.get(id(var))
            if hit is None:
                node = scratch.graph.placeholder(f"arg{len(inputs)}")
                node.meta["example_value"] = var.example
                hit = lifted[id(var)] = tensor.TensorVariable(node, var.example)
                inputs.append(var)
            return hit
        return _map_structure(var, lift)

    sub_fn, sub_args = lift(fn), [lift(a) for a in fargs]
    sub_kwargs = {k: lift(v) for k, v in fkw.items()}
    if inputs:  # tensors the subgraph reads by source become placeholders after these
        scratch._last_placeholder = lifted[id(inputs[-1])].node
    result = _trace_into(tx, scratch, sub_fn, sub_args, sub_kwargs)
    if not isinstance(result, (tensor.TensorVariable, containers.TupleVariable)) and \
            not (hasattr(result, "items") and result.python_type() in (tuple, list)):
        raise Unsupported(f"checkpointed function returns {result}, not tensors")
    _refuse_input_writes(scratch)
    out_tensors = []
    spec = _flatten(result, out_tensors)
    scratch.graph.output(tuple(t.node for t in out_tensors))
    for node in scratch.graph.nodes:  # every value the subgraph uses must be its own
        for a in node.all_input_nodes:
            if a.graph is not scratch.graph:
                raise Unsupported("the checkpointed function reads a tensor computed outside it")
    # tensors the subgraph loaded from the frame by source: the frame's graph passes them in
    for source, _node, real in scratch.inputs:
        inputs.append(builder.wrap(tx, real, source))
    sub = fx.GraphModule(scratch.root, scratch.graph, class_name="CheckpointBody")
    attr = main.attr_name(sub, "checkpoint_body")
    body = main.graph.get_attr(attr)
    node = main.graph.create_node("call_function", CHECKPOINT, (body, *[v.node for v in inputs]), ckw)
    example = tuple(t.example for t in out_tensors)
    node.meta["example_value"] = example
    outs = torch_calls.wrap_result(tx, node, example)
    return _unflatten(spec, iter(outs.items))


def _refuse_input_writes(scratch):
    """Unsupported where fn writes a tensor it did not make in place (a BatchNorm's running
    statistics in training): eager's recomputation in backward writes it a second time, which
    the subgraph's recomputation does not match (under the eager backend autograd then raised
    an in-place version error in backward; under AOTAutograd the write was made once)."""
    inputs = {storage_id(n.meta["example_value"]) for n in scratch.graph.nodes
              if n.op == "placeholder" and isinstance(n.meta.get("example_value"), torch.Tensor)}
    for node in scratch.graph.nodes:
        if inputs & node.meta.get("writes", frozenset()):
            raise Unsupported("the checkpointed function writes a tensor it did not make in place (a "
                              "BatchNorm's running statistics): its recomputation writes it again")


def _as_non_reentrant(ckw, fargs, fkw):
    """Reentrant mode's call made the non-reentrant call that gives its gradients (the module
    docstring says when that is), or Unsupported."""
    if ckw.get("use_reentrant") is not True:  # (not given: torch warns, then reentrant)
        raise Unsupported(f"checkpoint(..., use_reentrant={ckw.get('use_reentrant')!r})")
    if fkw or ckw.get("debug") or ckw.get("determinism_check", "default") != "default":
        raise Unsupported("reentrant checkpoint with keyword arguments (checkpoint raises ValueError)")
    if not torch.is_grad_enabled() or not any(
            isinstance(a, tensor.TensorVariable) and a.example.requires_grad for a in fargs):
        raise Unsupported("reentrant checkpoint with no tensor argument requiring grad (its result "
                          "requires none: torch warns that gradients will be None)")
    ckw["use_reentrant"] = False


def _trace_into(tx, scratch, fn, args, kwargs):
    """Call fn symbolically with the trace's graph swapped for `scratch`."""
    ctx = tx.ctx
    with ctx.scratch_trace(scratch):
        grad = torch.is_grad_enabled()
        try:
            result = fn.call(tx, args, kwargs)
            if not ctx.side_effects.is_empty():
                raise Unsupported("the checkpointed function changes state outside itself")
            if torch.is_grad_enabled() != grad:
                raise Unsupported("the checkpointed function leaves grad mode changed")
            return result
        finally:
            torch._C._set_grad_enabled(grad)


def _map_structure(var, fn):
    """var with every Variable inside a call's arguments mapped by fn (tensors lifted)."""
    if isinstance(var, functions.PartialVariable):
        return functions.PartialVariable(fn(var.func), [fn(a) for a in var.args],
                               {k: fn(v) for k, v in var.kwargs.items()}, var.source)
    if isinstance(var, functions.BoundMethodVariable):
        return functions.BoundMethodVariable(fn(var.func), fn(var.obj), var.source)
    if type(var) is containers.TupleVariable:
        return containers.TupleVariable([fn(v) for v in var.items])
    if type(var) is containers.ListVariable and var.source is None:
        return containers.ListVariable([fn(v) for v in var.items])
    if type(var) is containers.DictVariable and var.source is None:
        return containers.DictVariable({k: fn(v) for k, v in var.items.items()}, user_cls=var.user_cls)
    return var


def _flatten(var, out):
    if isinstance(var, tensor.TensorVariable):
        out.append(var)
        return ("tensor",)
    if var.is_constant():
        return ("const", var)
    if isinstance(var, containers.BaseSequence) and var.python_type() in (tuple, list):
        return (var.python_type(), [_flatten(v, out) for v in var.items])
    raise Unsupported(f"checkpointed function returns {var}")


def _unflatten(spec, outs):
    kind = spec[0]
    if kind == "tensor":
        return next(outs)
    if kind == "const":
        return spec[1]
    items = [_unflatten(s, outs) for s in spec[1]]
    return containers.ListVariable(items) if kind is list else containers.TupleVariable(items)


__all__ = ["checkpoint_call", "CHECKPOINT", "ConstantVariable"]


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builder, containers, tensor, functions, torch_calls  # noqa: E402
