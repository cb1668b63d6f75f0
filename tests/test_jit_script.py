"""`@torch.jit.script` functions called from traced code (transformers' DeBERTa up to 5.1x
has several): their Python function is traced, as torch.compile does. The graph used to
hold the ScriptFunction as a call_function target, which FX's code names by its class
(`torch.jit.ScriptFunction(x, 1)`): a TypeError when the graph ran, escaping the user's
training step."""
import pytest
import torch
import torch.nn as nn

import tracer
from helpers import assert_captured, assert_warm, traced

pytestmark = [pytest.mark.usefixtures("fresh_tracer"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


@torch.jit.script
def scaled_size_sqrt(x: torch.Tensor, scale_factor: int):
    return torch.sqrt(torch.tensor(x.size(-1), dtype=torch.float) * scale_factor)


@torch.jit.script
def shifted(x: torch.Tensor, k: int):
    return x * k + 1


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        q = self.q(x) / scaled_size_sqrt(x, 2)
        scores = q @ self.k(x).transpose(-1, -2)
        return self.drop(shifted(scores.softmax(-1), 3)).sum(-1)


def test_script_functions_are_traced_into():
    def f(x):
        return shifted(x.sin(), 3).cos()

    x = torch.randn(4)
    c = tracer.compile(f)
    with traced() as t:
        got = c(x)
    torch.testing.assert_close(got, f(x))
    assert_captured(t, min_ops=4, graphs=1, breaks=0)
    assert t.reruns == 0, str(t)
    assert_warm(c, x)


def test_script_functions_in_a_training_step_match_eager():
    torch.manual_seed(0)
    model = Attn().train()
    ref = Attn().train()
    ref.load_state_dict(model.state_dict())
    c = tracer.compile(model)
    x = torch.randn(2, 5, 8)
    for step in range(2):
        with traced() as t:
            torch.manual_seed(step)
            out = c(x)
            out.pow(2).mean().backward()
        torch.manual_seed(step)
        want = ref(x)
        want.pow(2).mean().backward()
        torch.testing.assert_close(out, want)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None
        if step == 0:
            assert_captured(t, min_ops=8, graphs=1, breaks=0)
        else:
            assert t.frames_traced == 0, str(t)


def test_a_script_function_without_its_python_function_is_called_by_the_graph():
    """Without the Python function (a ScriptFunction loaded with torch.jit.load, say) the
    graph calls the ScriptFunction itself, held as an object: FX would name it by its class."""
    @torch.jit.script
    def plus(x: torch.Tensor):
        return x + 2

    del plus._torchdynamo_inline

    def f(x):
        return plus(x.sin()).cos()

    x = torch.randn(4)
    c = tracer.compile(f)
    with traced() as t:
        got = c(x)
    torch.testing.assert_close(got, f(x))
    assert_captured(t, min_ops=3, graphs=1, breaks=0)
    assert t.reruns == 0, str(t)
    assert_warm(c, x)


def test_a_script_function_whose_call_torch_testing_patched_is_still_called_by_the_graph():
    """torch.testing._internal.common_utils (imported with module_db) patches
    ScriptFunction.__call__ with a Python `prof_func_call`: the ScriptFunction was then taken
    for an object whose call is Python code to trace, and its call broke the graph. A class
    bound from C++ is never such an object."""
    import torch.testing._internal.common_utils  # noqa: F401 - the patch is what is tested
    test_a_script_function_without_its_python_function_is_called_by_the_graph()
