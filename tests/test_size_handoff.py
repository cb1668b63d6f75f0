"""Sizes handed on across graph breaks (tracer/rewrite/handoff.py, issue 32).

A size that is already dynamic where a value comes from stays dynamic in the code objects the
value goes to: the resume function after an op whose output size depends on the data
(nonzero), the resume functions after it, a function called at a break, a function called by
a frame that runs as Python, and the resume function that gets a traced callee's return value.
Each test runs a sequence of inputs whose data-dependent sizes change and asserts that no
frame was traced again, beside outputs equal to eager's on every call and graphs captured.
Before the hand-off each of those frames was traced twice (static, then dynamic), as
torch.compile's are.
"""
import pytest
import torch

import tracer


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    yield
    tracer.reset()


SEEN = []


@tracer.disable
def _opaque(t):
    """A call the tracer does not trace (a graph break), like a print: returns None."""
    SEEN.append(t.shape)


def _inputs(counts, n=12):
    """1-d tensors with `count` positive entries each (the rest negative), shuffled."""
    g = torch.Generator().manual_seed(0)
    out = []
    for k in counts:
        x = -torch.rand(n, generator=g) - 0.5
        x[:k] = torch.rand(k, generator=g) + 0.5
        out.append(x[torch.randperm(n, generator=g)])
    return out


def _same(got, want):
    if isinstance(want, torch.Tensor):
        assert got.shape == want.shape and torch.allclose(got, want), (got, want)
    else:
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)


def _run(fn, counts, **kw):
    compiled = tracer.compile(fn, **kw)
    xs = _inputs(counts)
    _same(compiled(xs[0]), fn(xs[0]))
    first = tracer.stats()
    assert first.graphs >= 2 and first.graph_breaks >= 1 and first.internal_errors == 0, first
    for x in xs[1:]:
        _same(compiled(x), fn(x))
    now = tracer.stats()
    return first, now


def pick(x):
    y = x * 2
    idx = torch.nonzero(y > 0)[:, 0]
    z = y[idx] + 1
    return z.sum(0), z


def test_data_dependent_result_is_dynamic_in_the_resume_function():
    first, now = _run(pick, [5, 7, 3, 9])
    assert now.frames_traced == first.frames_traced, now
    assert now.recompiles == 0, now


def chained(x):
    idx = torch.nonzero(x > 0)[:, 0]
    z = x[idx] * 2
    _opaque(z)            # a second break: `z` goes on as a local of the next resume function
    w = z.cumsum(0) + z.sum()
    _opaque(w)            # and a third: `w`, made in the trace between, too
    return w - 1, idx


def test_dynamic_size_goes_on_through_later_breaks():
    first, now = _run(chained, [4, 6, 8, 5])
    assert now.frames_traced == first.frames_traced, now


def counted(x):
    idx = torch.nonzero(x > 0)[:, 0]
    k = len(idx)          # an int from a size that came from the data: a symbol
    _opaque(x)            # `k` goes on to the next resume function as an int
    return x[:k] * k


def test_symbolic_int_stays_symbolic_across_a_break():
    first, now = _run(counted, [4, 6, 8, 5])
    assert now.frames_traced == first.frames_traced, now


def inner(z):
    z = z * 3
    _opaque(z)            # inner cannot be inlined: outer breaks at its call, inner is a frame
    return z - 1


def outer(x):
    idx = torch.nonzero(x > 0)[:, 0]
    z = x[idx]
    return inner(z) * 2   # what inner returns comes back with its dynamic size


def test_function_called_at_a_break_and_its_return_value():
    first, now = _run(outer, [4, 6, 8, 5])
    names = {e.frame for e in first.of("frame")}
    assert any(n.startswith("inner") for n in names), names  # (it was a frame of its own)
    assert now.frames_traced == first.frames_traced, now


def takes_list(boxes):
    n = boxes[0].shape[0]
    _opaque(boxes[0])     # takes_list cannot be inlined: a frame of its own
    return boxes[1] * 2 + n


def passes_a_list(x):
    idx = torch.nonzero(x > 0)[:, 0]
    pair = [x[idx], x[idx] + 1]
    _opaque(x)            # `pair` goes on to the next resume function, which reads no item of it
    return takes_list(pair)


def test_list_passed_on_unread_hands_on_what_its_argument_was_handed():
    first, now = _run(passes_a_list, [4, 6, 8, 5])
    assert now.frames_traced == first.frames_traced, now


def helper(z):
    return z.cumsum(0) * 2


def runs_as_python(z):
    w = helper(z)         # called natively once this frame runs as Python
    for _ in range(2):
        _opaque(w)        # a break inside a loop: the frame runs as Python
    return w


def calls_a_python_frame(x):
    idx = torch.nonzero(x > 0)[:, 0]
    return runs_as_python(x[idx]) + 1


def test_frame_that_runs_as_python_hands_its_calls_on():
    first, now = _run(calls_a_python_frame, [4, 6, 8, 5])
    assert first.fallbacks >= 1, first
    again = {e.frame for e in now.of("frame")[len(first.of("frame")):]}
    # helper is not traced again; what runs as Python returns a value whose sizes no trace
    # saw, so the resume function that gets it is traced once more, and only it
    assert "helper" not in again and "runs_as_python" not in again, again
    assert len(again) <= 1 and all(n.startswith("calls_a_python_frame.<resume@") for n in again), again


def test_sizes_0_and_1_still_specialise_and_stay_correct():
    first, now = _run(pick, [1, 0, 6, 1, 7, 0])
    assert now.internal_errors == 0


def test_not_under_dynamic_false():
    first, now = _run(pick, [5, 7, 3], dynamic=False)
    assert now.recompiles == 2, now  # every new size is a trace of its own, as asked


def sized(x):
    idx = torch.nonzero(x > 0)[:, 0]
    z = x[idx]
    sz, pair = z.shape, (z.shape[0], 1)  # a torch.Size and a tuple with a symbolic item
    _opaque(x)            # both go on to the next resume function
    return z.reshape(-1).view(sz) * 2 + z.view(pair).sum()


def test_a_size_or_tuple_of_sizes_kept_across_a_break_stays_dynamic():
    """A torch.Size (or tuple) holding a symbolic size, live across a break, was handed on as
    nothing (only an int at the top was): the resume function that got it was traced static,
    then again when the size changed (two ints from `B, C = x.shape` were handed on)."""
    first, now = _run(sized, [4, 6, 8, 5])
    assert now.frames_traced == first.frames_traced, now
    assert now.recompiles == 0, now


@pytest.mark.parametrize("dynamic", [None, True])
def test_a_size_kept_across_a_break_is_not_pinned(dynamic):
    """`sz = x.shape` live across a break reached the resume function as a torch.Size, wrapped
    as a constant guarded by its value (`sz == torch.Size([2, 3])`), even under dynamic=True:
    a trace per size until the recompile limit, 9 graphs for 12 sizes (torch.compile: 3, and
    2 under dynamic=True). Its items are ints of the resume function's argument now, dynamic
    as the same sizes kept as two ints are (`B, C = x.shape`)."""
    def f(x):
        sz = x.shape
        _opaque(x)
        return x.reshape(-1).view(sz) + 1

    compiled = tracer.compile(f, dynamic=dynamic)
    for n in range(2, 14):
        x = torch.randn(n, 3)
        _same(compiled(x), f(x))
    s = tracer.stats()
    assert s.recompile_limits == 0 and s.fallbacks == 0 and s.internal_errors == 0, s
    assert s.graphs == (3 if dynamic is None else 2), s  # (f's first trace has no graph: only the break)
