"""`with` blocks and exception opcodes.

In 3.11 `with` compiles to BEFORE_WITH plus an exception-table entry. Tracing follows the
normal (no exception) path: BEFORE_WITH calls __enter__ and pushes the bound __exit__;
the block's end calls it with (None, None, None). Handlers reached only when an exception
is raised (PUSH_EXC_INFO, WITH_EXCEPT_START, ...) are never executed symbolically because
traced code does not raise; a `raise` is Unsupported (graph breaks come in a later issue).
"""
from ..exc import Unsupported
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


@handler("RAISE_VARARGS")
def RAISE_VARARGS(f, inst):
    raise Unsupported("raise statement (the user code raises an exception)")


def _never(f, inst):
    raise Unsupported(f"{inst.opname}: exception handling path reached while tracing")


for _name in ("PUSH_EXC_INFO", "POP_EXCEPT", "RERAISE", "CHECK_EXC_MATCH", "CHECK_EG_MATCH",
              "WITH_EXCEPT_START", "PREP_RERAISE_STAR"):
    handler(_name)(_never)
