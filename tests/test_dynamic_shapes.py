"""Dynamic shapes (issue 12): one graph for every batch size and sequence length.

Every sequence is run call by call against eager, and the number of traces is asserted:
automatic dynamic costs 2 compiles for a changing size (static, then symbolic), dynamic=True
1, dynamic=False one per size. Size arithmetic runs on torch's SymInts; guards are the
ShapeEnv's, shown readably.
"""
import logging
import math

import pytest
import torch
import torch.nn.functional as F

import tracer
from helpers import traced


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    yield
    tracer.reset()


def run_sequence(fn, calls, **compile_kw):
    """Call the compiled fn on each argument tuple; compare with eager every time."""
    compiled = tracer.compile(fn, **compile_kw)
    for args in calls:
        _same(compiled(*args), fn(*args))
    return compiled


def _same(got, exp):
    if isinstance(exp, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.shape == exp.shape and got.dtype == exp.dtype
        assert torch.allclose(got, exp, equal_nan=True), (got, exp)
    elif isinstance(exp, (tuple, list)):
        assert type(got) is type(exp) and len(got) == len(exp)
        for g, e in zip(got, exp):
            _same(g, e)
    else:
        assert type(got) is type(exp) and got == exp, (got, exp)


def counts():
    s = tracer.stats()
    return s.frames_traced, s.graph_breaks, s.fallbacks


def mlp(x, w1, w2):
    return (x @ w1).relu() @ w2


W1, W2 = torch.randn(8, 16), torch.randn(16, 4)


def test_changing_batch_costs_two_compiles_not_one_per_size():
    f = run_sequence(mlp, [(torch.randn(b, 8), W1, W2) for b in range(1, 21)])
    assert counts() == (2, 0, 0)
    assert tracer.stats().recompiles == 1 and tracer.stats().recompile_limits == 0
    dyn = f.entries[-1]
    assert "x: tensor float32 cpu shape (s" in dyn.guards.describe()
    assert "2 <= x.size(0)" in dyn.guards.describe()
    before = tracer.stats().frames_traced
    for b in (3, 17, 64, 2):  # warm: any batch size >= 2 is a hit
        x = torch.randn(b, 8)
        _same(f(x, W1, W2), mlp(x, W1, W2))
    assert tracer.stats().frames_traced == before


def test_warm_calls_of_the_dynamic_entry_compile_nothing():
    f = tracer.compile(mlp)
    for b in (4, 5):
        f(torch.randn(b, 8), W1, W2)
    before = tracer.stats().frames_traced
    for b in (6, 30, 2, 5, 100):
        x = torch.randn(b, 8)
        _same(f(x, W1, W2), mlp(x, W1, W2))
    assert tracer.stats().frames_traced == before


def test_dynamic_true_is_one_compile_and_false_is_one_per_size():
    run_sequence(mlp, [(torch.randn(b, 8), W1, W2) for b in range(2, 9)], dynamic=True)
    assert counts() == (1, 0, 0)
    tracer.reset()
    tracer.reset_stats()
    run_sequence(mlp, [(torch.randn(b, 8), W1, W2) for b in range(2, 7)], dynamic=False)
    assert counts() == (5, 0, 0)


def test_the_recompile_record_says_which_dimension_became_dynamic(caplog):
    with caplog.at_level(logging.INFO, logger="tracer.recompiles"):
        run_sequence(mlp, [(torch.randn(b, 8), W1, W2) for b in (3, 5)])
    (event,) = tracer.stats().of("recompile")
    assert "x.size(0) changed 3 -> 5: now dynamic" in event.reason
    assert "size mismatch at index 0" in event.reason  # and the guard that failed
    assert any("x.size(0) changed 3 -> 5: now dynamic" in r.getMessage() for r in caplog.records)


def test_size_arithmetic_is_symbolic_and_enters_the_graph_as_size_nodes():
    def attn(x):
        b, t, c = x.shape
        h = 2
        q = x.view(b, t, h, c // h).transpose(1, 2)
        s = (q @ q.transpose(-1, -2)) / math.sqrt(c // h)
        mask = torch.ones(t, t).tril()
        s = s.masked_fill(mask == 0, float("-inf"))
        return (s.softmax(-1) @ q).transpose(1, 2).reshape(b, t, -1)
    f = run_sequence(attn, [(torch.randn(2, t, 8),) for t in (3, 4, 5, 6, 9, 31)])
    assert counts() == (2, 0, 0)
    code = f.entries[-1].graph.code
    assert "x.size(1)" in code and "torch.ones(size, size)" in code


def test_len_numel_arange_zeros_new_zeros_and_slicing_by_a_size():
    def fn(x):
        n = x.shape[1]
        a = torch.arange(len(x)).unsqueeze(1) + x.numel()
        z = torch.zeros(x.size(0), n * 2)[:, :n] + x.new_zeros(x.shape)
        return x[:, : n // 2].sum(1, keepdim=True) + a + z[:, -1:] + (n - 1)
    run_sequence(fn, [(torch.randn(r, c),) for r, c in ((2, 4), (3, 6), (4, 8), (5, 5), (7, 11))])
    assert counts() == (2, 0, 0)


def test_a_comparison_guards_the_relation_not_the_value():
    def fn(x):
        if x.size(0) > 8:
            return x * 2
        return x - 1
    f = run_sequence(fn, [(torch.randn(n),) for n in (3, 4, 5, 6, 9, 10, 11, 2, 8, 70)])
    assert counts() == (3, 0, 0)  # static 3; dynamic n <= 8; dynamic n > 8
    descs = [e.guards.describe() for e in f.entries]
    assert any("x.size(0) <= 8" in d for d in descs) and any("9 <= x.size(0)" in d for d in descs)  # as value ranges


def test_pow_sqrt_max_min_floordiv_and_negation_of_sizes():
    def fn(x):
        n = x.shape[0]
        return x * (n ** 0.5) + max(n, 3) - min(n, 4) + (-n) // 3 + abs(n - 10) + math.floor(n / 2)
    run_sequence(fn, [(torch.randn(n, 2),) for n in (2, 3, 4, 5, 9, 12)])
    assert counts() == (2, 0, 0)


def test_range_of_a_size_specialises_it():
    def fn(x):
        out = x
        for i in range(x.shape[0]):
            out = out + i
        return out
    f = run_sequence(fn, [(torch.randn(n),) for n in (3, 4, 5, 4)])
    assert counts() == (3, 0, 0)  # one per size: range() must unroll, guarded exactly
    # the symbol specialised to 4: the tensor guard checks that dim statically again
    assert any("x: tensor float32 cpu shape (4,)" in e.guards.describe() for e in f.entries)


def test_int_of_a_size_is_the_size_and_str_specialises_it():
    def fn(x):  # int() of an int is that int (as in CPython and torch.compile): still a symbol
        return x + int(x.shape[0])
    run_sequence(fn, [(torch.randn(n),) for n in (3, 4, 5, 4, 3)])
    assert counts() == (2, 0, 0)
    tracer.reset()
    tracer.reset_stats()

    def gn(x):  # str() needs the real number: each size its own entry
        return x + len(str(x.shape[0] * 100))
    run_sequence(gn, [(torch.randn(n),) for n in (3, 4, 5, 4, 3)])
    assert counts() == (3, 0, 0)


def test_a_changing_int_argument_becomes_a_symbolic_int():
    def fn(x, n):
        return x[:n] * n
    f = run_sequence(fn, [(torch.randn(20), n) for n in (3, 4, 5, 9, 17)])
    assert counts() == (2, 0, 0)
    g = f.entries[-1].guards.describe()
    assert "type(n) is int" in g and "n ==" not in g
    assert "n" in f.entries[-1].graph.code.split("forward(self, ")[1].split(")")[0]


def test_sizes_zero_one_two_and_large_growing_and_shrinking():
    def fn(x):
        return x.sum(0) * x.shape[0] + x.mean(0).nan_to_num()
    run_sequence(fn, [(torch.randn(n, 3),) for n in (0, 1, 2, 3, 1000, 2, 1, 0, 5)])
    assert counts() == (3, 0, 0)  # 0 and 1 are specialised (as torch does); 2.. is one graph


def test_two_inputs_equal_then_different():
    def fn(x, y):
        return x.sum() + y.sum() + x.shape[0] * y.shape[0]
    run_sequence(fn, [(torch.randn(n), torch.randn(m)) for n, m in ((3, 3), (4, 4), (5, 5), (5, 7), (7, 5), (6, 6))])
    frames, breaks, fallbacks = counts()
    assert frames <= 3 and (breaks, fallbacks) == (0, 0)


def test_broadcasting_that_holds_for_one_size_only():
    def fn(x, y):
        return x + y
    f = tracer.compile(fn)
    for n, m in ((3, 3), (4, 4), (5, 1), (5, 5), (6, 2)):
        x, y = torch.randn(n), torch.randn(m)
        try:
            exp = fn(x, y)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                f(x, y)
            continue
        _same(f(x, y), exp)


def test_sizes_returned_and_stored_are_real_ints():
    def fn(x, out):
        out.append(x.shape[0] * 2)
        return x.shape, len(x)
    f = tracer.compile(fn)
    for n in (2, 3, 4):
        a, b = [], []
        _same(f(torch.randn(n, 2), a), fn(torch.randn(n, 2), b))
        assert a == b and type(a[0]) is int
    assert counts() == (2, 0, 0)


def test_a_size_alive_across_a_graph_break():
    def fn(x):
        n = x.shape[0] // 2
        print("break")
        return x.view(2, n, -1).sum(1)
    run_sequence(fn, [(torch.randn(2 * n, 3),) for n in (2, 3, 4, 5)])
    frames, breaks, fallbacks = counts()
    assert fallbacks == 0 and breaks >= 1 and frames <= 4


def test_parameters_stay_static():
    lin = torch.nn.Linear(8, 4)
    m = tracer.compile(lin)
    for b in (2, 3, 4, 5):
        x = torch.randn(b, 8)
        _same(m(x), lin(x))
    assert counts() == (2, 0, 0)
    g = m._compiled_forward.entries[-1].guards.describe()
    assert "shape (4, 8)" in g and "shape (s" in g


def test_mark_dynamic_and_mark_static():
    x = torch.randn(5, 8)
    tracer.mark_dynamic(x, 0)
    f = tracer.compile(mlp, dynamic=False)
    f(x, W1, W2)
    for b in (6, 9):
        y = torch.randn(b, 8)
        _same(f(y, W1, W2), mlp(y, W1, W2))
    assert counts() == (1, 0, 0)  # marked on the first call: one symbolic graph even under dynamic=False
    tracer.reset()
    tracer.reset_stats()
    g = tracer.compile(mlp)
    for b in (2, 3, 4):
        y = torch.randn(b, 8)
        tracer.mark_static(y)
        _same(g(y, W1, W2), mlp(y, W1, W2))
    assert counts() == (3, 0, 0)  # static on request: one per size


def test_torch_dynamo_mark_dynamic_is_honoured():
    x = torch.randn(5, 8)
    torch._dynamo.mark_dynamic(x, 0)
    f = tracer.compile(mlp)
    _same(f(x, W1, W2), mlp(x, W1, W2))
    assert "shape (s" in f.entries[0].guards.describe()


def test_dynamic_dims_leave_dtype_device_and_static_dims_checked():
    f = tracer.compile(mlp, dynamic=True)
    f(torch.randn(3, 8), W1, W2)
    check, G = f.entries[0].guards.check, mlp.__globals__
    assert check((torch.randn(9, 8), W1, W2), G, None)
    assert not check((torch.randn(9, 7), W1, W2), G, None)
    assert not check((torch.randn(9, 8, dtype=torch.float64), W1, W2), G, None)
    assert not check((torch.randn(8, 9).t(), W1, W2), G, None)  # strides


def test_guard_code_binds_every_name_as_a_constant():
    f = run_sequence(mlp, [(torch.randn(b, 8), W1, W2) for b in (2, 3)])
    src = f.entries[-1].guards.source_code
    assert "size" not in src and "'" not in src and '"' not in src


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.one_version)])
def test_backends_compile_the_symbolic_graph_once(backend):
    from tracer.graph.backends import NAMED
    calls = []

    def counting(gm, example_inputs):
        calls.append(gm)
        return NAMED[backend](gm, example_inputs)

    def fn(x):
        n = x.shape[0]
        return (x.view(n, 2, -1).softmax(-1) * n).sum(1)
    try:
        run_sequence(fn, [(torch.randn(b, 6),) for b in (2, 3, 4, 7, 12)], backend=counting)
    finally:
        _stop_tqdm_monitor()
    assert len(calls) == 2 and counts() == (2, 0, 0)


def _stop_tqdm_monitor():
    """inductor starts tqdm's monitor thread; its Python frames would run under the frame
    hook of later tests that count objects (test_frame_hook's leak tests)."""
    try:
        import tqdm
    except ImportError:
        return
    if tqdm.tqdm.monitor is not None:
        tqdm.tqdm.monitor.exit()
        tqdm.tqdm.monitor = None


def test_training_step_over_batch_sizes_two_compiles_gradients_equal():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    model.load_state_dict(ref.state_dict())
    compiled = tracer.compile(model, backend="aot_eager")
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for b in range(1, 17):
        x, y = torch.randn(b, 6), torch.randint(0, 3, (b,))
        for m, o, run in ((ref, opt_ref, ref), (model, opt, compiled)):
            o.zero_grad()
            loss = torch.nn.functional.cross_entropy(run(x), y)
            loss.backward()
            o.step()
        for p, q in zip(ref.parameters(), model.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-6) and torch.allclose(p, q, atol=1e-6)
    assert counts() == (2, 0, 0)


def test_explain_shows_size_guards():
    f = tracer.compile(mlp)
    f(torch.randn(3, 8), W1, W2)
    rep = tracer.explain(mlp, torch.randn(4, 8), W1, W2)  # the size changed: now symbolic
    assert "2 <= x.size(0)" in str(rep)


class _Cache:
    def __init__(self, n):
        self.length = n


def test_int_attribute_of_an_object_passed_in_becomes_symbolic_but_module_attributes_stay_static():
    """A cache object's length that grows every decoding step (HF sliding-window caches) is
    made symbolic after it changes once, as an int argument is; a module's int attribute is
    specialised (each value its own entry, as in torch.compile)."""
    import tracer

    def f(x, cache):
        return x[: cache.length] * 2

    c = tracer.compile(f)
    x = torch.arange(20.0)
    for n in (3, 4, 5, 6, 7):
        assert torch.equal(c(x, _Cache(n)), f(x, _Cache(n)))
    assert len(c.entries) == 2  # the first value, then one symbolic entry for the rest
    s = tracer.stats()
    assert s.fallbacks == 0 and s.graphs >= 2

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n = 3

        def forward(self, x):
            return x[: self.n] * 2

    m = M()
    cm = tracer.compile(m)
    for n in (3, 4, 5):
        m.n = n
        assert torch.equal(cm(x), m(x))
    assert len(cm._compiled_forward.entries) == 3


def test_float_results_of_sizes_keep_the_sign_of_zero():
    """sympy folds `-0.0 * n`, `(1 - n) * 0.0` and `0 / -n` to 0; Python gives -0.0, which
    a division by it turns into -inf. Such a result is computed at run time, as eager does."""
    def f(x):
        n = x.shape[0]
        z = -0.0 * n
        return z, x / z, (1 - n) * 0.0, 0 / -n, abs(n) * -0.0, 0.5 * n, n / 3

    c = tracer.compile(f)
    for n in (3, 4, 5, 7):
        x = torch.ones(n)
        want, got = f(x), c(x)
        assert repr(got) == repr(want)
    s = tracer.stats()
    assert s.frames_traced == 2 and s.graph_breaks == 0 and s.fallbacks == 0 and s.internal_errors == 0


def test_an_int_past_sympys_range_is_computed_not_an_internal_error():
    """After a float of a size overflowed to inf, `n << 70` simplified to torch's int_oo,
    which has no int value: the shift is computed on the specialised size instead."""
    def f(x):
        n = x.shape[0]
        c = float(n) * 1e308 * 10
        i = n << 70
        return x + 1, c, i

    c = tracer.compile(f)
    for n in (3, 4, 5):
        x = torch.ones(n)
        want, got = f(x), c(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0 and s.graphs == s.frames_traced


@pytest.mark.parametrize("op,shape", [("unsqueeze_", (5,)), ("t_", (2, 5)), ("transpose_", (2, 5)),
                                      ("squeeze_", (1, 5))])
def test_an_in_place_op_reshaping_a_dynamic_input_is_a_graph_break(op, shape):
    """`x.unsqueeze_(0)` on an input whose size became dynamic changed its fake, from which
    the guards and the example inputs are made (an internal error, the frame run as Python):
    the op is now a graph break with its reason; every call equals eager."""
    args = {"unsqueeze_": (0,), "transpose_": (0, 1)}.get(op, ())

    def f(x):
        getattr(x, op)(*args)
        return x * 2

    c = tracer.compile(f)
    for n in (3, 4, 5):
        size = tuple(n if s == 5 else s for s in shape)
        a = torch.randn(size)
        b = a.clone()
        want, got = f(a), c(b)
        assert torch.equal(want, got) and want.stride() == got.stride() and torch.equal(a, b)
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_out_tensor_the_op_resizes_runs_as_python(backend):
    """`torch.add(x, 1, out=o)` with `o` of another size (`torch.empty(0)`): eager resizes it;
    AOTAutograd could not (a RuntimeError at run time), and with sizes dynamic the resized
    fake made guards that failed on their own inputs (an internal error). Such a call is a
    graph break; an out= of the right size stays in the graph."""
    def f(x, o):
        torch.add(x, 1, out=o)
        return o * 2

    def g(x):
        o = torch.empty(0)
        torch.mul(x, 2, out=o)
        return o + 1
    cf, cg = tracer.compile(f, backend=backend), tracer.compile(g, backend=backend)
    for x, o in ((torch.arange(3.), torch.empty(0)), (torch.randn(3), torch.empty(3)),
                 (torch.randn(4), torch.empty(4)), (torch.randn(4), torch.empty(0))):
        o_eager, o_compiled = o.clone(), o.clone()
        want, got = f(x, o_eager), cf(x, o_compiled)
        assert torch.equal(want, got) and torch.equal(o_eager, o_compiled)
        assert torch.equal(g(x), cg(x))
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0 and s.graph_breaks >= 2
    assert any("resizes its out= tensor" in r for r in s.break_reasons), s.break_reasons


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_resize_to_a_dynamic_size_is_a_graph_break(backend):
    """`y.resize_(x.shape[0])` with the size dynamic: AOTAutograd's functionalisation hit an
    internal assert of torch's (a BackendError). A reshaping op given a symbolic size is a
    graph break; the result equals eager's."""
    def f(x):
        y = torch.zeros(2)
        y.resize_(x.shape[0])
        return y.fill_(1) + x

    c = tracer.compile(f, backend=backend)
    for n in (3, 4, 5):
        x = torch.randn(n)
        torch.testing.assert_close(c(x), f(x))
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_resize_that_grows_a_tensor_is_a_graph_break_and_a_shrink_is_captured(backend):
    """`y.resize_(3)` of a 2-element tensor, static sizes: torch 2.15's functionalisation
    refuses to grow a tensor ("Attempted to resize a view tensor to a larger size": a
    BackendError under aot_eager on CI's 3.15). Growing is a graph break with its reason;
    resizing to no more elements stays in the graph."""
    def grow(x):
        y = torch.zeros(2)
        y.resize_(3)
        return y.fill_(1) + x

    def shrink(x):
        y = torch.zeros(4)
        y.resize_(3)
        return y.fill_(1) + x

    c = tracer.compile(grow, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(c(x), grow(x))
    [brk] = c.entries[0].breaks
    assert "resize_" in brk.reason and "grows" in brk.reason
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0
    c = tracer.compile(shrink, backend=backend)
    torch.testing.assert_close(c(x), shrink(x))
    assert c.entries[-1].breaks == [] and c.entries[-1].code is not None
    assert tracer.stats().graph_breaks == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_bilinear_with_a_dynamic_batch_stays_in_the_graph(backend):
    """F.bilinear on fakes with a symbolic batch hits an internal assert of torch's C++ path
    ("dispatch_on_subclass called with NO overloaded args"): it was a graph break. Run with
    torch's Python dispatcher, as torch.compile traces, its decomposition runs instead."""
    m = torch.nn.Bilinear(2, 3, 4)
    c = tracer.compile(m, backend=backend)
    for b in (8, 16, 4):
        x1, x2 = torch.randn(b, 2), torch.randn(b, 3)
        torch.testing.assert_close(c(x1, x2), m(x1, x2))
    s = tracer.stats()
    assert s.graph_breaks == 0 and s.fallbacks == 0 and s.frames_traced == 2


@pytest.mark.parametrize("op", ["pad", "interpolate", "unfold"])
def test_composite_ops_keep_sizes_dynamic(op):
    """F.pad, F.interpolate and F.unfold computed on fakes without torch's Python dispatcher
    read the symbolic sizes as ints (a guard per size: a trace per size, then the recompile
    limit). With it, as torch.compile computes fakes, one trace serves every size."""
    fns = {"pad": lambda x: torch.nn.functional.pad(x, (0, 1)) * 2,
           "interpolate": lambda x: torch.nn.functional.interpolate(x[None], scale_factor=2.0),
           "unfold": lambda x: torch.nn.functional.unfold(x[None, None], 2)}
    fn = fns[op]
    c = tracer.compile(fn, dynamic=True)
    for s in (4, 6, 8, 10):
        x = torch.randn(3, s)
        assert torch.equal(c(x), fn(x))
    s = tracer.stats()
    assert s.frames_traced == 1 and s.graph_breaks == 0 and s.fallbacks == 0


def test_float_of_a_dynamic_size_stays_dynamic():
    """`float(n)` of a size or int argument that became symbolic was specialised to its value:
    a loop over 10 values recompiled per value until the recompile limit (torch.compile: 2
    traces). It is now a node, like the other arithmetic on sizes."""
    def f(x, n):
        return x * float(n) / float(x.shape[0])

    c = tracer.compile(f)
    for n in range(2, 12):
        x = torch.randn(n)
        torch.testing.assert_close(c(x, n), f(x, n))
    s = tracer.stats()
    assert s.frames_traced == 2 and s.graph_breaks == 0 and s.fallbacks == 0


def test_nbytes_and_itemsize_are_metadata():
    """`x.nbytes` and `x.itemsize` were graph breaks ("Tensor attribute 'nbytes'"): the dtype
    and sizes decide them; with dynamic sizes nbytes is numel() * itemsize, a node."""
    def f(x):
        return x * (x.nbytes / x.itemsize), x.nbytes

    c = tracer.compile(f)
    for n in (3, 4, 5, 6):
        x = torch.randn(n, dtype=torch.float64)
        got, want = c(x), f(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is int
    s = tracer.stats()
    assert s.graph_breaks == 0 and s.fallbacks == 0 and s.internal_errors == 0 and s.frames_traced == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_tensor_of_symbolic_numbers_stays_symbolic_and_exact(backend):
    """`torch.tensor(n)` of a size or of an int that became symbolic went to the fake
    torch.tensor, which needs the value: it pinned the size (a recompile per batch size, the
    frame ran as Python after the limit), and under AOTAutograd the int was baked into a
    constant truncated to 32 bits (2**31 + 5 came back as -2147483643; torch.compile: right).
    Now each number is a scalar_tensor node, stacked for a list, with torch.tensor's dtype."""
    def sizes(x):
        n = x.shape[0]
        return (x.sum(0) / torch.tensor(n), torch.as_tensor([[n, 1], [2, n * 2]]), torch.tensor([n, 0.5]),
                torch.LongTensor([n]), torch.tensor(n, dtype=torch.float64), torch.tensor([n > 5, True]))

    def ints(n):
        return torch.tensor(n), torch.tensor([[n], [1]])

    c = run_sequence(sizes, [(torch.randn(s, 3),) for s in (4, 6, 5, 7, 8)], backend=backend)
    assert len(c.entries) == 2  # (static, then symbolic: automatic dynamic)
    exact = tracer.compile(ints, backend=backend)
    for n in (3, 300, 2**31 + 5, 2**40 + 7):
        for got, want in zip(exact(n), ints(n)):
            assert got.dtype == want.dtype and torch.equal(got, want)
    s = tracer.stats()
    assert s.recompiles == 2 and s.graph_breaks == 0 and s.fallbacks == 0


def _whole(x, shape):
    return x.reshape(shape) * 2, x.view(*shape).sum()


def _unpacked(x, size):
    h, w = size
    return x.view(h, w) * 2


def _passed_on(x, shape):
    return x.reshape(shape) + 1, shape, shape[1:]


@pytest.mark.parametrize("make", [tuple, torch.Size, list])
@pytest.mark.parametrize("fn", [_whole, _unpacked, _passed_on])
def test_a_tuple_or_size_argument_becomes_dynamic_as_a_list_does(fn, make):
    """A tuple or torch.Size argument used whole (`x.reshape(shape)`, `x.view(*shape)`) or
    unpacked (`h, w = size`) was guarded by its value (a torch.Size even on first touch): a
    trace per new size until the recompile limit (8), then plain Python, where a list argument
    became dynamic after one change (torch.compile: 2 graphs for all three). Its ints now
    become symbolic once they change, as the list's do; a Size stays a Size, and passed on it
    is the caller's object."""
    c = run_sequence(fn, [(torch.randn(n * 3), make([n, 3])) for n in range(2, 12)])
    s = tracer.stats()
    assert counts() == (2, 0, 0) and s.recompiles == 1 and s.recompile_limits == 0, s
    shape = make([12, 3])
    out = c(torch.randn(36), shape)
    if fn is _passed_on:
        assert out[1] is shape and type(out[2]) is make
    assert counts() == (2, 0, 0)  # (the second item never changed: still guarded, still 3)
    assert "shape[1] == 3" in c.entries[-1].guards.describe() or "size[1] == 3" in c.entries[-1].guards.describe()


def test_a_size_tuple_argument_of_a_torch_function_and_under_dynamic_true():
    """F.interpolate(x, size=t) with t a tuple argument: pinned per size (8 traces, the limit)
    before; dynamic=True made every int argument symbolic from the first trace, but not the
    ints of a tuple argument."""
    def f(x, size):
        return F.interpolate(x, size=size)
    run_sequence(f, [(torch.randn(1, 2, 4, 4), (n, n + 1)) for n in range(2, 10)])
    assert counts() == (2, 0, 0) and tracer.stats().recompile_limits == 0
    tracer.reset()
    tracer.reset_stats()
    run_sequence(_whole, [(torch.randn(n * 3), (n, 3)) for n in range(2, 10)], dynamic=True)
    assert counts() == (1, 0, 0)


def _keyed(x, size):
    seen = {(2, 3): 1, torch.Size([3, 3]): 2}
    return x + seen.get(size, 0) + (size in seen) + len(str(size)) + len(f"{size}")


def _keyed_by_list(x, lst):
    return x + len({tuple(lst): 1}) + len(str(tuple(lst)))


@pytest.mark.parametrize("fn, make", [(_keyed, tuple), (_keyed, torch.Size), (_keyed_by_list, list)])
def test_a_tuple_of_dynamic_sizes_as_a_dict_key_or_string_is_specialised_not_a_break(fn, make):
    """A tuple holding a symbolic size (a shape argument that changed, `tuple(lst)` of a list
    argument's) as a dict key or in str() was a graph break ("dict key ... is not a
    constant"), and `tuple(lst)` as a key ran the frame as Python; a torch.Size was
    specialised. Each item is specialised (guarded) as a torch.Size's is: one entry per
    size, as the program asks, no break."""
    run_sequence(fn, [(torch.randn(3), make([n, 3])) for n in (2, 3, 4, 3, 2)])
    s = tracer.stats()
    assert counts() == (3, 0, 0) and s.recompile_limits == 0, s


@pytest.mark.parametrize("k", [
    lambda n: int(n * 0.5), lambda n: int(n / 2), lambda n: round(n / 3), lambda n: math.floor(n / 2),
    lambda n: math.ceil(n / 4), lambda n: math.trunc(n / 3), lambda n: round(n / 3, 1)])
@pytest.mark.parametrize("dynamic", [None, True])
def test_int_round_and_floor_of_a_float_made_from_a_size_stay_symbolic(k, dynamic):
    """`int(x.shape[0] * 0.5)` and `round(n / 3)` specialised the size (a guard
    `0.5 * torch.sym_float(x.size(0)) == 2.5` per size: a trace per size until the recompile
    limit, also under dynamic=True; torch.compile: 2). int() of a symbolic float is now
    torch.sym_int (truncation, as CPython's), round() SymFloat.__round__ (half to even).
    (math.floor/ceil/trunc were symbolic already: kept here so that all stay so.)"""
    def f(x):
        return x[:int(k(x.shape[0]))] * k(x.shape[0])
    run_sequence(f, [(torch.randn(n, 2),) for n in (6, 9, 7, 12, 8, 10, 11, 13, 14, 15)], dynamic=dynamic)
    s = tracer.stats()
    assert counts() == (2 if dynamic is None else 1, 0, 0) and s.recompile_limits == 0, s


def test_int_and_round_of_a_float_of_sizes_under_aot_eager():
    """The torch.sym_int and round nodes go through AOTAutograd's retrace of the graph."""
    def f(x):
        n = x.shape[0]
        return x[:int(n * 0.5)] * round(n / 3), round(n / 3, 1)
    run_sequence(f, [(torch.randn(n, 2),) for n in (6, 9, 7, 12, 8)], backend="aot_eager")
    assert counts() == (2, 0, 0) and tracer.stats().recompile_limits == 0


def test_numel_of_a_symbolic_size_is_the_product_of_its_sizes():
    """`x.shape.numel()` with dynamic sizes was a break ('Size.numel'), and the bound
    `x.view` on the resume function's stack then recompiled on every call."""
    def f(x):
        return x.view(x.shape.numel()) * 2

    c = tracer.compile(f)
    with traced() as t:
        for shape in ((3, 2), (5, 4), (7, 2), (2, 9)):
            x = torch.randn(*shape)
            torch.testing.assert_close(c(x), f(x))
    assert t.graph_breaks == 0 and t.fallbacks == 0 and t.recompiles == 1, t


def test_a_size_repeated_or_concatenated_stays_a_size():
    """`x.shape * 2`, `2 * x.shape` and `(1,) + x.shape` of a dynamic x were plain tuples
    (torch.Size's __mul__, __rmul__ and __radd__ answer in eager): `isinstance(.., torch.Size)`
    was False and `.numel()` an AttributeError."""
    def f(x):
        a, b, c = x.shape * 2, 2 * x.shape, (1,) + x.shape
        return [(type(s).__name__, tuple(s)) for s in (a, b, c, x.shape + (1,))], x * a.numel() * c.numel()

    c = tracer.compile(f)
    with traced() as t:
        for n in (3, 5, 7):
            x = torch.randn(n, 2)
            _same(c(x), f(x))
    assert t.graph_breaks == 0 and t.fallbacks == 0 and t.recompiles == 1, t


def test_a_static_size_beside_a_tuple_of_symbolic_ints_is_concatenated():
    """`w.shape + (n,)` of a static w and an int n that became dynamic was a graph break:
    a constant torch.Size was not taken item by item, as a constant tuple was."""
    w = torch.randn(3, 2)

    def f(x, n):
        s = w.shape + (n,)
        return type(s).__name__, s, (n,) + w.shape, x.new_zeros(s) + x

    with traced() as t:
        run_sequence(f, [(torch.randn(n), n) for n in (3, 5, 7)])
    assert t.graph_breaks == 0 and t.fallbacks == 0 and t.recompiles == 1, t


def test_a_size_compared_with_a_tuple_of_ints_stays_symbolic():
    """`x.shape == (5, 4)` (and `tuple(x.shape)`, a slice of it, a tuple built of its items,
    `<`) with a dynamic size was a graph break: a constant tuple was not taken item by item.
    Equality with one size among the pairs is its relation, symbolic (one graph for every
    size, as torch.compile's); `<` guards the first unequal pair, then compares it."""
    def f(x):
        eq = x.shape == (5, 4), tuple(x.shape) != (5, 4), x.shape[:1] == (5,), (x.shape[0], 4) == (5, 4)
        y = x + 1 if x.shape == (5, 4) else x - 1
        return eq, y * (x.shape[:1] == (5,)), x.shape < (5, 4), (6, 4) > x.shape

    with traced() as t:
        run_sequence(f, [(torch.randn(n, 4),) for n in (3, 5, 7, 9, 4, 5, 11)])
    if torch.Size.__lt__ is not tuple.__lt__:
        # torch's builds for CPython 3.14+ give torch.Size an ordering of its own, which the
        # trace does not take for tuple's: each `<`, `>` of a Size is a break (answers eager's)
        assert t.fallbacks == 0 and t.graph_breaks <= 3, t
        return
    assert t.graph_breaks == 0 and t.fallbacks == 0 and t.recompiles == 2, t  # static; n == 5; n != 5


@pytest.mark.one_version
def test_two_sizes_compared_with_a_tuple_are_decided_pair_by_pair_for_inductor():
    """Where two sizes of the tuple are symbolic their equalities are guarded one by one:
    joined into one symbolic bool, they made a sympy And, which inductor cannot lower where a
    tensor op uses it ("'And' object has no attribute 'expand'")."""
    def f(x):
        return x * (x.shape == (5, 4)) + 1

    with traced() as t:
        run_sequence(f, [(torch.randn(*s),) for s in ((3, 4), (5, 5), (5, 4), (7, 9), (5, 4))], backend="inductor")
    assert t.graph_breaks == 0 and t.fallbacks == 0 and t.cache_hits >= 1, t


def test_math_prod_of_symbolic_sizes_stays_symbolic():
    """`math.prod(x.shape)` folded the sizes to their values: a trace per size until the
    recompile limit (8 graphs for 10 sizes; torch.compile 2)."""
    def f(x):
        return x.reshape(math.prod(x.shape)) + 1, math.prod(x.shape[1:], start=2), math.prod((x.shape[0], 0.5))

    with traced() as t:
        run_sequence(f, [(torch.randn(n, 4),) for n in range(3, 13)])
    assert t.graph_breaks == 0 and t.recompiles == 1 and t.recompile_limits == 0, t


def test_divmod_of_a_symbolic_int_stays_symbolic():
    """`divmod(n, 3)` of an int that became dynamic specialised it: a trace per value (8
    graphs for 10 values). Of ints it is `(n // 3, n % 3)`, both symbolic."""
    def f(x, n):
        q, r = divmod(n, 3)
        return x * q + r, divmod(20, n), divmod(-n, 4)

    with traced() as t:
        run_sequence(f, [(torch.randn(2), n) for n in range(3, 13)])
    assert t.graph_breaks == 0 and t.recompile_limits == 0 and t.recompiles == 1, t


def test_membership_of_a_symbolic_int_in_a_tuple_of_ints_is_not_a_trace_per_value():
    """`n in [5, 6]` of a dynamic int specialised it (a trace per value). Now as `==` of sequences:
    one size among the pairs, its relation (`not in`: negated); several guarded in turn."""
    def f(x, n):
        return x * (n in [5, 6]) + (n not in (5, 6)) + (n not in (7,)), 5 in x.shape, n in [n, 2], n not in ()

    with traced() as t:
        run_sequence(f, [(torch.randn(n), n) for n in range(3, 13)])
    assert t.graph_breaks == 0 and t.recompile_limits == 0 and t.recompiles == 3, t  # static; n not in (5, 6); 5; 6
