"""Build the rewritten code object for one cache entry.

The rewritten frame does, in order:
  1. the original prologue (MAKE_CELL / COPY_FREE_VARS / RESUME), so the frame layout is
     exactly the original's;
  2. loads each graph input from its Source and calls the compiled graph once;
  3. computes every value it must hand back (the return value, the final contents of
     mutated inputs) into temporaries — all reads happen before any write, so replaying
     one mutation cannot change what another reads;
  4. replays the mutations (container contents, attributes, globals, closure cells);
  5. returns.
The signature is then flattened to the N argument slots, which is what both the compile()
wrapper and the C frame hook call it with.
"""
import contextlib

import bytecode as bc

from bytecode_utils import flatten_signature, make_code, prologue, versions
from guards import GlobalSource, LocalSource

from ..exc import Unsupported
from ..variables.containers import (advance, DictVariable, IteratorVariable, ListVariable, load_key,
                                    set_list_iter, SetVariable, TupleVariable)
from ..variables.collections_vars import DequeVariable
from ..variables.dict_storage import refill_storage
from ..variables.tensor import TensorVariable
from ..runtime.frame_hook import untraced
from .rerun import graph_raised

GRAPH_OUT = "___graph_out"


class _GraphFnSlot:
    """Placeholder constant replaced by the compiled graph once outputs are known."""


class CodeGen:
    def __init__(self, code, output):
        self.code = code
        self.output = output
        self.instrs = []
        self.outputs = []          # FX nodes the graph must return, in order
        self._out_index = {}
        self._tmp = 0
        self._memo = {}            # id(var) -> (var, temp name) for mutable values built here
        self._after_writes = []    # instructions that must run after the side effects are written
        self.frame_cells = {}      # the root frame's CellBoxes by name: its real cells, in this code
        self._cells = {}           # id(CellBox) -> temp holding the cell made for it here

    # ---- rebuilding values -------------------------------------------------------------------
    def reconstruct(self, var):
        """Emit code leaving `var` on the stack. A mutable value built here (a list, dict, set or
        object created during tracing) is built once and reused, so every reference to it
        after the graph — a call argument, a local, an item of another container — is the same
        object, as it was in the traced code. This is the one memo: Variables just build."""
        if not getattr(var, "mutable", False) or var.source is not None:
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
        import types
        if box.is_empty():
            self.call_with(types.CellType, [])
        else:
            self.call_with(types.CellType, [box.peek()])
        self.emit("COPY", 1)
        self._cells[id(box)] = self.store_tmp()

    # ---- primitives used by Variable.reconstruct ----------------------------------------------
    def emit(self, name, arg=bc.UNSET):
        self.instrs.append(bc.Instr(name) if arg is bc.UNSET else bc.Instr(name, arg))

    def load_const(self, value):
        self.emit("LOAD_CONST", value)

    def load_source(self, source):
        for ins in source.reconstruct():
            if ins.name == "LOAD_FAST" and ins.arg in self.code.co_cellvars:
                ins = bc.Instr("LOAD_DEREF", bc.CellVar(ins.arg))
            self.instrs.append(ins)

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
        self.emit("BINARY_SUBSCR")

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
        """Append instructions made by the version helpers (bytecode_utils.versions)."""
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

    @contextlib.contextmanager
    def after_writes(self):
        """What is emitted inside the block runs after phase 2 (the side-effect writes)."""
        saved, self.instrs = self.instrs, []
        try:
            yield
        finally:
            self._after_writes += self.instrs
            self.instrs = saved

    def new_tmp(self):
        self._tmp += 1
        return f"___tmp{self._tmp}"

    def store_tmp(self):
        name = self.new_tmp()
        self.emit("STORE_FAST", name)
        return name


def generate(tx, ret):
    """Return (instructions, graph slot, outputs) for the root frame's result `ret`."""
    cg = CodeGen(tx.code, tx.ctx.output)
    cg.frame_cells = tx.cells
    # Phase 1: values to hand back, read before anything is written.
    ret_var = _value_into_tmp(cg, ret)
    stores = side_effect_values(cg, tx)
    # Phase 2: writes.
    emit_stores(cg, tx, stores)
    cg.emit("LOAD_FAST", ret_var)
    cg.extend(versions.return_value())
    head, slot = graph_call(tx, cg)
    return prologue(tx.code) + head + cg.instrs, slot, cg.outputs


def side_effect_values(cg, frame):
    """Phase 1 of replaying side effects: compute every value to be written, and fetch every
    object to be written to, into temps. The targets are fetched now too: a target's source
    may read through another mutated object (a list reached through an iterator over it,
    `iter_seq(it)`, or an object held in a list), which phase 2 changes before it gets there."""
    se = frame.ctx.side_effects
    stores = []
    for var in se.mutated_containers:
        stores.append(("contents", var, _contents_into_tmp(cg, var), _target_into_tmp(cg, var)))
    for var, attrs in se.attr_stores.values():
        target = _target_into_tmp(cg, var)
        for name, value in attrs.items():
            raw = (se.key(var), name) in se.raw_attr_stores
            stores.append(("raw_attr" if raw else "attr", var, name, _value_into_tmp(cg, value), target))
    for g, names in se.global_stores.values():
        for name, value in names.items():
            stores.append(("global", g, name, _value_into_tmp(cg, value)))
    for name, box in frame.cells.items():
        if box.dirty and name in frame.code.co_freevars:
            stores.append(("cell", name, _value_into_tmp(cg, box.get(frame))))
        elif box.dirty and name in frame.code.co_cellvars:  # the frame's own cells: closures made
            stores.append(("cellvar", name, _value_into_tmp(cg, box.get(frame))))  # here read them
    for fn, args, kwargs in se.deferred_calls:
        stores.append(("call", fn, _value_into_tmp(cg, TupleVariable(args)),
                       _value_into_tmp(cg, DictVariable(kwargs))))
    root_boxes = {id(b) for b in frame.cells.values()}
    for box in se.cell_stores.values():  # a called function's cell, by its source
        if id(box) in root_boxes:
            continue  # one of the frame's own free variables: STORE_DEREF above
        stores.append(("cell_contents", box.source, _value_into_tmp(cg, box.get(frame))))
    return stores


def emit_stores(cg, frame, stores):
    """Phase 2: the writes, after every value has been read; then what values rebuilt in
    phase 1 deferred until the writes are done (CodeGen.after_writes)."""
    for st in stores:
        _emit_store(cg, frame, st)
    cg.instrs.extend(cg._after_writes)
    cg._after_writes = []


def graph_call(tx, cg):
    """Instructions that call the compiled graph (a slot filled later) into GRAPH_OUT.

    Built after the body because only then are the graph's outputs known."""
    ctx = tx.ctx
    if not (ctx.output.count_ops() or cg.outputs):
        return [], None
    slot = _GraphFnSlot()
    head = versions.load_const_callable(slot)
    loader = CodeGen(tx.code, ctx.output)
    for source, _node, _t in ctx.output.inputs:
        loader.load_source(source)
    head.extend(loader.instrs)
    head += versions.call(len(ctx.output.inputs)) + [bc.Instr("STORE_FAST", GRAPH_OUT)]
    return head, slot


def _value_into_tmp(cg, var):
    cg.reconstruct(var)
    return cg.store_tmp()


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
        for k, v in var.items.items():
            load_key(cg, k)
            cg.reconstruct(v)
        cg.build(dict, len(var.items))
    elif isinstance(var, IteratorVariable):
        cg.load_const(getattr(var, "replay_pos", var.pos))
    elif isinstance(var, SetVariable):
        for k in var.items:
            cg.load_const(k)
        cg.build(set, len(var.items))
    else:
        raise Unsupported(f"cannot replay mutation of {var}")
    return cg.store_tmp()


def _emit_store(cg, frame, st):
    kind = st[0]
    if kind == "contents":
        _, var, tmp, target = st
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
    elif kind == "attr":
        _, var, name, tmp, target = st
        cg.emit("LOAD_FAST", tmp)
        _load_target(cg, var, target)
        cg.emit("STORE_ATTR", name)
    elif kind == "raw_attr":  # object.__setattr__(target, name, value)
        _, var, name, tmp, target = st
        cg.extend(versions.load_const_callable(object.__setattr__))
        _load_target(cg, var, target)
        cg.load_const(name)
        cg.emit("LOAD_FAST", tmp)
        cg.call(3)
        cg.emit("POP_TOP")
    elif kind == "global":
        _, g, name, tmp = st
        cg.emit("LOAD_FAST", tmp)
        if g is frame.f_globals:
            cg.emit("STORE_GLOBAL", name)
        else:
            cg.load_const(g)
            cg.load_const(name)
            cg.emit("STORE_SUBSCR")
    elif kind in ("cell", "cellvar"):
        _, name, tmp = st
        cg.emit("LOAD_FAST", tmp)
        cg.emit("STORE_DEREF", bc.FreeVar(name) if kind == "cell" else bc.CellVar(name))
    elif kind == "call":
        _, fn, args_tmp, kwargs_tmp = st
        cg.extend(versions.load_const_callable(apply_call))
        cg.load_const(fn)
        cg.emit("LOAD_FAST", args_tmp)
        cg.emit("LOAD_FAST", kwargs_tmp)
        cg.call(3)
        cg.emit("POP_TOP")
    elif kind == "cell_contents":  # source is `<cell>.cell_contents`
        _, source, tmp = st
        cg.emit("LOAD_FAST", tmp)
        cg.load_source(source.base)
        cg.emit("STORE_ATTR", "cell_contents")


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


def assemble(code, instrs, slot, compiled_fn, rerun=None):
    """Substitute the compiled graph for its slot and build the flat-signature code.

    The graph is called through `untraced`: nothing it runs (leaf modules' forward, a
    backend's runtime) is a frame for the frame hook, under capture() or after a break.
    `rerun` (a rerun.Plan): an exception from the graph becomes rerun.RERUN, which the code
    checks for."""
    if slot is not None:
        on_error = graph_raised(code.co_qualname, rerun.grad_mode) if rerun is not None else None
        graph_fn = untraced(compiled_fn, on_error)
        for ins in instrs:
            if isinstance(ins, bc.Instr) and ins.name == "LOAD_CONST" and ins.arg is slot:
                ins.arg = graph_fn
    new = make_code(code, instrs)
    return flatten_signature(new)


def root_local_source(code, index):
    return LocalSource(code.co_varnames[index], index)


__all__ = ["generate", "assemble", "CodeGen", "TensorVariable"]
