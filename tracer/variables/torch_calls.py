"""Torch calls on Variables: one graph node each, and the Variable for its result.

`call_torch` turns a torch function or tensor method applied to Variables into an FX node
whose example value comes from running the op on the fake tensors (`to_fx` gives both the
node arguments and the fake ones); `wrap_result` gives that example its Variable. Around
them: the refusals (an op that sets global state, an in-place write into a tensor whose
elements share memory) and the guard on a torch query folded to a constant (on a tensor
fact its TensorMatch leaves out: tensor_facts.py).

Torch internals read here: torch._debug_has_internal_overlap and
torch._C._is_any_autocast_enabled (torch 2.15.0 writes a Python scalar into overlapping memory
without raising: docs/torch.md); checked on torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists
them all; tests/test_torch_internals.py resolves each).
"""
import operator
import re
import types

import torch
from guards import QueryMatch
from guards.guard import AUTOCAST_DEVICES

from ..exc import Unsupported
from ..graph import node_meta
from ..graph.output_graph import getitem_node, repoints_input
from ..graph.shapes import SYM_TYPES, is_symbolic
from . import containers, tensor_facts
from .base import ConstantVariable, UntracedValue, is_constant_value


def call_torch(tx, kind, target, args, kwargs):
    if not _number_like_target(kind, target) and _has_numpy_scalar((args, kwargs)):
        # torch.tensor(np.float64(2.0)) keeps float64; in the graph the scalar is a Python number
        raise Unsupported(f"a NumPy scalar given to torch.{getattr(target, '__name__', target)} (its dtype "
                          "would be lost in the graph)")
    if target in _FROM_DATA and len(args) == 1 and _holds_sym(args[0]):
        return _tensor_of_syms(tx, args[0], kwargs)
    node_args, fake_args = to_fx(args)
    node_kwargs, fake_kwargs = to_fx(kwargs)
    if _is_indexing(kind, target) and len(fake_args) >= 2:
        policy = tx.output.shapes.policy
        stand_in = scalar_index_stand_in(fake_args[1]) if policy.scalar_index else fake_args[1]
        if stand_in is not fake_args[1]:
            policy.made_scalar_index = True
            fake_args = [fake_args[0], stand_in, *fake_args[2:]]
    if kind == "call_function":
        fn = lambda: target(*fake_args, **fake_kwargs)  # noqa: E731
    else:
        fn = lambda: getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)  # noqa: E731
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if "out" in fake_kwargs:
        fn = _not_resizing_out(fn, name, fake_kwargs["out"])
    reads_state = kind == "call_function" and not _mentions_node((node_args, node_kwargs))
    if reads_state and _EFFECT_NAME.match(name):
        raise Unsupported(f"torch.{name}() changes global state outside the graph")
    mutating = name.endswith("_") or "out" in kwargs or target is operator.setitem
    if _writes_in_place(name, kwargs):
        _refuse_overlapping_write(name, fake_args, fake_kwargs)
    node, example = tx.output.create_node(kind, target, node_args, node_kwargs, fn)
    if example is None and not mutating:
        _refuse_effect_only(tx, node, target, name)
    node_meta.annotate(tx, node, example, target)
    result = wrap_result(tx, node, example, mutating=mutating, inputs=(args, kwargs))
    if isinstance(result, ConstantVariable) and tensor_facts.is_fact(name) and args and \
            isinstance(args[0], tensor.TensorVariable):  # `x._is_view()`, `Tensor.is_shared(x)`
        result = ConstantVariable(tensor_facts.fold(tx, args[0], name, result.value,
                                                    with_args=len(args) > 1 or bool(kwargs)))
    if reads_state and isinstance(result, ConstantVariable):
        _guard_query(tx, target, name, fake_args, fake_kwargs, result.value)
    return result


# torch's Python checks: run on fakes, what they check becomes a guard or an assertion of the
# shape environment (a SymBool condition); a tensor condition needs its data (a break).
_CHECKS = frozenset(getattr(torch, n) for n in (
    "_check", "_check_is_size", "_check_index", "_check_value", "_check_type", "_check_not_implemented",
    "_check_with", "_assert") if hasattr(torch, n))


def _refuse_effect_only(tx, node, target, name):
    """A Python function (not an op) that returned None was called for its effect:
    `vector_to_parameters` assigns `p.data`, `torch.utils.swap_tensors` swaps two objects,
    `torch.optim.sgd.sgd` updates in place. As one node erased for computing nothing (an op
    returning None is a query), the effect was lost; kept, AOTAutograd would re-run it on its
    own fakes. The call runs as Python instead (the torch code the trace inlines never gets
    here: runtime/policy.py INLINED_TORCH)."""
    if not isinstance(target, types.FunctionType) or target in _CHECKS:
        return
    tx.output.graph.erase_node(node)
    raise Unsupported(f"{target.__module__}.{target.__qualname__}() returned None: a Python function of "
                      "torch's called for its effect, not an op")


# The legacy tensor types. Called with data they copy it as torch.tensor(data, dtype=...) does;
# with sizes they make an uninitialised tensor as torch.empty does; with a tensor of their own
# dtype they return that very tensor (an alias: refused). torch.Tensor's dtype is the default
# one, which the global-state guard pins.
LEGACY_TENSOR_TYPES = {getattr(torch, n): getattr(torch, n).dtype for n in (
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
    "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor")}
LEGACY_TENSOR_TYPES[torch.Tensor] = None


def _legacy_options(dtype):  # (the legacy types are CPU tensors whatever the default device)
    return {"dtype": ConstantVariable(dtype), "device": ConstantVariable(torch.device("cpu"))}


def legacy_constructor(tx, cls, args, kwargs):
    """`torch.LongTensor([1, 2])`, `torch.Tensor(2, 3)`, `torch.FloatTensor()`: one node."""
    name = cls.__name__
    dtype = LEGACY_TENSOR_TYPES[cls] or torch.get_default_dtype()
    if kwargs:
        raise Unsupported(f"torch.{name}() with keyword arguments")
    if all(type(a) is ConstantVariable and type(a.value) is int for a in args):
        sizes = tuple(a.value for a in args) if args else (0,)
        return call_torch(tx, "call_function", torch.empty, [ConstantVariable(sizes)], _legacy_options(dtype))
    if len(args) == 1 and (type(args[0]) in (containers.ListVariable, containers.TupleVariable) or
                           type(args[0]) is ConstantVariable and type(args[0].value) in (list, tuple)):
        return call_torch(tx, "call_function", torch.tensor, list(args), _legacy_options(dtype))
    raise Unsupported(f"torch.{name}() of {args[0]!r}: only data (a list or tuple) or sizes are traced "
                      "(of a tensor it may return the same tensor)")


def _number_like_target(kind, target):
    """An operator (`t * s`): torch takes a NumPy scalar as the Python number it holds."""
    if kind == "call_function":
        return getattr(target, "__module__", None) == "_operator"
    return isinstance(target, str) and target.startswith("__")


def _has_numpy_scalar(value):
    if isinstance(value, dict):
        return any(_has_numpy_scalar(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_numpy_scalar(v) for v in value)
    if isinstance(value, containers.BaseSequence):
        return _has_numpy_scalar(value.items)
    return value.is_constant() and numpy_vars.is_numpy_scalar(value.as_constant())


_INDEXING_METHODS = ("__getitem__", "__setitem__")


def _is_indexing(kind, target):
    """`x[i]` or `x[i] = v` on a tensor (the operator or the Tensor method)."""
    if kind == "call_function":
        return target is operator.getitem or target is operator.setitem
    return target in _INDEXING_METHODS


def _is_scalar_int_index(t):
    """A 0-d integer tensor: torch's indexing reads it as the int it holds (a select that
    drops the dim, a view, negative values counting from the end), exactly as `x[int(t)]`
    (ATen's applySlicing). Bool and uint8 0-d tensors are masks (a data-dependent size)."""
    return (isinstance(t, torch.Tensor) and t.dim() == 0 and t.dtype not in (torch.bool, torch.uint8)
            and not t.dtype.is_floating_point and not t.dtype.is_complex)


def scalar_index_stand_in(key):
    """The index the fake run of `x[key]` uses: each 0-d integer tensor in it is replaced by
    the int 0. The graph node keeps the tensor (at run time the real `x[t]` reads its value,
    as eager does: same view, same bounds check), but the fake `t` has no value: read, it is
    a data-dependent scalar (`aten._local_scalar_dense`), the graph break this avoids. The
    result's shape, dtype, strides and view-ness do not depend on which in-range int is
    read, so the int 0 gives the fake result; a dimension of size 0 has no valid index, and
    the fake run's IndexError is the graph break it should be (eager raises for any t)."""
    if _is_scalar_int_index(key):
        return 0
    if type(key) is tuple and any(_is_scalar_int_index(k) for k in key):
        return tuple(0 if _is_scalar_int_index(k) else k for k in key)
    return key


def _guard_query(tx, fn, name, args, kwargs, value):
    """A torch call on no tensor folded to a constant may have read global state (profiler
    on? cuda available? autocast dtype?): guard that the call still gives that value."""
    if fn in _STATE_IN_GLOBAL_GUARD or fn in _PURE_TORCH_QUERIES or value is None:
        return  # (a None result is most likely a call made for an effect: never re-run it in a guard)
    if fn in _AUTOCAST_QUERIES and _autocast_device_guarded(args, kwargs):
        return  # every entry's GlobalStateMatch compares that device's autocast state
    tx.guard(QueryMatch(fn, tuple(args), tuple(sorted(kwargs.items())), value))


_FROM_DATA = (torch.tensor, torch.as_tensor)


def _holds_sym(var):
    """A symbolic number, or a list or tuple holding one at any depth."""
    if isinstance(var, sym.SymNodeVariable):
        return True
    return type(var) in (containers.ListVariable, containers.TupleVariable) and any(map(_holds_sym, var.items))


def _tensor_of_syms(tx, data, kwargs):
    """`torch.tensor(n)`, `torch.as_tensor([[n, 1]])` of symbolic numbers (a size, an int
    handed on as dynamic, `t.item()`): a `torch.scalar_tensor` per number, stacked, with the
    dtype torch.tensor would infer. Fake torch.tensor needs the values themselves: it pinned
    them (a recompile per size), and under AOTAutograd baked `torch.tensor(SymInt)` into a
    constant truncated to 32 bits (2**31 + 5 came back negative)."""
    if set(kwargs) - {"dtype", "device", "requires_grad"}:
        raise Unsupported(f"torch.tensor() of symbolic numbers with {sorted(kwargs)}")
    leaves = _leaves(data)
    if "dtype" not in kwargs:
        kwargs = dict(kwargs, dtype=ConstantVariable(_inferred_dtype([v.python_type() for v in leaves])))
    if "requires_grad" in kwargs and not isinstance(data, sym.SymNodeVariable):
        raise Unsupported("torch.tensor() of a list of symbolic numbers with requires_grad")  # (a stack is no leaf)
    return _stacked(tx, data, kwargs)


def _leaves(var):
    if type(var) in (containers.ListVariable, containers.TupleVariable):
        return [leaf for item in var.items for leaf in _leaves(item)]
    if isinstance(var, sym.SymNodeVariable) or type(var) is ConstantVariable and type(var.value) in (int, float, bool):
        return [var]
    raise Unsupported(f"torch.tensor() of symbolic numbers beside {var!r}")


def _inferred_dtype(types_):
    """torch.tensor's dtype for data of these Python types (complex: not traced here)."""
    if all(t is bool for t in types_):
        return torch.bool
    if any(t is float for t in types_):
        return torch.get_default_dtype()
    if all(t in (int, bool) for t in types_):
        return torch.int64
    raise Unsupported("torch.tensor() of symbolic numbers of another type")


def _stacked(tx, var, kwargs):
    if type(var) not in (containers.ListVariable, containers.TupleVariable):
        return call_torch(tx, "call_function", torch.scalar_tensor, [var], kwargs)
    rows = [_stacked(tx, item, kwargs) for item in var.items]
    if not rows or len({r.example.shape for r in rows}) != 1:
        raise Unsupported("torch.tensor() of a ragged or empty list of symbolic numbers")
    return call_torch(tx, "call_function", torch.stack, [containers.ListVariable(rows)], {})


def wrap_result(tx, node, example, mutating=False, inputs=None):
    """The Variable for an op's result. `inputs` (the op's argument Variables): a result
    that IS one of the input tensors (`x.float()` of a float tensor, `x.contiguous()`,
    `torch.atleast_1d(x)`, `x += 1`; the fake kernel returns the very fake it was
    given, as the real one returns its input) is that input's Variable, so identity
    (`y is x`) and the Python attributes set on the object carry over. The node stays in
    the graph (an in-place op's write is its point; a no-op conversion costs nothing)."""
    ctx = tx.ctx
    if not ctx.ops_under_handler:
        ctx.ops_under_handler = tx.under_handler()
    if ctx.history_write_at is None and node.meta.get("writes") and ctx.output.writes_history(node):
        ctx.history_write_at = (ctx.root_steps - 1, ctx.root_frame.current)
    if repoints_input(node):  # (a compiling backend refuses it: trace/convert_frame.py)
        node_meta.stamp(node, ctx)
    same = _tensors_by_fake(inputs) if inputs is not None else {}
    if isinstance(example, torch.Tensor):
        var = same.get(id(example))
        if var is not None:
            return var
        if node_meta.makes_leaf(example):  # (`torch.ones(2, requires_grad=True)`)
            node.meta[node_meta.MADE_LEAF] = (ctx.root_steps - 1, ctx.root_frame.current)
        return tensor.TensorVariable(node, example)
    if isinstance(example, SYM_TYPES) or (type(example) is torch.Size and any(map(is_symbolic, example))):
        return sym.wrap_sym_result(tx, node, example)
    if isinstance(example, (tuple, list)) and _has_tensor(example):
        items = []
        for i, ex in enumerate(example):
            var = same.get(id(ex)) if isinstance(ex, torch.Tensor) else None
            items.append(var if var is not None else
                         wrap_result(tx, getitem_node(tx.output, node, i), ex))
        fields = getattr(type(example), "_fields", None)
        if isinstance(example, list):
            return containers.ListVariable(items)
        if named_tuples.is_structseq(type(example)):
            return named_tuples.StructSeqVariable(items, type(example))
        if fields is not None and type(example) is not tuple:
            return named_tuples.NamedTupleVariable(items, type(example))
        return containers.TupleVariable(items)
    if example is None and mutating:
        return ConstantVariable(None)
    tx.output.graph.erase_node(node)
    if is_constant_value(example):
        return ConstantVariable(example)
    if type(example) in (torch.no_grad, torch.enable_grad):
        # e.g. the `ctx_factory()` of @torch.no_grad(): a fresh grad-mode context manager
        return torch_vars.GradModeVariable(type(example) is torch.enable_grad)
    raise Unsupported(f"torch op returned {type(example).__name__}, which has no graph meaning")


# Torch queries whose answer GlobalStateMatch already guards, or that depend on their
# arguments only: no per-query guard.
_STATE_IN_GLOBAL_GUARD = {torch.is_grad_enabled, torch.is_inference_mode_enabled, torch.get_default_dtype,
                          torch.are_deterministic_algorithms_enabled,
                          torch.is_deterministic_algorithms_warn_only_enabled, torch._C._is_any_autocast_enabled}
# autocast queries answered by what every entry's GlobalStateMatch compares, for its devices:
# whether autocast is on (all off, or each device's flag and dtype). Not get_autocast_dtype:
# with autocast off, GlobalStateMatch does not compare dtypes (they change no op), so a
# folded dtype query keeps its own guard.
_AUTOCAST_QUERIES = {torch.is_autocast_enabled}


def _autocast_device_guarded(args, kwargs):
    """The device an autocast query asks about is one GlobalStateMatch compares
    (is_autocast_enabled() without one asks about cuda)."""
    kw = dict(kwargs)
    if len(args) + len(kw) > 1 or set(kw) - {"device_type"}:
        return False
    dev = args[0] if args else kw.get("device_type", "cuda")
    return isinstance(dev, str) and dev in AUTOCAST_DEVICES  # (it takes no torch.device)


_PURE_TORCH_QUERIES = {torch.promote_types, torch.can_cast, torch.is_tensor, torch.is_storage,
                       torch.result_type, torch.is_floating_point, torch.is_complex, torch.broadcast_shapes,
                       torch._none_or_dtype if hasattr(torch, "_none_or_dtype") else torch.is_tensor}
# Names of torch functions that set state rather than compute: never called while tracing.
# (a torch object's bound __enter__/__exit__, e.g. an autocast entered before the frame and
# left in it, is a context manager's effect too; autocast's nesting counter is state)
_EFFECT_NAME = re.compile(
    r"_?(set_|use_|enable_|disable_|reset_|clear_|register_|manual_seed|seed$|empty_cache|synchronize"
    r"|_enter__$|_exit__$|enter_|exit_|push_|pop_|increment_version"
    r"|\w*(increment|decrement)_nesting)")


def _mentions_node(value):
    if isinstance(value, torch.fx.Node):
        return True
    if isinstance(value, (list, tuple)):
        return any(_mentions_node(v) for v in value)
    if isinstance(value, dict):
        return any(_mentions_node(v) for v in value.values())
    return False


def _has_tensor(value):
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_has_tensor(v) for v in value)
    return False


_INPLACE_OPS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                "lshift", "rshift", "matmul")
_INPLACE_DUNDERS = frozenset(f"__i{op}__" for op in _INPLACE_OPS) | {"__setitem__"}
_INPLACE_OPERATORS = frozenset(f"i{op}" for op in _INPLACE_OPS) | {"setitem"}  # operator.iadd


def _writes_in_place(name, kwargs):
    """The op writes into its first argument (`add_`, `__iadd__`, `operator.iadd`,
    `x[i] = v`) or into `out=`."""
    if "out" in kwargs or name in _INPLACE_OPERATORS:
        return True
    if name.startswith("__") and name.endswith("__"):
        return name in _INPLACE_DUNDERS
    return name.endswith("_")


def _not_resizing_out(fn, name, out):
    """`fn` (the op on fakes), refused when it resizes its `out=` tensors (`torch.add(x, 1,
    out=torch.empty(0))`): eager resizes them, but AOTAutograd and inductor cannot write a
    result of another size into a graph input, and the input's fake, from which its guards
    are made, would be the resized one. The call runs as Python instead."""
    outs = [t for t in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(t, torch.Tensor)]

    def run():
        before = [(t.shape, t.stride()) for t in outs]
        result = fn()
        if any((t.shape, t.stride()) != b for t, b in zip(outs, before)):
            raise Unsupported(f"{name or 'op'}: resizes its out= tensor (eager does; a graph cannot)")
        return result
    return run


def _refuse_overlapping_write(name, fake_args, fake_kwargs):
    """An in-place write (`x.add_(1)`, `x[i] = v`, `out=`) into a tensor whose elements share
    memory (`a[:1].expand_as(a)`: a stride 0) raises RuntimeError in eager for most ops, but
    the fake kernels do not check it: traced, the graph would raise at run time, after the
    frame's earlier side effects were recorded but before they are replayed (they would be
    lost). Unsupported: the write runs as Python, after those effects, and raises (or not)
    as eager does."""
    written = [fake_args[0]] if fake_args else []
    out = fake_kwargs.get("out")
    written += list(out) if isinstance(out, (list, tuple)) else [out]
    for t in written:
        if isinstance(t, torch.Tensor) and _has_internal_overlap(t):
            raise Unsupported(f"{name or 'in-place op'}: writes into a tensor whose elements share "
                              f"memory (expanded; eager may raise at run time)")


def _has_internal_overlap(t):
    try:
        return torch._debug_has_internal_overlap(t) == 1  # 1: YES (a stride 0 over size > 1)
    except Exception:  # noqa: BLE001 - symbolic strides it cannot decide: no known overlap
        return False


def _tensors_by_fake(value, out=None):
    """id(fake tensor) -> the TensorVariable that holds it, for every tensor in an op's
    arguments (nested in lists, tuples and dicts too)."""
    out = {} if out is None else out
    if isinstance(value, tensor.TensorVariable):
        out.setdefault(id(value.example), value)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors_by_fake(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors_by_fake(v, out)
    elif isinstance(value, containers.BaseSequence):
        _tensors_by_fake(value.items, out)
    return out


def to_fx(value):
    """Variables -> (FX node arguments, fake-tensor arguments), structure preserved."""
    if isinstance(value, dict):
        pairs = {k: to_fx(v) for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(value, (list, tuple)):
        pairs = [to_fx(v) for v in value]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(value, (tensor.TensorVariable,)):
        return value.node, value.example
    if isinstance(value, sym.SymNodeVariable):
        return value.node, value.value
    if isinstance(value, sym.SliceVariable):
        return value.fx_arg()
    if isinstance(value, containers.SizeVariable):
        nodes, fakes = to_fx(value.items)
        return tuple(nodes), torch.Size(fakes)
    if isinstance(value, containers.BaseSequence):
        nodes, fakes = to_fx(value.items)
        kind = list if isinstance(value, containers.ListVariable) else tuple
        return kind(nodes), kind(fakes)
    if value.is_constant():
        c = graph_constant(value.as_constant())
        return c, c
    if isinstance(value, torch_vars.TorchFunctionVariable):
        if isinstance(value.fn, (types.BuiltinFunctionType, types.FunctionType)):
            # FX writes a function argument with repr(): `<built-in method sin ...>` is no code
            raise Unsupported(f"the function {getattr(value.fn, '__name__', value.fn)} passed to a torch op")
        return value.fn, value.fn
    raise Unsupported(f"{_kind_of(value)} passed to a torch op (an op takes tensors, numbers and lists or "
                      "tuples of them)")


def _kind_of(value):
    """What was passed, in the user's words (`a generator object`), not the Variable's class
    (`IteratorVariable()` was the message)."""
    if isinstance(value, UntracedValue):  # (held untouched: its type is not asked of the Variable)
        return f"a {type(value.value).__name__} object"
    try:
        return f"a {value.python_type().__name__} object"
    except Unsupported:
        return f"{value}"


_GRAPH_SCALARS = (bool, int, float, complex, str)


def graph_constant(c):
    """A constant as a graph node argument: the generated FX code spells it with repr(), so it
    must be a builtin value (np.float64(2.0) would print as `np.float64(2.0)`: NameError in
    the graph's namespace). A subclass of a builtin scalar (numpy scalars, IntEnum members)
    is its builtin value, which torch treats the same way (a wrapped Python number)."""
    t = type(c)
    if t in _GRAPH_SCALARS or c is None or t in (tuple, list):
        return t(graph_constant(v) for v in c) if t in (tuple, list) else c
    for base in _GRAPH_SCALARS:
        if isinstance(c, base):
            return base(c)
    if numpy_vars.is_numpy_scalar(c):  # np.int64(12): torch takes it as the number it holds
        return c.item()
    return c


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, named_tuples, numpy_vars, sym, tensor, torch_vars  # noqa: E402
