"""Every CPython 3.11 opcode either has a handler or makes the frame fall back with its
name as the reason (design rule 5), and a handler never silently does nothing."""
import dataclasses
import dis

import pytest
import torch

from bytecode_utils import decode
from tracer.exc import Unsupported
from tracer.handlers import HANDLERS
from tracer.translator import Frame, TraceContext, opnames_without_handler


def _frame_running(opname):
    def sample(x):
        return x

    code = sample.__code__
    ctx = TraceContext(code, sample.__globals__, __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__))
    frame = Frame(ctx, code, sample.__globals__, {}, {})
    template = decode(code)[0]
    frame.instrs = [dataclasses.replace(template, opname=opname, opcode=dis.opmap[opname], arg=0,
                                        argval=None, target=None)]
    return frame


def test_every_opcode_has_a_handler():
    assert opnames_without_handler() == []


@pytest.mark.parametrize("opname", ["BINARY_OP", "LOAD_ATTR", "FOR_ITER"])
def test_an_opcode_without_handler_falls_back_with_its_name(opname, monkeypatch):
    monkeypatch.delitem(HANDLERS, opname)
    frame = _frame_running(opname)
    with pytest.raises(Unsupported) as info:
        frame.run()
    assert opname in str(info.value)


def test_compiled_function_with_unhandled_opcode_returns_eager_result(monkeypatch):
    import tracer
    monkeypatch.delitem(HANDLERS, "BINARY_OP")

    def f(x):
        return x * 2 + 1

    c = tracer.compile(f)
    x = torch.randn(3)
    assert torch.equal(c(x), f(x))
    assert c.entries[0].code is None and "BINARY_OP" in c.entries[0].reason
    assert tracer.stats().fallback_reasons.get(c.entries[0].reason, 0) >= 1


UNSUPPORTED_BY_DESIGN = ["IMPORT_STAR", "PRINT_EXPR", "SETUP_ANNOTATIONS", "LOAD_BUILD_CLASS",
                         "SEND", "GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "END_ASYNC_FOR",
                         "BEFORE_ASYNC_WITH", "ASYNC_GEN_WRAP", "GET_YIELD_FROM_ITER", "MATCH_CLASS",
                         "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS",
                         "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "RERAISE",
                         "RAISE_VARARGS"]


@pytest.mark.parametrize("opname", UNSUPPORTED_BY_DESIGN)
def test_explicitly_unsupported_opcodes_name_themselves_or_say_why(opname):
    frame = _frame_running(opname)
    frame.stack = [None] * 4  # never read: the handler must refuse before touching the stack
    with pytest.raises(Unsupported) as info:
        frame.run()
    text = str(info.value)
    # the reason names the opcode, or (a `raise` of a value that is not modelled) the statement
    assert opname in text or opname == "RAISE_VARARGS" and text.startswith("raise statement"), text
    assert len(text) > len(opname) + 5, f"{opname}: say why, not only which: {text!r}"
