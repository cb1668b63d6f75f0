"""torch's training utilities inside a compiled step (a hunt on training code, a608f12): gradient
clipping, flattening parameters, the functional optimizers, swapping tensors. Each test compares
the compiled step with eager (parameters, gradients, returned values) and checks what was
captured; each failed before its fix."""
import copy
import warnings

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

