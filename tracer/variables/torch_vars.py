"""torch callables, grad-mode context managers, and Python modules such as `torch` itself.

A torch function or Tensor method call becomes one FX node; its example value is computed
by calling the same function on fake tensors, which also tells us whether it returns a
tensor, a structure of tensors, or a metadata constant (folded out of the graph).
"""
import torch

from ..exc import Unsupported, attribute_error
from .base import ConstantVariable, ObjectVariable, Variable

# torch callables with effects outside the graph, or that only make sense eagerly.
_DENY = {"manual_seed", "seed", "initial_seed", "set_default_dtype", "set_default_device",
         "use_deterministic_algorithms", "set_printoptions", "save", "load", "set_rng_state",
         "get_rng_state", "set_num_threads", "set_anomaly_enabled", "compile", "synchronize",
         "set_default_tensor_type", "from_numpy", "set_flush_denormal", "autograd.grad",
         "backward", "grad"}

# torch.compiler.is_compiling() & co.: constant while tracing, as TorchDynamo folds them.
_COMPILING_QUERIES = {"is_compiling": True, "is_dynamo_compiling": True, "is_exporting": False}


_TORCH_DIR = __import__("os").path.dirname(torch.__file__) + __import__("os").sep


def _in_torch(filename):
    return filename.startswith(_TORCH_DIR)


_QUERY_WRAPPERS = tuple(_TORCH_DIR + d for d in ("_dynamo" + __import__("os").sep, "compiler" + __import__("os").sep))


def _asking_frame(tx):
    """The frame whose question an is_compiling() call answers: wrappers of the query
    (torch._dynamo.is_compiling calls torch.compiler.is_compiling) pass their caller's."""
    while tx.parent is not None and tx.code.co_filename.startswith(_QUERY_WRAPPERS):
        tx = tx.parent
    return tx


class TorchFunctionVariable(ObjectVariable):
    """torch.*, torch.nn.functional.*, torch.Tensor.* used as a function, torch.special..."""

    fn = property(lambda self: self.value)

    def __init__(self, fn, source=None):
        super().__init__(fn, source)




    def call(self, tx, args, kwargs):
        fn = self.fn
        name = getattr(fn, "__name__", "")
        if name in _DENY:
            raise Unsupported(f"torch.{name} has effects outside the graph")
        if fn is torch.set_grad_enabled or fn is torch._C._set_grad_enabled:
            if len(args) == 1 and not kwargs:
                mode = args[0].as_constant()
                return GradModeVariable(mode, immediate=tx)
        if fn in (torch.is_grad_enabled,):
            return ConstantVariable(torch.is_grad_enabled())
        if name in _COMPILING_QUERIES and (getattr(fn, "__module__", "") or "").startswith("torch"):
            # As under torch.compile: traced code takes the library's compile-friendly path.
            # Not in torch's own code: there it selects TorchDynamo workarounds whose results
            # differ from eager (nn.TransformerEncoder skips its nested-tensor path, which
            # zeroes padded positions), so torch's frames see eager's answer.
            if _in_torch(_asking_frame(tx).code.co_filename):
                return ConstantVariable(False)
            return ConstantVariable(_COMPILING_QUERIES[name])
        if fn is torch.is_tensor and len(args) == 1:
            from .tensor import TensorVariable
            return ConstantVariable(isinstance(args[0], TensorVariable))
        if fn is torch.Size:
            from .containers import SizeVariable
            return SizeVariable(args[0].iterate(tx) if args else [])
        from .checkpoint import CHECKPOINT, checkpoint_call
        if fn is CHECKPOINT:
            return checkpoint_call(tx, args, kwargs)
        return tx.call_torch("call_function", fn, args, kwargs)

    def getattr(self, tx, name):
        if name == "__name__":
            return ConstantVariable(getattr(self.fn, "__name__", ""))
        raise Unsupported(f"attribute {name!r} of torch callable")

    def reconstruct(self, cg):
        cg.load_const(self.fn)

    def __repr__(self):
        return f"TorchFunction({getattr(self.fn, '__name__', self.fn)})"


class TensorMethodVariable(Variable):
    """`x.method` before it is called."""

    def __init__(self, tensor, name):
        super().__init__(None)
        self.tensor, self.name = tensor, name

    def call(self, tx, args, kwargs):
        return self.tensor.call_method(tx, self.name, args, kwargs)

    def reconstruct(self, cg):
        cg.reconstruct(self.tensor)
        cg.load_attr(self.name)


class GradModeVariable(Variable):
    """torch.no_grad() / enable_grad() / set_grad_enabled(b) as a context manager.

    Entering records `torch._C._set_grad_enabled(mode)` in the graph and switches the real
    mode while tracing (restored by convert_frame), so fake tensors see the same mode the
    graph will run under. `immediate` is set for the function form set_grad_enabled(b),
    which takes effect at the call.
    """

    def __init__(self, mode, immediate=None):
        super().__init__(None)
        self.mode = bool(mode)
        self.prev = None
        if immediate is not None:
            self.prev = torch.is_grad_enabled()
            _set_grad(immediate, self.mode)

    def python_type(self):
        return torch.autograd.grad_mode.set_grad_enabled

    def enter(self, tx):
        if self.prev is None:
            self.prev = torch.is_grad_enabled()
            _set_grad(tx, self.mode)
        return ConstantVariable(None)

    def exit(self, tx):
        _set_grad(tx, self.prev)
        return ConstantVariable(None)

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        raise Unsupported(f"grad-mode object method {name}")


def _set_grad(tx, mode):
    if torch.is_grad_enabled() != mode:
        tx.output.graph.create_node("call_function", torch._C._set_grad_enabled, (mode,), {})
        torch._C._set_grad_enabled(mode)


class GradModeClassVariable(ObjectVariable):
    """torch.no_grad / torch.enable_grad / torch.set_grad_enabled (the classes)."""

    cls = property(lambda self: self.value)

    def __init__(self, cls, source=None):
        super().__init__(cls, source)



    def call(self, tx, args, kwargs):
        if self.cls is torch.no_grad and not args:
            return GradModeVariable(False)
        if self.cls is torch.enable_grad and not args:
            return GradModeVariable(True)
        if self.cls is torch.set_grad_enabled and len(args) == 1:
            return GradModeVariable(args[0].as_constant(), immediate=tx)
        raise Unsupported(f"{self.cls.__name__} called with arguments")


_DATA_TYPES = (bool, int, float, str, type(None))


class PythonModuleVariable(ObjectVariable):
    """A Python module object (torch, torch.nn.functional, math, a user module)."""

    module = property(lambda self: self.value)

    def __init__(self, module, source=None):
        super().__init__(module, source)




    def getattr(self, tx, name):
        try:
            value = getattr(self.module, name)
        except AttributeError:
            raise attribute_error(f"module {self.module.__name__!r}", name)
        from guards.sources import AttrSource
        trusted = self.module.__name__.split(".")[0] in ("torch", "math", "operator", "functools",
                                                         "itertools", "collections", "builtins",
                                                         "typing", "dataclasses", "numbers")
        # Library modules' functions and classes are treated as immutable (not guarded); user
        # modules are guarded. A library module's plain data attribute is state, though
        # (torch.backends.cudnn.enabled, a flag a user may flip): guarded by value.
        if trusted and type(value) in _DATA_TYPES:
            from guards.sources import ConstSource
            return tx.wrap(value, AttrSource(ConstSource(self.module), name))
        source = None if trusted or self.source is None else AttrSource(self.source, name)
        return tx.wrap(value, source)

    def hasattr(self, tx, name):
        return hasattr(self.module, name)

    def reconstruct(self, cg):
        cg.load_const(self.module)

    def __repr__(self):
        return f"PyModule({self.module.__name__})"
