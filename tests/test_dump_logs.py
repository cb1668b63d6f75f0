"""TRACER_LOGS=graph,guards,breaks,bytecode,recompiles streams the dump's information during a real run."""
import logging
import os
import subprocess
import sys

import pytest
import torch

import tracer
from tracer.runtime import logs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = '''
import torch, tracer

def f(x):
    y = x.sin() * 2
    print("shape", tuple(y.shape))  # BREAK
    return y + 1

g = tracer.compile(f)
g(torch.randn(3))
g(torch.randn(4))   # another shape: recompiles
'''


@pytest.mark.one_version  # TRACER_LOGS in a subprocess: logging plumbing
def test_tracer_logs_env_streams_every_section(tmp_path):
    script = tmp_path / "logged.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": ROOT, "TRACER_LOGS": "+graph,+guards,breaks,bytecode,recompiles"}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    err = res.stderr
    line = next(i for i, s in enumerate(SCRIPT.splitlines(), 1) if "# BREAK" in s)
    assert "[tracer.graph] graph for f:" in err and "sin = x.sin()" in err
    assert "[tracer.guards] guards for f:" in err and "x: tensor float32 cpu shape (3,)" in err
    assert f"[tracer.breaks] graph break in f at {script}:{line}: print() is I/O" in err
    assert 'print("shape", tuple(y.shape))  # BREAK' in err and "^^^^" in err
    assert "[tracer.bytecode] original bytecode of f:" in err and "rewritten bytecode of f:" in err
    assert "[tracer.recompiles] recompiling f:" in err and "shape" in err
    assert res.stdout.count("shape") == 2  # the program's own output is untouched


@pytest.mark.one_version  # TRACER_LOGS in a subprocess: logging plumbing
def test_plain_names_log_summaries_and_plus_names_details(tmp_path):
    script = tmp_path / "levels.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": ROOT, "TRACER_LOGS": "graph,guards"}
    err = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=300).stderr
    assert "[tracer.graph] graph for f: 2 ops" in err and "sin = x.sin()" not in err
    assert "[tracer.guards] guards for f: " in err and "shape (3,)" not in err
    assert "[tracer.breaks]" not in err


@pytest.mark.one_version  # TRACER_LOGS in a subprocess: logging plumbing
def test_no_tracer_logs_means_silence(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRACER_LOGS"}
    env["PYTHONPATH"] = ROOT
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and "[tracer." not in res.stderr


def test_breaks_and_bytecode_loggers_with_caplog(caplog):
    def h(x):
        return float(x.sum().item()) + 1  # data-dependent: a break

    tracer.reset()
    with caplog.at_level(logging.DEBUG, logger="tracer.breaks"), \
            caplog.at_level(logging.DEBUG, logger="tracer.bytecode"):
        tracer.compile(h)(torch.ones(2))
    msgs = [(r.name, r.getMessage()) for r in caplog.records]
    assert any(n == "tracer.breaks" and "item()" in m and f"{__file__}:" in m for n, m in msgs)
    assert any(n == "tracer.bytecode" and "original bytecode of" in m and "<locals>.h:" in m for n, m in msgs)
    tracer.reset()


def test_configure_names(capsys):
    assert logs.configure("all", stream=sys.stderr) == list(logs.NAMES)
    assert logs.configure("+all", stream=sys.stderr) == ["+" + n for n in logs.NAMES]
    assert logging.getLogger("tracer.graph").level == logging.DEBUG
    assert logs.configure("graph,nope") == ["graph"]
    assert logging.getLogger("tracer.graph").level == logging.INFO
    assert "unknown TRACER_LOGS name 'nope'" in capsys.readouterr().err
    for name in logs.NAMES:  # leave the loggers as we found them
        lg = logging.getLogger(f"tracer.{name}")
        lg.setLevel(logging.NOTSET)
        lg.handlers = [h for h in lg.handlers if not getattr(h, "_tracer_logs", False)]
