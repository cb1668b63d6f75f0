"""tracer-dump: every section checked against the live cache entries of the traced call."""
import importlib.util
import json
import re
import os
import subprocess
import sys

import pytest
import torch

import tracer
from tracer.tools import dump
from tracer.tools.pyrender import render_code
from tracer.tools.text import render_text
from tracer.runtime import cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "dump_target.py")

TARGET_SRC = '''
import torch

counter = {"n": 0}


class Box:
    pass


box = Box()
box.w = 0


def helper(y):
    print("value", y.sum())  # BREAK
    return y * 2


def mutating(x, y, xs):
    z = torch.sin(x) + y
    xs.append(z.relu())
    counter["n"] += 1
    box.w = 7
    return z * 2, len(xs)


def caller(x):
    return helper(x + 1) - 1


def example_inputs():
    return (torch.randn(3, 4), torch.randn(3, 4), [])


def example_inputs_caller():
    return (torch.randn(5),), {}
'''


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "dump_subject.py"
    path.write_text(TARGET_SRC)
    yield str(path)
    tracer.reset()


def _break_line(path):
    return next(i for i, line in enumerate(open(path), 1) if "# BREAK" in line)


def _live(code_name):
    """(code, entries) of every code object with cache entries named `code_name`."""
    return [(c, cc.entries) for c, cc in list(cache._CACHES.items()) if c.co_qualname == code_name and cc.entries]


def run_json(capsys, *argv):
    assert dump.main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_parse_inputs_shapes_dtypes_and_kwargs():
    args, kwargs = dump.parse_inputs("randn(4, 8), zeros(3, dtype=float64), 2, -1.5, 'a', (1, 2), scale=0.5")
    assert args[0].shape == (4, 8) and args[0].dtype == torch.float32
    assert args[1].dtype == torch.float64 and torch.equal(args[1], torch.zeros(3, dtype=torch.float64))
    assert args[2:] == (2, -1.5, "a", (1, 2)) and kwargs == {"scale": 0.5}
    (idx,), _ = dump.parse_inputs("randint(10, 2, 3)")
    assert idx.shape == (2, 3) and idx.dtype == torch.int64 and int(idx.max()) < 10


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "randn(4).sum()", "torch.randn(3)",
                                  "randn(x)", "randn(3, dtype=print)", "*[1]", "open('f')", "randn(2.5)"])
def test_parse_inputs_rejects_code(text):
    with pytest.raises(ValueError):
        dump.parse_inputs(text)


def test_example_inputs_convention(target):
    module, fn = dump.load_target(f"{target}:caller")
    args, kwargs = dump.example_inputs(module, "caller")  # example_inputs_caller wins
    assert args[0].shape == (5,) and kwargs == {}
    args, kwargs = dump.example_inputs(module, "mutating")  # falls back to example_inputs
    assert len(args) == 3 and isinstance(args[2], list)


def test_json_round_trips_graphs_ops_guards(target, capsys):
    report = run_json(capsys, f"{target}:mutating")
    assert report["schema_version"] == dump.SCHEMA_VERSION
    [(code, entries)] = _live("mutating")
    [entry] = entries
    [frame] = report["frames"]
    assert frame["status"] == "captured" and frame["breaks"] == [] and frame["entry_index"] == 0
    [graph] = frame["graphs"]
    assert graph["code"] == entry.graph.code.strip("\n")
    assert graph["ops"] == entry.ops
    assert [n["name"] for n in graph["nodes"]] == [n.name for n in entry.graph.graph.nodes]
    assert [n["op"] for n in graph["nodes"]] == [n.op for n in entry.graph.graph.nodes]
    targets = {n["target"] for n in graph["nodes"]}
    assert {"torch.sin", "operator.add", "relu", "operator.mul"} <= targets
    assert frame["guards"] == entry.guards.describe().splitlines()
    assert any("x: tensor float32 cpu shape (3, 4)" in g for g in frame["guards"])
    assert frame["bytecode"]["original"].count("\n") > 5 and "STORE_FAST" in frame["bytecode"]["original"]
    assert "___graph_out" in frame["bytecode"]["rewritten"]
    lines = set(range(code.co_firstlineno + 1, code.co_firstlineno + 6))
    assert lines <= set(frame["lines"]["captured"]) and frame["lines"]["fallback"] == []


def _live_breaks(entry):
    """(reason, lineno) of every break of a live entry, read straight from its attributes."""
    out = [(b.reason, b.lineno) for b in getattr(entry, "breaks", None) or ()]
    if entry.code is None and entry.reason:
        out.append((entry.reason, int(entry.location.rpartition(":")[2])))
    return out


def test_breaks_and_callee_traced_through_hook(target, capsys):
    report = run_json(capsys, f"{target}:caller")
    names = [f["name"] for f in report["frames"]]
    assert names[:2] == ["caller", "helper"]  # the callee is its own frame, traced via the hook
    line = _break_line(target)
    for frame in report["frames"][:2]:
        [(code, [entry])] = _live(frame["qualname"])
        live = _live_breaks(entry)
        assert [(b["reason"], b["lineno"]) for b in frame["breaks"]][:len(live)] == live
        assert any("print" in b["reason"] for b in frame["breaks"])
        assert frame["status"] == ("fallback" if entry.code is None else "captured")
        if entry.code is None:
            assert frame["rewritten_python"] is None and frame["bytecode"]["rewritten"] is None
        else:
            assert frame["rewritten_python"].startswith(f"def {frame['name']}(")
    helper = report["frames"][1]
    [brk] = [b for b in helper["breaks"] if "print" in b["reason"]]
    assert brk["filename"] == target and brk["lineno"] == line
    assert brk["line"] == 'print("value", y.sum())  # BREAK'
    assert helper["lines"]["break"] == [line]


def test_future_breaks_list_is_reported():
    class Brk:
        reason, filename, lineno, user_stack = "data-dependent branch", __file__, 3, ["f at x.py:1"]

    class E:
        code, reason, location, breaks = object(), None, None, [Brk()]
    from tracer.runtime.logs import breaks_of
    assert breaks_of(E()) == [{"reason": "data-dependent branch", "filename": __file__, "lineno": 3,
                               "user_stack": ["f at x.py:1"]}]


def test_text_output_sections(target, capsys):
    assert dump.main([f"{target}:mutating", "--no-color"]) == 0
    text = capsys.readouterr().out
    [(code, [entry])] = _live("mutating")
    assert "\x1b[" not in text
    for line in entry.graph.code.strip().splitlines():
        assert line.rstrip() in text
    assert "opcode" in text and "call_function" in text and "torch.sin" in text
    for g in entry.guards.describe().splitlines():
        assert g in text
    assert "-- original bytecode --" in text and "-- rewritten bytecode --" in text
    assert "___graph_out = graph_0(x, y)" in text
    assert render_text(dump.build_report("t", (), {}, [(code, entry)]), color=True).count("\x1b[") > 4


def test_text_shows_break_with_caret(target, capsys):
    assert dump.main([f"{target}:caller", "--no-color"]) == 0
    text = capsys.readouterr().out
    line = _break_line(target)
    assert f"graph break: print() is I/O" in text and f"{target}:{line}" in text
    src_row = next(r for r in text.splitlines() if r.strip().startswith(f"{line} |"))
    caret_row = text.splitlines()[text.splitlines().index(src_row) + 1]
    assert caret_row.index("^") == src_row.index("print(")


def test_rewritten_python_is_derived_from_the_code(target):
    module, fn = dump.load_target(f"{target}:mutating")
    args, _ = dump.example_inputs(module, "mutating")
    _out, recorded = dump.trace_call(fn, args, {})
    [(code, entry)] = recorded
    text = render_code(entry.code, [entry.graph])
    assert text.startswith("def mutating(x, y, xs):")
    assert "___graph_out = graph_0(x, y)" in text
    # the write targets are fetched first (all reads before any write), then written
    assert "[:] = " in text and ".clear()" in text and ".update(" in text and ".w = " in text
    for name in ("xs", "counter", "box"):
        assert f" = {name}" in text or f"= G['{name}']" in text or name in text, name
    assert text.splitlines()[-1].strip().startswith("return ___tmp")
    # derived, not canned: a different function renders differently
    f = tracer.compile(lambda a: a.cos() * 3)
    f(torch.randn(2))
    assert "return" in render_code(f.entries[0].code, [f.entries[0].graph]) and "xs[:]" not in \
        render_code(f.entries[0].code, [f.entries[0].graph])


def test_a_graph_given_to_its_backend_rewritten_keeps_its_name():
    """The eager backend runs a graph with an inference-mode block rewritten (graph/
    inference_blocks.py): the rewritten code showed its call as `<untraced>(x)`."""
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return x.sin() + y

    c = tracer.compile(f)
    c(torch.randn(3))
    [entry] = c.entries
    assert "___graph_out = graph_0(x)" in render_code(entry.code, [entry.graph])


def test_export_module_runs_like_the_live_graph(target, tmp_path):
    module, fn = dump.load_target(f"{EXAMPLE}:encoder")
    args, _ = dump.example_inputs(module, "encoder")
    out, recorded = dump.trace_call(fn, args, {})
    from tracer.tools.export import export_graphs
    paths = export_graphs(recorded, str(tmp_path / "exp" / "graphs.py"), target="encoder")
    assert all(os.path.exists(p) for p in paths)
    spec = importlib.util.spec_from_file_location("exported_graphs", paths[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    gm = recorded[0][1].graph
    exported = mod.load(0)
    # the module's parameters and buffers are graph inputs (placeholders named by their path),
    # after the call's own arguments
    model = module.model  # examples/dump_target.py: `encoder(x)` calls the global `model`
    state = {k.replace(".", "_"): v for k, v in [*model.named_parameters(), *model.named_buffers()]}
    inputs = list(args)
    for n in [n for n in gm.graph.nodes if n.op == "placeholder"][len(args):]:
        [t] = [v for k, v in state.items() if n.name.endswith("_" + k)]
        inputs.append(t)
    assert torch.allclose(exported(*inputs)[0], gm(*inputs)[0]) and torch.allclose(exported(*inputs)[0], out)
    assert len(mod.GRAPHS) == 1


def test_encoder_example_is_readable(capsys):
    report = run_json(capsys, f"{EXAMPLE}:encoder")
    [frame] = report["frames"]
    assert frame["status"] == "captured" and frame["graphs"][0]["ops"] > 10
    # torch.nn's modules are inlined: each op names the module it came from
    ops = [n for n in frame["graphs"][0]["nodes"] if n["op"] == "call_function"]
    assert any(n["module"].endswith("self_attn") for n in ops) and any(n["module"].endswith("norm1") for n in ops)
    assert dump.main([f"{EXAMPLE}:encoder", "--no-color"]) == 0
    text = capsys.readouterr().out
    assert max(len(line) for line in text.splitlines() if "call_function" in line) < 240  # args are elided
    assert "TracedGraph(\n" not in text  # long constant reprs are shortened in bytecode listings


@pytest.mark.one_version  # subprocess and console-script plumbing
def test_python_m_tracer_dump_and_console_script(target):
    env = {**os.environ, "PYTHONPATH": ROOT}
    res = subprocess.run([sys.executable, "-m", "tracer", "dump", f"{target}:mutating",
                          "--inputs", "randn(2, 2), randn(2, 2), []"], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "x: tensor float32 cpu shape (2, 2)" in res.stdout and "\x1b[" not in res.stdout
    script = os.path.join(os.path.dirname(sys.executable), "tracer-dump")
    if os.path.exists(script):
        res = subprocess.run([script, f"{target}:caller", "--json"], capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["frames"][0]["name"] == "caller"
    bad = subprocess.run([sys.executable, "-m", "tracer", "dump", f"{target}:mutating", "--inputs", "os.system(1)"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert bad.returncode != 0 and "unsupported expression" in bad.stderr


def test_export_pt2_writes_a_loadable_exported_program(tmp_path, capsys):
    path = tmp_path / "encoder.pt2"
    assert dump.main([f"{EXAMPLE}:encoder", "--export", str(path), "--no-color"]) == 0
    assert "assumptions export does not check" in capsys.readouterr().err
    module, fn = dump.load_target(f"{EXAMPLE}:encoder")
    args, _ = dump.example_inputs(module, "encoder")
    ep = torch.export.load(str(path))
    with torch.no_grad():
        assert torch.allclose(ep.module()(*args), fn(*args), atol=1e-5)


def test_export_pt2_of_a_frame_with_breaks_is_a_clear_error(tmp_path, capsys):
    assert dump.main([f"{EXAMPLE}:pipeline", "--export", str(tmp_path / "p.pt2"), "--no-color"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert re.search(r"needs the whole frame in one graph.*dump_target.py:\d+", err[-1]), err
