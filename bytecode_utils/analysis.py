"""Control-flow facts about decoded instructions: blocks, stack depths, live locals.

Why this module exists: the symbolic interpreter needs to know, at any instruction where it
may stop (a graph break), how many values are on the stack and which locals still matter, so
that generated code rebuilds exactly that state and no more. All of it is a forward or
backward walk over one control-flow graph whose edges are: fall-through, jumps (both sides
of a conditional) and exception-table edges to handlers.
"""

from __future__ import annotations

import dis
import types
from typing import Iterable, Sequence

from .instructions import Instruction, PerCode, decode, is_jump, is_terminator
from .codegen import arg_names

__all__ = [
    "jump_targets",
    "basic_blocks",
    "successors",
    "stack_depths",
    "live_locals",
    "StackDepthError",
    "handler_depth",
    "loop_components",
]


class StackDepthError(ValueError):
    """Two paths reach an instruction with different stack depths, or a depth goes negative."""


def _instrs(code_or_instrs: types.CodeType | Sequence[Instruction]) -> Sequence[Instruction]:
    if isinstance(code_or_instrs, types.CodeType):
        return decode(code_or_instrs)
    return code_or_instrs


def jump_targets(instrs: Sequence[Instruction], *, handlers: bool = True) -> set[int]:
    """Indices that some jump (and, if ``handlers``, some exception-table entry) lands on."""
    out = {i.target for i in instrs if i.target is not None}
    if handlers:
        out |= {i.exn.target for i in instrs if i.exn is not None}
    return out


def basic_blocks(instrs: Sequence[Instruction]) -> list[range]:
    """Split ``instrs`` into maximal straight-line index ranges.

    A block starts at index 0, at any jump or handler target, after any jump or terminator,
    and wherever the covering exception-table entry changes (so one block has one handler).
    """
    if not instrs:
        return []
    leaders = {0} | jump_targets(instrs)
    for i, inst in enumerate(instrs):
        if (is_jump(inst) or is_terminator(inst)) and i + 1 < len(instrs):
            leaders.add(i + 1)
        if i > 0 and inst.exn != instrs[i - 1].exn:
            leaders.add(i)
    starts = sorted(leaders)
    return [range(s, e) for s, e in zip(starts, starts[1:] + [len(instrs)])]


def successors(instrs: Sequence[Instruction], i: int) -> list[int]:
    """Normal-flow successor indices of instruction ``i`` (fall-through and jump target)."""
    inst = instrs[i]
    out = []
    if not is_terminator(inst) and i + 1 < len(instrs):
        out.append(i + 1)
    if inst.target is not None and inst.target not in out:
        out.append(inst.target)
    return out


def loop_components(code: types.CodeType) -> tuple[int | None, ...]:
    """For each instruction of ``code``, which loop it is in: the id of its strongly connected
    component of the control-flow graph (fall-through, jumps and handler edges) when that
    component has a cycle, else None.

    Why not "a backward jump at or after it goes to or before it": 3.12+ place ``except``
    bodies after the function's last line and jump *back* from them to the code after the
    ``try``, so that test put every handler after a loop into the loop. Two instructions are in
    one loop body exactly when each reaches the other. Computed once per code object."""
    hit = _LOOPS.get(code)
    if hit is None:
        hit = _LOOPS[code] = _loop_components(decode(code))
    return hit


_LOOPS = PerCode()


def _loop_components(instrs: Sequence[Instruction]) -> tuple[int | None, ...]:
    n = len(instrs)
    succ = []
    for i, inst in enumerate(instrs):
        out = successors(instrs, i)
        if inst.exn is not None and inst.exn.target not in out:
            out.append(inst.exn.target)
        succ.append(out)
    # Tarjan's algorithm, iterative (a long function would pass the recursion limit).
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    comp: list[int | None] = [None] * n
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, k = work.pop()
            if k == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if k < len(succ[v]):
                work.append((v, k + 1))
                w = succ[v][k]
                if index[w] < 0:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if work:  # v is done: fold its low link into its parent's
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                members = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    members.append(w)
                    if w == v:
                        break
                if len(members) > 1 or v in succ[v]:
                    for w in members:
                        comp[w] = v
    return tuple(comp)


def _effect(inst: Instruction, jump: bool) -> int:
    if inst.opname == "RETURN_GENERATOR":
        # The generator is resumed right after RETURN_GENERATOR with the sent value on the
        # stack (the following POP_TOP drops it); dis reports 0 for it.
        return 1
    arg = inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None
    return dis.stack_effect(inst.opcode, arg, jump=jump)


def handler_depth(entry) -> int:
    """Stack depth at the first instruction of an exception handler."""
    return entry.depth + (1 if entry.lasti else 0) + 1


def stack_depths(code_or_instrs: types.CodeType | Sequence[Instruction]) -> list[int | None]:
    """Stack depth *before* each instruction; ``None`` where the instruction is unreachable."""
    instrs = _instrs(code_or_instrs)
    depths: list[int | None] = [None] * len(instrs)

    def reach(index: int, depth: int, src: int | None) -> bool:
        if depth < 0:
            raise StackDepthError(f"negative stack depth {depth} at {instrs[index]!r} (from {src})")
        old = depths[index]
        if old is None:
            depths[index] = depth
            return True
        if old != depth:
            raise StackDepthError(
                f"inconsistent stack depth at {instrs[index]!r}: {old} vs {depth} (from {src})"
            )
        return False

    if not instrs:
        return depths
    work = [0]
    depths[0] = 0
    while work:
        i = work.pop()
        inst = instrs[i]
        d = depths[i]
        assert d is not None
        if inst.exn is not None and reach(inst.exn.target, handler_depth(inst.exn), i):
            work.append(inst.exn.target)
        if not is_terminator(inst) and i + 1 < len(instrs):
            if reach(i + 1, d + _effect(inst, jump=False), i):
                work.append(i + 1)
        if inst.target is not None:
            if reach(inst.target, d + _effect(inst, jump=True), i):
                work.append(inst.target)
    return depths


def _local_effects(inst: Instruction, cellvars: frozenset[str], argnames: frozenset[str],
                   values_only: bool = False):
    """(uses, defs) of local names for one instruction."""
    op = inst.opname
    name = inst.argval
    if op in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"):
        # (3.12+ LOAD_FAST_AND_CLEAR saves the value an inlined comprehension restores: a use)
        return (name,), ()
    if op == "STORE_FAST":
        return (), (name,)
    # 3.13 superinstructions: argval is the pair of names
    if op == "LOAD_FAST_LOAD_FAST":
        return tuple(name), ()
    if op == "STORE_FAST_STORE_FAST":
        return (), tuple(name)
    if op == "STORE_FAST_LOAD_FAST":  # the store happens first: a load of the same name is not a use
        store, load = name
        return (() if load == store else (load,)), (store,)
    if op == "DELETE_FAST":
        # Raises if unbound, so the binding before it is observed; afterwards it is gone.
        # Its value is never read (values_only: liveness of values, not of bindings).
        return ((), (name,)) if values_only else ((name,), ())
    if name not in cellvars:
        return (), ()  # free variables live in the closure, not in this frame's state
    if op in ("LOAD_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF", "DELETE_DEREF"):
        return (name,), ()
    if op == "STORE_DEREF":
        # Deliberately not a kill: closures made earlier share the cell and may read the
        # new contents later, so the cell itself stays live.
        return (), ()
    if op == "MAKE_CELL":
        # An argument captured by a closure: MAKE_CELL wraps the incoming value (a use);
        # otherwise it creates a fresh empty cell (a definition).
        return ((name,), ()) if name in argnames else ((), (name,))
    return (), ()


def live_locals(
    code_or_instrs: types.CodeType | Sequence[Instruction],
    cellvars: Iterable[str] | None = None,
    argnames: Iterable[str] | None = None,
    values_only: bool = False,
) -> list[frozenset[str]]:
    """Names of frame locals (fast locals and this frame's cell variables) live before each instruction.

    Classic backward dataflow over fall-through, jump and exception edges. When a list of
    instructions is passed instead of a code object, ``cellvars``/``argnames`` default to
    "every DEREF name is a cell var" and "no arguments". ``values_only``: a name whose next
    use is a ``del`` is not live (its binding is needed, its value is not).
    """
    if isinstance(code_or_instrs, types.CodeType) and cellvars is None and argnames is None:
        per_code = _LIVE.setdefault(code_or_instrs, {})
        hit = per_code.get(values_only)
        if hit is None:
            hit = per_code[values_only] = _live_locals(code_or_instrs, None, None, values_only)
        return hit
    return _live_locals(code_or_instrs, cellvars, argnames, values_only)


_LIVE = PerCode()  # code -> {values_only: liveness} (shared: don't change)


def _live_locals(code_or_instrs, cellvars, argnames, values_only):
    if isinstance(code_or_instrs, types.CodeType):
        code = code_or_instrs
        instrs = decode(code)
        if cellvars is None:
            cellvars = code.co_cellvars
        if argnames is None:

            argnames = arg_names(code)
    else:
        instrs = code_or_instrs
        if cellvars is None:
            cellvars = {
                i.argval for i in instrs if i.opcode in dis.hasfree and isinstance(i.argval, str)
            }
    cells = frozenset(cellvars or ())
    args = frozenset(argnames or ())
    n = len(instrs)
    uses: list[frozenset[str]] = []
    defs: list[frozenset[str]] = []
    for inst in instrs:
        u, d = _local_effects(inst, cells, args, values_only)
        uses.append(frozenset(u))
        defs.append(frozenset(d))

    preds: list[list[int]] = [[] for _ in range(n)]
    for i, inst in enumerate(instrs):
        for s in successors(instrs, i):
            preds[s].append(i)
        if inst.exn is not None:
            preds[inst.exn.target].append(i)

    live_in: list[frozenset[str]] = [frozenset()] * n
    work = list(range(n))
    queued = [True] * n
    while work:
        i = work.pop()
        queued[i] = False
        inst = instrs[i]
        out: frozenset[str] = frozenset()
        for s in successors(instrs, i):
            out |= live_in[s]
        new = uses[i] | (out - defs[i])
        if inst.exn is not None:
            # The exception may be raised before this instruction's definition happens.
            new |= live_in[inst.exn.target]
        if new != live_in[i]:
            live_in[i] = new
            for p in preds[i]:
                if not queued[p]:
                    queued[p] = True
                    work.append(p)
    return live_in
