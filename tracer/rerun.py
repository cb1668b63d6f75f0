"""A graph that raises makes its frame run again as Python, from its start.

Why: the rewritten code calls the graph first and replays the side effects the traced code
made (attribute and container writes, globals, prints) after it. When an op in the graph
raises at run time (a kernel check that fake tensors do not make: `relu` of a bool tensor,
an index out of range), the writes the program made *before* that op in eager are never
made, and an `except` in the caller sees different state: a wrong result. If nothing
outside the graph has changed when it raises, the frame's locals are still its arguments.
So the rewritten code checks the graph's result for RERUN (what the graph call returns
instead of raising, `untraced(fn, graph_raised)` in the C hook: no cost when the graph
returns) and then calls the code as plain Python with the same arguments (the same closure
cells; the frame hook skips that copy), which raises where eager raises, with every earlier
write made.

What "nothing outside has changed" takes (`plan`): writes into tensors the graph made are
harmless; writes into its inputs (read off the aten schemas while tracing, node.meta
["writes"]) go to working copies copied back after the graph returns (`_functionalize`);
a grad-mode switch is undone on the error (graph_raised). Random numbers, autocast switches
and leaf modules writing their buffers keep the graph from rerunning (a known gap: the
README says so).
"""
from __future__ import annotations

import sys
import types

import bytecode as bc
import torch

from bytecode_utils import arg_names, flatten_signature, versions
from bytecode_utils.codegen import GENERATOR_FLAGS

from . import records
from .node_meta import set_value
from .output_graph import UNKNOWN_STORAGE, storage_id


class _Rerun:
    def __repr__(self):
        return "RERUN"


RERUN = _Rerun()

_RANDOM = frozenset({
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli",
    "multinomial", "normal", "poisson", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "feature_alpha_dropout", "native_dropout", "rrelu", "gumbel_softmax",
    "fractional_max_pool2d", "fractional_max_pool3d", "standard_gamma", "binomial",
    "scaled_dot_product_attention",  # (its dropout_p)
})
# A call_function node calls torch, operator, math or a builtin; anything else (a function
# made allow_in_graph) may do what it likes, and is not run twice.
_KNOWN_MODULES = ("torch", "operator", "_operator", "math", "builtins")


def graph_raised(name, grad_mode=None):
    """The on_error of a graph's `untraced` wrapper: record it, put the grad mode back as the
    graph found it (`grad_mode`, when the graph switches it: one that raises inside `no_grad`
    leaves it off), and tell the frame to rerun."""
    set_grad_enabled = torch._C._set_grad_enabled

    def on_error(exc):
        if grad_mode is not None:
            set_grad_enabled(grad_mode)
        records.graph_rerun(name, exc)
        return RERUN
    return on_error


def plan(code, gm, replays_writes, grad_at_start):
    """How this frame's graph is made safe to rerun: None when it cannot be (the graph then
    raises as before), else a Plan. `replays_writes`: the rewritten code replays Python
    writes after the graph (only then is an in-place op on an input worth a copy);
    `grad_at_start`: the grad mode the graph runs in (its entry's guards hold it)."""
    if code.co_flags & GENERATOR_FLAGS:
        return None
    inputs = {}  # storage_id -> the placeholder / get_attr nodes over that storage
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr") and isinstance(node.meta.get("example_value"), torch.Tensor):
            sid = storage_id(node.meta["example_value"])
            if sid != UNKNOWN_STORAGE:
                inputs.setdefault(sid, []).append(node)
    written, grad_mode = set(), None
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        effect = _effect(node, modules)
        if effect == "grad":
            grad_mode = grad_at_start
        elif effect == "unknown":
            return None
        for sid in node.meta.get("writes", ()):
            if sid == UNKNOWN_STORAGE:
                return None  # a write we cannot place
            if sid in inputs:
                written.add(sid)
    if not written:
        return Plan(gm, [], 0, grad_mode)
    if not replays_writes:
        return None
    return _functionalize(gm, [inputs[sid] for sid in written], grad_mode)


def _effect(node, modules):
    """What running `node` twice could change outside the graph: None (nothing, or only the
    storages its "writes" meta names), "grad" (the grad mode: the plan restores it) or
    "unknown" (random numbers, autocast state, a module's buffers, code we do not know)."""
    if node.op == "call_module":
        mod = modules.get(node.target)  # its buffers are not graph inputs: a write to one is unknown
        if mod is None or (mod.training and isinstance(mod, torch.nn.modules.dropout._DropoutNd)) or \
                (node.meta.get("writes", True) and any(True for _ in mod.buffers())):
            return "unknown"
        return None
    if node.op == "call_function" and \
            (getattr(node.target, "__module__", None) or "").split(".")[0] not in _KNOWN_MODULES:
        return "unknown"
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if not isinstance(name, str) or name in _RANDOM or name in ("_enter_autocast", "_exit_autocast"):
        return "unknown"
    if name == "_set_grad_enabled":
        return "grad"
    if "writes" not in node.meta and ((name.endswith("_") and not name.endswith("__")) or
                                       "out" in node.kwargs or name in ("__setitem__", "setitem")):
        return "unknown"  # a node made without the aten spy (output_graph.create_node)
    return None


# Ops that reach a tensor's storage behind its shape: a working copy would answer differently.
_STORAGE_OPS = ("as_strided", "set_", "resize", "storage", "data_ptr", "_base")


def _functionalize(gm, groups, grad_mode):
    """The graph writes into its inputs (`x.add_(1)`, a buffer's running stats): each such
    input gets a working copy at the graph's start, every use reads the copy, the graph
    returns it, and Plan.wrap copies it back into the input once the graph has returned. So
    nothing outside changes until the graph has run to its end, and a graph that raises can
    rerun. None where a copy would not behave as the input: it needs grad (the copy-back
    would change its autograd history), another input shares its storage, an output is a
    view of it, or the graph reads storage facts."""
    graph = gm.graph
    out_node = next(n for n in graph.nodes if n.op == "output")
    for node in graph.nodes:
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        if isinstance(name, str) and any(s in name for s in _STORAGE_OPS):
            return None
    for nodes in groups:
        example = nodes[0].meta["example_value"]
        if len({id(n.meta["example_value"]) for n in nodes}) != 1 or example.requires_grad or \
                example.layout != torch.strided or example.is_sparse or example.is_nested:
            return None
        sid = storage_id(example)
        for value in torch.utils._pytree.tree_leaves(out_node.args):
            if isinstance(value, torch.fx.Node) and value not in nodes and \
                    isinstance(value.meta.get("example_value"), torch.Tensor) and \
                    storage_id(value.meta["example_value"]) == sid:
                return None
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    first_op = next((n for n in graph.nodes if n.op not in ("placeholder",)), out_node)
    outputs = list(out_node.args[0])
    n_out = len(outputs)
    copies = []
    for nodes in groups:
        example = nodes[0].meta["example_value"]
        with graph.inserting_before(first_op):
            if nodes[0].op == "placeholder":
                base, target = nodes[0], placeholders.index(nodes[0])
            else:
                base = graph.get_attr(nodes[0].target)
                target = _attr(gm, nodes[0].target)
                set_value(base, example)
            work = graph.call_method("clone", (base,))
        with example.fake_mode:
            set_value(work, example.clone())
        for node in nodes:
            node.replace_all_uses_with(work, delete_user_cb=lambda user: user is not work and user.op != "output")
        copies.append((target, len(outputs)))
        outputs.append(work)
    out_node.args = (tuple(outputs),)
    for node in list(graph.nodes):
        if node.op == "get_attr" and not node.users:
            graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return Plan(gm, copies, n_out, grad_mode)


def _attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


class Plan:
    """A graph that may rerun: `gm` (functionalized where it wrote its inputs), how to wrap
    its compiled form (copy the working copies back once it has returned), and the grad
    mode to put back when it raises (None: it does not switch it)."""

    def __init__(self, gm, copies, n_out, grad_mode):
        self.gm, self.copies, self.n_out, self.grad_mode = gm, copies, n_out, grad_mode

    def wrap(self, compiled):
        if not self.copies:
            return compiled
        copies, n_out, is_grad_enabled = self.copies, self.n_out, torch.is_grad_enabled

        def run_functional_graph(*args):
            outs = compiled(*args)
            for target, k in copies:
                work = outs[k]
                dst = args[target] if type(target) is int else target
                if work.requires_grad and not is_grad_enabled():
                    with torch.enable_grad():
                        dst.copy_(work)
                else:
                    dst.copy_(work)
            return outs[:n_out]
        from .frame_hook import skip_code
        skip_code(run_functional_graph.__code__)
        return run_functional_graph


def _plain(code):
    """The code with a flat signature (the slots the rewritten code has), skipped by the frame
    hook. A new code object: the rewritten code holds it, never `code` itself, which keys
    the cache that holds the rewritten code (a reference back would keep both alive)."""
    plain = flatten_signature(code)
    try:
        from .frame_hook import skip_code
        skip_code(plain)
    except ImportError:
        pass
    return plain


class _Plain:
    """Holds the plain copy in the rewritten code's constants. Not the code object itself: it
    compares equal to the code it copies (a signature without *args is unchanged), and
    assembly merges equal constants, so a resume function made from that code would be made
    from the skipped copy and run untraced."""
    __slots__ = ("code",)

    def __init__(self, code):
        self.code = code


def run_as_python(plain, closure, *args):
    """The frame again, as plain Python, with its arguments (in its flat slots)."""
    globals_ = sys._getframe(1).f_globals
    return types.FunctionType(plain.code, globals_, plain.code.co_name, None, closure)(*args)


def check_instrs(code, graph_out):
    """Instructions to put right after the graph call's store into `graph_out`."""
    cont = bc.Label()
    out = [bc.Instr("LOAD_FAST", graph_out), bc.Instr("LOAD_CONST", RERUN), bc.Instr("IS_OP", 0)]
    out += versions.cond_jump("POP_JUMP_IF_FALSE", cont)
    out += versions.load_const_callable(run_as_python)
    out.append(bc.Instr("LOAD_CONST", _Plain(_plain(code))))
    for name in code.co_freevars:
        out += versions.load_closure(name, free=True)
    out.append(bc.Instr("BUILD_TUPLE", len(code.co_freevars)) if code.co_freevars else bc.Instr("LOAD_CONST", None))
    names = arg_names(code)
    for name in names:
        out.append(bc.Instr("LOAD_DEREF", bc.CellVar(name)) if name in code.co_cellvars else bc.Instr("LOAD_FAST", name))
    out += versions.call(2 + len(names))
    out += versions.return_value()
    out.append(cont)
    return out
