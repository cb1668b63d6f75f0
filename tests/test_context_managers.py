"""`with` over context managers other than torch's grad modes (issue 10): classes with
__enter__/__exit__, @contextlib.contextmanager, exception-suppressing and nested managers,
nullcontext and ExitStack, managers passed in, and graph breaks inside the block (captured
before and after the break, which torch.compile does not do)."""
import contextlib

import torch

import tracer
from helpers import assert_warm, traced
from semantics_helpers import check, run


class Recorder:
    def __init__(self, log, tag="cm"):
        self.log, self.tag = log, tag

    def __enter__(self):
        self.log.append(("enter", self.tag))
        return self

    def __exit__(self, typ, value, tb):
        self.log.append(("exit", self.tag, typ.__name__ if typ else None))
        return False


class Suppress:
    def __init__(self, *kinds):
        self.kinds = kinds

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        self.seen = value.args if value is not None else None
        return typ is not None and issubclass(typ, self.kinds)


@contextlib.contextmanager
def scoped(log, value):
    log.append("setup")
    try:
        yield value
    finally:
        log.append("teardown")


@contextlib.contextmanager
def swallow(log):
    try:
        yield
    except KeyError as e:
        log.append(("swallowed", e.args))


def test_class_based_manager():
    def f(x):
        log = []
        with Recorder(log) as r:
            x = x + 1
            log.append(r.tag)
        return x, log

    check(f, torch.ones(2), graphs=1, dynamo=True)


def test_contextmanager_decorator():
    def f(x):
        log = []
        with scoped(log, 3) as v:
            x = x * v
        with swallow(log):
            x = x + 1
            raise KeyError("k")
        return x, log

    check(f, torch.ones(2), graphs=1, dynamo=True)


def test_exception_suppressing_and_nested_managers():
    def f(x):
        log = []
        s = Suppress(KeyError)
        with s:
            with Recorder(log, "inner"):
                x = x + 1
                raise KeyError("k")
        with Recorder(log, "a"), Recorder(log, "b"):
            x = x * 2
        try:
            with Suppress(KeyError), Recorder(log, "c"):
                raise ValueError("v")
        except ValueError as e:
            log.append(("escaped", e.args))
        return x, log, s.seen

    check(f, torch.ones(2), graphs=1, dynamo=True)


def test_manager_passed_in_and_its_state_replayed():
    def f(x, cm):
        with cm:
            return x + 1

    log = []
    c, _ = check(f, torch.ones(2), Recorder(log))
    cm = Recorder([])
    c(torch.ones(2), cm)
    assert cm.log == [("enter", "cm"), ("exit", "cm", None)]


def test_nullcontext():
    def f(x):
        with contextlib.nullcontext(x + 1) as y:
            z = y * 2
        with contextlib.nullcontext():
            z = z + 1
        return z

    check(f, torch.ones(2), graphs=1, dynamo=True)


def test_graph_break_inside_a_user_manager_keeps_capture_around_it():
    def f(x):
        log = []
        with Recorder(log):
            x = x + 1
            print("inside the block")  # a graph break
            x = x * 2
        return x - 1, log

    c, d = check(f, torch.ones(2), graphs=2, breaks=1)
    assert d.ops == 3  # before and after the break, both captured


def test_exception_after_a_break_inside_a_manager_reaches_exit():
    def f(x):
        log = []
        try:
            with Recorder(log):
                x = x + 1
                print("inside")
                raise KeyError("k")
        except KeyError:
            log.append("handled")
        return x, log

    c = tracer.compile(f)
    _, d = run(c, f, torch.ones(2))
    assert d.fallbacks == 0 and d.graphs >= 1


def test_grad_mode_object_as_a_decorator():
    @torch.no_grad()
    def scaled(x):
        return x * 2

    def f(x):
        return scaled(x) + 1, torch.is_grad_enabled()

    check(f, torch.ones(2, requires_grad=True), graphs=1, dynamo=True)


class OnlyEnter:
    def __enter__(self):
        return self


def test_object_without_the_protocol_raises_type_error():
    def f(x):
        try:
            with OnlyEnter():
                pass
        except (TypeError, AttributeError) as e:
            return x + 1, type(e).__name__
        return x, ""

    check(f, torch.ones(2))


def test_graph_break_inside_a_contextmanager_block():
    """The @contextmanager generator is rebuilt suspended at its yield, inside its try."""
    def f(x):
        log = []
        with scoped(log, 2) as v:
            x = x * v
            print("inside the block")
            x = x + 1
        return x, log

    c = tracer.compile(f)
    _, d = run(c, f, torch.ones(2))
    assert d.fallbacks == 0 and d.graphs >= 2, d.fallback_reasons


# ---- an __enter__ that cannot be traced: the `with` itself is the break ----------------------

class LoudEnter(Recorder):
    def __enter__(self):
        print("entering", self.tag)  # I/O: not traceable, so `with` runs BEFORE_WITH natively
        return super().__enter__()


def test_untraceable_enter_breaks_at_the_with(capsys):
    """Capture before and inside the block (the frame used to run whole as Python)."""
    def f(x, log):
        y = x.sin() + 1
        with LoudEnter(log) as cm:
            z = y * 2
        return z.cos() - 1, cm.tag

    # one break in f at the `with`, one in __enter__ (its own frame, traced when called natively)
    _, d = check(f, torch.randn(3), [], graphs=2, breaks=2)
    assert d.break_reasons == ["print() is I/O, not traceable"] * 2
    assert d.ops >= 4


def test_untraceable_enter_exceptions_reach_exit():
    """The body raises inside a block entered natively: __exit__ sees it (and may suppress it)."""
    def f(x, log, kind):
        y = x + 1
        with LoudEnter(log):
            y = y * 2
            if kind == "raise":
                raise KeyError("k")
        return y

    for kind in ("no", "raise"):
        c = tracer.compile(f)
        run(c, f, torch.randn(3), [], kind)

    class LoudSuppress(Suppress):
        def __enter__(self):
            print("entering")
            return self

    def g(x):
        with LoudSuppress(KeyError):
            x = x + 1
            raise KeyError("swallowed")
        return x * 3
    _, d = check(g, torch.randn(3), graphs=1, breaks=2)  # the raise and __exit__ are traced


def test_generator_cm_returned_by_a_torch_function():
    """`with torch.backends.cudnn.flags(enabled=False):` (HF's CTC loss): the manager is made at
    a break; its generator-based __enter__ runs natively, the block is captured."""
    def f(x):
        y = x.relu() + 1
        with torch.backends.cudnn.flags(enabled=False):
            z = torch.nn.functional.log_softmax(y, dim=-1)
        return z * 2

    # breaks: the call making the manager (as in torch.compile), the `with` (its __enter__
    # deletes attributes of an object made outside the trace) and its __exit__ (next() on
    # the generator). All 4 ops are captured, in 3 graphs; torch.compile breaks at the call
    # and runs the rest of the frame eagerly (1 graph, 2 ops).
    _, d = check(f, torch.randn(2, 5), graphs=3, breaks=3)
    assert d.ops == 4


def test_break_in_a_contextmanager_setup_keeps_the_frame():
    """A print in a @contextmanager generator before its yield: the `with` breaks (its
    __enter__ runs natively) and the code around and inside the block stays captured (the
    whole calling frame used to run as Python); its finally runs at the block's end."""
    @contextlib.contextmanager
    def noisy(log):
        print("setup")
        log.append("setup")
        try:
            yield 5
        finally:
            log.append("teardown")

    def f(x, log):
        y = x + 1
        with noisy(log) as v:
            y = y * v
        return y.cos()

    _, d = check(f, torch.randn(3), [], graphs=3, breaks=2)
    assert d.ops == 3


def test_torch_managers_that_change_c_state_break_at_the_with_and_the_block_is_captured():
    """A profiler range: its __enter__ changes C-level state, so the `with` is a break and runs
    natively; the block and the code after it are captured, and warm calls compile nothing
    (the manager and its bound __exit__ are new objects on every call: guarded by type, not
    identity). (torch.inference_mode() was one too: it is modelled now, tests below.)"""
    def g(x):
        y = x.sin()
        with torch.autograd.profiler.record_function("block"):
            y = y * 3
        return y.cos()

    args = (torch.randn(4),)
    ref = g(*args)  # first: record_function's first __enter__ imports modules
    c = tracer.compile(g)
    with traced() as t:
        out = c(*args)
    assert torch.allclose(out, ref)
    assert t.fallbacks == 0 and t.ops >= 3 and t.graphs == 3, t  # before, in, after the block
    assert_warm(c, *args)
