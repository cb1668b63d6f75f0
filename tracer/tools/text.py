"""Terminal rendering of a tracer-dump report (the dict built by tools.dump.build_report)."""
import json

from tracer.persist import store
from tracer.runtime.logs import caret, source_line

_CODES = {"title": "1;36", "head": "1", "ok": "32", "bad": "1;31", "dim": "2", "warn": "33"}


class _Style:
    def __init__(self, color):
        self.color = color

    def __call__(self, kind, text):
        return f"\x1b[{_CODES[kind]}m{text}\x1b[0m" if self.color else text


def _indent(text, n=4):
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


def _clip(text, width):
    """Shorten in the middle: long FX names differ at both ends (layers_0_... _bias)."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def _table(rows, name_width=34, args_width=60):
    cols = (("opcode", "op", 13), ("name", "name", name_width), ("target", "target", name_width),
            ("shape", "shape", 14), ("module", "module", 24), ("line", "line", 22))
    rows = [dict(r, line=_short_source(r.get("source", ""))) | {"module": r.get("module", "")} for r in rows]
    widths = {k: min(max([len(h)] + [len(r[k]) for r in rows]), w) for h, k, w in cols}
    out = ["  ".join(h.ljust(widths[k]) for h, k, _w in cols) + "  args"]
    for r in rows:
        args = r["args"] + (f" {r['kwargs']}" if r["kwargs"] else "")
        cells = [_clip(r[k], widths[k]).ljust(widths[k]) for _h, k, _w in cols]
        out.append(("  ".join(cells) + "  " + _clip(args, args_width)).rstrip())
    return "\n".join(out)


def _short_source(source):
    """'/long/path/model.py:42' -> 'model.py:42' (the full path is in --json)."""
    return source.rsplit("/", 1)[-1]


def render_break(b, style, indent=4):
    pad = " " * indent
    where = f"{b['filename']}:{b['lineno']}" if b.get("lineno") else "unknown location"
    lines = [pad + style("bad", "graph break: ") + b["reason"], pad + style("dim", f"  at {where}")]
    src = source_line(b.get("filename"), b.get("lineno"))
    if src:
        num = f"{b['lineno']:>5} | "
        lines.append(pad + num + src)
        lines.append(pad + " " * len(num) + style("bad", caret(src)))
    for frame in b.get("user_stack") or ():
        lines.append(pad + style("dim", "  from " + frame))
    return "\n".join(lines)


def render_frame(fr, style):
    out = []
    status = style("ok", "captured") if fr["status"] == "captured" else style("bad", "runs as Python (fallback)")
    out.append(style("title", "=" * 78))
    out.append(style("title", f"frame {fr['index']}: {fr['qualname']}") +
               f"  ({fr['filename']}:{fr['firstlineno']})  cache entry {fr['entry_index']}  {status}")
    out.append(style("title", "=" * 78))
    for g in fr["graphs"]:
        out.append(style("head", f"-- graph {g['index']}: {g['ops']} ops --"))
        out.append(_indent(g["code"]))
        out.append("")
        out.append(_indent(_table(g["nodes"])))
        out.append("")
    if not fr["graphs"]:
        out.append(style("dim", "-- no graph captured --"))
    if fr["breaks"]:
        out.append(style("head", f"-- graph breaks ({len(fr['breaks'])}) --"))
        out.extend(render_break(b, style) for b in fr["breaks"])
        out.append("")
    out.append(style("head", f"-- guards ({len(fr['guards'])}) --"))
    out.extend("    " + g for g in fr["guards"])
    out.append("")
    if fr["rewritten_python"]:
        out.append(style("head", "-- rewritten code, as Python --"))
        out.append(_indent(fr["rewritten_python"]))
        out.append("")
    out.append(style("head", "-- original bytecode --"))
    out.append(_indent(fr["bytecode"]["original"]))
    out.append("")
    out.append(style("head", "-- rewritten bytecode --"))
    out.append(_indent(fr["bytecode"]["rewritten"] or "(none: the original code runs)"))
    out.append("")
    return "\n".join(out)


def render_text(report, color=False):
    style = _Style(color)
    frames = report["frames"]
    nbreaks = sum(len(f["breaks"]) for f in frames)
    ngraphs = sum(len(f["graphs"]) for f in frames)
    inputs = ", ".join(report["inputs"] + [f"{k}={v}" for k, v in report["kwargs"].items()])
    head = [style("head", f"tracer-dump {report['target']}"),
            f"inputs: {inputs or '(none)'}",
            f"{len(frames)} frame(s) traced, {ngraphs} graph(s), "
            f"{sum(g['ops'] for f in frames for g in f['graphs'])} op(s), {nbreaks} graph break(s)", ""]
    for f in frames:
        tag = style("ok", "captured") if f["status"] == "captured" else style("bad", "fallback")
        ops = sum(g["ops"] for g in f["graphs"])
        head.append(f"  [{f['index']}] {f['qualname']:<30} {tag}  {ops} ops, {len(f['guards'])} guards"
                    + (f", {len(f['breaks'])} break(s)" if f["breaks"] else ""))
    head.append("")
    return "\n".join(head + [render_frame(f, style) for f in frames]) + "\n"


def cache_listing(cache_dir, as_json=False):
    """What `tracer-dump --cache DIR` prints: per environment (Python, torch, frametracer), per
    code object, each entry's frame, guards, ops, breaks and size on disk."""
    envs = store.listing(cache_dir)
    if as_json:
        return json.dumps([{"environment": info, "codes": [{"key": key, "entries": entries}
                                                           for key, entries in codes]}
                           for info, codes in envs], indent=1)
    out = []
    if not envs:
        return f"{cache_dir}: no entries"
    for info, codes in envs:
        n = sum(len(e) for _k, e in codes)
        size = sum(x["bytes"] for _k, e in codes for x in e)
        mark = " (this process's)" if info.get("current") else " (another Python, torch or frametracer: not read here)"
        out.append(f"environment {info['id']}: Python {info.get('python', '?')}, torch {info.get('torch', '?')}, "
                   f"frametracer {info.get('frametracer', '?')}{mark}")
        out.append(f"  {len(codes)} code objects, {n} entries, {size / 1024:.1f} KiB")
        for key, entries in codes:
            first = next((e for e in entries if "name" in e), None)
            title = f"{first['name']}  {first['where']}" if first else "(unreadable)"
            out.append(f"  {title}  [{key[:12]}]")
            for e in entries:
                if e.get("unreadable"):
                    out.append(f"    {e['file']}: unreadable ({e['bytes']} bytes; ignored when loading)")
                    continue
                what = (f"{e['ops']} ops" if e["captured"] else f"runs as Python: {e['reason']}")
                breaks = f", {len(e['breaks'])} breaks ({'; '.join(e['breaks'][:2])})" if e["breaks"] else ""
                out.append(f"    {e['guards']} guards, {what}{breaks}, {e['bytes'] / 1024:.1f} KiB")
    return "\n".join(out)
