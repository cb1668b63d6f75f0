"""A user's mistake gets one or two lines naming it, never a traceback of ours (issue 36).

`tracer-dump` on every command-line mistake a newcomer makes: exit code 2, one line on stderr
that names the problem, no traceback, nothing traced. The entry points' options are checked
where they are given (TypeError/ValueError naming the entry point and the option). A bad
TRACER_TRACE warns and the program runs.
"""
import os
import subprocess
import sys

import pytest
import torch

import tracer
from tracer.tools import dump

SCRIPT = '''
import torch


def f(x, y):
    return x + y


def boom(x):
    raise ValueError("bad input")


not_a_function = 3
'''


@pytest.fixture
def files(tmp_path, monkeypatch):
    (tmp_path / "good.py").write_text(SCRIPT)
    (tmp_path / "bad_syntax.py").write_text("def f(x:\n    pass\n")
    (tmp_path / "raises_at_import.py").write_text("raise RuntimeError('at import')\n")
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


MISTAKES = [
    # (argv, what the one line must say)
    (["nosuchmod.sub:f"], "no module named 'nosuchmod.sub'"),
    (["adir:f"], "is a directory"),
    (["good.py:not_a_function", "--inputs", "1"], "is a int, not a function"),
    (["good.py:nosuch", "--inputs", "1"], "has no attribute 'nosuch'"),
    (["bad_syntax.py:f"], "syntax error"),
    (["raises_at_import.py:f"], "raised RuntimeError: at import"),
    (["good.py:f", "--inputs", "randn(2), randn(2)", "--backend", "nosuch"], "--backend nosuch: unknown"),
    (["good.py:f", "--inputs", "randn(2), randn(2)", "--html", "nodir/x.html"], "no directory"),
    (["good.py:f", "--inputs", "randn(2), randn(2)", "--export", "nodir/g.py"], "no directory"),
    (["--trace", "missing.jsonl", "--html", "x.html"], "--trace missing.jsonl: no such file"),
    (["good.py:f", "--trace", "missing.jsonl", "--html", "x.html"], "without a TARGET"),
    (["good.py:f", "--inputs", "randn(2)"], "the inputs do not fit f(x, y)"),
    (["good.py:f", "--inputs", "randn(2), randn(2), randn(2)"], "the inputs do not fit f(x, y)"),
    (["good.py:f"], "give --inputs, or define example_inputs()"),
    (["good.py:f", "--inputs", "randn(x)"], "unsupported expression"),
    (["good.py:f", "--inputs", "randn(-1), randn(2)"], "randn(): negative size -1"),
    (["good.py:f", "--inputs", "randn(100000000000), randn(2)"], "randn(): "),
    (["good.py:f", "--inputs", "randint(0, 0, (2,)), randn(2)"], "randint(): "),
    (["good.py:boom", "--inputs", "randn(2)"], "boom(tensor float32 (2,)) raised ValueError: bad input"),
    (["good.py:f", "--inputs", "randn(2), randn(3)"], "raised RuntimeError: The size of tensor a (2)"),
    ([], "a TARGET"),
]


@pytest.mark.parametrize("argv,says", MISTAKES, ids=[" ".join(a) or "nothing" for a, _ in MISTAKES])
def test_a_command_line_mistake_is_one_line(files, capsys, argv, says):
    before = tracer.stats().frames_traced
    assert dump.main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracer-dump: ") and says in lines[0], err
    assert "Traceback" not in err and out == ""
    assert not any(files.glob("*.html")) and not (files / "nodir").exists()
    if argv[:1] != ["good.py:boom"] and "randn(3)" not in " ".join(argv):
        assert tracer.stats().frames_traced == before  # refused before anything was traced


def test_torchs_own_tensor_signatures_are_accepted():
    (a, b, c, d), _ = dump.parse_inputs("randint(0, 100, (2, 8)), randint(7, (3,)), randn((2, 4)), "
                                        "zeros((3,), dtype=int64)")
    assert a.shape == (2, 8) and 0 <= int(a.min()) and int(a.max()) < 100 and a.dtype == torch.int64
    assert b.shape == (3,) and int(b.max()) < 7
    assert c.shape == (2, 4) and d.dtype == torch.int64 and d.shape == (3,)


def test_a_report_piped_into_head_still_writes_its_files(files):
    """`tracer-dump ... --html x | head -1`: the reader stops early; the command still writes
    the HTML it was asked for and exits 0 without a word."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = (f"{sys.executable} -m tracer dump good.py:f --inputs 'randn(2, 3), randn(2, 3)' "
           f"--html {files / 'r.html'} | head -1; exit ${{PIPESTATUS[0]}}")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("tracer-dump good.py:f") and len(p.stdout.splitlines()) == 1
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr
    assert (files / "r.html").stat().st_size > 1000


@pytest.mark.parametrize("path", ["a_file", "missing_parent/x/y"])
def test_a_bad_trace_directory_warns_and_the_program_runs(tmp_path, path):
    (tmp_path / "a_file").write_text("")
    (tmp_path / "missing_parent").write_text("")  # a file where a directory is needed
    env = dict(os.environ, TRACER_TRACE=str(tmp_path / path),
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    prog = ("import torch, tracer\n"
            "f = tracer.compile(lambda x: x.sin() + 1)\n"
            "x = torch.randn(3)\n"
            "assert torch.equal(f(x), x.sin() + 1) and tracer.stats().graphs == 1\n"
            "print('ran')\n")
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ran", p.stderr
    warn = [ln for ln in p.stderr.splitlines() if "TRACER_TRACE" in ln]
    assert len(warn) == 1 and "running without it" in warn[0] and "Traceback" not in p.stderr


def _f(x):
    return x + 1


@pytest.mark.parametrize("entry,kwargs,error,says", [
    ("compile", dict(fullgraph="yes"), TypeError, "fullgraph must be True or False"),
    ("compile", dict(check=-1), ValueError, "check is a number of calls"),
    ("compile", dict(check="x"), TypeError, "check must be True, False or a number"),
    ("compile", dict(check_atol=-1.0), ValueError, "check_atol must be >= 0"),
    ("compile", dict(backend="nosuch"), ValueError, "unknown backend 'nosuch'"),
    ("compile", dict(backend=3), TypeError, "backend must be a name or a callable"),
    ("compile", dict(dynamic="yes"), TypeError, "dynamic must be None, True or False"),
    ("capture", dict(backend="nosuch"), ValueError, "unknown backend"),
    ("capture", dict(fullgraph=1), TypeError, "fullgraph must be"),
])
def test_entry_point_options_are_checked_where_given(entry, kwargs, error, says):
    with pytest.raises(error, match=f"tracer.{entry}: " + says.replace("(", r"\(").replace(")", r"\)")):
        tracer.compile(_f, **kwargs) if entry == "compile" else tracer.capture(**kwargs)


def test_entry_points_refuse_what_they_cannot_call():
    with pytest.raises(TypeError, match="tracer.compile expects a function or an nn.Module, got int"):
        tracer.compile(3)
    with pytest.raises(TypeError, match="tracer.explain expects a function"):
        tracer.explain("f")
    with pytest.raises(TypeError, match=r"tracer.export: args must be a tuple .* write \(x,\)"):
        tracer.export(_f, torch.ones(2))
    # and good options still work, with the result checked and captured
    x = torch.randn(3)
    f = tracer.compile(_f, check=2, check_rtol=0, check_atol=0.0)
    assert torch.equal(f(x), x + 1) and torch.equal(f(x), x + 1)


@pytest.mark.parametrize("name, value, default", [("TRACER_RECOMPILE_LIMIT", "abc", 8),
                                                  ("TRACER_LOOP_RESUMES", "-1", 0)])
def test_a_bad_number_in_the_environment_is_one_line_and_the_default(name, value, default):
    """`TRACER_RECOMPILE_LIMIT=abc` made `import tracer` fail with a ValueError traceback."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    field = {"TRACER_RECOMPILE_LIMIT": "recompile_limit", "TRACER_LOOP_RESUMES": "loop_resume_limit"}[name]
    done = subprocess.run([sys.executable, "-c", f"import tracer; print(tracer.config.{field})"],
                          env=dict(os.environ, PYTHONPATH=root, **{name: value}), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == str(default), done.stderr
    said = [line for line in done.stderr.splitlines() if name in line]
    assert len(said) == 1 and "Traceback" not in done.stderr, done.stderr
