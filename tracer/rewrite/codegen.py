"""Build the rewritten code object for one cache entry.

The rewritten frame runs, in order, these sections of a `Rewrite` (SECTIONS):
  PROLOGUE          the original prologue (MAKE_CELL / COPY_FREE_VARS / RESUME), so the
                    frame layout is exactly the original's;
  GRAPH_CALL        loads each graph input from its Source and calls the compiled graph once,
                    into GRAPH_OUT;
  AFTER_GRAPH_CALL  what must run right after the graph returns (convert_frame puts the rerun
                    check and the grad mode the traced code reached there);
  READS             phase 1: every value it must hand back (the return value, the final
                    contents of mutated inputs; at a graph break the stack and the live
                    locals) into temporaries: all reads happen before any write, so replaying
                    one mutation cannot change what another reads;
  STORES            phase 2: replays the mutations (container contents, attributes, globals,
                    closure cells, deferred calls), each a Store below;
  AFTER_STORES      what a value rebuilt in phase 1 must do only once the writes are done
                    (CodeGen.after_writes);
  INSTRUCTION       at a graph break only: the instruction the trace stopped at, natively;
  EXIT              returns (the value, or what the resume function returns).
Sections, not one list, because the prologue and the graph call are known last (the graph's
outputs are known once the values are rebuilt) and because convert_frame adds code after the
graph call once the backend has compiled it: each is added at its named place, nothing
searches the finished instructions. The signature is then flattened to the N argument
slots, which is what both the compile() wrapper and the C frame hook call it with.
"""
import contextlib
import dataclasses
import types

import bytecode as bc

from bytecode_utils import flatten_signature, make_code, prologue, versions
from guards import GlobalSource, LocalSource, Source
from guards.retarget import Retarget

from ..exc import Unsupported
from ..variables.containers import (advance, DictVariable, IteratorVariable, ListVariable, load_key,
                                    set_list_iter, TupleVariable)
from ..variables.sets import SetVariable
from ..variables.collections_vars import DequeVariable
from ..variables.dict_storage import refill_storage
from ..variables.tensor import TensorVariable
from ..runtime.frame_hook import untraced
from .rerun import graph_raised

GRAPH_OUT = "___graph_out"
TMP_PREFIX = "___tmp"

SECTIONS = (PROLOGUE, GRAPH_CALL, AFTER_GRAPH_CALL, READS, STORES, AFTER_STORES, INSTRUCTION, EXIT) = (
    "prologue", "graph_call", "after_graph_call", "reads", "stores", "after_stores", "instruction", "exit")


class GraphSlot:
    """Placeholder constant for the compiled graph: the code is generated before the graph is
    compiled (its outputs are known only then); assemble() puts the compiled graph in."""


@dataclasses.dataclass
class Rewrite:
    """The instructions of one rewritten code object by section (SECTIONS, in the order they
    run), the graph's slot (None: the code calls no graph) and the FX nodes the graph must
    return, in order (its output tuple is what GRAPH_OUT holds)."""
    sections: dict
    slot: GraphSlot | None
    outputs: list

    def add(self, section, instrs):
        """Append `instrs` to the named section (code added after generation: convert_frame)."""
        self.sections[section].extend(instrs)

    def instructions(self):
        return [ins for name in SECTIONS for ins in self.sections[name]]


class CodeGen:
    """Emits the rewritten code's instructions into the section being written (section());
    Variables rebuild themselves through the primitives below."""

    def __init__(self, code, output):
        self.code = code
        self.output = output
        self.sections = {name: [] for name in SECTIONS}
        self.instrs = None         # the list of the section being written: emit only inside section()
        self.outputs = []          # FX nodes the graph must return, in order
        self._out_index = {}
        self._tmp = 0
        self._memo = {}            # id(var) -> (var, temp name) for mutable values built here
        self.frame_cells = {}      # the root frame's CellBoxes by name: its real cells, in this code
        self._cells = {}           # id(CellBox) -> temp holding the cell made for it here

    @classmethod
    def for_frame(cls, tx):
        """A CodeGen for the code of the root frame `tx`, whose cells are its own."""
        cg = cls(tx.code, tx.ctx.output)
        cg.frame_cells = tx.cells
        return cg

    @contextlib.contextmanager
    def section(self, name):
        """What is emitted inside the block goes to the end of section `name`."""
        saved, self.instrs = self.instrs, self.sections[name]
        try:
            yield
        finally:
            self.instrs = saved

    def after_writes(self):
        """What is emitted inside the block runs after phase 2 (the side-effect writes)."""
        return self.section(AFTER_STORES)

    def calls_graph(self):
        """Whether the code calls the graph (it has ops, or values the code reads from it)."""
        return bool(self.output.count_ops() or self.outputs)

    def temps(self):
        """The temporaries made so far, in order."""
        return [f"{TMP_PREFIX}{i}" for i in range(1, self._tmp + 1)]

    def finish(self):
        """The Rewrite: the prologue and the graph call are written last, when the values the
        graph must return are known."""
        self.sections[PROLOGUE] = prologue(self.code)
        slot = None
        if self.calls_graph():
            slot = GraphSlot()
            sources = [source for source, _node, _t in self.output.inputs]
            call, loads = _shared_prefixes(self.code, sources, self.new_tmp)
            call += versions.load_const_callable(slot) + loads
            call += versions.call(len(sources)) + [bc.Instr("STORE_FAST", GRAPH_OUT)]
            self.sections[GRAPH_CALL] = call
        return Rewrite(self.sections, slot, self.outputs)

    # ---- rebuilding values -------------------------------------------------------------------
    def reconstruct(self, var):
        """Emit code leaving `var` on the stack. A mutable value built here (a list, dict, set or
        object created during tracing), or a tuple (`rebuilt_once`: its identity shows through
        `is` and id()), is built once and reused, so every reference to it after the graph — a
        call argument, a local, an item of another container — is the same object, as it was in
        the traced code. This is the one memo: Variables just build."""
        if not (getattr(var, "mutable", False) or getattr(var, "rebuilt_once", False)) or var.source is not None:
            return var.reconstruct(self)
        hit = self._memo.get(id(var))
        if hit is not None:
            if hit[1] is None:
                raise Unsupported(f"{var} contains itself and escapes the frame")
            return self.emit("LOAD_FAST", hit[1])
        self._memo[id(var)] = (var, None)  # in progress: a reference back to it is a cycle
        var.reconstruct(self)
        self.emit("COPY", 1)
        self._memo[id(var)] = (var, self.store_tmp())

    def into_tmp(self, var):
        """Rebuild `var` into a new temporary; returns its name."""
        self.reconstruct(var)
        return self.store_tmp()

    def load_cell(self, box):
        """Emit code leaving the real cell object for a CellBox on the stack: the frame's own
        cell (a cell or free variable of this code), a called function's cell (from its
        source), or a new cell made here once per box, holding the box's value."""
        for name, b in self.frame_cells.items():
            if b is box:
                return self.extend(versions.load_closure(name, free=name in self.code.co_freevars))
        src = box.source
        if box.real_cell is not None and src is not None and getattr(src, "attr", None) == "cell_contents":
            return self.load_source(src.base)
        hit = self._cells.get(id(box))
        if hit is not None:
            return self.emit("LOAD_FAST", hit)
        if box.is_empty():
            self.call_with(types.CellType, [])
        else:
            self.call_with(types.CellType, [box.peek()])
        self.emit("COPY", 1)
        self._cells[id(box)] = self.store_tmp()

    def new_cell(self, box):
        """Make the real cell for `box` now, empty, unless one is made already: the cell a
        class made after the graph fills (`__classcell__`), which its methods close over."""
        if id(box) not in self._cells:
            self.call_with(types.CellType, [])
            self._cells[id(box)] = self.store_tmp()

    # ---- primitives used by Variable.reconstruct ----------------------------------------------
    def emit(self, name, arg=bc.UNSET):
        self.instrs.append(bc.Instr(name) if arg is bc.UNSET else bc.Instr(name, arg))

    def load_const(self, value):
        self.emit("LOAD_CONST", value)

    def load_source(self, source):
        self.instrs.extend(_source_instrs(self.code, source))

    def load_tensor(self, var):
        node = var.node
        if node.op in ("placeholder", "get_attr"):
            if var.source is None:
                raise Unsupported("a module tensor without a source escapes the frame")
            return self.load_source(var.source)
        idx = self._out_index.get(node)
        if idx is None:
            idx = self._out_index[node] = len(self.outputs)
            self.outputs.append(node)
        self.emit("LOAD_FAST", GRAPH_OUT)
        self.load_const(idx)
        self.extend(versions.subscr())

    def build(self, kind, n):
        if kind is tuple:
            self.emit("BUILD_TUPLE", n)
        elif kind is list:
            self.emit("BUILD_LIST", n)
        elif kind is set:
            self.emit("BUILD_SET", n)
        elif kind is dict:
            self.emit("BUILD_MAP", n)
        else:  # torch.Size and other tuple subclasses: build a tuple, then convert
            self.emit("BUILD_TUPLE", n)
            self.call_on_stack(kind)

    def extend(self, instrs):
        """Append instructions made elsewhere: by the version helpers (bytecode_utils.versions),
        or labels and try-region markers."""
        self.instrs.extend(instrs)

    def call_on_stack(self, fn):
        """TOS -> fn(TOS)."""
        self.extend(versions.call_const_on_tos(fn))

    def call_with(self, fn, items):
        """fn(*items) for a constant fn and Variables items."""
        self.extend(versions.load_const_callable(fn))
        for item in items:
            self.reconstruct(item)
        self.extend(versions.call(len(items)))

    def load_method(self, name):
        """TOS -> what a method call reads; follow with the arguments and call(n)."""
        self.extend(versions.load_method(name))

    def load_attr(self, name):
        self.extend(versions.load_attr(name))

    def call(self, nargs, kw_names=()):
        """Call what load_method / versions.load_callable left, with nargs arguments."""
        self.extend(versions.call(nargs, kw_names))

    def new_tmp(self):
        self._tmp += 1
        return f"{TMP_PREFIX}{self._tmp}"

    def store_tmp(self):
        name = self.new_tmp()
        self.emit("STORE_FAST", name)
        return name


def _source_instrs(code, source):
    """The instructions loading `source` in `code` (a cell variable is read through its cell)."""
    out = []
    for ins in source.reconstruct():
        if ins.name == "LOAD_FAST" and ins.arg in code.co_cellvars:
            ins = bc.Instr("LOAD_DEREF", bc.CellVar(ins.arg))
        out.append(ins)
    return out


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _TempSource(Source):
    """A value the rewritten code holds in temporary `tmp` (a shared prefix of graph inputs)."""
    tmp: str

    def _key(self):
        return (self.tmp,)

    def name(self):
        return self.tmp

    def reconstruct(self):
        return [bc.Instr("LOAD_FAST", self.tmp)]


def _shared_prefixes(code, sources, new_tmp):
    """(instructions storing shared prefixes into temporaries, instructions loading `sources`
    through them). A model's parameters are graph inputs reached through chains of module
    dicts (`self._modules['layers']._modules['3']._parameters['weight']`): each point where
    chains part is read once, so the code is a third as long (assembling it was a tenth of a
    48-layer model's first call) and a call reads each module once."""
    users: dict = {}     # strict prefix -> number of inputs under it
    children: dict = {}  # prefix -> the sources one step under it that inputs are under
    for s in dict.fromkeys(sources):
        for a in s.ancestors():
            users[a] = users.get(a, 0) + 1
        child = s
        for a in s.ancestors():
            children.setdefault(a, set()).add(child)
            child = a
    # a prefix where chains part, not a root (a local is as cheap as a temporary)
    shared = [a for a, n in users.items() if n > 1 and a.base is not None
              and not any(users.get(c, 1) == n for c in children[a])]
    shared.sort(key=lambda a: a.depth())
    temps: dict = {}
    to_temp: dict = {}  # prefix -> its Retarget (one memo for the sources under it)

    def through_temps(s):
        for a in s.ancestors():  # the nearest one held in a temporary
            tmp = temps.get(a)
            if tmp is not None:
                r = to_temp.get(a)
                if r is None:
                    r = to_temp[a] = Retarget(a, _TempSource(tmp))
                return r(s)
        return s

    pre = []
    for a in shared:
        pre += _source_instrs(code, through_temps(a))
        temps[a] = new_tmp()
        pre.append(bc.Instr("STORE_FAST", temps[a]))
    loads = [ins for s in sources for ins in _source_instrs(code, through_temps(s))]
    return pre, loads


def generate(tx, ret):
    """The Rewrite of a root frame that returned `ret`."""
    cg = CodeGen.for_frame(tx)
    with cg.section(READS):
        ret_tmp = cg.into_tmp(ret)
    emit_stores(cg, side_effect_values(cg, tx))
    with cg.section(EXIT):
        cg.emit("LOAD_FAST", ret_tmp)
        cg.extend(versions.return_value())
    return cg.finish()


# ---- side effects: phase 1 reads them into Stores, phase 2 writes them -------------------------
# Each Store names the temporaries phase 1 filled (`*_tmp`); emit() writes it in phase 2.
# A `target_tmp` of None: the object written to is loaded where it is written (_target_into_tmp).

@dataclasses.dataclass(frozen=True)
class ContentsStore:
    """A mutated container's final contents, written into it in place (its identity kept)."""
    var: object                 # the container's Variable: its kind says how it is refilled
    value_tmp: str              # the contents, as _contents_into_tmp built them
    target_tmp: str | None

    def emit(self, cg):
        var, tmp, target = self.var, self.value_tmp, self.target_tmp
        if isinstance(var, ListVariable) and var.append_only:  # only appends: extend it
            _call_methods(cg, var, target, (("extend", tmp),))
        elif isinstance(var, ListVariable) and not isinstance(var, DequeVariable):
            cg.emit("LOAD_FAST", tmp)
            _load_target(cg, var, target)
            cg.load_const(slice(None))
            cg.emit("STORE_SUBSCR")
        elif isinstance(var, IteratorVariable):
            cg.extend(versions.load_const_callable(set_list_iter if hasattr(var, "replay_pos") else advance))
            _load_target(cg, var, target)
            cg.emit("LOAD_FAST", tmp)
            cg.call(2)
            cg.emit("POP_TOP")
        elif getattr(var, "storage_base", None) is not None:  # a dict subclass's storage
            cg.extend(versions.load_const_callable(refill_storage))
            cg.load_const(var.storage_base)
            _load_target(cg, var, target)
            cg.emit("LOAD_FAST", tmp)
            cg.call(3)
            cg.emit("POP_TOP")
        else:  # dict / set / deque: clear then refill in place, keeping identity
            refill = "extend" if isinstance(var, DequeVariable) else "update"
            _call_methods(cg, var, target, (("clear", None), (refill, tmp)))


@dataclasses.dataclass(frozen=True)
class AttrStore:
    """`obj.name = value`; `raw`: through object.__setattr__ (the traced code bypassed the
    class's __setattr__, so must the replay)."""
    var: object                 # the object's Variable
    name: str
    value_tmp: str
    target_tmp: str | None
    raw: bool = False

    def emit(self, cg):
        if self.raw:
            cg.extend(versions.load_const_callable(object.__setattr__))
            _load_target(cg, self.var, self.target_tmp)
            cg.load_const(self.name)
            cg.emit("LOAD_FAST", self.value_tmp)
            cg.call(3)
            cg.emit("POP_TOP")
        else:
            cg.emit("LOAD_FAST", self.value_tmp)
            _load_target(cg, self.var, self.target_tmp)
            cg.emit("STORE_ATTR", self.name)


@dataclasses.dataclass(frozen=True)
class GlobalStore:
    """`namespace[name] = value`; by STORE_GLOBAL when `namespace` is the frame's own globals."""
    namespace: dict
    name: str
    value_tmp: str
    frame_globals: bool

    def emit(self, cg):
        cg.emit("LOAD_FAST", self.value_tmp)
        if self.frame_globals:
            cg.emit("STORE_GLOBAL", self.name)
        else:
            cg.load_const(self.namespace)
            cg.load_const(self.name)
            cg.emit("STORE_SUBSCR")


@dataclasses.dataclass(frozen=True)
class CellStore:
    """A cell of the frame's own code rebound: a free variable (`free`) or one of its cell
    variables (closures made in the frame read it)."""
    name: str
    value_tmp: str
    free: bool

    def emit(self, cg):
        cg.emit("LOAD_FAST", self.value_tmp)
        cg.emit("STORE_DEREF", bc.FreeVar(self.name) if self.free else bc.CellVar(self.name))


@dataclasses.dataclass(frozen=True)
class DeferredCall:
    """A call the traced code made whose effect is replayed by making it (SideEffects.defer_call)."""
    fn: object
    args_tmp: str
    kwargs_tmp: str

    def emit(self, cg):
        cg.extend(versions.load_const_callable(apply_call))
        cg.load_const(self.fn)
        cg.emit("LOAD_FAST", self.args_tmp)
        cg.emit("LOAD_FAST", self.kwargs_tmp)
        cg.call(3)
        cg.emit("POP_TOP")


@dataclasses.dataclass(frozen=True)
class CellContentsStore:
    """A called function's cell rebound, written through its source `<cell>.cell_contents`."""
    source: object
    value_tmp: str

    def emit(self, cg):
        cg.emit("LOAD_FAST", self.value_tmp)
        cg.load_source(self.source.base)
        cg.emit("STORE_ATTR", "cell_contents")


def side_effect_values(cg, tx):
    """Phase 1 of replaying side effects (into READS): compute every value to be written, and
    fetch every object to be written to, into temps; returns the Stores, in the order phase 2
    writes them. The targets are fetched now too: a target's source may read through another
    mutated object (a list reached through an iterator over it, `iter_seq(it)`, or an object
    held in a list), which phase 2 changes before it gets there."""
    se = tx.ctx.side_effects
    stores = []
    with cg.section(READS):
        for var in se.mutated_containers:
            stores.append(ContentsStore(var, _contents_into_tmp(cg, var), _target_into_tmp(cg, var)))
        for var, attrs in se.attr_stores.values():
            target = _target_into_tmp(cg, var)
            for name, value in attrs.items():
                raw = (se.key(var), name) in se.raw_attr_stores
                stores.append(AttrStore(var, name, cg.into_tmp(value), target, raw=raw))
        for g, names in se.global_stores.values():
            for name, value in names.items():
                stores.append(GlobalStore(g, name, cg.into_tmp(value), frame_globals=g is tx.f_globals))
        for name, box in tx.cells.items():
            if box.dirty and name in tx.code.co_freevars:
                stores.append(CellStore(name, cg.into_tmp(box.get(tx)), free=True))
            elif box.dirty and name in tx.code.co_cellvars:  # the frame's own cells: closures made
                stores.append(CellStore(name, cg.into_tmp(box.get(tx)), free=False))  # here read them
        for fn, args, kwargs in se.deferred_calls:
            stores.append(DeferredCall(fn, cg.into_tmp(TupleVariable(args)), cg.into_tmp(DictVariable(kwargs))))
        root_boxes = {id(b) for b in tx.cells.values()}
        for box in se.cell_stores.values():  # a called function's cell, by its source
            if id(box) in root_boxes:
                continue  # one of the frame's own free variables: STORE_DEREF above
            stores.append(CellContentsStore(box.source, cg.into_tmp(box.get(tx))))
    return stores


def emit_stores(cg, stores):
    """Phase 2 (into STORES): the writes, after every value has been read. What values
    rebuilt in phase 1 deferred until the writes are done is in AFTER_STORES, next."""
    with cg.section(STORES):
        for store in stores:
            store.emit(cg)


def _target_into_tmp(cg, var):
    """The object a store writes to, fetched in phase 1. None for a frame local or a global
    read by name: phase 2 rebinds no local, and writes globals only after every container
    and attribute store, so those are loaded where they are written (`xs[:] = ...`)."""
    if isinstance(var.source, (LocalSource, GlobalSource)):
        return None
    cg.load_source(var.source)
    return cg.store_tmp()


def _load_target(cg, var, target):
    if target is None:
        cg.load_source(var.source)
    else:
        cg.emit("LOAD_FAST", target)


def _contents_into_tmp(cg, var):
    if isinstance(var, ListVariable) and var.append_only:  # replayed as extend: see ListVariable.lazy
        for item in var.appended:
            cg.reconstruct(item)
        cg.build(tuple, len(var.appended))
    elif isinstance(var, ListVariable):
        for item in var.items:
            cg.reconstruct(item)
        cg.build(list, len(var.items))
    elif isinstance(var, DictVariable):
        for k, v in var.stored.items():  # (a value never read: loaded from its source, as it is)
            load_key(cg, k)
            cg.reconstruct(v)
        cg.build(dict, len(var.stored))
    elif isinstance(var, IteratorVariable):
        cg.load_const(getattr(var, "replay_pos", var.pos))
    elif isinstance(var, SetVariable):
        for k in var.items:
            cg.load_const(k)
        cg.build(set, len(var.items))
    else:
        raise Unsupported(f"cannot replay mutation of {var}")
    return cg.store_tmp()


def _call_methods(cg, var, target, calls):
    """`target.method(tmp)` (or `target.method()` for a None tmp) for each (method, tmp)."""
    for method, arg in calls:
        _load_target(cg, var, target)
        cg.load_method(method)
        if arg is not None:
            cg.emit("LOAD_FAST", arg)
        cg.call(1 if arg else 0)
        cg.emit("POP_TOP")


def apply_call(fn, args, kwargs):
    """A deferred call (SideEffects.defer_call), made by the rewritten code."""
    fn(*args, **kwargs)


def assemble(code, rewrite, compiled_fn, rerun=None):
    """Substitute the compiled graph for its slot and build the flat-signature code.

    The graph is called through `untraced`: nothing it runs (leaf modules' forward, a
    backend's runtime) is a frame for the frame hook, under capture() or after a break.
    `rerun` (a rerun.Plan): an exception from the graph becomes rerun.RERUN, which the code
    checks for."""
    if rewrite.slot is not None:
        on_error = graph_raised(code.co_qualname, rerun.grad_mode, rerun.handled) if rerun is not None else None
        graph_fn = untraced(compiled_fn, on_error)
        for ins in rewrite.sections[GRAPH_CALL]:
            if isinstance(ins, bc.Instr) and ins.name == "LOAD_CONST" and ins.arg is rewrite.slot:
                ins.arg = graph_fn
    new = make_code(code, rewrite.instructions())
    return flatten_signature(new)


def root_local_source(code, index):
    return LocalSource(code.co_varnames[index], index)


__all__ = ["generate", "assemble", "CodeGen", "Rewrite", "GraphSlot", "SECTIONS", "side_effect_values",
           "emit_stores", "TensorVariable"]
