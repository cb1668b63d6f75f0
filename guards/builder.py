"""Compile a list of guards into one generated ``check(L, G, C) -> bool`` function.

Why generated code: the check runs on every call of a compiled frame, so it must be a
single Python function with no interpretation overhead.  The text holds only generated
identifiers (rule 6); every name, key, value, type and helper is a bound constant.  Each
distinct source is loaded once into a local, just before the first condition that needs
it.  The text is kept (``source_code``) for dumps: one condition per line.

Order: guards that make a base valid run before guards that reach through it.
  1. type/id guards, and any guard on a strict base of a tensor source, by source depth;
  2. the tensor batch: all TensorMatch guards as ONE TensorGuards call;
  3. everything else, by source depth.
Groups: the guards that read only through one module (a *group root*: ``groups``, the
sources of the modules the trace called) are checked by a function of their own,
``check_group(V, L, G, C)`` with V the module, called from the set's check where the group's
first guard was. A model's repeated blocks make equal texts, compiled once and bound per
block (codegen.ExprContext.compile): a 48-layer encoder's check was one 12,000-line function
whose compile() was a quarter of its first call.
The slow path ``failures`` evaluates each guard on its own (same order), skipping guards
whose base already failed, and names each failed guard in plain words. The batch also
requires its tensors to be distinct objects (TensorGuards rejects one tensor passed twice),
a fact no single guard states: ``failures`` names it when it is what failed.

``check`` is the C program of guards/fastpath.py when the extension is built (same answers,
the module tree re-proved only when it changed), else the generated function itself
(``full_check`` either way).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from . import fastpath
from .codegen import ExprContext, GroupContext, HoistContext, recording
from .guard import DictKeysMatch, Guard, IdMatch, SameObject, TypeMatch
from .retarget import STAND_IN, BlockGuards, Retarget
from .sources import Source
from .tensor import TensorMatch, make_tensor_guards, none_nested


def _dedupe(guards: list[Guard]) -> list[Guard]:
    seen: set = set()
    out = []
    for g in guards:
        if g not in seen:
            seen.add(g)
            out.append(g)
    return out


def _implied_types(guards: list[Guard]) -> tuple[list[Guard], set]:
    """(guards without the TypeMatch guards a DictKeysMatch implies, the ids of those
    DictKeysMatch guards). DictKeysMatch checks the exact type first: `type(d) is T` beside
    it is the same fact again (a model's code reading `len(m._forward_hooks)` makes both for
    each hook dict of each layer). The DictKeysMatch takes the TypeMatch's place in the order
    (rank 0), so guards reaching through the dict still run after its type is known."""
    typed = {(g.source, id(g.type)): g for g in guards if type(g) is DictKeysMatch}
    if not typed:
        return guards, set()
    out, promoted = [], set()
    for g in guards:
        if type(g) is TypeMatch:
            dk = typed.get((g.source, id(g.type)))
            if dk is not None:
                promoted.add(id(dk))
                continue
        out.append(g)
    return out, promoted


def order_guards(guards: list[Guard]) -> tuple[list[Guard], list[TensorMatch], list[Guard]]:
    """Split into (before tensors, tensors, after tensors), each in evaluation order."""
    guards, promoted = _implied_types(guards)
    tensors = [g for g in guards if isinstance(g, TensorMatch)]
    tensor_bases: set[Source] = set()
    for t in tensors:
        tensor_bases.update(t.source.ancestors())
    idx = {id(g): i for i, g in enumerate(guards)}

    def key(g: Guard):
        return (g.depth(), 0 if id(g) in promoted else g.rank, idx[id(g)])

    first, rest = [], []
    for g in guards:
        if isinstance(g, TensorMatch):
            continue
        if g.rank == 0 or id(g) in promoted or any(s in tensor_bases for s in g.sources()):
            first.append(g)
        else:
            rest.append(g)
    tensors.sort(key=key)
    return sorted(first, key=key), tensors, sorted(rest, key=key)


def _with_aliases(guards: list[Guard]) -> list[Guard]:
    """One tensor reached under two sources (tied weights: GPT2's lm_head and wte) is checked
    once: TensorGuards rejects a batch holding the same tensor twice. The second source gets
    `SameObject(first, second)` instead, which with the first's TensorMatch implies its own."""
    first_by_id: dict[int, TensorMatch] = {}
    out = []
    for g in guards:
        if isinstance(g, TensorMatch):
            ex = g.live_example()
            if ex is not None:
                prev = first_by_id.setdefault(id(ex), g)
                if prev is not g:
                    g = g.as_alias_of(prev)
                    out.append(SameObject(prev.source, g.source))
        out.append(g)
    return out


def forget_examples(guards) -> None:
    """Drop the weakrefs the TensorMatch guards among `guards` hold to their example tensors,
    once nothing needs them (TensorMatch.forget_example)."""
    for g in guards:
        if isinstance(g, TensorMatch):
            g.forget_example()


class GuardSet:
    """A compiled guard set.  ``check`` is the fast generated function; never raises."""

    def __init__(self, guards: list[Guard], builtins: dict, split: tuple[int, int] | None = None,
                 groups=()) -> None:
        self.builtins = builtins
        root_of = _GroupFinder(groups)
        if split is None:
            first, tensors, rest = order_guards(_with_aliases(_dedupe(list(guards))))
            tensors = _by_group(tensors, root_of)
        else:  # a set written in its final order (the disk cache): (len(first), len(tensors))
            a, b = split
            first, tensors, rest = guards[:a], guards[a:a + b], guards[a + b:]
        # the set's units: guards, and replayed blocks' guards as one (retarget.BlockGuards);
        # `guards` (the guards one by one, in order: what is numbered, named and written) is
        # made from them when asked, `_at` numbers each unit's first
        self._units: list[Guard] = first + tensors + rest
        self._at: dict[int, int] = {}
        n = 0
        for g in self._units:
            self._at[id(g)] = n
            n += _width(g)
        self._n = n
        self._flat: list[Guard] | None = None if any(type(g) is BlockGuards for g in self._units) else self._units
        self.split = (sum(map(_width, first)), len(tensors))
        self.groups: tuple[Source, ...] = ()  # the group roots some guard was found under
        self._slow: list[Callable] | None = None
        self._batch = None  # (TensorMatch guards checked in one call, its check or None)
        self.full_check: Callable[[tuple, dict, Any], bool]
        with recording() as compiled:
            self.full_check, self.source_code = self._generate(first, tensors, rest, root_of)
            self._op_guards: list[tuple] = []
            self._program = fastpath.build(self, first, self._batch, rest)
        self.compiled = compiled  # [(text digest, code)]: what the disk cache hands a reader
        self.check: Callable[[tuple, dict, Any], bool] = (
            self._program if self._program is not None else self.full_check)
        self._covered = {i for gs in self._op_guards for i in gs}
        forget_examples(guards)  # (built: their weakrefs would keep swap_tensors off the tensors)

    @property
    def guards(self) -> list[Guard]:
        """The guards one by one, in evaluation order (a BlockGuards as its copies)."""
        if self._flat is None:
            self._flat = [f for g in self._units for f in (g.flat() if type(g) is BlockGuards else (g,))]
        return self._flat

    # -- fast path ---------------------------------------------------------------------
    def _generate(self, first, tensors, rest, root_of):
        ctx = _MainContext(self.builtins)
        body: list[str] = []
        texts: list[str] = []  # the group functions' texts, once each (for source_code)
        index = self._at

        tensors = [t for t in tensors if not t.aliased]  # their SameObject guard covers them
        examples = [t.live_example() for t in tensors]
        batched = bool(tensors) and all(e is not None for e in examples)

        # a root's guards before and after the batch are one function (its reads of the
        # module tree made once), called where its first guard was
        members: dict = {}
        for g in (*first, *rest):
            root = root_of(g)
            if root is not None:
                members.setdefault(root, []).append(g)
        members = {r: gs for r, gs in members.items() if sum(map(_width, gs)) >= _GROUP_MIN}
        # what the check reads through a group's root outside its function (the batch's
        # tensors, the sources of a guard across roots: NoAliasing, SameObject) the function
        # returns, read with its own guards' reads: {root: {source: None}}
        exports: dict = {r: {} for r in members}
        for t in tensors if batched else ():
            if root_of(t) in exports:
                exports[root_of(t)][t.source] = None
        for g in (*first, *rest):
            if root_of(g) is None:
                for src in g.sources():
                    r = root_of.nearest(src)
                    if r in exports:
                        exports[r][src] = None
        done: set = set()
        made: dict = {}  # _template_key -> (fn, text): a replayed block's siblings
        by_ids: dict = {}  # the same by the key's objects' identities (see _template_key)
        canon: dict = {}

        def emit(conds: list[str], note: str) -> None:
            for c in conds:
                body.extend(ctx.take_pending())
                # the comment holds only our own class names and indices (rule 6)
                body.append(f"if not ({c}): return False  # {note}")

        def emit_guards(gs):
            for g in gs:
                # (a TensorMatch is never a group member: checked one by one when the batch is
                # off, it was taken for its group's, which does not hold it, and left out)
                root = root_of(g) if type(g) is not TensorMatch else None
                group = members.get(root) if root is not None else None
                if group is None:
                    conds = g.conditions(ctx)  # loads its sources into `pending`
                    emit(conds, f"[{index[id(g)]}] {type(g).__name__}")
                elif root not in done:  # the group's first guard: the whole group here
                    done.add(root)
                    returned = list(exports[root])
                    key, ids = _template_key(root, group, returned, canon)
                    hit = by_ids.get(ids)
                    if hit is None:
                        hit = made.get(key)
                        if hit is None:
                            hit = made[key] = self._group_check(key[1], len(returned))
                        by_ids[ids] = hit
                    fn, text = hit
                    if text not in texts:
                        texts.append(text)
                    call = f"{ctx.const(fn)}({ctx.value(root)}, L, G, C)"
                    lo, hi = index[id(group[0])], index[id(group[-1])] + _width(group[-1]) - 1
                    note = f"[{lo}..{hi}] group of {hi - lo + 1}"
                    if not returned:
                        emit([call], note)
                        continue
                    body.extend(ctx.take_pending())
                    name = f"_r{len(done) - 1}"
                    body.append(f"{name} = {call}")
                    body.append(f"if {name} is None: return False  # {note}")
                    ctx.lengths[name] = len(returned)
                    for k, src in enumerate(returned):
                        ctx.exported[src] = f"{name}[{k}]"

        emit_guards(first)
        if batched:
            # copies metadata only; dynamic entries (None) are left to ShapeMatch guards
            tg = make_tensor_guards(examples, [t.shape for t in tensors], [t.stride for t in tensors])
            del examples
            self._batch = (tensors, tg.check)
            args = [ctx.value(t.source) for t in tensors]
            lo, hi = index[id(tensors[0])], index[id(tensors[-1])]
            # Sources whose identity is guarded (parameters, buffers) are the tensors
            # seen while tracing, never nested; the others are asked first (none_nested).
            known = {g.source for g in first if isinstance(g, IdMatch)}
            unknown = [a for t, a in zip(tensors, args) if t.source not in known]
            if unknown:
                emit([f"{ctx.const(none_nested)}({', '.join(_starred(unknown, ctx.lengths))})"], "inputs are not nested tensors")
            emit([f"{ctx.const(tg.check)}({', '.join(_starred(args, ctx.lengths))})"], f"[{lo}..{hi}] TensorMatch batch")
        elif tensors:  # an example died: check one by one (same facts, a little slower)
            del examples
            self._batch = (tensors, None)
            emit_guards(tensors)
        emit_guards(rest)
        lines = ["try:"] + [f"    {ln}" for ln in body] + ["    return True",
                                                          "except Exception:",
                                                          "    return False"]
        self.groups = tuple(root_of.found)
        fn, text = ctx.compile("check", lines)
        return fn, "\n".join([text, *texts])

    def _group_check(self, templates, n_returned):
        """(check_group(V, L, G, C), its text): the guards of a group, then the sources it
        returns, each read from the stand-in root V (`_template_key`'s templates; a
        BlockGuards as its guards), in order; with sources to return, the tuple of their
        values when every guard holds, else None. Equal texts (sibling blocks, or a set the
        disk cache reads back one guard at a time) share one compiled code."""
        ctx = GroupContext(STAND_IN, self.builtins)
        body: list[str] = []
        returned = templates[len(templates) - n_returned:]
        guards = [f for g in templates[:len(templates) - n_returned]
                  for f in (g.flat() if type(g) is BlockGuards else (g,))]
        fail = "None" if returned else "False"
        for g in guards:
            for c in g.conditions(ctx):
                body.extend(ctx.take_pending())
                body.append(f"if not ({c}): return {fail}  # {type(g).__name__}")
        if returned:
            out = [ctx.value(src) for src in returned]
            body.extend(ctx.take_pending())
            body.append(f"return ({', '.join(out)},)")
        else:
            body.append("return True")
        lines = ["try:"] + [f"    {ln}" for ln in body] + ["except Exception:", f"    return {fail}"]
        return ctx.compile("check_group", lines, args="V, L, G, C")

    def __call__(self, L, G, C) -> bool:
        return self.check(L, G, C)

    def _slow_check(self, L, G, C) -> bool:
        """The C program's answer when its snapshot is missing or stale: capture a new one,
        ask the generated check, and tell the program what it may trust from now on: every
        frozen guard held (positive), or one of them failed on its own (negative: the call
        fails until something it read changes)."""
        prog = self._program
        token = prog.capture(L, G, C)
        ok = self.full_check(L, G, C)
        if token:
            positive = True
            if not ok:
                fns = self._slow_fns()
                frozen = self._covered - prog.active_guards()
                positive = all(fns[i][0](L, G, C) for i in sorted(frozen))
            prog.commit(L, G, C, positive, token)
        return ok

    # -- slow path ---------------------------------------------------------------------
    def _compile_one(self, i: int, g: Guard):
        """(check_i(L, G, C), value getter for a TensorMatch or None): guard i on its own."""
        ctx = ExprContext(self.builtins)
        conds = " and ".join(f"({c})" for c in g.conditions(ctx))
        fn, _ = ctx.compile(f"check{i}", ["try:", f"    return bool({conds})",
                                          "except Exception:", "    return False"])
        if isinstance(g, TensorMatch):
            vctx = ExprContext(self.builtins)
            getter, _ = vctx.compile(f"check_get{i}", [f"return {g.source.guard_expr(vctx)}"])
            return fn, getter
        return fn, None

    def _compile_slow(self) -> list[Callable]:
        return [self._compile_one(i, g) for i, g in enumerate(self.guards)]

    def _slow_fns(self) -> list:
        if self._slow is None:
            self._slow = self._compile_slow()
        return self._slow

    def failures(self, L, G, C) -> list[str]:
        """Descriptions of the guards that fail on these inputs (empty list: all pass).

        Guards reaching through a source whose own guard failed are not evaluated.
        """
        self._slow_fns()
        failed_sources: set[Source] = set()
        out: list[str] = []
        for g, (fn, getter) in zip(self.guards, self._slow):
            if any(a in failed_sources for s in g.sources() for a in s.ancestors()):
                continue
            if fn(L, G, C):
                continue
            failed_sources.update(g.sources())
            msg = g.describe()
            if getter is not None:
                try:
                    why = g.reason(getter(L, G, C))  # type: ignore[attr-defined]
                except Exception as e:  # noqa: BLE001
                    why = f"cannot read {g.sources()[0].name()}: {type(e).__name__}"
                if why:
                    msg = f"{msg} -- {why}"
            elif isinstance(g, IdMatch) and g.expired():
                msg = f"{msg} -- the object no longer exists"
            out.append(msg)
        return out + self._batch_aliasing(L, G, C, failed_sources)

    def _batch_aliasing(self, L, G, C, failed_sources) -> list[str]:
        """The batched tensor check fails when one tensor reaches it under two sources."""
        if not self._batch or self._batch[1] is None:  # no batched check: no such fact
            return []
        getters = {id(g): getter for g, (_fn, getter) in zip(self.guards, self._slow)}
        seen: dict[int, str] = {}
        out = []
        for g in self._batch[0]:
            if g.source in failed_sources:
                continue
            try:
                value = getters[id(g)](L, G, C)
            except Exception:  # noqa: BLE001 - its own guard reported it
                continue
            name = g.source.name()
            if id(value) in seen:
                out.append(f"{seen[id(value)]} and {name} are the same tensor (the batched tensor "
                           f"check needs distinct tensors)")
            else:
                seen[id(value)] = name
        return out

    # -- introspection -----------------------------------------------------------------
    def expired(self) -> bool:
        """True if an IdMatch object has died: this set can never pass again."""
        return any(g.expired() for g in self._units if type(g) in (IdMatch, BlockGuards))

    def describe(self) -> str:
        """One guard per line, in evaluation order, numbered as in ``source_code`` comments."""
        return "\n".join(f"[{i}] {g.describe()}" for i, g in enumerate(self.guards))

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return f"<GuardSet {len(self.guards)} guards>"


# a group of fewer guards is checked inline: a call costs more than it saves
_GROUP_MIN = 4


class _MainContext(HoistContext):
    """The set's check: a source a group function returned is read from its tuple."""

    def __init__(self, builtins) -> None:
        super().__init__(builtins)
        self.exported: dict = {}  # source -> `_rN[k]`
        self.lengths: dict = {}   # `_rN` -> the length of its tuple

    def value(self, source) -> str:
        got = self.exported.get(source)
        return got if got is not None else super().value(source)


_ITEM = re.compile(r"(_r\d+)\[(\d+)\]$")


def _starred(exprs, lengths):
    """`_r3[0], _r3[1], _r3[2]` (a group's whole tuple, in order: `lengths` by name) as `*_r3`."""
    out, k = [], 0
    while k < len(exprs):
        m = _ITEM.match(exprs[k])
        if m and m.group(2) == "0":
            n = 1
            while k + n < len(exprs) and exprs[k + n] == f"{m.group(1)}[{n}]":
                n += 1
            out.append(f"*{m.group(1)}" if n == lengths[m.group(1)] else ", ".join(exprs[k:k + n]))
            k += n
        else:
            out.append(exprs[k])
            k += 1
    return out


def _width(g) -> int:
    """How many guards `g` stands for (a BlockGuards: its block's)."""
    return g.width() if type(g) is BlockGuards else 1


def _template_key(root, group, returned, canon):
    """(key, ids): what makes `group`'s check text (read through `root`, returning the values
    of the sources `returned`): each guard and source as read from a stand-in root. Equal keys
    make equal texts, so a 48-layer model makes its layer's text twice (the first block, then
    its first sibling), not 48 times. A replayed block's guards are copies of its first block's
    re-targeted to the sibling (tracer/variables/blocks.py), each naming its stand-in-rooted
    template (`_template`); the few others (the call's own guards on the module) are
    re-targeted here, and kept once in `canon`. So every sibling's key holds the same objects:
    `ids` (their identities) finds a sibling's text without comparing its ~100 guards with the
    first block's field by field (whose templates are equal objects, not the same)."""
    to_stand_in = None
    out = []
    for obj in (*group, *returned):
        t = obj.__dict__.get("_template")
        if t is not None and t[0] == root:
            out.append(t[1])
            continue
        if to_stand_in is None:
            to_stand_in = Retarget(root, STAND_IN)
        copy = to_stand_in(obj)
        out.append(canon.setdefault(copy, copy))
    return (len(group), tuple(out)), (len(group), *map(id, out))


def _by_group(tensors, root_of):
    """The batch's tensor guards with each group's consecutive (a stable sort by where the
    group's first one was), so that the group function returning their values is one `*`."""
    first_at: dict = {}
    keys = []
    for k, t in enumerate(tensors):
        root = root_of(t)
        keys.append((first_at.setdefault(root, k) if root is not None else k, k))
    return [t for _key, t in sorted(zip(keys, tensors), key=lambda kt: kt[0])]


class _GroupFinder:
    """root_of(guard): the nearest of `roots` that every source of the guard is under (or is),
    or None. `found` holds every root some source was found under: the reader of a written set
    is given those, and finds each guard the same root (a root found under none is left out)."""

    def __init__(self, roots) -> None:
        # each root once, as the object given: an equal source found in a guard is answered
        # with it, so that the dicts keyed by roots hit by identity (comparing two equal
        # sources walks both paths: it was most of a 48-layer model's guard set build)
        self.roots = {r: r for r in roots}
        self.found: dict = {}
        self._memo: dict = {}
        self._of: dict = {}  # id(guard) -> its root or None (the set's guards, alive while it is built)

    def nearest(self, s):
        """The nearest root `s` is under (or is), or None."""
        hit = self._memo.get(s, self._memo)
        if hit is self._memo:
            b = s.base
            root = self.roots.get(s)
            hit = self._memo[s] = root if root is not None else (self.nearest(b) if b is not None else None)
            if hit is not None:
                self.found[hit] = None
        return hit

    def __call__(self, g):
        if not self.roots:
            return None
        hit = self._of.get(id(g), self._of)  # (asked of each guard several times per build)
        if hit is not self._of:
            return hit
        found = None
        for s in g.sources():
            r = self.nearest(s)
            if r is None or (found is not None and r is not found):
                found = None
                break
            found = r
        self._of[id(g)] = found
        return found


def compile_guards(guards: list[Guard], *, builtins: dict, split: tuple[int, int] | None = None,
                   groups=()) -> GuardSet:
    """Dedupe, order and compile ``guards`` into a GuardSet (one generated function, and one
    per group: `groups` are sources of modules, the guards reading only through one of them
    are checked together). ``split`` says the guards are already a set's ``guards`` in order,
    split as its ``split`` says: they are compiled as they are (what the disk cache reads
    back, with the written set's ``groups``)."""
    return GuardSet(guards, builtins, split, groups)
