"""Resume functions: "the rest of a frame, from instruction N", as a new code object.

At a graph break the rewritten frame runs the graph, executes the unsupported instruction
natively, and hands the live stack and live locals to a resume function. The resume code is
the *original* instruction stream, unchanged, with a short prefix after the prologue that
pushes the saved stack (arguments, or NULLs where the frame had a NULL), optionally the
`lasti` and the exception an exception handler expects, and jumps to instruction N. Keeping
the original stream keeps its exception table, so enclosing `try`/`with` blocks and `for`
iterators are re-established exactly as the compiler laid them out.
"""
from __future__ import annotations

import types

import bytecode as _bc

from . import versions
from .codegen import GENERATOR_FLAGS, check_slots
from .instructions import PerCode
from .instructions import decode, to_bytecode


CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
CO_NEWLOCALS = 0x02
CO_OPTIMIZED = 0x01

STACK_ARG = "arg"
STACK_NULL = "null"
STACK_EXC_INFO = "exc_info"  # the slot PUSH_EXC_INFO leaves in an except/finally body


def stack_arg_name(i: int) -> str:
    return f"___stack{i}"


EXC_ARG = "___exc"


def super_self_name(code: types.CodeType) -> str | None:
    """The local a zero-argument `super()` reads in this code (CPython takes the frame's first
    local and the `__class__` cell), or None when the code cannot call it."""
    if "__class__" in code.co_freevars and code.co_argcount and code.co_varnames:
        return code.co_varnames[0]
    return None


def resume_arg_order(code: types.CodeType, args: list[str]) -> list[str]:
    """Resume arguments in signature order: the `super()` self local, when passed, comes
    first, so zero-argument `super()` in the resume function sees the same object."""
    first = super_self_name(code)
    if first is None or first not in args:
        return list(args)
    return [first] + [a for a in args if a != first]


def _into_line(items, real, target, lineno):
    """"" when the target starts its line's run of instructions, else "+k" (k instructions into
    it): two breaks on one line (`print(f"{loss.item()}")`: the .item(), then the print) make
    two resume functions, which must not share a name in the reports."""
    k = target
    while k > 0 and items[real[k - 1]].lineno in (lineno, None):
        k -= 1
    return f"+{target - k}" if target > k else ""


def _keep_try_depths(code, items):
    """Set each TryBegin's stack depth from the compiler's exception table, since the dead
    prefix of the stream makes flow-based recomputation impossible."""
    decoded = decode(code)
    n_real = 0
    pending = []
    for item in items:
        if isinstance(item, _bc.TryBegin):
            pending.append(item)
        elif isinstance(item, _bc.Instr):
            for tb in pending:
                entry = decoded[n_real].exn
                if entry is None:
                    raise ValueError("try-region start not covered by the exception table")
                tb.stack_depth = entry.depth
            pending = []
            n_real += 1


# Instructions on a local slot that the bytecode package decodes by name, which 3.12+ also
# use on a cell's slot (a closure tuple's load, an inlined comprehension's save and restore)
_BY_SLOT_NAME = frozenset({"LOAD_FAST", "LOAD_FAST_AND_CLEAR", "STORE_FAST", "LOAD_FAST_CHECK"})


def _cells_as_free_vars(code, items):
    """The frame's cell variables become free variables of the resume code: the resume
    function is made with the running frame's cells as its closure, so it shares them with
    every closure made before the break (a store on either side is seen by the other)."""
    if not code.co_cellvars:
        return items
    cells = set(code.co_cellvars)
    closure_names = cells | set(code.co_freevars)
    n_free = len(code.co_freevars) + len(code.co_cellvars)
    out, copied = [], False
    seen_resume = False
    for ins in items:
        if isinstance(ins, _bc.Instr):
            if ins.name == "RESUME":
                seen_resume = True
            if ins.name == "MAKE_CELL" and not seen_resume:
                continue  # (the prologue's: the closure brings the frame's cells)
            if ins.name == "MAKE_CELL":
                # 3.12+ inline a comprehension whose variable is a cell: its body makes a
                # fresh cell in the variable's slot (restored after the loop), here a free one
                ins = _bc.Instr("MAKE_CELL", _bc.FreeVar(ins.arg.name), lineno=ins.lineno)
            if ins.name == "COPY_FREE_VARS":
                ins = _bc.Instr("COPY_FREE_VARS", n_free, lineno=ins.lineno)
                copied = True
            elif isinstance(ins.arg, _bc.CellVar) and ins.arg.name in cells:
                ins = _bc.Instr(ins.name, _bc.FreeVar(ins.arg.name), lineno=ins.lineno)
            elif ins.name in _BY_SLOT_NAME and isinstance(ins.arg, str) and ins.arg in closure_names:
                # 3.13+ load a cell for a closure tuple with LOAD_FAST of its slot (after
                # versions.relocatable: 3.14's borrowed loads are plain ones), which the
                # bytecode package decodes by name: kept so, the name would become a second
                # (local) slot of the resume code beside the free variable (a crash on 3.13);
                # so do an inlined comprehension's save, store and restore of a cell's slot
                ins = versions.slot_of_cell(ins.name, ins.arg, lineno=ins.lineno)
        out.append(ins)
    if not copied:
        first = next(i for i, ins in enumerate(out) if isinstance(ins, _bc.Instr))
        out.insert(first, _bc.Instr("COPY_FREE_VARS", n_free, lineno=out[first].lineno))
    return out


def make_resume_code(code: types.CodeType, target: int, stack: list[str], local_args: list[str],
                     *, lasti: int | None = None, push_exc: bool = False) -> types.CodeType:
    """Build resume code for `code` starting at decoded instruction index `target`.

    stack: one entry per stack slot, bottom first: STACK_ARG (passed as an argument) or
    STACK_NULL (the NULL of a call's layout, pushed by the prefix), or STACK_EXC_INFO (the
    slot of an exception handler being run: the exception it handles is passed, and the
    prefix enters the handler again with PUSH_EXC_INFO, so the resume code has it as its
    handled exception and the slot holds the real previous one, which POP_EXCEPT restores).
    local_args: names of the original locals passed in (after the stack arguments).
    lasti/push_exc: for resuming at an exception handler: push the int `lasti` (when the
    exception-table entry asks for it) and the exception, passed as argument `___exc`.
    Signature: (___stack<i> for each STACK_ARG slot..., [___exc], *local_args), flat.
    """
    if code.co_flags & GENERATOR_FLAGS:
        raise ValueError("resume functions are only made for plain function frames")
    bc = to_bytecode(code)
    items = list(bc)
    real = [i for i, ins in enumerate(items) if isinstance(ins, _bc.Instr)]
    originals = {id(items[i]): k for k, i in enumerate(real)}
    _keep_try_depths(code, items)
    target_pos = real[target]
    resume_pos = next(i for i in real if items[i].name == "RESUME")
    # the first source line at or after the target (handler entries often have none)
    lineno = next((i.lineno for i in items[target_pos:] if isinstance(i, _bc.Instr) and i.lineno),
                  code.co_firstlineno)
    label = _bc.Label()
    prefix, stack_args = _push_stack(stack, lineno)
    if lasti is not None:
        prefix.append(_bc.Instr("LOAD_CONST", lasti, lineno=lineno))
    if push_exc:
        prefix += _take_arg(EXC_ARG, lineno)
    prefix.append(_bc.Instr("JUMP_FORWARD", label, lineno=lineno))
    new_items = items[:resume_pos + 1] + prefix + items[resume_pos + 1:target_pos] + [label] + items[target_pos:]
    # (before index_map is built: 3.13 splits superinstructions here, which shifts the
    # indices of every instruction after them; the split halves map to nothing. And before
    # the cells are made free variables: the split loads name the cells they load.)
    new_items = _cells_as_free_vars(code, versions.relocatable(new_items))
    args = resume_arg_order(code, stack_args + ([EXC_ARG] if push_exc else []) + list(local_args))
    if len(set(args)) != len(args):
        raise ValueError(f"duplicate resume arguments {args}")
    base = code.co_qualname.split(".<resume@")[0]  # a resume of a resume keeps one suffix
    out = _continuation(code, new_items, args, f"{base}.<resume@{lineno}{_into_line(items, real, target, lineno)}>")
    # The skipped prefix of the original stream is dead code now, so the stack depths of its
    # try-regions cannot be recomputed by flow: keep the compiler's (from_code read them from
    # co_exceptiontable). The stack at the target is the original's, so its size suffices.
    new = versions.finish_code(out.to_code(stacksize=code.co_stacksize + len(stack) + 2,
                                           compute_exception_stack_depths=False), code)
    check_slots(new)
    index_map = {j: originals[id(ins)] for j, ins in enumerate(i for i in new_items if isinstance(i, _bc.Instr))
                 if id(ins) in originals}
    root = _ORIGIN.get(code)
    if root is not None:  # (made from a resume code: map through it to the first one)
        index_map = {j: root[1][k] for j, k in index_map.items() if k in root[1]}
    _ORIGIN[new] = (root[0] if root is not None else code, index_map)
    _TARGET[new] = target if root is None else root[1].get(target)
    return new


_ORIGIN = PerCode()
_TARGET = PerCode()


def resume_target(code: types.CodeType):
    """The instruction index, in the original code, where resume code `code` starts (None
    when it is not resume code or the place is not known)."""
    return _TARGET.get(code)


def resume_origin(code: types.CodeType):
    """(the original code object, {instruction index here: index there}) for resume code
    made by make_resume_code, else None. A break inside a resume function resumes from the
    original code (same target, same layout: the same cached resume code), so a loop that
    breaks on every iteration reuses one resume function instead of nesting a new one each
    time."""
    return _ORIGIN.get(code)


def make_generator_resume_code(code: types.CodeType, target: int, stack: list[str],
                               local_args: list[str], *, suspended: bool) -> types.CodeType:
    """Code that rebuilds a generator the tracer ran symbolically, at the point it reached.

    `suspended`: the generator stopped at the `yield` just before decoded instruction `target`
    (that yield's RESUME). The code is the original stream behind a prefix that pushes the
    saved stack and yields once, covered by the original yield's exception-table entry; the
    rebuild calls next() once to reach that yield ("priming"), after which the generator is
    suspended exactly where the traced one was: next()/send(v) continue at `target` + 1 with
    the value sent, throw()/close() raise into the user's own try/finally/with handlers.
    Not suspended (never started): the prefix jumps to `target`, nothing runs until the
    first next(). Signature: (___stack<i>..., *local_args), flat; cell variables are free
    variables (the rebuild passes the cells)."""
    bc = to_bytecode(code)
    items = list(bc)
    real = [i for i, ins in enumerate(items) if isinstance(ins, _bc.Instr)]
    _keep_try_depths(code, items)
    resume_pos = next(i for i in real if items[i].name == "RESUME")
    lineno = next((i.lineno for i in items[real[target]:] if isinstance(i, _bc.Instr) and i.lineno),
                  code.co_firstlineno)
    prefix, stack_args = _push_stack(stack, lineno)
    label = _bc.Label()
    continue_at = real[target + 1] if suspended else real[target]
    if suspended:
        yield_pos = real[target - 1]
        if items[yield_pos].name != "YIELD_VALUE":
            raise ValueError("a suspended generator resumes after a YIELD_VALUE")
        covering = _covering_try(items, yield_pos)
        # the original yield's own instructions (their args differ by version: 3.12 records
        # the exception-block depth in YIELD_VALUE, 3.13 RESUME's location bits)
        yield_ins, resume_ins = items[yield_pos], items[real[target]]
        priming = [_bc.Instr("LOAD_CONST", None, lineno=lineno),
                   _bc.Instr("YIELD_VALUE", yield_ins.arg, lineno=lineno) if yield_ins.require_arg()
                   else _bc.Instr("YIELD_VALUE", lineno=lineno),
                   _bc.Instr("RESUME", resume_ins.arg, lineno=lineno)]
        if covering is not None:
            tb = _bc.TryBegin(covering.target, push_lasti=covering.push_lasti,
                              stack_depth=decode(code)[target - 1].exn.depth)
            priming = [tb, *priming[:2], _bc.TryEnd(tb), priming[2]]
        prefix += priming
    prefix.append(_bc.Instr("JUMP_FORWARD", label, lineno=lineno))
    body = items[resume_pos + 1:continue_at] + [label] + items[continue_at:]
    if any(isinstance(i, _bc.TryBegin) for i in prefix):
        prefix, body = _outside_open_region(items[:resume_pos + 1], prefix, body)
    new_items = items[:resume_pos + 1] + prefix + body
    new_items = _cells_as_free_vars(code, versions.relocatable(new_items))
    args = stack_args + list(local_args)
    if len(set(args)) != len(args):
        raise ValueError(f"duplicate resume arguments {args}")
    # (the rebuilt generator shows the original's name)
    out = _continuation(code, new_items, args, code.co_qualname)
    new = versions.finish_code(out.to_code(stacksize=code.co_stacksize + len(stack) + 3,
                                           compute_exception_stack_depths=False), code)
    check_slots(new)
    return new


def _push_stack(stack, lineno):
    """(instructions that rebuild the saved stack, names of the stack arguments): one slot per
    `stack` kind, bottom first (see make_resume_code)."""
    prefix, stack_args = [], []
    for i, kind in enumerate(stack):
        if kind == STACK_NULL:
            prefix.extend(versions.push_null(lineno=lineno))
        else:
            name = stack_arg_name(i)
            stack_args.append(name)
            prefix += _take_arg(name, lineno)
            if kind == STACK_EXC_INFO:
                prefix += [_bc.Instr("PUSH_EXC_INFO", lineno=lineno), _bc.Instr("POP_TOP", lineno=lineno)]
    return prefix, stack_args


def _take_arg(name, lineno):
    """Push argument `name` and clear its slot: in the original frame the value was only on
    the stack, so it must not live on in a local of the rest of the frame (an exception in
    one would hold its own traceback's frame, a cycle that keeps every local alive until the
    next cyclic collection; an iterator or tensor would outlive its use)."""
    return [_bc.Instr("LOAD_FAST", name, lineno=lineno), _bc.Instr("DELETE_FAST", name, lineno=lineno)]


def _continuation(code, items, args, qualname):
    """A Bytecode for code that continues `code` (resume or generator rebuild): the given
    instruction stream, `args` as flat positional arguments, the other locals after them,
    the original's cell variables as free variables (passed in by the caller)."""
    others = [n for n in code.co_varnames if n not in args and n not in code.co_cellvars]
    out = _bc.Bytecode(items)
    out.name = code.co_name
    out.qualname = qualname
    out.filename = code.co_filename
    out.first_lineno = code.co_firstlineno
    out.argcount = len(args)
    out.posonlyargcount = 0
    out.kwonlyargcount = 0
    out.flags = _bc.CompilerFlags((code.co_flags & ~(CO_VARARGS | CO_VARKEYWORDS)) | CO_OPTIMIZED | CO_NEWLOCALS)
    out.argnames = args + others
    out.freevars = list(code.co_freevars) + list(code.co_cellvars)
    out.cellvars = []
    out.docstring = None
    return out


def _outside_open_region(head, prefix, body):
    """(prefix, body) with the prefix taken out of the region open where it is inserted.

    On 3.12+ a generator's whole body, its first RESUME included, lies in the region of its
    own StopIteration handler (PEP 479), so the priming yield's region would open inside it;
    regions do not nest in the `bytecode` package's form (nor in an exception table). The open
    region is ended before the prefix and a copy of it reopened after it, the body's first end
    of that region now ending the copy: the original instructions keep exactly their regions,
    and the prefix only its own."""
    open_tb = _covering_try(head, len(head))
    if open_tb is None:
        return prefix, body
    again = _bc.TryBegin(open_tb.target, push_lasti=open_tb.push_lasti, stack_depth=open_tb.stack_depth)
    end = next((k for k, i in enumerate(body) if isinstance(i, _bc.TryEnd) and i.entry is open_tb), None)
    if end is None:
        raise ValueError("the region open at the generator's RESUME never ends")
    body = [again, *body[:end], _bc.TryEnd(again), *body[end + 1:]]
    return [_bc.TryEnd(open_tb), *prefix], body


def _covering_try(items, pos):
    """The TryBegin whose region covers items[pos] (regions do not nest in this form)."""
    active = None
    for item in items[:pos]:
        if isinstance(item, _bc.TryBegin):
            active = item
        elif isinstance(item, _bc.TryEnd) and item.entry is active:
            active = None
    return active
