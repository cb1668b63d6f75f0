"""A cache entry's FX graph as a description (portable.py) another process rebuilds exactly.

Why not pickle the GraphModule or save its code: its code is regenerated from the graph, so
the graph is what is written, node by node (op, name, target, args, kwargs), every target and
constant through the portable Writer, which verifies that each one is found again by its
name. Rebuilt nodes keep their names and order, so `gm.code` reads the same.

What the graph module holds besides its graph is written only where it is plain data:
a get_attr constant that is a plain tensor (bytes of `torch.save`, read back with
`weights_only=True`: no user code runs), and a stock module kept whole (leaf_call.py), by
its class and its plain attributes, since its template holds no tensor. Anything else (a
Parameter, a tensor needing grad, a user module, a nested graph module) is `Unportable`.

node.meta is mostly trace-time state (fake tensors, storage ids of this process): only
`source`, `stack_trace` (dumps read them) and `random` are kept. Placeholders whose example
was symbolic make the description say `symbolic=True`: its caller decides what a dynamic
graph needs beside it (the shape guards are not the graph's).
"""
import io
import threading

import torch
import torch.fx as fx
from torch.fx.immutable_collections import immutable_dict, immutable_list

from torch._subclasses.fake_tensor import FakeTensorMode

from ..graph.backends import compile_graph, eager
from ..graph.leaf_call import LeafCall
from ..graph.output_graph import ByObject
from ..graph.shapes import SYM_TYPES
from . import portable
from .portable import Unportable

VERSION = 1
KEPT_META = ("source", "stack_trace", "random", "static_address", "block_call", "view")
_HOOKS = ("_hooks", "_hooks_with_kwargs", "_hooks_always_called")

portable.register(ByObject, "fx.ByObject", lambda w, o: w.write(o.fn), lambda r, p: ByObject(r.read(p)))


def _plain_meta(v):
    """A meta value written as it is: a str, a bool, or a tuple of ints (a block call's tag,
    which decides what inductor gets as one subgraph: graph/subgraphs.py)."""
    return type(v) in (str, bool) or (type(v) is tuple and all(type(x) is int for x in v))


def write_graph(writer, gm):
    """gm's description: ("fx", VERSION, codegen, nodes, attrs, symbolic)."""
    graph = gm.graph
    codegen = graph._codegen
    cg = None
    if type(codegen) is not fx.graph.CodeGen:
        cg = (writer.write(type(codegen)), writer.write(dict(vars(codegen))))
    nodes, attrs, symbolic = [], {}, False
    for n in graph.nodes:
        if n.op in ("get_attr", "call_module") and n.target not in attrs:
            attrs[n.target] = _write_attr(writer, gm, n)
        target = writer.write(n.target) if n.op == "call_function" else n.target
        meta = tuple((k, n.meta[k]) for k in KEPT_META if _plain_meta(n.meta.get(k)))
        nodes.append((n.op, n.name, target, _args(writer, n.args), _args(writer, n.kwargs),
                      writer.write(n.type), meta))
        if n.op == "placeholder":
            symbolic = symbolic or _symbolic(n.meta.get("example_value"))
    desc = ("fx", VERSION, cg, tuple(nodes), tuple(sorted(attrs.items())), symbolic)
    if read_graph(portable.Reader(), desc).code != gm.code:  # (as portable verifies its own)
        raise Unportable("the graph read back from its description generates other code")
    return desc


def is_symbolic(desc):
    return desc[5]


def read_graph(reader, desc):
    """The GraphModule `desc` describes (class TracedGraph), linted."""
    tag, version, cg, nodes, attrs, _symbolic = desc
    if tag != "fx" or version != VERSION:
        raise portable.Stale(f"graph description {tag!r} version {version}, not fx {VERSION}")
    graph = fx.Graph()
    if cg is not None:
        codegen = object.__new__(reader.read(cg[0]))
        vars(codegen).update(reader.read(cg[1]))
        graph._codegen = codegen
    root = torch.nn.Module()
    for target, attr in attrs:
        _read_attr(reader, root, target, attr)
    env = {}
    for op, name, target, args, kwargs, typ, meta in nodes:
        if op == "call_function":
            target = reader.read(target)
        node = graph.create_node(op, target, _read_args(reader, args, env), _read_args(reader, kwargs, env),
                                 name=name, type_expr=reader.read(typ))
        if node.name != name:
            raise portable.Stale(f"node {name} was rebuilt as {node.name}")
        node.meta.update(meta)
        env[name] = node
    graph.lint()
    return fx.GraphModule(root, graph, class_name="TracedGraph")


# ---- node arguments: Nodes by name, containers walked, everything else portable ------------

def _args(writer, a):
    t = type(a)
    if isinstance(a, fx.Node):
        return ("N", a.name)
    if t is tuple or t is immutable_list or t is list:
        return ("T" if t is tuple else "L", tuple(_args(writer, v) for v in a))
    if t is dict or t is immutable_dict:
        return ("D", tuple((writer.write(k), _args(writer, v)) for k, v in a.items()))
    if t is slice:
        return ("sl", _args(writer, a.start), _args(writer, a.stop), _args(writer, a.step))
    if isinstance(a, SYM_TYPES):
        raise Unportable(f"a symbolic value {a} held in a node's arguments")
    return writer.write(a)


def _read_args(reader, d, env):
    if type(d) is not tuple:
        return d
    tag = d[0]
    if tag == "N":
        return env[d[1]]
    if tag in ("T", "L"):
        items = [_read_args(reader, v, env) for v in d[1]]
        return tuple(items) if tag == "T" else items
    if tag == "D":
        return {reader.read(k): _read_args(reader, v, env) for k, v in d[1]}
    if tag == "sl":
        return slice(*(_read_args(reader, v, env) for v in d[1:]))
    return reader.read(d)


def _symbolic(v):
    if isinstance(v, SYM_TYPES):
        return True
    if isinstance(v, torch.Tensor):
        return any(isinstance(s, SYM_TYPES) for s in (*v.shape, *v.stride(), v.storage_offset()))
    return False


# ---- what get_attr and call_module nodes reach on the graph module -------------------------

def _write_attr(writer, gm, node):
    owner_path, _, leaf = node.target.rpartition(".")
    owner = gm.get_submodule(owner_path)
    value = getattr(owner, leaf)
    if node.op == "call_module":
        if type(value) is LeafCall:
            return ("leaf", _write_module(writer, value.leaf, node.target))
        return ("mod", _write_module(writer, value, node.target))
    if type(value) is not torch.Tensor or value.requires_grad:
        what = type(value).__name__ + (" requiring grad" if getattr(value, "requires_grad", False) else "")
        raise Unportable(f"graph attribute {node.target} is a {what}, not a plain tensor constant")
    buf = io.BytesIO()
    torch.save(value, buf)
    kind = "attr" if leaf not in owner._buffers else \
        "buffer" if leaf not in owner._non_persistent_buffers_set else "buffer_np"
    return ("tensor", kind, buf.getvalue())


def _read_attr(reader, root, target, attr):
    owner = root
    *path, leaf = target.split(".")
    for part in path:
        if not hasattr(owner, part):
            owner.add_module(part, torch.nn.Module())
        owner = getattr(owner, part)
    if attr[0] == "tensor":
        value = torch.load(io.BytesIO(attr[2]), weights_only=True)
        if attr[1] == "attr":
            setattr(owner, leaf, value)
        else:
            owner.register_buffer(leaf, value, persistent=attr[1] == "buffer")
    else:
        module = _read_module(reader, attr[1])
        owner.add_module(leaf, LeafCall(module) if attr[0] == "leaf" else module)


def _write_module(writer, m, where):
    """A stock module holding no tensor and no hook (a leaf template, leaf_call.template_of)
    as (class, attributes, submodules); the description must read back equal."""
    refuse = f"a stock module kept whole ({where}: {type(m).__module__}.{type(m).__qualname__})"
    if not type(m).__module__.startswith("torch.nn.modules."):
        raise Unportable(f"{refuse} is not a torch.nn module")
    if any(t is not None for t in (*m._parameters.values(), *m._buffers.values())):
        raise Unportable(f"{refuse} holds its own tensors (it is the user's module, not a template)")
    attrs = []
    for k, v in vars(m).items():
        if k in ("_parameters", "_buffers"):
            desc = ("names", tuple(v))
        elif k == "_modules":
            desc = ("mods", tuple((n, None if s is None else _write_module(writer, s, f"{where}.{n}"))
                                  for n, s in v.items()))
        elif k == "_flat_weights":
            desc = ("flat", len(v))
        elif k.endswith(_HOOKS) and isinstance(v, dict):
            if v:
                raise Unportable(f"{refuse} has hooks")
            desc = ("hooks", writer.write(type(v)))
        elif type(v) is set:
            desc = ("set", writer.write(frozenset(v)))
        else:
            try:
                desc = writer.write(v)
            except Unportable as e:
                raise Unportable(f"{refuse}: attribute {k}: {e}") from None
        attrs.append((k, desc))
    desc = (writer.write(type(m)), tuple(attrs))
    back = _read_module(portable.Reader(), desc)
    for k, v in vars(m).items():
        if k not in ("_modules", "_flat_weights") and not _equal(vars(back)[k], v):
            raise Unportable(f"{refuse}: attribute {k} does not read back equal")
    return desc


def _read_module(reader, desc):
    d = {}
    for k, v in desc[1]:
        tag = v[0] if type(v) is tuple else None
        if tag == "names":
            d[k] = dict.fromkeys(v[1])
        elif tag == "mods":
            d[k] = {n: None if s is None else _read_module(reader, s) for n, s in v[1]}
        elif tag == "flat":
            d[k] = [None] * v[1]
        elif tag == "hooks":
            d[k] = reader.read(v[1])()
        elif tag == "set":
            d[k] = set(reader.read(v[1]))
        else:
            d[k] = reader.read(v)
    m = object.__new__(reader.read(desc[0]))
    object.__getattribute__(m, "__dict__").update(d)
    return m


def _equal(a, b):
    return type(a) is type(b) and (a is b or a == b)


class LazyCompiled:
    """A loaded graph compiled by its backend on its first call, with that call's real
    arguments as example inputs: a description holds no example inputs, and compiling at
    load time would cost every entry a backend compile whether or not it is ever called."""

    def __init__(self, gm, backend_fn):
        self.gm = gm
        self.backend_fn = backend_fn
        self.compiled = None
        self._lock = threading.Lock()

    def __call__(self, *args):
        compiled = self.compiled
        if compiled is None:
            with self._lock:
                if self.compiled is None:
                    if self.backend_fn is not eager:
                        _example_values(self.gm, args)
                    self.compiled = compile_graph(self.backend_fn, self.gm, list(args))
                compiled = self.compiled
        return compiled(*args)


def _example_values(gm, args):
    """Each node's `example_value` (a fake tensor, or the value), as a traced graph has them: a
    written graph keeps none, and AOTAutograd's cache bypasses a graph whose method calls lack
    them (it would trace and partition again on every warm start). Computed on fake copies of
    the first call's arguments; a graph fake tensors cannot run is compiled without them."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with mode:
            fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            _Recorder(gm).run(*fakes)
    except Exception:  # noqa: BLE001 - only the cache key of the backend's compile is at stake
        for node in gm.graph.nodes:
            node.meta.pop("example_value", None)


class _Recorder(fx.Interpreter):
    def run_node(self, n):
        result = super().run_node(n)
        if n.op != "output":
            n.meta["example_value"] = result
        return result
