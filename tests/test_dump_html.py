"""tracer-dump --html: the page's content, Graphviz pictures, and a real headless browser."""
import os
import shutil
import subprocess

import pytest

import tracer
from tracer.tools import dump, html_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "dump_target.py")
CHROMIUM = "/usr/bin/chromium"
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def _report(name):
    module, fn = dump.load_target(f"{EXAMPLE}:{name}")
    args, kwargs = dump.example_inputs(module, name)
    _out, recorded = dump.trace_call(fn, args, kwargs)
    return dump.build_report(f"{EXAMPLE}:{name}", args, kwargs, recorded), recorded


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("html")
    out = {}
    for name in ("encoder", "pipeline"):
        report, recorded = _report(name)
        path = str(folder / f"{name}.html")
        html_report.write_html(report, recorded, path)
        out[name] = (path, report)
    yield out
    tracer.reset()


def _break_lineno():
    return next(i for i, line in enumerate(open(EXAMPLE), 1) if "print(f\"step" in line)


def test_page_has_source_graphs_guards_bytecode(pages):
    path, report = pages["encoder"]
    page = open(path, encoding="utf-8").read()
    frame = report["frames"][0]
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page.split("<svg")[0]
    for node in frame["graphs"][0]["nodes"]:
        assert node["name"] in page
    # (a module is guarded by its class and what was read of it, not its identity)
    assert "type(G[&#x27;model&#x27;]) is torch.nn.modules.transformer.TransformerEncoder" in page
    assert 'class="captured" id="f0-L18"' in page  # `return model(x)` was captured
    assert page.count("<li>") >= len(frame["guards"])
    assert "x: tensor float32 cpu shape (2, 8, 32)" in page
    # the graph's inputs: x, then the parameters read from the module (modules are inputs),
    # each module read once into a temporary
    assert "RETURN_VALUE" in page and "= model._modules[&#x27;layers&#x27;]._modules" in page
    assert "___graph_out = graph_0(x, ___tmp" in page


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
@pytest.mark.one_version  # Graphviz and a browser render the page; no Python bytecode involved
def test_graphs_drawn_as_inline_svg(pages):
    page = open(pages["encoder"][0], encoding="utf-8").read()
    assert page.count("<svg") == 1 and "model_layers_0_self_attn" in page.split("<svg", 1)[1]


def test_missing_dot_draws_anyway_and_says_so(monkeypatch, tmp_path, capsys):
    report, recorded = _report("encoder")
    monkeypatch.setattr(html_report.shutil, "which", lambda name: None)
    html_report.write_html(report, recorded, str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    assert 'class="fxgraph"' in page and "Graphviz `dot` was not found" in page and "own layout" in page
    assert "dot" not in capsys.readouterr().err  # said in the page, not on every run


def test_break_lines_marked(pages):
    path, report = pages["pipeline"]
    page = open(path, encoding="utf-8").read()
    line = _break_lineno()
    assert f'class="break" id="f{_frame_of(report, "log_step")}-L{line}"' in page
    assert "graph break: " in page and "Tensor.item()" in page


def _frame_of(report, qualname):
    return next(f["index"] for f in report["frames"] if f["qualname"] == qualname)


def _chromium(*args, timeout=120):
    return subprocess.run([CHROMIUM, *CHROME_FLAGS, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.one_version  # Graphviz and a browser render the page; no Python bytecode involved
def test_headless_browser_dom(pages):
    for name, (path, report) in pages.items():
        res = _chromium("--dump-dom", f"file://{path}")
        assert res.returncode == 0, res.stderr[-2000:]
        dom = res.stdout
        assert "<svg" in dom or "Graphviz `dot`" in dom
        for frame in report["frames"]:
            for g in frame["graphs"]:
                assert all(n["name"] in dom for n in g["nodes"] if n["op"] != "output")
            for guard in frame["guards"][:20]:
                from html import escape
                assert escape(guard.split("] ", 1)[1], quote=False) in dom
            for b in frame["breaks"]:
                assert f'id="f{frame["index"]}-L{b["lineno"]}"' in dom or b["filename"] != frame["filename"]
    assert "Tensor.item() needs the tensor" in _chromium("--dump-dom", f"file://{pages['pipeline'][0]}").stdout


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.one_version  # Graphviz and a browser render the page; no Python bytecode involved
def test_headless_browser_screenshot(pages, tmp_path):
    shot = tmp_path / "encoder.png"
    res = _chromium(f"--screenshot={shot}", "--window-size=1300,1400", f"file://{pages['encoder'][0]}")
    assert res.returncode == 0 and shot.exists() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
