"""Graph outputs a compiling backend hands back with other autograd facts than eager's, put
right after the graph call.

AOTAutograd (aot_eager, inductor) runs a graph as one autograd Function whose forward runs
under no_grad, and gives back its outputs as that Function's. Two kinds of output come back
otherwise than the eager backend's (the graph's own forward) gives them:

- A leaf that requires grad made by the graph (`torch.ones(2, requires_grad=True)` in the
  frame): it comes back without requires_grad (no input needs a gradient: the graph ran under
  no_grad) or as an output of the Function (not a leaf: its .grad never fills). It is made a
  leaf again (`with_leaves`). A leaf that other nodes use cannot be mended here: the trace
  breaks at the op that made it (trace/convert_frame.py `_made_leaf_at`).
- A view whose view facts autograd reads later: an output of a multi-output view op
  (`a, b = y.unbind(0)`, `split`, `chunk`) comes back as a tensor of its own (AOTAutograd
  hides that aliasing on purpose), so a later `a.mul_(2)`, which eager refuses, runs and
  leaves y's gradient silently wrong; a view that does not require grad comes back made in
  no-grad mode (inside the Function), so a later in-place write that records history on it
  raises where eager runs. Such outputs are made again after the graph from the tensor they
  view, by the same view ops run as Python (`remade_views`): real views, made in grad mode,
  as eager makes them. The tensor they view becomes a graph output if it is not one.

The eager backend runs the graph's ops as they are and needs neither.

Torch internals read here: torch._C._autograd._get_creation_meta and
torch._C._autograd.CreationMeta; checked on torch 2.13.0 and 2.15.0 (docs/torch.md lists them
all; tests/test_torch_internals.py resolves each).
"""
import torch
import torch.fx as fx

from guards.tensor import storage_id

from ..runtime.frame_hook import skip_code
from .output_graph import reshapes

_CreationMeta = torch._C._autograd.CreationMeta
_creation_meta = torch._C._autograd._get_creation_meta


def made_leaves(gm):
    """Positions of the graph's outputs that are leaf tensors requiring grad made by the graph
    itself; [] when none."""
    out = _output_node(gm)
    if out is None:
        return []
    return [i for i, n in enumerate(out.args[0])
            if isinstance(n, fx.Node) and n.op != "placeholder"
            and isinstance(v := n.meta.get("example_value"), torch.Tensor)
            and v.requires_grad and v.is_leaf]


def with_leaves(compiled, leaves):
    """Each such output a leaf that requires grad, as eager made it: AOTAutograd hands it back
    without requires_grad (no input needs a gradient: the graph ran under no_grad) or, when
    an input does, as an output of its backward node (not a leaf: its .grad never fills).
    Only outputs no other node uses are such leaves (convert_frame breaks before the others)."""
    def run_graph_making_leaves(*args):
        outs = compiled(*args)
        fixed = list(outs)
        for i in leaves:
            t = fixed[i]
            if not t.is_leaf:
                fixed[i] = t.detach().requires_grad_(True)
            elif not t.requires_grad:
                t.requires_grad_(True)
        return type(outs)(fixed) if isinstance(outs, tuple) else fixed
    skip_code(run_graph_making_leaves.__code__)
    return run_graph_making_leaves


class RemadeViews:
    """The graph a compiling backend gets instead of gm (`gm`: the remade views' outputs
    replaced by what they view), and `wrap(compiled)`: the callable that gives gm's outputs.

    `kept`: gm's output positions the backend's graph returns, in order, before its extra
    outputs (the tensors the views view, sizes their view ops take); `sources`: per input of
    the epilogue, ("input", i) an argument of the graph call, ("kept", j) or ("extra", j) an
    output of the backend's; `remade`: gm's output positions the epilogue's outputs fill."""

    def __init__(self, gm, kept, sources, epilogue, remade, n_out):
        self.gm, self.kept, self.sources = gm, kept, sources
        self.epilogue, self.remade, self.n_out = epilogue, remade, n_out

    def wrap(self, compiled):
        kept, sources, epilogue, remade, n_out = self.kept, self.sources, self.epilogue, self.remade, self.n_out
        n_kept = len(kept)

        def run_graph_remaking_views(*args):
            outs = compiled(*args)
            inputs = [args[i] if where == "input" else outs[i if where == "kept" else n_kept + i]
                      for where, i in sources]
            with torch.enable_grad():  # (every view remade was made in grad mode: _needs_remaking)
                views = epilogue(*inputs)
            result = [None] * n_out
            for pos, value in zip(kept, outs):
                result[pos] = value
            for pos, value in zip(remade, views):
                result[pos] = value
            return type(outs)(result) if isinstance(outs, tuple) else result
        skip_code(run_graph_remaking_views.__code__)
        return run_graph_remaking_views


def remade_views(gm, example_inputs):
    """A RemadeViews for gm when some output must be made again after the graph
    (_needs_remaking), or None. An output whose view ops cannot be followed back to the tensor
    it views (_view_chain) is left as the backend gives it."""
    out = _output_node(gm)
    if out is None:
        return None
    differentiated = torch.is_grad_enabled() and (
        any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)
        or any(p.requires_grad for p in gm.parameters()))
    outputs = list(out.args[0])
    chains = {}
    for n in outputs:
        if isinstance(n, fx.Node) and n not in chains and _needs_remaking(n, differentiated):
            chain = _view_chain(n)
            if chain is not None:
                chains[n] = chain
    if not chains:
        return None
    return _plan(gm, outputs, chains)


def _needs_remaking(node, differentiated):
    """Whether the output `node` is a view that AOTAutograd gives back otherwise than eager:
    one made by a multi-output view op (its aliasing hidden), or one that does not require
    grad from a graph it differentiates (made in its Function's no-grad forward). Both were
    made in grad mode (eager's creation meta says so: under no_grad it is NO_GRAD_MODE)."""
    fake = node.meta.get("example_value")
    if node.op in ("placeholder", "get_attr") or not isinstance(fake, torch.Tensor) or fake._base is None:
        return False
    try:
        meta = _creation_meta(fake)
    except RuntimeError:  # (not a view autograd knows of)
        return False
    if meta == _CreationMeta.MULTI_OUTPUT_NODE:
        return True
    return meta == _CreationMeta.DEFAULT and differentiated and not fake.requires_grad


_VIEW_CALLS = ("call_function", "call_method")


def _view_chain(node):
    """(root, [view nodes from the root to `node`]): the ops that made the view `node` from a
    tensor that is no view of the same memory made in the graph (the base, or a graph input),
    each taking the previous one's value as its first argument, none writing or changing
    sizes in place. None when it is not such a chain, or when some node changes the sizes or
    strides of one of them in place (`a.t_()` after `a = y.unbind(0)[0]`: ops run again on
    the root would not give the changed view)."""
    fake = node.meta["example_value"]
    mine, base = storage_id(fake), fake._base
    path, cur = [], node
    while True:
        ex = cur.meta.get("example_value")
        if cur is not node and (cur.op in ("placeholder", "get_attr") or
                                (isinstance(ex, torch.Tensor) and (ex is base or ex._base is None))):
            break
        if cur.op not in _VIEW_CALLS or cur.meta.get("writes") or not cur.args or \
                not isinstance(cur.args[0], fx.Node) or not _same_memory(cur.args[0], mine):
            return None
        path.append(cur)
        cur = cur.args[0]
    chain = {cur, *path}
    if any(reshapes(u) and u.args and u.args[0] in chain for n in chain for u in n.users):
        return None
    return cur, path[::-1]


def _same_memory(node, mine):
    """Whether `node`'s value is a tensor in the storage `mine`, or a tuple of such (a
    multi-output view op's result)."""
    ex = node.meta.get("example_value")
    items = ex if isinstance(ex, (tuple, list)) else (ex,)
    return any(isinstance(t, torch.Tensor) and storage_id(t) == mine for t in items)


def _plan(gm, outputs, chains):
    """The RemadeViews of `chains` ({output node: (root, path)})."""
    views = set(chains)
    path_nodes = {n for _root, path in chains.values() for n in path}
    kept = [i for i, n in enumerate(outputs) if n not in views]
    kept_nodes = {outputs[i]: j for j, i in enumerate(kept)}
    epi = fx.Graph()
    env, sources, extra = {}, [], []

    def needed(n):  # an epilogue input for the value of gm's node n
        if n not in env:
            if n.op == "placeholder":
                where = ("input", _placeholder_index(gm, n))
            elif n in kept_nodes:
                where = ("kept", kept_nodes[n])
            else:
                where = ("extra", len(extra))
                extra.append(n)
            sources.append(where)
            env[n] = epi.placeholder(f"in_{len(sources)}")
        return env[n]

    for n in gm.graph.nodes:  # in graph order: each path node after what it reads
        if n in path_nodes:
            fx.map_arg((n.args, n.kwargs), lambda a: a if a in path_nodes else needed(a))
            env[n] = epi.node_copy(n, env.__getitem__)
    remade = [i for i, n in enumerate(outputs) if n in views]
    epi.output(tuple(env[outputs[i]] for i in remade))
    graph = fx.Graph()
    copied = {}
    graph.graph_copy(gm.graph, copied)
    graph.output(tuple(copied[outputs[i]] if isinstance(outputs[i], fx.Node) else outputs[i] for i in kept)
                 + tuple(copied[n] for n in extra))
    unread = {copied[n] for n in path_nodes}
    for n in reversed(list(graph.nodes)):  # the view ops only the remade outputs read
        if n in unread and not n.users:
            graph.erase_node(n)
    graph.lint()
    backend_gm = fx.GraphModule(gm, graph, class_name=type(gm).__name__)
    backend_gm.meta.update(gm.meta)
    epilogue = fx.GraphModule(gm, epi, class_name="RemadeViews").forward
    skip_code(epilogue.__code__, recursive=True)  # (as the graph: backends._unhooked)
    return RemadeViews(backend_gm, kept, sources, epilogue, remade, len(outputs))


def _placeholder_index(gm, node):
    return list(gm.graph.find_nodes(op="placeholder")).index(node)


def _output_node(gm):
    out = next(iter(reversed(gm.graph.nodes)), None)
    if out is None or out.op != "output" or not isinstance(out.args[0], (tuple, list)):
        return None
    return out
