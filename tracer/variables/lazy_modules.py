"""Lazy modules (`nn.LazyLinear`, `LazyConv2d`, ...) at their first call inside a trace.

A lazy module's first call runs a forward pre-hook (`_infer_parameters`) that materialises its
parameters from the input's sizes, removes itself and turns the module into its plain class
(`LazyLinear` becomes `Linear`). Tracing that hook would put the materialisation in the graph;
torch.compile instead runs it at trace time. So do we: the hook runs for real, on stand-in
tensors of the arguments' sizes, dtypes and devices (zeros: the hook reads only their
metadata), and the frame is traced again (TraceAgain), so that guards and graph inputs
see the initialised module, as every later call does.

What differs from eager: the parameters are initialised when the frame is traced, before the
frame's earlier statements run, so random draws made before the call in the same frame are
taken after the initialisation's (torch.compile does the same). docs/semantics.md says so.
"""
import torch
from torch.nn.modules.lazy import LazyModuleMixin

from ..exc import TraceAgain, Unsupported
from .tensor import TensorVariable


def needs_initialising(module):
    """Whether calling `module` would run a lazy module's initialising pre-hook."""
    return isinstance(module, LazyModuleMixin) and hasattr(module, "_initialize_hook") \
        and module.has_uninitialized_params()


def initialise(tx, module, args, kwargs):
    """Run the module's initialising hook on stand-ins of `args`/`kwargs`, then trace again."""
    real_args = [_stand_in(a) for a in args]
    real_kwargs = {k: _stand_in(v) for k, v in kwargs.items()}
    hook = module._initialize_hook
    try:
        module._infer_parameters(module, tuple(real_args), real_kwargs)
    except Exception as e:
        # eager raises it from the pre-hook: the call runs as Python and raises it there
        raise Unsupported(f"{type(module).__name__}'s lazy initialisation raised "
                          f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    if hasattr(module, "_initialize_hook") and module._initialize_hook is hook:
        raise Unsupported(f"{type(module).__name__}'s lazy initialisation left it uninitialised")
    raise TraceAgain(f"{type(module).__name__} initialised its parameters")


def _stand_in(var):
    """A real value for one argument of the hook: zeros of a tensor's metadata, a constant."""
    if isinstance(var, TensorVariable):
        ex = var.example
        size = [s if isinstance(s, int) else _hint(s) for s in ex.shape]
        return torch.zeros(size, dtype=ex.dtype, device=ex.device)
    if var.is_constant():
        return var.as_constant()
    raise Unsupported(f"a lazy module's first call with an argument of type "
                      f"{var.python_type().__name__} (its initialisation needs a real value)")



def _hint(size):
    """The value a symbolic size has in this call (read without guarding it)."""
    if not size.node.has_hint():
        raise Unsupported("a lazy module's first call with a size known only at run time")
    return int(size.node.hint)
