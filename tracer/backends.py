"""Backends: exactly torch.compile's protocol, `backend(gm, example_inputs) -> callable`.

Named backends delegate to torch: "eager" runs the GraphModule's generated forward,
"aot_eager" runs AOTAutograd with no compiler (checks the graph functionalises and
differentiates), "inductor" is torch's own compiler. A callable is used as is.
"""
import torch

from .exc import BackendError


def eager(gm, example_inputs):
    return gm.forward


def aot_eager(gm, example_inputs):
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    def nop(g, _inputs):
        return make_boxed_func(g.forward)

    return aot_module_simplified(gm, example_inputs, fw_compiler=nop, bw_compiler=nop)


def inductor(gm, example_inputs):
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, example_inputs)


NAMED = {"eager": eager, "aot_eager": aot_eager, "inductor": inductor}


def resolve(backend):
    if callable(backend):
        return backend
    try:
        return NAMED[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; use a callable or one of {sorted(NAMED)}")


def compile_graph(backend_fn, gm, example_inputs):
    try:
        compiled = backend_fn(gm, example_inputs)
    except Exception as e:
        raise BackendError(f"backend {getattr(backend_fn, '__name__', backend_fn)} raised "
                           f"{type(e).__name__}: {e}") from e
    if not callable(compiled):
        raise BackendError(f"backend {getattr(backend_fn, '__name__', backend_fn)} returned "
                           f"{type(compiled).__name__}, not a callable")
    return compiled


__all__ = ["resolve", "compile_graph", "NAMED", "torch"]
