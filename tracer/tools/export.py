"""`tracer-dump --export graphs.py`: the captured graphs as one importable Python module.

For each graph it writes a class `Graph<i>(torch.nn.Module)` whose `forward` is the FX
graph's generated code, verbatim. The submodules, parameters and buffers the code reads
(`self.<name>`) are saved next to it with `torch.save` (`graphs_graph<i>.pt`) and loaded
by the class's `__init__`; the names the code uses as globals are imported.

    import graphs
    gm = graphs.Graph0()          # or graphs.load(0)
    out = gm(*inputs)             # same result as the live graph

`inputs` are the graph's placeholders in order: the frame's tensors, then the parameters and
buffers of the modules it read (graph inputs too, named by their path: `model_layers_0_...`).
"""
import math
import os
import types

import torch

_HEADER = '''"""FX graphs captured by tracer-dump from {target}.

Generated file: one nn.Module per captured graph; `forward` is the graph's own code and the
attributes it reads are loaded from the .pt files next to this file (torch.load, weights_only=False:
only load files you produced yourself).
"""
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_state(name):
    return torch.load(os.path.join(_HERE, name), weights_only=False)

'''


def _global_lines(name, value):
    """Source lines binding `name` to `value` at module level, or None if it must be pickled."""
    if isinstance(value, types.ModuleType):
        return [f"import {value.__name__} as {name}" if value.__name__ != name else f"import {name}"]
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return [f"{name} = float({str(value)!r})"]
    if value is type(None):
        return [f"{name} = type(None)"]
    mod, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if mod and qual and "<" not in qual and "." not in qual:
        return [f"from {mod} import {qual} as {name}" if qual != name else f"from {mod} import {name}"]
    return None


def _attr_roots(gm):
    roots = []
    for n in gm.graph.nodes:
        if n.op in ("get_attr", "call_module"):
            root = n.target.split(".")[0]
            if root not in roots:
                roots.append(root)
    return roots


def export_graphs(recorded, path, target="?"):
    """Write `path` (a .py module) and one .pt file per graph; returns the paths written."""
    stem = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    graphs = []
    for code, entry in recorded:
        for gm in getattr(entry, "graphs", None) or ([entry.graph] if entry.graph is not None else []):
            graphs.append((code, gm))
    lines = [_HEADER.format(target=target)]
    pickled_globals, seen_globals, written = {}, set(), []
    classes = []
    for i, (code, gm) in enumerate(graphs):
        pc = gm.graph.python_code(root_module="self")
        for name, value in pc.globals.items():
            if name in seen_globals:
                continue
            seen_globals.add(name)
            bound = _global_lines(name, value)
            if bound is None:
                pickled_globals[name] = value
            else:
                lines[0] += "\n".join(bound) + "\n"
        state_file = f"{stem}_graph{i}.pt"
        torch.save({root: getattr(gm, root) for root in _attr_roots(gm)}, os.path.join(folder, state_file))
        written.append(os.path.join(folder, state_file))
        body = "\n".join("    " + ln if ln.strip() else "" for ln in pc.src.strip("\n").splitlines())
        classes.append(f'''

class Graph{i}(torch.nn.Module):
    """Graph {i}: frame {code.co_name} ({code.co_filename}:{code.co_firstlineno})."""

    def __init__(self):
        super().__init__()
        for name, value in _load_state({state_file!r}).items():
            setattr(self, name, value)

{body}
''')
    if pickled_globals:
        globals_file = f"{stem}_globals.pt"
        torch.save(pickled_globals, os.path.join(folder, globals_file))
        written.append(os.path.join(folder, globals_file))
        lines.append(f"globals().update(_load_state({globals_file!r}))\n")
    lines.extend(classes)
    lines.append(f'''

GRAPHS = [{", ".join(f"Graph{i}" for i in range(len(graphs)))}]


def load(index=0):
    """A fresh instance of graph `index`."""
    return GRAPHS[index]()
''')
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(lines))
    return [os.path.abspath(path)] + written
