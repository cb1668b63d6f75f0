"""Where torch._numpy differs from NumPy, the compiled code still gives NumPy's answer (issue 35).

Each case was a wrong result in a review of the first version of NumPy tracing (tnp's own
dtype, view or scalar rules leaking out). Now NumPy itself is asked about every traced call
on stand-in arrays (tracer/variables/numpy_oracle.py) and a difference is a graph break;
values tnp computes otherwise are refused by name (numpy_vars._VALUE_DIFFERENCES). Each case
compares compiled with eager on two calls (results, exceptions, mutated inputs), and says
whether it is captured whole or breaks.
"""
import io

import numpy as np
import pytest
import torch

import tracer
from semantics_helpers import run


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def a3():
    return np.array([[1.5, -2.0, 3.25], [0.5, -0.75, 2.0]])


CASES = {
    # copies that tnp made views (or the input itself)
    "flatten_is_a_copy": (lambda a: (a.flatten().__setitem__(0, 9.0), a)[1], a3),
    "astype_is_a_copy": (lambda a: ((b := a.astype(np.float64)).__iadd__(1), a, b)[1:], a3),
    "positive_conj_are_copies": (lambda a: ((+a) is a, np.conj(a) is a, np.positive(a) is a), a3),
    # views that tnp copies
    "write_through_a_reversed_view": (lambda a: ((b := a[:, ::-1]).__setitem__((0, 0), 9.0), a)[1], a3),
    "reversed_view_sees_later_writes": (lambda a: ((b := a[::-1]), a.__iadd__(1), b * 1)[2], a3),
    "reversed_view_returned": (lambda a: a[::-1], a3),
    # read-only views and overlapping writes
    "broadcast_to_is_read_only": (lambda a: np.broadcast_to(a[0], (2, 3)).__setitem__(0, 5.0), a3),
    "diagonal_is_read_only": (lambda a: np.diagonal(a).__setitem__(0, 5.0), a3),
    "overlapping_assignment": (lambda a: (a[0].__setitem__(slice(1, None), a[0][:-1]), a)[1], a3),
    # scalars and 0-d arrays
    "scalar_methods_stay_scalars": (lambda a: (a.sum().astype(np.float32), a.sum().copy(), a.max().T), a3),
    "median_without_axis": (lambda a: (np.median(a), np.percentile(a, 50.0)), a3),
    # dtypes tnp gives otherwise
    "cumsum_of_int32": (lambda a: np.cumsum(np.full(3, 2**30, np.int32) + a.astype(np.int32)), a3),
    "square_of_ints": (lambda a: np.square(a.astype(np.int64)), a3),
    "sin_of_bools": (lambda a: np.sin(a > 0), a3),
    "fft_of_float32": (lambda a: np.fft.fft(a.astype(np.float32)), a3),
    "sum_of_uint8": (lambda a: (np.sum(a.astype(np.uint8)), np.any(a.astype(np.uint8))), a3),
    # values tnp computes otherwise
    "cbrt_of_negatives": (lambda a: np.cbrt(a), a3),
    "fix_of_negative_halves": (lambda a: np.fix(a), a3),
    "round_with_decimals": (lambda a: np.round(a * 100, -1), a3),
    "integer_division_by_zero": (lambda a: a.astype(np.int64) // (a > 10).astype(np.int64), a3),
    "integer_power_negative": (lambda a: a.astype(np.int64) ** -1, a3),
    "isscalar_of_an_array": (lambda a: np.isscalar(a), a3),
    "argsort_ties": (lambda a: np.argsort(np.floor(a.ravel()) * 0), a3),
    "symbolic_size_as_an_operand": (lambda a: (a * a.size, np.zeros(len(a))), a3),
    # NumPy scalars given to torch
    "torch_tensor_of_numpy_scalar": (lambda a: torch.tensor(np.float32(a.sum())), a3),
    # found by a second review
    "slice_of_a_large_array_is_a_view": (lambda a: ((b := a[10:20]).__setitem__(slice(None), 1.0), a[:20].sum())[1],
                                         lambda: np.zeros(300_000)),
    "view_of_a_reversed_view": (lambda a: ((c := a[::-1][:, 1]), a.__setitem__((1, 1), 50.0), c.copy())[2], a3),
    "write_through_a_transposed_reversed_view": (lambda a: (a[::-1].T.__setitem__((0, 0), 9.0), a)[1], a3),
    "copyto_into_a_reversed_view": (lambda a: (np.copyto(a[::-1], a[0]), a)[1], a3),
    "copyto_into_a_read_only_view": (lambda a: np.copyto(np.diagonal(a), 1.0), a3),
    "copyto_overlapping": (lambda a: (np.copyto(a[0][1:], a[0][:-1]), a)[1], a3),
    "put_into_a_reversed_view": (lambda a: (np.put(a[0][::-1], [0], 9.0), a)[1], a3),
    "uint8_compared_with_out_of_range_ints": (lambda a: (a.astype(np.uint8) == 256, a.astype(np.uint8) < -1), a3),
    "ceil_of_bools": (lambda a: np.ceil(a > 0), a3),
    "sign_of_complex": (lambda a: np.sign(a.astype(np.complex64)), a3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_answer(name):
    fn, make = CASES[name]
    c = tracer.compile(fn)
    for _ in range(2):
        _, d = run(c, fn, make())
        assert d.fallbacks == 0 or not d.fallback_reasons or all("internal" not in r for r in d.fallback_reasons)


def test_sizes_given_to_numpy_operations_are_right_on_every_size():
    def f(a):
        return a * a.size, np.zeros(len(a))

    c = tracer.compile(f)
    for n in (3, 4, 5, 0, 1, 6):
        got, ref = c(np.ones(n)), f(np.ones(n))
        assert got[0].shape == ref[0].shape and np.array_equal(got[0], ref[0]) and got[1].shape == ref[1].shape


def test_negative_zero_scalar_input_is_its_own_entry():
    def f(a, s):
        return a / s, np.copysign(1.0, s)

    c = tracer.compile(f)
    for s in (np.float64(0.0), np.float64(-0.0), np.float64(0.0)):
        got, ref = c(np.arange(3.0), s), f(np.arange(3.0), s)
        assert np.array_equal(got[0], ref[0], equal_nan=True) and got[1] == ref[1]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_array_inputs_that_share_memory(backend):
    """Separate graph inputs are separate memory to a functionalizing backend (aot_eager):
    arrays that overlap are refused, and guarded apart."""
    def f(a, b):
        b[:] = 2.0
        return a.sum()

    def g(a):
        b = a[1]
        print("x", file=io.StringIO())  # the resume function gets a and its view b
        b[:] = 2.0
        return a[:2].sum()

    c, cg = tracer.compile(f, backend=backend), tracer.compile(g, backend=backend)
    assert c(np.zeros((3, 4)), np.zeros(4)) == 0.0  # traced apart
    for _ in range(2):
        y, z = np.zeros((3, 4)), np.zeros((3, 4))
        assert c(y, y[1]) == f(z, z[1]) == 8.0
        assert cg(np.zeros((3, 4))) == g(np.zeros((3, 4))) == 8.0


def test_linalg_error_is_numpys():
    def f(a):
        try:
            return np.linalg.inv(np.zeros((2, 2)) * a[0, 0])
        except np.linalg.LinAlgError:
            return "singular"

    assert tracer.compile(f)(a3()) == f(a3()) == "singular"


def test_errstate_is_respected():
    def f(a):
        return a / 0.0

    c = tracer.compile(f)
    c(np.ones(2))  # traced under NumPy's default error handling
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            c(np.ones(2))


def test_errstate_block_inside_the_frame():
    def f(a):
        with np.errstate(divide="raise"):
            return a / 0.0

    with pytest.raises(FloatingPointError):
        f(np.ones(2))
    with pytest.raises(FloatingPointError):
        tracer.compile(f)(np.ones(2))
