"""Robustness: threads, deep recursion, leaks, recompile storms, hostile names.

Numbers (kept small for CI): 8 threads x 25 calls over 4 shapes; recursion 200 and
(recursion limit - 150) deep; 2,000 functions compiled, called and dropped; 20 distinct
constants against a recompile limit of 8; attribute names / dict keys with quotes,
newlines and `__import__('os')`.
"""
import gc
import sys
import threading
import tracemalloc
import warnings

import pytest
import torch

import tracer
from tracer import cache


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


# ---- threads -------------------------------------------------------------------------------
def test_threads_same_function_different_shapes():
    def f(x, k):
        y = x.sin() * k
        for _ in range(3):
            y = y + x.cos()
        return y.sum(0)

    c = tracer.compile(f, dynamic=False)  # one entry per shape (no symbolic sizes)
    shapes = [(2, 3), (4, 1), (5, 5), (3, 7)]
    errors, barrier = [], threading.Barrier(8)

    def work(i):
        try:
            barrier.wait()
            for j in range(25):
                x = torch.randn(*shapes[(i + j) % 4])
                out = c(x, 2.0)
                if not torch.allclose(out, f(x, 2.0), atol=1e-6):
                    errors.append(f"thread {i} call {j}: wrong result")
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    code_cache = cache.cache_for(f.__code__)
    assert len(code_cache.entries) == 4 == code_cache.compiles, "one entry per shape, no duplicates"
    assert len(c.entries) == 4 and not code_cache.warned


# ---- recursion -----------------------------------------------------------------------------
def _rec(x, n):
    if n == 0:
        return x
    return _rec(x + 1, n - 1)


LIMIT_OK = pytest.mark.filterwarnings("default::tracer.RecompileLimitWarning")


@LIMIT_OK  # each recursion level is a new constant n: the recompile limit is part of the test
@pytest.mark.parametrize("depth", [200, "limit"])
def test_deep_recursion_never_recursion_error_from_tracer(depth):
    n = sys.getrecursionlimit() - 150 if depth == "limit" else depth
    c = tracer.compile(_rec)
    x = torch.zeros(2)
    assert torch.equal(c(x, n), x + n)
    assert torch.equal(c(x, n), x + n)  # cached


@LIMIT_OK
def test_deep_recursion_inside_capture():
    x = torch.zeros(2)
    with tracer.capture():
        out = _rec(x, 300)
    assert torch.equal(out, x + 300)


# ---- leaks ---------------------------------------------------------------------------------
def test_compiled_and_dropped_functions_leak_nothing():
    """2,000 fresh functions (10,000 takes ~4x longer; the counts are flat either way)."""
    src = "def f(x, n):\n    return x * n + 1\n"
    x = torch.ones(2)

    def cycle(k):
        ns = {}
        exec(compile(src, f"<leak{k}>", "exec"), ns)  # a fresh code object each time
        c = tracer.compile(ns["f"])
        c(x, 2)
        return c

    for k in range(200):  # warm-up: lazily created module state
        cycle(k)
    gc.collect()
    tracemalloc.start()
    before_objs = len(gc.get_objects())
    before_mem = tracemalloc.get_traced_memory()[0]
    probe = cycle(-1)
    ref = __import__("weakref").ref(probe._fn)
    del probe
    for k in range(2000):
        cycle(k)
    gc.collect()
    after_objs = len(gc.get_objects())
    after_mem = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert ref() is None, "a dropped compiled function's user function is freed"
    assert after_objs - before_objs < 500, (before_objs, after_objs)
    assert after_mem - before_mem < 2_000_000, (before_mem, after_mem)
    assert len(cache._CACHES) < 100


# ---- recompile storm -----------------------------------------------------------------------
@LIMIT_OK
def test_recompile_storm_degrades_to_eager_with_one_warning():
    def f(x, k):
        return x * k + k

    c = tracer.compile(f, dynamic=False)  # every k is a constant (no symbolic ints)
    x = torch.ones(3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(20):
            assert torch.equal(c(x, k), f(x, k))
        for k in range(20):
            assert torch.equal(c(x, k), f(x, k))
    storm = [m for m in w if "recompiled" in str(m.message)]
    assert len(storm) == 1
    assert cache.cache_for(f.__code__).compiles == cache.RECOMPILE_LIMIT


# ---- hostile names -------------------------------------------------------------------------
HOSTILE = ["a'b", 'a"b', "line\nbreak", "__import__('os').system('echo pwned')", "x')\n__import__('os')#",
           "\\", "{0}", "%s", "é\u2028"]


class Box:
    pass


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_attribute_names_and_dict_keys(name):
    def f(x, obj, d, key):
        return x * getattr(obj, key) + d[key] + len(d)

    c = tracer.compile(f)
    x = torch.ones(2)
    for v in (1, 2, 2, 5):
        obj, d = Box(), {name: v, "other": 1}
        setattr(obj, name, v + 1)
        assert torch.equal(c(x, obj, d, name), f(x, obj, d, name))
    for e in c.entries:
        e.guards.describe()  # describing guards with such names works too
