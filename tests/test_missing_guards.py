"""Facts a trace relied on that used to go unguarded (issue 10): a cached entry came back
after the fact changed. Each test changes the fact between two calls and compares with eager.
"""
import pytest
import torch

import tracer
from semantics_helpers import check, fresh, run


def test_python_attribute_on_an_input_tensor():
    def f(x):
        return x + 2 if hasattr(x, "flag") else x + 1

    x = torch.ones(3)
    c, _ = check(f, x, dynamo=True)
    x.flag = None
    _, d = run(c, f, x)
    assert d.frames == 1 and d.graphs == 1  # recompiled on the new attribute
    del x.flag
    _, d = run(c, f, x)
    assert d.frames == 0  # the first entry fits again


def test_value_of_a_tensor_attribute_is_guarded_and_stores_replay():
    def f(x):
        x.seen = getattr(x, "seen", 0) + 1
        return x * x.scale

    x = torch.ones(2)
    x.scale = 3.0
    c, _ = check(f, x)
    x.scale = 5.0
    out, d = run(c, f, x)
    assert d.frames == 1 and torch.equal(out, torch.full((2,), 5.0))
    y = torch.ones(2)
    y.scale = 5.0
    c(y)
    c(y)
    assert y.seen == 2  # the attribute store happens on every call, cached or not


def test_tensor_made_in_the_graph_has_no_attributes():
    def f(x):
        y = x + 1
        return y * 2 if hasattr(y, "flag") else getattr(y, "other", y - 1)

    check(f, torch.ones(2))


def test_profiler_enabled_query_is_guarded():
    def f(x):
        if torch.autograd._profiler_enabled():
            return x + 1
        return x - 1

    c, _ = check(f, torch.ones(2))
    with torch.autograd.profiler.profile():
        out, d = run(c, f, torch.ones(2))
    assert d.frames == 1 and torch.equal(out, torch.full((2,), 2.0))


def test_default_device_is_guarded():
    def f(x):
        y = torch.zeros(2)
        return x + 1, y.device.type

    c, _ = check(f, torch.ones(2))
    torch.set_default_device("meta")
    try:
        out, d = run(c, f, torch.ones(2, device="cpu"))
    finally:
        torch.set_default_device(None)
    assert d.frames == 1 and out[1] == "meta"


def test_folded_state_queries_follow_the_state():
    def f(x):
        return (x + 1, torch.is_inference_mode_enabled(), torch.are_deterministic_algorithms_enabled(),
                torch.get_default_dtype(), torch.is_autocast_enabled("cpu"), torch.is_grad_enabled())

    c, _ = check(f, torch.ones(1))
    with torch.autocast("cpu"):
        run(c, f, torch.ones(1))
    with torch.no_grad():
        run(c, f, torch.ones(1))
    with torch.inference_mode():
        run(c, f, torch.ones(1))
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        run(c, f, torch.ones(1))
    finally:
        torch.set_default_dtype(prev)
    torch.use_deterministic_algorithms(True)
    try:
        run(c, f, torch.ones(1))
    finally:
        torch.use_deterministic_algorithms(False)


def test_library_module_flag_is_guarded():
    def f(x):
        return x + 1 if torch.backends.cudnn.enabled else x - 1

    c, _ = check(f, torch.ones(1))
    with torch.backends.cudnn.flags(enabled=False):
        _, d = run(c, f, torch.ones(1))
    assert d.frames == 1


def test_functorch_transform_level_is_guarded():
    def f(x):
        return x * 2 + 1

    c = tracer.compile(f)
    x = torch.ones(2, 3)
    assert torch.equal(c(x), f(x))
    assert torch.equal(torch.func.vmap(c)(x), torch.func.vmap(f)(x))
    g = torch.func.grad(lambda v: c(v).sum())(torch.ones(3))
    assert torch.equal(g, torch.full((3,), 2.0))
    guards = [e.guards.describe() for e in c.entries]
    assert any("functorch(" in g for g in guards)


def test_state_setters_are_not_run_while_tracing():
    def f(x):
        torch.set_float32_matmul_precision("medium")
        return x + 1

    prev = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        c = tracer.compile(f)
        _, d = run(c, f, torch.ones(2))
        assert d.breaks == 1
    finally:
        torch.set_float32_matmul_precision(prev)


def test_autocast_queries_rest_on_the_global_state_guard():
    """is_autocast_enabled of a device GlobalStateMatch compares is answered by that guard
    (no query re-run on every check); the autocast dtype, which it compares only while
    autocast is on, keeps its own guard. Both follow the state."""
    from guards import QueryMatch

    def f(x):
        return (x + 1, torch.is_autocast_enabled(), torch.is_autocast_enabled("cpu"),
                torch.get_autocast_dtype("cpu"), torch.get_autocast_dtype(device_type="cuda"))

    c, _ = check(f, torch.ones(1))
    queries = {g.fn for e in c.entries for g in e.guards.guards if isinstance(g, QueryMatch)}
    assert queries == {torch.get_autocast_dtype}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, d = run(c, f, torch.ones(1))
    assert d.frames == 1 and out[2] is True and out[3] is torch.bfloat16
    prev = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", torch.float16)
    try:
        out, d = run(c, f, torch.ones(1))
        assert d.frames == 1 and out[3] is torch.float16
    finally:
        torch.set_autocast_dtype("cpu", prev)
    _, d = run(c, f, torch.ones(1))
    assert d.frames == 0


def test_any_autocast_answer_follows_devices_the_state_guard_does_not_list():
    """_is_any_autocast_enabled() folded while autocast is on for a device other than cpu and
    cuda: turning it off recompiles (the state guard compares cpu and cuda in detail only)."""
    def f(x):
        return x + 1, torch._C._is_any_autocast_enabled()

    c = tracer.compile(f)
    x = torch.ones(2)
    torch.set_autocast_enabled("xpu", True)
    try:
        out, _ = run(c, f, x)
        assert out[1] is True
    finally:
        torch.set_autocast_enabled("xpu", False)
    out, d = run(c, f, x)
    assert out[1] is False and d.frames == 1


def test_presence_of_a_user_module_attribute_is_guarded():
    """`hasattr(mod, name)` and `getattr(mod, name, default)` on a user module: the attribute
    set later (or at import in another process, the disk cache) must not be missed."""
    import sys
    import types
    mod = types.ModuleType("presence_mod")
    sys.modules["presence_mod"] = mod
    try:
        def f(x):
            return x * (3 if hasattr(mod, "FAST") else 2)

        def g(x):
            return x * getattr(mod, "FAST", 2)
        x = torch.ones(2)
        cf, _ = check(f, x)
        cg, _ = check(g, x)
        mod.FAST = 5
        for c, fn in ((cf, f), (cg, g)):
            out, d = run(c, fn, x)
            torch.testing.assert_close(out, fn(x))
            assert d.frames == 1  # recompiled: the attribute now exists
        del mod.FAST
        for c, fn in ((cf, f), (cg, g)):
            out, d = run(c, fn, x)
            torch.testing.assert_close(out, fn(x))
            assert d.frames == 0  # the first entry fits again
    finally:
        del sys.modules["presence_mod"]


def test_attribute_of_a_module_imported_in_the_frame_is_guarded():
    """`import m` inside the frame gives the module without a source; its attributes were
    then read unguarded, and a later `m.scale = 3` kept the traced 2. They are guarded
    through the module itself, as its presence checks already were."""
    import sys
    import types
    mod = types.ModuleType("imported_in_frame_mod")
    mod.scale = 2
    sys.modules["imported_in_frame_mod"] = mod
    try:
        def f(x):
            import imported_in_frame_mod
            return x * imported_in_frame_mod.scale

        x = torch.ones(2)
        c, _ = check(f, x)
        mod.scale = 3
        out, d = run(c, f, x)
        assert d.frames == 1 and torch.equal(out, torch.full((2,), 3.0))
    finally:
        del sys.modules["imported_in_frame_mod"]


class _Box:
    def __init__(self, v=0):
        self.v = v


_GLOBAL_BOX = _Box()


def test_an_object_stored_on_and_another_read_stay_distinct():
    """`a.v = 1; return x + b.v` traced with two objects read b's real attribute: a later call
    passing one object as both (twice, in a list, as a global and an argument, or a module
    twice) must not take the traced answer."""
    def two_args(x, a, b):
        a.v = 1
        return x + b.v

    def in_a_list(x, lst):
        lst[0].v = 1
        return x + lst[1].v

    def global_and_arg(x, a):
        a.v = 1
        return x + _GLOBAL_BOX.v

    x = torch.zeros(2)
    c, _ = check(two_args, x, _Box(), _Box())
    one = _Box()
    out, d = run(c, two_args, x, one, one)
    assert d.frames == 1 and out.tolist() == [1.0, 1.0]
    c, _ = check(in_a_list, x, [_Box(), _Box()])
    one = _Box()
    out, d = run(c, in_a_list, x, [one, one])
    assert d.frames == 1 and out.tolist() == [1.0, 1.0]
    c, _ = check(global_and_arg, x, _Box())
    _GLOBAL_BOX.v = 0
    out = c(x, _GLOBAL_BOX)
    assert out.tolist() == [1.0, 1.0]
    _GLOBAL_BOX.v = 0

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0

    def modules(x, m1, m2):
        m1.scale = 3.0
        return x * m2.scale
    m1, m2 = M(), M()
    c = tracer.compile(modules)
    torch.testing.assert_close(c(torch.ones(2), m1, m2), torch.full((2,), 2.0))
    m = M()
    torch.testing.assert_close(c(torch.ones(2), m, m), torch.full((2,), 3.0))


def _helper_v1(x):
    return x + 1


def _helper_v2(x):
    return x + 100


def test_a_new_top_level_lambda_per_call_is_not_a_recompile_loop():
    """A lambda made at a module's top level (a script's or notebook cell's loop) is a new
    object each pass: it was guarded by identity, so each call recompiled until the limit,
    then the function ran as Python (torch.compile: one trace). Its code is guarded instead,
    as for a lambda made inside a function."""
    ns = {}
    exec("fns = []\nfor i in range(6):\n    fns.append(lambda t: t + 1)\nfns.append(lambda t: t - 1)", ns)

    def f(x, fn):
        return fn(x) * 2

    c = tracer.compile(f)
    x = torch.ones(2)
    for fn in ns["fns"]:
        assert ns["fns"][0].__qualname__ == "<lambda>"
        torch.testing.assert_close(c(x, fn), f(x, fn))
    s = tracer.stats()
    assert s.frames_traced == 2 and s.recompiles == 1 and s.fallbacks == 0  # the other code


def test_a_called_functions_new_code_is_traced_again():
    """Hot reloading (IPython's autoreload) assigns a new `__code__` to the function object
    the trace inlined: the entry must not keep running the old body."""
    def f(x):
        return _helper_v1(x) * 2
    x = torch.ones(2)
    c, _ = check(f, x)
    saved = _helper_v1.__code__
    try:
        _helper_v1.__code__ = _helper_v2.__code__
        out, d = run(c, f, x)
        assert d.frames == 1 and out.tolist() == [202.0, 202.0]
    finally:
        _helper_v1.__code__ = saved
    out, d = run(c, f, x)
    assert d.frames == 0 and out.tolist() == [4.0, 4.0]  # the first entry fits again


def test_the_compiled_functions_own_new_code_and_keyword_defaults_are_followed():
    """`f.__code__ = ...` on the compiled function itself (or a compiled module's forward),
    and `f.__kwdefaults__` assigned or changed in place: the compiled function kept running
    the code and the keyword defaults it was made with (no recompile, no fallback)."""
    def f(x, *, a=2):
        return x * a

    def g(x):
        return x * 2

    def m_forward(self, x):
        return x - 50

    cf, cg = tracer.compile(f), tracer.compile(g)
    m = torch.nn.Identity()
    cm = tracer.compile(m)
    x = torch.ones(2)
    assert cf(x).tolist() == [2.0, 2.0] and cg(x).tolist() == [2.0, 2.0] and cm(x).tolist() == [1.0, 1.0]
    f.__kwdefaults__ = {"a": 7}
    assert cf(x).tolist() == f(x).tolist() == [7.0, 7.0]
    f.__kwdefaults__["a"] = 9
    assert cf(x).tolist() == f(x).tolist() == [9.0, 9.0]
    g.__code__ = (lambda x: x + 100).__code__
    assert cg(x).tolist() == g(x).tolist() == [101.0, 101.0]
    saved = torch.nn.Identity.forward.__code__
    try:
        torch.nn.Identity.forward.__code__ = m_forward.__code__
        assert cm(x).tolist() == m(x).tolist() == [-49.0, -49.0]
    finally:
        torch.nn.Identity.forward.__code__ = saved
    assert cm(x).tolist() == [1.0, 1.0]
    s = tracer.stats()
    assert s.fallbacks == 0 and s.graph_breaks == 0 and s.internal_errors == 0


def test_inputs_that_later_share_memory_trace_again_under_a_compiling_backend():
    """`a.add_(1); return b * 2` traced with two tensors, then called with overlapping views
    of one (`y[:3], y[1:]`): AOTAutograd functionalised the write for distinct inputs, so b
    was read before it; eager reads the written values (torch.compile answers wrongly here
    too). Which inputs share a storage is guarded when the graph writes an input."""
    def f(a, b):
        a.add_(1)
        return b * 2

    for backend in ("aot_eager", "eager"):
        tracer.reset()
        c = tracer.compile(f, backend=backend)
        c(torch.zeros(3), torch.zeros(3))
        y, y_eager = torch.zeros(4), torch.zeros(4)
        got, want = c(y[:3], y[1:]), f(y_eager[:3], y_eager[1:])
        assert torch.equal(got, want) and torch.equal(y, y_eager), (backend, got, want)
        entries = c.entries
        sharing = [g for e in entries for g in e.guards.guards if type(g).__name__ == "StorageSharing"]
        assert bool(sharing) == (backend != "eager")
        y, y_eager = torch.zeros(4), torch.zeros(4)  # the same sharing again: a cache hit
        before = tracer.stats().frames_traced
        assert torch.equal(c(y[:3], y[1:]), f(y_eager[:3], y_eager[1:])) and torch.equal(y, y_eager)
        assert tracer.stats().frames_traced == before


def test_views_of_one_storage_that_come_to_overlap_trace_again():
    """`x.add_(1); return x + y` traced under aot_eager with t[:3], t[3:] (one storage, no
    overlap: AOTAutograd takes them as distinct), then called with t[:3], t[1:4], returned
    [2, 4, 6] (eager [3, 5, 6]) from the cache: StorageSharing recorded which inputs share a
    storage, not whether they overlap. It records that now, by AOTAutograd's own test, and the
    offsets of overlapping views, which AOTAutograd makes again from one base as traced;
    disjoint views may move without a trace."""
    def f(x, y):
        x.add_(1)
        return x + y

    c = tracer.compile(f, backend="aot_eager")
    calls = [((0, 3), (3, 6), 1),  # disjoint: the first trace
             ((0, 3), (1, 4), 1),  # overlapping: traced again (was the first entry's answer)
             ((0, 3), (2, 5), 1),  # overlapping at other offsets
             ((0, 3), (1, 4), 0),  # as the second call
             ((2, 5), (5, 8), 0),  # disjoint elsewhere in the storage: the first entry
             ((1, 4), (2, 5), 1)]
    for (a, b), (d, e), traced in calls:
        t, te = torch.arange(8.), torch.arange(8.)
        before = tracer.stats().frames_traced
        got, want = c(t[a:b], t[d:e]), f(te[a:b], te[d:e])
        assert torch.equal(got, want) and torch.equal(t, te), ((a, b), (d, e), got, want)
        assert tracer.stats().frames_traced - before == traced, ((a, b), (d, e))
    described = [g.describe() for e in c.entries for g in e.guards.guards if type(g).__name__ == "StorageSharing"]
    assert "y shares x's storage, without overlapping (as traced)" in described
    assert "y shares x's storage, overlapping (x at 0, y at 1) (as traced)" in described


def test_overlapping_input_views_with_changing_sizes_compile():
    """Views of one tensor passed as two inputs whose sizes change: the second keeps static
    sizes (AOTAutograd merging the two could not find the view's own size symbol again: a
    BackendError)."""
    def f(a, b):
        a.add_(1)
        return b * 2

    c = tracer.compile(f, backend="aot_eager")
    for n in (3, 4, 5):
        y, y_eager = torch.zeros(n), torch.zeros(n)
        assert torch.equal(c(y, y[1:]), f(y_eager, y_eager[1:])) and torch.equal(y, y_eager)
    assert tracer.stats().internal_errors == 0 and tracer.stats().fallbacks == 0


class _Param:
    """A plain object used as a dict key: hashed and compared by identity."""

    def __init__(self, name):
        self.name = name


def test_a_dict_keyed_by_objects_is_read_with_the_key_given_on_each_call():
    """`state[p]` with p a user object (or a module) argument was looked up, on every later
    call, with the object the trace was made with: `f(state, b, x)` returned `state[a] * x`,
    and `p in state` took the traced branch. The key is now read through its own source."""
    def f(state, p, x):
        if p in state:
            return state[p] * x
        state[p] = x.sum()
        return x

    a, b, c = _Param("a"), _Param("b"), _Param("c")
    state = {a: torch.tensor(1.0), b: torch.tensor(100.0)}
    compiled = tracer.compile(f)
    x = torch.ones(2)
    for p in (a, b, a, c):
        ref_state, got_state = dict(state), dict(state)
        torch.testing.assert_close(compiled(got_state, p, x), f(ref_state, p, x))
        assert got_state.keys() == ref_state.keys()
    s = tracer.stats()
    assert s.graph_breaks == 0 and s.fallbacks == 0 and s.frames_traced == 2  # present, absent

    layers = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]
    scale = {layers[0]: 2.0, layers[1]: 3.0}
    g = tracer.compile(lambda m, x: m(x) * scale[m])
    for m in layers:
        torch.testing.assert_close(g(m, x), m(x) * scale[m])


def test_a_dict_key_with_its_own_hash_is_not_hashed_while_tracing():
    """A key whose __hash__/__eq__ are user code: the lookup ran them at trace time and, on
    later calls, the guard ran the first call's key object's (its log grew instead of the
    call's own). Such a lookup runs as Python, where it runs them once, as eager."""
    class Key:
        def __init__(self, log, k):
            self.log, self.k = log, k

        def __hash__(self):
            self.log.append("hash")
            return hash(self.k)

        def __eq__(self, other):
            self.log.append("eq")
            return isinstance(other, Key) and other.k == self.k

    def f(d, key, x):
        return d[key] * x

    c = tracer.compile(f)
    for _ in range(3):
        le, lc = [], []
        de, dc = {Key([], 1): torch.tensor(2.0)}, {Key([], 1): torch.tensor(2.0)}
        x = torch.ones(2)
        torch.testing.assert_close(c(dc, Key(lc, 1), x), f(de, Key(le, 1), x))
        assert lc == le
    assert tracer.stats().fallbacks == 0


def _facts_guarded(c):
    """The TensorFact guards of a compiled function's entries, described."""
    return [g.describe() for e in c.entries for g in e.guards.guards if type(g).__name__ == "TensorFact"]


@pytest.mark.parametrize("f", [
    lambda x: x * x.storage_offset(),
    lambda x: x * torch.Tensor.storage_offset(x),
    lambda x: x.view(-1)[0:1] + x.storage_offset(),
    lambda x: x + x[1:].storage_offset(),  # a view the trace made starts where its input does
], ids=["method", "function", "after_a_view", "of_a_view"])
def test_a_storage_offset_the_trace_read_is_guarded(f):
    """`x * x.storage_offset()` folded the first input's offset from its fake tensor, and no
    guard checked it (TensorMatch reads sizes and strides only): called on t[0:3], then on
    t[2:5], it returned [0, 0, 0] where eager gives [4, 6, 8]; `x[1:].storage_offset()`
    likewise. The offset of each input a read tensor views is now guarded where it is read."""
    f = fresh(f)
    t = torch.arange(10.)
    c, _ = check(f, t[0:3])
    out, d = run(c, f, t[2:5])
    assert d.frames == 1 and d.fallbacks == 0 and d.breaks == 0
    assert _facts_guarded(c) == ["x.storage_offset() == 0 (as traced)", "x.storage_offset() == 2 (as traced)"]
    _, d = run(c, f, torch.ones(6)[2:5])  # another tensor at offset 2: the second entry
    assert d.frames == 0


def test_a_storage_offset_specialised_under_dynamic_shapes_is_guarded():
    """With dynamic shapes an input's offset is symbolic, except 0 and 1, which the ShapeEnv
    specialises without a guard of its own: read at 0 or 1, it was the answer for every later
    offset. A static offset read is guarded; a symbolic one stays the ShapeEnv's."""
    def f(x):
        return x * x.storage_offset()
    c = tracer.compile(f, dynamic=True)
    t = torch.arange(20.)
    for s in (slice(1, 4), slice(2, 5), slice(0, 4), slice(3, 7), slice(1, 4)):
        torch.testing.assert_close(c(t[s]), f(t[s]))
    s = tracer.stats()
    assert s.frames_traced == 3 and s.graph_breaks == 0 and s.fallbacks == 0  # offsets 1, 2 (symbolic), 0


def test_how_an_input_tensor_was_made_is_guarded_where_read():
    """`x._is_view()` and `x.is_leaf` of an input were folded from the first call's tensor with
    no guard: `x + 1 if x._is_view() else x - 1` on torch.zeros(3), then on a view, took the
    first branch; `x * 2 if x.is_leaf else x * 3` on a leaf requiring grad, then on a non-leaf
    requiring grad, returned x * 2. Each is guarded on the input now."""
    def view(x):
        return x + 1 if x._is_view() else x - 1

    def view_fn(x):
        return x + 1 if torch.Tensor._is_view(x) else x - 1

    def leaf(x):
        return x * 2 if x.is_leaf else x * 3

    base = torch.zeros(6)
    with torch.no_grad():  # a view made under no_grad of a leaf requiring grad: a leaf view
        no_grad_view = torch.ones(3, requires_grad=True)[:2]
    cases = [(view, [torch.zeros(3), base[:3], torch.zeros(3)]),
             (view_fn, [base[:3], torch.zeros(3)]),
             (leaf, [torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True) * 1, no_grad_view,
                     torch.ones(2, requires_grad=True)])]
    for f, inputs in cases:
        c = tracer.compile(f)
        for x in inputs:
            torch.testing.assert_close(c(x), f(x))
        assert _facts_guarded(c)
    s = tracer.stats()
    assert s.graph_breaks == 0 and s.fallbacks == 0 and s.frames_traced == 2 + 2 + 2  # (the no_grad view: a leaf)


def test_a_storage_kind_is_answered_by_the_input_and_guarded():
    """`x.is_shared()` was the fake tensor's answer, False for a tensor in shared memory, and
    unguarded. It is the real input's storage's answer now, for a view the trace made too,
    and guarded; of a storage the graph made it is a graph break (fake tensors do not know)."""
    def f(x):
        return x + 1 if x[1:].is_shared() else x - 1

    def made(x):
        return x + 1 if (x * 2).is_pinned() else x - 1

    c = tracer.compile(f)
    for x in (torch.zeros(3).share_memory_(), torch.zeros(3), torch.zeros(3).share_memory_()):
        torch.testing.assert_close(c(x), f(x))
    assert _facts_guarded(c) == ["x.is_shared() == True (as traced)", "x.is_shared() == False (as traced)"]
    s = tracer.stats()
    assert s.frames_traced == 2 and s.graph_breaks == 0
    out, d = run(tracer.compile(made), made, torch.zeros(3))
    assert d.breaks == 1 and "storage the graph makes" in d.break_reasons[0]


@pytest.mark.parametrize("f", [
    lambda x: x + (x.const_data_ptr() != 0),
    lambda x: x + x._use_count(),
    lambda x: x + 1 if x.is_set_to(x) else x - 1,
    lambda x: (x + 1, x.storage_type()),
    lambda x: (x + 1, torch._C._storage_id(x) == torch._C._storage_id(x[1:])),
    lambda x: (x + 1, torch._C._storage_address(x) % 8),
], ids=["const_data_ptr", "_use_count", "is_set_to", "storage_type", "_storage_id", "_storage_address"])
@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_what_no_guard_can_pin_is_a_graph_break(f):
    """An address, a reference count or storage identity was folded from the fake tensor,
    wrong on the first call already (`x.is_set_to(x)` False, `storage_type()` None, a made-up
    pointer): a graph break with its reason now."""
    f = fresh(f)
    _, d = run(tracer.compile(f), f, torch.zeros(3))
    assert d.breaks >= 1 and d.fallbacks == 0 and "no guard can pin" in d.break_reasons[0], d.break_reasons


def test_a_frame_that_reads_no_tensor_fact_checks_none():
    """Tensor facts are guarded only where read: a frame that reads sizes, dtype and
    contiguity (what TensorMatch pins) gets no TensorFact, so its calls pay nothing more."""
    def f(x):
        return x.reshape(x.shape[0], -1).float() if x.is_contiguous() and x.dim() == 2 else x

    c, _ = check(f, torch.arange(10.)[2:8].view(2, 3))
    assert _facts_guarded(c) == []
