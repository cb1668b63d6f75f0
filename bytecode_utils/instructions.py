"""Decoded CPython instructions, in the shape the symbolic interpreter wants.

Why this module exists: ``dis`` gives byte offsets, shows ``EXTENDED_ARG`` as its own
instruction and keeps the exception table as raw byte ranges. An interpreter wants one entry
per real instruction, jumps and handlers as *list indices*, and each instruction to know which
exception-table entry covers it. ``decode`` builds exactly that on top of
``dis.get_instructions`` (so ``argval``/``argrepr`` are whatever ``dis`` says) and
``dis._parse_exception_table``.

Names are normalised by the running version's module (``versions.normalize``) so that
instructions with the same meaning on 3.11 to 3.15 have one name; ``opcode`` and
``arg`` stay the real ones. It also holds the small opcode facts everybody needs (which ops
jump, which end a block, the ``BINARY_OP`` argument table) and the ``bytecode``-package round
trip used to build new code.
"""

from __future__ import annotations

import dataclasses
import dis
import types
import weakref

import bytecode as _bc

from . import versions

__all__ = [
    "Instruction",
    "ExceptionTableEntry",
    "decode",
    "exception_table",
    "is_jump",
    "is_terminator",
    "JUMP_OPNAMES",
    "UNCONDITIONAL_JUMP_OPNAMES",
    "TERMINATOR_OPNAMES",
    "BINARY_OP_NAMES",
    "to_bytecode",
    "from_bytecode",
]

_RAW_JUMP_OPNAMES = frozenset(
    dis.opname[op] for op in getattr(dis, "hasjump", None) or (dis.hasjrel + dis.hasjabs)
) - versions.NOT_JUMPS

#: Every opname whose argument is a jump in this interpreter, raw and normalised.
JUMP_OPNAMES: frozenset[str] = _RAW_JUMP_OPNAMES | frozenset(
    alias for name in _RAW_JUMP_OPNAMES for alias in versions.ALIASES.get(name, ()))

#: Jumps that never fall through to the next instruction.
UNCONDITIONAL_JUMP_OPNAMES: frozenset[str] = frozenset(
    name
    for name in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT")
    if name in dis.opmap
)

#: Instructions after which control never reaches the next instruction in the list.
TERMINATOR_OPNAMES: frozenset[str] = frozenset(
    {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"} | UNCONDITIONAL_JUMP_OPNAMES
)

#: ``BINARY_OP`` argument -> operator symbol, e.g. ``0: '+'``, ``13: '+='`` (from ``dis._nb_ops``).
BINARY_OP_NAMES: dict[int, str] = {i: symbol for i, (_name, symbol) in enumerate(dis._nb_ops)}


@dataclasses.dataclass(frozen=True)
class ExceptionTableEntry:
    """One ``co_exceptiontable`` row, in instruction indices.

    ``start``/``end`` are inclusive (like ``dis`` prints them); ``target`` is the index of the
    handler; ``depth`` is the stack depth the handler unwinds to before pushing (``lasti``
    and) the exception.
    """

    start: int
    end: int
    target: int
    depth: int
    lasti: bool

    def covers(self, index: int) -> bool:
        return self.start <= index <= self.end


@dataclasses.dataclass
class Instruction:
    """One real instruction (``CACHE`` dropped, ``EXTENDED_ARG`` folded in)."""

    opname: str
    opcode: int
    arg: int | None
    argval: object
    argrepr: str
    offset: int  # byte offset of the opcode itself in co_code (what f_lasti*2 points at)
    index: int  # position in the decoded list
    lineno: int | None
    is_jump_target: bool
    target: int | None = None  # jumps: index of the target instruction
    exn: ExceptionTableEntry | None = None  # the exception-table entry covering this instruction
    #: byte offset of the first ``EXTENDED_ARG`` prefix, or ``offset`` when there is none.
    #: Jump ``argval`` offsets point here.
    start_offset: int = -1

    def __post_init__(self) -> None:
        if self.start_offset < 0:
            self.start_offset = self.offset

    def __repr__(self) -> str:  # short: these get printed in traces and dumps a lot
        extra = f" ->{self.target}" if self.target is not None else ""
        arg = f" {self.argrepr}" if self.argrepr else ("" if self.arg is None else f" {self.arg}")
        return f"<{self.index}: {self.opname}{arg}{extra}>"


def is_jump(inst: Instruction) -> bool:
    """True for instructions whose argument is a jump target (conditional or not)."""
    return inst.opname in JUMP_OPNAMES


def is_terminator(inst: Instruction) -> bool:
    """True if control never falls through to the next instruction."""
    return inst.opname in TERMINATOR_OPNAMES


def _raw_instructions(code: types.CodeType) -> list[Instruction]:
    """dis instructions with EXTENDED_ARG folded into the instruction that follows."""
    out: list[Instruction] = []
    prefix_offset: int | None = None
    prefix_is_target = False
    for d in dis.get_instructions(code):
        if d.opname == "EXTENDED_ARG":
            if prefix_offset is None:
                prefix_offset = d.offset
            prefix_is_target = prefix_is_target or d.is_jump_target
            continue
        out.append(
            Instruction(
                opname=d.opname,
                opcode=d.opcode,
                arg=d.arg,
                argval=d.argval,
                argrepr=d.argrepr,
                offset=d.offset,
                index=len(out),
                lineno=d.positions.lineno if d.positions is not None else None,
                is_jump_target=d.is_jump_target or prefix_is_target,
                start_offset=d.offset if prefix_offset is None else prefix_offset,
            )
        )
        prefix_offset = None
        prefix_is_target = False
    if prefix_offset is not None:
        raise ValueError(f"{code.co_name}: trailing EXTENDED_ARG at offset {prefix_offset}")
    return out


def _unit_index_map(instrs: list[Instruction], code_len: int) -> list[int]:
    """Map every byte offset (even ones) to the index of the instruction owning it.

    An instruction owns its EXTENDED_ARG prefixes, itself and its trailing CACHE entries.
    """
    owner = [-1] * (code_len // 2 + 1)
    for inst in instrs:
        owner[inst.start_offset // 2] = inst.index
    current = -1
    for unit, idx in enumerate(owner):
        if idx == -1:
            owner[unit] = current
        else:
            current = idx
    return owner


def _entries(code: types.CodeType, owner: list[int]) -> list[ExceptionTableEntry]:
    entries = []
    for e in dis._parse_exception_table(code):
        entries.append(
            ExceptionTableEntry(
                start=owner[e.start // 2],
                end=owner[(e.end - 2) // 2],
                target=owner[e.target // 2],
                depth=e.depth,
                lasti=e.lasti,
            )
        )
    return entries


def exception_table(code: types.CodeType) -> list[ExceptionTableEntry]:
    """``code.co_exceptiontable`` as entries in instruction indices (table order kept)."""
    instrs = _raw_instructions(code)
    return _entries(code, _unit_index_map(instrs, len(code.co_code)))


class PerCode:
    """A cache keyed by code object *identity*, dropping an entry when its code dies.

    Not a WeakKeyDictionary: that hashes and compares code objects by content. A rewritten
    code object may hold an unhashable constant (a slice, on 3.11), and two code objects
    with the same content are different functions to us: the resume codes of one loop at
    two depths (graph_break.loop_depth) are equal, and sharing their cache entries made a
    resume function call itself until RecursionError."""

    def __init__(self) -> None:
        self._data: dict[int, tuple] = {}

    def get(self, code, default=None):
        hit = self._data.get(id(code))
        return hit[1] if hit is not None and hit[0]() is code else default

    def __getitem__(self, code):
        hit = self.get(code, _MISSING)
        if hit is _MISSING:
            raise KeyError(code)
        return hit

    def __setitem__(self, code, value) -> None:
        key = id(code)
        self._data[key] = (weakref.ref(code, lambda _r, d=self._data, k=key: d.pop(k, None)), value)

    def setdefault(self, code, value):
        hit = self.get(code, _MISSING)
        if hit is _MISSING:
            self[code] = hit = value
        return hit

    def items(self):
        """(code, value) pairs of the codes alive now."""
        pairs = ((ref(), value) for ref, value in list(self._data.values()))
        return [(code, value) for code, value in pairs if code is not None]

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()


_MISSING = object()
_DECODED = PerCode()


def decode(code: types.CodeType) -> list[Instruction]:
    """Decode ``code`` into :class:`Instruction` objects with jump targets and handlers resolved.

    ``target`` is filled for every jump; ``exn`` is the first exception-table entry covering
    the instruction (the tables do not overlap, and the first match is what CPython uses).
    Opnames are normalised (``versions.normalize``).

    Decoded once per code object (a frame with many graph breaks is traced again for each,
    and its resume functions are as long as it is): the list is new, the Instructions are
    shared and must not be changed.
    """
    hit = _DECODED.get(code)
    if hit is None:
        hit = _DECODED[code] = tuple(_decode(code))
    return list(hit)


def _decode(code: types.CodeType) -> list[Instruction]:
    instrs = _raw_instructions(code)
    owner = _unit_index_map(instrs, len(code.co_code))
    for inst in instrs:
        if inst.opname in _RAW_JUMP_OPNAMES:
            target = owner[inst.argval // 2]
            if instrs[target].start_offset != inst.argval:
                raise ValueError(f"{code.co_name}: jump at {inst.offset} into the middle of an instruction")
            inst.target = target
    for entry in _entries(code, owner):
        instrs[entry.target].is_jump_target = True
        for i in range(entry.start, entry.end + 1):
            if instrs[i].exn is None:
                instrs[i].exn = entry
    for inst in instrs:
        versions.normalize(inst, code)
    return instrs


def closing_runs_code(instrs: list[Instruction], inst: Instruction) -> bool:
    """Whether closing a generator suspended at ``inst`` runs code: a handler covers it other
    than the PEP 479 wrapper that 3.12+ puts around a generator's whole body (it only turns a
    StopIteration into RuntimeError and re-raises; GeneratorExit passes through unchanged)."""
    entry = inst.exn
    if entry is None:
        return False
    return not is_pep479_check(instrs[entry.target])


def is_pep479_check(inst: Instruction) -> bool:
    """3.12+: the instruction of a generator body's handler that turns StopIteration into
    RuntimeError (3.11 does it in the caller; there is no such instruction there)."""
    return inst.opname == "CALL_INTRINSIC_1" and inst.argrepr == "INTRINSIC_STOPITERATION_ERROR"


def to_bytecode(code: types.CodeType) -> _bc.Bytecode:
    """Abstract ``bytecode.Bytecode`` (labels, TryBegin/TryEnd, named args) for ``code``: the one
    place that decodes with the ``bytecode`` package (``versions.fix_decoded`` repairs what it
    gets wrong on some versions)."""
    return versions.fix_decoded(_bc.Bytecode.from_code(versions.decodable(code)), code)


def from_bytecode(bc: _bc.Bytecode) -> types.CodeType:
    """Assemble a ``bytecode.Bytecode`` back into a code object (stack size recomputed).

    Behaviour and instructions are preserved, but bytecode numbers non-argument locals by
    first use, so ``co_varnames`` order may change; use ``codegen.make_code`` with the
    original code as template when the frame layout must be kept.
    """
    return versions.finish_code(bc.to_code())
