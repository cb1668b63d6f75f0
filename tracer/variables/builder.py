"""Turn a real Python value, fetched from `source`, into a Variable and guard what it assumed.

Decided here, when a value is first met in a trace: what it becomes and the guards on the
value itself (rule 2 of docs/design.md), one named handler per kind of value in a dispatch
table (`_BY_TYPE`, then `_ARMS` in order): a tensor gets a tensor match, a constant an
equality match, a container its type and length/keys, a function, module or class its
identity, an object its type. Values without a source (created while tracing, or library
attributes treated as immutable: runtime/policy.py) get no guard.

Decided elsewhere, where the trace reads or relies on something more (`tx.guard(` calls):
attribute presence or absence and class lookups (objects.py, functions.py, tensor.py), a
module's parameters, hooks and dicts (nn_module.py), a lazy list's length and a dict input's
values (containers.py), a tuple input's items (input_tuples.py),
dict keys read one at a time (dict_storage.py, keyed_dict.py, copying.py), torch and
autocast queries and the exception state (torch_vars.py, exceptions.py), issubclass answers
(builtins_impl.py), `type(x)`'s identity (introspection.py), a builtin not shadowed by a
global (trace/frame.py), symbolic shapes and the global state (the ShapeEnv,
trace/convert_frame.py); speculate.py drops the guards of a trial it abandons.

Each real object is wrapped once per trace (memo by id): two sources reaching the same
object give the same Variable (so in-place changes are seen through both) plus a guard that
the sources still alias; distinct mutable inputs are guarded to stay distinct.

Torch internals read here: torch._C.TensorBase; checked on torch 2.13.0, 2.14.1 and 2.15.0
(docs/torch.md lists them all; tests/test_torch_internals.py resolves each).
"""
import builtins
import collections
import enum
import functools
import math
import operator
import os
import sys
import types

import torch
from guards import (ConstMatch, DictKeysMatch, IdMatch, LengthMatch, Predicate, SameObject, TypeMatch,
                    check_const_supported, exact_equal)
from guards.sources import AttrSource, ItemSource, LocalSource

from ..exc import Unsupported
from ..graph.output_graph import refuse_wrapped
from ..runtime import compile_annotations as ann, policy
from .base import ConstantVariable, UntracedValue, is_constant_value
from .containers import DictVariable, ListVariable, SizeVariable, TupleVariable
from .named_tuples import NamedTupleVariable, StructSeqVariable, is_structseq
from .sets import SetVariable
from .input_tuples import InputTupleVariable
from .functions import (BuiltinVariable, BoundMethodVariable, LruCacheVariable, PartialVariable,
                        UserFunctionVariable)
from .nn_module import is_module_dispatch
from .objects import ClassVariable, OpaqueVariable, UserObjectVariable, WrapperObjectVariable
from .tensor import TensorVariable
from .torch_objects import is_traced_object
from .torch_vars import GradModeClassVariable, PythonModuleVariable, TorchFunctionVariable
from . import iterator_inputs, operator_getters

_BUILTIN_MODULES = (builtins, math, operator)
_GRAD_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)


def _is_torch_callable(value):
    """A function or callable of torch's (runtime/policy.py: the package `torch`, not
    torchvision & co., whose functions are user code), not TorchDynamo's own, or a C method
    of Tensor."""
    mod = getattr(value, "__module__", None)
    if not isinstance(mod, str):
        mod = ""
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        self_obj = getattr(value, "__self__", None)
        if isinstance(self_obj, types.ModuleType):
            mod = mod or self_obj.__name__
    if policy.is_torch_module(mod) and not mod.startswith("torch._dynamo"):
        return True
    return isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        getattr(value, "__objclass__", None) in (torch.Tensor, torch._C.TensorBase)


def _stock_forward(fn):
    """A torch.nn module class's own `forward` read through the class
    (`nn.LayerNorm.forward(self, x)` in a subclass's forward, as transformers' SqueezeBERT
    and LoRA layers call it): Python code to inline, as a module call inlines it, not a
    torch function to put in the graph (its `self` is a module)."""
    if fn.__name__ != "forward" or not fn.__module__.startswith("torch.nn.modules."):
        return False
    owner = getattr(sys.modules.get(fn.__module__), fn.__qualname__.rpartition(".")[0], None)
    return isinstance(owner, type) and issubclass(owner, torch.nn.Module)


def _is_context_manager(value):
    """An instance of a context manager class the tracer does not model (a profiler range is
    callable too, as a decorator): a new object on every call, so not a function to pin by
    identity. Grad modes, autocast and inference mode are modelled (_modelled_manager)."""
    t = type(value)
    return not isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)) \
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
        elif source is not None and var.source is None:
            tx.ctx.unsourced_reads.append(source)  # nothing guards it is this object (blocks.py)
        if var.source is not None:
            tx.ctx.memo_reads.append(var)  # (blocks.py: its facts were guarded when first wrapped)
        if getattr(var, "_mutated", False):
            tx.side_effects.pending_reads += 1  # its items are the trace's (blocks.py)
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
    fresh = id(value) not in tx.wrap_memo
    saved, tx.ctx.guards = tx.ctx.guards, []
    try:
        var = wrap(tx, value, source)
        if fresh and isinstance(var, DictVariable):
            var.read_all()  # its values read now, unguarded too (a later lazy read would guard them)
        return var
    finally:
        tx.ctx.guards = saved


_CONTAINER_TYPES = (list, dict, set, tuple, collections.deque, collections.OrderedDict, collections.defaultdict)


def const_guard(source, value):
    """Equality guard for a constant; types ConstMatch cannot express use a Predicate."""
    if check_const_supported(value):
        return ConstMatch(source, value)
    return Predicate.made(source, _equals, (value,), f"== {value!r}")


def _equals(value):
    return lambda v: exact_equal(v, value)


def _set_equals(items):
    """A set iterates in this order with these items (equal sets may iterate differently)."""
    return lambda v: exact_equal(tuple(v), items)


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
    # (a constant is no module: and asking a tuple argument's value would guard all of it)
    return isinstance(root, ConstantVariable) or not isinstance(getattr(root, "value", None), torch.nn.Module)


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


# ---- the first wrap of a value: what it becomes, and the guards on the value itself ----------
#
# `_wrap_fresh` is a dispatch: exact types with one answer are looked up in `_BY_TYPE` first;
# every other value goes through `_TABLE`, tried in order, the first whose test holds deciding,
# and is a user object if none does. The order is the decision: an entry may rely on every
# earlier one not matching (a callable of an untraced library is opaque before an lru_cache
# wrapper or a user function is considered; any `type` not claimed earlier is a class). A
# type is in `_BY_TYPE` only if no entry before its own can match a value of exactly that
# type, and `_TABLE` leaves out the entries that match only such types (`t is set`...). Each
# handler gets `g`, which records a guard when the value has a source and drops it otherwise,
# and returns the Variable or raises Unsupported.

def _tensor(tx, value, source, g):
    """A tensor input: a TensorMatch (dtype, device, shape, strides, requires_grad... as
    tensor_match decides) and a graph input. Subclasses other than Parameter's, functorch-wrapped
    tensors and tensors without a source are Unsupported; a nested or non-strided tensor gets a
    guard on its kind, so that only inputs of that kind run the frame as Python."""
    t = type(value)
    if t not in (torch.Tensor, torch.nn.Parameter) and not isinstance(value, torch.nn.Parameter):
        raise Unsupported(f"tensor subclass {t.__name__}")
    refuse_wrapped(value)  # (a frame torch.func calls)
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


def _is_number(tx, value):
    """An int, or a finite float when floats may be dynamic: a value that may be a symbol."""
    t = type(value)
    return t is int or (t is float and math.isfinite(value) and tx.output.shapes.policy.floats)


def _symbolic_number(tx, value, source, g):
    """An int (a finite float, when floats may be dynamic) argument of the frame that may become
    a SymInt (SymFloat): guarded by type here, the ShapeEnv guards what the trace relied on.
    None when it stays a constant (the next arms then guard it by value)."""
    if _is_number(tx, value) and source is not None and _number_input(tx, source):
        return _maybe_symbolic_number(tx, value, source)
    return None


def _number_items(tx, value, source):
    """(item, its source) for the ints (floats) of a tuple of constants read from the frame's
    inputs, in nested tuples too: each may become symbolic, as an int argument does."""
    if not _number_input(tx, source):
        return
    for i, item in enumerate(value):
        if type(item) in (tuple, torch.Size):
            yield from _number_items(tx, item, ItemSource(source, i))
        elif _is_number(tx, item) and not (type(item) is float and item == 0.0):  # (kept exact)
            yield item, ItemSource(source, i)


def _dynamic_items(tx, value, source):
    """Whether an int (float) of the input tuple `value` is dynamic now: it changed between
    traces (dynamic=None), dynamic=True, or it was handed on as symbolic across a break."""
    policy = tx.output.shapes.policy
    return any(policy.int_would_be_dynamic(v, s) for v, s in _number_items(tx, value, source))


def note_number_items(tx, value, source):
    """A use of a whole input tuple, guarded by its value (InputTupleVariable.value): its ints
    (floats) are recorded as an int argument's are, so that one which changes is dynamic in
    the next trace (`_tuple`) instead of a new constant on every call."""
    policy = tx.output.shapes.policy
    for v, s in _number_items(tx, value, source):
        policy.int_dynamic(v, s)


def _constant(tx, value, source, g):
    """A constant (scalars, strings, tuples/frozensets of them, dtypes, devices...): equality."""
    g(const_guard(source, value))
    return ConstantVariable(value, source)


def _number(tx, value, source, g):
    """An int or float: a symbolic number if it may be one, else a constant (equality)."""
    var = _symbolic_number(tx, value, source, g)
    return var if var is not None else _constant(tx, value, source, g)


def _lazy_list(tx, value, source, g):
    """A list with a source: its type only; its length and items are guarded when read
    (ListVariable.lazy). A mutable input (kept distinct from the other mutable inputs)."""
    g(TypeMatch(source, list))
    var = ListVariable.lazy(tx, value, source)
    tx.ctx.mutable_inputs.append(var)
    return var


def _sequence(tx, value, source, g):
    """A tuple, a list without a source, a namedtuple or a struct sequence: its exact type and
    length; each item is wrapped (and guarded) through its own ItemSource."""
    t = type(value)
    g(TypeMatch(source, t))
    g(LengthMatch(source, len(value), t))
    items = [wrap(tx, v, ItemSource(source, i) if source is not None else None)
             for i, v in enumerate(value)]
    if t is list:
        return ListVariable(items, source)
    if t is tuple:
        return TupleVariable(items, source)
    if t is torch.Size:
        return SizeVariable(items, source)
    if is_structseq(t):
        return StructSeqVariable(items, t, source)
    var = NamedTupleVariable(items, t, source)
    inst = getattr(value, "__dict__", None)
    if type(inst) is dict:  # a subclass's instance attributes, read by NamedTupleVariable.getattr
        var.instance_dict = inst
    return var


def _list(tx, value, source, g):
    """A list: lazy when it has a source (`_lazy_list`), else read whole (`_sequence`)."""
    return _lazy_list(tx, value, source, g) if source is not None else _sequence(tx, value, source, g)


def _tuple(tx, value, source, g):
    """A tuple or torch.Size: a constant when all its items are constants (guarded as it is
    used when it has a source: InputTupleVariable), else `_sequence`; `_sequence` too for an
    input tuple one of whose ints (floats) is dynamic (`_dynamic_items`): that item becomes a
    symbol, as the int argument or list item would (a `shape` tuple or `size` passed in
    pinned each new value until the recompile limit)."""
    if not is_constant_value(value) or (source is not None and _dynamic_items(tx, value, source)):
        return _sequence(tx, value, source, g)
    return InputTupleVariable(tx, value, source) if source is not None else _constant(tx, value, source, g)


def _deque(tx, value, source, g):
    """A deque: its type, length and maxlen; items wrapped through their ItemSources. A mutable
    input when it has a source."""
    t = type(value)
    g(TypeMatch(source, t))
    g(LengthMatch(source, len(value), t))
    if source is not None:
        g(const_guard(AttrSource(source, "maxlen"), value.maxlen))
    items = [wrap(tx, v, ItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
    var = collections_vars.DequeVariable(items, source, maxlen=value.maxlen)
    if source is not None:
        tx.ctx.mutable_inputs.append(var)
    return var


# The process environment's storage (os.environ._data): code reads one variable
# (`os.environ.get("X")`) while the set of variables changes under the program (inductor sets
# TORCHINDUCTOR_CACHE_DIR in its first compile): each read is guarded by its key, never the
# whole key set, which would fail an entry's guards as soon as the backend compiled it.
_READ_BY_KEY = tuple(e._data for e in (os.environ, getattr(os, "environb", None)) if e is not None)


def _dict(tx, value, source, g):
    """A dict, OrderedDict or defaultdict: its exact type and its keys in order (DictKeysMatch);
    values wrapped through their ItemSources when read (DictVariable.read_lazily; all at once
    without a source), a defaultdict's factory through its attribute. Keys that are not
    constants: read by key only (ObjectKeyedDictVariable, type guard only). A mutable input
    when it has a source."""
    t = type(value)
    g(TypeMatch(source, t))
    if source is not None and any(value is d for d in _READ_BY_KEY):
        return keyed_dict.ObjectKeyedDictVariable(value, source)
    keys = tuple(value.keys())
    if not all(is_constant_value(k) for k in keys):
        if source is None:
            raise Unsupported("dict with non-constant keys")
        return keyed_dict.ObjectKeyedDictVariable(value, source)  # read by key only (TypeMatch above)
    try:
        g(DictKeysMatch(source, keys, t))
    except TypeError:
        # keys whose comparison could run user code or merge unequal values (tuples, str or int
        # Enum members): read by key, each read guarded by what it found
        if source is None:
            raise Unsupported("dict with keys that cannot be guarded")
        return keyed_dict.ObjectKeyedDictVariable(value, source)
    items = {k: wrap(tx, v, None) for k, v in value.items()} if source is None else {}
    if t is collections.defaultdict:
        factory = wrap(tx, value.default_factory, AttrSource(source, "default_factory") if source else None)
        var = collections_vars.DefaultDictVariable(items, factory, source)
    else:
        var = DictVariable(items, source, user_cls=t)
    if source is not None:
        var.read_lazily(tx, value)
        tx.ctx.mutable_inputs.append(var)
    return var


def _set(tx, value, source, g):
    """A set of constants: its type and its items in iteration order (equal sets may iterate
    differently). A set of other values is Unsupported."""
    if not all(is_constant_value(k) for k in value):
        raise Unsupported("set of non-constant values")
    g(TypeMatch(source, set))
    frozen = tuple(value)  # in iteration order: equal sets may iterate differently
    g(Predicate.made(source, _set_equals, (frozen,), f"set == {set(frozen)!r}"))
    var = SetVariable([ConstantVariable(v) for v in value], source)
    return var


def _nn_module(tx, value, source, g):
    """An nn.Module: nn_module.module_guard (identity, and what its calls read); its
    attributes, parameters and submodules are guarded when read."""
    g(nn_module.module_guard(source, value))
    return nn_module.wrap_module(tx, value, source, None, guarded=True)


def _by_identity(make):
    """The handler of a kind of value that is guarded by identity alone: an IdMatch on its
    source, then `make(value, source)`."""
    def handler(tx, value, source, g):
        g(IdMatch(source, value))
        return make(value, source)
    return handler


# torch.no_grad / enable_grad / set_grad_enabled (the class): identity.
_grad_mode_class = _by_identity(GradModeClassVariable)


# A Python module: identity (its attributes are guarded when read, unless it is a library namespace:
# runtime/policy.py).
_python_module = _by_identity(PythonModuleVariable)


def _script_function(tx, value, source, g):
    """A @torch.jit.script function: identity; its Python function is traced (torch.jit.script
    keeps it for torch.compile); the ScriptFunction itself cannot be named in a graph's code."""
    g(IdMatch(source, value))
    return UserFunctionVariable(value._torchdynamo_inline)


def _wrapper_object(tx, value, source, g):
    """An object that stands for the function it wraps (a tracer.compile'd function): its
    type (which carries the mark); the function is read, and guarded, when it is called."""
    g(TypeMatch(source, type(value)))
    return WrapperObjectVariable(value, source)


def _opaque(tx, value, source, g):
    """A value the tracer does not look into, pinned by identity: a callable of an untraced
    library (calling it is a graph break that names it), an enum member, a code object, a C
    function the tracer does not model (zlib.crc32: calling it is the break, so the code around
    the call is captured)."""
    g(IdMatch(source, value))
    return OpaqueVariable(value, source)


# A functools.lru_cache wrapper: identity (LruCacheVariable).
_lru_cache = _by_identity(LruCacheVariable)


# nn.Module.__call__ read by name: identity; inlined as a user function.
_module_dispatch = _by_identity(UserFunctionVariable)


def _user_function(tx, value, source, g):
    """A Python function (not torch's): identity, except for a function made by a call (a
    closure, a lambda anywhere, a nested def), usually a new object each time: then its code and
    globals only (defaults, closure cells and attributes are guarded through their sources
    when read); its identity is pinned only if the trace compares it
    (UserFunctionVariable.pin_identity)."""
    if value.__closure__ or "<locals>" in value.__qualname__ or value.__name__ == "<lambda>":
        # (a lambda at a module's top level, a script's or notebook cell's loop: a new one
        # per pass, as inside a function)
        g(Predicate.same_function(source, value.__code__, value.__globals__,
                                  f"a function with the code of {value.__qualname__}"))
        var = UserFunctionVariable(value, source)
        var.identity_guarded = source is None
        return var
    g(IdMatch(source, value))
    # and its code: hot reloading (IPython's autoreload, jurigged) assigns a new __code__ to
    # the same function object, which the trace inlined as it was
    g(Predicate.same_function(source, value.__code__, value.__globals__,
                              f"{value.__qualname__} has the code it was traced with"))
    return UserFunctionVariable(value, source)


# A builtin the tracer models (len, isinstance, math.*, operator.*, functools.reduce, the builtin
# types...): identity.
_builtin = _by_identity(BuiltinVariable)


# A torch function, method or callable object (put in the graph when called): identity.
_torch_function = _by_identity(TorchFunctionVariable)


def _torch_size_class(tx, value, source, g):
    """The class torch.Size: no guard (the rewritten code loads it as a constant)."""
    return TorchFunctionVariable(value, source)


def _partial(tx, value, source, g):
    """A functools.partial: its exact type; its func, args and keywords are wrapped (and
    guarded) through their attributes."""
    t = type(value)
    g(TypeMatch(source, t))
    fsrc = AttrSource(source, "func") if source else None
    asrc = AttrSource(source, "args") if source else None
    ksrc = AttrSource(source, "keywords") if source else None
    func = wrap(tx, value.func, fsrc)
    args = wrap(tx, value.args, asrc).iterate(tx)  # a constant tuple wraps as a ConstantVariable
    kwargs = wrap(tx, value.keywords, ksrc).items
    return PartialVariable(func, args, kwargs, source, real=value)


def _bound_method(tx, value, source, g):
    """A bound method: its type; its object and function are wrapped (and guarded) through
    `__self__` and `__func__`."""
    g(TypeMatch(source, types.MethodType))
    obj = wrap(tx, value.__self__, AttrSource(source, "__self__") if source else None)
    func = wrap(tx, value.__func__, AttrSource(source, "__func__") if source else None)
    return BoundMethodVariable(func, obj, source)


# A class: identity.
_class = _by_identity(ClassVariable)
# A type annotation (List[Tensor], Optional): identity (introspection.py).
_annotation = _by_identity(lambda value, source: introspection.AnnotationVariable(value, source))


def _container_method(tx, value, source, g):
    """`lst.append` as a value (a callback, or on the stack at a graph break): its type and
    name; the container is wrapped (and guarded) through `__self__`."""
    g(TypeMatch(source, type(value)))
    g(const_guard(AttrSource(source, "__name__"), value.__name__))
    owner = wrap(tx, value.__self__, AttrSource(source, "__self__") if source is not None else None)
    return functions.BuiltinMethodVariable(owner, value.__name__)


# The object a graph break inside `with torch.autocast(...)` (or inference_mode) left for the
# resume function: identity.
_block_reentry = _by_identity(lambda value, source: mode_blocks.BlockReentryVariable(value, source))


def _modelled_manager(tx, value, source, g):
    """A torch context manager the trace models, made outside the frame (a module-level
    `torch.autocast(...)` or `torch.no_grad()`, the one a `@torch.inference_mode()` decorator
    keeps): the Variable one made in the frame would be, from the state it holds
    (mode_blocks.of_instance). Its type, and that state by value (`AC.fast_dtype = ...` later
    is another trace); not its identity, so a new manager per call is no recompile."""
    g(TypeMatch(source, type(value)))
    for name, v in mode_blocks.instance_state(value).items():
        g(const_guard(AttrSource(source, name), v))
    return mode_blocks.of_instance(value, source)


def _foreign_generator(tx, value, source, g):
    """A generator or coroutine made outside the trace (or rebuilt at a break): its type. Its
    frame is native, so advancing it is a graph break; it can be passed around and compared."""
    g(TypeMatch(source, type(value)))
    var = OpaqueVariable(value, source)
    if generators.real_generator_needs_finalizer(value):
        tx.ctx.foreign_generators.append(var)  # its drop must not move (generators.py)
    return var


def _opaque_object(tx, value, source, g):
    """An object passed through, never looked into, guarded by its type: an exception or a
    traceback (to a `raise` at a break), an object of an untraced library (runtime/policy.py),
    a torch context manager the tracer does not model (torch.inference_mode(), a profiler
    range: their __enter__ changes C-level state, so a `with` over one is a graph break there
    and its block is captured)."""
    g(TypeMatch(source, type(value)))
    return OpaqueVariable(value, source)


def _ndarray(tx, value, source, g):
    """A NumPy array: a graph input through torch.from_numpy (numpy_vars.wrap_ndarray)."""
    return numpy_vars.wrap_ndarray(tx, value, source, g)


def _numpy_scalar(tx, value, source, g):
    """A NumPy scalar (np.float32(2.0)): a constant, guarded by its type and value."""
    return numpy_vars.wrap_scalar(tx, value, source, g)


def _numpy_function(tx, value, source, g):
    """A NumPy function torch._numpy also has (np.sum, np.linalg.norm, np.float32):
    identity; calling it is a graph node."""
    g(IdMatch(source, value))
    return numpy_vars.NumpyFunctionVariable(value, numpy_vars.traced_name(value), source)


def _ndarray_method(tx, value, source, g):
    """`a.reshape` of an ndarray, read before a graph break and called after it: the array
    (through the method's `__self__`) and the name."""
    g(TypeMatch(source, type(value)))
    g(const_guard(AttrSource(source, "__name__"), value.__name__))
    array = wrap(tx, value.__self__, AttrSource(source, "__self__"))
    if not isinstance(array, numpy_vars.NdarrayVariable):
        return OpaqueVariable(value, source)  # (an array no tensor can stand for)
    return numpy_vars.NdarrayMethodVariable(array, value.__name__)


def _tensor_method(tx, value, source, g):
    """`x.reshape` of a tensor, read before a graph break and called after it (a break in its
    arguments: `x.view(-1, int(n.sum()))`): the tensor (through the method's `__self__`) and the
    name, the method the trace reads off it. Held by identity, each call's new bound method
    failed the guard: a recompile per call, up to the limit."""
    g(TypeMatch(source, type(value)))
    g(const_guard(AttrSource(source, "__name__"), value.__name__))
    t = wrap(tx, value.__self__, AttrSource(source, "__self__"))
    return t.getattr(tx, value.__name__) if isinstance(t, TensorVariable) else OpaqueVariable(value, source)


def _unsupported(tx, value, source, g):
    """Any other builtin or torch object (an optimizer, a Generator, a storage, a stream): held
    untouched by its source, guarded by its type, and any other use of it is a graph break there
    (base.UntracedValue). Loaded by a LOAD_GLOBAL or an attribute read, which are no place for
    a break, such a value made the whole frame run as Python (`opt.zero_grad()` in a training
    step reading a global optimizer; torch.compile breaks at the call). With no source to
    load it from again: Unsupported, naming it."""
    reason = f"value of type {type(value).__qualname__}"
    if source is not None:
        g(TypeMatch(source, type(value)))  # (`if opt is not None`: decided by its type)
        return UntracedValue(value, reason, source)
    err = Unsupported(reason)
    err.untraced_value = value
    raise err


def _user_object(tx, value, source, g):
    """Anything else, an object of a user class: its type; its attributes are guarded when
    read (objects.py)."""
    g(TypeMatch(source, type(value)))
    return UserObjectVariable(value, source)


_CONSTANT_TYPES = (bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented), range, slice,
                   torch.dtype, torch.device, torch.layout, torch.memory_format)
_C_FUNCTION_TYPES = (types.BuiltinFunctionType, types.MethodWrapperType, types.MethodDescriptorType,
                     types.WrapperDescriptorType)
_GENERATOR_TYPES = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)

# Exact types, looked up first: no arm of `_ARMS` before the one named here can match a value
# of exactly this type (subclasses go through `_ARMS`).
_BY_TYPE = {
    torch.Tensor: _tensor, torch.nn.Parameter: _tensor,
    int: _number, float: _number,
    **{c: _constant for c in _CONSTANT_TYPES},
    tuple: _tuple, torch.Size: _tuple, list: _list,
    collections.deque: _deque,
    dict: _dict, collections.OrderedDict: _dict, collections.defaultdict: _dict,
    set: _set,
    type(iter([])): iterator_inputs.list_iterator,
    **{it: iterator_inputs.seq_iterator for it in iterator_inputs.SEQ_ITERATORS if it is not type(iter([]))},
    types.ModuleType: _python_module,
    types.CodeType: _opaque,
    operator.itemgetter: operator_getters.wrap_input, operator.attrgetter: operator_getters.wrap_input,
    object: _opaque,  # a sentinel (`_MISSING = object()`, compared with `is`)
    **{c: _foreign_generator for c in _GENERATOR_TYPES},
}
# (looked up by the type's id: a lookup never calls a metaclass's __hash__ or __eq__; the keys
# live as long as the process)
_BY_TYPE_ID = {id(t): handler for t, handler in _BY_TYPE.items()}

# (test, handler) in the order of decision. A test is a type or a tuple of types (isinstance)
# or a predicate of (value, t), t being type(value).
_TABLE = (
    (torch.Tensor, _tensor),  # subclasses (exact Tensor and Parameter: _BY_TYPE)
    # NumPy: arrays are tensors in the graph, its scalars constants of their own type, the
    # functions torch._numpy has traced as tensor operations (numpy_vars.py)
    (lambda v, t: t.__module__ == "numpy" and numpy_vars.is_ndarray_type(t), _ndarray),
    (lambda v, t: t.__module__ == "numpy" and numpy_vars.is_numpy_scalar(v), _numpy_scalar),
    (lambda v, t: is_constant_value(v), _constant),  # int/str subclasses, IntEnums, frozensets...
    (lambda v, t: isinstance(v, tuple) and (hasattr(t, "_fields") or is_structseq(t)), _sequence),
    (torch.nn.Module, _nn_module),
    (lambda v, t: isinstance(v, type) and any(v is c for c in _GRAD_CLASSES), _grad_mode_class),
    (lambda v, t: policy.is_torch_module(t.__module__) and mode_blocks.instance_state(v) is not None,
     _modelled_manager),
    (types.ModuleType, _python_module),  # subclasses
    (lambda v, t: isinstance(v, torch.jit.ScriptFunction) and
        isinstance(getattr(v, "_torchdynamo_inline", None), types.FunctionType), _script_function),
    (lambda v, t: t is not types.FunctionType and ann.wraps_original(t), _wrapper_object),
    (lambda v, t: callable(v) and numpy_vars.traced_name(v) is not None, _numpy_function),
    (lambda v, t: t is types.BuiltinMethodType and numpy_vars.is_ndarray_type(type(getattr(v, "__self__", None))),
     _ndarray_method),
    (lambda v, t: t is types.BuiltinMethodType and isinstance(getattr(v, "__self__", None), torch.Tensor),
     _tensor_method),
    # before any other callable: a function (an lru_cache wrapper, a method...) of numpy & co.
    (lambda v, t: (t is types.FunctionType or (callable(v) and not isinstance(v, type))) and
        policy.is_untraced_value(v), _opaque),
    (lambda v, t: t is functools._lru_cache_wrapper, _lru_cache),
    (lambda v, t: t is types.FunctionType and is_module_dispatch(v), _module_dispatch),
    (lambda v, t: t is types.FunctionType and (not _is_torch_callable(v) or _stock_forward(v) or
                                               policy.is_inlined_torch_function(v)), _user_function),
    (lambda v, t: _is_builtin_callable(v), _builtin),
    # an object of a torch class whose __call__ is Python code (a pruning hook): not an op
    (lambda v, t: _is_torch_callable(v) and is_traced_object(v, t) and not _is_context_manager(v), _user_object),
    (lambda v, t: callable(v) and _is_torch_callable(v) and not isinstance(v, type)
        and not _is_context_manager(v) and not _bound_to_instance(v), _torch_function),
    (lambda v, t: v is torch.Size, _torch_size_class),
    (lambda v, t: t is functools.partial, _partial),
    (lambda v, t: t is types.MethodType, _bound_method),
    (type, _class),  # any class not claimed above
    (lambda v, t: policy.is_annotation(v), _annotation),
    (enum.Enum, _opaque),
    (lambda v, t: t is types.BuiltinMethodType and type(getattr(v, "__self__", None)) in _CONTAINER_TYPES,
     _container_method),
    (lambda v, t: t is mode_blocks.BlockReentry, _block_reentry),
    (_C_FUNCTION_TYPES, _opaque),  # the C functions not modelled above
    ((BaseException, types.TracebackType), _opaque_object),
    (lambda v, t: policy.is_untraced_module(t.__module__), _opaque_object),
    (lambda v, t: policy.is_torch_module(t.__module__) and _is_context_manager(v), _opaque_object),
    (lambda v, t: t.__module__ == "builtins" or policy.is_torch_module(t.__module__), _unsupported),
    # (anything else: _user_object)
)


def _instance_of(classes):
    return lambda v, t: isinstance(v, classes)


_ARMS = tuple((_instance_of(test) if isinstance(test, (type, tuple)) else test, handler) for test, handler in _TABLE)


def _wrap_fresh(tx, value, source):
    """The Variable for a value met for the first time in this trace, and the guards on the
    value itself (see the table above)."""
    g = (lambda guard: tx.guard(guard)) if source is not None else (lambda guard: None)
    t = type(value)
    handler = _BY_TYPE_ID.get(id(t))
    if handler is not None:
        return handler(tx, value, source, g)
    for test, handler in _ARMS:
        if test(value, t):
            return handler(tx, value, source, g)
    return _user_object(tx, value, source, g)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import builtins_impl, introspection, mode_blocks, sym, torch_vars, collections_vars, nn_module, functions, generators, keyed_dict, numpy_vars  # noqa: E402
