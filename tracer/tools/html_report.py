"""`tracer-dump --html report.html`: one self-contained page (no scripts, no external files).

Per traced frame: the function's source annotated line by line (captured into a graph / ran
as Python / graph break, with the reason next to the break line), each graph drawn as an SVG
(by Graphviz's `dot` when it is installed, else by tracer/tools/graph_svg.py's own layout: a picture
either way), the graph code and node table, the guards, the rewritten code as Python, and
both bytecodes.
"""
import html
import linecache
import shutil
import subprocess
import sys

from .graph_svg import COLORS, drawn_nodes, graph_svg, label_lines

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em} h2{font-size:1.2em;border-bottom:2px solid #369;padding-bottom:.2em;margin-top:2em}
h3{font-size:1em;color:#369;margin-bottom:.3em}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:12px;line-height:1.35}
table{border-collapse:collapse;font-size:12px;font-family:monospace}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top;max-width:36em;overflow-wrap:anywhere}
th{background:#eef}
.src{font-family:monospace;font-size:12px;white-space:pre;background:#fff;border:1px solid #ddd}
.src div{padding:0 .5em}
.captured{background:#e6ffec} .fallback{background:#ffebe9} .break{background:#ffc8c0;font-weight:bold}
.lineno{color:#888;display:inline-block;width:3.5em}
.why{color:#b00;font-style:italic;margin-left:2em}
.badge{padding:1px 6px;border-radius:3px;font-size:.8em;color:#fff}
.badge.captured{background:#2a7} .badge.fallback{background:#c33}
.legend span{padding:0 .5em;margin-right:.5em}
.graph{overflow:auto;border:1px solid #ddd;max-height:900px} .graph svg{height:auto;max-width:none}
.fit:checked ~ .graph svg{width:100%} .graphbox label{font-size:.85em;color:#369}
.breakitem,.why{overflow-wrap:anywhere} details{overflow-x:auto} .note{color:#666;font-style:italic}
details{margin:.4em 0} summary{cursor:pointer;color:#369}
"""


def graph_dot(gm, name="graph"):
    """Graphviz DOT text for an FX graph: one box per op, edges from each input; parameters and
    buffers folded into the labels of the ops that read them (graph_svg.py says why)."""
    def q(s):
        return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'
    lines = [f"digraph {q(name)} {{", "rankdir=TB;", 'node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];']
    drawn = set(drawn_nodes(gm))
    for n in gm.graph.nodes:
        if n not in drawn:
            continue
        label = "\\n".join(label_lines(n))  # (Graphviz's line break; q() doubles it, undone below)
        lines.append(f"{q(n.name)} [label={q(label).replace(chr(92) * 2 + 'n', chr(92) + 'n')}, "
                     f"fillcolor={q(COLORS.get(n.op, '#fff'))}];")
        for inp in n.all_input_nodes:
            if inp in drawn:
                lines.append(f"{q(inp.name)} -> {q(n.name)};")
    lines.append("}")
    return "\n".join(lines)


def render_svg(dot_text):
    """(svg text, None) or (None, message) when Graphviz's `dot` is unavailable or fails."""
    dot = shutil.which("dot")
    if dot is None:
        return None, "Graphviz `dot` was not found on PATH"
    try:
        res = subprocess.run([dot, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"Graphviz `dot` failed: {e}"
    if res.returncode != 0:
        return None, f"Graphviz `dot` failed: {res.stderr.strip()[:300]}"
    svg = res.stdout
    return svg[svg.find("<svg"):], None


def _source_block(frame, all_breaks):
    filename = frame["filename"]
    lines = frame["lines"]
    status = {ln: "captured" for ln in lines["captured"]}
    status.update({ln: "fallback" for ln in lines["fallback"]})
    breaks = {}
    for b in all_breaks:
        if b["filename"] == filename and b["lineno"]:
            breaks.setdefault(b["lineno"], []).append(b["reason"])
    own = set(lines["captured"]) | set(lines["fallback"]) | {frame["firstlineno"]}
    first, last = min(own), max(own)
    rows = []
    for ln in range(first, last + 1):
        text = linecache.getline(filename, ln).rstrip("\n")
        cls = "break" if ln in breaks else status.get(ln, "")
        why = "".join(f'<span class="why">graph break: {html.escape(r)}</span>' for r in breaks.get(ln, ()))
        rows.append(f'<div class="{cls}" id="f{frame["index"]}-L{ln}"><span class="lineno">{ln}</span>'
                    f'{html.escape(text)}{why}</div>')
    return '<div class="src">' + "".join(rows) + "</div>"


def _table(rows):
    keys = ("op", "name", "target", "shape", "module", "source", "args", "kwargs")
    head = "<tr>" + "".join(f"<th>{'opcode' if k == 'op' else k}</th>" for k in keys) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{html.escape(r.get(k, ''))}</td>" for k in keys) + "</tr>" for r in rows)
    return f"<table>{head}{body}</table>"


def _pre(text):
    return f"<pre>{html.escape(text)}</pre>"


def _frame_html(fr, gms, svg_cache, all_breaks, warnings):
    out = [f'<h2 id="frame-{fr["index"]}">frame {fr["index"]}: {html.escape(fr["qualname"])} '
           f'<span class="badge {fr["status"]}">{fr["status"]}</span></h2>',
           f'<p>{html.escape(fr["filename"])}:{fr["firstlineno"]} &middot; cache entry {fr["entry_index"]} &middot; '
           f'{sum(g["ops"] for g in fr["graphs"])} ops &middot; {len(fr["guards"])} guards</p>',
           "<h3>Source</h3>", _source_block(fr, all_breaks)]
    if fr["breaks"]:
        out.append("<h3>Graph breaks</h3><ul>")
        for b in fr["breaks"]:
            out.append(f'<li class="breakitem"><b>{html.escape(b["reason"])}</b> at '
                       f'{html.escape(str(b["filename"]))}:{b["lineno"]}<br><code>{html.escape(b["line"])}</code></li>')
        out.append("</ul>")
    for g, gm in zip(fr["graphs"], gms):
        out.append(f'<h3>Graph {g["index"]} ({g["ops"]} ops)</h3>')
        svg, note = svg_cache(gm, f"frame{fr['index']}_graph{g['index']}")
        fit = f"fit-{fr['index']}-{g['index']}"  # zoom without a script: a checkbox and CSS
        out.append(f'<div class="graphbox"><input type="checkbox" class="fit" id="{fit}">'
                   f'<label for="{fit}">fit to page width</label><div class="graph">{svg}</div></div>')
        if note:
            warnings.add(note)
        out.append("<details open><summary>graph code</summary>" + _pre(g["code"]) + "</details>")
        out.append("<details open><summary>nodes</summary>" + _table(g["nodes"]) + "</details>")
    out.append("<h3>Guards</h3><ol start=\"0\" class=\"guards\">" +
               "".join(f"<li>{html.escape(s.split('] ', 1)[-1])}</li>" for s in fr["guards"]) + "</ol>")
    if fr["rewritten_python"]:
        out.append("<h3>Rewritten code, as Python</h3>" + _pre(fr["rewritten_python"]))
    out.append("<h3>Bytecode</h3><details><summary>original</summary>" + _pre(fr["bytecode"]["original"]) +
               "</details><details><summary>rewritten</summary>" +
               _pre(fr["bytecode"]["rewritten"] or "(none: the original code runs)") + "</details>")
    return "\n".join(out)


def render_html(report, recorded):
    """The page as a string; `recorded` holds the live (code, entry) pairs (for the graphs)."""
    warnings = set()

    def svg_for(gm, name):
        svg, why = render_svg(graph_dot(gm, name))
        if svg is None:  # drawn here instead; the page says how
            return graph_svg(gm, name), f"{why}: graphs drawn by tracer-dump's own layout"
        return svg, None

    all_breaks = [b for fr in report["frames"] for b in fr["breaks"]]
    body = []
    for fr, (_code, entry) in zip(report["frames"], recorded):
        gms = getattr(entry, "graphs", None) or ([entry.graph] if entry.graph is not None else [])
        body.append(_frame_html(fr, gms, svg_for, all_breaks, warnings))
    inputs = ", ".join(report["inputs"] + [f"{k}={v}" for k, v in report["kwargs"].items()])
    toc = "".join(f'<li><a href="#frame-{f["index"]}">{html.escape(f["qualname"])}</a> '
                  f'<span class="badge {f["status"]}">{f["status"]}</span></li>' for f in report["frames"])
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tracer-dump {html.escape(report['target'])}</title>
<style>{_CSS}</style></head><body>
<h1>tracer-dump {html.escape(report['target'])}</h1>
<p>inputs: {html.escape(inputs or '(none)')} &middot; schema_version {report['schema_version']}</p>
<p class="legend"><span class="captured">captured into a graph</span><span class="fallback">runs as Python</span>
<span class="break">graph break</span></p>
{''.join(f'<p class="note">{html.escape(w)}</p>' for w in sorted(warnings))}
<ul>{toc}</ul>
{''.join(body)}
</body></html>
"""
    return page, sorted(warnings)


def write_html(report, recorded, path):
    page, warnings = render_html(report, recorded)
    for w in warnings:  # (no Graphviz is a normal set-up, said in the page only, not on every run)
        if "was not found" not in w:
            print(f"tracer-dump: {w}", file=sys.stderr)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
