"""`torch.autograd.graph.disable_saved_tensors_hooks` in traced code (torch_vars: the
saved-tensors-hooks switch): captured whole, the switch seen inside the frame as eager sees it,
left as eager leaves it, at a graph break too, and the error eager raises inside
`saved_tensors_hooks` raised the same way. Every result is compared with eager's."""
import pytest
import torch

import tracer

A = torch._C._autograd
message = A._saved_tensors_hooks_get_disabled_error_message


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    yield
    assert message() is None  # no test leaves the switch off
    tracer.reset()


def block(x):
    with torch.autograd.graph.disable_saved_tensors_hooks("no hooks in this block"):
        y = x.sin() * 2
        inside = message()
    return y + 1, inside, message()


def nested(x):
    with torch.autograd.graph.disable_saved_tensors_hooks("outer"):
        with torch.autograd.graph.disable_saved_tensors_hooks("inner"):
            a = x * 2 if message() == "inner" else x
        b = a + 1 if message() == "outer" else a
    return b, A._saved_tensors_hooks_is_enabled()


def test_captured_whole_with_eager_values_and_gradients():
    x = torch.randn(5, requires_grad=True)
    c = tracer.compile(block, backend="aot_eager", fullgraph=True)
    for _ in range(2):
        got, want = c(x), block(x)
        assert got[1:] == want[1:] == ("no hooks in this block", None)
        torch.testing.assert_close(got[0], want[0])
        torch.autograd.grad(got[0].sum(), x)  # backward runs (no hooks pushed, none needed)
    s = tracer.stats()
    assert s.frames_traced == 1 and s.graph_breaks == 0 and s.internal_errors == 0 and s.recompiles == 0


def test_nested_blocks_and_queries():
    x = torch.randn(3)
    c = tracer.compile(nested, backend="eager", fullgraph=True)
    got, want = c(x), nested(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] is want[1] is True


def test_called_with_the_switch_already_off_traces_again():
    x = torch.randn(3)
    c = tracer.compile(nested, backend="eager")
    c(x)
    with torch.autograd.graph.disable_saved_tensors_hooks("caller"):
        got, want = c(x), nested(x)
        assert message() == "caller"
    torch.testing.assert_close(got[0], want[0])
    assert got[1] is want[1] is False  # the caller's block is still on when the frame returns
    assert tracer.stats().frames_traced == 2  # the guard on the switch at entry failed once


def test_a_graph_break_inside_the_block():
    seen = []

    def f(x):
        with torch.autograd.graph.disable_saved_tensors_hooks("off"):
            y = x * 3
            seen.append(message())  # a list append is traced; print is the break
            print("in block")
            z = y + message().count("f")
        return z, message()

    x = torch.randn(4)
    want = f(x)
    c = tracer.compile(f, backend="eager")
    for _ in range(2):
        seen.clear()
        got = c(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] is None and seen == ["off"]
    assert tracer.stats().graph_breaks >= 1 and tracer.stats().internal_errors == 0


def test_inside_saved_tensors_hooks_raises_as_eager_does():
    x = torch.randn(3, requires_grad=True)
    c = tracer.compile(block, backend="eager")
    c(x)  # an entry made with no hooks pushed
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match="no hooks in this block"):
            block(x)
        assert message() is None
        with pytest.raises(RuntimeError, match="no hooks in this block"):
            c(x)
    assert message() is None
    assert tracer.stats().internal_errors == 0
