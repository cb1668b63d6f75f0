"""The FX graph being built for one frame, and everything it needs to run.

`OutputGraph` owns the `torch.fx.Graph`, the fake-tensor mode that gives every node its
shape/dtype/device without running real kernels, the graph inputs (each with the Source the
rewritten code loads it from), and a root `nn.Module` that holds the parameters, buffers and
leaf submodules the graph reaches through `get_attr` / `call_module`.

Parameters and buffers reached through a module with a source are graph inputs
(placeholders, static sizes), loaded from the module by the rewritten code on every call,
as torch.compile does since it inlines nn.Modules: the graph module holds no user tensor,
and one graph serves every instance of a module structure (variables/nn_module.py). The
root holds only what the graph itself owns: leaf modules of call_module nodes, and tensors
reached without a source (get_attr constants).
"""
import builtins
import contextlib
import math
import operator
import re

import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import DynamicOutputShapeException
from torch.fx.experimental.symbolic_shapes import PendingUnbackedSymbolNotFound, compute_unbacked_bindings
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

from ..exc import Unsupported
from .node_meta import derived, set_value
from .quiet_fake import example_value_errors_handled
from .shapes import SYM_TYPES, Shapes, constant_of
from guards.tensor import storage_id
from .static_fakes import forget_real_tensors, static_fake


def _sanitize(name):
    """A node name FX's code can hold: an identifier, and not `self`, which FX's generated
    `forward(self, ...)` takes for the module (a frame argument named `self`, as a method's
    is, made the graph's forward take one argument too few: every call then ran as Python)."""
    name = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    if not name or name[0].isdigit():
        name = "_" + name
    return "self_" if name == "self" else name


_OPS = ("call_function", "call_method", "call_module")  # the nodes that are operations


def refuse_wrapped(tensor):
    """Unsupported for a tensor wrapped by a torch.func transform (grad's GradTrackingTensor,
    vmap's BatchedTensor: its type is plain torch.Tensor), which no graph may take as an input
    or attribute: its fake would wrap a fake at the transform's level, which AOTAutograd
    refuses ("Please convert all Tensors to FakeTensors first"), and the graph would outlive
    the level. Every path that makes a real tensor a graph input or constant comes through
    here (a frame argument, a module's parameter under functional_call inside grad, a leaf's
    state): the frame, or the call, runs as Python inside the transform, as eager does."""
    if torch._C._functorch.is_functorch_wrapped_tensor(tensor):
        raise Unsupported("a tensor wrapped by a torch.func transform (vmap, grad, jvp) as a graph input")


_POW = (operator.pow, operator.ipow)


def fx_printable(target, args):
    """A target whose node FX's generated code spells as the program computes it. FX prints an
    `_operator` function as its operator between the operands' reprs, so `operator.pow(-2, n)`
    becomes `-2 ** n`, which Python reads as `-(2 ** n)`: the wrong sign for every even n
    (torch.compile's graphs have the same bug). A base whose repr starts with a minus (a
    negative int or float, -0.0, -inf) is the one such trap: unary minus binds tighter than
    every other operator FX prints this way (but subscription, which no number takes), and
    every other operand's repr is a name, an unsigned literal or in brackets.
    Such a node calls the builtin `pow` instead, which FX prints as a call (`pow(-2, n)`); for
    two operands it is `**` itself, and `**=` on a number (immutable) is `**`."""
    if target in _POW and args and not isinstance(args[0], fx.Node) and repr(args[0]).startswith("-"):
        return builtins.pow
    return target


def printable(gm):
    """gm with fx_printable's targets, its code generated again where one changed: a graph a
    backend made from ours (AOTAutograd's, traced again through its operators, has its own
    `operator.pow(-1, n)`)."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and fx_printable(node.target, node.args) is not node.target:
            node.target = fx_printable(node.target, node.args)
            changed = True
    if changed:
        gm.recompile()
    return gm


class TraceGraph(fx.Graph):
    """The graph a trace builds: `fx.Graph` whose `create_node` skips torch's walk of every
    operation's arguments with pytree in search of raw SymInts to warn about (torch 2.13+).
    The tracer never puts one in a node (a symbolic number is always its node), and the walk
    was a quarter of the cost of a replayed block (blocks.py: ~1,500 copied nodes in a 24-layer
    LLaMA). The node is made with no arguments, which skips the walk, and given them after by
    the method Node's setters call (in C: the users bookkeeping), not through the setters,
    which take the node out of the graph's lookup table and put it back for each. A graph
    whose module has node hooks (torch's passes on the built module: runtime asserts) takes
    torch's path, since the hooks read the new node's arguments."""

    def create_node(self, op, target, args=None, kwargs=None, name=None, type_expr=None):
        if op == "call_function":
            target = fx_printable(target, args)
        if getattr(self.owning_module, "_create_node_hooks", None):
            return super().create_node(op, target, args, kwargs, name, type_expr)
        if args and not isinstance(args, tuple):
            raise AssertionError(f"args must be a tuple, got {type(args)}")
        node = super().create_node(op, target, None, None, name, type_expr)
        if args or kwargs:
            node._update_args_kwargs(args or (), kwargs or {})
        return node


class OutputGraph:
    # What a scratch graph (scratch()) shares with the graph it is made from: the fake tensors
    # and their symbolic sizes, and the list that keeps what it registers alive as long as this
    # one. Every other field of a scratch graph starts empty, as in __init__.
    SHARED_WITH_SCRATCH = ("shapes", "fake_mode", "_attr_keep", "_fake_memo")

    def __init__(self, size_policy=None, shapes=None):
        self.graph = TraceGraph()
        # the ShapeEnv: symbolic sizes of dynamic inputs (`shapes`: a scratch graph's, shared)
        self.shapes = Shapes(size_policy) if shapes is None else shapes
        self.fake_mode = self.shapes.fake_mode
        self.root = torch.nn.Module()
        self.inputs = []          # [(source, placeholder node, real tensor or int)]
        self._attr_names = {}     # id(obj) -> attribute name on root
        self._attr_keep = []      # keep objs alive while tracing so ids stay unique
        self._fake_memo = {}      # id(real tensor) -> fake
        self._last_placeholder = None
        self._sym_nodes = {}      # (tensor node, "size"/"stride", dim) -> node computing it
        self.grad_fns = {}        # placeholder / get_attr node -> its fake's grad_fn when made (rerun.py)
        self.sym_inputs = {}      # source -> SymNodeVariable of a dynamic int input
        self._reshaped = set()    # storage_id of tensors an op changed the sizes or strides of (_shared)
        self._reshaped_written = set()  # ... and wrote since (alone in that memory then)

    def scratch(self):
        """A throw-away graph over the same fake tensors (autograd.Function forwards are
        traced into one just for their outputs' metadata)."""
        other = OutputGraph(shapes=self.shapes)
        for name in self.SHARED_WITH_SCRATCH:
            setattr(other, name, getattr(self, name))
        return other

    def mark(self):
        """What a trial inline (TraceContext.checkpoint) cannot take back, as counts: the
        graph's nodes, inputs and attributes. Equal marks: the trial added none."""
        return (len(self.graph.nodes), len(self.inputs), len(self._attr_names), len(self.sym_inputs))

    def release(self):
        """When the trace is done (TraceContext.release): let go of the real values the trace
        held. The graph module, which the entry keeps, holds what the graph needs."""
        self.inputs = []
        self._attr_keep = []
        self._fake_memo = {}
        self.grad_fns = {}
        forget_real_tensors(self.fake_mode)

    # ---- graph inputs and attributes -------------------------------------------
    def fake(self, tensor):
        """A static fake (parameters, buffers, tensors read through modules)."""
        key = id(tensor)
        hit = self._fake_memo.get(key)
        if hit is None:
            refuse_wrapped(tensor)
            hit = static_fake(self.fake_mode, tensor)
            self._fake_memo[key] = hit
            self._attr_keep.append(tensor)
        return hit

    def add_input(self, tensor, source, static=False, name=None, like=None):
        """A tensor graph input; its fake has symbolic sizes where the size policy says so,
        or none (`static`: a module's parameters and buffers, as torch.compile keeps them).
        `like`: a placeholder whose tensor has this one's metadata (a replayed block's
        first parameter, checked equal), whose tensor_meta it takes rather than computes."""
        if static:
            self.shapes.static_input(self.fake(tensor), source)
        elif id(tensor) not in self._fake_memo:
            refuse_wrapped(tensor)
            self._fake_memo[id(tensor)] = self.shapes.fake_input(tensor, source)
            self._attr_keep.append(tensor)
        if self._reshaped_written and storage_id(self._fake_memo[id(tensor)]) in self._reshaped_written:
            raise Unsupported(f"{source.name()}: an input sharing memory with a tensor whose sizes or strides the "
                              f"graph changed in place, and then wrote ({_SHARED_WHY})")
        node = self._placeholder(source, tensor, self._fake_memo[id(tensor)], name, like)
        if static:  # (its address too: inductor's cudagraphs reads it in place, backends.Inductor)
            node.meta["static_address"] = True
        return node

    def add_sym_input(self, value, source):
        """An int (float) graph input with a symbolic value; None when the ShapeEnv specialised
        it (ints 0 and 1)."""
        sym = self.shapes.sym_input(value, source)
        if not isinstance(sym, (torch.SymInt, torch.SymFloat)):
            return None
        return self._placeholder(source, value, sym)

    def _placeholder(self, source, value, example, name=None, like=None):
        name = _sanitize(name or source.name())
        if self._last_placeholder is None:
            first = next(iter(self.graph.nodes), None)
            ctx = self.graph.inserting_before(first) if first is not None else self.graph.inserting_after()
        else:
            ctx = self.graph.inserting_after(self._last_placeholder)
        with ctx:
            node = self.graph.placeholder(name)
        self._last_placeholder = node
        tm = like.meta.get("tensor_meta") if like is not None else None
        if tm is not None and not tm.is_quantized:  # (a quantized one's qparams are its own)
            node.meta["example_value"] = node.meta["val"] = example
            node.meta["tensor_meta"] = tm
        else:
            set_value(node, example)
        if isinstance(example, torch.Tensor):
            self.grad_fns[node] = example.grad_fn
        node.meta["source"] = source.name()
        self.inputs.append((source, node, value))
        return node

    def history_changed(self, inp):
        """Whether an in-place write recorded autograd history on the graph input `inp` (a
        placeholder or get_attr node): its fake's grad_fn is not the one it had when made.
        Autograd refuses to name the grad_fn of a view of a multi-output view (`split(...)[0]`)
        once its base was written in place: that counts as changed."""
        if inp not in self.grad_fns:
            return False
        try:
            return inp.meta["example_value"].grad_fn is not self.grad_fns[inp]
        except RuntimeError:
            return True

    def writes_history(self, node):
        """Whether `node` wrote a graph input in place and so changed its autograd history."""
        writes = node.meta.get("writes", ())
        return any(self.history_changed(inp) and storage_id(inp.meta["example_value"]) in writes
                   for inp in self.grad_fns)

    def sym_size_node(self, tensor_node, prop, dim):
        """One `x.size(d)` / `x.stride(d)` node per tensor and dimension (a symbolic size as
        torch.compile's graphs carry it)."""
        key = (tensor_node, prop, dim)
        node = self._sym_nodes.get(key)
        if node is None or node.graph is not self.graph:
            example = getattr(tensor_node.meta["example_value"], prop)(dim)
            node = self.graph.create_node("call_method", prop, (tensor_node, dim), {})
            derived(node, tensor_node)
            set_value(node, example)
            self._sym_nodes[key] = node
        return node

    def attr_name(self, obj, hint):
        """Register `obj` (tensor or module) on the root module; return its attribute name."""
        name = self._attr_names.get(id(obj))
        if name is not None:
            return name
        base = _sanitize(hint)
        name, i = base, 0
        while hasattr(self.root, name):
            i += 1
            name = f"{base}_{i}"
        if isinstance(obj, torch.nn.Module):
            self.root.add_module(name, obj)
        elif isinstance(obj, torch.nn.Parameter):
            self.root.register_parameter(name, obj)
        else:
            self.root.register_buffer(name, obj, persistent=False)
        self._attr_names[id(obj)] = name
        self._attr_keep.append(obj)
        return name

    def get_attr(self, tensor, hint):
        name = self.attr_name(tensor, hint)
        node = self.graph.get_attr(name)
        set_value(node, self.fake(tensor))
        self.grad_fns[node] = node.meta["example_value"].grad_fn
        return node

    # ---- operations ---------------------------------------------------------------
    def create_node(self, op, target, args, kwargs, fake_fn):
        """Add a node whose example value is `fake_fn()` computed under the fake mode."""
        reshaping = bool(args) and _reshaping(op, target)
        if reshaping:
            refused = _reshape_refused(op, target, args, self.shapes.symbolic) or \
                (_SHARED_RESHAPE if self._shared(_storage_of(args[0])) else None)
            if refused:
                raise Unsupported(f"{_op_name(op, target)}: {refused}")
        spy = _AtenSpy()
        # with symbolic sizes, torch's Python dispatcher, as torch.compile computes fakes: a
        # composite op's C++ path reads sizes as ints (F.pad, F.interpolate, F.unfold guarded
        # each size equal: a trace per size) or asserts (F.bilinear); its decomposition runs
        dispatcher = enable_python_dispatcher() if self.shapes.symbolic else contextlib.nullcontext()
        try:
            with self.fake_mode, spy, example_value_errors_handled(), dispatcher:
                example = fake_fn()
        except Unsupported:
            raise
        except Exception as e:  # data-dependent output, missing fake kernel, user error
            tname = getattr(target, "__name__", str(target))
            err = Unsupported(f"{tname}: cannot be traced with fake tensors "
                              f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
            err.sizes_from_data = isinstance(e, DynamicOutputShapeException)
            raise err from e
        if spy.found:
            tname = getattr(target, "__name__", str(target))
            raise Unsupported(f"{tname}: {spy.found} returns a Python value computed from tensor "
                              f"data (fake tensors only make one up)")
        if self._reshaped and spy.writes & self._reshaped:
            if self._shared(spy.writes & self._reshaped):
                raise Unsupported(f"{_op_name(op, target) or target}: writes memory another tensor shares with "
                                  f"one whose sizes or strides the graph changed in place ({_SHARED_WHY})")
            self._reshaped_written |= spy.writes & self._reshaped
        if reshaping:
            self._reshaped |= _storage_of(args[0])
        if op == "call_function" and (not isinstance(getattr(target, "__name__", None), str)
                                      or not fx_can_name(target)):
            # a callable object (no __name__: FX names a node after its target's) or one FX
            # would name by a path that leads elsewhere: held as an object
            target = ByObject(target)
        node = self.graph.create_node(op, target, tuple(args), dict(kwargs))
        node.meta["example_value"] = example
        node.meta["writes"] = frozenset(spy.writes)
        node.meta["random"] = spy.random
        self.bind_unbacked(node, example)
        return node, example

    def _shared(self, storages):
        """Whether two tensors of the graph (inputs, ops' results) lie in one of `storages`: a
        view and its base, two views of one tensor, two inputs passed as views of one tensor.

        AOTAutograd (aot_eager, inductor) differentiates an in-place change of sizes or strides
        (RESHAPING_OPS: `v.t_()`) of a tensor whose memory another tensor of the graph shares
        as if it had not happened, once that memory is written or another of them is changed
        too (`v = y.view(2, 2); v.t_(); v.add_(w)`: w's gradient untransposed; torch.compile's
        too). So the graph keeps such changes only of a tensor alone in its memory: one of a
        shared tensor is a graph break (create_node); after one, so is a write into that memory
        once another tensor shares it, and a graph input lying in it once the graph wrote it
        makes the frame run as Python (add_input: a break cannot go to a load). Every backend
        breaks there (the backend is not known while tracing)."""
        if not storages:
            return False
        seen = set()
        for node in self.graph.nodes:
            ex = node.meta.get("example_value")
            for t in ex if isinstance(ex, (tuple, list)) else (ex,):
                if isinstance(t, torch.Tensor) and storage_id(t) in storages:
                    seen.add(id(t))
                    if len(seen) > 1:
                        return True
        return False

    def bind_unbacked(self, node, example):
        """Record which output of `node` defines the symbols it made from tensor data
        (`t.item()`: config.capture_scalar_outputs), as torch.compile does for each node: a
        backend that traces the graph again on this ShapeEnv (AOTAutograd) finds them bound,
        and no symbol stays pending for the next node's output."""
        env = self.shapes.env
        if not env.pending_fresh_unbacked_symbols:
            return
        self.shapes.made_unbacked()
        try:
            node.meta["unbacked_bindings"] = compute_unbacked_bindings(env, example)
        except PendingUnbackedSymbolNotFound:
            # made inside the op and consumed there (addcmul_'s `value` given as a 0-d tensor
            # is read with .item() by its kernel): nothing outside the op can refer to it
            env.pending_fresh_unbacked_symbols.clear()

    def count_ops(self):
        return sum(1 for n in self.graph.nodes if n.op in _OPS)

    def has_ops(self):
        return any(n.op in _OPS for n in self.graph.nodes)

    def build_module(self, output_nodes):
        self.graph.output(tuple(output_nodes))
        _fold_specialised_floats(self.graph)
        # Attribute reads nothing uses (e.g. weights a Python-level check looked at, then a
        # leaf module read them itself) are pure: drop them so the graph shows only real work.
        for node in list(self.graph.nodes):
            if node.op == "get_attr" and not node.users:
                self.graph.erase_node(node)
        # Size arithmetic nothing uses (a `if n > 8:` decided at trace time, shapes read for
        # a view that folded) is pure: drop it, last first.
        for node in reversed(list(self.graph.nodes)):
            if not node.users and node.op in ("call_function", "call_method") and \
                    isinstance(node.meta.get("example_value"), (*SYM_TYPES, torch.Size)):
                self.graph.erase_node(node)
        gm = fx.GraphModule(self.root, self.graph, class_name="TracedGraph")
        if any("unbacked_bindings" in n.meta for n in self.graph.nodes):
            # what fake tensors assumed of a value read from data (`torch.arange(n)`: n >= 0)
            # becomes a check in the graph, as torch.compile inserts it: a value that breaks it
            # raises at run time, never a wrong answer from a backend that relied on it
            insert_deferred_runtime_asserts(gm, self.shapes.env, "TracedGraph")
            gm.recompile()
        return gm


def _fold_specialised_floats(graph):
    """Each float the graph computes from sizes that the trace specialised (guarded equal to
    one value: an op needed a Python float, `layer_norm(eps=1e-5 * (w / 4 + 0.5))`) is that
    value where an op takes it. A backend that traces the graph again (AOTAutograd) would
    compute it with sympy, which reorders float arithmetic (`5e-06 + 1e-05*(w/4)`), and pin
    that: a guard that fails on the inputs it was made from (torch.compile's own "guard
    failed on the same frame it was created"). The graph's outputs keep their nodes."""
    for node in graph.nodes:
        ex = node.meta.get("example_value")
        if node.op != "call_function" or not isinstance(ex, torch.SymFloat):
            continue
        value = constant_of(ex)
        if value is None:
            continue
        for user in list(node.users):
            if user.op != "output":
                user.args = fx.map_arg(user.args, lambda n: value if n is node else n)
                user.kwargs = fx.map_arg(user.kwargs, lambda n: value if n is node else n)


# In-place ops that change a tensor's shape, strides, storage or autograd facts (what a copy of
# its values cannot put back, and what code reading the tensor's metadata after them sees
# changed: rewrite/rerun.py, variables/block_holes.py)
RESHAPING_OPS = frozenset({"set_", "resize_", "resize_as_", "as_strided_", "swapdims_", "swapaxes_",
                           "transpose_", "t_", "squeeze_", "unsqueeze_", "detach_"})


_SHARED_RESHAPE = "an in-place change of sizes or strides of a tensor sharing its memory with another one"
_SHARED_WHY = "AOTAutograd's gradients would miss the change"


def _storage_of(node):
    """{storage_id} of the tensor `node` makes, or an empty set."""
    fake = node.meta.get("example_value") if isinstance(node, fx.Node) else None
    return {storage_id(fake)} if isinstance(fake, torch.Tensor) else set()


def reshapes(node):
    """Whether `node` is one of RESHAPING_OPS (called as a method or as a function)."""
    return _reshaping(node.op, node.target)


def repoints_input(node):
    """Whether `node` is a `set_` (any overload: of a tensor, a storage, nothing) of a graph
    input: the caller's tensor is pointed at other memory."""
    return _op_name(node.op, node.target).split(".")[0] == "set_" and bool(node.args) and \
        isinstance(node.args[0], fx.Node) and node.args[0].op in ("placeholder", "get_attr")


def _reshaping(op, target):
    return _op_name(op, target).split(".")[0] in RESHAPING_OPS


def _op_name(op, target):
    name = target if op == "call_method" else getattr(target, "__name__", "")
    return name if isinstance(name, str) else ""


def _reshape_refused(op, target, args, symbolic):
    """Why an op of RESHAPING_OPS cannot be a node, or None.

    - On a graph input (a placeholder) with a symbolic size or stride, or given a symbolic
      size (`resize_(n)`): an input's fake is its placeholder's, so the input's symbolic
      sizes, which the guards and the backend's example inputs are made from, would be the
      changed ones; AOTAutograd's functionalisation asserts on `resize_(n)`.
    - `resize_`/`resize_as_` to more elements than the tensor has: torch 2.15's
      functionalisation refuses to grow a tensor ("Attempted to resize a view tensor to a
      larger size"), so aot_eager and inductor would fail on a graph eager runs (the backend
      is not known while tracing). torch.compile breaks on every resize_."""
    first = args[0]
    fake = first.meta.get("example_value") if isinstance(first, fx.Node) else None
    if symbolic:
        if fake is not None and first.op == "placeholder" and isinstance(fake, torch.Tensor) and \
                any(isinstance(v, torch.SymInt) for v in (*fake.shape, *fake.stride())):
            return "an in-place op that changes sizes or strides, of an input whose sizes are dynamic"
        nodes = []
        fx.map_arg(args[1:], nodes.append)
        if any(isinstance(n.meta.get("example_value"), (torch.SymInt, torch.SymFloat)) for n in nodes):
            return "an in-place op that changes sizes or strides, to dynamic sizes"
    name = _op_name(op, target).split(".")[0]
    if name in ("resize_", "resize_as_") and isinstance(fake, torch.Tensor):
        new = _resized_numel(name, args[1:])
        if new is None or new > fake.numel():
            return "grows the tensor (AOTAutograd cannot; torch.compile breaks on resize_ too)"
    return None


def _resized_numel(name, rest):
    """The number of elements `resize_(*rest)`/`resize_as_(*rest)` asks for; None when not
    known as an int."""
    if name == "resize_as_":
        other = rest[0].meta.get("example_value") if rest and isinstance(rest[0], fx.Node) else None
        sizes = tuple(other.shape) if isinstance(other, torch.Tensor) else None
    else:
        sizes = tuple(rest[0]) if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else tuple(rest)
    if sizes is None or not all(type(v) is int for v in sizes):
        return None
    return math.prod(sizes)


# aten ops whose Python-scalar result is metadata (shape, layout, storage facts): exact on
# fake tensors. Any other op that returns a bool/int/float from tensor inputs read their values.
_METADATA_OPS = frozenset({
    "is_same_size", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous",
    "is_strides_like_format", "is_non_overlapping_and_dense", "_nnz", "dense_dim", "sparse_dim",
    "is_coalesced", "is_pinned", "is_set_to", "_has_same_storage_numel", "size", "stride",
    "numel", "dim", "storage_offset", "_debug_has_internal_overlap", "is_nonzero_meta",
    "_has_compatible_shallow_copy_type", "is_complex", "is_floating_point", "is_signed",
    "is_conj", "is_neg", "is_inference", "_is_zerotensor", "get_device",
})


class _AtenSpy(TorchDispatchMode):
    """Watches the aten ops of one fake computation, for two facts about the node.

    `found`: a Python scalar made from tensor data. Fake tensors raise on the ops that need
    data (`item`, `equal`, `is_nonzero`), but some fake kernels return a placeholder instead
    (`_nested_tensor_from_mask_left_aligned` says True): folding that into the trace would be
    a wrong answer on other inputs.

    `writes`: the storages (storage_id) the node writes, read off each op's schema (`Tensor(a!)`), so
    that a write hidden in an op's name (`batch_norm`'s running stats, `inplace=True`, `out=`)
    counts as one (tracer/rewrite/rerun.py asks which graph inputs a graph changes).

    `random`: an op drew random numbers (tagged `nondeterministic_seeded`: `uniform_`,
    dropout, a leaf module's `rrelu`), so running the node again would draw others."""

    def __init__(self):
        super().__init__()
        self.found = None
        self.writes = set()
        self.random = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.random = self.random or (torch.Tag.nondeterministic_seeded in func.tags
                                      and not _zero_dropout(func, args, kwargs))
        written = _written_args(func)
        if written and written[-1][0] == -1:  # a batch norm: writes only in training mode
            written = written[:-1] if (args[5] if len(args) > 5 else kwargs.get("training")) else ()
        if written:
            for i, name in written:
                value = args[i] if i < len(args) else kwargs.get(name)
                for t in value if isinstance(value, (list, tuple)) else (value,):
                    if isinstance(t, torch.Tensor):
                        self.writes.add(storage_id(t))
        out = func(*args, **kwargs)
        if self.found is None and _is_py_scalar(out) and \
                func.__name__.split(".")[0] not in _METADATA_OPS and not _of_constants(args):
            self.found = str(func)
        return out


def _of_constants(args):
    """Every tensor argument is a fake the fake mode made from a Python constant (it keeps the
    real value: `torch.tensor(2.0).item()` inside a library, torch._numpy's `full`): its
    scalar is that value, the same on every call."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return bool(tensors) and all(getattr(a, "constant", None) is not None for a in tensors)


def _zero_dropout(func, args, kwargs):
    """An op tagged as drawing random numbers only for its dropout, called with dropout off
    (`dropout_p=0.`, `p=0.`, `train=False`): attention kernels and dropout in eval mode."""
    schema = func._schema.arguments
    names = [a.name for a in schema]
    for key in ("dropout_p", "p", "train"):
        if key in names:
            i = names.index(key)
            v = args[i] if i < len(args) else kwargs.get(key, schema[i].default_value)
            if (key == "train" and v is False) or (key != "train" and isinstance(v, (int, float))
                                                   and not isinstance(v, bool) and v == 0):
                return True
    return False


_WRITTEN = {}


# Ops that write arguments their schema does not mark: the batch norms write the running
# stats (arguments 3 and 4) in training mode (torch's functionalization special-cases them too).
_UNMARKED_WRITES = {"native_batch_norm", "cudnn_batch_norm", "miopen_batch_norm", "_batch_norm_impl_index"}


def _written_args(func):
    """(position, name) of the arguments an aten op writes, per its schema; cached."""
    hit = _WRITTEN.get(func)
    if hit is None:
        args = func._schema.arguments
        hit = tuple((i, a.name) for i, a in enumerate(args) if a.alias_info is not None and a.alias_info.is_write)
        if func.__name__.split(".")[0] in _UNMARKED_WRITES:
            hit += ((3, args[3].name), (4, args[4].name), (-1, None))  # -1: if training
        hit = _WRITTEN[func] = hit
    return hit


def _is_py_scalar(value):
    if isinstance(value, (bool, int, float, complex)):
        return True
    return isinstance(value, (tuple, list)) and bool(value) and all(_is_py_scalar(v) for v in value)


def getitem_node(graph, node, index):
    out = graph.graph.create_node("call_function", operator.getitem, (node, index), {})
    out.meta["example_value"] = node.meta["example_value"][index]
    derived(out, node)
    return out


class ByObject:
    """A call_function target the graph's code holds as an object (a global of its own), not
    by the qualified name FX would write for it (see fx_can_name)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return f"ByObject({self.fn!r})"


def fx_can_name(target):
    """Whether the code FX generates for a graph calls `target` itself. FX writes an object
    from torch's namespace by its qualified name, looked up from `torch` when the code runs
    (fx/graph.py: add_global); where that name leads to another object (a ScriptFunction's
    names are its class's) the graph would call that other object."""
    from torch.fx.graph import _is_from_torch
    from torch.fx.node import _get_qualified_name
    if not _is_from_torch(target) or target is torch.device:
        return True
    try:
        parts = _get_qualified_name(target).split(".")
    except Exception:  # noqa: BLE001 - FX could not name it either
        return False
    obj = torch if parts[0] == "torch" else None
    for part in parts[1:]:
        obj = getattr(obj, part, None)
    return obj is target
