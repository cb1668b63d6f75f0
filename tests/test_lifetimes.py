"""The user's values die when eager's die: compiled code and the trace that made it hold them
no longer than the original frame would, without waiting for the cyclic collector.

Each test runs with the cyclic collector off (a value kept alive only by a reference cycle
then stays alive) and checks with weak references that what eager lets go of, the compiled
call lets go of too, on the call that traces and on a warm call. Why it matters: tensors
outliving the call hold memory (a model's activations on the first call), `__del__` and
weakref callbacks run late, and autograd, which names a saved tensor's node by what is still
alive, words its errors differently (fuzz seed 920003).
"""
import contextlib
import gc
import io
import weakref

import pytest
import torch

import tracer
from tracer.runtime import gc_pause
from helpers import traced


@pytest.fixture(autouse=True, scope="module")
def _older_objects_set_aside():
    """Everything alive before these tests is reachable (just collected) and set aside
    (`gc.freeze`): a collection then walks only the objects these tests make, which is where
    their cycles would be (a cycle through an older object would need that object to become
    garbage meanwhile). Without it each collection walks the whole session's heap, about a
    second each, several per test."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@contextlib.contextmanager
def no_cyclic_gc():
    # the first trace of a process imports parts of torch lazily, and a failed import can
    # leave the importing frames (ours among them) in a cycle: that one-time cost is not
    # what these tests are about
    tracer.compile(lambda a: a.sin() + 1)(torch.randn(2))
    gc.collect()
    try:
        with gc_pause.paused():
            yield
    finally:
        gc.collect()


def _run(fn, make_args):
    """Call fn on fresh args and drop the result (or the exception), its args and its
    frames. Returns (inputs still alive, real tensors left in reference cycles, outcome):
    the outcome is the result's value, detached, or the exception's type and message."""
    args = make_args()
    refs = [weakref.ref(a) for a in args]
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        try:
            out = fn(*args)
            outcome = out.detach().clone()
        except Exception as e:  # dropped at the end of this block, with its traceback
            outcome = (type(e), str(e))
        out = None  # noqa: F841
        del args
        alive = [i for i, r in enumerate(refs) if r() is not None]
        gc.collect()  # (DEBUG_SAVEALL: what only cycles held goes to gc.garbage, not away)
    finally:
        gc.set_debug(0)
    cycles = sum(isinstance(o, torch.Tensor) and not isinstance(o, torch._subclasses.FakeTensor)
                 for o in gc.garbage)
    gc.garbage.clear()
    return alive, cycles, outcome


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.allclose(a, b)
    return a == b


SINK = io.StringIO()


def breaks_in_a_loop(x, y):
    acc = x * 2
    for _ in range(2):
        print("step", file=SINK)  # graph break: the rest runs in a resume function
        acc = acc + y
    return acc.sum()


def breaks_inside_a_handler_then_raises(x, y):
    z = x + y
    try:
        raise KeyError("k")
    except KeyError:
        print("handling", file=SINK)  # break inside the handler: the resume function is
        raise ValueError("from the handler")  # passed the exception it handles


def breaks_in_a_finally_an_exception_passes(x, y):
    z = x + y
    try:
        if z.shape[0] == 3:
            raise ValueError("passes through the finally")
    finally:
        print("finally", file=SINK)  # break: the resume function is passed the exception
    return z


def raises_in_the_graph(x, y):
    z = x * y
    try:
        return z[5]  # an IndexError at run time: the graph's error reaches the handler
    except IndexError:
        return (z + 1).sum()


def writes_history_under_a_try(x, y):
    t = torch.maximum(x, y).select(-1, 0).unsqueeze(-1)
    print("break", file=SINK)  # t is an input of the graph after the break
    try:
        t.relu_()  # an in-place write with autograd history that the graph could not undo:
        u = torch.cos(t)  # the frame breaks at the write (convert_frame._history_write_at)
    except IndexError:
        u = t
    return u.sum()


CASES = [breaks_in_a_loop, breaks_inside_a_handler_then_raises, breaks_in_a_finally_an_exception_passes, raises_in_the_graph, writes_history_under_a_try]


def _make_args():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(3, 4, generator=g, requires_grad=True), torch.randn(3, 4, generator=g, requires_grad=True)]


def _under_capture(fn):
    def call(*args):
        with tracer.capture():  # (entered in this frame: only fn's frames are hooked)
            return fn(*args)
    return call


@pytest.mark.parametrize("road", ["compile", "capture"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.loop_resumes
def test_values_die_with_the_call(fn, road, fresh_tracer):
    """Through `tracer.compile` and through the frame hook (`tracer.capture()`), which reach
    the same convert_frame by two roads."""
    with no_cyclic_gc():
        alive, cycles, expected = _run(fn, _make_args)
        assert alive == [] and cycles == 0, "eager keeps a tensor alive: this test would check nothing"
        c = tracer.compile(fn) if road == "compile" else _under_capture(fn)
        with traced() as t:
            first = _run(c, _make_args)
        assert t.frames_traced and t.internal_errors == 0 and t.fallbacks == 0, str(t)
        with traced() as t:
            warm = _run(c, _make_args)
        assert t.frames_traced == 0, str(t)
    for name, (alive, cycles, got) in (("the call that traced", first), ("a warm call", warm)):
        assert _same(got, expected), f"{name}: {got} vs eager {expected}"
        assert alive == [], f"{name} kept inputs {alive} alive (eager: none)"
        assert cycles == 0, f"{name} left {cycles} tensors held only by reference cycles (eager: none)"


def test_an_escaping_exception_holds_no_resume_frame_in_a_cycle(fresh_tracer):
    """The exception a handler handles is passed to the resume function as an argument; kept
    in a local, it would hold the resume frame through its own traceback (a cycle, and the
    frame's tensors with it). The resume prefix clears the argument after pushing it."""
    c = tracer.compile(breaks_inside_a_handler_then_raises)
    with no_cyclic_gc():
        for _ in range(2):
            x = torch.randn(3)
            ref = weakref.ref(x)
            with pytest.raises(ValueError) as info:
                c(x, torch.randn(3))
            assert isinstance(info.value.__context__, KeyError)
            del x
            assert ref() is not None  # (the traceback still holds the frame, as in eager)
            info = None
            assert ref() is None


def test_a_module_passed_as_an_argument_dies_with_its_last_user_reference(fresh_tracer):
    """The guards hold it weakly (IdMatch), so the entry expires with it. Its forward is
    inlined (config.inline_stock_modules): the graph holds the parameters it reads, not the
    module. (As a leaf, call_module, the graph holds a state-free template and reads the
    parameters as inputs: test_module_instances.test_deleting_a_compiled_model_with_leaves_frees_it.)"""
    def f(m, x):
        return m(x) + 1

    c = tracer.compile(f)
    m = torch.nn.Linear(4, 4)
    ref = weakref.ref(m)
    x = torch.randn(2, 4)
    with traced() as t:
        out = c(m, x)
    assert t.frames_traced == 1 and t.fallbacks == 0 and torch.allclose(out, f(m, x))
    del m
    gc.collect()
    assert ref() is None
