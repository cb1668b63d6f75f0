"""Callable objects of torch's classes: a graph op, or Python code to trace as a user object's.

torch's functions are graph ops: called on fake tensors, one node each (torch_calls.py). An
object whose class lives in torch and whose `__call__` is Python code is not an op: a pruning
method (`L1Unstructured`, `PruningContainer`), the old `weight_norm` and `spectral_norm`
forward pre-hooks, a distributions `Transform`. Such an object reads and writes its module
(`setattr(module, "weight", ...)`), which no op takes as an argument: taken for a torch function
(its `__module__`, inherited from the class, is torch's) it was a graph break, "NNModule passed
to a torch op", and inside `nn.Sequential`'s loop the whole frame ran as Python; called on
fakes, whatever state it kept (a Transform's cached result) would have been fakes. Its
`__call__` is inlined as a user object's is, as the same hook written in user code is.

Left as ops: the dispatcher's callables, whose `__call__` is Python but whose meaning is a
registered kernel (an OpOverload or its packet, a higher-order operator, a custom op). The
calls the value model answers itself (torch_vars.py's tables, folds.py) are functions, never
such objects (tests/test_module_hooks.py checks it).

Torch internals read here: torch._ops.OperatorBase, torch._ops.OpOverloadPacket and
torch._library.custom_ops.CustomOpDef; checked on torch 2.13.0 and 2.15.0 (docs/torch.md lists
them all; tests/test_torch_internals.py resolves each).
"""
import types

import torch
import torch._library.custom_ops

# The dispatcher's callables (OperatorBase: OpOverload and HigherOrderOperator).
_OP_TYPES = (torch._ops.OperatorBase, torch._ops.OpOverloadPacket, torch._library.custom_ops.CustomOpDef)


def python_call(cls):
    """The `__call__` that calling an instance of `cls` runs, if it is Python code (a function
    found in the class's MRO, as CPython's type slot finds it); else None."""
    for klass in cls.__mro__:
        if "__call__" in klass.__dict__:
            call = klass.__dict__["__call__"]
            return call if isinstance(call, types.FunctionType) else None
    return None


def is_traced_object(value, t):
    """`value` (of type `t`, not a class) is an object whose call runs Python code of its class
    rather than an op of the dispatcher: traced as a user object (inlined), not put in the
    graph as a torch function. A class bound from C++ (pybind11: a ScriptFunction) is not one,
    even where a Python `__call__` is patched onto it (torch.jit's profiling wraps
    ScriptFunction.__call__ in `prof_func_call` once a profiler ran in the process)."""
    return not isinstance(value, type) and not isinstance(value, _OP_TYPES) and not _bound_from_cpp(t) \
        and python_call(t) is not None


def _bound_from_cpp(cls):
    return any(k.__module__ == "pybind11_builtins" for k in cls.__mro__)
