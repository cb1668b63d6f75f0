"""`with` blocks and exception opcodes.

In 3.11 `with` compiles to BEFORE_WITH plus an exception-table entry. Tracing follows the
normal (no exception) path: BEFORE_WITH calls __enter__ and pushes the bound __exit__;
the block's end calls it with (None, None, None). Handlers reached only when an exception
is raised (PUSH_EXC_INFO, WITH_EXCEPT_START, ...) are never executed symbolically because
traced code does not raise; a `raise` is Unsupported (graph breaks come in a later issue).
"""
from ..exc import Unsupported, UserException
from ..variables.base import ConstantVariable
from ..variables.base import Variable
from . import handler


class ExitVariable(Variable):
    """The bound __exit__ of a context manager entered by BEFORE_WITH."""

    def __init__(self, ctx):
        super().__init__(None)
        self.ctx = ctx

    def call(self, tx, args, kwargs):
        return self.ctx.call_method(tx, "__exit__", args, kwargs)

    def reconstruct(self, cg):
        """At a graph break inside the block: a real __exit__ that restores the mode."""
        cg.load_const(GradRestore(self.ctx.prev).__exit__)


class GradRestore:
    """Stands for an entered grad-mode context manager after a graph break."""

    def __init__(self, prev):
        self.prev = prev

    def __exit__(self, *exc_info):
        import torch
        torch._C._set_grad_enabled(self.prev)
        return False


@handler("BEFORE_WITH")
def BEFORE_WITH(f, inst):
    ctx = f.pop()
    from ..variables.torch_vars import GradModeVariable
    if not isinstance(ctx, GradModeVariable):
        raise Unsupported(f"`with` on {ctx} (only torch.no_grad/enable_grad/set_grad_enabled are traced)")
    f.push(ExitVariable(ctx))
    f.push(ctx.call_method(f, "__enter__", [], {}))


# ---- exceptions raised and caught inside traced code ------------------------------------
# A UserException (exc.py) raised at an instruction covered by an exception-table entry of
# the frame jumps to the handler (translator.Frame.run), with the exception pushed as an
# ExceptionVariable. The handler's opcodes below then run symbolically: that is how
# `try: ... except IndexError: ...` around an attribute miss, `raise`, or an old-style
# __getitem__ iteration is traced instead of breaking the graph. sys.exc_info() inside a
# handler is not modelled (it is Unsupported).


def exception_value(exc):
    """The Variable a handler sees for a caught UserException."""
    from ..variables.objects import ExceptionVariable
    if exc.value is not None:
        return exc.value
    return ExceptionVariable(exc.exc_type, [ConstantVariable(exc.reason)])


@handler("RAISE_VARARGS")
def RAISE_VARARGS(f, inst):
    from ..variables.objects import ClassVariable, ExceptionVariable, is_builtin_exception
    if inst.arg in (1, 2):
        # `raise E` and `raise E from cause`: the cause only matters to a traceback, and an
        # exception that leaves the trace is raised again natively (a graph break), cause and all.
        exc = f.stack[-inst.arg]
        cause = f.stack[-1] if inst.arg == 2 else None
        if isinstance(exc, ClassVariable) and is_builtin_exception(exc.cls):
            exc = ExceptionVariable(exc.cls, [])
        cause_ok = cause is None or isinstance(cause, ExceptionVariable) or \
            (cause.is_constant() and cause.as_constant() is None)
        if isinstance(exc, ExceptionVariable) and cause_ok:
            f.popn(inst.arg)
            raise UserException(exc.cls, f"raise {exc.cls.__name__} (the user code raises it)", exc)
    raise Unsupported("raise statement (the user code raises an exception)")


@handler("PUSH_EXC_INFO")
def PUSH_EXC_INFO(f, inst):
    exc = f.pop()
    f.push(ConstantVariable(None))  # stands for the previously handled exception
    f.push(exc)


@handler("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(f, inst):
    wanted = f.python_object(f.pop())
    exc = f.stack[-1]
    f.push(ConstantVariable(issubclass(exc.python_type(), wanted)))


@handler("POP_EXCEPT")
def POP_EXCEPT(f, inst):
    f.pop()


@handler("RERAISE")
def RERAISE(f, inst):
    from ..variables.objects import ExceptionVariable
    exc = f.pop()
    if not isinstance(exc, ExceptionVariable):
        raise Unsupported("RERAISE of an exception that is not modelled")
    raise UserException(exc.cls, f"{exc.cls.__name__} re-raised (the user code raises it)", exc)


def _never(f, inst):
    raise Unsupported(f"{inst.opname}: exception handling path reached while tracing")


for _name in ("CHECK_EG_MATCH", "WITH_EXCEPT_START", "PREP_RERAISE_STAR"):
    handler(_name)(_never)
