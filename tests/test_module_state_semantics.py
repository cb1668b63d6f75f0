"""A module's state as the graph sees it is the state eager would see (found by differential
testing against eager, 2026-11-25).

1. A leaf module without parameters or buffers (Dropout, an activation) is guarded by its
   type and attributes, not its identity, so that a model building one per call does not
   recompile. The graph must then not call the object seen while tracing: that object can
   change later (`a.eval()`, a hook added to it) while another object that passes the
   guards is the one passed in.
2. Writes to a module in the frame (`m.eval()`, `m.p = 0`, `m.bias = None`, a new
   parameter, `Sequential.append`) are replayed after the graph; a later read of that module
   that goes to the live object (a leaf's `call_module`, `named_parameters()`, iterating a
   container) must not see the state from before the writes.
"""
import pytest
import torch

import tracer
from helpers import assert_captured, traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")


class Net(torch.nn.Module):
    def __init__(self, act=None):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)
        self.act = act or torch.nn.LeakyReLU(0.1)

    def forward(self, x):
        return self.act(self.drop(x))


def _seeded(fn, *args):
    torch.manual_seed(0)
    return fn(*args)


def _equal(a, b):
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


def test_a_stateless_leaf_runs_as_the_module_passed_in_not_the_one_traced():
    def step(m, x):
        return m(x)
    c = tracer.compile(step)
    x = torch.ones(16) - 0.75
    a, b = Net(), Net()
    with traced() as t:
        assert _equal(_seeded(c, a, x), _seeded(step, a, x))
    assert_captured(t)
    a.eval()
    a.act.negative_slope = 0.5
    with traced() as t:  # b passes the guards made on a: the same entry serves
        got = _seeded(c, b, x)
    assert t.frames_traced == 0, str(t)
    assert _equal(got, _seeded(step, b, x)), "ran the traced object's (changed) state"
    got = _seeded(c, a, x)  # a's new state recompiles
    assert _equal(got, _seeded(step, a, x))


def test_a_hook_added_to_the_traced_module_does_not_run_for_another():
    def step(m, x):
        return m(x)
    c = tracer.compile(step)
    x = torch.ones(4)
    a, b = Net(), Net()
    a.eval(), b.eval()
    c(a, x)
    a.drop.register_forward_hook(lambda mod, args, out: out * 100)
    assert _equal(c(b, x), step(b, x))
    assert _equal(c(a, x), step(a, x))


@pytest.mark.parametrize("write", ["eval", "training", "train_false", "p"])
def test_a_write_to_a_leaf_module_before_its_call_is_seen_by_the_call(write):
    def f(m, x):
        if write == "eval":
            m.eval()
        elif write == "training":
            m.training = False
        elif write == "train_false":
            m.train(False)
        else:
            m.p = 0.0
        return m(x) * 2
    x = torch.ones(8)
    expected = _seeded(f, torch.nn.Dropout(0.5), x)
    assert _equal(expected, torch.full((8,), 2.0))
    m = torch.nn.Dropout(0.5)
    with traced() as t:
        got = _seeded(tracer.compile(f), m, x)
    assert _equal(got, expected)
    # f itself holds no op before the call, which runs natively after the write; the
    # module's own forward is then traced as it runs
    assert t.graphs >= 1 and t.internal_errors == 0, str(t)
    assert m.training is (write == "p") and (m.p == 0.0) is (write == "p")


def test_a_user_module_set_to_eval_in_the_frame_runs_its_leaves_in_eval():
    def f(m, x):
        m.eval()
        return m(x)
    x = torch.ones(8)
    expected = _seeded(f, Net(), x)
    with traced() as t:
        got = _seeded(tracer.compile(f), Net(), x)
    assert _equal(got, expected)
    assert t.graphs >= 1 and t.internal_errors == 0, str(t)


def test_a_leaf_attribute_changed_between_two_calls_in_one_frame():
    def g(m, x):
        a = m(x)
        m.negative_slope = 0.5
        return a, m(x)
    x = torch.tensor([-1.0])
    assert _equal(tracer.compile(g)(torch.nn.LeakyReLU(0.1), x), g(torch.nn.LeakyReLU(0.1), x))


def test_batch_norm_called_then_set_to_eval_then_called():
    def f(m, x):
        a = m(x)
        m.eval()
        return a, m(x)
    x = torch.randn(4, 3)
    torch.manual_seed(0)
    me, mc = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    expected = f(me, x)
    got = tracer.compile(f)(mc, x)
    assert all(torch.allclose(a, b) for a, b in zip(got, expected))
    assert int(mc.num_batches_tracked) == int(me.num_batches_tracked) == 1
    assert torch.allclose(mc.running_mean, me.running_mean)


def test_parameters_replaced_or_added_in_the_frame_are_what_later_reads_see():
    def new_bias(m, x):
        m.bias = None
        return m(x)

    def new_weight(m, x):
        m.weight = torch.nn.Parameter(torch.ones(2, 2))
        return m(x)

    def new_param(m, x):
        m.extra = torch.nn.Parameter(torch.ones(2))
        return [n for n, _ in m.named_parameters()]

    x = torch.ones(1, 2)
    for fn in (new_bias, new_weight, new_param):
        torch.manual_seed(0)
        expected = fn(torch.nn.Linear(2, 2), x)
        torch.manual_seed(0)
        got = tracer.compile(fn)(torch.nn.Linear(2, 2), x)
        assert _equal(got, expected), fn.__name__


def test_a_sequential_appended_to_in_the_frame_runs_its_new_layer():
    def h(seq, x):
        seq.append(torch.nn.Tanh())
        return len(seq), seq(x)
    x = torch.ones(1, 2)
    torch.manual_seed(0)
    expected = h(torch.nn.Sequential(torch.nn.Linear(2, 2)), x)
    torch.manual_seed(0)
    got = tracer.compile(h)(torch.nn.Sequential(torch.nn.Linear(2, 2)), x)
    assert _equal(got, expected)


# ---- found in review (2026-11-25) ----------------------------------------------------------------

def test_an_attribute_written_on_a_module_reached_twice_is_read_back():
    """`b.a` is wrapped anew on each read: pending writes are kept per object, not per
    wrapper (the read gave the old value on the first call)."""
    class Box(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Identity()
            self.a.k = 1.0

    def g(x, b):
        b.a.k = 3.0
        return x * b.a.k
    b = Box()
    assert _equal(tracer.compile(g)(torch.ones(1), b), torch.full((1,), 3.0)) and b.a.k == 3.0


class _Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.drop, self.l2 = torch.nn.Linear(4, 4), torch.nn.Dropout(0.1), torch.nn.Linear(4, 4)
        self.inner_scale = 1.0

    def forward(self, x):
        return self.l2(self.drop(self.l1(x))) * self.inner_scale


def test_common_writes_before_a_call_break_nothing():
    """`model.train()` on a model already training, a parent setting a child's plain
    attribute, a tensor stashed on a module: no graph break (nothing live reads them)."""
    net = _Step()

    def step(x):
        net.train()
        net.inner_scale = 2.0
        net.last = x.detach()
        return net(x).sum()
    x = torch.randn(2, 4)
    with traced() as t:
        got = _seeded(tracer.compile(step), x)
    assert t.graph_breaks == 0 and t.fallbacks == 0 and t.graphs == 1, str(t)
    net.inner_scale = 1.0
    assert _equal(got, _seeded(step, x))


def test_a_stateless_leaf_holding_an_uncopyable_object_is_called_without_copying_it():
    """The private copy of a stateless leaf shares its attribute values (no deepcopy: a lock
    could not be copied, and a hook's bound object would be)."""
    import threading

    def f(m, x):
        return m(x) + 1
    m = torch.nn.ReLU()
    m._lock = threading.Lock()
    with traced() as t:
        assert _equal(tracer.compile(f)(m, torch.ones(2)), f(m, torch.ones(2)))
    assert t.graphs == 1 and t.fallbacks == 0 and t.internal_errors == 0, str(t)


def test_a_compiled_module_with_hooks_runs_its_current_forward_and_compiles_an_instance_forward():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1
    m = M()
    m.register_forward_hook(lambda mod, args, out: out * 2)
    cm = tracer.compile(m)
    x = torch.zeros(1)
    assert _equal(cm(x), m(x))
    m.forward = lambda x: x * 0 + 7  # accelerate-style: forward replaced on the instance
    with traced() as t:
        assert _equal(cm(x), m(x)) and m(x).item() == 14.0
    assert t.frames_traced == 1 and t.graphs == 1, str(t)  # compiled too, not run as is


@pytest.mark.parametrize("write", ["item", "update"])
def test_a_write_through_the_modules_dict_before_its_call_is_seen_by_the_call(write):
    """`m.__dict__[k] = v` / `m.__dict__.update(...)`: the write goes through the dict, not the
    module (it was pending while the module's reads went to the live dict)."""
    def f(x, m):
        if write == "item":
            m.__dict__["negative_slope"] = 0.5
        else:
            m.__dict__.update(negative_slope=0.5)
        return m(x)
    x = -torch.ones(3)
    expected = f(x, torch.nn.LeakyReLU(0.1))
    m = torch.nn.LeakyReLU(0.1)
    with traced() as t:
        got = tracer.compile(f)(x, m)
    assert _equal(got, expected) and _equal(got, torch.full((3,), -0.5))
    assert m.negative_slope == 0.5
    assert t.internal_errors == 0 and t.graphs >= 1, str(t)


# ---- a store nn.Module.__setattr__ refuses runs where it is written (bug hunt, 2026-12) ------

class _Wrap(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.register_buffer("buf", torch.zeros(2))


@pytest.mark.parametrize("store", [
    "m.lin.weight = torch.ones(2, 2)",  # a parameter's name takes a Parameter or None
    "m.lin = 5",                        # a submodule's name takes a Module or None
    "m.buf = 5",                        # a buffer's name takes a tensor or None
    "m.lin.bias = m.lin",               # a Module under a parameter's name
])
def test_a_module_store_that_raises_runs_before_the_writes_after_it(store):
    """Module.__setattr__ raises TypeError for these, between the two in-place writes. The
    store was recorded and replayed after the graph, so `x.mul_(3)` had already happened
    when it raised. module_stores now follows Module.__setattr__: a store it refuses is a
    break, run natively where it is written."""
    ns = {"torch": torch}
    exec(f"def f(x, m):\n    x.add_(1)\n    {store}\n    x.mul_(3)\n    return x\n", ns)
    f, seen = ns["f"], []
    with traced() as t:
        for run in (f, tracer.compile(f)):
            x = torch.zeros(2)
            with pytest.raises(TypeError) as e:
                run(x, _Wrap())
            seen.append((str(e.value), x.tolist()))
    assert seen[0] == seen[1] and seen[0][1] == [1.0, 1.0], seen
    assert t.graph_breaks >= 1 and t.fallbacks == 0 and t.internal_errors == 0, str(t)


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._s = 1.0

    @property
    def scale(self):
        return self._s * 2

    @scale.setter
    def scale(self, v):
        self._s = v


class _Doubling(torch.nn.Module):
    def __setattr__(self, name, value):
        super().__setattr__(name, value * 2 if isinstance(value, float) else value)


@pytest.mark.parametrize("make", [_Scaled, _Doubling])
def test_a_module_store_through_a_setter_is_what_a_later_read_sees(make):
    """A property setter on the module's class, or the class's own __setattr__, decides what
    `m.scale` reads back (6.0); the trace read back the stored 3.0 and ran the setter only
    in the replay."""
    def f(x, m):
        m.scale = 3.0
        return x * m.scale

    x = torch.ones(2)
    with traced() as t:
        got = tracer.compile(f)(x, make())
    assert _equal(got, f(x, make())) and _equal(got, torch.full((2,), 6.0))
    assert t.fallbacks == 0 and t.internal_errors == 0, str(t)


def test_stores_module_setattr_accepts_are_captured_without_a_break():
    """What Module.__setattr__ takes (None for a parameter, a submodule or a buffer; a tensor
    for a buffer; a parameter or module under a new name; a plain value) is still recorded
    and replayed, in one graph; the module tree then matches eager's."""
    def f(x, m):
        y = x + 1
        m.lin.bias = None
        m.buf = y
        m.extra = m.lin.weight
        m.twin = m.lin
        m.k = 7
        return y * m.k + m.buf

    ms = _Wrap(), _Wrap()
    x = torch.ones(2)
    with traced() as t:
        got = tracer.compile(f)(x, ms[1])
    assert _equal(got, f(x, ms[0]))
    assert [n for n, _ in ms[0].named_parameters()] == [n for n, _ in ms[1].named_parameters()]
    assert list(ms[0].state_dict()) == list(ms[1].state_dict())
    assert_captured(t, graphs=1)


def test_a_store_under_a_buffers_name_recompiles_for_a_module_holding_a_parameter_there():
    """Whether `m.w = tensor` succeeds turns on which dict holds `w` (a buffer: replaced; a
    parameter: TypeError); modules of one class may differ there, so it is guarded."""
    class M(torch.nn.Module):
        def __init__(self, as_param):
            super().__init__()
            if as_param:
                self.w = torch.nn.Parameter(torch.zeros(2))
            else:
                self.register_buffer("w", torch.zeros(2))

    def f(x, m):
        x.add_(1)
        m.w = torch.ones(2)
        x.mul_(3)
        return x

    c = tracer.compile(f)
    x = torch.zeros(2)
    c(x, M(False))
    assert x.tolist() == [3.0, 3.0]
    x = torch.zeros(2)
    with traced() as t:
        with pytest.raises(TypeError):
            c(x, M(True))
    assert x.tolist() == [1.0, 1.0] and t.recompiles == 1, str(t)


# ---- found by the dynamic-shapes bug hunt (2026-12) ------------------------------------------------

class _Rotary(torch.nn.Module):
    """The grow-on-demand cos cache of older HF rotary embeddings."""

    def __init__(self):
        super().__init__()
        self._grow(4)

    def _grow(self, n):
        self.max_cached = n
        self.register_buffer("cos_c", torch.arange(n, dtype=torch.float32).cos(), persistent=False)

    def forward(self, x):
        if x.shape[0] > self.max_cached:
            self._grow(x.shape[0])
        return self.cos_c[: x.shape[0]] * x, self.cos_c.shape[0], "cos_c" in self._buffers


class _ThroughBuffers(_Rotary):
    def forward(self, x):
        if x.shape[0] > self.cos_c.shape[0]:
            self._buffers["cos_c"] = torch.arange(x.shape[0], dtype=torch.float32).cos()
        out = self.cos_c[: x.shape[0]] * x
        if x.shape[0] > 7:  # and gone again: `self.cos_c` is the break, the code raises
            del self._buffers["cos_c"]
            return out, hasattr(self, "cos_c"), self.cos_c
        return out, self.cos_c.shape[0], 1


def _same_state(a, b):
    assert a.__dict__.keys() == b.__dict__.keys() and a._buffers.keys() == b._buffers.keys()
    assert a._non_persistent_buffers_set == b._non_persistent_buffers_set
    assert all(_equal(x, y) for x, y in zip(a._buffers.values(), b._buffers.values()))
    assert a.max_cached == b.max_cached


def _run_against_eager(cls, sizes):
    eager, mine = cls(), cls()
    compiled = tracer.compile(mine)
    with traced() as t:
        for n in sizes:
            x = torch.randn(n)
            try:
                expected = eager(x)
            except AttributeError:
                with pytest.raises(AttributeError):
                    compiled(x)
                continue
            assert _equal(compiled(x), expected), n
            _same_state(mine, eager)
    assert t.internal_errors == 0 and t.fallbacks == 0, str(t)
    return t


@pytest.mark.parametrize("cls", [_Rotary, _ThroughBuffers])
def test_a_buffer_the_frame_registers_or_writes_is_what_later_reads_see(cls):
    """A module attribute read went to the live `_buffers` dict while the frame's own write to
    it (`self._buffers[k] = t`, `register_buffer`) waited for the graph to finish: the grown
    cache read back was the old one, the graph sliced 4 rows for 6 and the frame raised where
    eager ran. The read now gives the frame's value; a buffer the frame deleted is a break at
    its read, never a guard on the live module that fails at once (an internal error)."""
    t = _run_against_eager(cls, (3, 6, 5, 9, 2, 12))
    assert t.graphs >= 1, str(t)


def test_register_buffer_after_an_attribute_store_is_no_graph_break():
    """`self.max_cached = n; self.register_buffer(...)` on the same module: register_buffer
    reads `"_buffers" in self.__dict__`, which after a store to the module was a break
    ("obj.__dict__ read after attribute stores in the trace"), 2 breaks per growing call
    (torch.compile: none). Keys other than the stored names are the live dict's."""
    t = _run_against_eager(_Rotary, (3, 6, 5, 9))
    assert t.graph_breaks == 0 and t.graphs == t.frames_traced, str(t)
