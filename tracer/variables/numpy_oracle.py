"""NumPy's own answer about one call's result, asked on stand-in arrays at trace time.

torch._numpy (tnp) follows NumPy closely, not exactly: the dtype of a cumulative sum of int32
(int64 in NumPy), of `sin` of a bool array (float16), whether a result is a scalar or a 0-d
array, whether it is a view of an argument or a copy, whether that view is read-only, the
shape of `np.median` without an axis. So each NumPy call the trace makes is also run by NumPy
itself, on stand-ins: arrays of the traced arrays' dtypes and shapes (small values, seeded),
NumPy scalars for NumPy scalars, the constants themselves. What NumPy answers (per result:
array or scalar, dtype, shape, which arguments it shares memory with, writeable, whether it
is an argument itself) is what `numpy_vars` compares tnp's result with; a difference is a
graph break, never a result that differs from NumPy's.

The stand-ins are made once per traced call and cost what NumPy costs on them: an array of
more than STAND_IN_LIMIT elements is zeros (no memory until written), one of more than
SIZE_LIMIT is not asked about (the call is a graph break).
"""
import dataclasses
import operator
import sys
import warnings

STAND_IN_LIMIT = 1 << 18
SIZE_LIMIT = 1 << 26


@dataclasses.dataclass
class Leaf:
    kind: str            # "array", "scalar" (a NumPy scalar), "value" (a Python value)
    dtype: object = None
    shape: tuple = None  # None: not known exactly (shrunk stand-ins)
    shares: frozenset = frozenset()  # positions of the argument arrays it shares memory with
    writeable: bool = True
    is_arg: int = None   # the position of the argument array it is, if it is one
    value: object = None  # a Python value's value
    ndim: int = None


class Failed(Exception):
    """NumPy raised on the stand-ins (or the call could not be made): no answer."""


def stand_in(dtype, shape, exact):
    """An array of this dtype and shape: random normal floats (a matrix to invert: invertible),
    zeros for integers (an index valid on any axis); past STAND_IN_LIMIT elements (`exact`
    False) zeros, which cost no memory until written (calloc)."""
    np = sys.modules["numpy"]
    rng = np.random.default_rng(len(shape) * 7 + 1)
    if not exact:
        return np.zeros(shape, dtype)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.random(shape) > 0.5
    if kind in "iu":  # zeros: a valid index into any axis (take, take_along_axis, choose...);
        return np.zeros(shape, dtype)  # a division by an int array is refused before it is asked
    if kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def ask(call, args, kwargs, arrays, exact):
    """Run `call(*args, **kwargs)` (the real NumPy function, method or operator, on stand-ins)
    and describe its result. `arrays`: the stand-in arrays of the arguments, by position."""
    np = sys.modules["numpy"]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = call(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - NumPy's own error on the stand-ins: no answer
        raise Failed(f"{type(e).__name__}: {e}") from None
    return _describe(np, out, arrays, exact)


def _describe(np, out, arrays, exact):
    if isinstance(out, np.ndarray):
        same = next((i for i, a in enumerate(arrays) if out is a), None)
        shares = frozenset(i for i, a in enumerate(arrays) if np.shares_memory(out, a))
        return Leaf("array", out.dtype, out.shape if exact else None, shares, bool(out.flags.writeable), same,
                    ndim=out.ndim)
    if isinstance(out, np.generic):
        return Leaf("scalar", out.dtype)
    if type(out) in (tuple, list):
        return type(out)(_describe(np, o, arrays, exact) for o in out)
    return Leaf("value", value=out)


def call_of(np, target):
    """The real NumPy callable a tnp target names: "sum", "linalg.norm", "operator.add",
    "method.reshape" (called with the array first), "attr.T", "setitem"."""
    if target.startswith("operator."):
        return getattr(operator, target[9:])
    if target.startswith("method."):
        name = target[7:]
        return lambda obj, *a, **k: getattr(obj, name)(*a, **k)
    if target.startswith("attr."):
        name = target[5:]
        return lambda obj, _name=None: getattr(obj, name)
    if target == "setitem":
        return operator.setitem
    obj = np
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj
