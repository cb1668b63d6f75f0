"""Rule 1 under fault injection: an internal exception at any stage of tracing or codegen is
caught at the frame boundary (convert_frame), logged once with the reason, and the user's
call returns the eager result; with fullgraph=True it is a FullGraphError instead.

Stages (each monkeypatched to raise): the interpreter loop (Frame.run), one instruction
handler, guard building (guards.compile_guards as used by tracer.trace.convert_frame), the backend,
codegen.generate and codegen.assemble; also a backend returning a non-callable.
"""
import logging
import os
import subprocess
import sys

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


def _bad(gm, example_inputs):
    raise Boom("backend exploded")


def test_backend_raising_is_a_backend_error():
    """A backend that raises is the user's error, not the tracer's: tracer.BackendError reaches
    the caller (as torch.compile's BackendCompilerFailed), naming the backend and the frame,
    with the backend's own exception as its __cause__; the next call tries again (no entry
    was kept), and fullgraph=True raises the same."""
    c = tracer.compile(fn, backend=_bad)
    args = _args()
    for _ in range(2):
        with pytest.raises(BackendError) as ei:
            c(*args)
        msg = str(ei.value)
        assert "backend _bad raised Boom: backend exploded" in msg, msg
        assert f"fn at {__file__}:{fn.__code__.co_firstlineno}" in msg, msg
        assert "\n" not in msg
        assert isinstance(ei.value.__cause__, Boom) and str(ei.value.__cause__) == "backend exploded"
        assert ei.value.backend is _bad and ei.value.frame == "fn"
    assert c.entries == []
    s = tracer.stats()
    assert s.fallbacks == 0 and s.internal_errors == 0, str(s)
    with pytest.raises(BackendError, match="backend exploded") as ei:
        tracer.compile(fn, backend=_bad, fullgraph=True)(*args)
    assert isinstance(ei.value.__cause__, Boom)


def test_backend_raising_with_suppress_errors_falls_back(monkeypatch, caplog):
    """config.suppress_errors = True: the frame runs as Python (the eager result), the reason
    kept on the entry and logged; fullgraph=True still refuses to fall back (FullGraphError)."""
    monkeypatch.setattr(tracer.config, "suppress_errors", True)
    c = tracer.compile(fn, backend=_bad)
    args = _args()
    with caplog.at_level(logging.INFO, logger="tracer"):
        out = c(*args)
    ref = fn(*args)
    assert torch.allclose(out[0], ref[0]) and out[1] == ref[1]
    assert c.entries[0].code is None and "backend exploded" in c.entries[0].reason
    assert any("backend exploded" in r.getMessage() for r in caplog.records)
    assert tracer.stats().fallbacks == 1
    with pytest.raises(FullGraphError, match="backend exploded") as ei:
        tracer.compile(fn, backend=_bad, fullgraph=True)(*args)
    assert isinstance(ei.value.__cause__, BackendError)


@pytest.mark.parametrize("returned", [None, 42, "forward", (lambda: None,)])
def test_backend_returning_non_callable(returned, monkeypatch, caplog):
    """A BackendError saying what the backend returned (nothing to chain: no exception);
    under suppress_errors the old fall back with the reason kept and logged."""
    args = _args()
    with pytest.raises(BackendError, match="not a callable") as ei:
        tracer.compile(fn, backend=lambda gm, ex: returned)(*args)
    assert f"returned {type(returned).__name__}, not a callable" in str(ei.value)
    assert "<lambda>" in str(ei.value) and "compiling the graph of fn" in str(ei.value)
    assert ei.value.__cause__ is None
    with pytest.raises(BackendError, match="not a callable"):
        tracer.compile(fn, backend=lambda gm, ex: returned, fullgraph=True)(*args)

    monkeypatch.setattr(tracer.config, "suppress_errors", True)
    c = tracer.compile(fn, backend=lambda gm, ex: returned)
    with caplog.at_level(logging.INFO, logger="tracer"):
        out = c(*args)
    assert torch.allclose(out[0], fn(*args)[0])
    assert c.entries[0].code is None and "not a callable" in c.entries[0].reason
    assert any("not a callable" in r.getMessage() for r in caplog.records)
    with pytest.raises(FullGraphError, match="not a callable") as ei:
        tracer.compile(fn, backend=lambda gm, ex: returned, fullgraph=True)(*args)
    assert isinstance(ei.value.__cause__, BackendError)


def _no_cos(gm, example_inputs):
    if any(n.target in (torch.cos, "cos") for n in gm.graph.nodes):
        raise Boom("no cos here")
    return gm.forward


def _breaks(x):
    y = x.sin()
    print("a graph break")
    return y.cos()


def test_backend_error_in_a_resume_function(capsys):
    """The graph after a break is compiled when the resume function first runs, through the
    frame hook: its backend error reaches the caller too, naming the resume function."""
    x = torch.randn(3)
    with pytest.raises(BackendError, match="no cos here") as ei:
        tracer.compile(_breaks, backend=_no_cos)(x)
    assert "_breaks.<resume@" in str(ei.value) and isinstance(ei.value.__cause__, Boom)
    assert "Exception ignored" not in capsys.readouterr().err


def test_backend_error_under_capture(monkeypatch):
    """The same under tracer.capture(); with suppress_errors the block's results are eager's."""
    x, args = torch.randn(3), _args()
    with pytest.raises(BackendError, match="backend exploded") as ei:
        with tracer.capture(backend=_bad):
            fn(*args)
    assert "compiling the graph of fn" in str(ei.value) and isinstance(ei.value.__cause__, Boom)
    with pytest.raises(BackendError, match="no cos here"):
        with tracer.capture(backend=_no_cos):
            _breaks(x)
    monkeypatch.setattr(tracer.config, "suppress_errors", True)
    with tracer.capture(backend=_bad):
        out = fn(*args)
        out2 = _breaks(x)
    assert torch.allclose(out[0], fn(*args)[0])
    assert torch.allclose(out2, x.sin().cos())


def test_user_exception_with_a_failing_backend_surfaces_unchanged():
    """The user's own exception is raised by the traced code before any graph is compiled:
    it surfaces as itself, from the user's frame, whatever the backend."""
    def user(x):
        if x.shape[0] == 3:
            raise KeyError("mine")
        return x + 1

    for backend in ("eager", _bad):
        with pytest.raises(KeyError, match="mine") as ei:
            tracer.compile(user, backend=backend)(torch.randn(3))
        assert ei.traceback[-1].name == "user"


@pytest.mark.internal_errors
def test_fault_inside_capture_block(monkeypatch):
    """The same through tracer.capture (the frame hook path)."""
    _fault_generate(monkeypatch)
    args = _args()
    with tracer.capture():
        out = fn(*args)
    assert torch.allclose(out[0], fn(*args)[0])


_RESTART_PROGRAM = """
import torch, tracer
for backend in ("aot_eager", "inductor"):
    tracer.reset()
    f = tracer.compile(lambda x: x.abs() * 2, backend=backend)
    x = torch.tensor(-2.0, dtype=torch.float64)
    assert torch.equal(f(x), torch.tensor(4.0, dtype=torch.float64))
    assert tracer.stats().graphs >= 1
print("ok")
"""


def test_a_backend_asking_to_restart_compiles_again():
    """A 0-dim float64 input: AOTAutograd's first such compile in a process raises torch's
    RestartAnalysis (its signal to compile again, after recording the scalar it specialises),
    which was a BackendError for the user. A fresh process, since only the first one raises."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", _RESTART_PROGRAM], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
