"""Exceptions raised and handled inside traced code, and the "exception being handled" state.

`ExceptionVariable` is a builtin exception object made by the traced code (or by an
operation that raises: a missing key, an index out of range). It keeps what Python keeps
on a raised exception: args, `__cause__` (`raise ... from`), `__context__` (the exception
being handled when it was raised, in an `except` or `finally` block) and
`__suppress_context__`, and it is rebuilt with exactly those after the graph
(`make_exception`), so a chain read later, natively, is Python's chain.

CPython keeps the handled exception per thread (and one per running generator): PUSH_EXC_INFO
saves the previous one on the value stack and makes the caught one current, POP_EXCEPT
restores it, a bare `raise` re-raises it, and a new raise takes it as `__context__`. The
trace models exactly that: `TraceContext.exc_stack` (one entry for plain frames, one more
per running generator; the current exception is the innermost that is not None), and the
value PUSH_EXC_INFO pushes is an `ExcInfoSlot`, which at a graph break re-establishes the
handled exception in the rewritten frame and in the resume function (graph_break.py).
"""
import functools
import inspect
import sys
import types

from ..exc import Unsupported, UserException
from ..runtime.policy import TRACEBACK_STAND_IN
from .base import ConstantVariable, Variable, is_constant_value
from guards import QueryMatch


def is_builtin_exception(cls):
    return isinstance(cls, type) and issubclass(cls, BaseException) and cls.__module__ == "builtins"


# The only dunder names a user's exception class may define for its instances to be modelled
# as the builtin one they derive from (args, chaining, str() as BaseException's): bookkeeping
# of any class. Any other dunder (__init__, __str__, __bool__, __del__, ...) and any name that
# shadows one of BaseException's (`args`, `with_traceback`, `add_note`) changes the instances.
_CLASS_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                                "__annotations__", "__firstlineno__", "__static_attributes__",
                                "__orig_bases__", "__parameters__", "__annotate__", "__annotate_func__",
                                "__annotations_cache__"})


def is_modelled_exception(cls):
    """A builtin exception class, or a user's subclass of one that adds nothing its instances
    do (`class Exc(ValueError): pass`, a docstring, class attributes and methods): raising,
    catching, chaining and rebuilding it are the builtin's."""
    if is_builtin_exception(cls):
        return True
    if not (isinstance(cls, type) and issubclass(cls, BaseException) and type(cls) is type):
        return False
    return all(_adds_nothing(name) for k in cls.__mro__ if k.__module__ != "builtins" for name in vars(k))


def _adds_nothing(name):
    if name.startswith("__") and name.endswith("__"):
        return name in _CLASS_BOOKKEEPING
    return not hasattr(BaseException, name)


class ExceptionVariable(Variable):
    """A builtin exception made in the traced code, e.g. `IndexError("...")` before a raise.

    Raising it is a symbolic `UserException`: a handler in traced code catches it
    (handlers/exceptions.py); uncaught, the frame breaks and the raise runs natively."""

    mutable = True  # one object: rebuilt once, so a chain or a re-raise keeps its identity

    def __init__(self, cls, args):
        super().__init__(None)
        self.cls, self.args = cls, list(args)
        self.cause = None             # `raise ... from cause`: an ExceptionVariable or None
        self.context = None           # the exception handled when this one was raised
        self.suppress_context = False
        self.tb_line = None           # caught in the traced frame itself: the line it was raised at

    def python_type(self):
        return self.cls

    def truthy(self, tx):
        return True

    def getattr(self, tx, name):
        if name == "args":
            return containers.TupleVariable(self.args)
        if name == "__cause__":
            return self.cause or ConstantVariable(None)
        if name == "__context__":
            if isinstance(self.context, OuterException):
                self.context = self.context.resolve(tx)
            return self.context or ConstantVariable(None)
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "__class__":
            return objects.ClassVariable(self.cls)
        if name == "__traceback__":
            return TracebackVariable()
        if name == "value" and issubclass(self.cls, StopIteration):
            return self.args[0] if self.args else ConstantVariable(None)
        found = inspect.getattr_static(self.cls, name, None) if self.cls.__module__ != "builtins" else None
        if is_constant_value(found) and found is not None:  # a user class's constant attribute
            return objects.ClassVariable(self.cls).getattr(tx, name)
        raise Unsupported(f"attribute {name!r} of a {self.cls.__name__} being raised")

    def setattr(self, tx, name, value):
        if name == "__traceback__" and (_is_none(value) or isinstance(value, TracebackVariable)):
            return  # tracebacks are not modelled: a rebuilt exception gets its own when raised
        if name == "__cause__":
            self.cause = None if _is_none(value) else value
            self.suppress_context = True
        elif name == "__context__":
            self.context = None if _is_none(value) else value
        elif name == "__suppress_context__":
            self.suppress_context = bool(value.as_constant())
        else:
            raise Unsupported(f"setting attribute {name!r} of a {self.cls.__name__}")

    def reconstruct(self, cg):
        none = ConstantVariable(None)
        cg.call_with(make_exception, [ConstantVariable(self.cls), containers.TupleVariable(self.args), self.cause or none,
                                      self.context or none, ConstantVariable(self.suppress_context),
                                      ConstantVariable(self.tb_line)])

    def __repr__(self):
        return f"Exception({self.cls.__name__})"


class TracebackVariable(Variable):
    """The traceback of a symbolic exception (what `__exit__` receives, `e.__traceback__`): it
    can be passed on (gen.throw, `exc.__traceback__ = tb`) and is not None; anything that
    would read it is Unsupported."""

    def python_type(self):
        import types
        return types.TracebackType

    def truthy(self, tx):
        return True

    def reconstruct(self, cg):
        raise Unsupported("the traceback of an exception raised in the traced frame escapes it")

    def __repr__(self):
        return "Traceback()"


def make_exception(cls, args, cause, context, suppress_context, tb_line=None):
    """The real exception for an ExceptionVariable, with its chain as traced. One caught by
    the traced frame gets a traceback of that frame at the line it was raised at (the caller's
    frame: the rewritten code or its resume function), so that a handler's
    `logger.exception()` or `traceback.format_exc()` after a graph break prints it as eager
    does. Entries of inlined callees have no frame to point at: they are left out."""
    exc = cls(*args)
    exc.__cause__ = cause
    exc.__context__ = context
    exc.__suppress_context__ = suppress_context
    if tb_line is not None:
        code = sys._getframe(1).f_code
        frame = _stand_in(code.co_filename, code.co_name)().gi_frame
        exc.__traceback__ = types.TracebackType(None, frame, -1, tb_line)  # (-1: no instruction, the line)
    return exc


def _never_run():
    yield


@functools.lru_cache(maxsize=256)
def _stand_in(filename, name):
    """A generator function whose (never started) frame names the user's file and function
    and holds nothing, not even a caller: the rebuilt exception's traceback points at it.
    (The rewritten frame itself would hold the exception in a temporary, a cycle; any frame
    that ran would keep its callers, the user's frame and its tensors, alive through f_back,
    where eager frees them at once.)"""
    code = _never_run.__code__.replace(co_filename=filename, co_name=name, co_qualname=TRACEBACK_STAND_IN)
    return types.FunctionType(code, {})


def _is_none(var):
    return var.is_constant() and var.as_constant() is None


class OuterException(Variable):
    """The exception the *caller* of the traced frame is handling (the frame may be called
    from an `except` block): unknown until the trace needs it, then guarded to be none."""

    def resolve(self, tx):
        """None, guarded: this frame is not called while an exception is being handled."""
        if tx.ctx.handled_at_entry is not None:
            raise Unsupported("the frame runs while its caller handles an exception, and reads it")
        tx.guard(QueryMatch(no_exception_handled, (), (), True))
        return None

    def reconstruct(self, cg):
        cg.call_with(outer_handled, [])

    def __repr__(self):
        return "OuterException()"


def no_exception_handled():
    return sys.exc_info()[1] is None


class ExcInfoSlot(Variable):
    """What PUSH_EXC_INFO leaves below the caught exception: the previously handled
    exception (`prev`, restored by POP_EXCEPT), and the exception made current (`exc`).
    Rebuilt at a graph break as `exc`: the resume code enters the handler again with it
    (bytecode_utils.resume STACK_EXC_INFO), which pushes the real previous exception."""

    def __init__(self, prev, exc):
        super().__init__(None)
        self.prev, self.exc = prev, exc

    def reconstruct(self, cg):
        cg.reconstruct(self.exc)

    def __repr__(self):
        return f"ExcInfo(prev={self.prev!r}, current={self.exc!r})"


def handled_exception(tx, resolve=True):
    """The exception a bare `raise` re-raises / a new exception takes as __context__: the
    innermost handled one (generators first, then the thread's), or None. Past the traced
    frame's own handlers lies the caller's (OuterException): resolved (guarded to be none)
    when `resolve`, else returned as is, a marker the rebuilt exception reads natively."""
    stack = tx.ctx.exc_stack
    for i in range(len(stack) - 1, -1, -1):
        v = stack[i]
        if isinstance(v, OuterException):
            if not resolve:
                return v
            stack[i] = v = v.resolve(tx)
        if v is not None:
            return v
    return None


def set_context(tx, exc):
    """What CPython does when `exc` is raised: the handled exception becomes its __context__
    (not itself; a chain that already contains exc is cut there, as CPython does)."""
    handled = handled_exception(tx, resolve=False)
    if handled is None or handled is exc:
        return
    o, seen = handled, set()
    while isinstance(o, ExceptionVariable) and id(o) not in seen:  # (a chain may already be a
        seen.add(id(o))                                                # cycle: CPython stops too)
        if o.context is exc:
            o.context = None
            break
        o = o.context
    exc.context = handled


def outer_handled():
    """At run time, in the rewritten frame: the exception its caller is handling."""
    return sys.exc_info()[1]


# ---- the exceptions traced code raises, as CPython raises them -----------------------------

def attribute_error(type_name, name):
    """The AttributeError CPython raises for a missing attribute, with CPython's message."""
    message = f"{type_name!r} object has no attribute {name!r}"
    return UserException(AttributeError, f"{message} (the user code raises AttributeError)",
                         ExceptionVariable(AttributeError, [ConstantVariable(message)]), fresh=True)


def hasattr_by_getattr(tx, var, name):
    """`hasattr(var, name)` as CPython answers it: the traced `getattr` succeeds (True) or
    raises AttributeError (False, its guards saying the attribute is missing); any other
    exception is the user's."""
    try:
        var.getattr(tx, name)
        return True
    except UserException as e:
        if not issubclass(e.exc_type, AttributeError):
            raise
        return False


def user_error(exc_type, *args):
    """`exc_type(*args)` raised by the traced user code (e.g. IndexError for a list index out
    of range, KeyError for a missing key), catchable by a try block in traced code."""
    shown = ", ".join(repr(a) for a in args)
    return UserException(exc_type, f"{exc_type.__name__}({shown}) (the user code raises it)",
                         ExceptionVariable(exc_type, [ConstantVariable(a) for a in args]), fresh=True)


def folding_error(e, what):
    """What the tracer raises when folding `what` on constants raised `e`: the same exception,
    raised by the traced user code (a UserException, catchable by a traced `try`), when it is
    a builtin exception with constant arguments; otherwise Unsupported (a graph break: the
    instruction then raises natively, inside the user's handlers)."""
    cls = type(e)
    if cls.__module__ == "builtins" and isinstance(e, Exception) and all(is_constant_value(a) for a in e.args):
        return user_error(cls, *e.args)
    return Unsupported(f"{what} raises {cls.__name__} (the user code raises it)")


def user_errors(op, what):
    """`op()`, a real operation on plain values that stand for the user's (a list of Variables
    indexed, sliced, repeated): what it raises, the user's code raises there too, so it is the
    user's exception (folding_error), never an error of the tracer. `op` must call no
    Variable's method: an Unsupported it raised would lose its own reason."""
    try:
        return op()
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - the user's operation raises it
        raise folding_error(e, what) from None


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, objects  # noqa: E402
