"""Repeated calls traced once: a call that repeats an earlier one's kind is replayed.

Real models are stacks of identical blocks (encoder and decoder layers, stages of equal
convolution blocks), and tracing each one again made a model's first call grow with its
depth. Their helpers repeat too: `apply_rotary_pos_emb`, `sdpa_attention_forward(module, ...)`
and a config's `__getattribute__` run once per layer even where the layer itself cannot be
replayed (it writes to a KV cache). Every inlined call of a Python function is a candidate
(`call_function`); its *root* is its first argument when that is a module with a source (a
forward, a method, a helper given the module), and a call has none otherwise. A call is a
block when its other arguments are tensors made in the graph, constants, tuples of them, or
values read from the frame's inputs or globals (the same Variable each time: an input
tensor, a config, another module). The first call of a kind (the function, the root's class,
the arguments' kinds and metadata, grad mode, whether a try of the caller is around the
call) is inlined as any call, and what it did is recorded:

- the guards it added, which read the root through its source (`self.layers[0].training`,
  its submodules' types and hooks, a `layer_idx`) or read shared state (globals, classes);
- the graph inputs it added (the root's parameters and buffers, by source);
- the nodes it added, and how its result is made of them.

The record is analysed when a second call of the kind comes (most recorded calls, a model's
forward or a helper called once, never meet one). The guards and the inputs' sources are then
kept from a stand-in root (`STAND_IN`, `V` in generated code) and compiled once into a check and
a getter. A later call of the same kind, on a sibling, is *replayed* when the check holds with
the sibling module as `V` (on the frame's own arguments, as a cache entry's guards will read
them); the check includes the first block's inputs' tensor guards, so another weight shape
is another block (a kind keeps up to `_VARIANTS` records: a `k_proj` beside a `q_proj`). The
guards are then added re-targeted to the sibling's source, its parameters and buffers become
graph inputs through the usual wrapping (which makes their tensor guards), and the recorded
nodes are copied with the sibling's inputs, in the order an inlined trace makes them. A call
without a root has no check: the same function on arguments of the same kinds, reading the
same shared state, does what it did. The graph and the guards are those an unrolled trace
gives (tests/test_blocks.py compares them). What re-targeted guards cannot promise makes the
first call unrecorded, and every later call of its kind is then inlined as before:

- side effects (a store to an attribute, a global, a container, a closure cell), a generator
  left needing its finally, symbolic sizes, graph attributes, in-place writes to graph inputs
  (a BatchNorm's running stats);
- a read of a pending store (what it found is the trace's: an object made in the frame,
  changed since without a log entry, perhaps), a read through the root answered by an object
  met before without a source (nothing guards it), a guard whose source indexes by an object
  (`table[self]`), a store pending on the root (its reads of it are not guarded);
- nodes that read a graph value made before the call other than the arguments, or a graph
  input the call made that is not found through the root;
- a result other than tensors the call made (not views of values from before the call, not
  taken from a multi-output op), constants, the arguments themselves, objects of the shared
  state (a sourced config: the same Variable), and tuples of these.

What "no store was logged" means is the side-effect log's (graph/side_effects.py): every
store counts, and so does a change of an object made in the frame once shared state reaches
it (`escape`: a list put into a global dict), which the log would not hold otherwise.

A replay is refused (the call is inlined) where any store was logged since the record (the
log's sizes and event count), or one is pending on the sibling: an inlined call would read it,
the check reads the live objects.

An object made in the frame before the call (a KV cache) may be an argument too, keyed by
identity, when the block's own code only hands it on: each call it makes with the object is
a hole, traced again where the block is replayed (block_holes.py: what a hole may do, and
what a replayed one is checked for). The templates a replay builds from, and the fakes and
metadata of what it copies, are block_copy.py's.

A copied node's example value is the first call's (same metadata); each tensor the replay
returns gets a fake of its own, computed from its node's inputs, so that later code sees a
tensor of its own (identity, version counter), as it would after an inlined call. Its
nn_module_stack and stack_trace name the modules and frames around the replayed call.
`config.reuse_blocks` turns this off (the tests compare both ways).
"""
import dataclasses
import itertools
import math
import weakref

import torch
import torch.fx as fx

from guards import TensorMatch, TypeMatch
from guards.builder import _implied_types as builder_implied_types
from guards.codegen import ExprContext
from guards.retarget import STAND_IN, BlockGuards, Retarget, name_template
from guards.sources import AttrSource, ItemSource

from ..graph import inference_blocks, node_meta
from ..graph.subgraphs import BLOCK_META
from ..runtime import config, records
from . import block_copy, containers, generators
from .block_copy import CONSTANTS, Refused, under
from .base import ConstantVariable, is_constant_value
from .tensor import TensorVariable


# ---- keys: which calls are the same kind of block --------------------------------------------

def _arg_key(var, seen):
    """What makes two argument Variables interchangeable for a block, or None (not a block).
    A tensor made in the graph by its metadata (and which earlier argument it is, if it is
    one: `f(x, x)` is another kind than `f(x, y)`); one with a source (an input) by identity
    and its metadata (an in-place `x.unsqueeze_(0)` between two calls changes it)."""
    if isinstance(var, TensorVariable):
        facts = block_copy.facts(var.example)
        if facts is None:
            return None
        if var.source is not None or var.real is not None:
            return ("same", id(var), facts)
        if id(var) in seen:
            return ("again", seen[id(var)])
        seen[id(var)] = len(seen)
        return ("tensor", facts)
    if type(var) is ConstantVariable and type(var.value) in CONSTANTS:
        v = var.value  # (-0.0 == 0.0, and `x / s` tells them apart)
        return ("const", type(v), v, math.copysign(1.0, v) if type(v) is float else None)
    if type(var) is containers.TupleVariable:
        items = [_arg_key(v, seen) for v in var.items]
        return None if any(i is None for i in items) else ("tuple", tuple(items))
    if type(var) is new_objects.NewObjectVariable:
        # an object made in the frame (a KV cache), the same one: the block may only hand it
        # to calls, which are traced again where it is replayed (block_holes.py)
        return ("frame", id(var))
    if var.source is not None and not getattr(var, "_mutated", False):
        # an object read from the frame's inputs or globals (a config, a table, another
        # module), the same Variable in both calls: what the call read of it is guarded (a
        # call that read what the trace stored is not recorded, and a container the trace
        # changed, whose items are the trace's, is no block's argument), and no store was
        # made since
        return ("same", id(var))
    return None


def _key(tx, var, fn, args, kwargs):
    """The kind of block this call is, or None (module docstring). (Objects named by id in it
    are kept alive by the record: `Block.keep`.)"""
    if not config.reuse_blocks or (var is not None and var.source is None):
        return None
    if args and type(args[0]) is new_objects.NewObjectVariable:
        return None  # a method of an object made in the frame: it reads its state (a cache's update)
    seen = {}
    keys = [_arg_key(a, seen) for a in _rest(var, args)] + [_arg_key(v, seen) for _k, v in sorted(kwargs.items())]
    if any(k is None for k in keys):
        return None
    ctx = tx.ctx
    return (type(var.module) if var is not None else None, fn, tuple(keys), tuple(sorted(kwargs)),
            torch.is_grad_enabled(), tx.under_handler(), tuple(id(a) for a in ctx.mode_blocks), id(tx.output))


def _rest(var, args):
    """The arguments keyed and matched by position: all of them, or all but the module."""
    return args[1:] if var is not None else args


def call_function(tx, fn_var, args, kwargs, inline):
    """The result of calling the Python function of `fn_var` (about to be inlined by `inline()`):
    a block whose root is its first argument when that is a module reached through a source
    (a forward, a method, `sdpa_attention_forward(module, q, k, v)`), else a block without a
    root, whose arguments are all matched (`apply_rotary_pos_emb(q, k, cos, sin)`)."""
    first = args[0] if args else None
    var = first if isinstance(first, nn_module.NNModuleVariable) and first.source is not None else None
    return call(tx, var, fn_var, args, kwargs, inline)


def call(tx, var, fn_var, args, kwargs, inline):
    """The result of calling `fn_var` with `args` and `kwargs` (with `var`, a module, first; or
    var None): `inline()`, or a replay of an earlier call of the same kind. A call that the
    code of a block being recorded makes with an object made before that block is one of
    its holes (block_holes.py)."""
    fn = fn_var.fn
    recs = tx.ctx.recordings
    if not recs:
        return _call(tx, var, fn, args, kwargs, inline)
    rec = block_holes.hole_of(recs, args, kwargs)
    if rec is not None:
        return rec.hole(tx, var, fn_var, args, kwargs, lambda: _call(tx, var, fn, args, kwargs, inline))
    top = recs[-1]
    top.depth += 1
    try:
        return _call(tx, var, fn, args, kwargs, inline)
    finally:
        top.depth -= 1


def _call(tx, var, fn, args, kwargs, inline):
    key = _key(tx, var, fn, args, kwargs)
    if key is None:
        return inline()
    memo = tx.ctx.blocks
    variants = memo.get(key)
    if variants is _REFUSED:
        return inline()
    for block in variants or ():
        result = block.replay(tx, var, args, kwargs)
        if result is not None:
            return result
    if (variants and len(variants) >= _VARIANTS) or not _effects_allow(tx, var):
        return inline()  # (reads of a store pending on the module are not guarded: no record)
    before = _Before.take(tx)
    rec = block_holes.Recording(tx, var, block_holes.flat_args(_rest(var, args), kwargs), key[5])
    recs = tx.ctx.recordings
    recs.append(rec)
    try:
        result = inline()
    finally:
        recs.pop()
        rec.close()
    block = Block.record(tx, var, fn, args, kwargs, before, result, rec)
    if block is not None:
        memo[key] = [*(variants or ()), block]  # (a new list: a trial's copy keeps its own)
    elif not variants:
        memo[key] = _REFUSED
    return result


def _effects_allow(tx, var):
    """Whether no store is pending on the block's module (a sibling's check reads the live
    objects; a pending store is what an inlined call reads instead). Stores elsewhere are
    allowed: a call that reads one is not recorded, and none may be made between the
    record and a replay (the log's sizes)."""
    return var is None or not tx.side_effects.writes_under(var)


_REFUSED = object()  # a kind whose first call did what a replay cannot promise
# records kept per kind: calls of one kind whose checks differ (a `k_proj` of another weight
# shape than the `q_proj` recorded first) are recorded each, up to this many
_VARIANTS = 4
_ANALYSED = weakref.WeakValueDictionary()  # id(block) -> the module block whose nodes carry it


# ---- recording the first block -----------------------------------------------------------------

@dataclasses.dataclass
class _Before:
    """The trace's state before the first block's call (what the record compares with)."""
    guards: int
    inputs: int
    mark: tuple
    last: object
    effects: tuple
    generators: int
    mutable: int
    marks: int
    history: object
    under_handler: bool
    unsourced: int
    grad: bool
    memo: int
    memo_reads: int
    pending_reads: int

    @classmethod
    def take(cls, tx):
        ctx, out = tx.ctx, tx.output
        return cls(len(ctx.guards), len(out.inputs), out.mark(), block_holes.last_node(out.graph), ctx.side_effects.sizes(),
                   len(generators.pending(ctx)), len(ctx.mutable_inputs), len(ctx.shape_marks), ctx.history_write_at,
                   ctx.ops_under_handler, len(ctx.unsourced_reads), torch.is_grad_enabled(), len(ctx.wrap_memo),
                   len(ctx.memo_reads), ctx.side_effects.pending_reads)


class Block:
    """A recorded call. What it made is kept as taken (slices of the trace's lists, its
    nodes); it is analysed (`_ready`) when a second call of its kind comes, as most recorded
    calls (a model's forward, a helper called once) never meet one."""

    def __init__(self, var, fn, keep, before, guards, n_guards, inputs, nodes, arg_nodes, result,
                 under_handler, frames, n_outer, distinct):
        self.path = var.path if var is not None else None   # the first call's module path
        self.source = var.source if var is not None else None
        self.fn = fn                   # the function recorded (what a debugger or a profile names)
        self.keep = keep               # the first call's arguments: the ids in its key stay theirs
        self.before = before
        self.raw_guards = guards       # the guards the call added
        self.n_guards = n_guards       # len(ctx.guards) after it (its inputs' tensor guards are in there)
        self.all_inputs = inputs       # out.inputs after it
        self.nodes = nodes             # the call's nodes, in graph order
        self.args = arg_nodes          # [node of an argument tensor], in _arg_nodes order
        self.result = result           # template (block_copy.template)
        self.under_handler = under_handler  # the call set ctx.ops_under_handler
        self.frames = frames           # [(code, line)] of the caller's stack (stack_trace's prefix)
        self.n_outer = n_outer         # modules being called around the call (nn_module_stack's prefix)
        self.distinct = distinct       # sources of what it added to ctx.mutable_inputs
        self.effects = before.effects  # the side-effect log's sizes when it was recorded
        self.ready = None              # None: not analysed yet; then True, or False (refused)
        self.replays = 0               # calls replayed so far (their nodes' BLOCK_META call number)
        # set by _ready:
        self.guards = self.inputs = self.shared = self.check = self.values = self.prefix = None
        self.twin = None       # BlockGuards(stand-in root, self.guards): what each sibling's is named by
        self.matches = None    # per input, the first block's TensorMatch (its check holds them)
        self.paths, self.objects = [], None  # (_stores_on)
        self.holes, self.lookups, self.passed = [], [], []  # (block_holes.py: set by _record)
        self.extra = []        # rooted sources a replay reads for its holes (modules, rereads)
        self.input_at = None   # per input, the holes made before it (None: no holes)

    @classmethod
    def record(cls, tx, var, fn, args, kwargs, before, result, rec):
        try:
            return cls._record(tx, var, fn, args, kwargs, before, result, rec)
        except Refused:
            return None

    @classmethod
    def _record(cls, tx, var, fn, args, kwargs, before, result, rec):
        ctx, out = tx.ctx, tx.output
        if rec.refused is not None:
            raise Refused(rec.refused)
        m = out.mark()
        if m[2] != before.mark[2] or m[3] != before.mark[3]:
            raise Refused("graph attributes or symbolic inputs")
        if ctx.side_effects.sizes() != before.effects or len(ctx.shape_marks) != before.marks \
                or ctx.history_write_at != before.history:
            raise Refused("side effects")
        if torch.is_grad_enabled() != before.grad:
            raise Refused("grad mode left changed")
        if len(generators.pending(ctx)) != before.generators:
            raise Refused("a generator left needing its finally")
        if ctx.side_effects.pending_reads != rec.pending:
            # what it read is the trace's (what a store put there, made in the frame and
            # changed since without a log entry, perhaps): nothing guards it for a later call
            raise Refused("a read of a pending store")
        holes = rec.holes
        own = block_holes.Own(holes)  # what the block's own code added to the trace's lists (not its holes')
        src = var.source if var is not None else None
        if src is not None:
            if any(under(s, src) for s in own(ctx.unsourced_reads, before.unsourced, "unsourced_reads")):
                raise Refused("a read through the block answered by an object met without a source")
            # a value under the block wrapped before the call (`l(l(x))`, or read before it) or
            # in one of its holes, and found in the wrap memo by its own code, added no guard
            # there: its facts are not in the record (a tensor's are: its tensor guard is checked
            # on the sibling's, made when or not) (the root itself too: `self is
            # model.layers[0]` found it through that source)
            reread = [v for v in own(ctx.memo_reads, before.memo_reads, "memo_reads")
                      if not isinstance(v, TensorVariable) and under(v.source, src)]
            if reread:
                memo = list(ctx.wrap_memo.values())
                early = {id(v) for _x, v in memo[:before.memo]}
                for h in holes:
                    i = block_holes.mark_index("wrap_memo")
                    early.update(id(v) for _x, v in memo[h.marks[i]:h.ends[i]])
                if any(id(v) in early for v in reread):
                    raise Refused("a value under the block wrapped before its code read it was read in it")
        nodes, hole_nodes = [], set()
        after = {}
        for h in holes:
            h.at = 0
            after.setdefault(h.last_before, []).append(h)
            hole_nodes |= block_holes.made_by(out.graph, h)
        node = before.last.next if before.last is not None else next(iter(out.graph.nodes), None)
        while node is not None and node.op != "root":  # (the graph's sentinel closes its ring)
            if node.op != "placeholder" and node not in hole_nodes:
                nodes.append(node)
            for h in after.get(node, ()):
                h.at = len(nodes)
            node = node.next
        if any(inference_blocks.opens(n) for n in nodes):
            # (a copy's results would get fakes made again outside that block: not inference tensors)
            raise Refused("an inference-mode block of its own")
        arg_nodes = _arg_nodes(_rest(var, args), kwargs)
        made = set(nodes)
        results = {t[1] for h in holes for t in block_holes.new_tensors(h.result)}
        result = block_copy.template(result, made, arg_nodes, src, results)
        frames = node_meta.frames(tx)
        mutable = own(ctx.mutable_inputs, before.mutable, "mutable_inputs") if src is not None else []
        distinct = [v.source for v in mutable if under(v.source, src)]
        if any(getattr(v, "identity_relied", False) for v in mutable if under(v.source, src)):
            # `self is LIST[0]`: decided by the identity of the Variables, which a sibling's
            # would answer otherwise and which no guard of the record says
            raise Refused("the root, or an object under it, compared by identity")
        keep = (args, kwargs, list(ctx.mode_blocks), out)
        block = cls(var, fn, keep, before, own(ctx.guards, before.guards, "guards"), len(ctx.guards),
                    list(out.inputs), nodes, arg_nodes, result, ctx.ops_under_handler and not before.under_handler,
                    frames, len(ctx.module_calls), distinct)
        block.holes, block.lookups, block.passed = holes, rec.lookups, rec.passed
        return block

    def _ready(self, tx):
        try:
            self._analyse(tx)
            return True
        except Refused:
            return False

    def _analyse(self, tx):
        """What a replay needs, or Refused where the record cannot promise it (docstring)."""
        ctx, before, src = tx.ctx, self.before, self.source
        nodes, made = self.nodes, set(self.nodes)
        # graph inputs: those the call made, in order, then older ones its nodes read; each
        # found through the block (the sibling's own) or through a shared source (the same)
        by_node = {n: s for s, n, _v in self.all_inputs}
        args_set = set(self.args)
        used = [u for n in nodes for u in n.all_input_nodes if u.op == "placeholder" and u not in args_set]
        made_inputs = [(s, n) for s, n, _v in block_holes.Own(self.holes)(self.all_inputs, before.inputs, "inputs")]
        inputs, shared, seen = [], set(), set()
        for source, node in made_inputs + [(by_node[u], u) for u in dict.fromkeys(used) if u in by_node]:
            if node in seen:
                continue
            seen.add(node)
            if src is not None and under(source, src):
                inputs.append((source, node))
            elif any(node is n for _s, n in made_inputs):
                raise Refused("a graph input the call made, not found through the block")
            else:
                shared.add(node)
        if self.holes:  # each input is wrapped where the inlined call makes it: after the holes before it
            pos = {n: j for j, (_s, n, _v) in enumerate(self.all_inputs)}
            starts = [h.marks[block_holes.mark_index("inputs")] for h in self.holes]
            self.input_at = [sum(1 for st in starts if st <= pos.get(n, -1)) for _s, n in inputs]
        results = {t[1] for h in self.holes for t in block_holes.new_tensors(h.result)}
        allowed = made | args_set | {n for _s, n in inputs} | shared | results
        for n in nodes:
            if n.op not in ("call_function", "call_method") or n.meta.get("writes"):
                raise Refused(f"a {n.op} node, or one writing in place")
            for u in n.all_input_nodes:
                if u not in allowed:
                    raise Refused("a node reading a graph value made before the call")
        through = block_holes.passed_through(self)
        guards, typed = [], []
        for g in self.raw_guards:
            if through and getattr(g, "source", None) in through:
                # the sibling's own value is read and guarded where its hole is; the check only
                # asks that it is an int (and there to be read)
                typed.append(TypeMatch(g.source, int))
                continue
            if src is None or not any(under(s, src) for s in g.sources()):
                if not _plain_keys(g):  # `table[self]`: the sibling would read another entry
                    raise Refused("a guard keyed by an object")
                continue
            if not isinstance(g, TensorMatch):
                guards.append(g)
        # each input's tensor guard (made now or before the call) is checked on the sibling's
        # input, not added: wrapping the sibling's input makes its own
        matches = {g.source: g for g in itertools.islice(ctx.guards, self.n_guards) if isinstance(g, TensorMatch)}
        if any(s not in matches for s, _n in inputs):
            raise Refused("a graph input without its tensor guard")
        tensor_checks = [matches[s] for s, _n in inputs]
        # the guards and the inputs' sources from a stand-in root, compiled once: a sibling is
        # checked and read by calling them with its module (no compile per sibling)
        # (each original names its copy, and equal copies are kept once: a block's forward
        # guards one module many times, and a sibling's copies would only be dropped again
        # by the guard set; the originals then make the same group text key as the copies)
        if src is not None:
            to_root = Retarget(src, _ROOT)
            kept = {}
            for g in guards:
                c = to_root(g)
                name_template(g, src, kept.setdefault(c, c))
            # (in the order a set evaluates guards, by depth: a base's guards before those
            # reaching through it; kept as one tuple, the template of every sibling's
            # BlockGuards, whose identity names the block's guards to the guard set)
            guards = tuple(sorted(_without_repeats(list(kept)), key=lambda g: (g.depth(), g.rank)))
            self.twin = BlockGuards(_ROOT, guards)
            rooted = []
            for s, n in inputs:  # (the sources the group check returns: the batch's parameters)
                rooted.append((to_root(s), n))
                name_template(s, src, rooted[-1][0])
            inputs = rooted
            self.distinct = [to_root(d) for d in self.distinct]
            self.holes = [block_holes.ready(self, h, made, results, to_root) for h in self.holes]
            self.check, self.values = _compile(ctx.f_builtins, [*guards, *(to_root(g) for g in (*typed, *tensor_checks))],
                                               [s for s, _n in inputs] + self.extra)
            self._tag(nodes)
        elif self.holes:
            self.holes = [block_holes.ready(self, h, made, results, None) for h in self.holes]
        self.guards, self.inputs, self.shared, self.matches = guards, inputs, shared, tensor_checks
        if src is not None:  # (the objects the check reads through the root: _stores_on)
            paths = {}
            for g in guards:
                for p in _sources(g):
                    for a in (p, *p.ancestors()):
                        if a != _ROOT and under(a, _ROOT):
                            paths[a] = None
            self.paths = list(paths)
        self.prefix = node_meta.format_frames(self.frames)
        self.raw_guards = self.all_inputs = self.before = None

    def _tag(self, nodes):
        """Tag the first call's nodes as this kind's call 0 (inductor compiles a module's
        calls as one subgraph: graph/subgraphs.py), unless a block around this one (a layer
        around its norm) has tagged them already: the outermost repeated call is the unit."""
        first = nodes[0] if nodes else None
        for n in nodes:
            tag = n.meta.get(BLOCK_META)
            owner = _ANALYSED.get(tag[0]) if tag is not None and tag[1] == 0 else None
            if owner is not None and owner is not self and first in owner.node_set:
                continue
            n.meta[BLOCK_META] = (id(self), 0)
            ev = n.meta.get("example_value")
            if isinstance(ev, torch.Tensor) and ev._is_view():
                n.meta["view"] = True  # (kept on disk: a loaded graph is outlined alike)
        self.node_set = set(nodes)
        _ANALYSED[id(self)] = self

    def _stores_on(self, tx, var, L, G, C):
        """Whether a store is pending on an object the check reads through the sibling
        (`alias = layers[1].norm; alias.eps = 0.1` before the call: writes_under, which
        goes by sources, does not see it), which an inlined call would read instead."""
        stores = tx.side_effects.attr_stores
        pending = {id(v.value) for v, _d in stores.values() if getattr(v, "value", None) is not None}
        if not pending:
            return False
        if self.objects is None:
            ex = ExprContext(tx.ctx.f_builtins)
            exprs = "".join(p.guard_expr(ex) + ", " for p in self.paths)
            self.objects, _ = ex.compile("check_block_objects", ["try:", f"    return ({exprs})", "except Exception:",
                                                                 "    return None"], args="V, L, G, C")
        found = self.objects(var.module, L, G, C)
        return found is None or any(id(o) in pending for o in found)

    # ---- replaying it on a sibling -------------------------------------------------------------
    def replay(self, tx, var, args, kwargs):
        """The call's result, its nodes and guards added; None (nothing added) when the
        re-targeted guards do not hold on it."""
        ctx, out = tx.ctx, tx.output
        # the check reads the live objects: a store pending since the first block's call (or
        # on the sibling) would be what an inlined call reads instead
        if ctx.side_effects.sizes() != self.effects or not _effects_allow(tx, var):
            return None
        if self.ready is None:
            self.ready = self._ready(tx)
        if not self.ready or (self.holes and not block_holes.replayable(self)):
            return None
        L, G, C = ctx.frame_values
        env = dict(zip(self.args, _arg_nodes(_rest(var, args), kwargs)))
        env.update((n, n) for n in self.shared)
        values = extra = ()
        if var is not None:
            if not self.check(var.module, L, G, C) or self._stores_on(tx, var, L, G, C):
                return None
            if self.lookups and not block_holes.lookups_hold(self, 0):
                return None
            values = self.values(var.module, L, G, C)
            if values is None:  # (a value the check does not reach: not there to read)
                return None
            values, extra = values[:len(self.inputs)], values[len(self.inputs):]
            retarget = Retarget(_ROOT, var.source, tag=True)
            ctx.guards.append(self._guards_on(var.source))
            self._wrap_inputs(tx, var, retarget, values, env, 0)
        elif self.lookups and not block_holes.lookups_hold(self, 0):
            return None
        stacks = block_copy.StackMap(self, var, tx)
        tag = (id(self), self.replays + 1) if var is not None else None
        arg_vars = block_holes.flat_args(_rest(var, args), kwargs)
        made_vars = {}

        def holes_before(i):  # (the holes the inlined call makes before the block's node i)
            for k, hole in enumerate(self.holes):
                if hole.at == i:
                    block_holes.replay(self, tx, hole, var, values, extra, env, arg_vars, made_vars, stacks, k)
        for i, n in enumerate(self.nodes):
            if self.holes:
                holes_before(i)
            new = out.graph.create_node(n.op, n.target, fx.map_arg(n.args, env.__getitem__),
                                        fx.map_arg(n.kwargs, env.__getitem__))
            meta = dict(n.meta)
            stacks(meta)
            if "source_fn_stack" in meta:
                meta["source_fn_stack"] = [(new.name, meta["source_fn_stack"][-1][1])]
            if tag is not None:
                meta[BLOCK_META] = tag
            else:  # (a call without a root is not outlined: a helper of a few ops)
                meta.pop(BLOCK_META, None)
            new.meta.update(meta)
            env[n] = new
        if self.holes:
            holes_before(len(self.nodes))
        self.replays += 1
        if var is not None:
            ctx.block_roots[self.source] = None
            ctx.block_roots[var.source] = None
            ctx.mutable_inputs.extend(_Distinct(retarget(d)) for d in self.distinct)
        if self.under_handler:
            ctx.ops_under_handler = True
        records.blocks_replayed(1)
        return block_copy.build(self.result, env, arg_vars, out, made_vars)

    def _guards_on(self, source):
        """The block's guards read through `source`, a sibling, as one guard (its group check
        is then the first sibling's: guards/builder.py)."""
        g = BlockGuards(source, self.guards)
        name_template(g, source, self.twin)
        return g

    def _wrap_inputs(self, tx, var, retarget, values, env, at):
        """The sibling's graph inputs the inlined call makes after `at` holes (all of them
        where the block has none), wrapped as the inlined call wraps them."""
        for i, ((source, node), value) in enumerate(zip(self.inputs, values)):
            if self.input_at is not None and self.input_at[i] != at:
                continue
            new_source = retarget(source)
            rel = _module_path(source, _ROOT)
            if rel is not None:  # a parameter or buffer, as NNModuleVariable reads it
                tv = nn_module.module_tensor(tx, value, new_source, f"{var.path}.{rel}", like=node, match=self.matches[i])
            else:
                tv = builder.wrap(tx, value, new_source)
            env[node] = tv.node


def group_roots(ctx):
    """The roots of the entry's guard groups (guards/builder.py): each replayed block and the
    block it replays (outermost: a layer, not the layer's replayed norms), whose guards are
    then one function's text, compiled once for all of them; and the other modules whose
    forward was inlined, outside those blocks."""
    blocks = ctx.block_roots
    out = {}
    for source in (*blocks, *ctx.module_roots):
        if source not in out and not any(b in blocks for b in source.ancestors()):
            out[source] = None
    return tuple(out)


class _Distinct:
    """An entry of ctx.mutable_inputs, which is read for its source only (convert_frame)."""

    def __init__(self, source):
        self.source = source


def _arg_nodes(args, kwargs):
    """The graph nodes of the tensors made in the graph among the arguments, in order."""
    out = []

    def walk(v):
        if isinstance(v, TensorVariable):
            if v.source is None and v.real is None:
                out.append(v.node)
        elif type(v) is containers.TupleVariable:
            for item in v.items:
                walk(item)
    for a in args:
        walk(a)
    for _k, v in sorted(kwargs.items()):
        walk(v)
    return out


def _without_repeats(guards):
    """A template's guards without the facts another of its guards states: one a block replayed
    inside it checks too (`self.norm2.eps`, read by the layer and by its replayed norm), and
    a TypeMatch its DictKeysMatch implies (guards/builder.py says the same of a whole set,
    which sees these guards one unit at a time)."""
    inner = {f for g in guards if type(g) is BlockGuards for f in g.flat()}
    return builder_implied_types([g for g in guards if g not in inner])[0]


def _sources(g):
    """The sources a guard reads (a BlockGuards: those of each guard it stands for)."""
    if type(g) is BlockGuards:
        return [s for f in g.flat() for s in f.sources()]
    return g.sources()


def _plain_keys(g):
    """The guard's sources index only by plain constants (not by an object such as a module)."""
    for s in g.sources():
        while s is not None:
            key = getattr(s, "key", None)
            if key is not None and not is_constant_value(key):
                return False
            s = s.base
    return True


def _module_path(source, root):
    """`linear1.weight` for `root._modules['linear1']._parameters['weight']`; None for a source
    that is not a chain of module dicts."""
    parts, s = [], source
    while s != root:
        base = getattr(s, "base", None)
        if type(s) is not ItemSource or type(base) is not AttrSource or \
                base.attr not in ("_modules", "_parameters", "_buffers"):
            return None
        parts.append(str(s.key))
        s = base.base
    return ".".join(reversed(parts))


_ROOT = STAND_IN  # the block's module, whatever its source: `V` in its check and getter


def _compile(builtins, guards, sources):
    """(check, values) of a recorded block: check(V, L, G, C) is whether every guard holds with
    V the sibling module, values(V, L, G, C) the sibling's values of `sources`."""
    ex = ExprContext(builtins)
    conds = [c for g in guards for c in g.conditions(ex)] or ["True"]
    check, _ = ex.compile("check_block", ["try:", f"    return bool({' and '.join(f'({c})' for c in conds)})",
                                          "except Exception:", "    return False"], args="V, L, G, C")
    ex = ExprContext(builtins)
    values, _ = ex.compile("check_block_values", ["try:", f"    return ({''.join(s.guard_expr(ex) + ', ' for s in sources)})",
                                                  "except Exception:", "    return None"], args="V, L, G, C")
    return check, values


# Modules of the value model that also import this one's users (see generators.py).
from . import block_holes, builder, new_objects, nn_module  # noqa: E402
