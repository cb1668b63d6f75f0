"""A graph's stand-in for a stock torch.nn leaf module with parameters or buffers.

A leaf kept whole (one `call_module` node: config.inline_stock_modules off, or a StockLeaf
such as the RNN family) reads its parameters and buffers as graph inputs, like any module
tensor (docs/design.md, decision 7): the node calls a LeafCall, `leaf(state, *args,
**kwargs)`, where `state` maps the leaf's dotted tensor names to the placeholders. The
LeafCall holds a state-free template of the module (same class and plain attributes, every
parameter and buffer slot None, empty hook dicts); each call binds the state into a fresh
shallow copy of it and runs its forward. So the graph holds no user module and no tensor,
one entry serves every instance of the leaf's structure, an in-place write of the leaf's
forward (BatchNorm's running stats in training) reaches the real module's tensors, and
concurrent calls of one graph share nothing mutable. Backends that trace the graph
(aot_eager, inductor) trace through forward as for any module.
"""
import torch

from .backends import call_forward


class LeafCall(torch.nn.Module):
    def __init__(self, template):
        super().__init__()
        # not a registered submodule: `graph.train()` / `.to()` must not change the template
        # (its `training` is the traced module's, guarded)
        self.__dict__["leaf"] = template

    def forward(self, state, *args, **kwargs):
        return call_forward(bind(self.leaf, state), *args, **kwargs)

    def extra_repr(self):
        return f"{type(self.leaf).__name__}, state as inputs"


def template_of(module):
    """A state-free copy of `module` and its submodules: attribute values shared, parameter
    and buffer slots None, hook dicts empty. No user code runs (no `__deepcopy__` or
    `__reduce__`), nothing the module refers to is copied (a lock, the object a state-dict hook
    is bound to), and hooks registered on `module` later do not reach the copy. Also the
    private copy a stateless leaf's call_module runs (variables/nn_module._module_to_call)."""
    d = dict(module.__dict__)
    for k, v in d.items():
        if k.endswith(("_hooks", "_hooks_with_kwargs", "_hooks_always_called")) and isinstance(v, dict):
            d[k] = type(v)()
        elif isinstance(v, (dict, set)):
            d[k] = type(v)(v)
    d["_parameters"] = dict.fromkeys(module._parameters)
    d["_buffers"] = dict.fromkeys(module._buffers)
    d["_modules"] = {k: None if m is None else template_of(m) for k, m in module._modules.items()}
    if "_flat_weights" in d:  # the RNN family keeps its weights in a list too
        d["_flat_weights"] = [None] * len(d["_flat_weights"])
    new = object.__new__(type(module))
    object.__getattribute__(new, "__dict__").update(d)
    return new


def bind(template, state, prefix=""):
    """A shallow copy of `template` whose parameter and buffer slots hold `state`'s tensors."""
    d = dict(template.__dict__)
    d["_parameters"] = {k: state.get(prefix + k) for k in d["_parameters"]}
    d["_buffers"] = {k: state.get(prefix + k) for k in d["_buffers"]}
    if d["_modules"]:
        d["_modules"] = {k: None if m is None else bind(m, state, f"{prefix}{k}.") for k, m in d["_modules"].items()}
    if "_flat_weights_names" in d:
        p = d["_parameters"]
        d["_flat_weights"] = [p.get(n) for n in d["_flat_weights_names"]]
    new = object.__new__(type(template))
    object.__getattribute__(new, "__dict__").update(d)
    return new
