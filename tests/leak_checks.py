"""Leak checks run in a fresh interpreter (`helpers.run_leak_check(name)`): each counts
objects and traced memory before and after thousands of calls, which only means something
when no garbage of earlier tests is waiting for the collector. Each function raises
AssertionError with the numbers when it fails."""
import collections
import gc
import sys
import tracemalloc
import types

import torch

import tracer
from tracer.runtime import cache

import capture_helpers


class Counting:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def hooked_calls_leak_nothing():
    x = torch.randn(3)
    backend = Counting()
    with tracer.capture(backend=backend):
        for _ in range(100):  # warm up: compile and fill caches
            capture_helpers.scale_shift(x)
        # until nothing is left: garbage of earlier tests (a ShapeEnv's weakly keyed caches)
        # can take two passes, and would show up as objects freed during the loop
        for _ in range(10):
            if not gc.collect():
                break
        refs_before = sys.getrefcount(x)
        objects_before = len(gc.get_objects())
        tracemalloc.start()
        snap_before = tracemalloc.take_snapshot()
        for _ in range(10_000):
            capture_helpers.scale_shift(x)
        gc.collect()
        snap_after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        objects_after = len(gc.get_objects())
        refs_after = sys.getrefcount(x)
    growth = sum(s.size_diff for s in snap_after.compare_to(snap_before, "filename"))
    assert len(backend.graphs) == 1
    assert refs_after == refs_before
    # growth only: objects of earlier tests released during the loop (an fx graph of a
    # previous test, its node metadata: -150 objects here) are not a leak of this loop
    assert objects_after - objects_before < 50
    assert growth < 64 * 1024, f"{growth} bytes retained over 10,000 calls"


def dropped_functions_leak_nothing():
    """300 fresh functions (after 450 to warm up), each traced (caches are keyed by code identity: equal code
    objects from different sources are different functions). Not counted: the stats event
    log (bounded; shrunk here so the warm-up fills it) and torch.fx's linecache entry per
    GraphModule (`<eval_with_key>.N` in linecache and fx's eval cache: torch's own,
    torch.compile makes them too)."""
    import linecache
    from tracer.runtime import records
    records.MAX_EVENTS = 50
    tracer.reset_stats()
    src = "def f(x, n):\n    return x * n + 1\n"
    x = torch.ones(2)

    def cycle(k):
        ns = {}
        exec(compile(src, f"<leak{k}>", "exec"), ns)  # a fresh code object each time
        c = tracer.compile(ns["f"])
        c(x, 2)
        return c

    def settle():
        for name in [n for n in linecache.cache if n.startswith("<eval_with_key>")]:
            del linecache.cache[name]
        from torch.fx import graph_module  # torch's own record of each GraphModule's source
        graph_module._loader.eval_cache.clear()
        gc.collect()

    for k in range(450):  # warm-up: lazily created module state, bounded caches of torch
        cycle(k)       # (fake-tensor and fx caches fill within ~300 fresh functions)
    settle()

    def owned():
        """Live objects this loop could leak: the tracer's and the guards' own (entries,
        guard sets, programs, variables) and the user functions it compiled. A count of all
        gc objects is not used: bounded caches churn in batches (-1,410 / +527 / +2,111
        objects after warm-ups of 449 / 450 / 600 functions, with no change to the code)."""
        out = collections.Counter()
        for o in gc.get_objects():
            mod = type(o).__dict__.get("__module__", "") if isinstance(type(o).__dict__.get("__module__"), str) else ""
            if mod.startswith(("tracer", "guards")):
                out["tracer"] += 1
            elif type(o) is types.FunctionType and o.__code__.co_filename.startswith("<leak"):
                out["user functions"] += 1
        return out

    tracemalloc.start()
    before_objs = owned()
    before_mem = tracemalloc.get_traced_memory()[0]
    probe = cycle(-1)
    ref = __import__("weakref").ref(probe._fn)
    del probe
    for k in range(300):
        cycle(k)
    settle()
    after_objs = owned()
    after_mem = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert ref() is None, "a dropped compiled function's user function is freed"
    # a leak of one object per compiled function would be +300; bounded caches that hold
    # recent entries move this by up to ~70 (106/160/226 before, 178 after, for warm-ups of
    # 600/450/449 functions)
    assert after_objs["tracer"] - before_objs["tracer"] < 150, (before_objs, after_objs)
    assert after_objs["user functions"] <= before_objs["user functions"], (before_objs, after_objs)
    assert after_mem - before_mem < 1_000_000, (before_mem, after_mem)
    assert len(cache._CACHES) < 100
    assert tracer.stats().frames_traced >= 750, "every fresh function was traced (no shared cache)"



if __name__ == "__main__":
    globals()[sys.argv[1]]()
    print("ok")
