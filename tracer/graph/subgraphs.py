"""Repeated blocks as one subgraph for inductor: `torch.ops.higher_order.invoke_subgraph`.

The trace replays a repeated block (variables/blocks.py) and tags the nodes of each call of a
block kind with `meta["block_call"] = (kind, call)`; the graph stays the one an unrolled trace
gives, which is what users see and what the eager backend runs. inductor's compile time,
though, grows with the graph: lowered and code-generated layer by layer, twelve identical
layers cost twelve times one. Given the same layer as one subgraph called twelve times,
AOTAutograd traces it once (its invoke_subgraph cache, keyed by the identifier) and inductor
lowers it once (GraphLowering.seen_subgraphs), as torch.compile does for a function marked
`torch.compiler.nested_compile_region`; here nobody has to mark it.

`outline(gm)` returns a copy of gm in which each call of a kind called at least twice is one
`invoke_subgraph` node (all calls share one subgraph module and identifier) followed by
getitems for the values used after it. Calls are outlined together when they are the same
graph: the same ops in the same order, each argument the same position inside the call, the
same input of the call, or the same constant, and the same values used after the call (a call
whose unused results were removed is another graph); and when nothing in them is random (each invocation must draw its own numbers as the inlined ops
do) or writes in place (a subgraph must be functional). Otherwise the kind stays inline.
"""
import operator

import torch
import torch.fx as fx

BLOCK_META = "block_call"
# a call of fewer nodes stays inline: a subgraph of one linear saves no compile time and
# keeps it from fusing with its neighbours
MIN_NODES = 4


def outline(gm):
    """gm with each repeated block's calls as invoke_subgraph calls of one subgraph (a new
    GraphModule), or gm itself when nothing is outlined."""
    groups = {}  # the calls of a kind with the same signature (a call DCE trimmed has another)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for (kind, _i), nodes in _calls(gm.graph).items():
        sig = _signature(nodes) if len(nodes) >= MIN_NODES else None
        if sig is not None and sig[2] and _closed(nodes, order):
            groups.setdefault((kind, sig), []).append(nodes)
    plans = [(_template(calls[0]), sig, calls) for (_kind, sig), calls in groups.items() if len(calls) >= 2]
    if not plans:
        return gm
    graph = fx.Graph(owning_module=None, tracer_cls=gm.graph._tracer_cls)
    env = {}
    out = graph.graph_copy(gm.graph, env)
    graph.output(out)
    new = fx.GraphModule(gm, graph)
    for n, (template, shape, kind_calls) in enumerate(plans):
        name = f"repeated_block_{n}"
        new.add_submodule(name, template)
        for nodes in kind_calls:  # (read in the copy as it is now: earlier calls are replaced)
            _replace(new.graph, [env[x] for x in nodes], shape, name)
    new.graph.lint()
    new.recompile()
    return new


def _calls(graph):
    """{(kind, call): [nodes in graph order]} of the tagged nodes."""
    calls = {}
    for node in graph.nodes:
        tag = node.meta.get(BLOCK_META)
        if tag is not None:
            calls.setdefault(tag, []).append(node)
    return calls


def _externals(nodes):
    """The values the call reads from outside it, in first-use order."""
    inside = set(nodes)
    seen = {}
    for node in nodes:
        for u in node.all_input_nodes:
            if u not in inside and u not in seen:
                seen[u] = None
    return list(seen)


def _closed(nodes, order):
    """Whether the call can become one node where its last node is: nothing outside it
    between its first and last node uses one of its values."""
    inside, last = set(nodes), order[nodes[-1]]
    return all(order[u] > last for n in nodes for u in n.users if u not in inside)


def _used_after(nodes):
    inside = set(nodes)
    return [n for n in nodes if any(u not in inside for u in n.users)]


def _signature(nodes):
    """The call's shape, independent of which call it is: per node its op, target and
    arguments with each node replaced by ("in", position inside) or ("ext", index), then the
    positions of the values used after the call. None when it cannot be a subgraph."""
    index = {n: i for i, n in enumerate(nodes)}
    ext = {u: i for i, u in enumerate(_externals(nodes))}

    def ref(u):
        return ("in", index[u]) if u in index else ("ext", ext[u])

    rows = []
    for node in nodes:
        if node.op not in ("call_function", "call_method") or _effectful(node):
            return None
        rows.append((node.op, node.target, _freeze(fx.map_arg(node.args, ref)), _freeze(fx.map_arg(node.kwargs, ref))))
    after = tuple(index[n] for n in _used_after(nodes))
    if any(_is_view(nodes[i]) for i in after):  # invoke_subgraph's outputs alias nothing
        return None
    return tuple(rows), len(ext), after


def _is_view(node):
    """A value used after the call that is a view (of an input of the call or of another
    output): invoke_subgraph assumes its outputs alias nothing, so a later write through the
    view would lose its link to the base."""
    v = node.meta.get("example_value")
    if v is None:  # a graph read from the disk cache: the tag written beside it (blocks.py)
        return bool(node.meta.get("view"))
    return not isinstance(v, torch.Tensor) or v._is_view()


def _effectful(node):
    """Whether the node writes in place or draws random numbers. The aten spy that made the
    node says so (meta "random": a dropout in eval draws nothing; "writes", which a block's
    record refuses, so a tagged node has none); a node made without it is judged by its name.
    "random" is what a graph loaded from the disk cache keeps (persist/graph_io.py): the same
    decision there gives inductor the same graph, and its caches hit."""
    if "random" in node.meta:
        return bool(node.meta["random"]) or bool(node.meta.get("writes"))
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    return name.endswith("_") or any(word in name for word in ("dropout", "rand", "bernoulli", "multinomial"))


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_freeze(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, slice):
        return ("slice", _freeze(v.start), _freeze(v.stop), _freeze(v.step))
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v


def _template(nodes):
    """The first call as a GraphModule: its external values as placeholders, the values used
    after it returned as a tuple."""
    graph = fx.Graph()
    env = {}
    for i, u in enumerate(_externals(nodes)):
        env[u] = graph.placeholder(f"arg{i}")
        env[u].meta.update({k: v for k, v in u.meta.items() if k in ("example_value", "val", "tensor_meta")})
    for node in nodes:
        env[node] = graph.node_copy(node, env.__getitem__)
    graph.output(tuple(env[n] for n in _used_after(nodes)))
    graph.lint()
    return fx.GraphModule(torch.nn.Module(), graph)


def _replace(graph, nodes, sig, name):
    """One call's nodes replaced by invoke_subgraph(name, name, *its external values) and
    getitems, placed where its last node was (each external value is made before that)."""
    externals = _externals(nodes)
    after = [nodes[i] for i in sig[2]]
    with graph.inserting_before(nodes[-1]):
        sub = graph.get_attr(name)
        call = graph.call_function(torch.ops.higher_order.invoke_subgraph, (sub, name, *externals))
        outs = [graph.call_function(operator.getitem, (call, i)) for i in range(len(after))]
    for old, new in zip(after, outs):
        new.meta.update(old.meta)
        new.meta.pop(BLOCK_META, None)
        old.replace_all_uses_with(new)
    for node in reversed(nodes):
        graph.erase_node(node)
