"""Building new code and function objects from a template code object.

Why this module exists: the tracer's output is always "the user's code object, but with a
different body" (the graph call plus fallbacks, or a resume function). That new code must
keep the frame layout CPython expects of it: the same argument slots and local names in the
same order, the same cell and free variables, the 3.11 prologue (MAKE_CELL / COPY_FREE_VARS /
RESUME), a correct stack size. These helpers do that bookkeeping in one place, on top of the
``bytecode`` package, and also build the argument *binder* that turns ``(*args, **kwargs)``
into the flat argument slots exactly as CPython would, including its error messages.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types
from typing import Any, Iterable, Sequence

import bytecode as _bc
from bytecode.instr import InstrLocation as _InstrLocation

from . import versions

__all__ = [
    "make_code",
    "prologue",
    "flatten_signature",
    "flat_args",
    "arg_count",
    "arg_names",
    "make_binder",
    "make_function",
]

_CO_VARARGS = inspect.CO_VARARGS
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS
#: generator, coroutine, iterable coroutine, async generator: frames that suspend
GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200

# Attributes of bytecode.Bytecode that make_code copies from the template; keys of ``replace``.
_ATTRS = (
    "name",
    "qualname",
    "filename",
    "first_lineno",
    "argcount",
    "posonlyargcount",
    "kwonlyargcount",
    "flags",
    "argnames",
    "freevars",
    "cellvars",
    "docstring",
)


def arg_count(code: types.CodeType) -> int:
    """Number of argument slots: positional + keyword-only + ``*args`` + ``**kwargs``."""
    return (
        code.co_argcount
        + code.co_kwonlyargcount
        + bool(code.co_flags & _CO_VARARGS)
        + bool(code.co_flags & _CO_VARKEYWORDS)
    )


def arg_names(code: types.CodeType) -> tuple[str, ...]:
    """Names of the argument slots, in ``co_varnames`` (= frame slot) order."""
    return code.co_varnames[: arg_count(code)]


def flatten_signature(code: types.CodeType) -> types.CodeType:
    """``code`` with every argument slot turned into a plain positional parameter.

    The frame hook calls rewritten code with the already-bound argument slots, positionally.
    """
    return code.replace(
        co_argcount=arg_count(code),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=code.co_flags & ~(_CO_VARARGS | _CO_VARKEYWORDS),
    )


#: Alias of :func:`flatten_signature` (name used in the original issue).
flat_args = flatten_signature


def prologue(code: types.CodeType) -> list[_bc.Instr]:
    """Fresh copies of the instructions up to and including ``RESUME``.

    On 3.11 that is ``MAKE_CELL*``, ``COPY_FREE_VARS`` and, for generators,
    ``RETURN_GENERATOR; POP_TOP`` before ``RESUME 0``. Rewritten versions of ``code`` start
    with exactly these. Read with ``dis`` up to RESUME only: decoding the whole code with the
    bytecode package just for these few instructions was a quarter of a fuzz program's
    compile time.
    """
    out: list[_bc.Instr] = []
    for ins in dis.get_instructions(code):
        arg = _bc.UNSET
        if ins.opname == "MAKE_CELL":
            arg = _bc.CellVar(ins.argval) if ins.argval in code.co_cellvars else _bc.FreeVar(ins.argval)
        elif ins.opname in ("COPY_FREE_VARS", "RESUME"):
            arg = ins.arg
        elif ins.opname not in ("RETURN_GENERATOR", "POP_TOP", "NOP"):
            raise ValueError(f"{code.co_name}: unexpected {ins.opname} before RESUME")
        pos = ins.positions
        loc = _InstrLocation(pos.lineno, pos.end_lineno, pos.col_offset, pos.end_col_offset)
        out.append(_bc.Instr(ins.opname, arg, location=loc))
        if ins.opname == "RESUME":
            return out
    raise ValueError(f"{code.co_name}: no RESUME instruction found")


# --- constants -----------------------------------------------------------------------------
# bytecode dedups LOAD_CONST arguments by their marshal form, so two *distinct* but equal
# mutable objects (two lists, two dicts...) would be merged into one constant. The tracer puts
# live objects into constants and relies on identity, so such objects travel as unique
# placeholders (unmarshalable, hence keyed by id) and are swapped back after assembly.

_SAFE_CONST_TYPES = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis), types.CodeType)


class _ConstSlot:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _is_value_const(obj: Any) -> bool:
    if type(obj) in _SAFE_CONST_TYPES:
        return True
    if type(obj) in (tuple, frozenset):
        return all(_is_value_const(x) for x in obj)
    return False


def _protect_consts(instructions: Iterable[Any]) -> tuple[list[Any], bool]:
    out, used = [], False
    for item in instructions:
        if isinstance(item, _bc.Instr) and item.name == "LOAD_CONST" and not _is_value_const(item.arg):
            item = _bc.Instr("LOAD_CONST", _ConstSlot(item.arg), location=item.location)
            used = True
        out.append(item)
    return out, used


_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _straight_line_stacksize(items, flags) -> int | None:
    """The stack size of code whose jumps all go forward and which has no exception block, as
    bytecode's control-flow graph would compute it (checking the same: no instruction pops
    what is not there, and every way into a label finds the same depth). None for any other
    code, which the graph then handles: a backward jump, an exception block, dead code, a
    generator or coroutine (which starts with a value on the stack)."""
    if flags & _RESUMABLE:
        return None
    size = maxsize = 0
    at: dict = {}     # id(label) -> the depth a jump to it leaves
    seen: set = set()  # ids of the labels passed
    live = True
    for ins in items:
        if isinstance(ins, _bc.SetLineno):
            continue
        if isinstance(ins, _bc.Label):
            seen.add(id(ins))
            got = at.get(id(ins))
            if got is None:
                if not live:
                    return None
            elif live and got != size:
                return None
            else:
                size = got
            live = True
            continue
        if not isinstance(ins, _bc.Instr) or not live:
            return None
        if ins.has_jump():
            if id(ins.arg) in seen or not isinstance(ins.arg, _bc.Label):
                return None
            pre, post = ins.pre_and_post_stack_effect(jump=True)
            if size + pre < 0:
                raise RuntimeError(f"Failed to compute stacksize, got negative size at {ins}")
            taken = size + pre + post
            maxsize = max(maxsize, taken)
            if at.setdefault(id(ins.arg), taken) != taken:
                return None
            if ins.is_uncond_jump():
                live = False
                continue
        pre, post = ins.pre_and_post_stack_effect(jump=False)
        size += pre
        if size < 0:
            raise RuntimeError(f"Failed to compute stacksize, got negative size at {ins}")
        size += post
        maxsize = max(maxsize, size)
        if ins.is_final():
            live = False
    return maxsize


def make_code(template: types.CodeType, instructions: Sequence[Any], **replace: Any) -> types.CodeType:
    """Assemble ``instructions`` (bytecode Instr/Label/TryBegin/TryEnd/SetLineno) into a code object.

    Everything not in ``replace`` (keys: ``name, qualname, filename, first_lineno, argcount,
    posonlyargcount, kwonlyargcount, flags, argnames, freevars, cellvars, docstring`` and
    ``varnames``) comes from ``template``. Local slots keep the template's ``co_varnames`` order
    (after ``argnames``), so frame layouts match; new locals are appended. The stack size is
    computed. ``LOAD_CONST`` accepts any Python object (the result is never marshalled).
    """
    unknown = set(replace) - set(_ATTRS) - {"varnames"}
    if unknown:
        raise TypeError(f"make_code: unknown keys {sorted(unknown)}")
    items, protected = _protect_consts(instructions)
    bc = _bc.Bytecode(items)
    defaults = {
        "name": template.co_name,
        "qualname": template.co_qualname,
        "filename": template.co_filename,
        "first_lineno": template.co_firstlineno,
        "argcount": template.co_argcount,
        "posonlyargcount": template.co_posonlyargcount,
        "kwonlyargcount": template.co_kwonlyargcount,
        "flags": template.co_flags,
        "argnames": list(arg_names(template)),
        "freevars": list(template.co_freevars),
        "cellvars": list(template.co_cellvars),
        # as bytecode.Bytecode.from_code does: a leading str constant is the docstring
        "docstring": template.co_consts[0] if template.co_consts and isinstance(template.co_consts[0], str) else _bc.UNSET,
    }
    defaults.update(replace)
    for attr in _ATTRS:
        value = defaults[attr]
        if attr == "flags":
            value = _bc.CompilerFlags(value)
        elif attr in ("argnames", "freevars", "cellvars"):
            value = list(value)
        setattr(bc, attr, value)
    # bytecode numbers local slots argnames-first, then by first use. Seeding argnames with
    # the whole wanted layout keeps template slots where they were.
    varnames = list(replace.get("varnames", template.co_varnames if "argnames" not in replace else ()))
    argnames = list(defaults["argnames"])
    bc.argnames = argnames + [v for v in varnames if v not in argnames]
    stacksize = _straight_line_stacksize(items, int(defaults["flags"]))
    if stacksize is None:
        code = bc.to_code()
    else:  # (the control-flow graph bytecode builds for this was a tenth of a deep model's first call)
        code = bc.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    if protected:
        consts = tuple(c.value if isinstance(c, _ConstSlot) else c for c in code.co_consts)
        code = code.replace(co_consts=consts)
    code = versions.finish_code(code, template)
    check_slots(code)
    return code


def check_slots(code: types.CodeType) -> None:
    """Each name has one frame slot: a free variable is never also a local or a cell (a local
    that is also a cell shares its slot: CPython makes them for arguments and, on 3.12+, for
    the variables of inlined comprehensions). CPython does not check this; code that breaks
    it crashes the interpreter (3.13 did), so it must not be made."""
    free, cells, local = set(code.co_freevars), set(code.co_cellvars), set(code.co_varnames)
    bad = free & (local | cells)
    if bad or len(free) != len(code.co_freevars) or len(cells) != len(code.co_cellvars):
        raise ValueError(f"{code.co_qualname}: generated code gives {sorted(bad) or 'a name'} two frame slots")


# --- functions -----------------------------------------------------------------------------


def make_function(
    code: types.CodeType,
    globals: dict,
    name: str | None = None,
    defaults: tuple | None = None,
    closure: tuple | None = None,
    kwdefaults: dict | None = None,
    qualname: str | None = None,
) -> types.FunctionType:
    """``types.FunctionType`` plus kwdefaults and qualname, with a closure-size check."""
    if len(closure or ()) != len(code.co_freevars):
        raise ValueError(
            f"{code.co_name} needs {len(code.co_freevars)} closure cells, got {len(closure or ())}"
        )
    fn = types.FunctionType(code, globals, name or code.co_name, defaults, closure)
    if kwdefaults:
        fn.__kwdefaults__ = dict(kwdefaults)
    fn.__qualname__ = qualname or code.co_qualname
    return fn


@functools.lru_cache(maxsize=256)
def _binder_template(nposonly: int, nposkw: int, nkwonly: int, varargs: bool, varkw: bool) -> types.CodeType:
    # Placeholder names only: the shape comes from counts, never from user strings.
    n = nposonly + nposkw + nkwonly + varargs + varkw
    names = [f"_{i}" for i in range(n)]
    pos = names[: nposonly + nposkw]
    kwonly = names[nposonly + nposkw : nposonly + nposkw + nkwonly]
    rest = names[nposonly + nposkw + nkwonly :]
    params = list(pos[:nposonly])
    if nposonly:
        params.append("/")
    params += pos[nposonly:]
    if varargs:
        params.append("*" + rest[0])
    elif nkwonly:
        params.append("*")
    params += kwonly
    if varkw:
        params.append("**" + rest[-1])
    body = "(" + "".join(name + ", " for name in names) + ")"
    src = f"def binder({', '.join(params)}):\n    return {body}\n"
    ns: dict = {}
    exec(compile(src, "<binder>", "exec"), ns)
    code = ns["binder"].__code__
    assert code.co_varnames == tuple(names), (code.co_varnames, names)
    return code


def make_binder(
    code: types.CodeType, defaults: tuple | None = None, kwdefaults: dict | None = None
) -> types.FunctionType:
    """A function with ``code``'s exact signature returning its argument slots as a tuple.

    ``binder(*args, **kwargs)`` binds like the real function would (same TypeErrors, naming
    the real function) and returns the values of ``co_varnames[:arg_count(code)]``.
    """
    flags = code.co_flags
    template = _binder_template(
        code.co_posonlyargcount,
        code.co_argcount - code.co_posonlyargcount,
        code.co_kwonlyargcount,
        bool(flags & _CO_VARARGS),
        bool(flags & _CO_VARKEYWORDS),
    )
    bcode = template.replace(
        co_varnames=arg_names(code),
        co_name=code.co_name,
        co_qualname=code.co_qualname,
        co_filename=code.co_filename,
        co_firstlineno=code.co_firstlineno,
    )
    return make_function(bcode, {}, code.co_name, defaults, None, kwdefaults, code.co_qualname)
