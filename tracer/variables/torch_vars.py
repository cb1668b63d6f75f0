"""torch callables, grad-mode context managers, and Python modules such as `torch` itself.

A torch function or Tensor method call becomes one FX node; its example value is computed
by calling the same function on fake tensors, which also tells us whether it returns a
tensor, a structure of tensors, or a metadata constant (folded out of the graph).

Torch internals read here: torch._C._set_grad_enabled and _ForceDispatchKeyGuard; checked on
torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them all; tests/test_torch_internals.py resolves
each).
"""
import contextlib
import inspect
import types

import torch
from guards import ConstSource, Predicate, QueryMatch, TensorMatch

from ..exc import Unsupported, UserException
from ..runtime import policy
from .base import ConstantVariable, ObjectVariable, Variable
from guards.sources import AttrSource

# torch callables with effects outside the graph, or that only make sense eagerly.
_DENY = {"manual_seed", "seed", "initial_seed", "set_default_dtype", "set_default_device",
         "use_deterministic_algorithms", "set_printoptions", "save", "load", "set_rng_state",
         "get_rng_state", "set_num_threads", "set_anomaly_enabled", "compile", "synchronize",
         "set_default_tensor_type", "from_numpy", "set_flush_denormal", "autograd.grad",
         "backward", "grad"}

# Functions of dtypes (and Python scalars) alone: their answer on constants is a constant.
_DTYPE_ALGEBRA = frozenset({torch.promote_types, torch.can_cast})

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
        if args and isinstance(args[0], ContextManagerVariable) and args[0].owns(fn):
            # a method of a manager the trace models, read through its class or bound to it
            # (`self.clone` kept by a torch decorator, `type(cm).__exit__(cm, ...)`)
            return args[0].call_method(tx, name, args[1:], kwargs)
        if any(isinstance(a, numpy_vars.NdarrayVariable) for a in (*args, *kwargs.values())):
            return numpy_vars.torch_call(tx, fn, args, kwargs)
        if name in _DENY:
            raise Unsupported(f"torch.{name} has effects outside the graph")
        if fn is torch.set_grad_enabled or fn is torch._C._set_grad_enabled:
            if len(args) == 1 and not kwargs:
                mode = args[0].as_constant()
                return GradModeVariable(mode, immediate=tx)
        if fn in (torch.is_grad_enabled,):
            return ConstantVariable(torch.is_grad_enabled())
        if name in _COMPILING_QUERIES and policy.is_torch_value(fn):
            # As under torch.compile: traced code takes the library's compile-friendly path.
            # Not in torch's own code: there it selects TorchDynamo workarounds whose results
            # differ from eager (nn.TransformerEncoder skips its nested-tensor path, which
            # zeroes padded positions), so torch's frames see eager's answer.
            if _in_torch(_asking_frame(tx).code.co_filename):
                return ConstantVariable(False)
            return ConstantVariable(_COMPILING_QUERIES[name])
        hooks = SAVED_HOOKS_CALLS.get(fn)
        if hooks is not None:
            return hooks(tx, [a.as_constant() for a in args], {k: v.as_constant() for k, v in kwargs.items()})
        if fn is torch.is_tensor and len(args) == 1:
            return ConstantVariable(isinstance(args[0], tensor_mod.TensorVariable))
        if fn is torch.Size:
            return containers.SizeVariable(args[0].iterate(tx) if args else [])
        if fn is checkpoint.CHECKPOINT:
            return checkpoint.checkpoint_call(tx, args, kwargs)
        if fn in _DTYPE_ALGEBRA and all(v.is_constant() for v in (*args, *kwargs.values())):
            # a function of dtypes alone, asked of constants: its answer is a constant
            return ConstantVariable(fn(*(a.as_constant() for a in args),
                                       **{k: v.as_constant() for k, v in kwargs.items()}))
        fold = folds.FOLDED.get(fn)
        if fold is not None:  # torch's Python bookkeeping evaluated by the trace (folds.py)
            return fold(tx, args, kwargs)
        if isinstance(fn, types.FunctionType) and all(v.is_constant() for v in (*args, *kwargs.values())):
            # a torch Python helper on constants: inlined, it guards what it reads instead of
            # being asked again in every guard check (speculate.py); refused, called as before.
            # (Sourced as this very object, which the trace already resolved: what its defaults
            # and closure hold is reached from it, and a write to them is replayed there.)
            out = speculate.inline_on_trial(tx, functions.UserFunctionVariable(fn, ConstSource(fn)), args, kwargs)
            if out is not None:
                return out
        return torch_calls.call_torch(tx, "call_function", fn, args, kwargs)

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

    def getattr(self, tx, name):
        method = getattr(torch.Tensor, self.name, None)
        if name == "__name__" and inspect.isroutine(method):  # (not `x.__class__`, which lands here too)
            return ConstantVariable(method.__name__)
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        cg.reconstruct(self.tensor)
        cg.load_attr(self.name)


class ContextManagerVariable(Variable):
    """A torch context manager the interpreter models itself (BEFORE_WITH pushes it with no
    bound __exit__): `with` calls enter(tx) and exit(tx)."""

    what = "context manager"

    def call_method(self, tx, name, args, kwargs):
        if name == "__enter__":
            return self.enter(tx)
        if name == "__exit__":
            return self.exit(tx)
        if name == "clone" and not args and not kwargs:
            return self.clone(tx)
        if name == "__call__":
            return self.call(tx, args, kwargs)
        raise Unsupported(f"{self.what} object method {name}")

    def clone(self, tx):
        """`cm.clone()`: what a torch decorator enters at each call (torch.utils._contextlib)."""
        return self.fresh()

    def owns(self, fn):
        """Whether `fn` is a method of this manager's class (`inference_mode.clone`, reached as
        a torch function bound to the manager)."""
        return getattr(self.python_type(), getattr(fn, "__name__", ""), None) is fn

    def call(self, tx, args, kwargs):
        """`@torch.no_grad()` on a function (or `torch.enable_grad()(f)`): the function, run
        inside a fresh manager like this one at each call, as torch's decorators do."""
        if len(args) == 1 and not kwargs and isinstance(args[0], functions.BaseFunctionVariable) and \
                self.decorator is not None:
            self.decorating(tx)
            return ManagedFunctionVariable(self, args[0])
        raise Unsupported(f"calling {self.what} object")

    decorator = None  # (module-level) decorator(manager's state..., fn): the real decorated function

    def fresh(self):
        """A new manager like this one (a decorated function enters its own at each call)."""
        raise Unsupported(f"{self.what} object as a decorator")

    def decorating(self, tx):
        """What decorating a function does to the manager's state (set_grad_enabled: undo)."""

    def decorator_args(self):
        return []


class ManagedFunctionVariable(Variable):
    """A function decorated by a torch context manager the interpreter models (grad mode,
    disable_saved_tensors_hooks): each call enters a fresh manager, runs the function inlined,
    and exits it, also when the call raises."""

    def __init__(self, manager, fn):
        super().__init__(None)
        self.manager, self.fn = manager, fn

    def python_type(self):
        return types.FunctionType

    def call(self, tx, args, kwargs):
        mgr = self.manager.fresh()
        mgr.enter(tx)
        try:
            out = self.fn.call(tx, args, kwargs)
        except UserException:
            mgr.exit(tx)
            raise
        mgr.exit(tx)
        return out

    def reconstruct(self, cg):
        cg.call_with(self.manager.decorator, [*self.manager.decorator_args(), self.fn])

    def __repr__(self):
        return f"Managed({self.manager.what}, {self.fn})"


def grad_mode_decorated(mode, fn):
    """The real `torch.enable_grad()(fn)` / `torch.no_grad()(fn)`."""
    return (torch.enable_grad() if mode else torch.no_grad())(fn)


def grad_mode_object(mode, prev, immediate):
    """A real grad-mode object in the state a trace left it, made without switching the mode
    (set_grad_enabled's constructor switches it; torch 2.13-2.15 keep `prev` and `mode` on it)."""
    if not immediate:
        obj = torch.enable_grad() if mode else torch.no_grad()
        if prev is not None:
            obj.prev = prev
        return obj
    obj = torch.set_grad_enabled.__new__(torch.set_grad_enabled)
    obj.prev, obj.mode = prev, mode
    return obj


def saved_hooks_off_decorated(message, fn):
    """The real `torch.autograd.graph.disable_saved_tensors_hooks(message)(fn)`."""
    return torch.autograd.graph.disable_saved_tensors_hooks(message)(fn)


class GradModeVariable(ContextManagerVariable):
    """torch.no_grad() / enable_grad() / set_grad_enabled(b) as a context manager.

    Entering records `torch._C._set_grad_enabled(mode)` in the graph and switches the real
    mode while tracing (restored by convert_frame), so fake tensors see the same mode the
    graph will run under. `immediate` is set for the function form set_grad_enabled(b),
    which takes effect at the call.
    """

    what = "grad-mode"

    def __init__(self, mode, immediate=None, source=None):
        super().__init__(source)
        self.mode = bool(mode)
        self.prev = None
        self.immediate = immediate is not None
        if self.immediate:
            self.prev = torch.is_grad_enabled()
            _set_grad(immediate, self.mode)

    @classmethod
    def switched(cls, mode, prev, source):
        """A set_grad_enabled(mode) made outside the frame, which switched the mode then and
        puts back `prev` on exit."""
        var = cls(mode, source=source)
        var.immediate, var.prev = True, prev
        return var

    def python_type(self):
        if self.immediate:
            return torch.autograd.grad_mode.set_grad_enabled
        return torch.enable_grad if self.mode else torch.no_grad

    def enter(self, tx):
        # no_grad()/enable_grad() save the mode and switch on every entry (one object may be
        # entered again); set_grad_enabled(b) switched at the call, its __enter__ does nothing
        if not self.immediate:
            self.prev = torch.is_grad_enabled()
            _set_grad(tx, self.mode)
        return ConstantVariable(None)

    def exit(self, tx):
        if self.prev is None:
            raise Unsupported("leaving a grad-mode block the traced code did not enter")
        _set_grad(tx, self.prev)
        return ConstantVariable(None)

    decorator = staticmethod(grad_mode_decorated)

    def reconstruct(self, cg):
        """The object itself live at a graph break (made before it, entered after): a real one
        in the same state (one made outside the frame: that object)."""
        if self.source is not None:
            return cg.load_source(self.source)
        cg.call_with(grad_mode_object, [ConstantVariable(self.mode), ConstantVariable(self.prev),
                                        ConstantVariable(self.immediate)])

    def fresh(self):
        return GradModeVariable(self.mode)

    def clone(self, tx):
        """set_grad_enabled's clone is made as it is, switching the mode at once."""
        return GradModeVariable(self.mode, immediate=tx) if self.immediate else self.fresh()

    def decorating(self, tx):
        if self.immediate:  # torch's set_grad_enabled.__call__ puts back the mode it found
            _set_grad(tx, self.prev)

    def decorator_args(self):
        return [ConstantVariable(self.mode)]


def _set_grad(tx, mode):
    if torch.is_grad_enabled() != mode:
        tx.output.graph.create_node("call_function", torch._C._set_grad_enabled, (mode,), {})
        torch._C._set_grad_enabled(mode)


# ---- the saved-tensors-hooks switch ----------------------------------------------------------
# torch.autograd.graph.disable_saved_tensors_hooks(message): inside, pushing saved-tensors
# default hooks (saved_tensors_hooks, save_on_cpu, checkpoint) raises `message`. The switch is
# torch's thread state, outside any graph: nothing a graph runs pushes hooks, so, unlike grad
# mode, no node records it (AOTAutograd would drop one anyway). The trace flips the real
# switch as the code does (a later query in the frame reads it), guards the state the frame
# started in the first time it reads or sets it, and puts it back when the trace ends; the
# rewritten code sets the state the traced code left right after the graph call (a graph
# break inside the block), and the resume function's block end puts back the state found on
# entry (SavedHooksRestore).

_AUTOGRAD = torch._C._autograd
hooks_message = _AUTOGRAD._saved_tensors_hooks_get_disabled_error_message


def set_hooks_message(message):
    """The real switch: off with `message`, on for None."""
    if message is None:
        _AUTOGRAD._saved_tensors_hooks_enable()
    else:
        _AUTOGRAD._saved_tensors_hooks_disable(message)


def _traced_message(tx):
    ctx = tx.ctx
    if not ctx.hooks_off_guarded:
        ctx.hooks_off_guarded = True
        tx.guard(QueryMatch(hooks_message, (), (), ctx.hooks_off_at_start))
    return hooks_message()


def _set_traced_message(tx, message):
    ctx = tx.ctx
    _traced_message(tx)  # (guards the state the frame started in)
    if message is not None:
        # eager raises `message` when hooks are pushed (a saved_tensors_hooks block around
        # the call): guard that none are, and take the trace's own pass-through pair off
        # (convert_frame._own_saved_tensor_hooks), which no user hook can be above while off
        if ctx.user_saved_hooks:
            raise Unsupported("disable_saved_tensors_hooks() inside saved_tensors_hooks raises its message")
        if not ctx.hooks_absent_guarded:
            ctx.hooks_absent_guarded = True
            tx.guard(QueryMatch(_AUTOGRAD._top_saved_tensors_default_hooks, (True,), (), None))
        if ctx.own_saved_hooks:
            _AUTOGRAD._pop_saved_tensors_default_hooks()
            ctx.own_saved_hooks = False
    set_hooks_message(message)


class SavedHooksOffVariable(ContextManagerVariable):
    """`torch.autograd.graph.disable_saved_tensors_hooks(message)` as a context manager."""

    what = "disable_saved_tensors_hooks"

    def __init__(self, message):
        super().__init__(None)
        self.message = message
        self.prev = None

    def python_type(self):
        return contextlib._GeneratorContextManager

    def enter(self, tx):
        self.prev = _traced_message(tx)
        _set_traced_message(tx, self.message)
        return ConstantVariable(None)

    def exit(self, tx):
        _set_traced_message(tx, self.prev)
        return ConstantVariable(None)

    decorator = staticmethod(saved_hooks_off_decorated)

    def fresh(self):
        return SavedHooksOffVariable(self.message)

    def decorator_args(self):
        return [ConstantVariable(self.message)]


class SavedHooksRestore:
    """Stands for an entered disable_saved_tensors_hooks after a graph break: its __exit__
    puts back the state found on entry."""

    def __init__(self, prev):
        self.prev = prev

    def __exit__(self, *exc_info):
        set_hooks_message(self.prev)
        return False


def _hooks_off(tx, args, kwargs):
    if len(args) + len(kwargs) != 1 or set(kwargs) - {"error_message"}:
        raise Unsupported("disable_saved_tensors_hooks() takes one argument, the message")
    message = args[0] if args else kwargs["error_message"]
    if type(message) is not str:
        raise Unsupported("disable_saved_tensors_hooks() with a message that is not a str")
    return SavedHooksOffVariable(message)


def _set_state(message_of):
    def call(tx, args, kwargs):
        message = message_of(*args, **kwargs)
        if message is not None and type(message) is not str:
            raise Unsupported("disabling saved tensors hooks with a message that is not a str")
        _set_traced_message(tx, message)
        return ConstantVariable(None)
    return call


SAVED_HOOKS_CALLS = {
    torch.autograd.graph.disable_saved_tensors_hooks: _hooks_off,
    hooks_message: lambda tx, args, kwargs: ConstantVariable(_traced_message(tx)),
    _AUTOGRAD._saved_tensors_hooks_disable: _set_state(lambda message: message),
    _AUTOGRAD._saved_tensors_hooks_enable: _set_state(lambda: None),
}
if hasattr(_AUTOGRAD, "_saved_tensors_hooks_is_enabled"):
    SAVED_HOOKS_CALLS[_AUTOGRAD._saved_tensors_hooks_is_enabled] = (
        lambda tx, args, kwargs: ConstantVariable(_traced_message(tx) is None))


def tensor_match(ctx, source, tensor):
    """A TensorMatch as the frame's caller will check it: torch's TensorGuards records the
    thread's dispatch-key state when it is made, and inside a traced autocast or inference-mode
    block that state is the block's, not the one at the frame's entry (where the guard runs)."""
    if not ctx.mode_blocks:
        return TensorMatch(source, tensor)
    with torch._C._ForceDispatchKeyGuard(*ctx.entry_dispatch_tls):
        return TensorMatch(source, tensor)


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
        if self.cls in (torch.no_grad, torch.enable_grad) and len(args) == 1 and not kwargs:
            # `torch.no_grad(fn)`: their __new__ takes the function and returns cls()(fn)
            return GradModeVariable(self.cls is torch.enable_grad).call(tx, args, {})
        raise Unsupported(f"{self.cls.__name__} called with arguments")


_DATA_TYPES = (bool, int, float, str, type(None))


class PythonModuleVariable(ObjectVariable):
    """A Python module object (torch, torch.nn.functional, math, a user module)."""

    module = property(lambda self: self.value)

    def __init__(self, module, source=None):
        super().__init__(module, source)

    def getattr(self, tx, name):
        if name == "__annotations__" and lazy_annotations.LAZY and type(self.module) is types.ModuleType:
            return lazy_annotations.read(tx, self.module, module_getattr.base_source(self))  # (may run __annotate__)
        pending = tx.side_effects.pending_global(self.module.__dict__, name)  # (a function of it stored it)
        if pending is not None:
            return pending
        trusted = policy.is_library_namespace(self.module.__name__)
        hook = module_getattr.hook_for(self.module, name)
        if hook is not None and not trusted:  # the module's own __getattr__ answers: traced
            return module_getattr.call_hook(tx, self, name, hook)
        try:
            value = getattr(self.module, name)
        except AttributeError:
            self._guard_presence(tx, name, False)  # (getattr(mod, name, default) takes the default)
            raise exceptions.attribute_error(f"module {self.module.__name__!r}", name)
        # Library modules' functions and classes are treated as immutable (not guarded); user
        # modules are guarded. A library module's plain data attribute is state, though
        # (torch.backends.cudnn.enabled, a flag a user may flip): guarded by value.
        if trusted and type(value) in _DATA_TYPES:
            if hook is not None:
                module_getattr.refuse_computed_data(self.module, name)
            return builder.wrap(tx, value, module_getattr.attr_source(self.module, ConstSource(self.module), name))
        if trusted:  # (what another process may hold there instead is the disk cache's to check)
            library_reads.note_attr(tx, self.module, name, value)
            return builder.wrap(tx, value, None)
        return builder.wrap(tx, value, module_getattr.attr_source(self.module, module_getattr.base_source(self), name))

    def hasattr(self, tx, name):
        if tx.side_effects.pending_global(self.module.__dict__, name) is not None:
            return True
        if module_getattr.hook_for(self.module, name) is not None and \
                not policy.is_library_namespace(self.module.__name__):
            # the traced call of the module's __getattr__ answers, under its guards
            return exceptions.hasattr_by_getattr(tx, self, name)
        present = hasattr(self.module, name)
        self._guard_presence(tx, name, present)
        return present

    def _guard_presence(self, tx, name, present):
        """Whether a user module has `name` is a fact of this call: a later `mod.FAST = True`
        (or another process setting it at import) must fail the guard. A library namespace is
        trusted like its functions (rule 7), its answer noted for the disk cache."""
        if not policy.is_library_namespace(self.module.__name__):
            module_getattr.guard_presence(tx, self, name, present)
        else:
            library_reads.note_presence(tx, self.module, name, present)

    def reconstruct(self, cg):
        cg.load_const(self.module)

    def __repr__(self):
        return f"PyModule({self.module.__name__})"


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import checkpoint, folds, tensor as tensor_mod, containers, speculate, functions, exceptions, builder, torch_calls, numpy_vars, module_getattr, lazy_annotations, library_reads  # noqa: E402
