"""NumPy arrays and NumPy calls, traced as tensor operations through `torch._numpy`.

An array is an `NdarrayVariable`: a TensorVariable (the graph's tensor) seen as a NumPy array.
A NumPy call (`np.sum(a, axis=0)`, `a.reshape(2, 3)`, `a + 1`, `a[i] = v`) is one graph node
calling `graph/numpy_ops.py`, which runs torch's NumPy-on-tensors (tnp) on the node's tensors,
as torch.compile does. Where the value crosses into Python the real NumPy object is made again:
an array input enters the graph through `torch.from_numpy` (sharing its memory: in-place
writes reach the caller's array), and an array leaving the frame is `Tensor.numpy()` of the
graph's output.

What NumPy gives and tnp does not say, modelled here so that results are NumPy's:
- **NumPy is asked.** Whether a result is NumPy's scalar (`np.float64`) or an array, its
  dtype, shape, which arguments it shares memory with: each traced call is also run by NumPy
  on stand-in arrays (numpy_oracle.py, numpy_calls.py), and tnp's result must agree or the
  call is a graph break, never a guess.
- **NumPy scalars keep their dtype** in promotion (NEP 50): a NumPy scalar argument enters
  the graph as a 0-d tensor of its dtype, never as a Python number.
- **Calls on constants only** (`np.sqrt(2.0)`, `np.float32(0.5)`) giving a scalar run on the
  real NumPy at trace time: the exact value, and a constant the trace can branch on.
- **Arrays beside tensors.** `arr * t`, `np.sum(t)`, `torch.add(t, arr)` mix the two
  libraries, with answers that depend on which operand converts the other (some raise):
  a graph break, so Python gives them.

Everything else NumPy can do (its random module, object and string arrays, reading an
array's data at trace time: `.item()`, `.tolist()`, `bool(a)`) is a graph break with its
reason, like a tensor's.
"""
import functools
import operator
import sys

import torch
from guards import Predicate
from guards.sources import CallSource, Source
import bytecode

from ..exc import Unsupported
from ..graph import node_meta, numpy_ops, shapes
from .base import ConstantVariable, ObjectVariable, Variable
from bytecode_utils import versions


def np_module():
    """numpy, when the process has imported it (never imported here)."""
    return sys.modules.get("numpy")


def is_ndarray_type(t):
    np = np_module()
    return np is not None and t is np.ndarray


def is_numpy_scalar(value):
    np = np_module()
    return np is not None and isinstance(value, np.generic) and type(value).__module__ == "numpy" \
        and value.dtype.kind in "biufc"


def is_numpy_dtype(value):
    """A numeric NumPy dtype (`np.dtype("float32")`): immutable, a constant."""
    np = np_module()
    return np is not None and isinstance(value, np.dtype) and value.kind in "biufc" and value.names is None


# ---- which NumPy callables are traced, and what their 0-d results are ---------------------

_SUBMODULES = ("", "linalg", "fft")
# not computations on arrays (or with answers tnp gives as its own objects): called natively
_NOT_TRACED = frozenset({"ndarray", "common_type", "min_scalar_type", "set_printoptions", "errstate", "seterr",
                         "geterr", "printoptions", "broadcast_shapes", "from_dlpack", "random"})
# questions about dtypes, answered by NumPy itself when their arguments are constants (dtypes,
# scalar types, names) and a graph break otherwise: never a graph node
_DTYPE_QUERIES = frozenset({"dtype", "finfo", "iinfo", "issubdtype", "result_type", "can_cast", "promote_types"})

# the calls that make an array of a tensor argument (through Tensor.__array__, i.e. numpy()),
# where other NumPy functions given a tensor answer with a tensor or raise
_FROM_TENSOR = frozenset({"array", "asarray", "asanyarray", "ascontiguousarray", "zeros_like", "ones_like",
                          "empty_like", "full_like"})
# array attributes and methods that need the data at trace time
_DATA = frozenset({"item", "tolist", "tobytes", "tofile", "dump", "dumps", "__bool__", "__int__",
                   "__float__", "__index__", "__array__", "data", "ctypes", "nonzero", "__contains__",
                   "__iter__", "__hash__", "__format__", "__repr__", "__str__"})


@functools.lru_cache(maxsize=1)
def _traced_names():
    """id(numpy callable) -> (callable, dotted name) for the NumPy callables tnp also has."""
    np = np_module()
    import torch._numpy as tnp  # noqa: PLC0415 - only once numpy is in use
    out = {}
    for sub in _SUBMODULES:
        mod, tmod = (np, tnp) if not sub else (getattr(np, sub, None), getattr(tnp, sub, None))
        if mod is None or tmod is None:
            continue
        for name in dir(tmod):
            if name.startswith("_") or name in _NOT_TRACED:
                continue
            value = getattr(mod, name, None)
            if not callable(value) or not callable(getattr(tmod, name, None)):
                continue
            if isinstance(value, type) and not issubclass(value, np.generic):
                continue
            out.setdefault(id(value), (value, f"{sub}.{name}" if sub else name))
    for name in _DTYPE_QUERIES:
        value = getattr(np, name, None)
        if value is not None:
            out.setdefault(id(value), (value, name))
    return out


def traced_name(value):
    """The tnp name of a NumPy callable traced as tensor operations, else None."""
    if np_module() is None or not callable(value):
        return None
    hit = _traced_names().get(id(value))
    return hit[1] if hit is not None and hit[0] is value else None


# ---- inputs ---------------------------------------------------------------------------------

class NumpyTensorSource(CallSource):
    """`torch.from_numpy(base)`: the tensor a NumPy array input enters the graph as (sharing
    its memory). Guards on its symbolic sizes read the array's through it."""

    def function(self):
        return torch.from_numpy


def _array_like(dtype, ndim, sizes, strides):
    """The check of an array input: exactly an ndarray, of this dtype and number of
    dimensions, writeable (torch.from_numpy of a read-only array warns; writes through it
    would be wrong), with these sizes where they are static (None: symbolic, checked by the
    ShapeEnv's guards) and these strides (None: C-contiguous, as a symbolic array must be)."""
    ndarray = np_module().ndarray

    def check(a):
        if type(a) is not ndarray or a.dtype.str != dtype or a.ndim != ndim or not a.flags.writeable:
            return False
        shape = a.shape
        if any(s is not None and s != shape[i] for i, s in enumerate(sizes)):
            return False
        return a.flags.c_contiguous if strides is None else a.strides == strides
    return check


_TORCH_DTYPES = {"b": "bool", "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64", "u1": "uint8",
                 "f2": "float16", "f4": "float32", "f8": "float64", "c8": "complex64", "c16": "complex128"}


def _untraceable(a):
    """Why an array cannot enter a graph (None: it can)."""
    code = a.dtype.str[1:] if a.dtype.kind != "b" else "b"
    if code not in _TORCH_DTYPES or a.dtype.byteorder == ">":
        return f"dtype {a.dtype} has no tensor dtype"
    if not a.flags.writeable:
        return "read-only (torch.from_numpy needs a writeable array)"
    if any(s < 0 or s % a.itemsize for s in a.strides):
        return "negative or unaligned strides"
    return None


def _passed_through(ndarray_type):
    """The check of an array input the graph does not take: an ndarray it could not take."""
    return lambda a: type(a) is ndarray_type and _untraceable(a) is not None


def wrap_ndarray(tx, value, source, g):
    """An ndarray argument of the frame: a graph input (torch.from_numpy of it), guarded by
    dtype, shape, strides and writeability. One no tensor can stand for (strings, objects,
    read-only, byte-swapped) is passed through untouched, guarded as such: NumPy work on it
    is a graph break there."""
    if source is None:
        raise Unsupported("a NumPy array without a source")
    why = _untraceable(value)
    if why is not None:
        g(Predicate.made(source, _passed_through, (type(value),), f"is an ndarray no tensor can stand for ({why})"))
        return objects.OpaqueVariable(value, source)
    _refuse_shared_memory(tx, value, source, g)
    tsrc = NumpyTensorSource(source)
    t = torch.from_numpy(value)
    if not value.flags.c_contiguous:
        shapes.mark_static(t)  # (only a C-contiguous array's sizes may be symbolic)
    node = tx.output.add_input(t, tsrc)
    fake = node.meta["example_value"]
    sizes = tuple(s if type(s) is int else None for s in fake.shape)
    strides = value.strides if None not in sizes else None
    g(Predicate.made(source, _array_like, (value.dtype.str, value.ndim, sizes, strides),
                     f"is an ndarray {value.dtype} {['*' if s is None else s for s in sizes]}"
                     f"{'' if strides is None else f', strides {strides}'}, writeable"))
    return NdarrayVariable(tensor.TensorVariable(node, fake, tsrc), source=source)


class BothSource(Source):
    """`(first, second)`: two inputs, for a check that compares them."""

    def __init__(self, first, second):
        object.__setattr__(self, "first", first)
        object.__setattr__(self, "second", second)

    def _key(self):
        return (self.first, self.second)

    def name(self):
        return f"({self.first.name()}, {self.second.name()})"

    def guard_expr(self, ctx):
        return f"({ctx.value(self.first)}, {ctx.value(self.second)})"

    def reconstruct(self):
        return [*self.first.reconstruct(), *self.second.reconstruct(), bytecode.Instr("BUILD_TUPLE", 2)]


def _disjoint():
    """The check of two array inputs: their memory does not overlap."""
    bounds = np_module().lib.array_utils.byte_bounds

    def check(pair):
        (a0, a1), (b0, b1) = bounds(pair[0]), bounds(pair[1])
        return a1 <= b0 or b1 <= a0
    return check


def _refuse_shared_memory(tx, value, source, g):
    """Array inputs are separate graph inputs: a backend that functionalizes (aot_eager,
    inductor) takes them as separate memory. Two that overlap (`f(a, a[1])`) are refused,
    and every pair is guarded to stay apart."""
    seen = tx.output.__dict__.setdefault("numpy_inputs", [])
    check = _disjoint()
    for other, other_source in seen:
        if other is value:
            continue
        if not check((value, other)):
            raise Unsupported("NumPy arrays that share memory, passed in separately")
        g(Predicate.made(BothSource(source, other_source), _disjoint, (), "share no memory"))
    seen.append((value, source))


def wrap_scalar(tx, value, source, g):
    """A NumPy scalar (np.int64, np.float32...): a constant, guarded by type and bits (-0.0 is
    not 0.0, a NaN is itself)."""
    g(Predicate.made(source, _same_scalar, (type(value), value.tobytes()), f"is {type(value).__name__}({value!r})"))
    return ConstantVariable(value, source)


def _same_scalar(t, bits):
    return lambda x: type(x) is t and x.tobytes() == bits


# ---- the value --------------------------------------------------------------------------------

class NdarrayVariable(Variable):
    """A NumPy array (or, `scalar`, the NumPy scalar of a 0-d result) backed by a graph tensor."""

    rebuilt_once = True  # one object, however often it is referenced after the graph

    read_only = False  # a view NumPy makes read-only (np.broadcast_to, np.diagonal)
    view_of = None     # (base array, key): a view NumPy shares and torch copies (`a[::-1]`)

    def __init__(self, tensor_var, scalar=False, source=None):
        super().__init__(source)
        self.tensor = tensor_var
        self.scalar = scalar

    def current(self, tx):
        """The graph tensor of the array as it is now. A view torch cannot share (negative
        steps) is read again from its base at each use, so writes to the base reach it, as in
        NumPy; it is rebuilt as a real view of the base where it leaves the graph."""
        if self.view_of is None:
            return self.tensor
        base, key = self.view_of
        node_args, fake_args = numpy_calls.to_fx(tx, [base, key], {})
        node, example = tx.output.create_node(
            "call_function", numpy_ops.ndarray_call, ["operator.getitem", *node_args], {},
            lambda: numpy_ops.ndarray_call("operator.getitem", *fake_args))
        node_meta.annotate(tx, node, example, numpy_ops.ndarray_call)
        return tensor.TensorVariable(node, example)

    @property
    def example(self):
        return self.tensor.example

    def dtype(self):
        return np_module().dtype(str(self.example.dtype).replace("torch.", ""))

    def python_type(self):
        return self.dtype().type if self.scalar else np_module().ndarray

    def truthy(self, tx):
        raise Unsupported("data-dependent branch: bool() of a NumPy array needs its value")

    def as_constant(self):  # int(s), float(s), f"{s}", s as a size or an index: its data
        raise Unsupported(f"the value of a NumPy {'scalar' if self.scalar else 'array'} computed "
                          "in the graph is needed at trace time (int(), float(), a size, an index)")

    def identity_key(self):
        return ("ndarray", id(self))

    def getattr(self, tx, name):
        ex = self.example
        if name in ("ndim", "itemsize"):
            return ConstantVariable(ex.dim() if name == "ndim" else ex.element_size())
        if name == "shape":  # a tuple (not a torch.Size), symbolic where the tensor's is
            shape = self.tensor.sizes(tx, "size")
            if shape.is_constant():
                return ConstantVariable(tuple(shape.as_constant()))
            return containers.TupleVariable(list(shape.items))
        if name in ("size", "nbytes"):
            n = self.tensor.call_method(tx, "numel", [], {})
            return n if name == "size" else operators.binary_op(tx, "mul", n, ConstantVariable(ex.element_size()))
        if name == "dtype":
            return ConstantVariable(self.dtype())
        if name in ("T", "real", "imag"):
            return numpy_calls.call(tx, numpy_ops.ndarray_attr, [self, ConstantVariable(name)], {})
        if name in _DATA or name in ("strides", "flags", "base", "__array_interface__"):
            raise Unsupported(f"ndarray.{name} needs the array's data or memory at trace time")
        tnp_array = _tnp_ndarray()
        if callable(getattr(tnp_array, name, None)):
            return NdarrayMethodVariable(self, name)
        raise Unsupported(f"ndarray attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        return self.getattr(tx, name).call(tx, args, kwargs)

    def hasattr(self, tx, name):
        return hasattr(self.python_type(), name)

    def getitem(self, tx, key):
        return numpy_calls.call(tx, "operator.getitem", [self, key], {})

    def setitem(self, tx, key, value):
        numpy_calls.call(tx, numpy_ops.ndarray_setitem, [self, key, value], {})

    def length(self, tx):
        return self.tensor.length(tx)  # (a 0-d array: a break; NumPy's TypeError comes natively)

    def len_var(self, tx):
        return self.tensor.len_var(tx)

    def iterate(self, tx):
        return [self.getitem(tx, ConstantVariable(i)) for i in range(self.length(tx))]

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        if self.view_of is not None:  # the real view of the real base (`base[::-1]`)
            base, key = self.view_of
            cg.reconstruct(base)
            cg.reconstruct(key)
            return cg.extend(versions.subscr())
        fn = numpy_ops.to_numpy_scalar if self.scalar else \
            numpy_ops.to_numpy_read_only if self.read_only else numpy_ops.to_numpy
        cg.extend(versions.load_const_callable(fn))
        cg.load_tensor(self.tensor)
        cg.extend(versions.call(1))

    def __repr__(self):
        return f"{'NumpyScalar' if self.scalar else 'Ndarray'}({self.tensor!r})"


# `a.__iadd__(b)` and the like, read as the operators they are
_DUNDER_OPERATORS = {n: n.rstrip("_") if n.endswith("_") and n[:-1] in ("and", "or") else n for n in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "iadd", "isub", "imul", "itruediv",
    "ifloordiv", "imod", "ipow", "lt", "le", "gt", "ge", "eq", "ne")}
# functions that write into their first argument
_WRITING_FUNCTIONS = frozenset({"copyto", "put", "put_along_axis", "fill_diagonal", "place", "putmask"})
# methods that write into the array they are called on
_WRITING_METHODS = frozenset({"fill", "sort", "put", "itemset", "partition", "setflags"})


class NdarrayMethodVariable(Variable):
    """`a.reshape` read and not yet called."""

    def __init__(self, array, name):
        super().__init__()
        self.array, self.name = array, name

    def call(self, tx, args, kwargs):
        if self.name in _DATA:
            raise Unsupported(f"ndarray.{self.name}() needs the array's data at trace time")
        if self.name == "__setitem__" and len(args) == 2 and not kwargs:
            return self.array.setitem(tx, *args) or ConstantVariable(None)
        op = self.name[2:-2] if self.name.startswith("__") and self.name.endswith("__") else None
        if op is not None and len(args) == 1 and not kwargs and op in _DUNDER_OPERATORS:
            return binary_op(tx, _DUNDER_OPERATORS[op], self.array, args[0])
        if self.name in _WRITING_METHODS:
            numpy_calls.refuse_write_into(self.array, "method." + self.name)
        return numpy_calls.call(tx, "method." + self.name, [self.array, *args], kwargs)

    def reconstruct(self, cg):  # (on the stack at a graph break: `a.reshape(f(), 3)`)
        cg.reconstruct(self.array)
        cg.load_attr(self.name)


class NumpyFunctionVariable(ObjectVariable):
    """A NumPy function (or scalar type) that tnp has: traced as one graph node."""

    def __init__(self, value, name, source=None):
        super().__init__(value, source)
        self.name = name

    def call(self, tx, args, kwargs):
        if self.name == "result_type":  # an array or NumPy scalar counts by its dtype alone (NEP 50)
            args = [ConstantVariable(a.dtype()) if isinstance(a, NdarrayVariable) else a for a in args]
        folded = _fold_constant_call(self.value, args, kwargs)
        if folded is not None:
            return folded
        if self.name in _DTYPE_QUERIES:
            raise Unsupported(f"np.{self.name} of values not known at trace time")
        if self.name in _FROM_TENSOR and args and isinstance(args[0], tensor.TensorVariable):
            if "copy" in kwargs:
                raise Unsupported(f"np.{self.name}(tensor, copy=...) (torch's __array__ takes no copy)")
            # np.asarray(t): NumPy reads the tensor through its __array__, which is t.numpy()
            args = [tensor_numpy(tx, args[0], [], {}), *args[1:]]
        if self.name in ("array", "asarray") and args and isinstance(args[0], (containers.ListVariable,
                containers.TupleVariable)) and args[0].items and \
                all(isinstance(v, NdarrayVariable) for v in args[0].items):
            # np.array([a, b]): arrays of one shape stacked (tnp reads such a list item by item)
            shapes = {tuple(v.example.shape) for v in args[0].items}
            if len(shapes) == 1 and set(kwargs) <= {"dtype"} and len(args) == 1:
                out = numpy_calls.call(tx, "stack", [args[0]], {})
                return out if not kwargs else numpy_calls.call(tx, "method.astype", [out, kwargs["dtype"]], {})
        return numpy_calls.call(tx, self.name, args, kwargs)


def _fold_constant_call(fn, args, kwargs):
    """`np.sqrt(2.0)`, `np.float32(0.5)`, `np.prod(x.shape)`: every argument a Python or NumPy
    scalar constant (or a list or tuple of them), and NumPy's answer a scalar: NumPy's own
    answer, at trace time."""
    try:
        pos = [_plain_constant(a) for a in args]
        kw = {k: _plain_constant(v) for k, v in kwargs.items()}
    except NotPlain:
        return None
    try:
        out = fn(*pos, **kw)
    except Exception:  # noqa: BLE001 - traced instead: the graph raises as NumPy does
        return None
    np = np_module()
    if isinstance(out, np.generic) and out.dtype.kind in "biufc" or type(out) in (bool, int, float, complex) \
            or isinstance(out, (np.dtype, np.finfo, np.iinfo)):
        return ConstantVariable(out)
    return None


class NotPlain(Exception):
    pass


def _plain_constant(var):
    """The value of a scalar constant, or of a list/tuple of them; else NotPlain."""
    if isinstance(var, (containers.ListVariable, containers.TupleVariable)):
        items = [_plain_constant(v) for v in var.items]
        return items if isinstance(var, containers.ListVariable) else tuple(items)
    if isinstance(var, ObjectVariable) and _is_dtype_like(var.value):
        return var.value  # np.float32, np.floating, float (the class), as a dtype argument
    if not var.is_constant():
        raise NotPlain
    v = var.as_constant()
    if isinstance(v, np_module().dtype):
        return v
    if _scalar_constant(v) or (type(v) in (tuple, torch.Size) and all(_scalar_constant(x) for x in v)):
        return v
    raise NotPlain


def _is_dtype_like(obj):
    np = np_module()
    return isinstance(obj, type) and (issubclass(obj, np.generic) or obj in (bool, int, float, complex))


def _scalar_constant(v):
    return type(v) in (bool, int, float, complex, str) or v is None or is_numpy_scalar(v)


# ---- one NumPy operation as a graph node ----------------------------------------------------

def binary_op(tx, name, a, b):
    """`a <op> b` (operator's name: "add", "iadd", "lt"...) with an array on either side."""
    for v, other in ((a, b), (b, a)):
        if isinstance(v, tensor.TensorVariable):
            if isinstance(other, NdarrayVariable) and other.scalar:
                return _tensor_with_scalar(tx, name, a, b, v, other)
            if v is a and (name[1:] if name.startswith("i") else name) in _TENSOR_LEFT_ARITHMETIC:
                return _tensor_with_array(tx, name, a, b)
            raise Unsupported(f"operator {name} between a NumPy array and a tensor (NumPy and torch "
                              "each convert the other; Python decides)")
    inplace = name.startswith("i") and name not in ("is_", "is_not", "invert")
    if inplace and not isinstance(a, NdarrayVariable):
        name, inplace = name[1:], False
        if not hasattr(operator, name):
            name += "_"
    if inplace:
        numpy_calls.call(tx, "operator." + name, [a, b], {})
        return a  # an in-place operator returns the array itself
    return numpy_calls.call(tx, "operator." + name, [a, b], {})


# `t <op> arr`: Tensor's operator gives way to the array's, so NumPy computes on t's values (its
# __array__) and the result comes back a Tensor (its __array_wrap__); the in-place forms too
# (a new tensor: t is not written). Measured on torch 2.13-2.15 with NumPy 2. Comparisons
# raise TypeError there, `!=` gives a bool: those stay Python.
_TENSOR_LEFT_ARITHMETIC = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul"})


def _tensor_with_array(tx, name, t, arr):
    ex = t.example
    if ex.requires_grad or ex.device.type != "cpu":
        raise Unsupported(f"operator {name} of a tensor that requires grad or is not on the CPU and a "
                          "NumPy array (eager raises; Python gives the error)")
    if not (ex.is_contiguous() and arr.example.is_contiguous()) or arr.view_of is not None:
        raise Unsupported(f"operator {name} of a tensor and a NumPy array, one not contiguous (the "
                          "result's layout is NumPy's)")
    base = name[1:] if name.startswith("i") else name
    out = numpy_calls.call(tx, "operator." + base, [NdarrayVariable(t), arr], {})
    if out.example.dim() == 0:
        raise Unsupported(f"operator {name} of a tensor and a NumPy array with a 0-d result")
    return out.tensor


# the ops whose result on float32/float64 is the same with the scalar cast to the tensor's dtype
_SCALAR_EXACT = frozenset({"add", "sub", "mul", "truediv", "lt", "le", "gt", "ge", "eq", "ne"})


def _tensor_with_scalar(tx, name, a, b, t, s):
    """`t * np.sum(arr)`: torch takes a NumPy scalar as the Python number it holds, which on a
    floating tensor of one dimension or more computes in the tensor's dtype: the scalar's
    0-d tensor cast to it gives exactly that. Other pairings (an integer or 0-d tensor, where
    the number's kind or a 0-d tensor's dtype would decide) stay Python."""
    ex = t.example
    if ex.dtype not in (torch.float32, torch.float64) or ex.dim() < 1 or s.example.dtype.is_complex or \
            name.lstrip("i") not in _SCALAR_EXACT:
        raise Unsupported(f"operator {name} between a NumPy scalar and a {ex.dtype} tensor of "
                          f"{ex.dim()} dimensions (Python decides the dtype)")
    cast = torch_calls.call_torch(tx, "call_method", "to", [s.current(tx), ConstantVariable(ex.dtype)], {})
    fn = getattr(operator, name)
    if name.startswith("i") and t is not a:  # `n += t` with n the scalar: a new value
        fn = getattr(operator, name[1:], None) or getattr(operator, name[1:] + "_")
    return torch_calls.call_torch(tx, "call_function", fn, [cast, t] if t is b else [t, cast], {})


def unary_op(tx, name, a):
    return numpy_calls.call(tx, "operator." + name, [a], {})


def compare(tx, op, a, b):
    names = {"<": "lt", "<=": "le", "==": "eq", "!=": "ne", ">": "gt", ">=": "ge"}
    return binary_op(tx, names[op], a, b)


def dtype_compare(op, a, b):
    """`a.dtype == np.float32`, `a.dtype != "int64"`: NumPy's dtype equality on the real
    objects (a dtype equals its scalar type, its name and its dtype); None when neither side
    is a NumPy dtype."""
    np = np_module()
    if np is None or not any(v.is_constant() and isinstance(v.as_constant(), np.dtype) for v in (a, b)):
        return None
    try:
        x, y = (v.as_constant() if v.is_constant() else v.as_python_object() for v in (a, b))
    except (Unsupported, AttributeError):
        return None
    if op not in ("==", "!="):
        return None
    try:
        same = bool(x == y)
    except TypeError:
        return None
    return ConstantVariable(same if op == "==" else not same)


def torch_call(tx, fn, args, kwargs):
    """A torch function given a NumPy array: the conversions into a tensor."""
    if fn in (torch.from_numpy, torch.as_tensor, torch.asarray, torch.tensor) and args and \
            isinstance(args[0], NdarrayVariable):
        arr = args[0]
        if fn is torch.from_numpy and (len(args) > 1 or kwargs):
            raise Unsupported("torch.from_numpy with more than the array")
        rest = {k: v.as_constant() for k, v in kwargs.items()}
        if set(rest) - {"dtype", "device", "requires_grad"} or len(args) > 1:
            raise Unsupported(f"torch.{fn.__name__} of an array with {sorted(rest)} arguments")
        if arr.view_of is not None:
            raise Unsupported(f"torch.{fn.__name__} of an array with negative strides (torch has none)")
        if arr.scalar and fn is torch.from_numpy:
            raise Unsupported("torch.from_numpy of a NumPy scalar (eager raises TypeError)")
        t = arr.tensor
        if fn is torch.tensor or (fn is torch.asarray and kwargs.get("copy") is not None):
            t = torch_calls.call_torch(tx, "call_method", "clone", [t], {})
        if rest:
            t = torch_calls.call_torch(tx, "call_function", torch.as_tensor, [t],
                                       {k: ConstantVariable(v) for k, v in rest.items()})
        return t
    raise Unsupported(f"torch.{getattr(fn, '__name__', fn)} given a NumPy array (torch takes tensors)")


def tensor_numpy(tx, t, args, kwargs):
    """`t.numpy()`: the same tensor, seen as an array (sharing memory, as in eager)."""
    force = kwargs.get("force", args[0] if args else ConstantVariable(False)).as_constant()
    ex = t.example
    if str(ex.dtype).replace("torch.", "") not in _TORCH_DTYPES.values() or ex.is_conj() or ex.is_neg():
        raise Unsupported(f"Tensor.numpy() of a {ex.dtype} tensor (or one with a conjugate or negative "
                          "bit): eager raises")
    if not force and (ex.requires_grad or ex.device.type != "cpu"):
        raise Unsupported("Tensor.numpy() of a tensor that requires grad or is not on the CPU "
                          "(eager raises; Python gives the error)")
    if force and (ex.requires_grad or ex.device.type != "cpu"):
        t = torch_calls.call_torch(tx, "call_method", "detach", [t], {})
        if ex.device.type != "cpu":
            t = torch_calls.call_torch(tx, "call_method", "cpu", [t], {})
    return NdarrayVariable(t)


@functools.lru_cache(maxsize=1)
def _tnp_ndarray():
    import torch._numpy as tnp  # noqa: PLC0415 - only once numpy is in use
    return tnp.ndarray


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, numpy_calls, objects, operators, sym, tensor, torch_calls  # noqa: E402
