"""One NumPy operation as a graph node: the refusals, NumPy asked, the result's Variables.

`call` is where every traced NumPy function, method, operator, index and item write goes
(numpy_vars.py holds the values and decides what is a NumPy call). Before the node is made:
the calls whose values torch._numpy computes otherwise are refused by name, NumPy's error
state is guarded, NumPy itself is asked about the result on stand-in arrays
(numpy_oracle.py) and torch's kernel is run on them (a kernel torch lacks raises here, not
in the user's graph). After: tnp's result must be NumPy's (kind, dtype, shape, aliasing,
writeability), writes between views of one memory are refused, and the result becomes
NdarrayVariables.
"""
import math

import torch
from guards import QueryMatch
from guards.tensor import storage_id

from ..exc import Unsupported
from ..graph import node_meta, numpy_ops
from ..graph.output_graph import getitem_node
from .base import ConstantVariable, ObjectVariable


def call(tx, target, args, kwargs):
    """One node computing a NumPy operation; its result as Variables. `target` is a tnp name
    ("sum", "linalg.norm", "operator.add", "method.reshape") or a numpy_ops function. NumPy
    itself is asked what the result is (numpy_oracle.py): tnp's must be the same kind (array
    or scalar), dtype and shape, alias the same arguments, or the call is a graph break.
    (`scalar` is unused: kept for the callers' documentation of what they expect.)"""
    holders = {}
    node_args, fake_args = to_fx(tx, args, holders)
    node_kwargs, fake_kwargs = to_fx(tx, kwargs, holders)
    name = _oracle_name(target, args)
    if isinstance(name, str) and name.startswith("linalg.") and tx.under_handler():
        raise Unsupported(f"numpy {name} inside a try block (it raises LinAlgError from the data)")
    _refuse_known_differences(name, args, kwargs)
    _guard_error_state(tx)
    arrays, stand = [], _StandIns()
    answer = stand.ask(name, args, kwargs)
    if isinstance(target, str) and target.startswith("method."):
        fn, node_args = numpy_ops.ndarray_method, [target[7:], *node_args]
        fake_args = [target[7:], *fake_args]
    elif isinstance(target, str):
        fn, node_args, fake_args = numpy_ops.ndarray_call, [target, *node_args], [target, *fake_args]
    else:
        fn = target
    stand.run_torch(fn, node_args, node_kwargs, name)
    node, example = tx.output.create_node("call_function", fn, node_args, node_kwargs,
                                          lambda: fn(*fake_args, **fake_kwargs))
    node_meta.annotate(tx, node, example, fn)
    _refuse_overlapping_write(tx, name, args, kwargs, fake_args, fake_kwargs)
    return _wrap(tx, node, example, answer, stand, name)


_DEFAULT_ERRSTATE = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}


def _guard_error_state(tx):
    """NumPy's floating-point error handling (np.errstate, np.seterr) is its default: tnp
    never raises FloatingPointError, so under another setting NumPy's code runs as Python,
    and an entry traced under the default is not used under another."""
    geterr = numpy_vars.np_module().geterr
    if geterr() != _DEFAULT_ERRSTATE:
        raise Unsupported("NumPy's error handling is set (np.errstate / np.seterr): NumPy raises or warns "
                          "where torch._numpy does not")
    tx.guard(QueryMatch(geterr, (), (), dict(_DEFAULT_ERRSTATE)))


def _oracle_name(target, args):
    if target is numpy_ops.ndarray_attr:
        return "attr." + args[1].as_constant()
    if target is numpy_ops.ndarray_setitem:
        return "setitem"
    return target


# Calls whose values torch._numpy computes otherwise than NumPy (found by review and by
# differential runs), where dtypes and shapes agree: a graph break
_VALUE_DIFFERENCES = {
    "cbrt": "cbrt of negative numbers (tnp: nan)", "fix": "fix of negative halves",
    "argsort": "the order of ties", "method.argsort": "the order of ties",
    "isscalar": "isscalar of an array", "method.resize": "resize in place",
    "resize": "resize", "method.is_integer": "is_integer needs the value",
    "errstate": "np.errstate", "seterr": "np.seterr",
}
_INT_DIVISION = {"floor_divide", "remainder", "mod", "fmod", "divmod", "operator.floordiv", "operator.mod",
                 "operator.ifloordiv", "operator.imod", "method.__floordiv__", "method.__mod__"}
_POWER = {"power", "operator.pow", "operator.ipow", "float_power"}
_ROUND = {"round", "around", "round_", "method.round"}


def _refuse_known_differences(name, args, kwargs):
    _refuse_out_of_range_ints(name, args, kwargs)
    if name == "arange" and any(v.is_constant() and isinstance(v.as_constant(), float) and
                                not _short_binary(v.as_constant()) for v in (*args, *kwargs.values())):
        raise Unsupported("numpy arange with float bounds or step (NumPy's last bits differ)")
    why = _VALUE_DIFFERENCES.get(name)
    if why is not None and not (name.endswith("argsort") and _const_kw(kwargs, "kind") == "stable"):
        raise Unsupported(f"numpy {name}: torch._numpy differs from NumPy ({why})")
    kinds = {v.example.dtype.is_floating_point or v.example.dtype.is_complex for v in args
             if isinstance(v, numpy_vars.NdarrayVariable)}
    divisor = args[1] if len(args) > 1 else None
    by_constant = divisor is not None and divisor.is_constant() and type(divisor.as_constant()) in (int, float) \
        and divisor.as_constant() != 0
    if name in _INT_DIVISION and False in kinds and not by_constant:
        raise Unsupported(f"numpy {name} of integers (by zero NumPy gives 0, torch raises)")
    if name in _POWER and False in kinds:
        exp = args[1] if len(args) > 1 else None
        if not (exp is not None and exp.is_constant() and type(exp.as_constant()) is int and exp.as_constant() >= 0):
            raise Unsupported(f"numpy {name} of integers to a power not known to be >= 0")
    decimals = _const_kw(kwargs, "decimals") if "decimals" in kwargs else \
        (args[1].as_constant() if len(args) > 1 and args[1].is_constant() else 0 if len(args) <= 1 else None)
    if name in _ROUND and decimals != 0:
        raise Unsupported(f"numpy {name} with decimals (tnp rounds otherwise, or not at all for integers)")


def _refuse_out_of_range_ints(name, args, kwargs):
    """A Python int beside an integer array that the array's dtype cannot hold (`u8 == 256`,
    `u8 < -1`): NumPy compares the values (or raises), torch._numpy wraps the int first."""
    np = numpy_vars.np_module()
    arrays = [v for v in (*args, *kwargs.values()) if isinstance(v, numpy_vars.NdarrayVariable)]
    ints = [v.as_constant() for v in (*args, *kwargs.values()) if v.is_constant() and type(v.as_constant()) is int]
    for a in arrays:
        dt = a.dtype()
        if dt.kind in "iu" and any(not np.iinfo(dt).min <= c <= np.iinfo(dt).max for c in ints):
            raise Unsupported(f"numpy {name}: an int out of {dt}'s range beside a {dt} array")


def _short_binary(x):
    """A float with a short binary fraction (0.25, 1.5): arange's steps are then exact in both."""
    return math.isfinite(x) and x == round(x * 1024) / 1024


def _const_kw(kwargs, key):
    v = kwargs.get(key)
    return v.as_constant() if v is not None and v.is_constant() else None


class _StandIns:
    """The stand-in values of one call's arguments (numpy_oracle.py), one per array Variable."""

    def __init__(self):
        self.arrays, self.vars, self.exact, self.key = [], [], True, None
        self.by_node = {}  # graph node of an array argument -> its stand-in (run_torch)

    def ask(self, name, args, kwargs):
        np = numpy_vars.np_module()
        if name == "operator.getitem" and len(args) == 2:
            self.key = args[1]
        try:
            a = [self.value(v, index=(name in ("operator.getitem", "setitem") and i == 1))
                 for i, v in enumerate(args)]
            k = {key: self.value(v) for key, v in kwargs.items()}
        except numpy_vars.NotPlain:
            raise Unsupported(f"numpy {name}: an argument NumPy cannot be asked about at trace time") from None
        if name.startswith("attr."):
            a = a[:1]
        try:
            return numpy_oracle.ask(numpy_oracle.call_of(np, name), a, k, self.arrays, self.exact)
        except numpy_oracle.Failed as e:
            raise Unsupported(f"numpy {name}: NumPy raises on arrays like these ({e})") from None

    def run_torch(self, fn, node_args, node_kwargs, name):
        """Run the node's own function on the stand-ins as tensors: a kernel torch lacks for
        these dtypes (`ceil` of bools, `sign` of complex) raises here, not in the user's graph.
        (The fake run checks shapes and dtypes, not that a kernel exists.)"""
        missing = []

        def real(a):
            if isinstance(a, torch.fx.Node):
                v = self.by_node.get(a)
                if v is None:
                    missing.append(a)
                return torch.from_numpy(v.copy()) if v is not None else None
            if isinstance(a, (list, tuple)):
                return type(a)(real(x) for x in a)
            return a
        args, kwargs = real(list(node_args)), {k: real(v) for k, v in node_kwargs.items()}
        if missing:  # (an argument made in the graph with no stand-in: a NumPy scalar node)
            return
        try:
            fn(*args, **kwargs)
        except NotImplementedError as e:
            raise Unsupported(f"numpy {name}: torch has no kernel for it here ({str(e).splitlines()[0][:80]})") from None
        except Exception:  # noqa: BLE001 - values of the stand-ins; the fake run decides the rest
            pass

    def value(self, v, index=False):
        np = numpy_vars.np_module()
        if isinstance(v, numpy_vars.NdarrayVariable):
            for i, seen in enumerate(self.vars):
                if seen is v:
                    return self.arrays[i]
            shape = tuple(_hint(s) for s in v.example.shape)
            n = math.prod(shape)
            if n > numpy_oracle.SIZE_LIMIT:
                raise Unsupported("a NumPy array too large to ask NumPy about at trace time")
            arr = numpy_oracle.stand_in(v.dtype(), shape, n <= numpy_oracle.STAND_IN_LIMIT)
            if v.scalar:
                return arr[()] if arr.ndim == 0 else arr
            self.arrays.append(arr)
            self.vars.append(v)
            if v.view_of is None:
                self.by_node[v.tensor.node] = arr
            return arr
        if isinstance(v, (containers.ListVariable, containers.TupleVariable)) and \
                not isinstance(v, containers.SizeVariable):
            items = [self.value(x, index) for x in v.items]  # (a key's items may be sizes too)
            return items if isinstance(v, containers.ListVariable) else tuple(items)
        if isinstance(v, sym.SymNodeVariable):
            if not index:
                raise Unsupported("a symbolic size given to a NumPy operation (torch._numpy makes it a "
                                  "constant: one entry per size, each unguarded)")
            return _hint(v.value)
        if isinstance(v, sym.SliceVariable):
            sl = v.fx_arg()[1]
            return slice(*(_hint(x) if x is not None else None for x in (sl.start, sl.stop, sl.step)))
        dtype = dtype_name(v)
        if dtype is not None:
            return dtype
        if v.is_constant():
            c = v.as_constant()
            if type(c) is tuple or type(c) is torch.Size:
                return tuple(c)
            return c
        raise numpy_vars.NotPlain


def _hint(s):
    """A size's value in this trace's example (a stand-in's size, an index into one)."""
    if isinstance(s, (torch.SymInt, torch.SymFloat)):
        hint = s.node.hint
        if hint is None:
            raise Unsupported("a NumPy operation on a size known only at run time")
        return hint
    return s


def _refuse_overlapping_write(tx, name, args, kwargs, fake_args, fake_kwargs):
    """A write into an array from another view of the same memory (`a[1:] = a[:-1]`,
    `a += a.T`): NumPy buffers it, torch raises or reads what it already wrote. The same
    view written onto itself (`a[:, 1] *= 2` stores `a[:, 1]` back) is fine."""
    writes = name == "setitem" or (name.startswith("operator.i") and name not in ("operator.is_", "operator.is_not")) \
        or "out" in kwargs or name in numpy_vars._WRITING_FUNCTIONS
    if not writes:
        return
    target = kwargs.get("out", args[0] if args else None)
    if not isinstance(target, numpy_vars.NdarrayVariable):
        return
    refuse_write_into(target, name)
    dest = target.example
    if name == "setitem":
        try:
            with tx.output.fake_mode:
                dest = numpy_ops.ndarray_getitem(target.example, fake_args[-2])
        except Exception:  # noqa: BLE001 - the destination cannot be told: assume the worst
            dest = None
    sid = storage_id(target.example)
    for v in [*args, *kwargs.values()]:
        if isinstance(v, numpy_vars.NdarrayVariable) and v is not target and storage_id(v.example) == sid and \
                (dest is None or _geometry(v.example) != _geometry(dest)):
            raise Unsupported(f"numpy {name}: writes into an array from another view of its memory")


def refuse_write_into(target, name):
    if not isinstance(target, numpy_vars.NdarrayVariable):
        return
    if target.read_only:
        raise Unsupported(f"numpy {name}: writes into a read-only view (NumPy raises)")
    if target.view_of is not None:
        raise Unsupported(f"numpy {name}: writes through a view NumPy shares with its base and torch copies")


def _geometry(t):
    return (t.storage_offset(), tuple(t.shape), tuple(t.stride()))


def _wrap(tx, node, example, answer, stand, name):
    if isinstance(example, torch.Tensor):
        return _wrap_array(tx, node, example, answer, stand, name)
    if isinstance(example, (tuple, list)) and any(isinstance(e, torch.Tensor) for e in example):
        if type(answer) not in (tuple, list) or len(answer) != len(example):
            raise Unsupported(f"numpy {name}: its results are not NumPy's")
        items = []
        for i, (ex, leaf) in enumerate(zip(example, answer)):
            sub = getitem_node(tx.output, node, i) if isinstance(ex, torch.Tensor) else None
            if sub is None:
                raise Unsupported(f"numpy {name}: a result mixing arrays and other values")
            items.append(_wrap_array(tx, sub, ex, leaf, stand, name))
        return (containers.ListVariable if type(answer) is list else containers.TupleVariable)(items)
    if example is None:
        if node.meta.get("writes"):
            return ConstantVariable(None)
        tx.output.graph.erase_node(node)
        return ConstantVariable(None)
    tx.output.graph.erase_node(node)
    if isinstance(answer, numpy_oracle.Leaf) and answer.kind == "value" and type(answer.value) is type(example) \
            and (not stand.exact or answer.value == example) and \
            (type(example) in (bool, int) or (type(example) is tuple and all(type(e) is int for e in example))):
        return ConstantVariable(example)  # np.ndim, np.shape, np.size: metadata
    raise Unsupported(f"numpy {name}: returns {type(example).__name__}, which has no graph meaning")


def _wrap_array(tx, node, example, leaf, stand, name):
    np = numpy_vars.np_module()
    if not isinstance(leaf, numpy_oracle.Leaf) or leaf.kind == "value":
        raise Unsupported(f"numpy {name}: NumPy's result is not an array here")
    got = np.dtype(str(example.dtype).replace("torch.", ""))
    if got != leaf.dtype:
        raise Unsupported(f"numpy {name}: torch._numpy gives {got}, NumPy {leaf.dtype}")
    if leaf.kind == "scalar":
        if example.dim() != 0:
            raise Unsupported(f"numpy {name}: torch._numpy gives an array, NumPy a scalar")
        return numpy_vars.NdarrayVariable(torch_calls.wrap_result(tx, node, example), scalar=True)
    shape = tuple(example.shape)
    if len(shape) != leaf.ndim or (
            leaf.shape is not None and any(type(s) is int and s != t for s, t in zip(shape, leaf.shape))):
        raise Unsupported(f"numpy {name}: torch._numpy gives shape {list(shape)}, NumPy {list(leaf.shape or ())}")
    # aliasing: what NumPy's result shares with the arguments, tnp's must share too
    sid = storage_id(example)
    ours = frozenset(i for i, v in enumerate(stand.vars) if storage_id(v.example) == sid)
    if leaf.is_arg is not None:
        if example is stand.vars[leaf.is_arg].example:
            return stand.vars[leaf.is_arg]  # NumPy gives the argument itself (np.asarray(a))
        raise Unsupported(f"numpy {name}: NumPy gives its argument itself, torch._numpy another array")
    lazy = [i for i in leaf.shares if stand.vars[i].view_of is not None]
    if lazy:  # a view of a view torch copied (`a[::-1][:, 1]`): read again from it at each use
        if name != "operator.getitem" or len(leaf.shares) != 1 or stand.key is None:
            raise Unsupported(f"numpy {name}: a view of a view NumPy shares and torch copies")
        var = numpy_vars.NdarrayVariable(torch_calls.wrap_result(tx, node, example))
        var.view_of = (stand.vars[lazy[0]], stand.key)
        var.read_only = not leaf.writeable
        return var
    if leaf.shares - ours:
        base = stand.vars[next(iter(leaf.shares))] if len(leaf.shares) == 1 else None
        if name != "operator.getitem" or base is None or stand.key is None or base.view_of is not None:
            raise Unsupported(f"numpy {name}: NumPy gives a view of its argument, torch._numpy a copy")
        var = numpy_vars.NdarrayVariable(torch_calls.wrap_result(tx, node, example))
        var.view_of = (base, stand.key)  # (read again from the base at each use: current())
        var.read_only = not leaf.writeable
        return var
    tvar = torch_calls.wrap_result(tx, node, example)
    if ours - leaf.shares:  # tnp's result shares memory where NumPy's is a copy: copy it
        tvar = torch_calls.call_torch(tx, "call_method", "clone", [tvar], {})
    elif isinstance(tvar, tensor.TensorVariable) and tvar.node is not node:
        tvar = tensor.TensorVariable(node, example)  # (a view of the same tensor: its own array)
    var = numpy_vars.NdarrayVariable(tvar)
    var.read_only = not leaf.writeable
    return var


def to_fx(tx, value, holders):
    """Variables -> (node arguments, fake arguments), for a NumPy call."""
    if isinstance(value, dict):
        pairs = {k: to_fx(tx, v, holders) for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(value, (list, tuple)):
        pairs = [to_fx(tx, v, holders) for v in value]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(value, numpy_vars.NdarrayVariable):
        if value.view_of is None:
            holders.setdefault(id(value.example), value)
        return value.current(tx).node, value.example
    if isinstance(value, tensor.TensorVariable):
        raise Unsupported(f"a tensor passed to a NumPy function ({value}) (NumPy converts it its own way; "
                          "Python gives the answer)")
    if isinstance(value, (containers.ListVariable, containers.TupleVariable)) and \
            not isinstance(value, containers.SizeVariable):
        nodes, fakes = to_fx(tx, value.items, holders)
        kind = list if isinstance(value, containers.ListVariable) else tuple
        return kind(nodes), kind(fakes)
    if isinstance(value, sym.SymNodeVariable):
        return value.node, value.value
    if isinstance(value, sym.SliceVariable):
        return value.fx_arg()
    dtype = dtype_name(value)
    if dtype is not None:
        return dtype, dtype
    if value.is_constant():
        c = value.as_constant()
        if numpy_vars.is_numpy_scalar(c):
            return _scalar_node(tx, c)
        if isinstance(c, tuple):
            nodes, fakes = to_fx(tx, [ConstantVariable(x) for x in c], holders)
            return tuple(nodes), tuple(fakes)
        if type(c) in (bool, int, float, complex, str, slice) or c is None or c is Ellipsis:
            return c, c
    raise Unsupported(f"{value} passed to a NumPy function")


def dtype_name(value):
    """np.float32, np.dtype("float32"), "float32" given as a dtype: its name."""
    np = numpy_vars.np_module()
    obj = value.value if isinstance(value, ObjectVariable) else \
        value.as_constant() if value.is_constant() else None
    if np is None:
        return None
    if isinstance(obj, np.dtype):
        return obj.name
    if not isinstance(obj, type):
        return None
    if issubclass(obj, np.generic) and obj is not np.generic:
        return np.dtype(obj).name
    if obj in (float, int, bool, complex) and isinstance(value, ObjectVariable):
        return {float: "float64", int: "int64", bool: "bool", complex: "complex128"}[obj]
    return None


def _scalar_node(tx, c):
    """A NumPy scalar argument: its own node, a 0-d tensor of its dtype (NEP 50)."""
    args = (c.dtype.name, c.item())
    node, example = tx.output.create_node("call_function", numpy_ops.np_scalar, args, {},
                                          lambda: numpy_ops.np_scalar(*args))
    node_meta.annotate(tx, node, example, numpy_ops.np_scalar)
    return node, example


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, numpy_oracle, numpy_vars, sym, tensor, torch_calls  # noqa: E402
