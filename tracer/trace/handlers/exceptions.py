"""`with` blocks and exception opcodes.

In 3.11-3.13 `with` compiles to BEFORE_WITH plus an exception-table entry; 3.14 looks the two
methods up with LOAD_SPECIAL and calls __enter__ with an ordinary CALL. Tracing follows the
normal (no exception) path: __enter__ is called and the bound __exit__ stays on the stack;
the block's end calls it with (None, None, None). Handlers reached only when an exception
is raised (PUSH_EXC_INFO, WITH_EXCEPT_START, ...) are never executed symbolically because
traced code does not raise; a `raise` is Unsupported (graph breaks come in a later issue).
"""
import dis

from ...exc import Unsupported, UserException
from ...variables.exceptions import (ExceptionVariable, ExcInfoSlot, handled_exception, is_modelled_exception,
                                     set_context, TracebackVariable, user_error)
from ...variables.base import ConstantVariable, Variable, python_object
from .registry import SINCE_314, UNTIL_313, handler
from ...variables.objects import ClassVariable, special_method
from ...variables.stack_values import NULL, MethodRef, NullVariable
from ...variables.mode_blocks import ModeBlockVariable
from ...variables.torch_vars import ContextManagerVariable, SavedHooksOffVariable, SavedHooksRestore
from bytecode_utils import versions


class ExitVariable(Variable):
    """The bound __exit__ of a context manager entered by BEFORE_WITH."""

    def __init__(self, ctx, exit_fn=None):
        super().__init__(None)
        self.ctx = ctx          # the context manager
        self.exit_fn = exit_fn  # its bound __exit__ (None for the managers modelled directly)

    def call(self, tx, args, kwargs):
        if self.exit_fn is not None:
            return self.exit_fn.call(tx, args, kwargs)
        return self.ctx.call_method(tx, "__exit__", args, kwargs)

    def reconstruct(self, cg):
        """At a graph break inside the block: the manager's real bound __exit__ (for a
        grad-mode one, a real __exit__ that restores the mode; for a mode block, the manager
        entered again: mode_blocks.BlockReentry)."""
        if self.exit_fn is None:
            if isinstance(self.ctx, ModeBlockVariable):
                if self.ctx.node is None:
                    # 3.14+ load __exit__ before calling __enter__: a break at the enter (a
                    # compiling backend's, convert_frame) finds a block not entered yet, whose
                    # manager this code would make twice
                    raise Unsupported(f"a graph break at the entry of a torch.{self.ctx.what}() block")
                return cg.call_with(self.ctx.reentry().enter, [])
            if isinstance(self.ctx, SavedHooksOffVariable):
                return cg.load_const(SavedHooksRestore(self.ctx.prev).__exit__)
            return cg.load_const(GradRestore(self.ctx.prev).__exit__)
        cg.call_with(bound_exit, [self.ctx])


def bound_exit(mgr):
    """type(mgr).__exit__ bound to mgr: what BEFORE_WITH keeps on the stack."""
    return type(mgr).__exit__.__get__(mgr, type(mgr))


class GradRestore:
    """Stands for an entered grad-mode context manager after a graph break."""

    def __init__(self, prev):
        self.prev = prev

    def __exit__(self, *exc_info):
        import torch
        torch._C._set_grad_enabled(self.prev)
        return False


def _with_method(tx, mgr, name):
    """What `with` takes of mgr for `name` (__enter__ or __exit__), None when its type has no
    such method. A grad-mode manager is modelled directly; any other (a class with
    __enter__/__exit__, @contextmanager, nullcontext) has its methods inlined like any call.
    An exit is the ExitVariable the block's end calls and a graph break rebuilds."""
    if isinstance(mgr, ContextManagerVariable):
        return ExitVariable(mgr) if name == "__exit__" else MethodRef(mgr, "__enter__")
    method = special_method(tx, mgr, name)
    return ExitVariable(mgr, method) if method is not None and name == "__exit__" else method


@handler("BEFORE_WITH", versions=UNTIL_313)
def BEFORE_WITH(tx, inst):
    """`with mgr:`: mgr.__enter__() is pushed above its bound __exit__."""
    mgr = tx.pop()
    enter, exit_fn = _with_method(tx, mgr, "__enter__"), _with_method(tx, mgr, "__exit__")
    if enter is None or exit_fn is None:
        raise user_error(TypeError, f"{mgr.python_type().__name__!r} object does not support the "
                                    f"context manager protocol")
    tx.push(exit_fn)
    tx.push(enter.call(tx, [], {}))


@handler("LOAD_SPECIAL", versions=SINCE_314)
def LOAD_SPECIAL(tx, inst):
    """3.14's `with mgr:` is LOAD_SPECIAL __exit__, then LOAD_SPECIAL __enter__ and CALL 0, on
    the same manager. Each pushes a callable and the NULL of a plain call (CPython pushes the
    function and mgr as its self; a bound method and a NULL call the same): the exit is
    the ExitVariable BEFORE_WITH keeps, and a graph break puts the real bound method there."""
    mgr, name = tx.pop(), inst.argrepr
    if name not in ("__enter__", "__exit__"):
        raise Unsupported(f"LOAD_SPECIAL {name} (async with)")
    fn = _with_method(tx, mgr, name)
    if fn is None:
        raise user_error(TypeError, f"{mgr.python_type().__name__!r} object does not support the "
                                    f"context manager protocol (missed {name} method)")
    for value in versions.callable_and_null(fn, NULL):
        tx.push(value)


@handler("WITH_EXCEPT_START", versions=UNTIL_313)
def WITH_EXCEPT_START(tx, inst):
    """In a `with` block's handler: exit(type(exc), exc, traceback), result pushed (true:
    the exception is suppressed). Stack: exit, lasti, previous exception, exception."""
    exc, exit_fn = tx.stack[-1], tx.stack[-4]
    tx.push(exit_fn.call(tx, [ClassVariable(exc.python_type()), exc, TracebackVariable()], {}))


@handler("WITH_EXCEPT_START", versions=SINCE_314)
def WITH_EXCEPT_START_314(tx, inst):
    """As above; 3.14's exit is two entries, [exit, self | NULL] (LOAD_SPECIAL pushes a bound
    exit and a NULL)."""
    exc, exit_fn, self_slot = tx.stack[-1], tx.stack[-5], tx.stack[-4]
    args = [ClassVariable(exc.python_type()), exc, TracebackVariable()]
    tx.push(exit_fn.call(tx, args if isinstance(self_slot, NullVariable) else [self_slot, *args], {}))


# ---- exceptions raised and caught inside traced code ------------------------------------
# A UserException (exc.py) raised at an instruction covered by an exception-table entry of
# the frame jumps to the handler (translator.Frame.run), with the exception pushed as an
# ExceptionVariable. The handler's opcodes below then run symbolically: that is how
# `try: ... except IndexError: ...` around an attribute miss, `raise`, or an old-style
# __getitem__ iteration is traced instead of breaking the graph. The handled exception
# (bare `raise`, __context__) is modelled in variables/exceptions.py.


def exception_value(exc):
    """The Variable a handler sees for a caught UserException."""
    if exc.value is not None:
        return exc.value
    return ExceptionVariable(exc.exc_type, [ConstantVariable(exc.reason)])


def _instance(tx, var):
    """The exception object a `raise` operand stands for (a builtin exception class is
    instantiated with no arguments, as CPython does), or None when it is not modelled."""
    if isinstance(var, ClassVariable) and is_modelled_exception(var.cls):
        return ExceptionVariable(var.cls, [])
    if isinstance(var, ExceptionVariable):
        return var
    return None


@handler("RAISE_VARARGS")
def RAISE_VARARGS(tx, inst):
    if inst.arg == 0:  # bare `raise`: the exception being handled, unchanged
        exc = handled_exception(tx)
        if exc is None:
            raise user_error(RuntimeError, "No active exception to reraise")
        if _instance(tx, exc) is not exc:
            raise Unsupported(f"re-raise of {exc}, which is not modelled")
        raise UserException(exc.cls, f"{exc.cls.__name__} re-raised (the user code raises it)", exc)
    cause = None
    if inst.arg == 2:
        cause_var = tx.stack[-1]
        if not (cause_var.is_constant() and cause_var.as_constant() is None):
            cause = _instance(tx, cause_var)
            if cause is None:
                raise Unsupported(f"raise ... from {cause_var}, which is not modelled")
    exc = _instance(tx, tx.stack[-inst.arg])
    if exc is None:
        raise Unsupported("raise statement (the user code raises an exception)")
    tx.popn(inst.arg)
    if inst.arg == 2:
        exc.cause, exc.suppress_context = cause, True
    set_context(tx, exc)
    raise UserException(exc.cls, f"raise {exc.cls.__name__} (the user code raises it)", exc)


@handler("PUSH_EXC_INFO")
def PUSH_EXC_INFO(tx, inst):
    exc = tx.pop()
    stack = tx.ctx.exc_stack
    tx.push(ExcInfoSlot(stack[-1], exc))  # restored by POP_EXCEPT
    stack[-1] = exc
    tx.push(exc)


@handler("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(tx, inst):
    wanted = python_object(tx.pop())
    exc = tx.stack[-1]
    for cls in wanted if isinstance(wanted, tuple) else (wanted,):
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise user_error(TypeError, "catching classes that do not inherit from BaseException is not allowed")
    tx.push(ConstantVariable(issubclass(exc.python_type(), wanted)))


@handler("POP_EXCEPT")
def POP_EXCEPT(tx, inst):
    slot = tx.pop()
    if not isinstance(slot, ExcInfoSlot):
        raise Unsupported(f"POP_EXCEPT of {slot}")
    tx.ctx.exc_stack[-1] = slot.prev


@handler("RERAISE")
def RERAISE(tx, inst):
    exc = tx.pop()
    if not isinstance(exc, ExceptionVariable):
        raise Unsupported("RERAISE of an exception that is not modelled")
    raise UserException(exc.cls, f"{exc.cls.__name__} re-raised (the user code raises it)", exc)


def _never(tx, inst):
    raise Unsupported(f"{inst.opname}: exception handling path reached while tracing")


for _name in ("CHECK_EG_MATCH", "PREP_RERAISE_STAR"):
    if _name in dis.opmap:  # (PREP_RERAISE_STAR is 3.11 only: an intrinsic since 3.12)
        handler(_name)(_never)
