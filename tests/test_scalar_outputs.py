"""`t.item()` and ops whose output size depends on the data (`x[mask]`, `nonzero`, `unique`) as
graph ops (config.capture_scalar_outputs; always on under fullgraph=True, as
torch.compile turns it on there): the value is an unbacked symbol, so the graph goes on with
it and a later call with other data gives other values without tracing again."""
import pytest
import torch

import tracer
from helpers import assert_captured, traced
from semantics_helpers import same


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    saved = tracer.config.capture_scalar_outputs
    yield
    tracer.config.capture_scalar_outputs = saved
    tracer.reset()


def item_scale(x):
    return x * x.max().item(), x.sum().item()


def count_positive(x):
    n = (x > 0).sum().item()
    return torch.arange(n).float() * 2, torch.zeros(n, 2) + 1, n


def int_and_float_of_tensors(x):
    return x * int(x.sum()), x / float(x.abs().mean()), int(x.max() * 10)


def index_by_item(x):
    i = x.argmax().item()
    n = (x > 0).sum().item()
    return x[i], x[:n], torch.tensor(x.sum().item()) + x, torch.full((3,), x.min().item())


def arithmetic_on_items(x):
    a, b = x.sum().item(), x.mean().item()
    return x * (a + b) / 2, a * 2 - b, torch.ones(2) * (a - a)


CASES = [item_scale, count_positive, int_and_float_of_tensors, index_by_item, arithmetic_on_items]
INPUTS = [torch.tensor([1.0, -2.0, 3.0, 4.0, -5.0]), torch.tensor([0.5, 0.25, -1.0, 2.0, 3.5]),
          torch.tensor([-1.0, -2.0, 3.0, -4.0, 0.5])]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_captured_whole_and_equal_to_eager_on_other_data(fn, backend):
    c = tracer.compile(fn, fullgraph=True, backend=backend)
    with traced() as t:
        out = c(INPUTS[0])
    assert_captured(t, graphs=1)
    assert same(out, fn(INPUTS[0])), (out, fn(INPUTS[0]))
    # other data: other values from the same graph, nothing traced
    for x in INPUTS[1:]:
        with traced() as warm:
            out = c(x)
        assert warm.frames_traced == 0, warm
        assert same(out, fn(x)), (out, fn(x))


def test_the_graph_holds_the_item_not_its_value():
    c = tracer.compile(item_scale, fullgraph=True)
    c(INPUTS[0])
    code = c.entries[0].graph.code
    assert ".item()" in code and "4.0" not in code, code


def test_a_branch_on_an_item_is_refused_under_fullgraph():
    def f(x):
        if x.sum().item() > 0:
            return x + 1
        return x - 1

    with pytest.raises(tracer.FullGraphError, match="data-dependent|symbolic size"):
        tracer.compile(f, fullgraph=True)(INPUTS[0])
    # without fullgraph: a graph break, right on both branches
    c = tracer.compile(f)
    for x in INPUTS:
        assert same(c(x), f(x))


def test_without_fullgraph_item_is_a_break_unless_asked():
    def f(x):
        v = x.sum().item()
        return x * v

    with traced() as t:
        c = tracer.compile(f)
        assert same(c(INPUTS[0]), f(INPUTS[0]))
    assert t.graph_breaks == 1, t
    tracer.reset()
    tracer.config.capture_scalar_outputs = True
    c = tracer.compile(f)
    with traced() as t:
        assert same(c(INPUTS[0]), f(INPUTS[0]))
    assert_captured(t, graphs=1)


def test_an_item_live_across_a_graph_break():
    tracer.config.capture_scalar_outputs = True

    def f(x):
        v = x.max().item()
        y = x * v
        print("", end="")
        return y + v, torch.tensor(v)

    c = tracer.compile(f)
    for x in INPUTS:
        assert same(c(x), f(x))


def test_an_item_of_a_tensor_with_many_elements_raises_as_in_eager():
    def f(x):
        return x * x.item()

    with pytest.raises(RuntimeError, match="elements cannot be converted|a Tensor with"):
        f(INPUTS[0])
    c = tracer.compile(f)
    tracer.config.capture_scalar_outputs = True
    with pytest.raises(RuntimeError, match="elements cannot be converted|a Tensor with"):
        c(INPUTS[0])
    assert same(c(torch.tensor([3.0])), f(torch.tensor([3.0])))


def mask_rows(x):
    y = x[x > 0]
    return y * 2, y.shape[0] + 1


def nonzero_and_unique(x):
    return torch.nonzero(x > 0).float().sum(0), torch.unique((x * 2).round()), torch.masked_select(x, x < 0).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [mask_rows, nonzero_and_unique], ids=lambda f: f.__name__)
def test_sizes_from_the_data_are_captured_under_fullgraph(fn, backend):
    c = tracer.compile(fn, fullgraph=True, backend=backend)
    with traced() as t:
        for x in INPUTS:  # three counts of positive values from one graph
            assert same(c(x), fn(x)), (c(x), fn(x))
    assert_captured(t, graphs=1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_through_a_mask_and_an_item(backend):
    def f(x, w):
        y = (x * w)[x > 0]
        return (y * y.shape[0]).sum() * x.abs().max().item()

    c = tracer.compile(f, fullgraph=True, backend=backend)
    for x in INPUTS:
        w1 = torch.linspace(-1, 1, 5, requires_grad=True)
        w2 = torch.linspace(-1, 1, 5, requires_grad=True)
        a, b = c(x, w1), f(x, w2)
        a.backward()
        b.backward()
        assert same(a, b) and same(w1.grad, w2.grad)


def test_a_data_sized_tensor_live_across_a_graph_break():
    tracer.config.capture_scalar_outputs = True

    def f(x):
        y = x[x > 0]
        print("", end="")
        return y * 2, len(y)

    c = tracer.compile(f)
    with traced() as t:
        for x in INPUTS:
            assert same(c(x), f(x))
    assert t.graph_breaks == 1 and t.fallbacks == 0, t


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_op_that_reads_a_0d_tensor_as_a_scalar(backend):
    """addcmul_'s `value` and _foreach_lerp_'s weight given as 0-d tensors: their kernels read
    them with .item(), a symbol made inside the op that its output does not carry."""
    def f(x, a, b, v):
        y = x.clone()
        y.addcmul_(a, b, value=v)
        xs = [x.clone(), a.clone()]
        torch._foreach_lerp_(xs, [b, b], v)
        return y, xs

    c = tracer.compile(f, fullgraph=True, backend=backend)
    for v in (torch.tensor(0.5), torch.tensor(2.0)):
        args = (torch.ones(2, 2), torch.full((2, 2), 2.0), torch.full((2, 2), 3.0), v)
        with traced() as t:
            out = c(*args)
        assert same(out, f(*args))
        assert t.internal_errors == 0 and t.fallbacks == 0, t


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_what_fake_tensors_assumed_of_a_value_is_checked_when_the_graph_runs(backend):
    """`torch.zeros(n, 2)` with n read from data assumes n >= 0: the graph checks it (as
    torch.compile inserts its deferred runtime asserts), so a backend that relied on it never
    returns a wrong answer; eager raises for a negative size too."""
    def f(x):
        n = x.sum().int().item()
        return torch.zeros(n, 2) + 1

    c = tracer.compile(f, fullgraph=True, backend=backend)
    assert same(c(torch.ones(3)), f(torch.ones(3)))
    assert "_assert_scalar" in c.entries[0].graph.code
    with pytest.raises(RuntimeError):
        f(-torch.ones(3))
    with pytest.raises(RuntimeError):
        c(-torch.ones(3))
