"""Errors the tracer raises internally and the one users see.

`Unsupported` is the normal way tracing stops: something the interpreter cannot prove or
model. It carries a reason and the user-facing location so that fallbacks, `explain` and
`fullgraph=True` can all say exactly what broke and where.
"""


class StockLeaf(BaseException):
    """A stock torch.nn module's forward could not be traced (config.inline_stock_modules):
    convert_frame traces the frame again with that module as a leaf, one call_module node,
    instead of breaking the graph there. A BaseException, so that no handler of the
    translator takes it for an exception of the traced program."""

    def __init__(self, module, cause):
        super().__init__(f"{type(module).__name__} kept as a leaf: {cause}")
        self.key = type(module)  # (its other instances would fail alike: one trace again)
        self.cause = cause


class TraceAgain(BaseException):
    """The trace changed real state on purpose, as the call it models does on its first run (a
    lazy module materialised its parameters at its first call): what the trace read before is
    stale, so convert_frame interprets the frame again from its start. A BaseException, for
    the same reason as StockLeaf."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


class Unsupported(Exception):
    """Tracing cannot continue here; the frame (or, later, the rest of it) runs as Python."""

    def __init__(self, reason, *, location=None, breakable=True):
        super().__init__(reason)
        self.reason = reason
        self.breakable = breakable  # False: the whole frame runs as Python, no graph break
        self.location = location  # "file:line" of the user instruction, filled by the translator
        self.user_stack = []      # [(filename, lineno, function name)], outermost first
        self.root_step = None     # index of the root-frame step that failed (graph breaks)
        self.root_inst = None     # that root-frame instruction
        self.saw_every_call = False  # the failed trace ran every call its code can make (trace/coverage.py)
        self.sizes_from_data = False  # an op whose output size depends on tensor data (nonzero, nms):
                                      # the break's results get dynamic sizes (rewrite/handoff.py)
        self.root_calls = []  # handoff.root_call_dims of the failed trace: the frame runs as Python

    def __str__(self):
        where = f" at {self.location}" if self.location else ""
        return f"{self.reason}{where}"


class UserException(Unsupported):
    """The traced user code raises `exc_type` at this point (an attribute that does not exist,
    a `raise` statement). Python code that catches it without a try block — getattr with a
    default, hasattr — catches it symbolically; anywhere else it is a graph break like any
    Unsupported, and the instruction then raises natively, in the user's own frame."""

    def __init__(self, exc_type, reason, value=None, fresh=False):
        super().__init__(reason)
        self.exc_type = exc_type
        self.value = value  # the ExceptionVariable raised, when the traced code built one
        self.fresh = fresh  # raised by an operation: takes the handled exception as __context__


class FullGraphError(RuntimeError):
    """Raised to the user when fullgraph=True and the frame could not be captured whole."""


class BackendError(RuntimeError):
    """A backend raised or returned something that is not a callable."""


class GraphRunWarning(UserWarning):
    """A compiled graph raised where the same frame run as Python did not: the frame's answer
    is Python's (rewrite/rerun.py), and the backend's compiled graph (or the tracer) is at
    fault. Shown once per frame and exception type; tracer.stats() lists every rerun."""


def unsupported(reason):
    raise Unsupported(reason)
