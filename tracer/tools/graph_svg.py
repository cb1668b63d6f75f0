"""An FX graph drawn as an inline SVG with no system package: the picture tracer-dump's HTML
report shows when Graphviz's `dot` is not installed.

Drawn for reading the data flow, top to bottom. A model's parameters and buffers (graph inputs,
since modules are inputs) are not boxes of their own: each is folded into the ops that read it,
as a line of their label (`params: norm1.weight, norm1.bias`), so a layer's dozen weights do
not make a row of boxes above the one op that uses them (`state_nodes`; Graphviz's picture
folds them the same way). The layout is the classic layered one: a node's layer is one more
than its deepest input's (the output at the bottom), and a node with no inputs sits just above
its first user; within a layer, nodes are ordered by the mean position of their inputs (two
sweeps), packed left to right and centred, and a layer wider than MAX_WIDTH wraps onto more
rows, so a picture stays within a page's width however wide the graph. Edges are curves from the
bottom of an input's box to the top of its user's, with an arrowhead. Text is escaped; nothing
is executed in the page.
"""
import html
import re

import torch

COLORS = {"placeholder": "#cde7ff", "get_attr": "#eeeeee", "call_module": "#ffe9b3",
          "call_function": "#d7f5dd", "call_method": "#e9dcff", "output": "#ffd0d0"}
CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 7, 14, 6, 18, 36
MAX_WIDTH = 1560    # a layer wider than this wraps: the picture fits a 1600 px page
STATE_LINE = 44     # characters of a folded-parameters line; at most two lines per op


def is_state(n):
    """A parameter or buffer read by the graph (a placeholder whose source is a module's
    `_parameters`/`_buffers` entry, or a Parameter), or a get_attr constant."""
    if n.op == "get_attr":
        return True
    if n.op != "placeholder":
        return False
    source = str(n.meta.get("source", ""))
    return isinstance(n.meta.get("val"), torch.nn.Parameter) or "._parameters[" in source or "._buffers[" in source


def state_name(n):
    """`norm1.weight` for self._modules['layers']._modules['0']._modules['norm1']._parameters['weight']."""
    keys = re.findall(r"\['([^']+)'\]", str(n.meta.get("source", "")))
    return ".".join(keys[-2:]) if keys else n.name


def drawn_nodes(gm):
    """The nodes drawn as boxes: everything but the parameters and buffers (folded into their
    users' labels) and parameter loads nothing reads."""
    return [n for n in gm.graph.nodes if not is_state(n)]


def folded_state(n):
    """The label lines naming the parameters and buffers op `n` reads."""
    names = [state_name(i) for i in n.all_input_nodes if is_state(i)]
    if not names:
        return []
    lines, line = [], "params: "
    for k, name in enumerate(names):
        piece = name + (", " if k < len(names) - 1 else "")
        if len(line) + len(piece) > STATE_LINE and line.strip() != "params:":
            lines.append(line.rstrip())
            line = "  "
            if len(lines) == 2:
                lines[-1] += f" (+{len(names) - k} more)"
                return lines
        line += piece
    return lines + [line.rstrip()]


def label_lines(n):
    if n.op in ("placeholder", "output"):
        return [n.name]
    target = getattr(n.target, "__name__", str(n.target))
    return [n.name, f"{n.op}: {target}"] + folded_state(n)


def layout(nodes):
    """{node: (x, y, w, h)} for the nodes, and the picture's (width, height)."""
    index = {n: i for i, n in enumerate(nodes)}
    layer = {}
    for n in nodes:  # graph order is a topological order
        ins = [i for i in n.all_input_nodes if i in index]
        layer[n] = 1 + max((layer[i] for i in ins), default=-1)
    for n in nodes:  # sources move down, next to what reads them
        users = [layer[u] for u in n.users if u in index]
        if not any(i in index for i in n.all_input_nodes) and users:
            layer[n] = max(0, min(users) - 1)
    layers = {}
    for n in nodes:
        layers.setdefault(layer[n], []).append(n)
    order = {n: i for i, n in enumerate(nodes)}
    labels = {n: label_lines(n) for n in nodes}
    sizes = {n: (max(len(s) for s in lines) * CHAR_W + 2 * PAD, len(lines) * LINE_H + 2 * PAD)
             for n, lines in labels.items()}
    for _sweep in range(2):  # barycentre ordering: a node near the mean position of its inputs
        for k in sorted(layers):
            pos = {}
            for n in layers[k]:
                ins = [order[i] for i in n.all_input_nodes if i in order and layer.get(i, k) < k]
                pos[n] = sum(ins) / len(ins) if ins else order[n]
            layers[k].sort(key=lambda n: (pos[n], index[n]))
            for i, n in enumerate(layers[k]):
                order[n] = i
    layers = _wrapped(layers, sizes)
    widths = {k: sum(sizes[n][0] for n in ns) + GAP_X * (len(ns) - 1) for k, ns in layers.items()}
    total_w = max(widths.values(), default=0) + 2 * GAP_X
    boxes, y = {}, GAP_X
    for k in sorted(layers):
        x = (total_w - widths[k]) / 2
        row_h = max(sizes[n][1] for n in layers[k])
        for n in layers[k]:
            w, h = sizes[n]
            boxes[n] = (x, y, w, h)
            x += w + GAP_X
        y += row_h + GAP_Y
    return boxes, (total_w, y - GAP_Y + GAP_X)


def _wrapped(layers, sizes):
    """Layers re-numbered as rows, a layer wider than MAX_WIDTH split over several rows (in
    order, so inputs stay above their users)."""
    rows, k = {}, 0
    for layer in sorted(layers):
        row, width = [], 0
        for n in layers[layer]:
            w = sizes[n][0] + GAP_X
            if row and width + w > MAX_WIDTH:
                rows[k], k, row, width = row, k + 1, [], 0
            row.append(n)
            width += w
        rows[k], k = row, k + 1
    return rows


def graph_svg(gm, name="graph"):
    """The SVG text of one graph (self-contained, no scripts)."""
    nodes = drawn_nodes(gm)
    boxes, (width, height) = layout(nodes)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="fxgraph" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="11">',
           f"<title>{html.escape(name)}</title>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>']
    for n in nodes:
        x2, y2, w2, _h2 = boxes[n]
        for i in n.all_input_nodes:
            if i not in boxes:
                continue
            x1, y1, w1, h1 = boxes[i]
            sx, sy, ex, ey = x1 + w1 / 2, y1 + h1, x2 + w2 / 2, y2
            my = (sy + ey) / 2
            out.append(f'<path d="M {sx:.1f} {sy:.1f} C {sx:.1f} {my:.1f} {ex:.1f} {my:.1f} {ex:.1f} {ey:.1f}" '
                       f'fill="none" stroke="#555" stroke-width="1" marker-end="url(#arrow)"/>')
    for n in nodes:
        x, y, w, h = boxes[n]
        out.append(f'<g class="node"><title>{html.escape(n.format_node() or n.name)}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="4" '
                   f'fill="{COLORS.get(n.op, "#fff")}" stroke="#333"/>')
        for j, line in enumerate(label_lines(n)):
            out.append(f'<text x="{x + PAD:.1f}" y="{y + PAD + (j + 1) * LINE_H - 3:.1f}">{html.escape(line)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)
