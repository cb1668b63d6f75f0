"""Tests for the PEP 523 frame hook: tracer/runtime/_eval_frame.c and tracer/runtime/frame_hook.py."""
import asyncio
import builtins
import gc
import sys
import threading
import tracemalloc
import types

import pytest

from tracer.runtime import frame_hook as fh
from tracer.runtime.frame_hook import flatten_code, hook, set_eval_frame

C = fh._C


@pytest.fixture(autouse=True)
def _clean_state():
    """Every test starts and ends with no callback, no error handler, hook uninstalled."""
    assert set_eval_frame(None) is None
    prev_handler = fh.set_error_handler(None)
    yield
    assert set_eval_frame(None) is None, "a test left a callback set"
    fh.set_error_handler(prev_handler)
    assert C._active_count() == 0
    assert not C._hook_installed()


class Recorder:
    """Callback: records every frame it is handed; optionally replaces some codes."""

    def __init__(self, replace=None, keep_views=False):
        self.names = []
        self.views = []
        self.replace = replace or {}
        self.keep_views = keep_views

    def __call__(self, frame):
        self.names.append(frame.f_code.co_name)
        if self.keep_views:
            self.views.append(frame)
        return self.replace.get(frame.f_code)

    def view(self, name):
        matches = [v for v in self.views if v.f_code.co_name == name]
        assert len(matches) == 1, (name, self.names)
        return matches[0]


def replace_with(original, donor):
    """Map original.__code__ -> donor's code flattened (donor must have the same arg
    slots and free variables, in the same order)."""
    return {original.__code__: flatten_code(donor.__code__)}


# ---------------------------------------------------------------------------------------
# What the callback sees


def test_view_fields_plain_and_all_argument_kinds():
    def f(a, b=2, /, c=3, *args, k, m=5, **kw):
        return a + b + c + k + m + sum(args) + sum(kw.values())

    rec = Recorder(keep_views=True)
    with hook(rec):
        assert f(1, 10, 100, 7, 8, k=4, z=1000) == 1 + 10 + 100 + 4 + 5 + 15 + 1000
    v = rec.view("f")
    assert isinstance(v, fh.FrameView)
    assert v.f_code is f.__code__
    assert v.f_func is f
    assert v.f_globals is globals()
    assert v.f_builtins is builtins.__dict__
    assert v.closure is None
    assert v.f_lasti == -1
    assert v.f_args == (1, 10, 100, 4, 5, (7, 8), {"z": 1000})
    assert v.f_locals == {"a": 1, "b": 10, "c": 100, "k": 4, "m": 5, "args": (7, 8), "kw": {"z": 1000}}
    assert f.__code__.co_varnames[: len(v.f_args)] == ("a", "b", "c", "k", "m", "args", "kw")
    assert "FrameView test_view_fields_plain_and_all_argument_kinds.<locals>.f at " in repr(v)


def test_view_closure_and_cell_arguments():
    outer_val = [1]
    unset_later = None  # noqa: F841  (becomes a cell below)

    def make():
        y = 10

        def g(x, c):
            def inner():
                return c + x  # c and x are cell arguments of g
            return inner() + y + outer_val[0]
        return g

    g = make()
    rec = Recorder(keep_views=True)
    with hook(rec):
        assert g(1, 2) == 3 + 10 + 1
    v = rec.view("g")
    assert v.closure is g.__closure__
    # cell arguments show their raw value (MAKE_CELL has not run), free vars their contents
    assert v.f_args == (1, 2)
    assert v.f_locals == {"x": 1, "c": 2, "y": 10, "outer_val": [1]}
    assert rec.names == ["make.<locals>.g".split(".")[-1], "inner"]


def test_empty_closure_cell_is_left_out_of_locals():
    seen = []

    def outer():
        def h():
            return later  # noqa: F821

        def cb(frame):
            if frame.f_code is h.__code__:
                seen.append(frame.f_locals)  # f_locals is built on first access: read it here

        with hook(cb):
            with pytest.raises(NameError):
                h()
        later = 1  # noqa: F841

    outer()
    assert seen == [{}]


def test_methods_and_lambdas_and_default_only_calls():
    class A:
        def m(self, x=1):
            return x * 2

        @staticmethod
        def s():
            return 7

    a = A()
    lam = lambda q=3: q + 1  # noqa: E731
    rec = Recorder(keep_views=True)
    with hook(rec):
        assert a.m() == 2 and A.s() == 7 and lam() == 4
    assert rec.view("m").f_args == (a, 1)
    assert rec.view("s").f_args == ()
    assert rec.view("<lambda>").f_args == (3,)


# ---------------------------------------------------------------------------------------
# Replacement code (call-through)


def _sig_cases():
    def f0():
        return "f0"

    def r0():
        return "r0"

    def f1(a, b=2, /, c=3):
        return ("f1", a, b, c)

    def r1(a, b, c):
        return ("r1", a, b, c)

    def f2(*args, **kw):
        return ("f2", args, kw)

    def r2(*args, **kw):
        return ("r2", args, kw)

    def f3(a, *, k, m=9):
        return ("f3", a, k, m)

    def r3(a, *, k, m=9):
        return ("r3", a, k, m)

    def f4(a, b=1, *rest, k=2, **kw):
        return ("f4", a, b, rest, k, kw)

    def r4(a, b=1, *rest, k=2, **kw):
        return ("r4", a, b, rest, k, kw)

    return [
        (f0, r0, (), {}, "r0"),
        (f1, r1, (1,), {}, ("r1", 1, 2, 3)),
        (f1, r1, (1, 5), {"c": 6}, ("r1", 1, 5, 6)),
        (f2, r2, (1, 2), {"x": 3}, ("r2", (1, 2), {"x": 3})),
        (f2, r2, (), {}, ("r2", (), {})),
        (f3, r3, (1,), {"k": 2}, ("r3", 1, 2, 9)),
        (f4, r4, (1, 2, 3, 4), {"k": 5, "z": 6}, ("r4", 1, 2, (3, 4), 5, {"z": 6})),
        (f4, r4, (1,), {}, ("r4", 1, 1, (), 2, {})),
    ]


@pytest.mark.parametrize("orig, donor, args, kwargs, expected", _sig_cases())
def test_replacement_runs_with_original_arguments(orig, donor, args, kwargs, expected):
    rec = Recorder(replace=replace_with(orig, donor))
    with hook(rec):
        assert orig(*args, **kwargs) == expected
    assert rec.names == [orig.__name__]  # the replacement's frame was not handed over


def test_round_trip_flattened_original_matrix():
    """Returning the flattened original code must not change any result."""
    cases = _sig_cases()
    replace = {}
    for orig, _donor, _a, _k, _e in cases:
        replace[orig.__code__] = flatten_code(orig.__code__)
    rec = Recorder(replace=replace)
    with hook(rec):
        got = [orig(*a, **k) for orig, _d, a, k, _e in cases]
    assert got == [orig(*a, **k) for orig, _d, a, k, _e in cases]


def test_replacement_keeps_closures_cell_arguments_and_nested_closures():
    def make(base):
        counter = [0]

        def f(x, y=1):
            def add():
                counter[0] += 1
                return x + y + base  # x, y are cell arguments; base, counter free vars
            return add() * 10 + counter[0]

        def donor(x, y):
            def add():
                counter[0] += 1
                return x + y + base
            return -(add() * 10 + counter[0])

        return f, donor, counter

    f, donor, counter = make(100)
    rec = Recorder(replace=replace_with(f, donor))
    with hook(rec):
        assert f(1) == -(102 * 10 + 1)
        assert f(2, y=3) == -(105 * 10 + 2)
    assert counter == [2]  # the replacement mutated the original's cell
    assert rec.names == ["f", "add", "f", "add"]


def test_replacement_with_mismatched_free_vars_is_rejected_and_original_runs():
    a, b = 1, 2

    def f():
        return a

    def donor():
        return b

    errors = []
    fh.set_error_handler(lambda exc, code: errors.append((exc, code)))
    with hook(Recorder(replace=replace_with(f, donor))):
        assert f() == 1
    assert len(errors) == 1
    exc, code = errors[0]
    assert isinstance(exc, TypeError) and "free variables" in str(exc) and code is f.__code__


def test_replacement_with_wrong_argcount_is_rejected_and_original_runs():
    def f(x, *args):
        return ("f", x, args)

    errors = []
    fh.set_error_handler(lambda exc, code: errors.append(exc))
    # not flattened: still has CO_VARARGS
    with hook(Recorder(replace={f.__code__: f.__code__})):
        assert f(1, 2) == ("f", 1, (2,))
    assert len(errors) == 1 and isinstance(errors[0], TypeError)
    assert "exactly 2 positional arguments" in str(errors[0])


def test_replacement_recursion_and_f_back():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def donor(n):
        callers.append(sys._getframe().f_back.f_code.co_name)  # noqa: F821 (a global here)
        return 1 if n <= 1 else n * fact(n - 1)

    global callers
    callers = []

    rec = Recorder(replace=replace_with(fact, donor))

    def caller():
        return fact(5)

    with hook(rec):
        assert caller() == 120
    # (other frames may start meanwhile, e.g. an audit hook a library installed (filelock's
    # runs on 3.12's sys._getframe audit event): only this test's functions are counted)
    assert [n for n in rec.names if n in ("caller", "fact")] == ["caller"] + ["fact"] * 5
    # the original frame never ran: the replacement's caller is the real caller
    assert callers == ["caller", "donor", "donor", "donor", "donor"]
    del callers


def test_deep_recursion_with_replacement_crosses_data_stack_chunks():
    """Frames live on the thread's data stack, allocated in chunks. On 3.12+ the hook itself
    pops each replaced frame, and one that is the first frame of a new chunk takes the chunk
    with it: recurse deep with big frames, replacing every level, repeatedly."""
    names = [f"v{i}" for i in range(300)]  # big frames: a few levels fill a chunk
    src = ("def rec(n, pad):\n"
           f"    {' = '.join(names)} = pad\n"
           "    return 0 if n == 0 else 1 + rec(n - 1, pad)\n")
    ns = {}
    exec(src, ns)
    rec = ns["rec"]

    def donor(n, pad):
        return 0 if n == 0 else 1 + rec(n - 1, pad)

    pad = object()
    before = sys.getrefcount(pad)
    recorder = Recorder(replace=replace_with(rec, donor))
    fh.set_error_handler(lambda exc, code: None)  # the callback itself hits the recursion limit
    with hook(recorder):
        for depth in (10, 150, 400, 150, 10):
            assert rec(depth, pad) == depth
            with pytest.raises(RecursionError):
                rec(10**6, pad)
    assert sys.getrefcount(pad) == before
    assert recorder.names.count("rec") > 700
    assert rec(300, pad) == 300  # the thread's stack is intact afterwards


def test_returning_original_code_itself_does_not_mark_it_skipped():
    def f(x, y):
        return x - y

    rec = Recorder(replace={f.__code__: f.__code__})  # already flat: valid replacement
    with hook(rec):
        assert f(5, 3) == 2
        assert f(5, 3) == 2
    assert rec.names == ["f", "f"]
    assert not fh.is_skipped(f.__code__)


# ---------------------------------------------------------------------------------------
# Frames that are never handed over


def test_generators_coroutines_async_generators_not_intercepted():
    def gen(n):
        for i in range(n):
            yield i

    def gen_closer():
        try:
            yield 1
            yield 2
        finally:
            log.append("closed")

    def gen_thrower():
        try:
            yield 1
        except ValueError:
            yield "caught"

    async def coro(x):
        await asyncio.sleep(0)
        return x * 2

    async def agen(n):
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    async def amain():
        return [await coro(3), [i async for i in agen(3)]]

    log = []
    rec = Recorder()
    with hook(rec):
        assert list(gen(3)) == [0, 1, 2]
        assert [x * 2 for x in range(3)] == [0, 2, 4]  # a function on 3.11, inlined on 3.12+
        assert (lambda: 5)() == 5
        g = gen_closer()
        next(g)
        g.close()
        t = gen_thrower()
        next(t)
        assert t.throw(ValueError) == "caught"
        loop = asyncio.new_event_loop()
        try:
            assert loop.run_until_complete(amain()) == [6, [0, 1, 2]]
        finally:
            loop.close()
    assert log == ["closed"]
    for name in ("gen", "gen_closer", "gen_thrower", "coro", "agen", "amain", "<genexpr>"):
        assert name not in rec.names
    assert "<lambda>" in rec.names  # plain function frames are seen
    assert ("<listcomp>" in rec.names) == (sys.version_info < (3, 12))  # PEP 709


def test_class_bodies_and_exec_not_intercepted():
    rec = Recorder()
    with hook(rec):
        class K:  # noqa: F841
            x = 1
        ns = {}
        exec("def q():\n    return 5\nr = q()", ns)
    assert ns["r"] == 5
    assert "K" not in rec.names and "<module>" not in rec.names
    assert "q" in rec.names


def test_callback_not_reentered_for_frames_it_starts():
    def helper(x):
        return x + 1

    def user(x):
        return x

    calls = []

    def cb(frame):
        calls.append(frame.f_code.co_name)
        helper(1)  # a Python call inside the callback
        repr(frame)
        assert fh.get_eval_frame() is None  # interception is off while it runs
        return None

    with hook(cb):
        assert user(3) == 3
        assert fh.get_eval_frame() is cb
    assert calls == ["user"]


def test_skip_code_and_recursive():
    def leaf():
        return 1

    def mid():
        return leaf() + 1

    def top():
        return mid() + 1

    rec = Recorder()
    try:
        fh.skip_code(mid.__code__)
        assert fh.is_skipped(mid.__code__)
        with hook(rec):
            assert top() == 3
        assert rec.names == ["top", "leaf"]

        rec.names.clear()
        fh.skip_code(mid.__code__, recursive=True)
        with hook(rec):
            assert top() == 3
            assert fh.get_eval_frame() is rec  # restored after the recursive region
            assert leaf() == 1
        assert rec.names == ["top", "leaf"]  # the leaf under mid is hidden, the direct one not

        fh.unskip_code(mid.__code__)
        assert not fh.is_skipped(mid.__code__)
        rec.names.clear()
        with hook(rec):
            top()
        assert rec.names == ["top", "mid", "leaf"]
    finally:
        fh.unskip_code(mid.__code__)


def test_rule_skip_is_honoured_only_for_the_rule_type():
    """rule_skip caches a skip decided by the tracer's default rule: callbacks of exactly the
    registered type are not called for that code; any other callback still is, and
    is_skipped (what inlining checks) does not report it."""
    def leaf():
        return 1

    class RuleCallback(Recorder):
        pass

    prev = fh.set_rule_type(RuleCallback)
    try:
        fh.rule_skip(leaf.__code__)
        assert fh.is_rule_skipped(leaf.__code__) and not fh.is_skipped(leaf.__code__)
        rule_cb, other = RuleCallback(), Recorder()
        with hook(rule_cb):
            leaf()
        with hook(other):
            leaf()
        assert rule_cb.names == [] and other.names == ["leaf"]
        fh.skip_code(leaf.__code__, recursive=True)  # an explicit skip wins (and replaces it)
        assert fh.is_skipped(leaf.__code__)
        fh.unskip_code(leaf.__code__)
        assert not fh.is_rule_skipped(leaf.__code__) and not fh.is_skipped(leaf.__code__)
        with pytest.raises(TypeError):
            fh.rule_skip("not code")
        with pytest.raises(TypeError):
            fh.set_rule_type(3)
    finally:
        fh.unskip_code(leaf.__code__)
        assert fh.set_rule_type(prev) is RuleCallback


def test_untraced_calls_with_the_callback_off():
    def leaf(x, k=0):
        return x + k

    def inner(x):
        return leaf(x) + 1

    rec = Recorder()
    wrapped = fh.untraced(inner)
    assert wrapped.__wrapped__ is inner and "untraced" in repr(wrapped)
    with hook(rec):
        assert wrapped(1) == 2
        assert fh.untraced(leaf)(1, k=2) == 3  # keywords pass through
        assert fh.get_eval_frame() is rec     # restored
        leaf(0)
    assert rec.names == ["leaf"]              # only the direct call
    assert wrapped(5) == 6                    # no callback set: a plain call

    def boom():
        raise ValueError("x")

    with hook(rec):
        with pytest.raises(ValueError):
            fh.untraced(boom)()
        assert fh.get_eval_frame() is rec
    with pytest.raises(TypeError):
        fh.untraced(3)


def test_disable_decorator_and_reenabling_inside():
    def leaf():
        return 1

    @fh.disable
    def quiet():
        inner_seen = Recorder()
        with hook(inner_seen):  # a nested hook inside a disabled region still works
            leaf()
        return leaf() + 1, inner_seen.names, fh.get_eval_frame()

    try:
        rec = Recorder()
        with hook(rec):
            assert quiet() == (2, ["leaf"], None)
            assert fh.get_eval_frame() is rec
        assert rec.names == []
        with pytest.raises(TypeError):
            fh.disable(len)
    finally:
        fh.unskip_code(quiet.__code__)


def test_unbalanced_set_inside_disabled_region_is_dropped():
    def sneaky():
        set_eval_frame(lambda fr: None)  # never restored

    try:
        fh.skip_code(sneaky.__code__, recursive=True)
        rec = Recorder()
        with hook(rec):
            sneaky()
            assert fh.get_eval_frame() is rec
            assert C._active_count() == 1
    finally:
        fh.unskip_code(sneaky.__code__)


# ---------------------------------------------------------------------------------------
# Errors


def test_user_exception_propagates_with_user_frames():
    def inner(x):
        raise ValueError(f"bad {x}")

    def f(x):
        return inner(x) + 1

    def donor(x):
        return inner(x) + 1

    for replace in ({}, replace_with(f, donor)):
        with hook(Recorder(replace=replace)):
            with pytest.raises(ValueError, match="bad 3") as ei:
                f(3)
        names = [e.name for e in ei.traceback]
        assert names[-2:] == ["donor" if replace else "f", "inner"]
        assert ei.value.__context__ is None


def test_callback_exception_goes_to_error_handler_and_frame_runs():
    def f(x):
        return x + 1

    def cb(frame):
        raise RuntimeError("tracer bug")

    errors = []
    prev = fh.set_error_handler(lambda exc, code: errors.append((exc, code)))
    assert prev is None
    with hook(cb):
        assert f(1) == 2
        assert fh.get_eval_frame() is cb
    assert len(errors) == 1
    exc, code = errors[0]
    assert isinstance(exc, RuntimeError) and code is f.__code__
    assert exc.__traceback__ is not None


def test_callback_exception_without_handler_is_unraisable(monkeypatch):
    def f(x):
        return x * 3

    got = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: got.append((u.exc_type, u.object)))

    def cb(frame):
        if frame.f_code is f.__code__:
            raise KeyError("oops")

    with hook(cb):
        assert f(2) == 6
    assert got == [(KeyError, f.__code__)]


def test_bad_return_type_reported():
    def f():
        return "ok"

    errors = []
    fh.set_error_handler(lambda exc, code: errors.append(exc))
    with hook(lambda frame: 42):
        assert f() == "ok"
    assert len(errors) == 1 and isinstance(errors[0], TypeError)
    assert "None or a code object" in str(errors[0])


def test_error_handler_raising_propagates_and_keyboardinterrupt_propagates():
    def f():
        return "ok"

    def strict(exc, code):
        raise AssertionError("strict mode") from exc

    fh.set_error_handler(strict)

    def failing(frame):
        if frame.f_code is f.__code__:
            raise RuntimeError("x")

    with hook(failing):
        with pytest.raises(AssertionError, match="strict mode"):
            f()
    fh.set_error_handler(None)

    def interrupt(frame):
        if frame.f_code is f.__code__:
            raise KeyboardInterrupt

    with hook(interrupt):
        with pytest.raises(KeyboardInterrupt):
            f()


def test_set_eval_frame_validates_and_returns_previous():
    with pytest.raises(TypeError):
        set_eval_frame(3)
    with pytest.raises(TypeError):
        fh.skip_code("not code")
    a, b = Recorder(), Recorder()
    assert set_eval_frame(a) is None
    assert C._hook_installed() and C._active_count() == 1
    assert set_eval_frame(b) is a
    assert set_eval_frame(None) is b
    assert not C._hook_installed() and C._active_count() == 0


def test_hook_restores_on_exception():
    outer, inner = Recorder(), Recorder()
    with hook(outer):
        with pytest.raises(ZeroDivisionError):
            with hook(inner):
                assert fh.get_eval_frame() is inner
                1 / 0
        assert fh.get_eval_frame() is outer
    assert fh.get_eval_frame() is None


# ---------------------------------------------------------------------------------------
# Threads


def test_threads_do_not_interfere():
    def work(x):
        return x + 1

    n = 2000
    results = {}
    start = threading.Barrier(3)

    def run(name, cb):
        def body():
            start.wait()
            if cb is None:
                results[name] = [work(i) for i in range(n)]
                return
            with hook(cb):
                results[name] = [work(i) for i in range(n)]
        return threading.Thread(target=body)

    hooked_a = Recorder()

    def donor(x):
        return -x

    hooked_b = Recorder(replace=replace_with(work, donor))
    threads = [run("plain", None), run("a", hooked_a), run("b", hooked_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["plain"] == [i + 1 for i in range(n)]
    assert results["a"] == [i + 1 for i in range(n)]
    assert results["b"] == [-i for i in range(n)]
    assert hooked_a.names.count("work") == n and hooked_b.names.count("work") == n
    assert set(hooked_a.names) <= {"work", "<listcomp>"}
    assert fh.get_eval_frame() is None  # this thread never had one


# ---------------------------------------------------------------------------------------
# Leaks


def _leak_subjects():
    big = object()

    def make():
        cell_obj = object()

        def f(a, *rest, k=None, **kw):
            return (a, cell_obj, rest, k, kw)

        def donor(a, *rest, k=None, **kw):
            return (a, cell_obj, rest, k, kw)

        return f, donor, cell_obj

    f, donor, cell_obj = make()
    return big, f, donor, cell_obj


@pytest.mark.parametrize("mode", ["none", "replace", "error", "skip"])
def test_no_reference_or_memory_leaks(mode):
    big, f, donor, cell_obj = _leak_subjects()
    arg, kwval = object(), object()
    replace = replace_with(f, donor)

    def cb(frame):
        frame.f_args  # noqa: B018
        if mode == "error":
            raise ValueError("x")
        return replace.get(frame.f_code) if mode == "replace" else None

    fh.set_error_handler(lambda exc, code: None)
    if mode == "skip":
        fh.skip_code(f.__code__)

    def loop(n):
        for _ in range(n):
            f(arg, big, k=kwval, z=big)

    try:
        with hook(cb):
            loop(200)  # warm up
        gc.collect()
        refs = [sys.getrefcount(o) for o in (arg, kwval, big, cell_obj, cb, f, f.__code__)]
        objs = len(gc.get_objects())
        tracemalloc.start()
        snap1 = tracemalloc.take_snapshot()
        with hook(cb):
            loop(10_000)
        gc.collect()
        snap2 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        assert [sys.getrefcount(o) for o in (arg, kwval, big, cell_obj, cb, f, f.__code__)] == refs
        assert len(gc.get_objects()) - objs < 50
        growth = sum(s.size_diff for s in snap2.compare_to(snap1, "filename"))
        assert growth < 64 * 1024, growth
    finally:
        fh.unskip_code(f.__code__)


def test_views_kept_by_callback_are_collected():
    def f(x):
        return x

    kept = []

    def cb(frame):
        frame.f_globals["_leak_probe_view"] = frame  # a cycle: globals -> view -> globals
        kept.append(frame.f_locals)
        return None

    with hook(cb):
        f(1)
    globals().pop("_leak_probe_view")
    assert kept == [{"x": 1}]


# ---------------------------------------------------------------------------------------
# Coexistence with torch.compile (another PEP 523 user)


def test_coexists_with_torch_compile():
    torch = pytest.importorskip("torch")

    def mine(x):
        return x + 1

    @torch.compile(backend="eager")
    def theirs(x):
        return torch.sin(x) + 1

    def donor(x):
        return x + 2

    x = torch.ones(3)
    rec = Recorder(replace=replace_with(mine, donor))
    with hook(rec):
        assert torch.allclose(theirs(x), torch.sin(x) + 1)
        assert mine(1) == 3
    assert torch.allclose(theirs(x), torch.sin(x) + 1)
    assert mine(1) == 2
    torch._dynamo.reset()


# (The frame hook's per-call cost is measured in benchmarks/micro.py, not here.)


def test_recycled_objects_are_safe_and_retain_no_user_values():
    """The C side recycles the FrameView and the call-through function object when nobody
    kept them: kept ones must stay intact, and nothing may keep user values alive."""
    import weakref

    class Box:
        pass

    def make(box):
        def f(x):
            if x == "raise":
                raise ValueError(box)
            return box, sys._getframe()

        def donor(x):
            if x == "raise":
                raise ValueError(box)
            return box, sys._getframe()

        return f, donor

    box = Box()
    f, donor = make(box)
    kept_views = []
    # the list comprehension below is a frame of its own on 3.11 (inlined since 3.12)
    listcomp_code = next((c for c in sys._getframe().f_code.co_consts
                          if isinstance(c, types.CodeType) and c.co_name == "<listcomp>"), None)

    def cb(frame):
        if len(kept_views) < 3 and frame.f_code in (f.__code__, listcomp_code):
            kept_views.append(frame)
        return flatten_code(donor.__code__) if frame.f_code is f.__code__ else None

    with hook(cb):
        results = [f(i) for i in range(5)]  # frame objects kept: functions not recycled
        tbs = []
        for _ in range(3):
            try:
                f("raise")
            except ValueError as e:
                tbs.append(e.__traceback__)
        f(0)
    assert all(r[0] is box for r in results)
    assert [r[1].f_locals["x"] for r in results] == list(range(5))
    assert all(tb.tb_next.tb_frame.f_code.co_name == "donor" for tb in tbs)
    first = ["<listcomp>"] if listcomp_code is not None else ["f"]
    assert [v.f_code.co_name for v in kept_views] == first + ["f", "f"]
    assert [v.f_args for v in kept_views if v.f_code is f.__code__][:2] == [(0,), (1,)]
    for obj in gc.get_objects():  # parked (emptied) views must not be reachable
        if type(obj) is fh.FrameView:
            repr(obj), obj.f_locals, obj.f_args  # noqa: B018
    ref = weakref.ref(box)
    del box, results, tbs, kept_views, f, donor, cb
    gc.collect()
    assert ref() is None

    # the recycled function keeps the last replacement code until clear_thread_caches()
    def make_g(box):
        def g(x):
            return box

        def donor2(x):
            return box

        return g, donor2.__code__

    g, donor2_code = make_g(Box())
    replacement = flatten_code(donor2_code)
    code_ref = weakref.ref(replacement)
    with hook(lambda frame: replacement if frame.f_code is g.__code__ else None):
        assert g(1) is not None
    del donor2_code
    del replacement
    gc.collect()
    assert code_ref() is not None
    fh.clear_thread_caches()
    assert code_ref() is None


# ---------------------------------------------------------------------------------------
# Build and import on unsupported set-ups


def test_import_without_the_hook_built_says_how_to_build():
    import subprocess

    probe = ("import sys; sys.modules['tracer.runtime._eval_frame'] = None\n"  # as if it was never built
             "try:\n    import tracer\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert "not built" in out.stdout and "build_ext --inplace" in out.stdout, out.stdout + out.stderr
    assert "3.11 to 3.15" in out.stdout


@pytest.mark.parametrize("version", [(3, 10, 13), (3, 16, 0)])
def test_setup_refuses_unsupported_python(version):
    import os
    import subprocess

    # (the source tree: under .ci/wheel-smoke the tests run from a copy outside it)
    root = os.environ.get("FRAMETRACER_SOURCE") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    probe = ("import sys, setuptools\n"  # (imported first: it reads the real version)
             f"sys.version_info = {version + ('final', 0)!r}; sys.argv = ['setup.py', '--version']\n"
             "exec(compile(open('setup.py').read(), 'setup.py', 'exec'), "
             "{'__file__': 'setup.py', '__name__': '__main__'})\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=root, timeout=300)
    assert out.returncode != 0
    assert "supports CPython 3.11 to 3.15" in out.stderr + out.stdout


def _called_in_a_loop(x):
    return x + 1


def test_a_hot_call_reaches_the_hook_every_time():
    """A Python-to-Python call specialised by CPython still reaches the hook on every call: on
    3.15 the hook keeps the specialiser on (_PyInterpreterState_SetEvalFrameAllowSpecialization),
    and the specialised call must still go through the frame evaluator."""
    import dis

    def loop(n):
        s = 0
        for _ in range(n):
            s = _called_in_a_loop(s)
        return s

    seen = []

    def cb(view):
        if view.f_code is _called_in_a_loop.__code__:
            seen.append(1)
        return None

    set_eval_frame(cb)
    try:
        assert loop(5000) == 5000
    finally:
        set_eval_frame(None)
    assert len(seen) == 5000
    if sys.version_info >= (3, 15):
        ops = {i.opname for i in dis.get_instructions(loop, adaptive=True)}
        assert "CALL_PY_EXACT_ARGS" in ops, sorted(ops)
