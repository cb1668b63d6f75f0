"""Every opcode of the running CPython (3.11 to 3.15: each version's own dis.opmap)
either has a handler or makes the frame fall back with its name as the reason (design rule
5), and a handler never silently does nothing."""
import dataclasses
import dis
import sys

import pytest
import torch

from bytecode_utils import decode, versions
from tracer.exc import Unsupported
from tracer.trace.handlers import HANDLERS
from tracer.trace.frame import Frame, TraceContext, opnames_without_handler

#: Names in this version's dis.opmap that never appear in decoded code, so they have no
#: handler: pseudo-instructions (the compiler's, >= MIN_PSEUDO_OPCODE, never in co_code;
#: except the two that decode uses as normalised names, LOAD_METHOD and LOAD_SUPER_METHOD),
#: instrumented variants (dis shows the plain instruction), and the executor/exit plumbing
#: (3.15's TRACE_RECORD: the JIT's trace recorder).
_NORMALISED = {a for names in versions.ALIASES.values() for a in names}
NEVER_DECODED = sorted(
    name for name, op in dis.opmap.items()
    if name not in _NORMALISED and (
        op >= getattr(dis, "MIN_PSEUDO_OPCODE", 256) or name.startswith("INSTRUMENTED_")
        or name in ("INTERPRETER_EXIT", "ENTER_EXECUTOR", "RESERVED", "EXIT_INIT_CHECK", "TRACE_RECORD"))
) if sys.version_info >= (3, 12) else []


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
    """Every name that decode can produce on this version (a raw name or, through
    versions.ALIASES, its normalised names) has a handler."""
    assert opnames_without_handler() == NEVER_DECODED


@pytest.mark.parametrize("opname", NEVER_DECODED or ["(none on 3.11)"])
def test_names_without_handler_fall_back_with_their_name(opname):
    if opname not in dis.opmap:
        pytest.skip("3.11 has no such names")
    frame = _frame_running(opname)
    with pytest.raises(Unsupported) as info:
        frame.run()
    assert opname in str(info.value)


def test_handlers_are_registered_for_this_version_only():
    """A handler name is a raw opname of this version or a name decode normalises to."""
    known = set(dis.opmap) | {a for names in versions.ALIASES.values() for a in names}
    assert sorted(set(HANDLERS) - known) == []


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


UNSUPPORTED_BY_DESIGN = [name for name in [  # (SEND, GET_YIELD_FROM_ITER, MATCH_* are traced; and
    # END_SEND, CLEANUP_THROW: tests/test_generators_semantics.py)
    # (LOAD_BUILD_CLASS is traced: tests/test_frame_classes.py; the NAME ops and
    # SETUP_ANNOTATIONS only in a class body, refused here in a function's frame)
    "IMPORT_STAR", "PRINT_EXPR", "SETUP_ANNOTATIONS", "GET_AWAITABLE",
    "GET_AITER", "GET_ANEXT", "END_ASYNC_FOR", "BEFORE_ASYNC_WITH", "ASYNC_GEN_WRAP",
    "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "RERAISE",
    "CALL_INTRINSIC_1", "CALL_INTRINSIC_2", "LOAD_LOCALS",
    "LOAD_FROM_DICT_OR_DEREF", "LOAD_FROM_DICT_OR_GLOBALS",
] if name in dis.opmap]


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
