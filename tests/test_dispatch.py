"""CompiledFunction's cache-hit path in C (tracer/runtime/_dispatch.c): a plain positional call is
checked and run without the Python `_slow`; everything else goes there. Results always
equal eager's, hits are counted, and entries dropped or added in Python are seen by C."""
import pytest
import torch

import tracer
from tracer.api import _DispatchBase

pytestmark = pytest.mark.skipif(_DispatchBase is None, reason="tracer.runtime._dispatch is not built")


def counted(c):
    """Count the calls that reach the Python path (C looks `_slow` up on the object)."""
    calls = []
    slow = c._slow

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return slow(*args, **kwargs)
    c._slow = spy
    return calls


def test_hits_run_in_c_and_everything_else_in_python():
    tracer.reset()

    def f(x, y, scale=2.0):
        return (x + y) * scale

    c = tracer.compile(f)
    calls = counted(c)
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(c(x, y, 2.0), f(x, y, 2.0))  # a miss: Python traces
    assert len(calls) == 1
    h0 = tracer.stats().cache_hits
    for _ in range(3):  # all parameters, by position: checked and run in C
        torch.testing.assert_close(c(x, y, 2.0), f(x, y, 2.0))
    assert len(calls) == 1 and tracer.stats().cache_hits == h0 + 3
    torch.testing.assert_close(c(x, y), f(x, y))  # a default to bind: Python
    torch.testing.assert_close(c(x, y=y, scale=2.0), f(x, y=y, scale=2.0))  # keywords: Python
    assert len(calls) == 3
    z = torch.zeros(2, 3)
    torch.testing.assert_close(c(x, z, 2.0), f(x, z, 2.0))  # a guard fails in C: Python recompiles
    assert len(calls) == 4
    torch.testing.assert_close(c(x, y, 2.0), f(x, y, 2.0))
    assert len(calls) == 4
    tracer.reset_stats()
    c(x, y, 2.0)
    assert tracer.stats().cache_hits == 1
    tracer.reset()


def test_guard_failure_and_reset_are_seen_by_the_c_path():
    tracer.reset()

    def f(x):
        return x.sin() if x.dim() == 1 else x.cos()

    c = tracer.compile(f)
    a, b = torch.randn(4), torch.randn(2, 2)
    for v in (a, b, a, b):  # each shape misses once, then hits its own entry
        torch.testing.assert_close(c(v), f(v))
    frames = tracer.stats().frames_traced
    tracer.reset()  # drops every entry (CompiledFunction._hits cleared in place)
    torch.testing.assert_close(c(a), f(a))
    assert tracer.stats().frames_traced == frames + 1
    tracer.reset()


def test_methods_and_star_signatures():
    tracer.reset()

    class M:
        k = 3.0

        @tracer.compile
        def scaled(self, x):
            return x * self.k

    m, x = M(), torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(m.scaled(x), x * 3.0)

    def g(*xs):
        return sum(xs)

    cg = tracer.compile(g)
    calls = counted(cg)
    for _ in range(3):
        torch.testing.assert_close(cg(x, x), g(x, x))
    assert len(calls) == 3  # a star signature always binds in Python
    tracer.reset()
