"""tracer.capture(): whole-program capture through the C frame hook."""
import threading

import pytest
import torch

import tracer
from tracer.frame_hook import get_eval_frame

import capture_helpers


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
        raise ValueError("user error")

    with pytest.raises(ValueError, match="user error"):
        with tracer.capture():
            boom(torch.ones(1))
    assert get_eval_frame() is None


def test_generators_inside_the_block_still_run():
    with tracer.capture():
        values = list(capture_helpers.gen(4))
    assert values == [0, 2, 4, 6]


def test_nested_capture_and_compile_inside_capture():
    f = tracer.compile(capture_helpers.scale_shift)
    x = torch.randn(5)
    with tracer.capture():
        with tracer.capture():
            inner = f(x)
        outer = capture_helpers.scale_shift(x)
    ref = capture_helpers.scale_shift(x)
    assert torch.allclose(inner, ref) and torch.allclose(outer, ref)
    assert get_eval_frame() is None


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
