"""tracer.capture(): whole-program capture through the C frame hook."""
import contextlib
import threading

import pytest
import torch

import tracer
from tracer.runtime.frame_hook import get_eval_frame

import capture_helpers
from helpers import assert_captured, run_leak_check, traced


class Counting:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def ops(self):
        return [sum(1 for n in g.graph.nodes if n.op.startswith("call")) for g in self.graphs]


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return capture_helpers.scale_shift(self.lin(x).relu())


@pytest.fixture(autouse=True)
def _reset():
    tracer.reset()
    yield
    tracer.reset()


def test_model_forward_is_captured_and_matches_eager():
    torch.manual_seed(0)
    m, x = Model(), torch.randn(3, 4)
    backend = Counting()
    with tracer.capture(backend=backend):
        out1 = m(x)
        out2 = m(x)
    ref = m(x)
    assert torch.allclose(out1, ref) and torch.allclose(out2, ref)
    assert len(backend.graphs) == 1          # second call is a cache hit
    assert backend.ops() == [5]               # linear, relu, tanh, mul, add: callee inlined
    assert get_eval_frame() is None
    with traced() as warm:
        with tracer.capture(backend=backend):
            m(x)
            m(torch.randn(3, 4))
    assert warm.frames_traced == 0 and warm.cache_hits >= 2, str(warm)


def test_recompiles_when_a_guard_fails_inside_capture():
    backend = Counting()
    with tracer.capture(backend=backend):
        a = capture_helpers.scale_shift(torch.ones(2))
        b = capture_helpers.scale_shift(torch.ones(3, dtype=torch.float64), 3.0)
    assert torch.allclose(a, torch.tanh(torch.ones(2)) * 2 + 1)
    assert torch.allclose(b, torch.tanh(torch.ones(3, dtype=torch.float64)) * 3 + 1)
    assert b.dtype == torch.float64 and len(backend.graphs) == 2


def test_exception_propagates_and_hook_is_removed():
    def boom(x):
        y = x * 2
        raise ValueError("user error")

    with traced() as t:
        with pytest.raises(ValueError, match="user error"):
            with tracer.capture():
                boom(torch.ones(1))
    assert get_eval_frame() is None
    assert_captured(t, min_ops=1, breaks=1)  # the graph before the raise; the raise, natively


def test_generators_inside_the_block_still_run():
    with traced() as t:
        with tracer.capture():
            values = list(capture_helpers.gen(4))
    assert values == [0, 2, 4, 6]
    assert t.frames_traced == 0  # generator frames are not intercepted: they run as they are


def test_nested_capture_and_compile_inside_capture():
    f = tracer.compile(capture_helpers.scale_shift)
    x = torch.randn(5)
    with traced() as t:
        with tracer.capture():
            with tracer.capture():
                inner = f(x)
            outer = capture_helpers.scale_shift(x)
    ref = capture_helpers.scale_shift(x)
    assert torch.allclose(inner, ref) and torch.allclose(outer, ref)
    assert get_eval_frame() is None
    # traced once (by compile()); the plain call in the outer block is the same code, same
    # backend: a cache hit. (compile()'s argument binder, a generated function with the
    # user function's name and file, was traced too, as a second "scale_shift" frame.)
    assert_captured(t, min_ops=3, graphs=1)
    assert t.frames_traced == 1 and t.cache_hits >= 1, str(t)


def test_other_thread_is_not_intercepted():
    backend = Counting()
    seen = {}

    def worker():
        seen["hook"] = get_eval_frame()
        seen["out"] = capture_helpers.scale_shift(torch.ones(2))

    with tracer.capture(backend=backend):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen["hook"] is None
    assert torch.allclose(seen["out"], torch.tanh(torch.ones(2)) * 2 + 1)
    assert backend.graphs == []  # only the worker thread ran user code


def test_callees_of_a_frame_that_falls_back_are_still_traced():
    backend = Counting()

    def outer(x):
        n = len(locals())  # reads its locals by name: the whole frame runs as Python
        return capture_helpers.scale_shift(x) + n  # ... but this call is traced by the hook

    f = tracer.compile(outer, backend=backend)
    x = torch.randn(4)
    assert torch.allclose(f(x), outer(x))
    assert torch.allclose(f(x), outer(x))
    entry, = f.entries
    assert entry.code is None and "locals" in entry.reason, entry.reason
    assert len(backend.graphs) == 1 and backend.ops() == [3]  # scale_shift, as its own frame


def test_disable_keeps_a_function_out_of_tracing():
    backend = Counting()

    @tracer.disable
    def helper(x):
        return x * 3

    def g(x):
        return helper(x) + 1

    with tracer.capture(backend=backend):
        out = g(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 4.0))
    # g graph-breaks at the call of the disabled helper, which runs untraced; `+ 1` is traced
    assert backend.ops() == [1]


def test_coroutines_inside_the_block_still_run():
    import asyncio

    async def double(x):
        await asyncio.sleep(0)
        return x * 2

    with tracer.capture():
        out = asyncio.run(double(torch.ones(2)))
    assert torch.equal(out, torch.full((2,), 2.0))


def test_ten_thousand_hooked_calls_leak_nothing():
    """In a fresh interpreter (leak_checks.py): objects that earlier tests leave for the
    garbage collector would be counted as freed or kept during the loop."""
    run_leak_check("hooked_calls_leak_nothing")


def test_stats_called_inside_capture_does_not_deadlock():
    """tracer.stats() built its Stats (a dataclass: generated __init__ code, which the hook
    traces) while holding the records lock; tracing that frame records it under the same
    lock: the call never returned."""
    done = []

    def user(x):
        s = tracer.stats()
        return x + 1, s.frames_traced >= 0

    def worker():
        with tracer.capture():
            done.append(user(torch.ones(2)))

    t = threading.Thread(target=worker, daemon=True)  # a deadlocked thread cannot be joined
    t.start()
    t.join(120)
    assert done and torch.equal(done[0][0], torch.full((2,), 2.0)) and done[0][1] is True
