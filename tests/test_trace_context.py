"""The state of a trace is declared data (tracer/trace/context.py): every field of TraceContext
says what `release()` and a trial `checkpoint()` do to it, and these tests hold the
declaration to the context's real fields and to what release, checkpoint/restore and the
scratch trace of an autograd.Function do."""
import builtins
import dataclasses
import gc
import io
import types
import warnings
import weakref

import pytest
import torch

import tracer
from helpers import assert_captured, traced
from semantics_helpers import check
from tracer.graph.output_graph import OutputGraph
from tracer.graph.side_effects import SideEffects
from tracer.trace import context
from tracer.trace.context import FIELDS, TraceContext

pytestmark = pytest.mark.usefixtures("fresh_tracer")

DECLARED = {f.name for f in FIELDS}


def _new_context():
    return TraceContext(_new_context.__code__, globals(), vars(builtins))


def _contexts_of(fn, *args):
    """Call tracer.compile(fn)(*args); the TraceContexts its traces made (released), each with
    the names of the fields it had when the trace was done."""
    seen = []
    release = TraceContext.release

    def spy(ctx):
        seen.append((ctx, set(vars(ctx))))
        release(ctx)
    TraceContext.release = spy
    try:
        tracer.compile(fn)(*args)
    finally:
        TraceContext.release = release
    return seen


SINK = io.StringIO()


class Box:
    def __init__(self, k):
        self.k = k


def _counting(n):
    for i in range(n):
        yield i


def busy(box, x):
    """Reads an object, runs a generator and a closure, stores an attribute and breaks the graph."""
    acc = x * box.k
    for i in _counting(2):
        acc = acc + i
    scale = 2.0

    def inner(t):
        return t * scale
    box.seen = True
    print("break", file=SINK)
    try:
        raise KeyError("k")
    except KeyError:
        acc = inner(acc)
    return acc.sin()


# ---- the declaration ---------------------------------------------------------------------------
def test_every_field_of_the_context_is_declared():
    """A field set on the context (in __init__ or anywhere during a trace) without a line in
    the declaration fails here: say what release() and checkpoint() do with it."""
    assert set(vars(_new_context())) == DECLARED
    seen = _contexts_of(busy, Box(2.0), torch.randn(3))
    assert len(seen) >= 2  # (the frame and its resume function)
    for _, names in seen:
        assert names == DECLARED, f"not declared: {names - DECLARED}; declared, never set: {DECLARED - names}"


@pytest.mark.parametrize("f", FIELDS, ids=lambda f: f.name)
def test_each_declared_kind_fits_the_field(f):
    ctx = _new_context()
    value = getattr(ctx, f.name)
    release, trial = f.metadata["release"], f.metadata["trial"]
    assert release in context.RELEASE_KINDS and trial in context.TRIAL_KINDS, (release, trial)
    if release == context.CLEAR:
        assert hasattr(value, "clear")
    if release == context.RESET:
        assert f.default_factory is not dataclasses.MISSING and f.default_factory() == value
    if release == context.OWN:
        assert callable(getattr(value, "release", None))
    if trial == context.TRUNCATE:
        assert isinstance(value, list)
    if trial == context.COPY:
        assert isinstance(value, (list, dict))
    if trial == context.MARK:
        assert callable(getattr(value, "mark", None))
    if trial == context.OWN:
        assert callable(getattr(value, "checkpoint", None))


def test_side_effects_declare_every_log():
    fx = SideEffects()
    assert set(vars(fx)) == set(SideEffects.RESTORED) | set(SideEffects.MARKED) | set(SideEffects.COUNTED)
    assert not set(SideEffects.RESTORED) & set(SideEffects.MARKED)
    assert not (set(SideEffects.RESTORED) | set(SideEffects.MARKED)) & set(SideEffects.COUNTED)


def test_a_scratch_graph_shares_exactly_the_declared_fields():
    main = _new_context().output
    scratch = main.scratch()
    assert set(vars(scratch)) == set(vars(main))
    for name, value in vars(main).items():
        if name in OutputGraph.SHARED_WITH_SCRATCH:
            assert getattr(scratch, name) is value, name
        elif value is not None:
            assert getattr(scratch, name) is not value, name


# ---- checkpoint / restore ----------------------------------------------------------------------
def _contents(v):
    if isinstance(v, dict):
        return [(id(k), id(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [id(x) for x in v]
    if isinstance(v, set):
        return sorted(map(id, v))
    return None


def _snapshot(ctx):
    """Each field: the object and the objects it holds; the pending stores two levels down."""
    out = {f.name: (id(getattr(ctx, f.name)), _contents(getattr(ctx, f.name))) for f in FIELDS}
    fx = ctx.side_effects
    out["attr_stores"] = {k: (id(o), dict(d)) for k, (o, d) in fx.attr_stores.items()}
    out["raw_attr_stores"] = set(fx.raw_attr_stores)
    out["global_stores"] = {k: (id(g), dict(d)) for k, (g, d) in fx.global_stores.items()}
    return out


def _sourced(value):
    return types.SimpleNamespace(source="a source", value=value)


def _some_state(ctx):
    obj, g = object(), {}
    for f in FIELDS:
        v = getattr(ctx, f.name)
        if f.metadata["trial"] in (context.TRUNCATE, context.COPY):
            if isinstance(v, list):
                v.append(object())
            else:
                v[object()] = object()
    ctx.side_effects.store_attr(_sourced(obj), "a", "before")
    ctx.side_effects.store_global(g, "G", "before")
    return obj, g


def test_checkpoint_restore_round_trips():
    """A trial that touched every field restore() takes back: after restore() the context is
    as it was, the same objects holding the same items."""
    ctx = _new_context()
    obj, g = _some_state(ctx)
    before = _snapshot(ctx)
    cp = ctx.checkpoint()
    for f in FIELDS:  # what an inline on trial could do to each field
        v, how = getattr(ctx, f.name), f.metadata["trial"]
        if how == context.TRUNCATE:
            v.append(object())
        elif how == context.COPY:
            if isinstance(v, list):
                v[0] = object()
                v.append(object())
            else:
                v[next(iter(v))] = object()
                v[object()] = object()
        elif how == context.VALUE:
            setattr(ctx, f.name, object())
    fx = ctx.side_effects
    fx.store_attr(_sourced(obj), "a", "after")  # an object with a pending store
    fx.store_attr(_sourced(object()), "b", "new", raw=True)  # one without
    fx.store_global(g, "G", "after")
    fx.store_global({}, "H", "new")
    assert _snapshot(ctx) != before
    assert cp.restorable()
    cp.restore()
    assert _snapshot(ctx) == before


@pytest.mark.parametrize("change", ["graph node", "graph input", "graph attribute", "mutated container",
                                    "cell store", "deferred call"])
def test_a_trial_that_changed_what_cannot_be_taken_back_is_not_restorable(change):
    ctx = _new_context()
    cp = ctx.checkpoint()
    out, fx = ctx.output, ctx.side_effects
    if change == "graph node":
        out.graph.placeholder("x")
    elif change == "graph input":
        out.inputs.append(None)
    elif change == "graph attribute":
        out.attr_name(torch.nn.Linear(1, 1), "m")
    elif change == "mutated container":
        fx.mutated(_sourced([]))
    elif change == "cell store":
        fx.store_cell(object())
    else:
        fx.defer_call(print, [], {})
    assert not cp.restorable()


def _torch_helper(fn):
    """fn as if it were defined in torch: called with constants, it is inlined on trial
    (variables/speculate.py)."""
    g = dict(fn.__globals__, __name__="torch._trial_helpers")
    out = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__module__ = "torch._trial_helpers"
    return out


@_torch_helper
def _refused_inside_a_handler(n):
    try:
        raise KeyError(n)
    except KeyError:
        warnings.warn("refused", UserWarning)  # the trace refuses it: the trial is taken back
    return n + 1


def test_a_trial_refused_inside_its_handler_leaves_no_exception_handled():
    """The trial stopped inside its `except` block: the handled exception it had set must be
    taken back with the rest (exc_stack is restored), or a later `raise` in the frame gets it
    as __context__ (the compiled call returned 2 here, eager 1)."""
    def f(x):
        k = _refused_inside_a_handler(3)
        try:
            raise ValueError("v")
        except ValueError as e:
            c = e.__context__
        return x * k + (1 if c is None else 2)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(f, torch.randn(3), graphs=1)


# ---- release -----------------------------------------------------------------------------------
@pytest.fixture
def no_cyclic_gc():
    tracer.compile(lambda a: a.sin() + 1)(torch.randn(2))  # (torch's lazy imports, once)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()
    gc.collect()


def test_release_empties_what_it_declares():
    seen = _contexts_of(busy, Box(2.0), torch.randn(3))
    for ctx, _ in seen:
        assert ctx.frames == [] and ctx.wrap_memo == {} and ctx.cell_boxes == {}
        for f in FIELDS:
            how, value = f.metadata["release"], getattr(ctx, f.name)
            if how == context.CLEAR or how == context.RESET:
                assert len(value) == 0, f.name
            elif how == context.DROP:
                assert value is None, f.name
        assert ctx.output.inputs == [] and ctx.output._fake_memo == {}


@pytest.mark.parametrize("released", [True, False])
def test_release_lets_go_of_the_users_objects(released, no_cyclic_gc):
    """An object the trace read (held by its Variables, frames and wrap memo, which refer to
    each other in cycles) dies when the program drops it, without the cyclic collector; the
    trace's context too. Not released (the control), both wait for a collection."""
    box = Box(2.0)
    ref = weakref.ref(box)
    x = torch.randn(3)
    contexts, release = [], TraceContext.release

    def spy(ctx):
        contexts.append(weakref.ref(ctx))
        if released:
            release(ctx)
    TraceContext.release = spy
    try:
        with traced() as t:
            got = tracer.compile(busy)(box, x)
    finally:
        TraceContext.release = release
    assert_captured(t, breaks=1)
    torch.testing.assert_close(got, busy(Box(2.0), x))
    del box
    assert contexts
    if released:
        assert ref() is None and all(c() is None for c in contexts)
    else:
        assert ref() is not None and any(c() is not None for c in contexts)
        gc.collect()
        assert ref() is None


# ---- the scratch trace -------------------------------------------------------------------------
def test_scratch_trace_puts_the_trace_back():
    ctx = _new_context()
    ctx.wrap_memo[1] = "wrapped"
    ctx.input_tensor_sources.append("in")
    ctx.mutable_inputs.append("mut")
    output, fx, memo = ctx.output, ctx.side_effects, ctx.wrap_memo
    with pytest.raises(KeyError):
        with ctx.scratch_trace() as scratch:
            assert ctx.output is scratch and scratch is not output and scratch.fake_mode is output.fake_mode
            assert ctx.side_effects is not fx and ctx.side_effects.is_empty()
            assert ctx.wrap_memo == memo and ctx.wrap_memo is not memo
            ctx.wrap_memo[2] = "scratch"
            ctx.input_tensor_sources.append("scratch in")
            ctx.mutable_inputs.append("scratch mut")
            ctx.guards.append("read by the scratch trace")
            raise KeyError("leaves through the with")
    assert ctx.output is output and ctx.side_effects is fx and ctx.wrap_memo is memo
    assert memo == {1: "wrapped"} and ctx.input_tensor_sources == ["in"] and ctx.mutable_inputs == ["mut"]
    assert ctx.guards == ["read by the scratch trace"]  # (what it read stays guarded)
    given = OutputGraph(shapes=output.shapes)
    with ctx.scratch_trace(given) as scratch:
        assert scratch is given and ctx.output is given
    assert ctx.output is output


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


def test_an_autograd_function_traced_in_a_scratch_trace():
    def f(x):
        return _Scale.apply(x, 3.0).sin()

    x = torch.randn(4, requires_grad=True)
    c, _ = check(f, x, graphs=1)
    y = c(x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.cos(x * 3.0).detach() * 3.0)
