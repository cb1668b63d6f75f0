"""Errors the tracer raises internally and the one users see.

`Unsupported` is the normal way tracing stops: something the interpreter cannot prove or
model. It carries a reason and the user-facing location so that fallbacks, `explain` and
`fullgraph=True` can all say exactly what broke and where.
"""


class Unsupported(Exception):
    """Tracing cannot continue here; the frame (or, later, the rest of it) runs as Python."""

    def __init__(self, reason, *, location=None):
        super().__init__(reason)
        self.reason = reason
        self.location = location  # "file:line" of the user instruction, filled by the translator
        self.user_stack = []      # [(filename, lineno, function name)], outermost first
        self.root_step = None     # index of the root-frame step that failed (graph breaks)
        self.root_inst = None     # that root-frame instruction

    def __str__(self):
        where = f" at {self.location}" if self.location else ""
        return f"{self.reason}{where}"


class FullGraphError(RuntimeError):
    """Raised to the user when fullgraph=True and the frame could not be captured whole."""


class BackendError(RuntimeError):
    """A backend raised or returned something that is not a callable."""


def unsupported(reason):
    raise Unsupported(reason)
