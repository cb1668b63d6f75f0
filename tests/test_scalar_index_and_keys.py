"""Scheduler and config idioms of diffusion pipelines, with plain torch and small classes.

* `alphas_cumprod[t]`, t a 0-d int tensor: one graph op (eager reads t as an int: a select
  that drops the dim), not a data-dependent break;
* `_DTYPE_MAP[x.dtype]`, a dict keyed by torch dtypes/devices/layouts: guarded by its keys;
* `self.config.flag` / `self._keep = None` read through an instance, a class attribute whose
  value is None: an attribute, not a missing one.

Each test compares the compiled result with eager and checks what was captured.
"""
import torch

import tracer

from helpers import assert_captured, assert_warm, traced


def _run(fn, *args, **kw):
    tracer.reset()
    c = tracer.compile(fn, **kw)
    with traced() as t:
        out = c(*args)
    return c, t, out


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


# ---- indexing by a 0-d int tensor -------------------------------------------------------------

ALPHAS = torch.linspace(0.9, 0.1, 10)


def test_index_by_0d_tensor_is_one_graph_and_drops_the_dim():
    def f(x, t):
        a = ALPHAS[t]
        return x * a.sqrt(), a, x[t], x[:, t], x[t, 1:], x[..., t]

    x, t = torch.arange(12.).reshape(3, 4), torch.tensor(2)
    c, tr, out = _run(f, x, t)
    assert _same(out, f(x, t)) and out[1].shape == ()
    assert_captured(tr, graphs=1, breaks=0)
    with traced() as tr2:  # another value of t: the same graph (its value is not guarded)
        assert _same(c(x, torch.tensor(-1)), f(x, torch.tensor(-1)))
    assert tr2.frames_traced == 0 and tr2.cache_hits == 1, str(tr2)
    t32 = torch.tensor(0, dtype=torch.int32)
    assert _same(c(x, t32), f(x, t32))


def test_index_by_0d_tensor_is_a_view_as_in_eager():
    def f(x, t):
        row = x[t]
        x.mul_(2)         # seen through the view
        row.add_(1)       # written through the view
        x[t, 0] = -1.0    # setitem with a 0-d index
        return row

    x, t = torch.arange(12.).reshape(3, 4), torch.tensor(1)
    xe = x.clone()
    c, tr, out = _run(f, x, t)
    assert torch.equal(out, f(xe, t)) and torch.equal(x, xe)
    assert_captured(tr, graphs=1, breaks=0)


def test_index_out_of_range_raises_as_eager():
    def f(x, t):
        return x[t] + 1

    c = tracer.compile(f)
    c(torch.ones(3), torch.tensor(1))
    try:
        c(torch.ones(3), torch.tensor(5))
    except IndexError:
        pass
    else:
        raise AssertionError("x[5] of a 3-element tensor must raise IndexError")


def test_sampling_loop_over_timesteps_is_one_graph():
    def loop(x, timesteps):
        for t in timesteps:  # each t a 0-d int tensor
            x = x * ALPHAS[t].sqrt() + (1 - ALPHAS[t]) * 0.5
        return x

    x, ts = torch.randn(4), torch.tensor([9, 5, 1])
    c, tr, out = _run(loop, x, ts)
    assert torch.allclose(out, loop(x, ts))
    assert_captured(tr, graphs=1, breaks=0)
    assert_warm(c, x, ts, fresh=(torch.randn(4), torch.tensor([8, 4, 0])))


def test_bool_0d_index_is_still_a_break():
    def f(x, m):
        return x[m] * 2  # a mask: the result's size depends on the value

    x = torch.ones(3)
    for m in (torch.tensor(True), torch.tensor(False)):
        _, tr, out = _run(f, x, m)
        assert _same(out, f(x, m))
        assert tr.graph_breaks == 1, str(tr)


def test_list_indexed_by_tensor_is_a_clean_break():
    table = [torch.ones(2), torch.zeros(2)]

    def f(x, i):
        return x + table[i]

    x, i = torch.ones(2), torch.tensor(1)
    _, tr, out = _run(f, x, i)
    assert torch.equal(out, f(x, i))
    assert tr.graph_breaks == 1 and "indexed by a tensor" in tr.of("break")[0].reason, str(tr)


def test_backend_that_retraces_gets_a_break_instead():
    def f(x, t):
        return x * ALPHAS[t]

    x, t = torch.ones(3), torch.tensor(4)
    c, tr, out = _run(f, x, t, backend="aot_eager")
    assert torch.equal(out, f(x, t))
    # torch 2.13's AOTAutograd cannot retrace it: a break; 2.15's can (the graph is compiled in
    # a context whose ShapeEnv allows the index's .item()): one graph. Right either way.
    assert tr.fallbacks == 0 and tr.graph_breaks <= 1 and tr.internal_errors == 0, str(tr)
    for other in (7, 0, 9):
        assert torch.equal(c(x, torch.tensor(other)), f(x, torch.tensor(other)))


# ---- dicts keyed by torch dtypes, devices, layouts --------------------------------------------

_DTYPE_NAME = {torch.float32: "fp32", torch.float16: "fp16"}
_DTYPE_SCALE = {torch.float32: 2.0, torch.float64: 3.0}


def test_dtype_keyed_global_dict():
    def f(x):
        if x.dtype in _DTYPE_NAME and _DTYPE_NAME[x.dtype] == "fp32":
            return x * _DTYPE_SCALE[x.dtype]
        return x - len(_DTYPE_NAME)

    x = torch.ones(3)
    c, tr, out = _run(f, x)
    assert torch.equal(out, f(x))
    assert_captured(tr, graphs=1, breaks=0)
    assert_warm(c, x)
    _DTYPE_SCALE[torch.float32] = 5.0  # the guards see the change
    try:
        assert torch.equal(c(x), f(x)) and c(x)[0] == 5.0
        _DTYPE_NAME[torch.float64] = "fp64"  # a new key: len() changes
        x64 = torch.ones(3, dtype=torch.float64)
        assert torch.equal(c(x64), f(x64))
    finally:
        _DTYPE_SCALE[torch.float32] = 2.0
        del _DTYPE_NAME[torch.float64]
    assert torch.equal(c(x64), f(x64))


def test_device_and_layout_keyed_dicts():
    offsets = {torch.device("cpu"): 1.0, torch.device("meta"): 2.0}
    kinds = {torch.strided: 3.0, torch.sparse_coo: 4.0}

    def f(x):
        return x + offsets[x.device] + kinds[x.layout] + len({x.dtype: 1, torch.int64: 2})

    x = torch.ones(3)
    c, tr, out = _run(f, x)
    assert torch.equal(out, f(x))
    assert_captured(tr, graphs=1, breaks=0)
    offsets[torch.device("cpu")] = 10.0
    assert torch.equal(c(x), f(x)) and c(x)[0] == 16.0


# ---- class attributes whose value is None ------------------------------------------------------

class _Config:
    flag = None       # a class-level default
    scale = 2.0

    def __init__(self):
        self.width = 3


class _Model(torch.nn.Module):
    _keep_in_fp32 = None  # a class constant read through the instance

    def __init__(self):
        super().__init__()
        self.config = _Config()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        if self.config.flag is None and self._keep_in_fp32 is None and _Config.flag is None:
            x = self.lin(x) * self.config.scale
        return x + self.config.width


def test_class_attribute_none_read_through_instance():
    m = _Model()
    x = torch.randn(2, 3)
    c, tr, out = _run(m, x)
    assert torch.equal(out, m(x))
    assert_captured(tr, graphs=1, breaks=0)
    assert_warm(c, x)
    m.config.flag = True  # an instance attribute now shadows the class default: re-checked
    try:
        assert torch.equal(c(x), m(x))
    finally:
        del m.config.flag
    m._keep_in_fp32 = ["lin"]
    assert torch.equal(c(x), m(x))


def test_hasattr_of_class_attribute_none():
    cfg = _Config()

    def f(x):
        return x * (2 if hasattr(cfg, "flag") and hasattr(_Config, "flag") else 3)

    x = torch.ones(2)
    _, tr, out = _run(f, x)
    assert torch.equal(out, f(x)) and out[0] == 2
    assert_captured(tr, graphs=1, breaks=0)


# ---- indexing by a symbolic int ----------------------------------------------------------------

class _Stepper:
    """A scheduler's step counter: an int attribute that changes every call."""

    def __init__(self):
        self.sigmas = torch.linspace(1, 0, 6)
        self._step_index = 0

    def step(self, x):
        sigma = self.sigmas[self._step_index]
        dt = self.sigmas[self._step_index + 1] - sigma
        self._step_index += 1
        return x * sigma + dt


def test_index_by_symbolic_int_keeps_it_symbolic():
    compiled, eager = _Stepper(), _Stepper()
    c = tracer.compile(compiled.step)
    x = torch.ones(3)
    tracer.reset()
    with traced() as tr:
        for _ in range(5):
            assert torch.equal(c(x), eager.step(x))
    # the first value is specialised, the change makes it symbolic: one more entry, not one per step
    assert tr.graphs == 2 and tr.recompiles == 1 and tr.graph_breaks == 0, str(tr)
    try:
        c(x)  # sigmas[6]: out of range, as in eager
    except IndexError:
        pass
    else:
        raise AssertionError("sigmas[6] must raise IndexError")


class _Meta(type):
    registry_size = 4   # plain data on the metaclass, read through the class


class _WithMeta(metaclass=_Meta):
    own = None


def test_metaclass_data_read_through_class():
    def f(x):
        return x * _WithMeta.registry_size if _WithMeta.own is None else x

    x = torch.ones(2)
    c, tr, out = _run(f, x)
    assert torch.equal(out, f(x))
    assert_captured(tr, graphs=1, breaks=0)
    _WithMeta.registry_size = 6  # the class now defines its own: the guard re-reads it
    try:
        assert torch.equal(c(x), f(x)) and c(x)[0] == 6
    finally:
        del _WithMeta.registry_size
    assert torch.equal(c(x), f(x)) and c(x)[0] == 4
