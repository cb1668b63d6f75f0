"""Rule 1 under fault injection: an internal exception at any stage of tracing or codegen is
caught at the frame boundary (convert_frame), logged once with the reason, and the user's
call returns the eager result; with fullgraph=True it is a FullGraphError instead.

Stages (each monkeypatched to raise): the interpreter loop (Frame.run), one instruction
handler, guard building (guards.compile_guards as used by tracer.trace.convert_frame), the backend,
codegen.generate and codegen.assemble; also a backend returning a non-callable.
"""
import logging

import pytest
import torch

import tracer
from tracer.rewrite import codegen
from tracer.trace import convert_frame, frame as translator
from tracer.exc import BackendError, FullGraphError
from tracer.trace.handlers import HANDLERS


class Boom(Exception):
    pass


def _raise(*a, **k):
    raise Boom("injected fault")


def _fault_frame_run(mp):
    mp.setattr(translator.Frame, "run", _raise)


def _fault_handler(mp):
    mp.setitem(HANDLERS, "BINARY_OP", _raise)


def _fault_guards(mp):
    real = convert_frame.compile_guards

    def compile_guards(guards, **kw):  # fails on a real guard set; the fallback's bare one works
        if len(guards) > 1:
            raise Boom("injected fault")
        return real(guards, **kw)
    mp.setattr(convert_frame, "compile_guards", compile_guards)


def _fault_generate(mp):
    mp.setattr(codegen, "generate", _raise)


def _fault_assemble(mp):
    mp.setattr(codegen, "assemble", _raise)


STAGES = {"frame_run": _fault_frame_run, "handler": _fault_handler, "guards": _fault_guards,
          "codegen_generate": _fault_generate, "codegen_assemble": _fault_assemble}


def fn(x, y, n):
    z = x * 2 + y
    for i in range(n):
        z = z.sin() + i
    return z, [n, n + 1]


def _args():
    return torch.randn(3, 4), torch.randn(3, 4), 2


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


@pytest.mark.internal_errors
@pytest.mark.parametrize("stage", sorted(STAGES))
def test_internal_fault_falls_back_to_eager(stage, monkeypatch, caplog):
    STAGES[stage](monkeypatch)
    before = tracer.stats().internal_errors
    c = tracer.compile(fn)
    with caplog.at_level(logging.INFO, logger="tracer"):
        for _ in range(3):  # the first call traces; later calls hit the fallback entry
            args = _args()
            out, ref = c(*args), fn(*args)
            assert torch.allclose(out[0], ref[0]) and out[1] == ref[1]
    entry, = c.entries
    assert entry.code is None and ("internal error" in entry.reason or "injected" in entry.reason)
    logged = [r for r in caplog.records if "injected fault" in r.getMessage()
              or "runs as Python" in r.getMessage() and r.levelno >= logging.INFO]
    assert len([r for r in logged if r.levelno >= logging.WARNING]) <= 1
    assert logged, "the fallback reason is logged"
    assert tracer.stats().internal_errors > before, "the fault is recorded as an internal error"


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_internal_fault_with_fullgraph_raises(stage, monkeypatch):
    STAGES[stage](monkeypatch)
    with pytest.raises(FullGraphError):
        tracer.compile(fn, fullgraph=True)(*_args())


def test_backend_raising_falls_back(caplog):
    def bad(gm, example_inputs):
        raise Boom("backend exploded")
    c = tracer.compile(fn, backend=bad)
    args = _args()
    with caplog.at_level(logging.INFO, logger="tracer"):
        out = c(*args)
    assert torch.allclose(out[0], fn(*args)[0])
    assert c.entries[0].code is None and "backend exploded" in c.entries[0].reason
    assert any("backend exploded" in r.getMessage() for r in caplog.records)
    with pytest.raises(FullGraphError, match="backend exploded"):
        tracer.compile(fn, backend=bad, fullgraph=True)(*args)


@pytest.mark.parametrize("returned", [None, 42, "forward", (lambda: None,)])
def test_backend_returning_non_callable(returned, caplog):
    """fullgraph=False: falls back with the reason (BackendError text) kept and logged;
    fullgraph=True: FullGraphError caused by a tracer.BackendError."""
    c = tracer.compile(fn, backend=lambda gm, ex: returned)
    args = _args()
    with caplog.at_level(logging.INFO, logger="tracer"):
        out = c(*args)
    assert torch.allclose(out[0], fn(*args)[0])
    assert c.entries[0].code is None and "not a callable" in c.entries[0].reason
    assert any("not a callable" in r.getMessage() for r in caplog.records)
    with pytest.raises(FullGraphError, match="not a callable") as ei:
        tracer.compile(fn, backend=lambda gm, ex: returned, fullgraph=True)(*args)
    assert isinstance(ei.value.__cause__, BackendError)


@pytest.mark.internal_errors
def test_fault_inside_capture_block(monkeypatch):
    """The same through tracer.capture (the frame hook path)."""
    _fault_generate(monkeypatch)
    args = _args()
    with tracer.capture():
        out = fn(*args)
    assert torch.allclose(out[0], fn(*args)[0])
