"""One end-to-end test per guarded fact that had none: the fact changes between two calls, the
second call must recompile (the recompile event names the guard that failed) and return what
eager returns; a third call with the changed fact kept hits the new entry.

Facts: tensor aliasing between inputs, the default dtype, inference mode, autocast,
deterministic algorithms, a stride-only change, a Parameter vs a tensor subclass, a builtin
later shadowed by a global, global module hooks, a closure cell's contents.
"""
import contextlib

import pytest
import torch
import torch.nn as nn

import tracer
from helpers import assert_captured, assert_recompiled, traced


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    torch.testing.assert_close(a, b, atol=1e-2, rtol=1e-2)  # (bfloat16 under autocast)


def changed_fact(fn, args_before, args_after, guard, context=contextlib.nullcontext, min_ops=1):
    """fn compiled; a call before the change, then calls after it (inside `context`): one
    recompile naming `guard`, the eager result, then a cache hit."""
    c = tracer.compile(fn)
    same(c(*args_before()), fn(*args_before()))
    assert_captured(c, min_ops=min_ops, entries=1)
    with context():
        with traced() as t:
            out = c(*args_after())
        same(out, fn(*args_after()))
        assert_recompiled(t, guard)
        with traced() as again:
            same(c(*args_after()), fn(*args_after()))
        assert again.frames_traced == 0 and again.cache_hits >= 1, str(again)
    assert_captured(c, min_ops=min_ops, entries=2)
    return c


def test_tensor_aliasing_between_inputs():
    def f(x, y):
        x.add_(1)
        return x + y  # aliased: y moved with x

    a, b = torch.ones(3), torch.zeros(3)
    c = tracer.compile(f)
    e1, e2 = torch.ones(3), torch.zeros(3)
    same(c(a, b), f(e1, e2))
    with traced() as t:
        out = c(a, a)
    e = torch.ones(3) * 2
    same(out, f(e, e))
    assert torch.equal(a, e)  # both mutated the same way: a was 2 before, 3 after
    assert_recompiled(t, "x, y are distinct objects")
    assert_captured(c, min_ops=2, entries=2)


def test_default_dtype():
    def f(x):
        return x + torch.ones(3)

    @contextlib.contextmanager
    def float64_default():
        prev = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            yield
        finally:
            torch.set_default_dtype(prev)

    x = torch.ones(3, dtype=torch.float64)
    changed_fact(f, lambda: (x,), lambda: (x,), "default_dtype=float32", float64_default)


def test_inference_mode():
    def f(x):
        y = x * 2
        return y + y.is_inference()

    x = torch.ones(3)
    c = changed_fact(f, lambda: (x,), lambda: (x,), "inference_mode=False", torch.inference_mode)
    with torch.inference_mode():
        assert c(x).is_inference()
    assert not c(x).is_inference()


def test_autocast():
    def f(x, w):
        return x @ w

    x, w = torch.randn(4, 8), torch.randn(8, 4)
    c = changed_fact(f, lambda: (x, w), lambda: (x, w), "autocast(cpu:off",
                     lambda: torch.autocast("cpu", dtype=torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert c(x, w).dtype == torch.bfloat16
    assert c(x, w).dtype == torch.float32


def test_deterministic_algorithms():
    def f(x):
        return x.sum() + torch.are_deterministic_algorithms_enabled()

    @contextlib.contextmanager
    def deterministic():
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(False)

    x = torch.ones(3)
    changed_fact(f, lambda: (x,), lambda: (x,), "deterministic=False", deterministic)


def test_stride_only_change():
    def f(x):
        if x.is_contiguous():
            return x * 2
        return x * 3

    a = torch.randn(3, 3)
    b = torch.randn(3, 3).t()  # same shape, dtype, device: only the strides differ
    changed_fact(f, lambda: (a,), lambda: (b,), "stride")


class Tagged(torch.Tensor):
    """A tensor subclass: ops on it return Tagged (through __torch_function__)."""


def test_parameter_vs_tensor_subclass():
    def f(x):
        return x * 2 + 1

    p = nn.Parameter(torch.randn(3))
    t = torch.randn(3)
    c = changed_fact(f, lambda: (p,), lambda: (t,), "expected type of 'x'")
    s = torch.randn(3).as_subclass(Tagged)
    with traced() as sub:
        out = c(s)
    assert type(out) is Tagged and type(c(p)) is torch.Tensor  # neither entry is reused
    same(out, f(s))
    assert_recompiled(sub, "expected type of 'x'")
    assert sub.fallbacks == 1 and "tensor subclass Tagged" in c.entries[-1].reason  # not traced yet


def test_builtin_later_shadowed_by_a_global():
    ns = {"torch": torch}
    exec("def f(x, items):\n    return x * len(items)\n", ns)
    f = ns["f"]
    x, items = torch.ones(2), [1, 2, 3]
    c = tracer.compile(f)
    same(c(x, items), f(x, items))
    ns["len"] = lambda v: 10  # the module now has a global `len`
    with traced() as t:
        out = c(x, items)
    same(out, torch.full((2,), 10.0))
    assert_recompiled(t, "'len' not shadowed by a global")
    del ns["len"]
    with traced() as back:
        same(c(x, items), torch.full((2,), 3.0))
    assert back.frames_traced == 0, str(back)  # the first entry is valid again
    assert_captured(c, min_ops=2, entries=2)


def test_global_module_hooks():
    """Global forward hooks (`register_module_forward_hook`) run inside the trace as
    nn.Module._call_impl runs them, for every module call (Sequential, then each child), and
    are guarded exactly: registering the first one, a second one, or removing them
    recompiles (or finds the earlier entry again), never runs a stale hook list."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    x = torch.randn(2, 4)

    def f(m, x):
        return m(x) * 2

    c = tracer.compile(f)
    same(c(model, x), f(model, x))
    seen = []

    def hook(mod, inp, out):
        seen.append(type(mod).__name__)
        return out + 1

    def pre_hook(mod, args):
        seen.append("pre " + type(mod).__name__)
        return (args[0] * 0.5,)

    def run_both():
        """(compiled result, hooks seen compiled), checked against eager."""
        seen.clear()
        out = c(model, x)
        mine = list(seen)
        seen.clear()
        same(out, f(model, x))
        assert mine == seen, (mine, seen)
        seen.clear()
        return mine

    handle = nn.modules.module.register_module_forward_hook(hook)
    try:
        with traced() as t:
            assert run_both() == ["Linear", "ReLU", "Sequential"]
        # f recompiles (its guard: no global hooks); the hooks are traced into f's graph:
        # linear, relu, three `out + 1`, `* 2`
        mine = [e.reason for e in t.of("recompile") if e.frame == f.__code__.co_qualname]
        assert mine and "no global nn.Module hooks" in mine[0], str(t)
        assert len(mine) == 1 and t.frames_traced == 1, str(t)
        assert_captured(t, min_ops=6, graphs=1, breaks=0)
        with traced() as warm:  # same hooks, fresh input of the same shape
            x = torch.randn(2, 4)
            assert run_both() == ["Linear", "ReLU", "Sequential"]
        assert warm.frames_traced == 0 and warm.cache_hits >= 1, str(warm)
        pre = nn.modules.module.register_module_forward_pre_hook(pre_hook)
        try:
            with traced() as t2:
                assert run_both() == ["pre Sequential", "pre Linear", "Linear", "pre ReLU", "ReLU",
                                      "Sequential"]
            assert_recompiled(t2, "_global_forward_pre_hooks")
            assert_captured(t2, min_ops=9, graphs=1, breaks=0)
        finally:
            pre.remove()
        with traced() as t3:  # the hook list of the first hooked call again: its entry
            assert run_both() == ["Linear", "ReLU", "Sequential"]
        assert t3.frames_traced == 0, str(t3)
    finally:
        handle.remove()
    with traced() as back:
        same(c(model, x), f(model, x))
    assert back.frames_traced == 0 and seen == [], str(back)


def test_global_module_hooks_fire_for_the_compiled_module_not_its_wrapper():
    """tracer.compile(model) with a global forward hook: the hook sees `model` and each child,
    as in eager, never the CompiledModule wrapper; the children's hooks are traced."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    x = torch.randn(2, 4)
    seen = []

    def hook(mod, inp, out):
        seen.append(mod)
        return out * 2

    cm = tracer.compile(model)
    same(cm(x), model(x))
    handle = nn.modules.module.register_module_forward_hook(hook)
    try:
        with traced() as t:
            out = cm(x)
        mine = list(seen)
        seen.clear()
        same(out, model(x))
        assert mine == seen == [model[0], model[1], model], (mine, seen)
        assert_recompiled(t, "no global nn.Module hooks")
        assert_captured(t, min_ops=4, breaks=0)  # linear, relu and the children's hooks
        seen.clear()
        x2 = torch.randn(2, 4)
        with traced() as warm:  # a fresh input of the same shape
            out2 = cm(x2)
        mine = list(seen)
        seen.clear()
        same(out2, model(x2))
        assert mine == seen == [model[0], model[1], model] and warm.frames_traced == 0, str(warm)
    finally:
        handle.remove()


def test_closure_cell_contents():
    k = 2

    def f(x):
        return x * k

    def set_k(v):
        nonlocal k
        k = v

    x = torch.ones(3)
    c = tracer.compile(f)
    same(c(x), torch.full((3,), 2.0))
    set_k(5)
    with traced() as t:
        out = c(x)
    same(out, torch.full((3,), 5.0))
    assert_recompiled(t, "cell(k) == 2")
    with traced() as again:
        same(c(x), torch.full((3,), 5.0))
    assert again.frames_traced == 0
    assert_captured(c, min_ops=2, entries=2)
