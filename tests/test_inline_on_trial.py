"""A torch Python helper called with constants is inlined on trial (tracer/variables/speculate.py):
folded without a guard that re-calls it on every cache hit, guarded on the switch it read,
and called the old way, with no graph break, when the tracer refuses its code."""
import types
import warnings

import pytest
import torch
import torch.nn as nn

import tracer
from helpers import assert_captured, assert_recompiled, assert_warm, traced
from semantics_helpers import check

pytestmark = pytest.mark.usefixtures("fresh_tracer")


def _torch_helper(fn):
    """fn as if it were defined in torch (the tracer calls torch's callables, it does not
    inline them, unless they are Python helpers called with constants)."""
    g = dict(fn.__globals__, __name__="torch._trial_helpers")
    out = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    out.__module__ = "torch._trial_helpers"
    return out


def _query_guards(c):
    return [g for e in c.entries for g in e.guards.guards if type(g).__name__ == "QueryMatch"]


def test_a_torch_helper_on_constants_is_folded_without_a_query_guard():
    from torch.nn.modules.transformer import _detect_is_causal_mask

    def f(x):
        if _detect_is_causal_mask(None, None, x.shape[-1]) or not torch.backends.mha.get_fastpath_enabled():
            return x.cos()
        return x.sin() + 1

    x = torch.randn(4, 8)
    c, d = check(f, x, graphs=1, dynamo=True)  # eager-equal, captured, warm; torch.compile's count
    assert d.ops >= 2, d
    assert _query_guards(c) == [], _query_guards(c)
    assert_warm(c, x)


def test_the_switch_a_folded_helper_read_is_guarded():
    """get_fastpath_enabled() reads a constant of torch.backends.mha: inlined, that read is
    guarded (a library's constants are data, its functions and classes code)."""
    def f(x):
        return x.sin() if torch.backends.mha.get_fastpath_enabled() else x.cos()

    x = torch.randn(5)
    c = tracer.compile(f)
    assert_warm(c, x)
    try:
        torch.backends.mha.set_fastpath_enabled(False)
        with traced() as t:
            got = c(x)
        torch.testing.assert_close(got, x.cos())
        assert_recompiled(t, "_is_fastpath_enabled")
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    torch.testing.assert_close(c(x), x.sin())


def test_a_refused_helper_is_called_as_before():
    """Its code warns (a library the tracer does not trace) before any effect: the trial is
    taken back, the call is made at trace time and guarded by a query, as before; no graph
    break."""
    def scale_for(n):
        warnings.warn("scale_for is deprecated", DeprecationWarning)
        return 2.0 * n

    scale_for = _torch_helper(scale_for)

    def f(x):
        return x * scale_for(3) + x.sin()

    x = torch.randn(6)
    c = tracer.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with traced() as t:
            got = c(x)
        torch.testing.assert_close(got, x * 6.0 + x.sin())
        assert_captured(t, min_ops=2, graphs=1, breaks=0)
        assert len(_query_guards(c)) == 1
        assert_warm(c, x)


def test_a_refusal_after_an_effect_is_a_graph_break_with_its_reason():
    """The refused code had already written a list of the frame: that cannot be taken back,
    so the call is a graph break, made natively once per call (never a trace that lost the
    write)."""
    log = []

    def record(n):
        log.append(n)
        warnings.warn("recorded", UserWarning)
        return n + 1

    record = _torch_helper(record)

    def f(x):
        return x.sin() * record(2)

    x = torch.randn(3)
    c = tracer.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(c(x), x.sin() * 3)
        assert_captured(c, breaks=1)
        assert any("warn" in str(b.reason) for e in c.entries for b in e.breaks), \
            [str(b.reason) for e in c.entries for b in e.breaks]
        for _ in range(2):
            before = len(log)
            with traced() as t:
                torch.testing.assert_close(c(x), x.sin() * 3)
            assert t.frames_traced == 0 and len(log) == before + 1, (t, log)


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_an_item_a_refused_helper_read_is_guarded_when_the_frame_reads_it(kind):
    """The refused helper read an item of a list (dict) the frame had touched but not read:
    the trial's guards were dropped with it while the item stayed read, so the frame's own
    read of it after the call was guarded by nothing, and a changed item returned the result
    of the old one (the list: x * 2 + 3 after the item became 5). Now the refused trial's
    reads are taken back with its guards."""
    table, key = ([2.0, 0], 0) if kind == "list" else ({"scale": 2.0, "step": 0}, "scale")

    def peek(n):
        table[key]
        warnings.warn("peek is deprecated", DeprecationWarning)
        return n

    peek = _torch_helper(peek)

    def f(x):
        d = table
        n = peek(3)
        return x * d[key] + n

    x = torch.randn(3)
    c = tracer.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(c(x), x * 2.0 + 3)
        assert_captured(c, breaks=0)
        table[key] = 5.0
        with traced() as t:
            torch.testing.assert_close(c(x), x * 5.0 + 3)
        assert_recompiled(t)


def test_transformer_encoder_guards_ask_nothing_on_a_hit():
    """nn.TransformerEncoder asked torch.backends.mha and _detect_is_causal_mask through
    query guards: two Python calls inside every guard check."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    m = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 16)
    c = tracer.compile(m)
    with torch.no_grad():
        with traced() as t:
            got = c(x)
        torch.testing.assert_close(got, m(x))
        assert_captured(t, min_ops=1, graphs=1, breaks=0)
        assert _query_guards(c._compiled_forward) == []
        assert_warm(c, x)


def test_a_query_guard_on_a_pybind_function_reads_as_its_torch_name():
    """Inlined, torch.jit.is_tracing() leaves a query of torch._C._is_tracing (a pybind11
    function, whose __qualname__ names pybind's record type): described by its own name."""
    from guards import QueryMatch
    g = QueryMatch(torch._C._is_tracing, (), (), False)
    assert g.describe() == "torch._C._is_tracing() == False", g.describe()
