"""A leaf module's call: one `call_module` node for a submodule the trace does not inline (a
StockLeaf, or every stock module with config.inline_stock_modules off).

Why apart from nn_module.py: a leaf is called, not traced, so what the trace relies on is
the module's whole state, guarded here: a stateful stock leaf's parameters and buffers become
graph inputs (LeafCall, its template holds no state), any other is called as the object itself
(guarded by identity), or, stateless, as a private copy whose state its guards require.
"""
import torch
from torch.func import functional_call

from guards import ConstMatch, DictKeysMatch, IdMatch, Predicate
from guards.sources import AttrSource, ItemSource

from ..graph import leaf_call, node_meta
from guards.tensor import storage_id
from .base import is_constant_value
from .nn_module import _HOOK_DICTS, module_guard, module_tensor, stateless
from . import torch_calls, torch_vars


def call_module(tx, mod_var, args, kwargs):
    module = mod_var.module
    if mod_var.source is not None and _state_as_inputs(module):
        return _call_leaf_with_state(tx, mod_var, args, kwargs)
    to_call = _module_to_call(tx, mod_var)
    if to_call is module and mod_var.source is not None:
        # the graph module holds and calls this very object (its own parameters and buffers):
        # the one place a module is still guarded by identity
        tx.guard(IdMatch(mod_var.source, module))
    target = tx.output.attr_name(to_call, mod_var.path)
    node_args, fake_args = torch_calls.to_fx(args)
    node_kwargs, fake_kwargs = torch_calls.to_fx(kwargs)
    state = {}
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        if mod_var.source is not None:
            _guard_module_state(tx, mod_var, name, t)
        state[name] = tx.output.fake(t)
    _guard_leaf_attrs(tx, mod_var)
    fn = lambda: functional_call(module, state, tuple(fake_args), fake_kwargs)  # noqa: E731
    node, example = tx.output.create_node("call_module", target, node_args, node_kwargs, fn)
    node.meta["module_state"] = {storage_id(t): name for name, t in state.items()}  # (rerun.py)
    node_meta.annotate(tx, node, example, None, leaf_module=mod_var)
    return torch_calls.wrap_result(tx, node, example, mutating=True)


def _state_as_inputs(module):
    """Whether a leaf with parameters or buffers is called through a LeafCall (its state as
    graph inputs, no identity guard): a module of torch.nn.modules whose submodules are too,
    whose plain attributes are constants (guarded by value: the template shares them) and
    whose tensors are plain tensors or Parameters. Others (a torch.nn module outside
    torch.nn.modules, a leaf holding an object attribute) are called as the object itself,
    guarded by identity. (A parametrized module is no leaf: nn_module.is_leaf_module.)"""
    if stateless(module):
        return False
    for m in module.modules():
        if not type(m).__module__.startswith("torch.nn.modules."):
            return False
        if not all(is_constant_value(v) for k, v in m.__dict__.items() if not k.startswith("_")):
            return False
        for t in (*m._parameters.values(), *m._buffers.values()):
            if t is not None and type(t) not in (torch.Tensor, torch.nn.Parameter):
                return False
    return True


def _call_leaf_with_state(tx, mod_var, args, kwargs):
    """A stateful leaf as `call_module(LeafCall, (state, *args), kwargs)`: its parameters and
    buffers are graph inputs read through their sources (module_tensor), the graph module
    holds a state-free template (graph/leaf_call.py). Guarded: the names in each (sub)module's
    `_parameters` / `_buffers` / `_modules`, the None slots, each tensor's metadata (and
    aliasing, as any module tensor), the submodules' types, attributes and empty hooks."""
    module = mod_var.module
    calls = tx.output.__dict__.setdefault("_leaf_calls", {})
    if id(module) not in calls:
        calls[id(module)] = (module, leaf_call.LeafCall(leaf_call.template_of(module)))
    wrapper = calls[id(module)][1]
    state = {}

    def walk(m, src, prefix, path):
        for dict_name in ("_parameters", "_buffers", "_modules"):
            d = getattr(m, dict_name)
            tx.guard(DictKeysMatch(AttrSource(src, dict_name), tuple(d.keys()), type(d)))
        for dict_name in ("_parameters", "_buffers"):
            for k, t in getattr(m, dict_name).items():
                entry = ItemSource(AttrSource(src, dict_name), k)
                if t is None:
                    tx.guard(ConstMatch(entry, None))
                else:
                    state[prefix + k] = module_tensor(tx, t, entry, f"{path}.{k}")
        for k, sub in m._modules.items():
            entry = ItemSource(AttrSource(src, "_modules"), k)
            if sub is None:
                tx.guard(ConstMatch(entry, None))
                continue
            # (the template has no hooks: the real submodule must have none either)
            tx.guard(Predicate.falsy_attrs(entry, _HOOK_DICTS, "has no forward/backward (pre-)hooks"))
            walk(sub, entry, f"{prefix}{k}.", f"{path}.{k}")

    walk(module, mod_var.source, "", mod_var.path)
    _guard_leaf_attrs(tx, mod_var)  # (the submodules' types and every plain attribute)
    target = tx.output.attr_name(wrapper, mod_var.path)
    node_args, fake_args = torch_calls.to_fx([state, *args])
    node_kwargs, fake_kwargs = torch_calls.to_fx(kwargs)
    fn = lambda: wrapper(*fake_args, **fake_kwargs)  # noqa: E731
    node, example = tx.output.create_node("call_module", target, node_args, node_kwargs, fn)
    node.meta["module_state"] = {}  # (rerun.py: its state is graph inputs, its writes go to them)
    node_meta.annotate(tx, node, example, None, leaf_module=mod_var)
    return torch_calls.wrap_result(tx, node, example, mutating=True)


def _module_to_call(tx, mod_var):
    """The module object the graph's call_module runs. One reached from the frame without
    parameters or buffers is guarded by type and attributes, not identity (nn_module.
    module_guard): another object passing those guards may be the one passed next time,
    and the traced object may change meanwhile (`a.eval()`, a hook added). The graph then
    calls a private copy made now, whose state is exactly what the guards require."""
    module = mod_var.module
    if mod_var.source is None or not stateless(module) or module.__dict__.get("_modules"):
        return module
    copies = tx.output.__dict__.setdefault("_stateless_copies", {})
    if id(module) not in copies:
        copies[id(module)] = (module, leaf_call.template_of(module))
    return copies[id(module)][1]


def _guard_module_state(tx, mod_var, dotted, tensor):
    src = mod_var.source
    parts = dotted.split(".")
    for sub in parts[:-1]:
        src = ItemSource(AttrSource(src, "_modules"), sub)
    owner = "_parameters" if isinstance(tensor, torch.nn.Parameter) else "_buffers"
    src = ItemSource(AttrSource(src, owner), parts[-1])
    tx.guard(IdMatch(src, tensor))
    tx.guard(torch_vars.tensor_match(tx.ctx, src, tensor))


def _guard_leaf_attrs(tx, mod_var):
    """A leaf module's forward reads its plain attributes (training, eps, p, ...): guard them."""
    if mod_var.source is None:
        return
    for mod_path, m in mod_var.module.named_modules():
        src = mod_var.source
        for sub in (mod_path.split(".") if mod_path else []):
            src = ItemSource(AttrSource(src, "_modules"), sub)
        if mod_path:
            tx.guard(module_guard(src, m))
        attrs = {k: v for k, v in m.__dict__.items() if not k.startswith("_") and is_constant_value(v)}
        if attrs:  # one guard per module for all its plain attributes (cheaper per call)
            desc = ", ".join(f"{k}={v!r}" for k, v in attrs.items())
            tx.guard(Predicate.attrs_are(src, attrs, f"attributes {desc}"))
