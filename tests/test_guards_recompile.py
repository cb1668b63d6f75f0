"""Guards and recompiles, differential against eager: a changed input or module state
recompiles (a new cache entry) and never reuses a stale graph; the recompile limit turns the
function into plain Python with one warning; the cache keeps no input tensors alive.
"""
import copy
import gc
import warnings
import weakref

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer
from tracer.runtime import cache, config

from helpers import assert_captured, assert_warm, traced


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    torch.manual_seed(0)
    yield
    tracer.reset()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.drop(F.relu(self.lin(x))))


def entries(c):
    return c._compiled_forward.entries if isinstance(c, tracer.CompiledModule) else c.entries


def captured(c):
    es = entries(c)
    assert all(e.code is not None for e in es), [e.reason for e in es]
    return len(es)


def fn_sin_add(x, y):
    return (x.sin() + y).relu() * 2


def close(a, b):
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


# ---- input properties ---------------------------------------------------------------------
def test_shape_change_recompiles():
    f = tracer.compile(fn_sin_add)
    x, y = torch.randn(3), torch.randn(3)
    close(f(x, y), fn_sin_add(x, y))
    assert captured(f) == 1
    x2, y2 = torch.randn(2, 5), torch.randn(2, 5)
    close(f(x2, y2), fn_sin_add(x2, y2))
    assert captured(f) == 2
    close(f(x, y), fn_sin_add(x, y))  # old entry still valid: hit, no new entry
    assert captured(f) == 2


def test_dtype_change_recompiles():
    f = tracer.compile(fn_sin_add)
    x, y = torch.randn(3), torch.randn(3)
    f(x, y)
    xd, yd = x.double(), y.double()
    out = f(xd, yd)
    assert out.dtype == torch.float64
    close(out, fn_sin_add(xd, yd))
    assert captured(f) == 2


def test_requires_grad_change_recompiles():
    f = tracer.compile(fn_sin_add)
    x, y = torch.randn(3), torch.randn(3)
    assert not f(x, y).requires_grad
    xg = x.clone().requires_grad_()
    out = f(xg, y)
    assert out.requires_grad
    out.sum().backward()
    xe = x.clone().requires_grad_()
    fn_sin_add(xe, y).sum().backward()
    close(xg.grad, xe.grad)
    assert captured(f) == 2


def test_grad_mode_toggle_recompiles():
    f = tracer.compile(fn_sin_add)
    x, y = torch.randn(3, requires_grad=True), torch.randn(3)
    assert f(x, y).requires_grad
    with torch.no_grad():
        out = f(x, y)
    assert not out.requires_grad
    close(out, fn_sin_add(x, y).detach())
    assert captured(f) == 2
    assert f(x, y).requires_grad  # back to the first entry, grad mode restored


def test_module_under_no_grad():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    assert c(x).requires_grad
    with torch.no_grad():
        out = c(x)
        assert not out.requires_grad
        close(out, model(x))
    assert torch.is_grad_enabled()
    assert captured(c) == 2


def test_a_tuple_argument_is_guarded_by_the_items_read():
    """A tuple of constants was guarded whole on first touch: `x * t[0]` with `t = (2.0, i)`
    recompiled on every call until the limit (torch.compile: one frame). Its type, length and
    the items read are guarded; a use of the whole tuple guards all of it."""
    def f(x, t):
        return x * t[0]

    def g(x, t):
        return x.reshape(t), t

    c, cg = tracer.compile(f), tracer.compile(g)
    with traced() as t:
        for i in range(6):
            x = torch.randn(3)
            assert torch.equal(c(x, (2.0, i)), f(x, (2.0, i)))
    assert t.frames_traced == 1 and t.recompiles == 0, t
    with traced() as t:
        x = torch.randn(3)
        assert torch.equal(c(x, (3.0, 0)), x * 3.0)  # the item read changed
    assert t.recompiles == 1, t
    arg = (3, 1)
    out, same = cg(torch.randn(3), arg)
    assert out.shape == (3, 1) and same is arg  # the caller's tuple, passed through
    with traced() as t:
        assert cg(torch.randn(3), (1, 3))[0].shape == (1, 3)  # the whole tuple is guarded
    assert t.recompiles == 1, t


# ---- module state ---------------------------------------------------------------------------
def test_training_flag_flip_recompiles():
    model = Net()
    ref = copy.deepcopy(model)
    c = tracer.compile(model)
    x = torch.randn(8, 4)
    torch.manual_seed(1)
    out_train = c(x)
    torch.manual_seed(1)
    close(out_train, ref(x))
    model.eval(), ref.eval()
    close(c(x), ref(x))
    close(c(x), ref(x))  # eval twice: deterministic, cache hit
    assert captured(c) == 2
    model.train(), ref.train()
    torch.manual_seed(2)
    a = c(x)
    torch.manual_seed(2)
    close(a, ref(x))
    assert captured(c) == 2  # back to the train entry
    close(model.bn.running_mean, ref.bn.running_mean)


def test_submodule_training_flag_only():
    model = Net()
    c = tracer.compile(model)
    x = torch.randn(8, 4)
    c(x)
    model.drop.eval()  # only the leaf flips
    model.bn.eval()
    out = c(x)
    close(out, model(x))
    assert captured(c) == 2


def test_parameter_replaced_is_read_at_call_time():
    # parameters are graph inputs read from the module on every call (not constants pinned
    # by identity): a new Parameter of the same metadata is used without recompiling
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    model.lin.weight = nn.Parameter(torch.randn(4, 4))
    close(c(x), model(x))
    assert captured(c) == 1


def test_parameter_replaced_with_other_metadata_recompiles():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    model.lin.weight = nn.Parameter(torch.randn(4, 4), requires_grad=False)  # guarded metadata
    close(c(x), model(x))
    assert captured(c) == 2


def test_parameter_updated_in_place_no_recompile():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    with torch.no_grad():
        model.lin.weight.mul_(2)  # like an optimizer step: same object, new values
    close(c(x), model(x))
    assert captured(c) == 1


def test_module_double_recompiles():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    model.double()
    xd = x.double()
    out = c(xd)
    assert out.dtype == torch.float64
    close(out, model(xd))
    assert captured(c) == 2


def test_submodule_replaced_by_same_structure_reuses_the_entry():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    model.lin = nn.Linear(4, 4)  # modules are guarded by structure, not identity
    close(c(x), model(x))
    assert captured(c) == 1


def test_submodule_replaced_by_other_structure_recompiles():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    model.lin = nn.Linear(4, 4, bias=False)
    close(c(x), model(x))
    assert captured(c) == 2


def test_forward_hook_added_after_compile_runs():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    seen = []

    def hook(mod, inp, out):
        seen.append(type(mod).__name__)
        return out + 1

    h = model.register_forward_hook(hook)
    out = c(x)
    assert seen == ["Net"]
    close(out, model.forward(x) + 1)
    h.remove()
    close(c(x), model(x))
    # a hooked module runs as in eager (through __call__); without hooks the entry is reused
    assert_captured(c, min_ops=4, entries=1)
    assert_warm(c, x)


def test_submodule_forward_hook_added_after_compile_runs():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    base = c(x)
    n0 = len(entries(c))
    seen = []
    h = model.lin.register_forward_hook(lambda mod, inp, out: seen.append(1) or out * 0)
    out = c(x)
    assert seen == [1]
    with torch.no_grad():
        exp = model.bn(model.drop(F.relu(model.lin(x) * 0)))
    seen.clear()
    close(out, exp)
    assert len(entries(c)) > n0  # the no-hooks guard failed: never the stale graph
    h.remove()
    close(c(x), base)


def test_forward_pre_hook_added_after_compile_runs():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    model.register_forward_pre_hook(lambda mod, args: (args[0] * 3,))
    close(c(x), model.forward(x * 3))
    assert_captured(c, min_ops=4, entries=1)  # the hooked call ran as in eager, untraced


# ---- globals --------------------------------------------------------------------------------
SCALE = 2.0
USE_SIN = True


def fn_global(x):
    if USE_SIN:
        return x.sin() * SCALE
    return x.cos() * SCALE


def test_global_constant_guard_recompiles():
    global SCALE, USE_SIN
    f = tracer.compile(fn_global)
    x = torch.randn(4)
    try:
        close(f(x), fn_global(x))
        SCALE = 3.0
        close(f(x), x.sin() * 3.0)
        USE_SIN = False
        close(f(x), x.cos() * 3.0)
        assert captured(f) == 3
        SCALE, USE_SIN = 2.0, True
        close(f(x), x.sin() * 2.0)
        assert captured(f) == 3
    finally:
        SCALE, USE_SIN = 2.0, True


# ---- limit, liveness, reset -----------------------------------------------------------------
def fn_limit(x):
    return x * 2 + 1


def test_recompile_limit_falls_back_with_one_warning():
    f = tracer.compile(fn_limit, dynamic=False)  # one entry per shape (no symbolic sizes)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, config.recompile_limit + 1):
            x = torch.randn(n)
            close(f(x), fn_limit(x))
        assert len(f.entries) == config.recompile_limit
        assert not [x for x in w if issubclass(x.category, RuntimeWarning)]
        for n in range(config.recompile_limit + 1, config.recompile_limit + 5):
            x = torch.randn(n)
            close(f(x), fn_limit(x))
        x = torch.randn(1)  # an old shape still hits its entry
        close(f(x), fn_limit(x))
    runtime = [x for x in w if issubclass(x.category, RuntimeWarning)]
    assert len(runtime) == 1, [str(x.message) for x in runtime]
    assert "fn_limit" in str(runtime[0].message)
    assert len(f.entries) == config.recompile_limit


def test_cache_does_not_keep_inputs_alive():
    f = tracer.compile(fn_sin_add)
    x, y = torch.randn(5), torch.randn(5)
    f(x, y)
    f(x, y)
    rx, ry = weakref.ref(x), weakref.ref(y)
    del x, y
    gc.collect()
    assert rx() is None and ry() is None
    assert f.entries  # f and its cache are still alive
    close(f(torch.ones(5), torch.ones(5)), fn_sin_add(torch.ones(5), torch.ones(5)))


def test_module_cache_does_not_keep_inputs_alive():
    model = Net().eval()
    c = tracer.compile(model)
    x = torch.randn(3, 4)
    c(x)
    r = weakref.ref(x)
    del x
    gc.collect()
    assert r() is None
    assert entries(c)


def test_reset_clears_caches():
    f = tracer.compile(fn_sin_add)
    x, y = torch.randn(3), torch.randn(3)
    f(x, y)
    assert f.entries
    tracer.reset()
    assert f.entries == []
    close(f(x, y), fn_sin_add(x, y))
    assert len(f.entries) == 1


def test_reset_clears_recompile_limit():
    f = tracer.compile(fn_limit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(1, config.recompile_limit + 3):
            f(torch.randn(n))
    tracer.reset()
    f(torch.randn(100))
    assert len(f.entries) == 1 and f.entries[0].code is not None


def test_different_backends_do_not_share_entries():
    model = Net().eval()
    seen = []

    def counting(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    a = tracer.compile(model)
    b = tracer.compile(model, backend=counting)
    x = torch.randn(3, 4)
    a(x)
    close(b(x), model(x))
    assert len(seen) == 1  # b compiled its own graph with its own backend


# ---- CompiledModule surface and decorator forms ----------------------------------------------
def test_compiled_module_exposes_original_state():
    model = Net()
    c = tracer.compile(model)
    assert [id(p) for p in c.parameters()] == [id(p) for p in model.parameters()]
    assert list(c.state_dict().keys()) == list(model.state_dict().keys())
    for k, v in c.state_dict().items():
        assert v is model.state_dict()[k] or torch.equal(v, model.state_dict()[k])
    sd = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    c.load_state_dict(sd)
    assert torch.equal(model.lin.weight, torch.zeros(4, 4))
    assert c.lin is model.lin


def test_decorator_without_arguments():
    @tracer.compile
    def g(x):
        return x.cos() + 1

    x = torch.randn(3)
    close(g(x), x.cos() + 1)
    assert len(g.entries) == 1 and g.entries[0].code is not None


def test_decorator_with_arguments():
    seen = []

    def counting(gm, example_inputs):
        seen.append(len(example_inputs))
        return gm.forward

    @tracer.compile(backend=counting, fullgraph=True)
    def g(x, y):
        return x @ y

    x, y = torch.randn(2, 3), torch.randn(3, 2)
    close(g(x, y), x @ y)
    close(g(x, y), x @ y)
    assert seen == [2]
    assert_captured(g, min_ops=1, entries=1)


def test_decorator_on_module_class_instance_call():
    model = tracer.compile(Net().eval())
    assert isinstance(model, nn.Module)
    x = torch.randn(2, 4)
    close(model(x), model._orig_mod(x))
    assert_captured(model, min_ops=4, entries=1)


# ---- walking the module tree ---------------------------------------------------------------
class _Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.register_buffer("buf", torch.ones(2))
        self.none = None


class _Walker(nn.Module):
    def __init__(self):
        super().__init__()
        self.i = _Inner()
        self.j = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
        self.shared = self.i.a  # a duplicate: removed by the default remove_duplicate=True

    def forward(self, x):
        total = sum(p.sum() for p in self.parameters()) + sum(b.sum() for b in self.buffers())
        return (x * total, [n for n, _ in self.named_modules()],
                [n for n, _ in self.named_parameters()], [n for n, _ in self.named_buffers(prefix="z")],
                [n for n, _ in self.named_parameters(recurse=False)],
                len(list(self.named_modules(remove_duplicate=False))), len(list(self.children())))


def test_module_tree_walk_matches_eager_and_is_guarded():
    model = _Walker()
    c = tracer.compile(model)
    x = torch.ones(2)

    def same():
        got, exp = c(x), model(x)
        close(got[0], exp[0])
        assert got[1:] == exp[1:]

    same()
    assert captured(c) == 1
    model.i.extra = nn.Linear(2, 2)  # a new submodule deep in the tree
    same()
    assert captured(c) == 2
    model.i.register_buffer("b2", torch.full((2,), 3.0))  # a new buffer
    same()
    assert captured(c) == 3
    with torch.no_grad():
        model.j[0].weight.add_(1)  # values only: same graph
    same()
    assert captured(c) == 3
