"""Node metadata with the keys torch.compile's graphs carry, so torch's own tools read our
graphs as they read Dynamo's: inductor's debug output and provenance, `torch.fx.passes`,
graph drawers, quantization flows, `torch.export`.

    example_value, val   the fake tensor (or tuple of them) the node produces
    tensor_meta          torch.fx's TensorMetadata of it (shape, dtype, stride, ...)
    stack_trace          the user's frames, outermost first and innermost last, inlined
                         calls included, in traceback's format (file, line, function, code)
    nn_module_stack      {key: (module path, module type)} of the modules whose forward is
                         running, outermost first (a leaf call_module node includes itself)
    source_fn_stack      [(node name, the function or module type that made it)]

Why here and not in OutputGraph: the stack is the interpreter's (the chain of inlined Frames
and the modules being called), which the graph does not know.
"""
import linecache

import torch
from torch.fx.passes.shape_prop import _extract_tensor_metadata

# A trace's own key, beside torch.compile's: on a node whose result is a new leaf that
# requires grad (`torch.ones(2, requires_grad=True)` in the frame), the (root step, root
# instruction) that made it, where the frame breaks when a compiling backend cannot make it
# a leaf (trace/convert_frame.py _made_leaf_break). Never written to disk (persist/graph_io).
MADE_LEAF = "made_leaf_at"

# On a node that a compiling backend cannot take as it is (a `set_` of a graph input), the
# (root step, root instruction) of the trace that made it, where the frame breaks once the
# backend is known to be one (trace/convert_frame.py). Never written to disk.
MADE_AT = "made_at"


def stamp(node, ctx):
    """Record on `node` where in the root frame the trace made it (MADE_AT)."""
    node.meta[MADE_AT] = (ctx.root_steps - 1, ctx.root_frame.current)


def makes_leaf(example):
    """Whether an op's fake result is a new leaf that requires grad (`torch.ones(2,
    requires_grad=True)`, `t.requires_grad_()`). Never a view: a fake view of a parameter made
    under no_grad says requires_grad=True and is_leaf (`self.cls_token.expand(...)` in ViT),
    where the real one does not require grad."""
    return example.requires_grad and example.is_leaf and not example._is_view()


def annotate(tx, node, example, source_fn, leaf_module=None):
    """Fill `node.meta` for a node the interpreter just made in `frame`."""
    meta = node.meta
    set_value(node, example)
    meta["stack_trace"] = stack_trace(tx)
    modules = list(tx.ctx.module_calls)
    if leaf_module is not None:
        modules.append(leaf_module)
    if modules:
        meta["nn_module_stack"] = {str(id(m.module)): (m.path, type(m.module)) for m in modules}
    meta["source_fn_stack"] = [(node.name, type(leaf_module.module) if leaf_module is not None else source_fn)]


def derived(node, parent):
    """A node that only unpacks `parent` (getitem of a tuple result) shares its provenance."""
    for key in ("stack_trace", "nn_module_stack"):
        if key in parent.meta:
            node.meta[key] = parent.meta[key]
    node.meta["source_fn_stack"] = [(node.name, node.target)]
    set_value(node, node.meta.get("example_value"))


def set_value(node, example):
    """example_value / val / tensor_meta: what every node producing a value carries."""
    node.meta["example_value"] = node.meta["val"] = example
    tm = _tensor_meta(example)
    if tm is not None:
        node.meta["tensor_meta"] = tm


def stack_trace(tx):
    return format_frames(frames(tx))


def frames(tx):
    """[(code, line)] of the Frame `tx` and the frames it was inlined into, outermost first."""
    chain = []
    f = tx
    while f is not None:
        chain.append(f)
        f = f.parent
    return [(f.code, line_of(f)) for f in reversed(chain)]


def line_of(frame):
    """The line a Frame is at (its first line before it starts)."""
    return frame.current.lineno if frame.current is not None and frame.current.lineno else frame.code.co_firstlineno


def format_frames(frames):
    """[(code, line)], outermost first, in traceback's format (a recorded call keeps its
    caller's frames so and formats them only if it is replayed: variables/blocks.py)."""
    out = []
    for code, lineno in frames:
        out.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
        line = linecache.getline(code.co_filename, lineno).strip()
        if line:
            out.append(f"    {line}\n")
    return "".join(out)


def _tensor_meta(value):
    if isinstance(value, torch.Tensor):
        try:
            return _extract_tensor_metadata(value)
        except Exception:  # noqa: BLE001 - sparse/nested layouts have no TensorMetadata
            return None
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        metas = [_tensor_meta(v) for v in value]
        return tuple(metas) if all(m is not None for m in metas) else None
    return None
