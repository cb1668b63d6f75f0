"""NumPy traced as tensor operations (issue 35; tracer/variables/numpy_vars.py).

Each case runs eagerly and compiled on copies of the same inputs (semantics_helpers.run):
results must be NumPy's own (an ndarray or a NumPy scalar of the same type, dtype and shape
as eager's, equal values), input arrays mutated alike, and the frame captured whole (one
graph, no break, no fallback), warm calls tracing nothing. Where torch.compile is asked
(`dynamo=True`), we make no more graphs than it does. The cases follow the classes of NumPy
use in torch.compile's own tests: arrays in and out, `Tensor.numpy()` / `torch.from_numpy`
round trips, ufuncs, reductions, indexing, in-place writes, NumPy scalars and their dtypes,
linalg/fft, and the mixes that must stay Python.
"""
import io

import numpy as np
import pytest
import torch

import tracer
from helpers import traced
from semantics_helpers import check, run


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def arr(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---- arrays in, arrays out ----------------------------------------------------------------

def test_ufuncs_and_reductions_on_an_array_input():
    def f(a):
        b = np.sin(a) * 2 + np.exp(-a) / 3
        return b, np.sum(b, axis=0), b.mean(), np.max(np.abs(b)), b.std(axis=1)

    check(f, arr(3, 4), graphs=1, dynamo=True)


def test_reductions_give_numpy_scalars_of_numpy_dtype():
    def f(a, i):
        return np.sum(a), a.max(), a[1, 2], a[0][1], np.argmax(a), (a > 0).any(), a.sum() + 1.5, -a[0, 0]

    c, _ = check(f, arr(3, 4, dtype=np.float32), np.arange(3), graphs=1)
    out = c(arr(3, 4, dtype=np.float32), np.arange(3))
    assert [type(v) for v in out] == [np.float32, np.float32, np.float32, np.float32, np.int64, np.bool_,
                                      np.float32, np.float32]


def test_constructors_and_views_give_0d_arrays():
    def f(a):
        return np.zeros(()), np.asarray(a[0, 0]).reshape(()), np.squeeze(a[:1, :1]), a[0, 0, ...]

    c, _ = check(f, arr(2, 2), graphs=1)
    assert all(type(v) is np.ndarray for v in c(arr(2, 2)))


def test_dtypes_follow_numpy_promotion():
    def f(a, b):
        # float32 with a Python float stays float32; with a NumPy float64 scalar it becomes
        # float64 (NEP 50); int with a float is float64; int16 + int32 is int32
        return (a + 1.5, a * np.float64(2.0), a + np.float32(1.0), b / 2, b.astype(np.int16) + np.int32(3),
                a.astype("float16") * 2, np.ones(3, dtype=np.float32) + a[0, :3])

    check(f, arr(2, 4, dtype=np.float32), np.arange(6).reshape(2, 3), graphs=1, dynamo=True)


def test_dtype_attributes_and_comparisons():
    def f(a):
        ok = a.dtype == np.float32 and a.ndim == 2 and a.shape[1] == 3 and a.size == 6
        return (a * 2 if ok else a), a.dtype, a.itemsize, a.nbytes, isinstance(a, np.ndarray)

    check(f, arr(2, 3, dtype=np.float32), graphs=1)


def test_creation_functions():
    def f(n):
        x = np.arange(n, dtype=np.float32)
        y = np.linspace(0.0, 1.0, num=5)
        z = np.eye(3) + np.full((3, 3), 2.0) - np.ones_like(np.zeros((3, 3)))
        return x * 2, y, z, np.stack([y, y]), np.concatenate([x, x]), np.meshgrid(y, y)[1]

    check(f, 4, graphs=1, dynamo=True)


def test_indexing_slicing_and_fancy_indices():
    def f(a, idx, mask_threshold):
        return a[1:, ::2], a[:, 1], a[idx], a[..., 0], a[None, 0], a.T[0], np.where(a > mask_threshold, a, 0).sum()

    c, _ = check(f, arr(4, 3), np.array([0, 2]), 0.1, graphs=1)


def test_linalg_and_fft():
    def f(m, v):
        return np.linalg.norm(v), np.linalg.inv(m @ m.T + np.eye(3)), np.fft.fft(v).real, np.dot(v, v), \
            np.einsum("ij,j->i", m, v)

    check(f, arr(3, 3), arr(3, seed=1), graphs=1)


def test_methods_shape_and_copy():
    def f(a):
        b = a.reshape(2, 6).T.copy()
        b.fill(0.5)
        return b, a.ravel()[:4], a.flatten(), a.transpose(1, 0), a.clip(-0.5, 0.5), a.astype(np.int64)

    check(f, arr(3, 4), graphs=1)


# ---- in-place writes reach the caller's array ------------------------------------------------

def test_in_place_writes_on_an_input_array():
    def f(a, b):
        a[0] = 7.0
        a += 1
        a[:, 1] *= b
        np.add(a, 1, out=a)
        return a

    c, _ = check(f, arr(3, 4), arr(3, seed=2), graphs=1)
    x = arr(3, 4)
    out = c(x, arr(3, seed=2))
    assert out is x  # the caller's own array, written in place


def test_in_place_on_a_view_and_a_copy():
    def f(a):
        v = a[1:]
        v -= 10
        w = a.copy()
        w[0, 0] = 99
        return a, w

    check(f, arr(3, 2), graphs=1)


# ---- tensors <-> arrays ---------------------------------------------------------------------------

def test_tensor_numpy_round_trip_in_one_graph():
    def f(x):
        a = x.numpy()
        b = np.tanh(a) + a ** 2
        return torch.from_numpy(b) * 2, torch.as_tensor(np.mean(b, axis=0)), torch.tensor(b[0])

    check(f, torch.randn(3, 4), graphs=1, dynamo=True)


def test_array_from_tensor_shares_its_memory():
    def f(x):
        a = x.numpy()
        a[0] = 100.0  # writes x, as in eager
        return x + 1, a

    c, _ = check(f, torch.zeros(3), graphs=1)
    x = torch.zeros(3)
    _, a = c(x)
    a[1] = 5.0  # the returned array is a view of x's memory in eager; and here
    assert x[1] == 5.0 and x[0] == 100.0


def test_array_of_a_tensor():
    def f(x, betas):
        alphas = np.asarray(x)  # shares x's memory, as x.numpy()
        sig = np.array(((1 - betas) / betas) ** 0.5)  # diffusers' schedulers
        alphas[0] = 3.0
        return np.concatenate([sig[::-1], [0.0]]).astype(np.float32), x * 2

    check(f, torch.rand(4), torch.linspace(0.1, 0.9, 5), graphs=1)


def test_numpy_force_on_a_tensor_that_requires_grad():
    def f(x):
        return np.cos(x.numpy(force=True)) * 2

    check(f, torch.randn(4, requires_grad=True), graphs=1)


def test_tensor_numpy_of_a_graph_result():
    def f(x, w):
        h = torch.relu(x @ w)
        stats = h.detach().numpy()
        return torch.from_numpy(stats / stats.max()), h.sum()

    check(f, torch.randn(4, 3), torch.randn(3, 5), graphs=1)


# ---- NumPy constants and scalars -----------------------------------------------------------------

def test_constant_calls_fold_to_numpy_values():
    def f(a):
        scale = np.sqrt(2.0) * np.pi
        if np.float32(0.5) < 1:  # a constant: decided at trace time
            a = a * scale
        return a, np.log(10.0), np.float32(3.0)

    c, _ = check(f, arr(3), graphs=1)
    assert type(c(arr(3))[1]) is np.float64


def test_constant_calls_on_shapes_and_lists():
    def f(x, dims):
        n = np.prod(x.shape)  # NumPy's np.int64, a constant: shapes are static here
        m = np.sum(dims) + np.max([1, 5, 2])
        return x.reshape(int(n)) * m, n

    c, _ = check(f, torch.randn(2, 3), [1, 2], graphs=1)
    assert type(c(torch.randn(2, 3), [1, 2])[1]) is np.int64


def test_numpy_scalar_input_in_a_torch_op():
    """np.int64(12) beside a tensor is the number it holds (it was written into the graph's
    code as `np.int64(12)`, a NameError there)."""
    def f(x, a, z, w):
        return x + a.sum() + z, x * w

    check(f, torch.ones(2), np.ones(2), np.int64(12), np.float32(0.5), graphs=1)


def test_dtype_questions_answered_by_numpy():
    def f(a, b, t):
        eps = np.finfo(np.float32).eps
        ok = np.issubdtype(a.dtype, np.floating) and np.can_cast(np.int32, np.float64)
        out = np.array([a, b]) * eps if ok else a
        return out, np.dtype("float"), np.result_type(a, np.int8), np.iinfo(np.int32).max, np.ones_like(t)

    check(f, arr(3), arr(3, seed=1), torch.ones(2), graphs=1)


def test_numpy_scalar_inputs_are_guarded_by_type_and_value():
    def f(a, s):
        return a * s

    c = tracer.compile(f)
    for s in (np.float32(2.0), np.float32(2.0), np.float64(2.0), np.int64(3), np.float32(4.0)):
        ref = f(arr(2, dtype=np.float32), s)
        got = c(arr(2, dtype=np.float32), s)
        assert type(got) is type(ref) and got.dtype == ref.dtype and np.allclose(got, ref)


def test_array_inputs_are_guarded_by_dtype_shape_and_strides():
    def f(a):
        return a * 2 + 1

    c = tracer.compile(f)
    for a in (arr(3), arr(3), arr(3, dtype=np.float32), arr(4), arr(6)[::2], np.arange(3)):
        ref, got = f(a.copy()), c(a)
        assert got.dtype == ref.dtype and np.allclose(got, ref)
    with traced() as t:
        c(arr(3, seed=5))  # the first entry still serves fresh values
    assert t.frames_traced == 0


def test_array_sizes_become_symbolic_when_they_change():
    def f(a, b):
        return np.sum(a * 2, axis=0) + b[:2], len(a), a.T @ a[:, :1]

    c = tracer.compile(f)
    for n in (4, 6, 8, 10, 12):
        _, d = run(c, f, arr(n, 3), arr(5, 3))
        assert d.breaks == 0 and d.fallbacks == 0
    assert len(c.entries) == 2  # the first size, then every size
    with traced() as t:
        run(c, f, arr(20, 3), arr(5, 3))
    assert t.frames_traced == 0
    # a strided view and a Fortran-order array are not C-contiguous: static sizes, own entries
    for a in (arr(7, 6)[:, ::2], np.asfortranarray(arr(7, 3))):
        ref, got = f(a.copy(), arr(5, 3)), c(a, arr(5, 3))
        assert all(np.allclose(x, y) for x, y in zip(ref, got))
    assert len(c.entries) == 4


# ---- what stays Python, and says why --------------------------------------------------------

@pytest.mark.parametrize("case", ["mix", "item", "branch", "random", "tensor_arg", "object"])
def test_what_numpy_leaves_to_python(case):
    def mix(x, a):
        return x * 2, a * x, x < a  # the array on the left, a comparison: raise in eager

    def item(x, a):
        return x + 1, float(np.sum(a))

    def branch(x, a):
        if a.sum() > 0:  # data-dependent
            return x + 1
        return x - 1

    def rand(x, a):
        return x + 1, np.random.default_rng(0).random(3) + a[:3]

    def tensor_arg(x, a):
        return x + 1, np.sum(x)  # NumPy given a tensor (its own conversion, some raise)

    def obj(x, a):
        return x + 1, np.array(["a", "b"]), a

    fn = {"mix": mix, "item": item, "branch": branch, "random": rand, "tensor_arg": tensor_arg,
          "object": obj}[case]
    c = tracer.compile(fn)
    _, d = run(c, fn, torch.randn(3), arr(3))
    assert d.fallbacks == 0 and d.graphs >= 1
    if case != "object":
        assert d.breaks >= 1, d


def test_graph_break_in_the_middle_of_numpy_code():
    sink = io.StringIO()

    def f(a):
        b = np.sin(a) * 2
        c = b.reshape(print("x", file=sink) or 2, -1)  # a break with `b.reshape` on the stack
        return np.cos(c).sum(axis=0), b

    check(f, arr(3, 4), graphs=2, breaks=1)


def test_read_only_array_is_passed_through():
    a = arr(3)
    a.flags.writeable = False

    def f(x, a):
        return x + 1, a * 2

    c = tracer.compile(f)
    with traced() as t:
        out = c(torch.ones(2), a)
    assert np.array_equal(out[1], a * 2) and torch.equal(out[0], torch.full((2,), 2.0))
    assert t.fallbacks == 0 and t.graph_breaks == 1  # untouched by the graph; the multiply is Python's
    b = arr(3)
    with traced() as t:
        out = c(torch.ones(2), b)  # a writeable one is traced whole (an entry of its own)
    assert np.array_equal(out[1], b * 2) and t.graph_breaks == 0 and t.graphs == 1


def test_tensor_operator_with_an_array_on_the_right():
    """`t * arr` is NumPy's computation on t's values, handed back as a Tensor (float64 here,
    NumPy's promotion); `t += arr` makes a new tensor and leaves t as it was."""
    def f(x, a):
        y = x * a + x / a
        z = x.clone()
        z += a
        return y, z, x ** a[:1], x.reshape(1, 3) @ a.reshape(3, 1)

    check(f, torch.randn(3), arr(3), graphs=1)


def test_numpy_scalar_beside_a_float_tensor():
    def f(x, a):
        w = np.mean(a)
        return x * w, np.sqrt(a).sum() + x, x > a.max(), w * x.double()

    check(f, torch.randn(3, 4), arr(5), graphs=1)
    for x in (torch.ones(3, dtype=torch.int64), torch.tensor(2.0)):  # the number's kind decides: Python
        c = tracer.compile(lambda x, a: x * np.mean(a))
        _, d = run(c, lambda x, a: x * np.mean(a), x, arr(5))
        assert d.breaks == 1


def test_arrays_of_dynamic_size():
    def f(x):
        a = x.numpy()
        n = a.shape[0]
        return torch.from_numpy(a[: n - 1] * 2), a.shape, a.nbytes, len(a)

    c = tracer.compile(f)
    for n in (3, 5, 7, 9):
        _, d = run(c, f, torch.randn(n, 2))
        assert d.breaks == 0 and d.fallbacks == 0
    with traced() as t:
        run(c, f, torch.randn(11, 2))
    assert t.frames_traced == 0  # the size is symbolic: one entry for every size
    # (a symbolic size given to a NumPy operation, `a * a.size`, is specialised by
    # torch._numpy, which makes a tensor of it: one entry per size, right for each)


def test_numpy_in_a_module_forward():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, mask):
            keep = np.logical_not(mask).astype(np.float32)
            return self.lin(x) * torch.from_numpy(keep)

    m = M()
    c = tracer.compile(m)
    x, mask = torch.randn(2, 4), np.array([[True, False, False, True]] * 2)
    with traced() as t:
        out = c(x, mask)
    assert torch.allclose(out, m(x, mask)) and t.graphs == 1 and t.graph_breaks == 0 and t.fallbacks == 0
