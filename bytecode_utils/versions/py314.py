"""CPython 3.14: what changed from 3.13 (everything else is inherited from ``py313``).

Checked against 3.14.10's ``dis`` (opmap, ``stack_effect``, disassembly of the constructs).

* New spellings of old meanings, normalised to the 3.13 names (``ALIASES``):
  ``LOAD_FAST_BORROW`` (a LOAD_FAST whose reference the compiler proved may be borrowed) and
  its pair form; ``LOAD_SMALL_INT i`` and ``LOAD_COMMON_CONSTANT`` (AssertionError,
  NotImplementedError, tuple, all, any) are constants; ``BINARY_OP 26`` (``NB_SUBSCR``)
  is 3.13's BINARY_SUBSCR; ``NOT_TAKEN`` (a branch-monitoring marker) is a NOP; ``POP_ITER``
  drops the exhausted iterator after END_FOR, as 3.13's POP_TOP did.
* Gone: BEFORE_WITH (``with`` is ``LOAD_SPECIAL __exit__ ... LOAD_SPECIAL __enter__; CALL 0``
  and keeps ``[__exit__, self | NULL]`` on the stack), RETURN_CONST (LOAD_CONST;
  RETURN_VALUE), LOAD_ASSERTION_ERROR, BUILD_CONST_KEY_MAP, BINARY_SUBSCR.
* New: template strings (PEP 750: BUILD_INTERPOLATION, BUILD_TEMPLATE); the annotations of
  a function are a lazily called ``__annotate__`` function (PEP 649:
  ``SET_FUNCTION_ATTRIBUTE 0x10``).
* CALL_FUNCTION_EX always has a kwargs slot (a NULL when there are none).
"""
from __future__ import annotations

import dis

import bytecode as _bc

from . import py311, py313
from .py313 import (CALL_OPNAMES, ITER_SLOTS, CALL_PREFIX_OPNAMES, INTRINSIC_ALIASES, SEND_KEEPS_RECEIVER, _i,  # noqa: F401
                    call, call_const_on_tos, call_kw_names, callable_and_null, compare_to_bool, cond_jump,
                    load_attr, load_callable, load_closure, load_const_callable, load_global, load_method,
                    make_function, native, native_plain_attr, push_null, return_value, split_call,
                    slot_of_cell)

#: END_ASYNC_FOR's argument points back at its SEND for sys.monitoring only: the instruction
#: never jumps (it re-raises, or drops the finished async iterator and falls through).
NOT_JUMPS = frozenset({"END_ASYNC_FOR"})

#: BINARY_OP's operand for ``a[b]`` (``dis._nb_ops``: ``('NB_SUBSCR', '[]')``).
NB_SUBSCR = [name for name, _sym in dis._nb_ops].index("NB_SUBSCR")

#: raw opname -> constants it loads, by oparg (``dis`` shows the oparg as argval).
COMMON_CONSTANTS = tuple(getattr(dis, "_common_constants", ()))

ALIASES: dict[str, tuple[str, ...]] = {
    **py313.ALIASES,
    "LOAD_FAST_BORROW": ("LOAD_FAST",),
    "LOAD_FAST_BORROW_LOAD_FAST_BORROW": ("LOAD_FAST_LOAD_FAST",),
    "LOAD_SMALL_INT": ("LOAD_CONST",),
    "LOAD_COMMON_CONSTANT": ("LOAD_CONST",),
    "BINARY_OP": ("BINARY_OP", "BINARY_SUBSCR"),
    "NOT_TAKEN": ("NOP",),
    "POP_ITER": ("POP_TOP",),
}

_RENAMED = {"LOAD_FAST_BORROW": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_LOAD_FAST",
            "NOT_TAKEN": "NOP", "POP_ITER": "POP_TOP"}


def normalize(inst, code):
    """See py312.normalize. The constants of LOAD_SMALL_INT (its oparg) and
    LOAD_COMMON_CONSTANT (a table in the interpreter) become LOAD_CONST's argval."""
    op = inst.opname
    if op in _RENAMED:
        inst.opname = _RENAMED[op]
    elif op == "LOAD_SMALL_INT":
        inst.opname, inst.argval = "LOAD_CONST", inst.arg
    elif op == "LOAD_COMMON_CONSTANT":
        inst.opname, inst.argval = "LOAD_CONST", COMMON_CONSTANTS[inst.arg]
    elif op == "BINARY_OP" and inst.arg == NB_SUBSCR:
        inst.opname = "BINARY_SUBSCR"
    else:
        return py313.normalize(inst, code)
    return inst


_DEREFS = ("LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_FROM_DICT_OR_DEREF")


def fix_decoded(bc, code):
    """Two things ``bytecode`` 0.19.1 decodes wrong on 3.14. LOAD_DEREF & co. moved from
    ``hasfree`` to ``haslocal``, and their argument comes back as a plain local name: a cell or
    free variable read through it would become a new local when the code is reassembled with
    another layout (a resume function, where the frame's cells are free variables): they get
    their CellVar / FreeVar back. BUILD_INTERPOLATION's argument comes back as a tuple that
    it cannot encode again (and its argument check refuses anything else; ``decodable`` gave
    it a stand-in oparg): it gets its real oparg back, from ``dis`` on ``code``, stored past
    the check, and is assembled with it as it is."""
    cells, free = set(code.co_cellvars), set(code.co_freevars)
    interpolations = None
    for ins in bc:
        name = getattr(ins, "name", None)
        if name in _DEREFS and isinstance(ins.arg, str):
            if ins.arg in cells:
                ins.arg = _bc.CellVar(ins.arg)
            elif ins.arg in free:
                ins.arg = _bc.FreeVar(ins.arg)
        elif name == "BUILD_INTERPOLATION" and not isinstance(ins.arg, int):
            if interpolations is None:
                interpolations = iter([i.arg for i in dis.get_instructions(code) if i.opname == name])
            ins._arg = next(interpolations)  # (Instr.arg's setter insists on the tuple)
    return bc


_BUILD_INTERPOLATION = dis.opmap["BUILD_INTERPOLATION"]
#: A BUILD_INTERPOLATION oparg (format-spec bit clear) that ``bytecode`` 0.19.1 decodes: its
#: decoder reads (oparg & 1, FormatValue(oparg >> 1)), and FormatValue starts at 1.
_DECODABLE_INTERPOLATION = 2


def decodable(code):
    """See py311.decodable. And BUILD_INTERPOLATION: CPython packs the conversion in its oparg's
    bits 2 and up (``!r`` is 10, ``!a`` 14), which ``bytecode`` 0.19.1 decodes as
    FormatValue(oparg >> 1) and refuses (ValueError: 5 is not a valid FormatValue). Each gets
    an oparg the package decodes, with the same format-spec bit (its stack effect);
    fix_decoded puts the real one back, read with ``dis`` from the original code."""
    code = py313.decodable(code)
    raw = bytearray(code.co_code)
    if _BUILD_INTERPOLATION not in raw[::2]:
        return code
    for off in range(0, len(raw), 2):  # (co_code's CACHE entries are zeros: opcode 0)
        if raw[off] == _BUILD_INTERPOLATION:
            raw[off + 1] = _DECODABLE_INTERPOLATION | (raw[off + 1] & 1)
    return code.replace(co_code=bytes(raw))


#: 3.14's code flag: co_consts[0] is the docstring (inspect.CO_HAS_DOCSTRING).
CO_HAS_DOCSTRING = 0x4000000


def finish_code(new, template=None):
    """3.14 reads a function's docstring as co_consts[0] whenever CO_HAS_DOCSTRING is set,
    without a check (PyFunction_New): a code object made with the flags of one that has a
    docstring but other constants would get a wrong __doc__, or crash the interpreter when it
    has no constants. The flag is kept only where the first constant is the template's
    docstring (or, with no template, a string)."""
    if not new.co_flags & CO_HAS_DOCSTRING:
        return new
    first = new.co_consts[0] if new.co_consts else None
    if template is not None:
        ok = (template.co_flags & CO_HAS_DOCSTRING and template.co_consts and first is template.co_consts[0])
    else:
        ok = isinstance(first, str)
    return new if ok else new.replace(co_flags=new.co_flags & ~CO_HAS_DOCSTRING)


def call_ex_has_kwargs(inst):
    """CALL_FUNCTION_EX reads a kwargs slot (a dict, or a NULL) whatever its oparg."""
    return True


_SHAPES = {**py313._SHAPES, "BUILD_TEMPLATE": (2, 1), "LOAD_SPECIAL": (1, 2)}


def break_shape(inst):
    """See py311.break_shape. BUILD_INTERPOLATION pops a format spec when its low bit is set."""
    if inst.opname == "BUILD_INTERPOLATION":
        return 2 + (inst.arg & 1), 1
    return py313.break_shape(inst) or _SHAPES.get(inst.opname)


def subscr():
    """TOS1[TOS] (BINARY_SUBSCR is BINARY_OP's ``[]`` since 3.14)."""
    return [_i("BINARY_OP", NB_SUBSCR)]


def return_const(value):
    """No RETURN_CONST since 3.14."""
    return py311.return_const(value)


_BORROWS = {"LOAD_FAST_BORROW": "LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW": "LOAD_FAST_LOAD_FAST"}


def relocatable(items):
    """See py313.relocatable. A borrowed load is safe only where the compiler proved the local
    outlives the stack entry; moved into a resume function, that proof is gone: load a strong
    reference instead (the same value)."""
    out = []
    for item in items:
        name = _BORROWS.get(getattr(item, "name", None))
        if name is not None:
            item = _bc.Instr(name, item.arg, location=item.location)
        out.append(item)
    return py313.relocatable(out)
