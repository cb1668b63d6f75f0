"""torch's training utilities inside a compiled step (a hunt on training code, a608f12): gradient
clipping, flattening parameters, the functional optimizers, swapping tensors. Each test compares
the compiled step with eager (parameters, gradients, returned values) and checks what was
captured; each failed before its fix."""
import copy
import warnings
import weakref

import pytest
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.optim.sgd import sgd

import tracer
from helpers import assert_captured, traced


def _load_flat(m, x):
    vector_to_parameters(torch.zeros(8) + x.sum(), [m.weight, m.bias])
    return x * 2


def _sgd_step(w, x):
    with torch.no_grad():
        sgd([w], [x * 2], [None], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
            maximize=False)
    return x + 1


def test_torch_functions_called_for_their_effect_are_not_erased():
    """`vector_to_parameters(vec, params)` (assigns each `p.data`) and the functional
    `torch.optim.sgd.sgd` (updates the parameters in place) are Python functions of torch's that
    return None: recorded as one opaque op each, the None result made the node look like a query
    computing nothing, and it was erased: both did nothing (m.bias stayed -1, w stayed 1). Now
    torch.nn.utils and torch.optim are inlined like user code (as TorchDynamo inlines them): sgd's
    in-place update is captured, and vector_to_parameters breaks at its `.data` write."""
    m, w = torch.nn.Linear(3, 2), torch.nn.Parameter(torch.ones(3))
    m_ref, w_ref = copy.deepcopy(m), copy.deepcopy(w)
    x = torch.ones(3)
    with traced() as t:
        got = tracer.compile(_sgd_step)(w, x)
    torch.testing.assert_close(got, _sgd_step(w_ref, x))
    torch.testing.assert_close(w, w_ref)
    assert w[0].item() == pytest.approx(0.8)
    assert_captured(t, breaks=0, graphs=1)
    with traced() as t:
        got = tracer.compile(_load_flat)(m, x)
    torch.testing.assert_close(got, _load_flat(m_ref, x))
    for p, q in zip(m.parameters(), m_ref.parameters()):
        torch.testing.assert_close(p, q)
    assert m.bias.tolist() == [3.0, 3.0]
    assert_captured(t, breaks=1)
    assert "setting Tensor.data" in t.of("break")[0].reason


def test_a_python_torch_function_returning_none_is_a_break_not_an_erased_node():
    """Torch's Python code the trace does not inline (outside torch.nn.utils and torch.optim)
    is still one op per call: a None result there is a function called for its effect, so the
    call runs as Python (`torch.autograd.graph.increment_version(x)` was an erased node: x's
    version counter stayed 0), while torch's checks
    (torch._check on a size) stay in the trace."""
    def f(x):
        torch.autograd.graph.increment_version(x)  # (eager: x._version goes up by one)
        return x + 1

    def g(x):
        torch._check(x.shape[0] > 1)
        return x * 2

    x, ref = torch.ones(3), torch.ones(3)
    with traced() as t:
        torch.testing.assert_close(tracer.compile(f)(x), f(ref))
    assert x._version == ref._version == 1
    assert_captured(t, breaks=1)
    assert "returned None" in t.of("break")[0].reason
    with traced() as t:
        torch.testing.assert_close(tracer.compile(g)(x), x * 2)
    assert_captured(t, breaks=0)


def test_parameters_to_vector_of_a_generator_is_captured():
    """`parameters_to_vector(m.parameters())`: inlined, the generator is iterated by the trace
    (one graph, no break), and the vector equals eager's."""
    m = torch.nn.Linear(3, 2)

    def f(x):
        return parameters_to_vector(m.parameters()) * x.sum()

    x = torch.ones(3)
    with traced() as t:
        got = tracer.compile(f)(x)
    torch.testing.assert_close(got, f(x))
    assert_captured(t, breaks=0, graphs=1)


def _clip_step(m, params, x):
    loss = m(x).pow(2).sum()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, 0.5)
    return loss.detach(), norm


def _clip_step_gen(m, x):
    loss = m(x).pow(2).sum()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)  # (the usual call: a generator)
    return loss.detach(), norm


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("given", ["list", "generator"])
def test_clip_grad_norm_is_traced_and_clips_under_every_backend(backend, given):
    """`clip_grad_norm_(params, 0.5)` after backward: one opaque node, which AOTAutograd
    (aot_eager, inductor) traced again on fakes whose .grad is None: it returned 0 and clipped
    nothing. Passed `m.parameters()` (the usual call) it broke with "IteratorVariable() passed
    to a torch op". Now clip_grad_norm_ is inlined (its `p.grad` reads are guarded graph inputs,
    `_foreach_mul_` scales them in place) and torch's grouping of the grads by device and dtype
    is evaluated by the trace: after backward's break, one graph, and every backend returns
    eager's norm and leaves eager's gradients."""
    warnings.filterwarnings("ignore", message=".*TensorFloat32.*")
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    ref = copy.deepcopy(m)
    step = _clip_step if given == "list" else _clip_step_gen
    args = (lambda m: (m, list(m.parameters()))) if given == "list" else (lambda m: (m,))
    c = tracer.compile(step, backend=backend)
    with traced() as t:
        for i in range(2):
            x = torch.randn(3, 4)
            m.zero_grad()
            ref.zero_grad()
            loss, norm = c(*args(m), x)
            want_loss, want_norm = step(*args(ref), x)
            torch.testing.assert_close(loss, want_loss)
            torch.testing.assert_close(norm, want_norm)
            assert norm.item() > 0.5
            for p, q in zip(m.parameters(), ref.parameters()):
                torch.testing.assert_close(p.grad, q.grad)
    assert_captured(t, breaks=1, graphs=2)  # (backward is a break: a graph before it, one after)
    assert "backward" in t.of("break")[0].reason


def test_clip_grad_value_under_aot_eager_clips_as_eager():
    """`clip_grad_value_(params, 0.01)` under aot_eager raised BackendError: AOTAutograd re-ran
    the opaque node on fakes without grads, and torch's grouping raised on the empty list. Now
    it is traced (two in-place foreach clamps on the grads, graph inputs) and clips as eager;
    with every grad None it raises eager's RuntimeError."""
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 2)
    ps = list(m.parameters())

    def g(x):
        torch.nn.utils.clip_grad_value_(ps, 0.01)
        return x + 1

    c = tracer.compile(g, backend="aot_eager")
    with traced() as t:
        for _ in range(2):
            for p in ps:
                p.grad = torch.randn_like(p)
            want = [p.grad.clamp(-0.01, 0.01) for p in ps]
            torch.testing.assert_close(c(torch.ones(3)), torch.ones(3) + 1)
            for p, w in zip(ps, want):
                torch.testing.assert_close(p.grad, w)
    assert_captured(t, breaks=0, graphs=1)
    for p in ps:
        p.grad = None
    with pytest.raises(RuntimeError, match="empty"):
        g(torch.ones(3))
    with pytest.raises(RuntimeError, match="empty"):
        c(torch.ones(3))


def test_a_generator_passed_to_a_torch_op_is_named_as_such():
    """A generator handed to an op the trace records (`torch.cat(gen)`) breaks with what the
    user passed, not the tracer's class ("IteratorVariable() passed to a torch op"); the call
    then runs as Python and raises eager's TypeError."""
    m = torch.nn.Linear(3, 2)

    def f(x):
        return torch.cat(p.flatten() for p in m.parameters()) * x

    with traced() as t:
        with pytest.raises(TypeError, match="must be tuple of Tensors, not generator"):
            tracer.compile(f)(torch.ones(8))
    assert_captured(t, breaks=1, min_ops=0)
    assert "a generator object passed to a torch op" in t.of("break")[0].reason


@pytest.fixture
def swap_on_conversion():
    """`module.double()` swaps each parameter (torch.utils.swap_tensors) instead of setting
    its .data, for the test's duration."""
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    yield
    torch.__future__.set_swap_module_params_on_conversion(before)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_tensors_a_compiled_call_guarded_can_be_swapped(backend, swap_on_conversion):
    """`torch.utils.swap_tensors` refuses a tensor that any weakref points to. After one
    compiled call, each parameter had two: its TensorMatch guard's (kept for building the
    guard batch) and the trace's fake mode's (its converter keys real tensors by WeakIdRef, and
    the entry's graph keeps the mode alive), plus, under aot_eager, the tracing context's that
    AOTAutograd keeps for the backward. `m.double()` raised "_apply(): Couldn't swap
    Linear.weight". Now each is let go of once the guard set and the backend are built: the
    swap works, and the next call recompiles for float64 and gives eager's answer."""
    warnings.filterwarnings("ignore", message=".*TensorFloat32.*")
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    ref = copy.deepcopy(m)
    c = tracer.compile(m, backend=backend)
    x = torch.randn(4, 3)
    with traced() as t:
        torch.testing.assert_close(c(x), ref(x))
        c(x).sum().backward()
        ref(x).sum().backward()
        assert [weakref.getweakrefcount(p) for p in m.parameters()] == [0, 0]
        m.double()
        ref.double()
        got = c(x.double())
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, ref(x.double()))
    assert_captured(t, breaks=0, recompiles=1)
    assert t.recompiles == 1


def test_a_global_tensor_a_compiled_function_read_can_be_swapped():
    """A tensor read from the frame's globals (guarded) and swapped with another after the
    call: swap_tensors raised "Cannot swap t1 because it has weakref associated with it". Now
    the swap works, and the compiled function reads the swapped contents, as eager does."""
    g = {"a": torch.ones(3)}
    f = eval("lambda x: x + a", g)
    c = tracer.compile(f)
    with traced() as t:
        torch.testing.assert_close(c(torch.ones(3)), f(torch.ones(3)))
        torch.utils.swap_tensors(g["a"], torch.full((3,), 5.0))
        torch.testing.assert_close(c(torch.ones(3)), torch.full((3,), 6.0))
        torch.utils.swap_tensors(g["a"], torch.zeros(2, dtype=torch.float64))
        torch.testing.assert_close(c(torch.ones(2, dtype=torch.float64)), f(torch.ones(2, dtype=torch.float64)))
    assert_captured(t, breaks=0, recompiles=None)
    assert t.recompiles == 1
