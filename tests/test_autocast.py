"""`with torch.autocast(...)` inside compiled code (issue 9: models run under autocast, and
models that switch it off around a computation, as HF rotary embeddings do).

The block is part of the graph as under torch.compile: `torch.amp._enter_autocast` and
`_exit_autocast` nodes, with fake tensors traced under the same autocast. A graph break
inside the block leaves it at the graph's end and enters it again in the rewritten code.
Every test compares with eager (values and dtypes), checks capture and warm calls, and that
the caller's autocast state is what eager leaves."""
import pytest
import torch

import tracer
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
