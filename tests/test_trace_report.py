"""Pictures and timelines without system packages (issue 14): graphs drawn by tracer-dump's
own layout when Graphviz is absent, the structured trace (TRACER_TRACE=dir) of a whole run,
and its HTML timeline; checked in headless Chromium where it is installed (CI installs it)."""
import json
import os
import struct
import subprocess
import sys
import zlib

import pytest
import torch

import tracer
from tracer.tools import dump, graph_svg, html_report, trace_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "dump_target.py")
CHROMIUM = "/usr/bin/chromium"
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

PROGRAM = '''
import torch, tracer

def f(x):
    y = x.sin() * 2
    print("shape", tuple(y.shape))  # a graph break
    return y + 1

g = tracer.compile(f)
for n in (3, 3, 4):
    g(torch.randn(n))
'''


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def _encoder_page(tmp_path, monkeypatch):
    module, fn = dump.load_target(f"{EXAMPLE}:encoder")
    args, kwargs = dump.example_inputs(module, "encoder")
    _out, recorded = dump.trace_call(fn, args, kwargs)
    report = dump.build_report(f"{EXAMPLE}:encoder", args, kwargs, recorded)
    monkeypatch.setattr(html_report.shutil, "which", lambda name: None)  # no Graphviz
    path = tmp_path / "encoder.html"
    html_report.write_html(report, recorded, str(path))
    return path, report, recorded


def test_graphs_are_drawn_without_graphviz(tmp_path, monkeypatch, capsys):
    path, report, recorded = _encoder_page(tmp_path, monkeypatch)
    page = path.read_text()
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="fxgraph"') == 1
    svg = page.split('class="fxgraph"', 1)[1].split("</svg>", 1)[0]
    gm = recorded[0][1].graph
    drawn = graph_svg.drawn_nodes(gm)
    assert svg.count("<rect") == len(drawn) and len(drawn) > 10
    assert svg.count("<path d=\"M") >= len(drawn) - 1, "an edge per input"
    for n in drawn:
        assert f">{n.name}<" in svg
    assert "graphs drawn by tracer-dump" in page and "<script" not in page
    assert "own layout" not in capsys.readouterr().err  # (said in the page)
    # parameters are folded into the ops that read them: no box of their own, named in a label
    params = [n for n in gm.graph.nodes if graph_svg.is_state(n)]
    assert len(params) > 10 and not set(params) & set(drawn)
    assert "params: " in svg and "self_attn.in_proj_weight" in svg
    _boxes, (width, _h) = graph_svg.layout(drawn)
    assert width < 1600


def test_layout_puts_every_node_below_its_inputs():
    def f(x, y):
        a = x.sin() + y
        b = a.relu() * x
        return a, b.sum()

    c = tracer.compile(f)
    c(torch.randn(3), torch.randn(3))
    gm = c.entries[0].graph
    nodes = graph_svg.drawn_nodes(gm)
    boxes, (w, h) = graph_svg.layout(nodes)
    for n in nodes:
        x, y, bw, bh = boxes[n]
        assert 0 <= x and x + bw <= w and 0 <= y and y + bh <= h
        for i in n.all_input_nodes:
            assert boxes[i][1] + boxes[i][3] < y, (i.name, n.name)
    rows = {}
    for n in nodes:  # boxes in one layer do not overlap
        rows.setdefault(boxes[n][1], []).append(boxes[n])
    for row in rows.values():
        row.sort()
        assert all(a[0] + a[2] <= b[0] for a, b in zip(row, row[1:]))


def _run_traced_program(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": ROOT, "TRACER_TRACE": str(tmp_path / "trace")}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    files = os.listdir(tmp_path / "trace")
    assert len(files) == 1 and files[0].endswith(".jsonl")
    return tmp_path / "trace" / files[0]


@pytest.mark.one_version  # TRACER_TRACE in a subprocess: a file format
def test_structured_trace_holds_the_same_events_as_stats(tmp_path):
    path = _run_traced_program(tmp_path)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    # call 1: f traced (graph, break) + its resume; call 2: hits; call 3: both recompile
    assert kinds.count("frame") == 4 and kinds.count("break") == 2 and kinds.count("recompile") == 2
    assert kinds.count("graph") == 4
    brk = next(e for e in events if e["kind"] == "break")
    assert brk["reason"].startswith("print() is I/O") and brk["where"].endswith("prog.py:6")
    rec = next(e for e in events if e["kind"] == "recompile")
    assert "size mismatch" in rec["reason"] and rec["failed"]
    graph = next(e for e in events if e["kind"] == "graph")
    assert "def forward" in graph["code"] and graph["ops"] == 2
    assert all({"kind", "frame", "time", "thread"} <= set(e) for e in events)


@pytest.mark.one_version  # TRACER_TRACE in a subprocess: a file format
def test_trace_timeline_page(tmp_path):
    path = _run_traced_program(tmp_path)
    out = tmp_path / "timeline.html"
    assert dump.main(["--trace", str(path), "--html", str(out)]) == 0
    page = out.read_text()
    assert 'class="timeline"' in page and "<script" not in page
    assert page.count("<title>frame f ") == 2 and "print() is I/O" in page
    assert "2&times; break" in page and "size mismatch" in page
    assert dump.main(["--trace", str(path)]) == 2  # --trace needs --html: one line, no traceback


# ---- a real browser: the picture is drawn ---------------------------------------------------

def _png_pixels(data):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, rows, prev = zlib.decompress(idat), [], bytearray(width * bpp)
    stride = width * bpp
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.one_version  # a browser renders the page
def test_headless_chromium_shows_a_drawn_graph_without_graphviz(tmp_path, monkeypatch):
    path, _report, recorded = _encoder_page(tmp_path, monkeypatch)
    gm = recorded[0][1].graph
    only = tmp_path / "graph.html"  # the picture alone, at the top of a page
    only.write_text(f"<!DOCTYPE html><html><body style='margin:0;background:#fff'>{graph_svg.graph_svg(gm)}</body></html>")
    shot = tmp_path / "graph.png"
    res = subprocess.run([CHROMIUM, *CHROME_FLAGS, f"--screenshot={shot}", "--window-size=1400,1600",
                          f"file://{only}"], capture_output=True, text=True, timeout=180)
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    width, height, bpp, rows = _png_pixels(shot.read_bytes())
    fills = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in graph_svg.COLORS.values()}
    colored = sum(1 for row in rows for x in range(0, width * bpp, bpp) if tuple(row[x:x + 3]) in fills)
    dark = sum(1 for row in rows for x in range(0, width * bpp, bpp) if sum(row[x:x + 3]) < 150)
    assert colored > 5_000, "node boxes are filled with their op colours"
    assert dark > 1_000, "text, borders and edges are drawn"


# ---- pictures of real models, drawn for reading --------------------------------------------------

def _model_graphs():
    """(name, GraphModule) for a small CNN, an nn.TransformerEncoder and a tiny GPT2 (when
    transformers is installed)."""
    out = []

    def grab(name, model, *args, **kwargs):
        gms = []
        c = tracer.compile(model, backend=lambda gm, ex: (gms.append(gm), gm.forward)[1])
        with torch.no_grad():
            got = c(*args, **kwargs)
            want = model(*args, **kwargs)
        got, want = (getattr(got, "logits", got), getattr(want, "logits", want))
        assert torch.allclose(got, want, atol=1e-5) and len(gms) == 1, name
        out.append((name, gms[0]))

    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 16, 3), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10)).eval()
    grab("cnn", cnn, torch.randn(2, 3, 16, 16))
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, batch_first=True)
    grab("encoder", torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval(), torch.randn(2, 8, 32))
    try:
        import transformers
    except ImportError:
        return out
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100))
    grab("gpt2", gpt2.eval(), input_ids=torch.randint(0, 100, (2, 8)))
    return out


def test_model_pictures_fit_a_page_with_parameters_folded():
    """Every parameter and buffer is named inside the op that reads it (no box of its own),
    every node sits below its inputs, and the picture is at most 1600 px wide: a CNN, an
    nn.TransformerEncoder and a tiny GPT2 (the last three used to be 3023, 3229 and 10586 px)."""
    for name, gm in _model_graphs():
        drawn = graph_svg.drawn_nodes(gm)
        state = [n for n in gm.graph.nodes if graph_svg.is_state(n)]
        assert state and not set(state) & set(drawn), name
        labels = {n: "\n".join(graph_svg.label_lines(n)) for n in drawn}
        for p in state:  # each parameter is named in (at least) one of its users' labels, or counted
            assert any(graph_svg.state_name(p) in labels[u] or "more)" in labels[u] for u in p.users), (name, p)
        boxes, (w, h) = graph_svg.layout(drawn)
        assert w <= 1600, (name, w)
        for n in drawn:
            for i in n.all_input_nodes:
                if i in boxes:
                    assert boxes[i][1] + boxes[i][3] < boxes[n][1], (name, i.name, n.name)


@pytest.mark.one_version  # a browser renders the pictures; no Python bytecode involved
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="headless Chromium is not installed")
def test_model_pictures_render_at_page_width(tmp_path):
    """The three pictures in headless Chromium at 1600 px: the page does not scroll sideways
    (the picture fits), and the boxes are drawn (their fill colours are on the screenshot)."""
    for name, gm in _model_graphs():
        page = tmp_path / f"{name}.html"
        page.write_text("<!DOCTYPE html><html><body style='margin:0;background:#fff'>"
                        f"{graph_svg.graph_svg(gm)}</body></html>")
        shot = tmp_path / f"{name}.png"
        res = subprocess.run([CHROMIUM, *CHROME_FLAGS, f"--screenshot={shot}", "--window-size=1600,1200",
                              f"file://{page}"], capture_output=True, timeout=120)
        assert shot.exists(), res.stderr.decode()[-500:]
        width, height, bpp, rows = _png_pixels(shot.read_bytes())
        fills = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in graph_svg.COLORS.values()}
        colored = sum(1 for row in rows[::4] for x in range(0, width * bpp, bpp * 4) if tuple(row[x:x + 3]) in fills)
        assert width == 1600 and colored > 50, (name, colored)


@pytest.mark.parametrize("content", [b'{"kind": "frame", "frame": "f", "ti', b"plain text\n", b'{"a": 1}\n',
                                     b"\xff\xfe\x00garbage", b"[1, 2]\n"])
def test_a_trace_file_that_is_not_one_is_a_one_line_error(tmp_path, capsys, content):
    """`tracer-dump --trace` on a file that is not a trace (text, JSON of another shape, bytes)
    printed a traceback (JSONDecodeError, KeyError, UnicodeDecodeError, TypeError): now one
    line and exit status 2. A trace whose last line was cut off (the run killed while writing
    it) is drawn without that line."""
    path, out = tmp_path / "t.jsonl", tmp_path / "t.html"
    path.write_bytes(content)
    assert dump.main(["--trace", str(path), "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracer-dump: --trace") and len(err.strip().splitlines()) == 1, err
    good = b'{"kind": "frame", "frame": "f", "time": 1.0, "where": "a.py:1"}\n'
    path.write_bytes(good + b'{"kind": "graph", "frame": "f", "ti')
    assert dump.main(["--trace", str(path), "--html", str(out)]) == 0
    assert "(1 events)" in capsys.readouterr().err
