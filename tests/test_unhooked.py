"""Given-up frames run with the evaluator uninstalled (tracer/runtime/_eval_frame.c,
UNHOOKED_FLAG; tracer/trace/coverage.py): under `capture()` call-heavy pure Python runs with
CPython inlining its calls again, and never at the cost of a call the trace did not see."""
import threading

import pytest
import torch

import tracer
from tracer.runtime import _eval_frame
from tracer.runtime.frame_hook import is_given_up, is_unhooked, skip_code
from tracer.trace.coverage import _CALLS, _builtin_call
from bytecode_utils import decode

from helpers import traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")

def leaf(a):
    return a + 1


def mid(a, b):
    return leaf(a) * 2 - leaf(b)


def loop(n):
    s = 0
    rows = []
    for i in range(n):
        s = (s + mid(i, s % 7)) % 1_000_003
        if i % 500 == 0:
            rows.append(i)
    return s, len(rows)


def _frames_seen_by(fn, *args):
    before = _eval_frame._frames_seen()
    out = fn(*args)
    return out, _eval_frame._frames_seen() - before


def _each(fn, calls):
    out = []
    for args in calls:
        out.append(fn(*args))
    return out


# (the test's own drivers: never traced, so that each call of fn reaches the hook on its own)
skip_code(_frames_seen_by.__code__)
skip_code(_each.__code__)


def test_call_heavy_python_runs_unhooked_and_right():
    expected = loop(3000)
    with tracer.capture():
        first = loop(3000)   # traced (the trace gives up: no tensor work), runs as Python
        second, hooked = _frames_seen_by(loop, 3000)  # given up: watched, reaches no traced frame
        third, unhooked = _frames_seen_by(loop, 3000)  # unhooked
        assert _eval_frame._hook_installed()  # back after the unhooked frame returned
    assert first == second == third == expected
    assert is_given_up(loop.__code__) and is_unhooked(loop.__code__), str(tracer.stats())
    assert is_unhooked(mid.__code__)
    # watched: loop and its 3000 mid frames reached the evaluator (mid, unhooked already,
    # ran its leaf calls inlined); unhooked: only loop's own frame
    assert hooked >= 3000 and unhooked <= 2, (hooked, unhooked)
    s = tracer.stats()
    assert "loop" in s.unhooked and "mid" in s.unhooked and "leaf" not in s.unhooked, s.unhooked
    assert "loop: " in str(s) and "(runs unhooked)" in str(s)


MODEL = torch.nn.Linear(4, 2)
INPUT = torch.randn(3, 4)


def _maybe_eval(epoch):
    if epoch % 4 == 0:
        return MODEL(INPUT).sum().item()  # (a module or tensor argument would count as tensor work)
    return epoch * 2


def test_a_call_the_trace_did_not_see_keeps_the_frame_hooked():
    """The other arm of an `if` calls a model: the frame is given up on (its trace took the
    arm without tensor work) but never unhooked, so the model is still captured."""
    calls = [(e,) for e in range(1, 10)]
    with tracer.capture():
        got = _each(_maybe_eval, calls)
    assert got == _each(_maybe_eval, calls)
    assert is_given_up(_maybe_eval.__code__) and not is_unhooked(_maybe_eval.__code__)
    s = tracer.stats()
    assert s.graphs >= 1 and s.ops >= 1, str(s)  # the model, captured at epochs 4 and 8


def _double(v):
    return v * 2


def _tensor_sum(v):
    return (torch.ones(2) * v).sum().item()


_TABLE = [_double, _tensor_sum]


def _dispatch(i, v):
    return _TABLE[i](v)


def test_a_watched_run_that_reaches_a_traced_frame_ends_unhooked_runs():
    """A callee that changes between calls (a global table of functions): the periodic
    watched run sees the frame with tensor work and the code is hooked again for good."""
    with tracer.capture():
        assert _each(_dispatch, [(0, 3)] * 3) == [6] * 3
        assert is_unhooked(_dispatch.__code__)
        got, seen = _frames_seen_by(_each, _dispatch, [(1, 3)] * 30)
        assert is_unhooked(_dispatch.__code__)
        got += _each(_dispatch, [(1, 3)] * 40)  # the 64th run is watched
        assert not is_unhooked(_dispatch.__code__)
        with traced() as t:
            assert _each(_dispatch, [(1, 3)] * 2) == [6.0] * 2
    assert got == [6.0] * 70
    assert seen <= 31  # the 30 _dispatch frames, not the _tensor_sum frames under them
    assert t.cache_hits + t.frames_traced >= 2, str(t)  # _tensor_sum reaches the hook again


def _run_timed(fn, *args):
    return fn(*args)


def _train_step(model, x):
    return model(x)


def test_a_callback_handed_in_keeps_the_frame_hooked():
    """A utility that calls what it is handed (`run_timed(fn)`), traced only with a callback
    without tensor work, is given up on but not unhooked: the training step handed in later
    is captured on every call (it ran uncaptured until a watched run, 58 calls in 100)."""
    ran = []

    def counting(gm, _inputs):
        def run(*a):
            ran.append(1)
            return gm(*a)
        return run
    model, x = torch.nn.Linear(4, 4), torch.randn(2, 4)
    with tracer.capture(backend=counting):
        assert _each(_run_timed, [(_double, 1)] * 20) == [2] * 20
        assert is_given_up(_run_timed.__code__) and not is_unhooked(_run_timed.__code__)
        got = _each(_run_timed, [(_train_step, model, x)] * 100)
    for out in got:
        torch.testing.assert_close(out, model(x))
    assert len(ran) == 100


def test_another_threads_callback_keeps_the_evaluator_installed():
    started, done = threading.Event(), threading.Event()

    def other():
        with tracer.capture():
            started.set()
            done.wait(10)

    expected = loop(200)
    th = threading.Thread(target=other)
    th.start()
    started.wait(10)
    try:
        with tracer.capture():
            for _ in range(3):
                loop(200)
            out, seen = _frames_seen_by(loop, 200)
            assert out == expected
    finally:
        done.set()
        th.join()
    assert seen >= 600  # the other thread's callback needs the evaluator: it stays


def _raises(n):
    s = 0
    for i in range(n):
        s += leaf(i)
    raise KeyError(s)


def test_an_exception_out_of_an_unhooked_frame():
    with tracer.capture():
        for _ in range(4):
            with pytest.raises(KeyError) as info:
                _raises(50)
            assert info.value.args == (sum(range(1, 51)),)
        assert _eval_frame._hook_installed()


def _calls_of(fn):
    instrs = decode(fn.__code__)
    return instrs, [i for i in instrs if i.opname in _CALLS]


def _after_loop(rows):
    return len(rows), str(rows)


def _method_after(rows):
    return rows.copy()


def _python_callable(model, x):
    return model(x)


def _args_computed(a, b):
    return len(a + b)


def my_len(x):
    return 0


def _shadowed(rows):
    return my_len(rows)


def _keyword(xs, k):
    return max(xs, key=k)


def _maps(fn, xs):
    return tuple(map(fn, xs))


def test_builtin_calls_are_recognised_and_nothing_else():
    g = globals()
    b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
    for fn, want in ((_after_loop, [True, True]), (_method_after, [False]), (_python_callable, [False]),
                     (_args_computed, [True]), (_shadowed, [False]), (_keyword, [False])):
        instrs, calls = _calls_of(fn)
        assert [_builtin_call(instrs, c, g, b) for c in calls] == want, fn.__name__
    instrs, calls = _calls_of(_maps)  # (map calls what it is given: never "runs no Python")
    assert not _builtin_call(instrs, [c for c in calls if c.arg == 2][0], g, b)
