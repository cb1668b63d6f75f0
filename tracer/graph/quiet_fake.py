"""Silence fake tensors' error log for the failures a trace turns into graph breaks.

FakeTensorMode logs every exception of a meta kernel at ERROR, with its traceback ("failed while
attempting to run meta for aten.constant_pad_nd"), then raises it. Inside a trace the exception
is the answer: `create_node` turns it into a graph break that names the op and the error (or
the user's own shape error, raised again when the frame runs), so the log only prints a
traceback of torch's internals into the user's terminal for something handled. The filter
drops exactly those records, and only while this thread computes a node's example value.
"""
import contextlib
import logging
import threading

_state = threading.local()
_MESSAGE = "failed while attempting to run meta"


class _DuringTrace(logging.Filter):
    def filter(self, record):
        return not (getattr(_state, "depth", 0) and str(record.msg).startswith(_MESSAGE))


logging.getLogger("torch._subclasses.fake_tensor").addFilter(_DuringTrace())


@contextlib.contextmanager
def example_value_errors_handled():
    """Around a node's fake computation, whose exceptions the caller handles."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
