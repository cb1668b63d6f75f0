"""isinstance/issubclass against typing constructs that refuse class checks: CPython raises
TypeError, and the traced frame raises it too (a user's error, not the tracer's)."""
from typing import TypedDict

import torch

import tracer


class Params(TypedDict):
    factor: float


def test_isinstance_of_a_typed_dict_raises_the_users_type_error():
    """`isinstance(p, SomeTypedDict)` raises TypeError (huggingface_hub's validators do it for
    HF rope configs, inside `try`). Before, the TypeError escaped from the tracer's own
    issubclass: an internal error, and the frame ran as Python (Phi3 longrope: 14 internal
    errors, 16 frames as Python). Now the user's `except TypeError` catches it in the trace:
    one graph, eager's answer."""
    def f(x, p):
        try:
            ok = isinstance(p, Params)
        except TypeError as e:
            ok = "TypedDict" in str(e)
        return x + 1, ok

    tracer.reset_stats()
    got = tracer.compile(f)(torch.ones(2), {"factor": 2.0})
    want = f(torch.ones(2), {"factor": 2.0})
    assert torch.equal(got[0], want[0]) and got[1] is want[1] is True
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0 and s.graph_breaks == 0 and s.graphs == 1, s
