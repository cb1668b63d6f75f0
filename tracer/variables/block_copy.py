"""What a replayed call copies from its record (variables/blocks.py): the result's template
and the sibling's Variables built from it, fresh fakes for the tensors it returns, and the
nodes' metadata (nn_module_stack, stack_trace) named for where the replay is."""
import itertools
import operator

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor

from ..graph import node_meta
from ..graph.output_graph import ByObject
from ..graph.shapes import SYM_TYPES
from ..graph.static_fakes import empty_fake
from . import containers
from .base import ConstantVariable
from .tensor import TensorVariable

CONSTANTS = (type(None), bool, int, float, str)  # the constants a key or template holds by value


class Refused(Exception):
    """The first block did something a replay cannot promise (module docstring)."""


def facts(ex):
    """A fake tensor's metadata, as a key (None: symbolic sizes, or no fake)."""
    if not isinstance(ex, FakeTensor) or any(isinstance(s, SYM_TYPES) for s in (*ex.shape, *ex.stride())):
        return None
    return (tuple(ex.shape), ex.stride(), ex.storage_offset(), ex.dtype, ex.device, ex.requires_grad,
            ex.grad_fn is None, ex._base is None, ex.is_inference(), ex.is_conj(), ex.is_neg())


def under(source, root):
    s = source
    while s is not None:
        if s == root:
            return True
        s = s.base
    return False


def template(result, made, arg_nodes, root, results):
    if isinstance(result, TensorVariable):
        if result.source is not None or result.real is not None:
            raise Refused("a result found through a source")
        if result.node in made:
            return ("tensor", view_chain(result.node, made))
        if result.node in arg_nodes:
            return ("arg", result.node)
        if result.node in results:
            return ("var", result.node)  # what a hole returned (block_holes.py)
        raise Refused("a result made before the call")
    if type(result) is ConstantVariable and type(result.value) in CONSTANTS:
        return ("const", result.value)
    if type(result) is containers.TupleVariable:
        return ("tuple", [template(v, made, arg_nodes, root, results) for v in result.items])
    if result.source is not None and (root is None or not under(result.source, root)):
        # an object of the shared state (a config, a sub-config, a function in a table): the
        # same call finds the same one, which the wrap memo hands out as this Variable
        return ("same", result)
    raise Refused(f"a result of type {type(result).__name__}")


def view_chain(node, made):
    """The nodes whose fakes a sibling's result needs afresh, base first: the result node and,
    while it is a view of another node the call made (a transpose of the attention's output),
    that node. A view of an argument or an input is refused: the sibling's would be a view of
    the first block's."""
    chain = [node]
    while True:
        n = chain[-1]
        if n.target is operator.getitem:
            raise Refused("a result taken from a multi-output op")
        ex = n.meta.get("example_value")
        bases = [u for u in n.all_input_nodes
                 if isinstance(u.meta.get("example_value"), torch.Tensor) and _same_storage(ex, u.meta["example_value"])]
        if not bases:
            return list(reversed(chain))
        if len(bases) > 1 or bases[0] not in made:
            raise Refused("a result that is a view of a value from before the call")
        chain.append(bases[0])


def _same_storage(a, b):
    try:
        return a.untyped_storage()._cdata == b.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - no storage to compare: assume it may alias
        return True


def build(template, env, arg_vars, out, made_vars):
    """The sibling's Variable for a template of the first call's (a result's, or a hole's
    argument's). `made_vars` keeps one Variable per node made in the replay (a tensor handed
    to a hole and returned too is one object, as in an inlined call)."""
    kind = template[0]
    if kind == "const":
        return ConstantVariable(template[1])
    if kind == "same":
        return template[1]
    if kind == "tuple":
        return containers.TupleVariable([build(t, env, arg_vars, out, made_vars) for t in template[1]])
    if kind == "var":
        return made_vars[template[1]]
    if kind == "arg":
        new = env[template[1]]
        for v in arg_vars:  # (flattened: block_holes.flat_args)
            if isinstance(v, TensorVariable) and v.node is new:
                return v
        raise AssertionError("a block's argument passed back was not found among the sibling's")
    known = made_vars.get(template[1][-1])
    if known is not None:
        return known
    for n in template[1]:  # the view chain, base first: fakes of the sibling's own
        new = env[n]
        example = fresh_example(new, out)
        node_meta.set_value(new, example)
    made_vars[template[1][-1]] = var = TensorVariable(new, example)
    return var


def fresh_example(node, out):
    """The result node's fake, computed again from its inputs' fakes: a tensor of its own.
    A plain result (not a view, storage of its own size: what an op returns) is made as an
    empty tensor of the same sizes and strides instead, which is the same fake at a tenth of
    the cost (a layer norm's fake kernel takes over a ms); one with autograd history gets it
    from a multiplication by one (traced code cannot read which function a grad_fn is: a
    graph break), checked to keep the strides."""
    ex = node.meta.get("example_value")
    kind = plain(ex)
    if kind:
        new = empty_fake(out.fake_mode, ex.shape, ex.stride(), ex.dtype, ex.device)
        if kind is not HISTORY:
            return new
        with out.fake_mode, torch.enable_grad():
            new = new.requires_grad_() * 1
        if new.stride() == ex.stride() and new.dtype == ex.dtype:
            return new
    args = fx.map_arg(node.args, lambda n: n.meta["example_value"])
    kwargs = fx.map_arg(node.kwargs, lambda n: n.meta["example_value"])
    target = node.target.fn if isinstance(node.target, ByObject) else node.target
    with out.fake_mode:
        if node.op == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        return target(*args, **kwargs)


HISTORY = "history"  # plain(): a plain result with autograd history (requires grad, not a leaf)


def plain(ex):
    """Whether `ex` is a fake that torch.empty_strided makes again with every fact the trace
    can read of it (the same as static_fakes' test for parameters, for a computed value):
    True, HISTORY (that, and it requires grad with a grad_fn: an op's result in grad mode),
    or False."""
    if type(ex) is not FakeTensor or ex.layout is not torch.strided or ex._base is not None or \
            ex.storage_offset() != 0 or ex.requires_grad != (ex.grad_fn is not None):
        return False
    if ex.is_quantized or ex.is_inference() or ex.is_conj() or ex.is_neg() or getattr(ex, "constant", None) is not None:
        return False
    size = sum((n - 1) * st for n, st in zip(ex.shape, ex.stride())) + 1 if ex.numel() else 0
    if ex.untyped_storage().nbytes() != size * ex.element_size():
        return False
    return HISTORY if ex.requires_grad else True


# ---- sources: under a block, re-targeted to a sibling --------------------------------------------

class StackMap:
    """A copied node's nn_module_stack and stack_trace, named for where the replay is: the
    modules and frames around the first call are replaced by those around this one, and the
    first block's own modules (a root's submodules) by the sibling's."""

    def __init__(self, block, var, tx):
        self.block, self.var = block, var
        self.outer = {str(id(m.module)): (m.path, type(m.module)) for m in tx.ctx.module_calls}
        self.prefix = node_meta.stack_trace(tx)

    def __call__(self, meta):
        block, var = self.block, self.var
        trace = meta.get("stack_trace")
        if trace is not None and trace.startswith(block.prefix):
            meta["stack_trace"] = self.prefix + trace[len(block.prefix):]
        stack = meta.get("nn_module_stack") or {}
        out = dict(self.outer)
        for key, (path, typ) in itertools.islice(stack.items(), block.n_outer, None):
            if var is not None and (path == block.path or path.startswith(block.path + ".")):
                rel = path[len(block.path) + 1:]
                mod = var.module.get_submodule(rel) if rel else var.module
                out[str(id(mod))] = (var.path + ("." + rel if rel else ""), typ)
            else:
                out[key] = (path, typ)
        if out:
            meta["nn_module_stack"] = out
        else:
            meta.pop("nn_module_stack", None)
