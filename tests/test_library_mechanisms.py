"""Library code real models run on every call (issue 9), each mechanism on a small program:
compiled == eager, what was captured (graphs, breaks), and warm calls compile nothing."""
import collections
import copy
import functools
import inspect
import os
import typing
import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import tracer
from helpers import traced
from semantics_helpers import check, run as differential


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def run(fn, *args, graphs=1, breaks=0, equal=torch.equal):
    """Compile fn, call it twice; compare with eager; assert the first call's graph/break
    counts and that the second traced nothing. Returns the compiled function."""
    c = tracer.compile(fn)
    before = tracer.stats()
    out = c(*args)
    s = tracer.stats()
    assert equal(out, fn(*args))
    got = (s.graphs - before.graphs, s.graph_breaks - before.graph_breaks)
    assert got == (graphs, breaks), f"{got}\n{s}"
    assert equal(c(*args), fn(*args))
    assert tracer.stats().frames_traced == s.frames_traced
    return c


# ---- exceptions raised and caught inside library code ----------------------------------------

def test_raise_from_caught_by_the_caller():
    """os.environ.get: Mapping.get catches the KeyError that _Environ.__getitem__ raises
    `from None` (LLaMA-family attention asks an environment variable on every call)."""
    def f(x):
        flag = os.environ.get("TRACER_TEST_SURELY_UNSET", "0")
        return x + 1 if flag == "1" else x - 1

    run(f, torch.zeros(2))


def test_an_environment_read_is_guarded_by_its_variable_only(monkeypatch):
    """Reading one environment variable guards that variable (present with its value, or
    absent), not the whole environment: another variable set afterwards (inductor sets
    TORCHINDUCTOR_CACHE_DIR in its first compile, which failed the new entry's own guards)
    traces nothing; setting the variable read retraces, with its value."""
    monkeypatch.delenv("TRACER_TEST_FLAG", raising=False)

    def f(x):
        flag = os.environ.get("TRACER_TEST_FLAG", "0")
        return x + 1 if flag == "1" else x - 1

    c = tracer.compile(f)
    x = torch.zeros(2)
    with traced() as t:
        assert torch.equal(c(x), f(x))
        monkeypatch.setenv("TRACER_TEST_OTHER_VARIABLE", "1")
        assert torch.equal(c(x), f(x))
    assert t.frames_traced == 1 and t.internal_errors == 0 and t.graphs == 1, str(t)
    monkeypatch.setenv("TRACER_TEST_FLAG", "1")
    with traced() as t2:
        assert torch.equal(c(x), x + 1)
        assert torch.equal(c(x), x + 1)
    assert t2.frames_traced == 1 and t2.recompiles == 1, str(t2)


# ---- inspect.signature ------------------------------------------------------------------------

class _Chunker(torch.nn.Module):
    def chunk(self, a, b=2):
        return a * b

    def forward(self, x):
        params = inspect.signature(self.chunk).parameters
        required = [k for k, p in params.items() if p.default is inspect.Parameter.empty]
        return self.chunk(x) * len(params) + len(required) + ("b" in params)


def test_inspect_signature_is_folded():
    run(_Chunker(), torch.ones(3))


def _with_default(d):
    def g(a=d):
        return a
    return g


def test_inspect_signature_is_of_that_very_function():
    """A closure made by a call is guarded by its code only; the folded signature was reused
    for another closure of the same code with another default (eager 3, compiled 2)."""
    def f(x, g):
        return x + inspect.signature(g).parameters["a"].default

    c = tracer.compile(f)
    for d in (1, 2):
        g = _with_default(d)
        assert torch.equal(c(torch.ones(1), g), f(torch.ones(1), g))
    assert tracer.stats().recompiles == 1 and tracer.stats().graph_breaks == 0


# ---- copy.deepcopy / copy.copy ---------------------------------------------------------------

class _Cfg:
    def __init__(self):
        self.hidden = 4
        self.names = ["a", "b"]
        self.sub = {"k": 1.5}


_CFG = _Cfg()


def test_deepcopy_of_an_input_object_is_independent():
    def f(x):
        c = copy.deepcopy(_CFG)
        c.hidden = 7
        c.names.append("c")
        c.sub["k"] = 2.0
        return x * c.hidden + len(c.names) + c.sub["k"] + _CFG.hidden + len(_CFG.names)

    c = run(f, torch.ones(2))
    assert _CFG.names == ["a", "b"] and _CFG.sub == {"k": 1.5}  # the original is untouched
    _CFG.hidden = 5  # the copy read it: guarded
    try:
        assert torch.equal(c(torch.ones(2)), f(torch.ones(2)))
    finally:
        _CFG.hidden = 4


def test_shallow_copy_shares_items():
    def f(x):
        c = copy.copy(_CFG)
        return x * (c.names is _CFG.names) + c.hidden

    run(f, torch.ones(2))


# ---- typing introspection and registries keyed by types ---------------------------------------

_VALIDATORS = {typing.Union: "union", list: "list", int: "int"}


def test_typing_queries_and_a_dict_keyed_by_types():
    def f(x, tp=typing.Optional[int]):
        kind = _VALIDATORS.get(typing.get_origin(tp))
        n = len(typing.get_args(tp))
        return x * n if kind == "union" else x

    run(f, torch.ones(2))


# ---- objects made inside the frame: modules, OrderedDict, del attr ----------------------------

class _Act(torch.nn.Module):
    def __init__(self, slope=0.1):
        super().__init__()
        self.slope = slope

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, self.slope)


def test_modules_constructed_inside_forward():
    def f(x):
        return torch.nn.ReLU()(x) + _Act(0.2)(x) + torch.nn.GELU(approximate="tanh")(x)

    run(f, torch.randn(4))


class _Obj:
    pass


def test_del_attribute_of_a_new_object():
    def f(x):
        o = _Obj()
        o.a, o.b, o.c = 1, 2, 3
        del o.b
        delattr(o, "a")
        return x + hasattr(o, "a") + hasattr(o, "b") + 2 * hasattr(o, "c")

    run(f, torch.zeros(2))


# ---- torch.autograd.Function ------------------------------------------------------------------

class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * g * x * ctx.k, None  # not the true gradient: eager's backward must be the one used


def test_autograd_function_apply_is_one_node_with_eagers_backward():
    def f(x):
        return _Square.apply(x.sin(), 2.0).cos()

    x = torch.randn(4, requires_grad=True)
    ref = f(x)
    ref.sum().backward()
    expected, x.grad = x.grad, None
    c = run(f, x, equal=torch.allclose)
    out = c(x)
    out.sum().backward()
    assert torch.allclose(x.grad, expected)
    graph = c.entries[0].graph
    assert [n for n in graph.graph.nodes if "Square" in str(n.target)]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_autograd_function_output_returned_as_it_is_keeps_its_backward(backend):
    """The graph's output is F.apply's result itself: its fake was a leaf requiring grad,
    which the compiling backend's caller took for a tensor the graph made as a leaf, and
    detached (grad_fn None, no gradients, no error)."""
    def f(x, k):
        return _Square.apply(x, k)

    x = torch.randn(4, requires_grad=True)
    ref = f(x, 2.0)
    ref.sum().backward()
    expected, x.grad = x.grad, None
    c = tracer.compile(f, backend=backend)
    out = c(x, 2.0)
    assert out.grad_fn is not None and not out.is_leaf
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    torch.testing.assert_close(x.grad, expected)
    assert tracer.stats().graphs >= 1


# ---- lru_cache ----------------------------------------------------------------------------------

_CALLS = []


@functools.lru_cache
def _available(name):
    _CALLS.append(name)
    return name == "yes"


def test_an_lru_cache_call_is_a_break_whose_body_runs_as_in_eager():
    """Whether the body runs depends on the cache at that moment: called natively (a break),
    never while tracing nor folded (found by differential testing: the body ran before the
    frame's own earlier writes, and was skipped after cache_clear())."""
    def f(x):
        return x + 1 if _available("yes") else x - 1

    _available.cache_clear()
    _CALLS.clear()
    run(f, torch.zeros(2), graphs=1, breaks=1)  # (no op before the break)
    assert _CALLS == ["yes"]  # the body ran once, as in eager (both eager calls hit)
    _available.cache_clear()
    c = tracer.compile(f)
    c(torch.zeros(2))
    assert _CALLS == ["yes", "yes"]  # a miss again: the body runs again, as in eager


_SETTINGS = {"k": 1}


@functools.lru_cache(maxsize=None)
def _scaled(n):
    return _SETTINGS["k"] * n


def test_an_lru_cache_call_sees_the_frames_earlier_writes():
    def f(x):
        _SETTINGS["k"] = 5
        return x * _scaled(2)

    _scaled.cache_clear()
    _SETTINGS["k"] = 1
    expected = f(torch.ones(1))
    _scaled.cache_clear()
    _SETTINGS["k"] = 1
    got = tracer.compile(f)(torch.ones(1))
    assert torch.equal(got, expected) and torch.equal(got, torch.full((1,), 10.0))
    assert _scaled(2) == 10  # the cache holds what eager would have put there


# ---- module hooks ---------------------------------------------------------------------------------

def test_forward_hooks_run_inline_and_are_guarded():
    lin = torch.nn.Linear(3, 3)
    lin.register_forward_pre_hook(lambda m, a: (a[0] * 2,))
    lin.register_forward_hook(lambda m, a, kw, out: out + 1, with_kwargs=True)

    def f(x):
        return lin(x)

    x = torch.ones(2, 3)
    c = run(f, x, equal=torch.allclose)
    handle = lin.register_forward_hook(lambda m, a, out: out * 0)  # a new hook recompiles
    assert torch.equal(c(x), f(x)) and torch.equal(c(x), torch.zeros(2, 3))
    handle.remove()
    assert torch.allclose(c(x), f(x))


# ---- activation checkpointing ---------------------------------------------------------------------

def test_checkpoint_non_reentrant_is_a_subgraph_with_eagers_gradients():
    lin = torch.nn.Linear(4, 4)

    def block(x, scale=1.0):
        return torch.nn.functional.dropout(lin(x).relu(), 0.3) * scale

    def f(x):
        return checkpoint(functools.partial(block, scale=2.0), x.sin(), use_reentrant=False).sum()

    x = torch.randn(3, 4, requires_grad=True)
    torch.manual_seed(0)
    ref = f(x)
    ref.backward()
    gx, gw = x.grad, lin.weight.grad
    x.grad = lin.weight.grad = None
    c = tracer.compile(f)
    before = tracer.stats()
    for _ in range(2):
        torch.manual_seed(0)  # dropout inside: checkpoint replays the RNG state
        out = c(x)
        out.backward()
        assert torch.allclose(out, ref) and torch.allclose(x.grad, gx) and torch.allclose(lin.weight.grad, gw)
        x.grad = lin.weight.grad = None
    s = tracer.stats()
    assert (s.frames_traced - before.frames_traced, s.graphs - before.graphs,
            s.graph_breaks - before.graph_breaks) == (1, 1, 0)
    assert any(n.target is checkpoint for n in c.entries[0].graph.graph.nodes)


def _checkpoint_gradients(f, make_x, backend, lin):
    """f eager, then compiled twice: (outputs, x grads, weight grads) of each, and the stats."""
    runs = []
    c = tracer.compile(f, backend=backend)
    with traced() as t:
        for fn in (f, c, c):
            x = make_x()
            lin.zero_grad()
            out = fn(x)
            if out.requires_grad:
                out.backward()
            runs.append((out.detach(), x.grad, lin.weight.grad))
    for got in runs[1:]:
        torch.testing.assert_close(got, runs[0])
    return t


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_reentrant_checkpoint_with_an_input_requiring_grad_is_traced(backend):
    """Reentrant mode gives non-reentrant mode's gradients when a tensor argument requires
    grad: traced as that (torch.compile too). Before, every reentrant call broke the graph."""
    lin = torch.nn.Linear(4, 4)

    def block(x):
        return lin(x).relu() * 2

    def f(x):
        return checkpoint(block, x.sin(), use_reentrant=True).sum()

    t = _checkpoint_gradients(f, lambda: torch.randn(3, 4, generator=torch.Generator().manual_seed(0),
                                                      requires_grad=True), backend, lin)
    assert (t.frames_traced, t.graphs, t.graph_breaks, t.fallbacks) == (1, 1, 0, 0), t


def test_reentrant_checkpoint_with_no_input_requiring_grad_runs_natively():
    """Reentrant mode's result then requires no grad and the weights get none (torch warns):
    non-reentrant mode would give them gradients, so the call breaks and runs natively."""
    lin = torch.nn.Linear(4, 4)

    def block(x):
        return lin(x).relu() * 2

    def f(x):
        return checkpoint(block, x.sin(), use_reentrant=True).sum()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch: "None of the inputs have requires_grad=True")
        t = _checkpoint_gradients(f, lambda: torch.ones(3, 4), "eager", lin)
    assert t.of("frame") and not [e for e in t.of("frame") if e.frame.endswith("block")], t
    assert any("no tensor argument requiring grad" in e.reason for e in t.of("break")), t


def test_checkpoint_passes_other_keywords_to_the_function():
    """`checkpoint(fn, x, b=t, use_reentrant=False)` calls fn(x, b=t). Before, a keyword that
    is not checkpoint's own broke the graph; now it is lifted into the subgraph like x."""
    lin = torch.nn.Linear(4, 4)

    def f(x, b):
        return checkpoint(lambda t, bias, scale=1.0: lin(t) * scale + bias, x, bias=b, scale=3.0,
                          use_reentrant=False).sum()

    def make_x():
        return torch.randn(3, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)

    b = torch.ones(4)
    t = _checkpoint_gradients(lambda x: f(x, b), make_x, "eager", lin)
    assert (t.graphs, t.graph_breaks, t.fallbacks) == (1, 0, 0), t


def test_module_made_per_call_crossing_a_break_does_not_recompile():
    """A parameter-free module built on every call and live across a graph break (the
    resume function receives it) is guarded by type and attributes, not identity."""
    def f(x):
        act = torch.nn.LeakyReLU(0.3)
        print(end="")
        return act(x) * 2

    x = torch.randn(4)
    c = tracer.compile(f)
    assert torch.equal(c(x), f(x))
    s = tracer.stats()
    for _ in range(3):
        assert torch.equal(c(x), f(x))
    assert tracer.stats().frames_traced == s.frames_traced


def test_module_construction_after_torch_compile_patched_init():
    """Once torch.compile has run, nn.Module.__init__ is TorchDynamo's patched_init (it tags
    new modules); constructing a module in a traced frame still traces."""
    from torch._dynamo.mutation_guard import install_generation_tagging_init
    install_generation_tagging_init()

    def f(x):
        return torch.nn.ReLU()(x) + 1

    run(f, torch.randn(3))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_checkpointed_batch_norm_in_training_runs_natively(backend):
    """Eager's recomputation in backward updates a checkpointed BatchNorm's running statistics
    a second time. Traced into the subgraph, backward raised an in-place version error under
    the eager backend, and under aot_eager the statistics were updated once (the eval output
    after training differed). A checkpointed function that writes a tensor it did not make in
    place is now a break: checkpoint runs natively, buffers equal eager's."""
    torch.manual_seed(0)
    bn_e, bn_c = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)

    def f(bn, x):
        return checkpoint(bn, x, use_reentrant=False)

    c = tracer.compile(f, backend=backend)
    with traced() as t:
        for i in range(2):
            x = torch.randn(4, 3, generator=torch.Generator().manual_seed(i), requires_grad=True)
            f(bn_e, x).sum().backward()
            c(bn_c, x).sum().backward()
    for a, b in ((bn_e.running_mean, bn_c.running_mean), (bn_e.running_var, bn_c.running_var),
                 (bn_e.num_batches_tracked, bn_c.num_batches_tracked)):
        torch.testing.assert_close(a, b)
    assert any("writes a tensor it did not make" in e.reason for e in t.of("break")), t
    assert t.fallbacks == 0 and t.internal_errors == 0, t


# ---- collections.Counter ----------------------------------------------------------------------

def test_a_counter_made_in_the_frame_is_traced():
    """`collections.Counter(["a", "b", "a"])` in the frame: a break at `_count_elements`, the C
    helper Counter.update calls, where torch.compile captures one graph; and `c[k]` of a missing
    key (Counter's __missing__: 0) was a KeyError break. Now _count_elements is its loop on the
    tracer's dict, dict's [] gives a missing key to the class's __missing__, and most_common(),
    items(), `c[k]` after it are traced: one graph, eager's values on later calls and when the
    input list changes."""
    def f(x, xs):
        c = collections.Counter(["a", "b", "a"])
        d = collections.Counter(xs)
        d.update("abca")
        d["q"] += 1
        return x * c["a"] + d[1] + d["zz"], d.most_common(), sorted(d.items(), key=str), list(d), d

    c, _ = check(f, torch.ones(2), [1, 2, 1, 3], graphs=1, dynamo=True)
    with traced() as t:
        differential(c, f, torch.ones(2), [3, 3, 1])
    assert t.graph_breaks == 0 and t.fallbacks == 0 and t.internal_errors == 0, str(t)


def test_a_counter_passed_in_reads_a_missing_key_through_missing():
    """A Counter (a dict subclass with __missing__) passed in: `c[k]` of a missing key was a
    break ("missing key of a Counter with __missing__"); now its __missing__ is inlined."""
    def f(x, c):
        return x * c["zz"] + c[1], c.most_common()

    check(f, torch.ones(2), collections.Counter([1, 1, 2]), graphs=1)
