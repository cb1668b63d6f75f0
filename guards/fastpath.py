"""A guard set's check in C (guards/_fastcheck*.c), skipping what cannot have changed.

Why: the generated Python check re-proves every fact on every call. On a real model most
facts are about the module tree (``_modules``, ``_parameters``, hook dicts, attributes) and
do not change between calls, so a check grew with the model: 15 us for a 2-layer
``nn.TransformerEncoder`` (201 guards), 10x that for 12 layers.

How (measured against the alternatives in the README's "Cache hits" section):
  * Sources become a table of nodes, each fetched from its parent by one accessor (``L[i]``,
    ``G[name]``, a cell, ``getattr``, ``[key]``, ``type``), shared by every guard that reads
    it.  Guards become ops over nodes, in the order the generated check runs them.
  * A *snapshot* records which nodes cannot have changed: those under an anchor (a source
    guarded by identity, or a *soft* one: an nn.Module guarded by its class, the model passed
    as ``self``, compared with the object of the last passing call, held weakly; another
    object goes to the slow path, which captures anew) reached through instance
    ``__dict__``s and dicts,
    with the types whose attribute lookup was relied on (type version tag) and the dicts
    read (dict watchers on CPython 3.12+, the dict version tag on 3.11: see _fastcheck.h for
    why each).  Guards whose answer is a function of those nodes alone are skipped; an
    unchanged model is then one pass over a few words per dict on 3.11 and none on 3.12+.
  * Everything else (tensor metadata, torch's global state, arguments) is checked on every
    call in C with the semantics of its Python condition, or by calling that condition.
  * The generated Python check stays the authority: a snapshot is trusted only once the
    Python check passed on it (or, negatively, once a frozen guard failed on its own), and
    any doubt sends the call to ``GuardSet._slow_check``.  Without the C extension (or with
    ``TRACER_FAST_GUARDS=0``) the Python check is used as before.

Tensors: torch's public ``TensorGuards`` is the authority (one batched call), but it costs
about 70 ns per tensor, and a model checks every parameter on every call.  Right after it
passes, guards/_tensormeta.cpp records each tensor's metadata as TensorGuards sees it (type,
dispatch keys with the thread's include/exclude sets, dtype, device, requires_grad, sizes,
strides); later calls compare against that record in a few loads and call TensorGuards only
on a mismatch.  Not used: torch's C++ GuardManager (private, changes between releases).

Torch internals read here: torch._C._functorch.peek_interpreter_stack and nn.Module's own dicts;
checked on torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them all;
tests/test_torch_internals.py resolves each).
"""

from __future__ import annotations

import importlib
import itertools
import os
import pathlib
import re
import sys
import warnings
from typing import Any

import torch

from .codegen import ArgContext, ExprContext
from .guard import (ConstMatch, DictKeysMatch, GlobalStateMatch, Guard, IdMatch, LengthMatch,
                    NoAliasing, Predicate, QueryMatch, SameObject, STANCE_READ, TypeMatch,
                    not_forced_eager)
from .sources import (AttrSource, BuiltinSource, CellSource, ConstSource, GenericAttrSource,
                      GlobalsDictSource, GlobalSource, ItemSource, LocalSource, Source,
                      TypeSource)
from .retarget import STAND_IN, BlockGuards
from .tensor import TensorFact, TensorMatch, none_nested

_FOLLOWED = (AttrSource, GenericAttrSource, ItemSource, TypeSource)  # (Plan._rooted)

# Without the extensions (an install that could not build them: setup.py goes on without them)
# everything still works, slower; each missing piece says so once, as a RuntimeWarning.
_WANTED = sys.version_info[:2] < (3, 13) and os.environ.get("TRACER_FAST_GUARDS", "1") not in ("", "0")
try:
    fc = importlib.import_module(f"{__package__}._fastcheck")
except ImportError as e:  # not built (or it cannot load): the generated Python check is used
    fc = None
    if _WANTED:
        reason = "not built" if isinstance(e, ModuleNotFoundError) else str(e)
        warnings.warn(f"frametracer: guards._fastcheck is not importable ({reason}); guard sets are checked by "
                      "their generated Python code instead (slower on models): reinstall frametracer "
                      "with a C compiler to build it", RuntimeWarning)

# CPython 3.13: not used. Storing an attribute into an object's inline values while its
# __dict__ is materialised (the snapshot materialises it) was not reported to the dict
# watcher on 3.13.0 (tests/test_fastcheck_program.py shows it), so a snapshot could call a
# changed module unchanged. Until such objects are pinned another way, 3.13 runs the
# generated Python check (the extension still builds there).
ENABLED = fc is not None and _WANTED


def tensormeta_name(version: str) -> str:
    """The module name of guards/_tensormeta.cpp built against torch `version`, as setup.py
    names it: one per torch, so that environments with different torches can share one source
    tree, and a wheel built for one torch does not load its C++ into another."""
    return "_tensormeta_" + re.sub(r"\W", "_", version)


def _tensor_records():
    """guards._tensormeta's capsule if it was built for this torch, else None (tensors are
    then checked by TensorGuards on every call, with a warning saying so)."""
    if os.environ.get("TRACER_TENSOR_RECORDS", "1") in ("", "0"):
        return None
    name = tensormeta_name(torch.__version__)
    try:
        mod = importlib.import_module(f"{__package__}.{name}")
    except ImportError as e:
        built = sorted({p.name.split(".")[0] for p in pathlib.Path(__file__).parent.glob("_tensormeta_*")})
        if isinstance(e, ModuleNotFoundError):  # built for other torches, or not at all
            reason = f"built here only for {', '.join(built)}" if built else "not built"
        else:  # built, but it cannot load
            reason = str(e)
        warnings.warn(f"frametracer: no tensor records for torch {torch.__version__} (guards.{name}: {reason}); "
                      "tensors are checked by TensorGuards on every call (slower): reinstall frametracer "
                      "against this torch to build them", RuntimeWarning)
        return None
    if mod.TORCH_VERSION != torch.__version__:  # a module renamed by hand: its C++ is another torch's
        warnings.warn(f"frametracer: guards.{name} was built for torch {mod.TORCH_VERSION}, this is "
                      f"{torch.__version__}: not used; tensors are checked by TensorGuards on every call "
                      "(slower)", RuntimeWarning)
        return None
    return mod._C_API


if fc is not None:
    fc.set_tensor_api(_tensor_records())

# ConstMatch values compared by identity / by exact type and == (their Python conditions)
_BY_IDENTITY = (type(None), type(Ellipsis), type(NotImplemented), bool, torch.dtype)
_BY_EQUALITY = (int, str, bytes, torch.device, torch.Size)
# results that are their type's only instance of that value: `type(r) is type(v) and r == v`
# is `r is v`
_SINGLETONS = (bool, type(None))

# the GlobalStateMatch call the C++ state reading does not cover (its header needs a library
# torch does not ship): called on every check
_FUNCTORCH_PEEK = torch._C._functorch.peek_interpreter_stack

# a class's __getattr__ whose reads are known: the dicts it looks `name` up in
_KNOWN_GETATTR = (torch.nn.Module.__getattr__, ("_parameters", "_buffers", "_modules"))


class Plan:
    """Nodes and ops for one guard set, in the generated check's evaluation order."""

    def __init__(self, builtins: dict) -> None:
        self.builtins = builtins
        self.nodes: list[tuple] = []
        self.ops: list[tuple] = []
        self._index: dict = {}
        self._under_stand_in: dict[Source, bool] = {}
        self._one_values: dict[int, Any] = {}  # id(guard) -> _one_value(guard): a template's, once
        self._blocks: dict[int, tuple] = {}  # id(template) -> (template, nodes, ops): keep_block

    def node(self, src: Source, root: int | None = None) -> int:
        """The node fetching `src`; with `root` (a node), `src` is read from the stand-in root
        (a replayed block's template: retarget.BlockGuards) and STAND_IN is that node."""
        if root is not None:
            if src is STAND_IN:
                return root
            if not self._rooted(src):
                root = None  # (shared state a block's guard reads beside its root)
        key = src if root is None else (root, src)
        i = self._index.get(key)
        if i is not None:
            return i
        t = type(src)
        if t is LocalSource:
            spec = (fc.N_LOCAL, -1, src.index, None)
        elif t is GlobalSource:
            spec = (fc.N_GLOBAL, -1, 0, src.name_)
        elif t is BuiltinSource:
            spec = (fc.N_ITEM, self.node(ConstSource(self.builtins)), 0, src.name_)
        elif t is CellSource:
            spec = (fc.N_CELL, -1, src.index, None)
        elif t is ConstSource:
            spec = (fc.N_CONST, -1, 0, src.value)
        elif t is GlobalsDictSource:
            spec = (fc.N_GLOBALS, -1, 0, None)
        elif t is AttrSource:
            spec = (fc.N_ATTR, self.node(src.base, root), 0, src.attr)
        elif t is GenericAttrSource:
            spec = (fc.N_GENERIC_ATTR, self.node(src.base, root), 0, src.attr)
        elif t is ItemSource:
            spec = (fc.N_ITEM, self.node(src.base, root), 0, src.key)
        elif t is TypeSource:
            spec = (fc.N_TYPE, self.node(src.base, root), 0, None)
        elif root is not None:  # (only the kinds above lead to a stand-in root: _rooted)
            raise AssertionError(f"a source under the stand-in root of kind {t.__name__}")
        else:  # a source kind defined elsewhere: fetched by its own expression
            ctx = ExprContext(self.builtins)
            fn, _ = ctx.compile("check_get", [f"return {src.guard_expr(ctx)}"])
            spec = (fc.N_PY, -1, 0, fn)
        self.nodes.append(spec)
        i = self._index[key] = len(self.nodes) - 1
        return i

    def _rooted(self, src: Source) -> bool:
        """Whether `src` reads from the stand-in root through the kinds node() follows."""
        hit = self._under_stand_in.get(src)
        if hit is None:
            t = type(src)
            hit = t in _FOLLOWED and self._rooted(src.base) if src is not STAND_IN else True
            self._under_stand_in[src] = hit
        return hit

    def op(self, kind, gidx, nodes=(), a=None, b=None, c=None, num=0, rule=0) -> None:
        guards = tuple(gidx) if isinstance(gidx, (tuple, list)) else (gidx,)
        self.ops.append((kind, rule, tuple(nodes), a, b, c, int(num), guards))

    # -- one guard ---------------------------------------------------------------------
    def add(self, g: Guard, i: int, slow_fn, root: int | None = None) -> None:
        """Ops for guard number i; `slow_fn()` compiles its own check(L, G, C) if needed. With
        `root`, g is a replayed block's template guard read through that node (node())."""
        t = type(g)
        if t is IdMatch:
            kind, ref = g._ref
            self.op(fc.O_ID, i, (self.node(g.source, root),), ref, num=kind == "weak")
        elif t is TypeMatch:  # a module's: a soft anchor (see _fastcheck_capture.c)
            self.op(fc.O_TYPE, i, (self.node(g.source, root),), g.type, num=_soft_anchor(g.type))
        elif t is ConstMatch:
            n, v = self.node(g.source, root), g.value
            if isinstance(v, _BY_IDENTITY) and type(v) in _BY_IDENTITY:
                self.op(fc.O_IS, i, (n,), v)
            elif type(v) in _BY_EQUALITY or (type(v) is tuple and not v):
                self.op(fc.O_EQ, i, (n,), type(v), v)
            else:
                self.op(fc.O_PY1, i, (n,), self._one_value(g), rule=fc.R_NODE)
        elif t is LengthMatch:
            self.op(fc.O_LEN, i, (self.node(g.source, root),), g.type, num=int(g.length))
        elif t is DictKeysMatch and (g.type is dict or (g.type is _ODict and not g.keys)):
            # native: an exact dict's keys in order; an empty OrderedDict is its type and size
            self.op(fc.O_DICTKEYS, i, (self.node(g.source, root),), g.type, g.keys, num=len(g.keys))
        elif t is DictKeysMatch:
            empty_od = g.type is _ODict and not g.keys
            self.op(fc.O_PY1, i, (self.node(g.source, root),), self._one_value(g),
                    rule=fc.R_ODICT_EMPTY if empty_od else fc.R_NEVER)
        elif t is SameObject:
            self.op(fc.O_SAME, i, (self.node(g.source_a, root), self.node(g.source_b, root)))
        elif t is NoAliasing:
            self.op(fc.O_DISTINCT, i, tuple(self.node(s, root) for s in g.sources()))
        elif t is TensorMatch:  # one tensor on its own (the batch is added by the caller)
            # none_nested first on a record mismatch (TensorGuards aborts on a nested tensor)
            self.op(fc.O_TENSORS, i, (self.node(g.source, root),), g._single.check, none_nested, (0,))
        elif t is GlobalStateMatch:
            # torch's state in one C++ reading while it equals the one taken when the calls
            # last passed (_tensormeta.h says what it reads); the others are called each time
            read = []
            for fn, expected in g.calls():
                if fn is not_forced_eager:  # its reads in C, without a Python frame. (Not
                    # snapshot nodes: torch.compile writes torch._dynamo.eval_frame's globals
                    # on every call, which would send each hit to the slow path.)
                    self.op(fc.O_MODULE_NE, i, (), *STANCE_READ)
                elif fn is _FUNCTORCH_PEEK:
                    self.op(fc.O_CALL_IS, i, (), fn, expected)
                else:
                    read.append((fn, expected))
            self.op(fc.O_STATE, i, (), tuple(fn for fn, _ in read), tuple(e for _, e in read))
            if g.needs_equality():
                self.op(fc.O_PYLGC, i, (), slow_fn())
        elif t is TensorFact:  # read again each call: a tensor's facts change without a version
            self.op(fc.O_PY1, i, (self.node(g.source, root),), self._one_value(g), rule=fc.R_NEVER)
        elif t is Predicate:
            self._predicate(g, i, root)
        elif t is QueryMatch and not g.args and not g.kwargs and type(g.value) in _SINGLETONS:
            self.op(fc.O_CALL_IS, i, (), g.fn, g.value)  # fn() is value: _same_result's answer
        else:  # a guard kind this module does not know: its own Python condition
            self.op(fc.O_PYLGC, i, (), slow_fn())

    def _predicate(self, g: Predicate, i: int, root: int | None) -> None:
        n = self.node(g.source, root)
        if g.kind == "key_absent":
            self.op(fc.O_KEY_ABSENT, i, (n,), g.arg[0])
        elif g.kind == "attrs":
            self.op(fc.O_PY1, i, (n,), g.fn, rule=fc.R_ATTRS)
        elif g.kind == "falsy":
            self.op(fc.O_PY1, i, (n,), g.fn, tuple(g.arg), rule=fc.R_FALSY)
        elif g.kind == "lacks":
            self.op(fc.O_PY1, i, (n,), g.fn, (g.arg[0], *_KNOWN_GETATTR), rule=fc.R_LACKS)
        elif g.kind == "same_function":  # never frozen: a function's __code__ is assignable
            self.op(fc.O_FUNC, i, (n,), g.arg[0], num=g.arg[1])
        elif g.kind == "class_entry":  # a raw MRO lookup: frozen by the class's version tag
            self.op(fc.O_PY1, i, (n,), g.fn, rule=fc.R_CLASS_ENTRY)
        elif g.kind == "lacks_generic":  # object.__getattribute__ alone: no __getattr__
            self.op(fc.O_PY1, i, (n,), g.fn, (g.arg[0], None, ()), rule=fc.R_LACKS_GENERIC)
        else:
            self.op(fc.O_PY1, i, (n,), g.fn, rule=fc.R_NEVER)

    # -- a replayed block's ops, made once per template ------------------------------------
    # Why: a 48-layer model's siblings each add ~100 guards through node()/add(), the same
    # work each time (hashing sources, looking them up, choosing ops): most of building the
    # C program. The first sibling's nodes and ops are kept relative to its root's node and
    # its first guard's number; the others are copies with their own root and numbers.

    def mark(self, root: int, first: int) -> tuple:
        """Where a block read through node `root`, its guards numbered from `first`, starts
        (for keep_block)."""
        return (root, first, len(self.nodes), len(self.ops), len(self._index))

    def keep_block(self, template: tuple, start: tuple) -> None:
        """Keep what the block made since `start` for repeat_block: its nodes under its root
        (the others, shared state, are shared by every copy) and its ops. Not kept where it
        used a node under its root made before it (another block on the same root made it)."""
        root, first, n0, o0, k0 = start
        rooted = {root: -1}  # absolute node -> its place among the block's rooted nodes (root: -1)
        keys = {i: key for key, i in itertools.islice(self._index.items(), k0, None)}
        nodes = []
        for j in range(n0, len(self.nodes)):
            kind, parent, idx, arg = self.nodes[j]
            key = keys.get(j)
            if type(key) is tuple and key[0] in rooted and parent in rooted:
                rooted[j] = len(nodes)
                nodes.append((kind, rooted[parent], idx, arg, rooted[key[0]], key[1]))
            elif self._reaches(j, root):
                return
        ops = []
        for kind, rule, refs, a, b, c, num, guards in self.ops[o0:]:
            if any(n not in rooted and self._reaches(n, root) for n in refs):
                return
            ops.append((kind, rule, tuple(rooted.get(n, n + _ABSOLUTE) for n in refs),
                        a, b, c, num, tuple(g - first for g in guards)))
        self._blocks[id(template)] = (template, nodes, ops)

    def _reaches(self, n: int, root: int) -> bool:
        """Whether node n is read through node `root`."""
        while n >= 0:
            if n == root:
                return True
            n = self.nodes[n][1]
        return False

    def repeat_block(self, template: tuple, i: int, root: int) -> bool:
        """Add a kept block's nodes and ops read through node `root`, its guards numbered from
        i; False if the block was not kept."""
        kept = self._blocks.get(id(template))
        if kept is None or kept[0] is not template:
            return False
        _t, nodes, ops = kept
        index, out = self._index, self.nodes
        made = []
        for kind, parent, idx, arg, key_root, src in nodes:
            key = (root if key_root < 0 else made[key_root], src)
            at = index.get(key)
            if at is None:
                at = index[key] = len(out)
                out.append((kind, root if parent < 0 else made[parent], idx, arg))
            made.append(at)
        append = self.ops.append
        for kind, rule, refs, a, b, c, num, guards in ops:
            append((kind, rule, tuple(n - _ABSOLUTE if n >= _ABSOLUTE else (root if n < 0 else made[n]) for n in refs),
                    a, b, c, num, tuple(g + i for g in guards)))
        return True

    def _one_value(self, g: Guard):
        """``def check(V)``: g's conditions with its source's value as the argument (made once
        for a template guard, which every sibling of its block shares)."""
        fn = self._one_values.get(id(g))
        if fn is None:
            ctx = ArgContext(g.source, self.builtins)  # type: ignore[attr-defined]
            conds = " and ".join(f"({c})" for c in g.conditions(ctx))
            fn, _ = ctx.compile("check_value", ["try:", f"    return bool({conds})",
                                                 "except Exception:", "    return False"], args="V")
            self._one_values[id(g)] = fn
        return fn


_ODict = __import__("collections").OrderedDict
_ABSOLUTE = 1 << 40  # (keep_block: a shared node's number, told from a rooted node's place)


def _noting(fn, called: list):
    """`fn`, noting in `called` that it was called (a guard's own compiled check: its op is
    not repeated for another block)."""
    def noted():
        called.append(True)
        return fn()
    return noted


def _soft_anchor(cls: type) -> int:
    """1 when a node guarded to be of class `cls` is a soft anchor: an nn.Module, guarded by
    its structure rather than its identity (tracer/variables/nn_module.py). The snapshot
    then freezes what hangs from the object of the last passing call, and another object of
    the class goes to the slow path once (which captures anew), not to a failure."""
    return int(isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__weakrefoffset__ != 0)


def build(gs, first: list[Guard], batch, rest: list[Guard]) -> Any:
    """The C program for GuardSet `gs` (its guards in order: first, the tensor batch, rest),
    or None when the C extension is unavailable or disabled."""
    if not ENABLED:
        return None
    plan = Plan(gs.builtins)
    index = gs._at

    def slow_fn(i):
        return lambda: gs._compile_one(i, gs.guards[i])[0]

    def add_block(g, i, root):  # (a BlockGuards: its template's ops, read through its root's node)
        r = plan.node(g.source, root)
        if plan.repeat_block(g.template, i, r):
            return
        start = plan.mark(r, i)
        called = []
        for t in g.template:
            if type(t) is BlockGuards:
                add_block(t, i, r)
                i += t.width()
            else:
                plan.add(t, i, _noting(slow_fn(i), called), r)
                i += 1
        if not called:  # (a guard's own compiled check is its copy's alone: not repeated)
            plan.keep_block(g.template, start)

    def add(g):
        i = index[id(g)]
        if type(g) is BlockGuards:
            add_block(g, i, None)
        else:
            plan.add(g, i, slow_fn(i))

    for g in first:
        add(g)
    if batch is not None:
        members, tg_check = batch
        if tg_check is not None:
            # TensorGuards aborts the process on a nested tensor: tensors whose identity is
            # not guarded (inputs) are asked first, as in the generated check, but only when
            # the recorded metadata does not match (a record is never of a nested tensor)
            known = {g.source for g in first if isinstance(g, IdMatch)}
            ask = tuple(k for k, t in enumerate(members) if t.source not in known)
            # a NoAliasing over batch members only is implied by the batch passing (its
            # objects are pairwise distinct: the C records demand it, TensorGuards too), so
            # the batch op answers for it instead of comparing the same pairs again
            srcs = {t.source for t in members}
            implied = [g for g in rest if type(g) is NoAliasing and set(g.sources()) <= srcs]
            plan.op(fc.O_TENSORS, [index[id(t)] for t in members + implied],
                    tuple(plan.node(t.source) for t in members), tg_check,
                    none_nested if ask else None, ask)
            dropped = {id(g) for g in implied}
            rest = [g for g in rest if id(g) not in dropped]
        else:
            for t in members:
                add(t)
    for g in rest:
        add(g)
    prog = fc.Program(gs.full_check, gs._slow_check, plan.nodes, plan.ops)
    gs._op_guards = [op[-1] for op in plan.ops]
    return prog
