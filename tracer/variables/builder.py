"""Turn a real Python value, fetched from `source`, into a Variable and guard what it assumed.

This is the one place where guards on inputs are decided (rule 2): a tensor gets a tensor
match, a constant an equality match, a container its type and length/keys, a function,
module or class its identity. Values without a source (created while tracing, or library
attributes we treat as immutable) get no guard.

Each real object is wrapped once per trace (memo by id): two sources reaching the same
object give the same Variable (so in-place changes are seen through both) plus a guard that
the sources still alias; distinct mutable inputs are guarded to stay distinct.
"""
import builtins
import collections
import enum
import functools
import math
import operator
import types

import torch
from guards import (ConstMatch, check_const_supported, exact_equal, DictKeysMatch, IdMatch, LengthMatch, Predicate, SameObject,
                          TensorMatch, TypeMatch)
from guards.sources import AttrSource, ItemSource, LocalSource, Source

from ..exc import Unsupported
from ..runtime import policy
from .base import ConstantVariable, is_constant_value
from .containers import (DictVariable, ListVariable, NamedTupleVariable, SetVariable, StructSeqVariable,
                         TupleVariable, is_structseq)
from .functions import (BuiltinVariable, BoundMethodVariable, LruCacheVariable, PartialVariable,
                        UserFunctionVariable)
from .nn_module import NNModuleVariable, is_module_dispatch
from .objects import ClassVariable, OpaqueVariable, UserObjectVariable
from .tensor import TensorVariable
from .torch_vars import GradModeClassVariable, PythonModuleVariable, TorchFunctionVariable
from bytecode_utils import versions
from . import containers

_BUILTIN_MODULES = (builtins, math, operator)
_GRAD_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


def _is_torch_callable(value):
    mod = getattr(value, "__module__", None) or ""
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        self_obj = getattr(value, "__self__", None)
        if isinstance(self_obj, types.ModuleType):
            mod = mod or self_obj.__name__
    if mod.startswith("torch") and not mod.startswith("torch._dynamo"):
        return True
    qual = getattr(value, "__qualname__", "")
    return isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        getattr(value, "__objclass__", None) in (torch.Tensor, torch._C.TensorBase)


def _is_context_manager(value):
    """An instance of a context manager class the tracer does not model (torch.inference_mode()
    is callable too, as a decorator): a new object on every call, so not a function to pin by
    identity. Grad modes and autocast are modelled (TorchFunctionVariable, torch_vars.py)."""
    t = type(value)
    return not isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                                  *_GRAD_CLASSES, torch.amp.autocast_mode.autocast)) \
        and hasattr(t, "__enter__") and hasattr(t, "__exit__")


def _bound_to_instance(value):
    """A method bound to an object made at run time (`cm.__exit__` on the stack of a resumed
    `with`): a new object on every call; its function and object are wrapped apart."""
    return isinstance(value, types.MethodType) and not isinstance(value.__self__, (type, types.ModuleType))


def _is_builtin_callable(value):
    # identity tests only: user values (numpy arrays, tensors) may have an ambiguous __eq__
    if value is functools.partial or value is functools.reduce:
        return True
    if builtins_impl.is_known_builtin(value):  # itertools, sys.exc_info, ...
        return True
    if isinstance(value, types.BuiltinFunctionType):
        owner = getattr(value, "__self__", None)
        return any(owner is m for m in _BUILTIN_MODULES) or \
            getattr(value, "__module__", None) in ("builtins", "math", "_operator", "operator")
    return isinstance(value, type) and value in _BUILTIN_TYPES


_BUILTIN_TYPES = {int, float, bool, str, list, tuple, dict, set, frozenset, range, enumerate,
                  zip, reversed, slice, map, filter, type, object, super, iter, isinstance,
                  complex, bytes}


def wrap(tx, value, source):
    memo = tx.wrap_memo
    key = id(value)
    hit = memo.get(key)
    if hit is not None and hit[0] is value:
        var = hit[1]
        if source is not None and var.source is not None and source != var.source and \
                not is_constant_value(value):
            tx.guard(SameObject(var.source, source))
        elif source is not None and is_constant_value(value):
            return _wrap_fresh(tx, value, source)
        return var
    var = _wrap_fresh(tx, value, source)
    if not is_constant_value(value):
        memo[key] = (value, var)
    return var


def wrap_unguarded(tx, value, source):
    """`wrap` for a library module's global (code, treated as immutable): no guard."""
    # data, not code, is always guarded: a tensor, and a constant, which is how a library
    # keeps a switch (torch.backends.mha's _is_fastpath_enabled, set by a setter function)
    if isinstance(value, torch.Tensor) or is_constant_value(value):
        return wrap(tx, value, source)
    saved, tx.ctx.guards = tx.ctx.guards, []
    try:
        return wrap(tx, value, source)
    finally:
        tx.ctx.guards = saved


_CONTAINER_TYPES = (list, dict, set, tuple, collections.deque, collections.OrderedDict, collections.defaultdict)
_SEQ_ITERATORS = (type(iter(())), type(iter([])), type(iter(range(0))))
MAX_ITERATOR_ITEMS = 100_000  # (a range iterator over 2**32 items reached a break: MemoryError)


class IterRestSource(Source):
    """The remaining items of a list/tuple/range iterator, as a tuple (not advancing it)."""

    def __init__(self, base):
        object.__setattr__(self, "base_", base)

    @property
    def base(self):
        return self.base_

    def _key(self):
        return (self.base_,)

    def name(self):
        return f"rest({self.base_.name()})"

    def guard_expr(self, ctx):
        return f"{ctx.const(containers_mod.iter_rest)}({ctx.value(self.base_)})"

    def reconstruct(self):
        return [*versions.load_const_callable(containers_mod.iter_rest), *self.base_.reconstruct(), *versions.call(1)]


class IterSeqSource(IterRestSource):
    """The list a list iterator reads (`iter_seq(it)`), or its position (`iter_pos(it)`)."""

    fn_name = "iter_seq"

    def _key(self):
        return (self.fn_name, self.base_)

    def name(self):
        return f"{self.fn_name}({self.base_.name()})"

    def guard_expr(self, ctx):
        return f"{ctx.const(getattr(containers, self.fn_name))}({ctx.value(self.base_)})"

    def reconstruct(self):
        return [*versions.load_const_callable(getattr(containers, self.fn_name)),
                *self.base_.reconstruct(), *versions.call(1)]


class IterPosSource(IterSeqSource):
    fn_name = "iter_pos"


def const_guard(source, value):
    """Equality guard for a constant; types ConstMatch cannot express use a Predicate."""
    if check_const_supported(value):
        return ConstMatch(source, value)
    return Predicate(source, lambda v: exact_equal(v, value), f"== {value!r}")


def _same_kind_of_tensor(value):
    nested, layout = value.is_nested, value.layout
    return lambda v: isinstance(v, torch.Tensor) and v.is_nested == nested and v.layout is layout


def _number_input(tx, source):
    """An int (float) argument of the frame, or an item or attribute of one that is no module's: a
    cache object's length passed in each decoding step (HF's sliding-window caches keep
    `cumulative_length` per layer) may become symbolic, as in torch.compile; module
    attributes (config values, a layer's sizes), reached from a module argument or through
    a module's own dicts, stay static."""
    while isinstance(source, (ItemSource, AttrSource)):
        if isinstance(source, AttrSource) and source.attr in ("_modules", "_parameters", "_buffers"):
            return False
        source = source.base
    if not isinstance(source, LocalSource):
        return False
    root = tx.ctx.root_args.get(source.name_)  # (empty while the arguments are being bound)
    return not isinstance(getattr(root, "value", None), torch.nn.Module)


def _maybe_symbolic_number(tx, value, source):
    """A dynamic int (float) argument (its value changed between traces, or dynamic=True): a
    SymInt (SymFloat) graph input guarded by type; the ShapeEnv guards what the trace relied on."""
    out = tx.output
    hit = out.sym_inputs.get(source)
    if hit is not None:
        return hit
    if type(value) is float and (value == 0.0 or not math.isfinite(value)):
        return None  # 0.0 and -0.0 (and inf, nan) are one value to the ShapeEnv: kept exact
    if not out.shapes.policy.int_dynamic(value, source):
        return None
    node = out.add_sym_input(value, source)
    if node is None:  # 0 or 1: specialised by the ShapeEnv, an ordinary constant
        return None
    tx.guard(TypeMatch(source, type(value)))
    var = out.sym_inputs[source] = sym.SymNodeVariable(node, node.meta["example_value"], source)
    return var


def _wrap_fresh(tx, value, source):
    g = (lambda guard: tx.guard(guard)) if source is not None else (lambda guard: None)
    t = type(value)
    if isinstance(value, torch.Tensor):
        if t not in (torch.Tensor, torch.nn.Parameter) and not isinstance(value, torch.nn.Parameter):
            raise Unsupported(f"tensor subclass {t.__name__}")
        if torch._C._functorch.is_functorch_wrapped_tensor(value):  # a frame torch.func calls
            raise Unsupported("a tensor wrapped by a torch.func transform (vmap, grad, jvp) as input")
        if source is None:
            raise Unsupported("a tensor without a source (cannot be loaded by the rewritten code)")
        if value.is_nested or value.layout is not torch.strided:
            # Fake tensors have no sizes for these; the frame runs as Python for such inputs
            # only (guarded, so a dense tensor later is traced).
            g(Predicate(source, _same_kind_of_tensor(value), f"is a {value.layout} tensor, nested={value.is_nested}"))
            raise Unsupported(f"a {'nested' if value.is_nested else str(value.layout)} tensor")
        g(torch_vars.tensor_match(tx.ctx, source, value))
        tx.ctx.input_tensor_sources.append(source)
        node = tx.output.add_input(value, source)
        return TensorVariable(node, node.meta["example_value"], source, real=value)
    if (t is int or (t is float and math.isfinite(value) and tx.output.shapes.policy.floats)) \
            and source is not None and _number_input(tx, source):
        var = _maybe_symbolic_number(tx, value, source)
        if var is not None:
            return var
    if is_constant_value(value):
        g(const_guard(source, value))
        return ConstantVariable(value, source)
    if t is list and source is not None:  # its length and items are read when needed
        g(TypeMatch(source, t))
        var = ListVariable.lazy(tx, value, source)
        tx.ctx.mutable_inputs.append(var)
        return var
    if t in (tuple, list) or (isinstance(value, tuple) and (hasattr(t, "_fields") or is_structseq(t))):
        g(TypeMatch(source, t))
        g(LengthMatch(source, len(value), t))
        items = [wrap(tx, v, ItemSource(source, i) if source is not None else None)
                 for i, v in enumerate(value)]
        if t is list:
            return ListVariable(items, source)
        if t is tuple:
            return TupleVariable(items, source)
        if is_structseq(t):
            return StructSeqVariable(items, t, source)
        return NamedTupleVariable(items, t, source)
    if t is collections.deque:
        g(TypeMatch(source, t))
        g(LengthMatch(source, len(value), t))
        if source is not None:
            g(const_guard(AttrSource(source, "maxlen"), value.maxlen))
        items = [wrap(tx, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        var = collections_vars.DequeVariable(items, source, maxlen=value.maxlen)
        if source is not None:
            tx.ctx.mutable_inputs.append(var)
        return var
    if t in (dict, collections.OrderedDict, collections.defaultdict):
        g(TypeMatch(source, t))
        keys = tuple(value.keys())
        if not all(is_constant_value(k) for k in keys):
            if source is None:
                raise Unsupported("dict with non-constant keys")
            return keyed_dict.ObjectKeyedDictVariable(value, source)  # read by key only (TypeMatch above)
        try:
            g(DictKeysMatch(source, keys, t))
        except TypeError:
            raise Unsupported("dict input with keys that cannot be guarded")
        items = {k: wrap(tx, v, ItemSource(source, k) if source is not None else None)
                 for k, v in value.items()}
        if t is collections.defaultdict:
            factory = wrap(tx, value.default_factory, AttrSource(source, "default_factory") if source else None)
            var = collections_vars.DefaultDictVariable(items, factory, source)
        else:
            var = DictVariable(items, source, user_cls=t)
        if source is not None:
            tx.ctx.mutable_inputs.append(var)
        return var
    if t is set:
        if not all(is_constant_value(k) for k in value):
            raise Unsupported("set of non-constant values")
        g(TypeMatch(source, t))
        frozen = tuple(value)  # in iteration order: equal sets may iterate differently
        g(Predicate(source, lambda v, _s=frozen: exact_equal(tuple(v), _s), f"set == {set(frozen)!r}"))
        var = SetVariable([ConstantVariable(v) for v in value], source)
        return var
    if t is type(iter([])):
        # live: the list is wrapped (memo by id: the same Variable as a local holding it), so
        # the loop body's appends/pops are seen, as by CPython's list iterator
        if source is None:
            raise Unsupported("an iterator without a source")
        g(TypeMatch(source, t))
        pos = containers_mod.iter_pos(value)
        g(ConstMatch(IterPosSource(source), pos))
        lst = wrap(tx, containers_mod.iter_seq(value), IterSeqSource(source))
        if pos >= 0 and not isinstance(lst, ListVariable):  # a list subclass: its items are not modelled
            raise Unsupported(f"iterator over a {type(containers_mod.iter_seq(value)).__name__}")
        return containers_mod.ListIteratorVariable(lst if pos >= 0 else None, pos=max(pos, 0), source=source)
    if t in _SEQ_ITERATORS:
        left = value.__length_hint__()
        if left > MAX_ITERATOR_ITEMS:  # its items would be Variables each
            raise Unsupported(f"an iterator with {left} items left is too long to model")
        rest = containers_mod.iter_rest(value)
        if source is None:
            raise Unsupported("an iterator without a source")
        g(TypeMatch(source, t))
        rest_src = IterRestSource(source)
        g(LengthMatch(rest_src, len(rest), tuple))
        items = [wrap(tx, v, ItemSource(rest_src, i)) for i, v in enumerate(rest)]
        return containers_mod.IteratorVariable(items, source=source, py_type=t)
    if isinstance(value, torch.nn.Module):
        g(nn_module.module_guard(source, value))
        return nn_module.wrap_module(tx, value, source, None, guarded=True)
    if isinstance(value, type) and any(value is c for c in _GRAD_CLASSES):
        g(IdMatch(source, value))
        return GradModeClassVariable(value, source)
    if isinstance(value, types.ModuleType):
        g(IdMatch(source, value))
        return PythonModuleVariable(value, source)
    if isinstance(value, torch.jit.ScriptFunction) and \
            isinstance(getattr(value, "_torchdynamo_inline", None), types.FunctionType):
        # @torch.jit.script: its Python function is traced (torch.jit.script keeps it for
        # torch.compile); the ScriptFunction itself cannot be named in a graph's code
        g(IdMatch(source, value))
        return UserFunctionVariable(value._torchdynamo_inline)
    if (t is types.FunctionType or (callable(value) and not isinstance(value, type))) and \
            policy.is_untraced_value(value):
        g(IdMatch(source, value))
        return OpaqueVariable(value, source)
    if t is functools._lru_cache_wrapper:
        g(IdMatch(source, value))
        return LruCacheVariable(value, source)
    if t is types.FunctionType and is_module_dispatch(value):  # nn.Module.__call__ read by name
        g(IdMatch(source, value))
        return UserFunctionVariable(value, source)
    if t is types.FunctionType and not _is_torch_callable(value):
        if value.__closure__ or "<locals>" in value.__qualname__:
            # A function made by a call (a closure, a lambda, a nested def) is usually a new
            # object each time: what inlining relies on is its code and globals (defaults,
            # closure cells and attributes are guarded through their sources when read).
            # Identity is pinned only if the trace compares it (UserFunctionVariable.pin_identity).
            g(Predicate.same_function(source, value.__code__, value.__globals__,
                                      f"a function with the code of {value.__qualname__}"))
            var = UserFunctionVariable(value, source)
            var.identity_guarded = source is None
            return var
        g(IdMatch(source, value))
        return UserFunctionVariable(value, source)
    if _is_builtin_callable(value):
        g(IdMatch(source, value))
        return BuiltinVariable(value, source)
    if callable(value) and _is_torch_callable(value) and not isinstance(value, type) \
            and not _is_context_manager(value) and not _bound_to_instance(value):
        g(IdMatch(source, value))
        return TorchFunctionVariable(value, source)
    if value is torch.Size:
        return TorchFunctionVariable(value, source)
    if t is functools.partial:
        g(TypeMatch(source, t))
        fsrc = AttrSource(source, "func") if source else None
        asrc = AttrSource(source, "args") if source else None
        ksrc = AttrSource(source, "keywords") if source else None
        func = wrap(tx, value.func, fsrc)
        args = wrap(tx, value.args, asrc).iterate(tx)  # a constant tuple wraps as a ConstantVariable
        kwargs = wrap(tx, value.keywords, ksrc).items
        return PartialVariable(func, args, kwargs, source, real=value)
    if t is types.MethodType:
        g(TypeMatch(source, t))
        obj = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None)
        func = wrap(tx, value.__func__, AttrSource(source, "__func__") if source else None)
        return BoundMethodVariable(func, obj, source)
    if isinstance(value, type):
        g(IdMatch(source, value))
        return ClassVariable(value, source)
    if isinstance(value, enum.Enum) or t in (types.CodeType,):
        g(IdMatch(source, value))
        return OpaqueVariable(value, source)
    if t is types.BuiltinMethodType and type(getattr(value, "__self__", None)) in _CONTAINER_TYPES:
        # `lst.append` as a value (a callback, or on the stack at a graph break)
        g(TypeMatch(source, t))
        g(const_guard(AttrSource(source, "__name__"), value.__name__))
        owner = wrap(tx, value.__self__, AttrSource(source, "__self__") if source is not None else None)
        return functions.BuiltinMethodVariable(owner, value.__name__)
    if t is torch_vars.AutocastReentry:
        g(IdMatch(source, value))
        return torch_vars.AutocastReentryVariable(value, source)
    if isinstance(value, (types.BuiltinFunctionType, types.MethodWrapperType,
                          types.MethodDescriptorType, types.WrapperDescriptorType)):
        # A C function the tracer does not model (zlib.crc32): a value like any other; calling
        # it is the graph break (OpaqueVariable.call), so the code around the call is captured.
        g(IdMatch(source, value))
        return OpaqueVariable(value, source)
    if t in (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType):
        # a generator made outside the trace (or rebuilt at a break): its frame is native, so
        # advancing it is a graph break; it can be passed around and compared
        g(TypeMatch(source, t))
        var = OpaqueVariable(value, source)
        if generators.real_generator_needs_finalizer(value):
            tx.ctx.foreign_generators.append(var)  # its drop must not move (generators.py)
        return var
    if isinstance(value, (BaseException, types.TracebackType)):  # passed through (e.g. to a `raise` at a break)
        g(TypeMatch(source, t))
        return OpaqueVariable(value, source)
    if policy.is_untraced_module(t.__module__):
        g(TypeMatch(source, t))
        return OpaqueVariable(value, source)
    if t.__module__.startswith("torch") and _is_context_manager(value):
        # torch.inference_mode(), a profiler range...: their __enter__ changes C-level state,
        # so a `with` over one is a graph break there and its block is captured
        g(TypeMatch(source, t))
        return OpaqueVariable(value, source)
    if t.__module__ == "builtins" or t.__module__.startswith("torch"):
        raise Unsupported(f"value of type {t.__qualname__}")
    g(TypeMatch(source, t))
    return UserObjectVariable(value, source)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builtins_impl, sym, torch_vars, containers as containers_mod, collections_vars, nn_module, functions, generators, keyed_dict  # noqa: E402
