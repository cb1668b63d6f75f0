"""`tracer-dump --trace trace.jsonl --html out.html`: a whole program run, from the structured
trace that `TRACER_TRACE=dir` writes (tracer/runtime/records.py: one JSON object per event).

The page: counts by kind; a timeline (time across, one row per frame, a mark per event:
frame traced, graph, graph break, fallback, recompile, recompile limit, internal error;
hover for the reason); graph breaks and fallbacks grouped by reason with where they
happened; recompiles with the guard that failed; every event in a table; each graph's code.
Self-contained: no scripts, no external files.
"""
import collections
import html
import json

MARKS = {  # kind -> (colour, shape, label)
    "frame": ("#3572b0", "circle", "frame traced"),
    "graph": ("#2a7", "square", "graph"),
    "break": ("#d33", "triangle", "graph break"),
    "fallback": ("#888", "square", "ran as Python"),
    "recompile": ("#e80", "diamond", "recompile"),
    "limit": ("#a0a", "diamond", "recompile limit"),
    "internal_error": ("#000", "cross", "internal error"),
}
ROW_H, LEFT, WIDTH, MAX_ROWS = 18, 260, 900, 80


_EVENT_KEYS = ("kind", "frame", "time")  # what every event of a TRACER_TRACE file holds


def read_trace(path):
    """The events of a TRACER_TRACE file. A last line cut off (the run was killed while
    writing it) is left out; anything else that is not an event raises ValueError naming
    the line (the CLI says it in one line, not a traceback)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except UnicodeDecodeError:
        raise ValueError("not a tracer trace (not UTF-8 text)") from None
    numbered = [(i, line) for i, line in enumerate(lines, 1) if line]
    rows = []
    for k, (i, line) in enumerate(numbered):
        try:
            row = json.loads(line)
        except ValueError:
            if k == len(numbered) - 1 and rows:
                break  # (a last line cut off)
            raise ValueError(f"line {i} is not JSON: not a tracer trace") from None
        if not isinstance(row, dict) or any(key not in row for key in _EVENT_KEYS):
            raise ValueError(f"line {i} is not a tracer event (no {', '.join(_EVENT_KEYS)})")
        rows.append(row)
    return rows


def _mark(kind, x, y):
    color, shape, _label = MARKS.get(kind, ("#555", "circle", kind))
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y}" r="4" fill="{color}"/>'
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4}" width="8" height="8" fill="{color}"/>'
    if shape == "triangle":
        return f'<path d="M {x:.1f} {y - 5} L {x + 5:.1f} {y + 4} L {x - 5:.1f} {y + 4} z" fill="{color}"/>'
    if shape == "diamond":
        return f'<path d="M {x:.1f} {y - 5} L {x + 5:.1f} {y} L {x:.1f} {y + 5} L {x - 5:.1f} {y} z" fill="{color}"/>'
    return (f'<path d="M {x - 4:.1f} {y - 4} L {x + 4:.1f} {y + 4} M {x - 4:.1f} {y + 4} L {x + 4:.1f} {y - 4}" '
            f'stroke="{color}" stroke-width="2"/>')


def timeline_svg(events):
    """One row per frame (first MAX_ROWS frames by first appearance), time across."""
    if not events:
        return "<p>(no events)</p>"
    t0 = min(e["time"] for e in events)
    span = max(max(e["time"] for e in events) - t0, 1e-6)
    frames = list(dict.fromkeys(e["frame"] for e in events))[:MAX_ROWS]
    row = {f: i for i, f in enumerate(frames)}
    height = ROW_H * len(frames) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{LEFT + WIDTH + 20}" height="{height}" '
           f'font-family="monospace" font-size="11">']
    for f, i in row.items():
        y = 20 + i * ROW_H
        out.append(f'<text x="4" y="{y + 4}">{html.escape(f[-38:])}</text>'
                   f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + WIDTH}" y2="{y}" stroke="#eee"/>')
    for e in events:
        if e["frame"] not in row:
            continue
        x = LEFT + WIDTH * (e["time"] - t0) / span
        y = 20 + row[e["frame"]] * ROW_H
        tip = f"{e['kind']} {e['frame']} {e.get('where') or ''} {e.get('reason') or ''}".strip()
        out.append(f"<g><title>{html.escape(tip)}</title>{_mark(e['kind'], x, y)}</g>")
    axis_y = height - 12
    out.append(f'<text x="{LEFT}" y="{axis_y}">0 s</text>'
               f'<text x="{LEFT + WIDTH - 60}" y="{axis_y}">{span:.3f} s</text></svg>')
    return "\n".join(out)


def render_trace_html(events, title="tracer trace"):
    counts = collections.Counter(e["kind"] for e in events)
    legend = " ".join(f'<span style="color:{c}">&#9632; {html.escape(label)} ({counts.get(k, 0)})</span>'
                      for k, (c, _s, label) in MARKS.items())
    by_reason = collections.defaultdict(list)
    for e in events:
        if e["kind"] in ("break", "fallback"):
            by_reason[(e["kind"], e.get("reason") or "")].append(e)
    reasons = "".join(
        f"<li><b>{len(es)}&times; {html.escape(kind)}</b>: {html.escape(reason)}<br>"
        + ", ".join(html.escape(f"{x['frame']} at {x.get('where') or '?'}") for x in es[:8])
        + (" &hellip;" if len(es) > 8 else "") + "</li>"
        for (kind, reason), es in sorted(by_reason.items(), key=lambda kv: -len(kv[1])))
    recompiles = "".join(f"<li><b>{html.escape(e['frame'])}</b>: {html.escape(e.get('reason') or '')}</li>"
                         for e in events if e["kind"] in ("recompile", "limit"))
    t0 = min((e["time"] for e in events), default=0.0)
    table = "".join(
        f"<tr><td>{e['time'] - t0:.4f}</td><td>{html.escape(e['kind'])}</td><td>{html.escape(e['frame'])}</td>"
        f"<td>{html.escape(e.get('where') or '')}</td><td>{html.escape((e.get('reason') or '')[:200])}</td></tr>"
        for e in events)
    graphs = "".join(f"<details><summary>{html.escape(e['frame'])}: {e.get('ops', '?')} ops</summary>"
                     f"<pre>{html.escape(e.get('code') or '(code not recorded)')}</pre></details>"
                     for e in events if e["kind"] == "graph")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5em;color:#222}} table{{border-collapse:collapse;font-size:12px;
font-family:monospace}} td,th{{border:1px solid #ddd;padding:2px 6px;text-align:left}} pre{{background:#f6f8fa;
padding:.5em;font-size:12px}} .legend span{{margin-right:1em}} .tl{{overflow-x:auto;border:1px solid #ddd}}</style>
</head><body><h1>{html.escape(title)}</h1>
<p>{len(events)} events &middot; {counts.get('frame', 0)} frames traced &middot; {counts.get('graph', 0)} graphs
&middot; {counts.get('break', 0)} graph breaks &middot; {counts.get('recompile', 0)} recompiles
&middot; {counts.get('internal_error', 0)} internal errors</p>
<p class="legend">{legend}</p>
<h2>Timeline</h2><div class="tl">{timeline_svg(events)}</div>
<h2>Graph breaks and fallbacks by reason</h2><ul>{reasons or '<li>none</li>'}</ul>
<h2>Recompiles</h2><ul>{recompiles or '<li>none</li>'}</ul>
<h2>Graphs</h2>{graphs or '<p>none</p>'}
<h2>All events</h2><table><tr><th>t (s)</th><th>kind</th><th>frame</th><th>where</th><th>reason</th></tr>{table}</table>
</body></html>
"""


def write_trace_html(trace_path, out_path):
    events = read_trace(trace_path)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(render_trace_html(events, title=f"tracer trace {trace_path}"))
    return len(events)
