"""`with tracer.capture(backend=...):` — every Python frame started inside goes through the
cache / convert_frame path, via the C frame hook (frame_hook.py).

The callback receives a frame view before the frame runs: it checks the code object's cache
entries' guards against the frame's argument slots, and returns the entry's rewritten code
(or None to run the frame as it is). A miss traces the frame. Frames whose code lives in
torch, the standard library, or the tracer itself are skipped by `should_skip`, which is the
one configurable rule (`skip_prefixes=`).
"""
import logging
import os
import sys
import sysconfig
import threading

import torch

from . import cache, records
from .records import HITS
from .backends import resolve
from .convert_frame import convert_frame
from .compile_annotations import skip_disabled_frames
from .exc import FullGraphError

log = logging.getLogger("tracer")

_TRACER_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep for m in (
    sys.modules["tracer"], __import__("guards"), __import__("bytecode_utils")))
def _package_dir(name):
    try:
        module = __import__(name)
    except ImportError:
        return None
    return os.path.dirname(os.path.abspath(module.__file__)) + os.sep


DEFAULT_SKIP_PREFIXES = tuple(p for p in (_package_dir(n) for n in ("numpy", "scipy", "pandas")) if p) + (
    os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
    *_TRACER_DIRS,
)


_DISABLE_WRAPPERS = ("_fn", "nonrecursive_disable_wrapper")  # torch._dynamo's wrapper functions


def should_skip(code, prefixes):
    filename = code.co_filename
    return filename.startswith(prefixes) or filename.startswith("<") and filename != "<string>"


class FrameCallback:
    """The hook's callback: cache lookup by guards, else convert_frame."""

    def __init__(self, backend_fn, fullgraph=False, skip_prefixes=DEFAULT_SKIP_PREFIXES):
        self.backend = backend_fn
        self.fullgraph = fullgraph
        self.skip_prefixes = tuple(skip_prefixes)

    def __call__(self, frame):
        code = frame.f_code
        if should_skip(code, self.skip_prefixes):
            if code.co_name in _DISABLE_WRAPPERS:  # torch.compiler.disable: keep out of what it wraps
                skip_disabled_frames(frame.f_func)
            return None
        L, G, C = frame.f_args, frame.f_globals, frame.closure
        entry = cache.lookup(code, L, G, C, self.backend, self.fullgraph)
        if entry is not None:
            HITS[0] += 1
            return entry.code
        entry = cache.lookup_or_compile(
            code, L, G, C, self.backend, self.fullgraph,
            lambda: convert_frame(code, L, G, C, frame.f_builtins, self.backend, self.fullgraph))
        return None if entry is None else entry.code


class capture:
    """Trace every frame started inside the block; restores the previous hook on exit."""

    def __init__(self, backend="eager", fullgraph=False, skip_prefixes=DEFAULT_SKIP_PREFIXES):
        self.callback = FrameCallback(resolve(backend), fullgraph, skip_prefixes)
        self._prev = threading.local()

    def __enter__(self):
        from .frame_hook import set_eval_frame, set_error_handler
        set_error_handler(_report_callback_error)
        self._prev.value = set_eval_frame(self.callback)
        return self

    def __exit__(self, *exc):
        from .frame_hook import set_eval_frame
        set_eval_frame(self._prev.value)
        return False


def _report_callback_error(exc, code):
    if isinstance(exc, (FullGraphError, Warning)):  # fullgraph=True, or warnings made errors (-W error)
        raise exc
    name = getattr(code, "co_qualname", repr(code))
    log.warning("tracer callback failed for %s; the frame runs as Python: %s: %s", name, type(exc).__name__, exc)
    records.internal_error(name, f"frame hook callback failed: {type(exc).__name__}: {exc}")


def _skip_own_frames():
    from .frame_hook import skip_code
    for fn in (capture.__enter__, capture.__exit__, FrameCallback.__call__, should_skip,
               _report_callback_error):
        skip_code(fn.__code__)


_skip_own_frames()
