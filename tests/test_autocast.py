"""Mode blocks inside compiled code (tracer/variables/mode_blocks.py): `with torch.autocast(...)`
(issue 9: models run under autocast, and models that switch it off around a computation, as
HF rotary embeddings do) and `with torch.inference_mode()`.

The block is part of the graph as under torch.compile: `torch.amp._enter_autocast` and
`_exit_autocast` nodes, `_enter_inference_mode` and `_exit_inference_mode` nodes, with fake
tensors traced under the same mode. A graph break inside the block leaves it at the graph's
end and enters it again in the rewritten code. Every test compares with eager (values and
dtypes; inference-ness), checks capture and warm calls, and that the caller's state is what
eager leaves."""
import sys

import pytest
import torch

import tracer
from helpers import assert_captured, assert_warm, traced
from semantics_helpers import check, run


def _nodes(c):
    return [n.target for e in c.entries if e.graph is not None for n in e.graph.graph.nodes
            if n.op == "call_function"]


def test_autocast_block_is_in_the_graph():
    def f(x, w):
        y = x @ w
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = x @ w
            with torch.autocast("cpu", enabled=False):  # as rotary embeddings do
                q = z.float() @ w
        return y, z, q

    c, d = check(f, torch.randn(4, 4), torch.randn(4, 4), graphs=1, dynamo=True)
    targets = _nodes(c)
    assert targets.count(torch.amp.autocast_mode._enter_autocast) == 2
    assert targets.count(torch.amp.autocast_mode._exit_autocast) == 2
    out = c(torch.randn(4, 4), torch.randn(4, 4))
    assert [t.dtype for t in out] == [torch.float32, torch.bfloat16, torch.float32]
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_as_returned_object_and_deprecated_spelling():
    def f(x):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16) as ac:
            y = x @ x
        with torch.cpu.amp.autocast():
            z = x @ x
        return y, z, type(ac).__name__

    with pytest.warns(FutureWarning):  # eager's own deprecation warning, not the tracer's
        check(f, torch.randn(3, 3), graphs=1)


def test_default_dtype_of_autocast_is_guarded():
    def f(x):
        with torch.autocast("cpu"):
            return x @ x

    c = tracer.compile(f)
    x = torch.randn(3, 3)
    assert c(x).dtype == f(x).dtype == torch.bfloat16
    prev = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", torch.float16)
    try:
        assert c(x).dtype == f(x).dtype == torch.float16  # recompiled, not the old dtype
    finally:
        torch.set_autocast_dtype("cpu", prev)


def test_graph_break_inside_an_autocast_block():
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            print("inside autocast")  # a graph break
            z = y @ y
        return y, z, z.float() + 1

    c, d = check(f, torch.randn(4, 4), graphs=3, breaks=2)
    assert not torch.is_autocast_enabled("cpu")
    out = c(torch.randn(4, 4))
    assert [t.dtype for t in out] == [torch.bfloat16, torch.bfloat16, torch.float32]
    # the resume function sees the same re-entry object every call: no recompiles
    before = tracer.stats()
    for _ in range(3):
        run(c, f, torch.randn(4, 4))
    after = tracer.stats()
    assert after.recompiles == before.recompiles and after.frames_traced == before.frames_traced
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_outside_the_compiled_function():
    def f(x, w):
        return torch.relu(x @ w) + 1

    c = tracer.compile(f)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = c(x, w), f(x, w)
    assert got.dtype == want.dtype == torch.bfloat16 and torch.equal(got, want)
    assert c(x, w).dtype == torch.float32  # another entry: the global-state guard saw autocast
    assert len(c.entries) == 2


def test_setting_autocast_state_in_traced_code_is_a_break_with_no_effect_while_tracing():
    def f(x):
        y = x @ x
        torch.set_autocast_enabled("cpu", True)
        try:
            z = x @ x
        finally:
            torch.set_autocast_enabled("cpu", False)
        return y, z

    c = tracer.compile(f)
    x = torch.randn(3, 3)
    got, want = c(x), f(x)
    assert [t.dtype for t in got] == [t.dtype for t in want]
    assert not torch.is_autocast_enabled("cpu")
    reasons = " ".join(e.reason for e in tracer.stats().of("break"))
    assert "set_autocast_enabled" in reasons


@pytest.mark.one_version  # inductor's kernels; the autocast tracing is tested above
def test_inductor_compiles_a_graph_with_an_autocast_block():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.relu(x @ w)
        return y.float().sum(-1)

    x, w = torch.randn(8, 8), torch.randn(8, 8)
    c = tracer.compile(f, backend="inductor")
    got, want = c(x, w), f(x, w)
    assert got.dtype == want.dtype and torch.allclose(got, want, atol=1e-2, rtol=1e-2)
    assert tracer.stats().graphs >= 1 and tracer.stats().fallbacks == 0


# ---- managers made outside the frame (a hunt on 3b2ba16) ---------------------------------------

@torch.autocast("cpu", dtype=torch.bfloat16)
def _bf16_matmul(x):
    return x @ x


AC = torch.autocast("cpu", dtype=torch.bfloat16)


def _decorated_helper(x):
    return _bf16_matmul(x).float() + 1, x @ x


def _global_manager(x):
    with AC:
        y = x @ x
    return y, x @ x


@pytest.mark.parametrize("fn", [_decorated_helper, _global_manager])
def test_an_autocast_object_made_outside_the_frame_is_a_block_of_the_graph(fn):
    """A `@torch.autocast(...)` helper called from the frame was a graph break ('setting
    attribute prev_cache_enabled on TorchFunction(<autocast object>)'); a module-level
    `AC = torch.autocast(...)` used as `with AC:` two ('torch.__exit__() changes global state
    outside the graph'). torch.compile captures both whole; so does the trace now."""
    c, d = check(fn, torch.randn(4, 4), graphs=1, dynamo=True)
    assert torch.amp.autocast_mode._enter_autocast in _nodes(c)
    assert [t.dtype for t in c(torch.randn(4, 4))] == [t.dtype for t in fn(torch.randn(4, 4))]
    assert not torch.is_autocast_enabled("cpu")


def test_the_state_of_an_autocast_object_made_outside_is_guarded():
    """The object's state is read at trace time: changing it is another trace, not the old
    dtype (nor a write to it: its `prev*` attributes are eager's alone)."""
    c = tracer.compile(_global_manager)
    x = torch.randn(4, 4)
    assert c(x)[0].dtype == torch.bfloat16
    saved = AC.__dict__.copy()
    AC._enabled = False
    try:
        with traced() as t:
            got, want = c(x), _global_manager(x)
        assert got[0].dtype == want[0].dtype == torch.float32 and torch.equal(got[0], want[0])
        assert t.recompiles == 1
    finally:
        AC.__dict__.update(saved)
    assert c(x)[0].dtype == torch.bfloat16


def _manager_live_at_a_break(x):
    ac = AC
    print(end="")
    with ac:
        y = x @ x
        print(end="")
        z = y @ y
    return y, z


def test_an_autocast_object_made_outside_live_at_a_graph_break():
    """Held across a break it is the same object again (reloaded from where it was read);
    a break inside its block leaves the block and enters it again, as for one made inside."""
    c, d = check(_manager_live_at_a_break, torch.randn(4, 4), graphs=2, breaks=3)
    assert not torch.is_autocast_enabled("cpu")


# ---- torch.inference_mode() (a hunt on 3b2ba16) ------------------------------------------------

def _inference_block(x):
    a = x.sin()
    with torch.inference_mode():
        y = x * 2
        y = y.cos()
    return a + y


def _inference_nodes(c):
    return [t.__name__ for t in _nodes(c) if "inference_mode" in getattr(t, "__name__", "")]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_inference_mode_block_is_part_of_the_graph(backend):
    """`with torch.inference_mode():` was three graph breaks (constructing the object, its
    `mode`, the object passed to a torch op); torch.compile captures it in one graph. It is one
    graph with `_enter_inference_mode`/`_exit_inference_mode` nodes under either backend."""
    x = torch.randn(3, 3, requires_grad=True)
    want = _inference_block(x)
    c = tracer.compile(_inference_block, backend=backend)
    with traced() as t:
        got = c(x)
    assert torch.allclose(got, want) and got.requires_grad and not got.is_inference()
    assert_captured(t, graphs=1, breaks=0)
    assert _inference_nodes(c) == ["_enter_inference_mode", "_exit_inference_mode"]
    got.sum().backward()
    assert torch.allclose(x.grad, x.detach().cos())
    assert_warm(c, x)
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def _inference_tensors(x):
    with torch.inference_mode():
        y = x * 2
        inside = (y.is_inference(), torch.is_inference_mode_enabled(), torch.is_grad_enabled())
        with torch.inference_mode(False):
            z = x * 3
            nested = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
        v = x[0]
    return y, z, v, y + z, inside, nested


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_tensors_made_in_an_inference_mode_block_are_inference_tensors(backend):
    """Fakes are made in the real mode, so what the code asks inside (`is_inference()`, the
    modes) is eager's answer, and `inference_mode(False)` inside makes normal tensors again.
    The eager backend runs the block as it is: one graph. A compiling backend would run it in
    the frame's mode and give `y` back as a normal tensor: the frame breaks at the block, whose
    body runs in a resume function traced in inference mode."""
    x = torch.randn(3, requires_grad=True)
    want = _inference_tensors(x)
    c = tracer.compile(_inference_tensors, backend=backend)
    with traced() as t:
        got = c(x)
    assert want[4] == got[4] == (True, True, False) and want[5] == got[5] == (False, True)
    for g, w in zip(got[:4], want[:4]):
        assert torch.allclose(g, w) and (g.is_inference(), g.requires_grad) == (w.is_inference(), w.requires_grad)
    assert [w.is_inference() for w in want[:4]] == [True, False, False, False]
    if backend == "eager":
        assert_captured(t, graphs=1, breaks=0)
    elif sys.version_info >= (3, 14):
        # (3.14 loads the manager's __exit__ before calling __enter__: the break at the block's
        # entry cannot be placed, and the frame runs as Python: right, not captured)
        assert t.internal_errors == 0 and t.fallbacks == 1
        assert "at the entry of a torch.inference_mode() block" in tracer.stats().of("fallback")[-1].reason
    else:
        assert t.fallbacks == 0 and t.internal_errors == 0 and t.graph_breaks >= 1
        assert "a tensor made in an inference_mode block leaves the graph" in c.entries[0].breaks[0].reason
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def _written_outside(x):
    with torch.inference_mode():
        y = x * 2
    y.add_(1)  # eager: "Inplace update to inference tensor outside InferenceMode"
    return y


def _saved_for_backward(x):
    with torch.inference_mode():
        y = x * 2
    return x * y  # eager: "Inference tensors cannot be saved for backward"


@pytest.mark.parametrize("fn", [_written_outside, _saved_for_backward])
def test_what_eager_refuses_of_an_inference_tensor_raises_as_in_eager(fn):
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError) as want:
        fn(x)
    c = tracer.compile(fn)
    with traced() as t:
        with pytest.raises(RuntimeError) as got:
            c(x)
    assert str(got.value) == str(want.value)
    assert t.fallbacks == 0 and t.internal_errors == 0
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


@torch.inference_mode()
def _inference_helper(x):
    return x * 2


def _decorated_inference(x):
    made_here = torch.inference_mode()(lambda t: t + 1)
    return _inference_helper(x) + 1, made_here(x), torch.inference_mode(lambda t: t - 1)(x)


def test_inference_mode_decorators_are_traced():
    """A `@torch.inference_mode()` helper called from the frame was a graph break (the
    decorator's `clone()` of the manager it keeps); decorators made in the frame, and
    `torch.inference_mode(fn)`, run the function inside a block too."""
    x = torch.randn(3, requires_grad=True)
    want = _decorated_inference(x)
    c = tracer.compile(_decorated_inference)
    with traced() as t:
        got = c(x)
    for g, w in zip(got, want):
        assert torch.equal(g, w) and (g.is_inference(), g.requires_grad) == (w.is_inference(), w.requires_grad)
    assert_captured(t, graphs=1, breaks=0)
    assert len(_inference_nodes(c)) == 6


def _break_inside_inference(x):
    with torch.no_grad():
        with torch.inference_mode():
            y = x * 2
            with torch.enable_grad():
                print(end="")  # a graph break: grad mode on, inference mode on
                z = x * 3
        w = x * 4
    return y, z, w, x * 5, torch.is_grad_enabled()


def test_graph_break_inside_an_inference_mode_block():
    """The graph leaves the block at its end and the rewritten code enters it again, in the
    grad mode it was entered in (no_grad's), then sets the one the code had reached inside
    (enable_grad's): after the block, no_grad's mode is back, as in eager."""
    x = torch.randn(3, requires_grad=True)
    want = _break_inside_inference(x)
    c = tracer.compile(_break_inside_inference)
    for _ in range(3):
        with traced() as t:
            got = c(x)
        for g, w in zip(got[:4], want[:4]):
            assert torch.equal(g, w) and (g.is_inference(), g.requires_grad) == (w.is_inference(), w.requires_grad)
        assert got[4] is want[4] is True
        assert t.fallbacks == 0 and t.internal_errors == 0 and t.recompiles == 0
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def _raises_in_nested_blocks(x, i):
    with torch.inference_mode():
        y = x * 2
        with torch.inference_mode(False):
            z = x[i]  # fake tensors cannot tell i out of range: the graph raises at run time
    return y, z


def _raises_and_does_not_rerun(x, i):
    with torch.autocast("cpu", enabled=False):  # (a graph with autocast nodes raises as it is)
        w = x + 1
    with torch.inference_mode():
        with torch.inference_mode(False):
            z = x[i]
    return w, z


@pytest.mark.parametrize("fn", [_raises_in_nested_blocks, _raises_and_does_not_rerun])
def test_a_graph_that_raises_inside_inference_mode_blocks_leaves_them(fn):
    """The blocks' guards (torch._C._InferenceMode) stayed in the raising graph's frame: freed
    with it, outer first, they left the thread in inference mode with grad off for good; kept
    by the exception, the caller's `except` block ran in inference mode. The eager backend's
    graph keeps them apart and leaves them when it raises, innermost first."""
    x = torch.randn(3, 3)
    c = tracer.compile(fn)
    assert all(torch.equal(g, w) for g, w in zip(c(x, torch.tensor(1)), fn(x, torch.tensor(1))))
    for run_it in (fn, c):
        try:
            run_it(x, torch.tensor(7))
            raise AssertionError("no IndexError")
        except IndexError as e:
            assert "index 7 is out of bounds" in str(e)
            assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    assert tracer.stats().internal_errors == 0
