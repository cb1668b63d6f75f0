"""Calls inside a repeated block that are traced again where it is replayed (its *holes*).

An HF decoder layer called the usual way takes the model's KV cache, an object made in the
frame before the layer runs, and writes its layer's keys and values into it
(`past_key_values.update(k, v, self.layer_idx)`). What the layer reads of such an object
differs from sibling to sibling (the first layer finds its cache layer empty, another may
not), and nothing guards it, so variables/blocks.py could not replay such a layer, and every
layer of a 24-layer model was traced in full. Here a block may take objects made in the frame
as arguments when it only hands them on: each call of the block's own code (not of a call
inside another) that is given such an object is a hole, traced anew where the block is
replayed, between the copied nodes, as an unrolled trace would trace it there.

What makes it sound:

- The block's own code never reads the object's state (`Recording.touched`: NewObjectVariable
  reads its instance dict, slots, items and elements through properties that tell the
  recordings watching it). A method lookup (`cache.update`) reads only that the instance
  dict lacks the name (`looked_up`), which the replay checks again where it was made.
- A hole's arguments are rebuilt for the sibling from templates: the block's arguments (by
  position: the same object, keyed by identity), tensors its own nodes made, constants,
  tuples, the sibling's modules and attributes (by source, re-targeted), objects of the
  shared state. Anything else (a list the block made, which a hole could change) refuses.
- A hole's result must come back the same: the same constants and shared objects, tensors
  with the same metadata (they become the graph values the block's later nodes read), its
  tensor arguments unchanged in metadata. A replayed hole that returns something else, or
  raises, cannot be undone half-way: the function is marked and the frame is traced again
  (TraceAgain), where that block is inlined.
- An int the block read from its module (`self.layer_idx`) and only passed into holes is a
  `PassConstant`: it records whether its value was read outside a hole. If not, its guard
  is left out of the block's check and the hole gets the sibling's value (guarded there, as
  the unrolled trace guards it). Read anywhere else (`if self.layer_idx == 0`), it is kept,
  and a sibling with another value is not a replay.
- Everything a hole does is the hole's: its guards, graph inputs, nodes and reads of pending
  stores are not the block's (the replay makes them again); a hole must not log a store
  (the log is compared between record and replay) or leave the trace with symbolic inputs.
"""
import dataclasses
import weakref

import torch

from guards.retarget import STAND_IN, Retarget

from ..exc import TraceAgain, Unsupported
from ..graph import node_meta
from ..graph.output_graph import reshapes
from . import containers
from . import block_copy, generators
from .block_copy import Refused, facts, under, view_chain
from .base import ConstantVariable
from .tensor import TensorVariable


class PassConstant(ConstantVariable):
    """An int read from a module under a block being recorded (`self.layer_idx`); `used`
    says whether its value was read outside the block's holes."""

    def __init__(self, value, source, rec, guard):
        self.rec, self.guard, self.used = rec, guard, False
        super().__init__(value, source)

    @property
    def value(self):
        if not self.rec.in_hole:
            self.used = True
        return self.__dict__["_value"]

    @value.setter
    def value(self, value):
        self.__dict__["_value"] = value


def passable(tx, var):
    """`var` (just read from a module through a source), as a PassConstant when it is an
    int under the root of the block being recorded."""
    recs = tx.ctx.recordings
    if not recs or type(var) is not ConstantVariable or type(var.value) is not int or var.source is None:
        return var
    rec = recs[-1]
    guards = tx.ctx.guards
    if rec.source is None or rec.in_hole or not under(var.source, rec.source) or not guards or \
            getattr(guards[-1], "source", None) != var.source:
        return var
    pc = PassConstant(var.value, var.source, rec, guards[-1])
    rec.passed.append(pc)
    return pc


class _NoTemplate(Exception):
    pass


@dataclasses.dataclass
class Hole:
    fn: object            # template of the function it calls (Recording._callee)
    args: list            # templates of the call's positional arguments
    kwargs: dict          # name -> template
    modules: list         # templates of the modules entered inside the block before the call
    frames: list          # [(code, line)] of the block's own frames at the call
    marks: tuple          # the trace's list lengths before the call (_marks)
    ends: tuple           # ... after it
    last_before: object   # the graph's last node before the call
    last_after: object    # ... after it
    result: object = None  # template of what it returned
    tensors: list = None  # [(index in its flattened arguments, facts)] of its tensor arguments
    at: int = 0           # the block's own nodes made before it (Block._record)


# the trace's lists whose entries a hole made are the hole's: (TraceContext field, ...)
_MARKED = ("guards", "unsourced_reads", "memo_reads", "mutable_inputs", "wrap_memo")


def _marks(ctx, out):
    return tuple(len(getattr(ctx, f)) for f in _MARKED) + (len(out.inputs),)


def mark_index(field):
    return _MARKED.index(field) if field != "inputs" else len(_MARKED)


class Recording:
    """A block's first call while it runs (variables/blocks.py `call`): its holes, the
    objects it watches, the constants it passed on, and whether it is refused."""

    def __init__(self, tx, var, flat_args, under_handler):
        self.var = var
        self.source = var.source if var is not None else None
        self.index = {}
        for i, a in enumerate(flat_args):
            self.index.setdefault(id(a), i)
        self.watched = [a for a in flat_args if type(a) is new_objects.NewObjectVariable]
        for x in self.watched:
            x.watchers = (*x.watchers, self)
        self.n_modules = len(tx.ctx.module_calls)
        self.under_handler = under_handler
        self.pending = tx.side_effects.pending_reads
        self.modes = modes(tx.ctx)
        self.holes, self.lookups, self.passed = [], [], []
        self.refused = None
        self.in_hole = False
        self.closed = False
        self.depth = 0  # calls open inside it (a hole is a call made by its own code)

    def close(self):
        self.closed = True
        for x in self.watched:
            x.watchers = tuple(w for w in x.watchers if w is not self)

    def refuse(self, why):
        if self.refused is None:
            self.refused = why

    # ---- what the block reads of the objects it watches --------------------------------------
    def touched(self, obj, what):
        if not self.in_hole and not self.closed:
            self.refuse(f"it read the {what} of an object made before its call")

    def looked_up(self, obj, name, found):
        if self.in_hole or self.closed:
            return
        if found:
            self.refuse(f"it read the attribute {name!r} of an object made before its call")
        else:
            self.lookups.append((len(self.holes), obj, name))

    # ---- a call of its own code given a watched object ---------------------------------------
    def hole(self, tx, var, fn_var, args, kwargs, go):
        ctx, out = tx.ctx, tx.output
        if self.refused is None and (tx.side_effects.pending_reads != self.pending or
                                     tx.under_handler() != self.under_handler):
            self.refuse("it read a pending store, or it calls an object it was given inside a try")
        if self.refused is None and modes(ctx) != self.modes:
            self.refuse("its own code changed grad mode or autocast before a call given an object")
        hole = None
        if self.refused is None:
            try:
                flat = flat_args(args, kwargs)
                hole = Hole(self._callee(fn_var), [self._arg(a) for a in args],
                            {k: self._arg(v) for k, v in kwargs.items()},
                            [self._arg(m) for m in ctx.module_calls[self.n_modules:]], node_meta.frames(tx),
                            _marks(ctx, out), None, last_node(out.graph), None)
                hole.tensors = [(i, facts(v.example)) for i, v in enumerate(flat) if isinstance(v, TensorVariable)]
                before = state(tx)
            except _NoTemplate as e:
                self.refuse(f"a call given an object made before the block takes {e}")
        self.in_hole = True
        try:
            result = go()
        except BaseException:
            self.refuse("a call given an object made before the block raised")
            raise
        finally:
            self.in_hole = False
        if hole is None or self.refused is not None:
            return result
        hole.ends, hole.last_after = _marks(ctx, out), last_node(out.graph)
        if any(facts(flat[i].example) != f for i, f in hole.tensors):
            self.refuse("a call given an object made before the block changed a tensor argument's metadata")
            return result
        if state(tx) != before or modes(ctx) != self.modes:
            self.refuse("a call given an object made before the block logged a store or changed a mode")
            return result
        made = made_by(out.graph, hole)
        if any(reshapes(n) for n in made):  # (a tensor it reached another way: the block may read it)
            self.refuse("a call given an object made before the block changed a tensor's shape in place")
            return result
        try:
            hole.result = self._result(result, flat, made)
        except _NoTemplate as e:
            self.refuse(f"a call given an object made before the block returned {e}")
            return result
        self.pending = tx.side_effects.pending_reads
        self.holes.append(hole)
        return result

    def _callee(self, fn_var):
        """The function the hole calls, as the sibling's call finds it: read again through its
        source under the module (`self.body(...)`: another layer's may be another closure),
        the same Variable when read from shared state (a closure cell of a library wrapper),
        or the function itself when found on a class (which the guards fix)."""
        src = fn_var.source
        if src is None:
            return ("fn", fn_var.fn)
        if self.source is not None and under(src, self.source):
            return ("value", src)
        return ("same", fn_var)

    def _arg(self, v):
        i = self.index.get(id(v))
        if i is not None:
            return ("arg", i)
        if v is self.var:
            return ("root",)
        src = v.source
        inside = src is not None and self.source is not None and under(src, self.source)
        if isinstance(v, TensorVariable):
            if src is None and v.real is None:
                return ("node", v.node, v)
            if src is not None and not inside:
                return ("same", v)
            raise _NoTemplate("a tensor of the module")
        if type(v) is PassConstant and v.rec is self:
            return ("reread", src)
        if type(v) is ConstantVariable:
            return ("const", v.value)
        if type(v) is containers.TupleVariable:
            return ("tuple", [self._arg(item) for item in v.items])
        if inside and isinstance(v, nn_module.NNModuleVariable):
            return ("module", src, v.path)
        if src is not None and not inside and not getattr(v, "_mutated", False):
            return ("same", v)
        raise _NoTemplate(f"a {type(v).__name__}")

    def _result(self, v, flat, made):
        """The template of what a hole returned (checked where it is replayed, `bind`): a
        tensor it made (`made`: its nodes), one it was given or one of the block's arguments
        (the same object again), a constant, an object of the shared state, tuples of those."""
        if isinstance(v, TensorVariable):
            for i, given in enumerate(flat):
                if given is v:
                    return ("known", i)
            i = self.index.get(id(v))
            if i is not None:
                return ("arg", i)
            if v.source is None and v.real is None:
                if v.node not in made:
                    raise _NoTemplate("a tensor made before it")
                return ("new", v.node, facts(v.example))
            if v.source is not None and (self.source is None or not under(v.source, self.source)):
                return ("same", v)
            raise _NoTemplate("a tensor of the module")
        if type(v) is ConstantVariable:
            return ("const", type(v.value), v.value)
        if type(v) is containers.TupleVariable:
            return ("tuple", [self._result(item, flat, made) for item in v.items])
        if v.source is not None and (self.source is None or not under(v.source, self.source)):
            return ("same", v)
        raise _NoTemplate(f"a {type(v).__name__}")


def state(tx):
    """What a hole must leave as it found it, recorded and replayed: the side-effect log's
    sizes (no store), symbolic inputs and graph attributes, shape marks, history writes and
    generators left open."""
    ctx = tx.ctx
    m = tx.output.mark()
    return (tx.side_effects.sizes(), m[2], m[3], len(ctx.shape_marks), ctx.history_write_at,
            len(generators.pending(ctx)))


def modes(ctx):
    """The grad mode and the autocast and inference-mode blocks entered, which a block's copied nodes assume."""
    return torch.is_grad_enabled(), tuple(id(a) for a in ctx.mode_blocks)


def made_by(graph, hole):
    """The nodes made between the hole's start and its end."""
    out, n = set(), hole.last_before.next if hole.last_before is not None else next(iter(graph.nodes), None)
    stop = hole.last_after.next if hole.last_after is not None else None
    while n is not None and n is not stop and n.op != "root":
        out.add(n)
        n = n.next
    return out


def hole_of(recs, args, kwargs):
    """The recording whose hole this call is (its innermost block's own code calls it with an
    object that block watches), or None; a recording that sees a watched object handed to a
    call deeper inside (through a call that is not a hole) is refused."""
    found = None
    for v in _flat_objects(args, kwargs):
        for w in v.watchers:
            if w.in_hole or w.closed:
                continue
            if w is recs[-1] and w.depth == 0:
                found = w
            else:
                w.refuse("an object made before its call was handed to a call inside another")
    return found if found is not None and found.refused is None else None


def _flat_objects(args, kwargs):
    for v in _flat(list(args) + list(kwargs.values())):
        if type(v) is new_objects.NewObjectVariable and v.watchers:
            yield v


def _flat(vars_):
    for v in vars_:
        yield v
        if type(v) is containers.TupleVariable:
            yield from _flat(v.items)


def flat_args(args, kwargs):
    """A block's arguments in the order holes name them ("arg", i): tuples and their items."""
    return list(_flat(list(args) + [v for _k, v in sorted(kwargs.items())]))


def last_node(graph):
    nodes = graph.nodes
    return next(iter(reversed(nodes)), None) if len(nodes) else None


class Own:
    """The entries a block's own code added to one of the trace's lists, from `start`: less
    the ranges its holes added (block_holes.py), which a replay makes again."""

    def __init__(self, holes):
        self.holes = holes

    def __call__(self, items, start, field):
        if not self.holes:
            return items[start:]
        i = mark_index(field)
        out, at = [], start
        for h in self.holes:
            out.extend(items[at:h.marks[i]])
            at = h.ends[i]
        out.extend(items[at:])
        return out


def new_tensors(template):
    """The ("new", node, facts) parts of a hole's result template."""
    if template[0] == "new":
        yield template
    elif template[0] == "tuple":
        for t in template[1]:
            yield from new_tensors(t)


def passed_through(block):
    """The sources of the ints read from the module that only went into holes (their
    guards are left out: block_holes.PassConstant)."""
    if not block.passed:
        return set()
    into = set()

    def walk(t):
        if t[0] == "reread":
            into.add(t[1])
        elif t[0] == "tuple":
            for item in t[1]:
                walk(item)
    for h in block.holes:
        for t in (*h.args, *h.kwargs.values()):
            walk(t)
    through = into - {pc.source for pc in block.passed if pc.used}
    theirs = {id(pc.guard) for pc in block.passed}
    for g in block.raw_guards:  # (read another way too: kept)
        if id(g) not in theirs and any(s in through for s in g.sources()):
            through.difference_update(g.sources())
    return through


def ready(block, hole, made, results, to_root):
    """The hole with its templates in the form a replay builds (block_holes.run)."""
    def form(t):
        kind = t[0]
        if kind == "node":
            if t[1] in made:
                return ("tensor", view_chain(t[1], made))
            if t[1] in results:
                return ("var", t[1])
            raise Refused("a hole given a graph value made before the block")
        if kind in ("reread", "module", "value"):
            if to_root is None:
                raise Refused("a hole given a value of a module without a source")
            block.extra.append(to_root(t[1]))
            if kind == "module":
                if not t[2].startswith(block.path):
                    raise Refused("a hole given a module whose path is not under the block's")
                return ("module", len(block.extra) - 1, t[2][len(block.path):])
            return (kind, len(block.extra) - 1)
        if kind == "tuple":
            return ("tuple", [form(item) for item in t[1]])
        return t
    hole.fn = form(hole.fn)
    hole.args = [form(t) for t in hole.args]
    hole.kwargs = {k: form(t) for k, t in hole.kwargs.items()}
    hole.modules = [form(t) for t in hole.modules]
    hole.inner = node_meta.format_frames(hole.frames[len(block.frames):])
    hole.frames = hole.marks = hole.ends = hole.last_before = hole.last_after = None
    return hole


# ---- replaying a hole on a sibling ------------------------------------------------------------

# functions whose replayed hole came back otherwise: inlined from then on, in this process
_NO_HOLES = weakref.WeakSet()


def forget():
    """tracer.reset(): replayed holes are tried again."""
    _NO_HOLES.clear()


def replayable(block):
    return not block.holes or block.fn not in _NO_HOLES


def mismatch(block, why):
    """A replayed hole differed from the record, after nodes were copied: trace again without."""
    _NO_HOLES.add(block.fn)
    raise TraceAgain(f"a replayed call of {getattr(block.fn, '__qualname__', block.fn)} differed: {why}")


def lookups_hold(block, count):
    """Whether the method lookups the block made after `count` holes still find no instance
    attribute of that name."""
    return all(name not in obj.__dict__["_attrs"].items for at, obj, name in block.lookups if at == count)


def run(tx, block, hole, build, stacks):
    """Trace the hole again for the sibling: its arguments built (`build(template)`), the
    modules around it entered, its nodes' stack traces given the block's frames between
    the replay's caller and the call. Returns its result (checked by `bind`)."""
    ctx, out = tx.ctx, tx.output
    args = [build(t) for t in hole.args]
    kwargs = {k: build(t) for k, t in hole.kwargs.items()}
    modules = [build(t) for t in hole.modules]
    last = last_node(out.graph)
    calls = ctx.module_calls
    n = len(calls)
    for m in modules:
        calls.append(m)
        ctx.module_roots[m.source] = None
    try:
        result = build(hole.fn).call(tx, args, kwargs)
    except Unsupported as e:
        mismatch(block, f"it raised ({e})")
    finally:
        del calls[n:]
    node = last.next if last is not None else next(iter(out.graph.nodes), None)
    prefix, inner = stacks.prefix, hole.inner
    while node is not None and node.op != "root":
        trace = node.meta.get("stack_trace")
        if trace is not None and trace.startswith(prefix):
            node.meta["stack_trace"] = prefix + inner + trace[len(prefix):]
        if reshapes(node):
            mismatch(block, "it changed a tensor's shape in place")
        node = node.next
    return result, args, kwargs


def bind(block, template, v, env, made_vars, flat, arg_vars):
    """Check the replayed hole's result against the record's, binding its new tensors
    (`flat`: the arguments it was given, flattened; `arg_vars`: the block's)."""
    kind = template[0]
    if kind == "tuple":
        if type(v) is not containers.TupleVariable or len(v.items) != len(template[1]):
            mismatch(block, "its result is not the same tuple")
        for t, item in zip(template[1], v.items):
            bind(block, t, item, env, made_vars, flat, arg_vars)
        return
    if kind == "const":
        if type(v) is not ConstantVariable or type(v.value) is not template[1] or v.value != template[2]:
            mismatch(block, "its result is another constant")
        return
    if kind == "same":
        if v is not template[1]:
            mismatch(block, "its result is another object")
        return
    if kind in ("known", "arg"):
        if v is not (flat if kind == "known" else arg_vars)[template[1]]:
            mismatch(block, "its result is not the tensor it returned before")
        return
    # "new": a tensor of its own with the record's metadata
    if not isinstance(v, TensorVariable) or v.source is not None or v.real is not None or \
            facts(v.example) != template[2] or any(v is w or getattr(w, "node", None) is v.node for w in flat) \
            or any(v is w for w in arg_vars):
        mismatch(block, "its result is another tensor")
    env[template[1]] = v.node
    made_vars[template[1]] = v


def replay(block, tx, hole, var, values, extra, env, arg_vars, made_vars, stacks, done):
    """Trace the `done`-th hole again for the sibling (block_holes.run) and check that
    it came back as recorded."""
    modules = {}
    retarget = Retarget(STAND_IN, var.source, tag=True) if var is not None else None

    def build_arg(t):
        kind = t[0]
        if kind == "arg":
            return arg_vars[t[1]]
        if kind == "root":
            return var
        if kind == "tuple":
            return containers.TupleVariable([build_arg(item) for item in t[1]])
        if kind in ("reread", "value"):
            return builder.wrap(tx, extra[t[1]], retarget(block.extra[t[1]]))
        if kind == "fn":
            return functions.UserFunctionVariable(t[1])
        if kind == "module":
            if t[1] not in modules:
                modules[t[1]] = nn_module.wrap_module(tx, extra[t[1]], retarget(block.extra[t[1]]),
                                                      var.path + t[2], guarded=True)
            return modules[t[1]]
        return block_copy.build(t, env, arg_vars, tx.output, made_vars)
    before, modes_before = state(tx), modes(tx.ctx)
    result, args, kwargs = run(tx, block, hole, build_arg, stacks)
    if state(tx) != before or modes(tx.ctx) != modes_before:
        mismatch(block, "it logged a store or changed a mode")
    flat = flat_args(args, kwargs)
    if [facts(flat[i].example) for i, _f in hole.tensors] != [f for _i, f in hole.tensors]:
        mismatch(block, "it changed a tensor argument's metadata")
    bind(block, hole.result, result, env, made_vars, flat, arg_vars)
    if block.lookups and not lookups_hold(block, done + 1):
        mismatch(block, "an object it was given has an instance attribute it looked up")
    if var is not None:
        block._wrap_inputs(tx, var, retarget, values, env, done + 1)


# Modules of the value model that also import this one's users (see generators.py).
from . import builder, functions, new_objects, nn_module  # noqa: E402
