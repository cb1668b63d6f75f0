"""NumPy in a graph: the functions a graph node calls to run NumPy code as tensor operations.

NumPy code in a traced frame is traced as torch's own NumPy-on-tensors, `torch._numpy` (tnp),
the way torch.compile does: an array is a tensor in the graph, and a NumPy call is one node
whose target is one of the functions below. Each takes tensors, wraps them as tnp arrays,
calls tnp, and hands tensors back, so that the graph holds tensors only (any backend takes it;
AOTAutograd and inductor trace through tnp into aten ops). The target names the NumPy function
by a string (`ndarray_call("sum", x, axis=0)`), so that dumps read as the user's code and the
disk cache writes the node as plain values.

At the frame's boundary `to_numpy` / `to_numpy_scalar` make the real NumPy objects the code
would have made: an array sharing the graph output's memory, or the NumPy scalar
(`np.float32`) that NumPy gives for a 0-d result of a ufunc, a reduction or an index.
"""
import functools
import operator

import torch


@functools.lru_cache(maxsize=None)
def _tnp():
    import torch._numpy as tnp  # noqa: PLC0415 - imported on the first NumPy call only (~40 ms)
    from torch._numpy import _dtypes_impl  # noqa: PLC0415
    if _dtypes_impl._default_dtypes is None:
        # NumPy's defaults, set here: tnp would otherwise import torch._dynamo.config to
        # read the same three names (~1 s on a first compile that needs no _dynamo)
        _dtypes_impl._default_dtypes = _dtypes_impl.DefaultDTypes(
            float_dtype=torch.float64, complex_dtype=torch.complex128, int_dtype=torch.int64)
    return tnp


class _numpy_defaults:
    """torch's default dtype as NumPy's (float64) while tnp runs: tnp computes `int / int`
    and float literals with torch's default (float32), where NumPy gives float64.
    (torch.compile gives float32 there.)"""

    def __enter__(self):
        self.saved = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)

    def __exit__(self, *exc):
        torch.set_default_dtype(self.saved)


@functools.lru_cache(maxsize=None)
def _resolve(name):
    """"sum" -> tnp.sum; "linalg.norm" -> tnp.linalg.norm; "operator.add" -> operator.add."""
    head, _, rest = name.rpartition(".")
    if head == "operator":
        return getattr(operator, rest)
    obj = _tnp()
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _to_tnp(value):
    if isinstance(value, torch.Tensor):
        return _tnp().ndarray(value)
    if type(value) in (list, tuple):
        return type(value)(_to_tnp(v) for v in value)
    return value


def _to_torch(value):
    tnp = _tnp()
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value) if type(value) in (list, tuple) \
            else tuple(_to_torch(v) for v in value)
    return value


def ndarray_call(name, *args, **kwargs):
    """`np.<name>(*args, **kwargs)` on tensors standing for arrays."""
    fn = _resolve(name)
    with _numpy_defaults():
        try:
            return _to_torch(fn(*_to_tnp(args), **{k: _to_tnp(v) for k, v in kwargs.items()}))
        except _tnp().linalg.LinAlgError as e:  # the user's `except np.linalg.LinAlgError`
            raise _numpy_linalg_error()(*e.args) from None


def _numpy_linalg_error():
    import numpy  # noqa: PLC0415 - a NumPy graph only runs where NumPy is imported
    return numpy.linalg.LinAlgError


def ndarray_method(name, obj, *args, **kwargs):
    """`array.<name>(*args, **kwargs)`."""
    method = getattr(_tnp().ndarray(obj), name)
    with _numpy_defaults():
        return _to_torch(method(*_to_tnp(args), **{k: _to_tnp(v) for k, v in kwargs.items()}))


def ndarray_attr(obj, name):
    """`array.<name>` for an attribute that is an array (`T`, `real`, `imag`)."""
    return _to_torch(getattr(_tnp().ndarray(obj), name))


def ndarray_setitem(obj, key, value):
    """`array[key] = value` (NumPy's casting and broadcasting of the value)."""
    with _numpy_defaults():
        _tnp().ndarray(obj)[_to_tnp(key)] = _to_tnp(value)


def ndarray_getitem(obj, key):
    """`array[key]` as a tensor (NumPy's indexing, as tnp reads it)."""
    with _numpy_defaults():
        return _to_torch(_tnp().ndarray(obj)[_to_tnp(key)])


def np_scalar(dtype, value):
    """A NumPy scalar (`np.float32(2.0)`) as a 0-d tensor of its dtype: in NumPy's promotion a
    NumPy scalar keeps its dtype, where a Python number adapts to the array's."""
    with _numpy_defaults():
        return _tnp().asarray(value, dtype=dtype).tensor


def to_numpy(t):
    """The NumPy array a graph output stands for (sharing its memory, as `Tensor.numpy()`)."""
    return t.numpy(force=True) if t.requires_grad or t.device.type != "cpu" else t.numpy()


def to_numpy_read_only(t):
    """A read-only view NumPy made (np.broadcast_to, np.diagonal): writes to it raise, as there."""
    a = to_numpy(t)
    a.flags.writeable = False
    return a


def to_numpy_scalar(t):
    """The NumPy scalar a 0-d graph output stands for (`np.float64(...)`)."""
    return to_numpy(t)[()]
