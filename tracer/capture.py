"""`with tracer.capture(backend=...):` — every Python frame started inside goes through the
cache / convert_frame path, via the C frame hook (frame_hook.py).

Which frames are traced (`frame_rule`, the one configurable rule: `skip_prefixes=`; it lives
in runtime/policy.py, which says which libraries are skipped and why):
  * the code users run: anything outside torch, the standard library, the untraced libraries
    (numpy, scipy, pandas, sympy...), pytest and the tracer itself; and the `forward` of
    every `torch.nn.Module`, stock ones included
    (torch/nn/modules/...), so `with capture(): model(batch)` traces the same frame that
    `tracer.compile(model)` traces and captures the same ops;
  * resume functions of frames that broke, wherever their code lives (the frame they
    continue was traced; a loop that breaks in every iteration nests at most
    graph_break.LOOP_RESUME_LIMIT of them);
  * not torch's internals: the module call machinery (`Module._call_impl` runs natively, so
    hooks run exactly as in eager and `forward` is entered through the frame hook), the
    functional wrappers (inlined when their caller is traced, as under compile()), fx,
    autograd, dynamo. A skip decided by the default rule is cached on the code object (C:
    `rule_skip`), so those frames cost no Python call on later calls.

The callback receives a frame view before the frame runs: it checks the code object's cache
entries' guards against the frame's argument slots, and returns the entry's rewritten code
(or None to run the frame as it is). A miss traces the frame. The warm path is one dict
lookup by code identity and the entries' guard checks (`FrameCallback.__call__`).

A frame whose traces make no tensor work (the data pipeline around a model: tokenizers,
collate loops, metrics, logging) is given up on: it runs as Python from then on, at the cost
of a flag check in the C hook, until a call brings a tensor argument (runtime/give_up.py has
the rule; `tracer.stats().given_up` names each such frame once).
"""
import logging
import sys
import threading
import weakref

import torch

from .runtime import cache, give_up, records
from .runtime.records import HITS
from .graph.backends import resolve
from .options import check_options
from .trace.convert_frame import convert_frame
from .runtime.compile_annotations import skip_disabled_frames
from .runtime.dynamo_interop import dynamo_hooked
from .exc import BackendError, FullGraphError
from .runtime.frame_hook import call_unhooked, rule_skip, set_error_handler, set_eval_frame, set_rule_type, skip_code
# the default rule and its prefixes live in runtime/policy.py (with the value model's answers
# to the same question); DEFAULT_SKIP_PREFIXES is re-exported: `capture(skip_prefixes=
# DEFAULT_SKIP_PREFIXES + (dir,))` extends it
from .runtime.policy import DEFAULT_SKIP_PREFIXES, SKIP, TRACE, frame_rule, should_skip

log = logging.getLogger("tracer")

_DISABLE_WRAPPERS = ("_fn", "nonrecursive_disable_wrapper")  # torch._dynamo's wrapper functions


def _importing():
    """Whether an import is running on this thread (a lazy import inside a call): frames it
    runs (decorators, registrations) are left alone. Tracing them could import, through the
    tracer's own lazy imports, a module that is itself still half-initialised. (Read only
    when a frame is about to be traced, never on a cache hit.)"""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        f = f.f_back
    return False


class FrameCallback:
    """The hook's callback: cache lookup by guards, else convert_frame.

    Instances of exactly this class use the default rule and cache its skips on code objects
    (the C hook then never calls them for those frames); `make_callback` gives an instance
    of a subclass for other prefixes."""

    def __init__(self, backend_fn, fullgraph=False, skip_prefixes=DEFAULT_SKIP_PREFIXES, dynamic=None):
        self.backend = backend_fn
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.skip_prefixes = tuple(skip_prefixes)
        # capture() gives up on frames with no tensor work (runtime/give_up.py); tracer.compile's
        # callback for the frames after a graph break does not decide (it honours the marks)
        self.gives_up = False
        self._hot = {}  # id(code) -> (weakref to code, [(guard check, code to run or None)])
        cache.register_view(self)

    def __call__(self, frame):
        code = frame.f_code
        hot = self._hot.get(id(code))
        if hot is not None and hot[0]() is code:
            L, G, C = frame.f_args, frame.f_globals, frame.closure
            for check, new_code in hot[1]:
                if check(L, G, C):
                    HITS[0] += 1
                    return new_code
            return self._compile(code, frame)
        rule = frame_rule(code, frame.f_args, self.skip_prefixes)
        if rule is not TRACE:
            if code.co_name in _DISABLE_WRAPPERS:
                # torch.compiler.disable's wrapper (one code object for every wrapped function):
                # keep out of what this one wraps; never skip the wrapper code itself for good
                skip_disabled_frames(frame.f_func)
            elif rule is SKIP and type(self) is FrameCallback:
                rule_skip(code)
            return None
        return self._compile(code, frame)

    def _compile(self, code, frame):
        if _importing() or torch._guards.TracingContext.try_get() is not None or dynamo_hooked():
            # this once: an import is running, or a compiler (torch.compile inside torch.cond,
            # a backend) is tracing and called back into Python (sympy, registrations), or the
            # frame runs in a torch.compile'd call (TorchDynamo's frame hook is set: its frames
            # are its own, and it would trace the tracer's machinery)
            return None
        L, G, C = frame.f_args, frame.f_globals, frame.closure
        if type(self) is not FrameCallback and give_up.given_up(code):  # (the C hook does this for FrameCallback)
            if not any(isinstance(v, torch.Tensor) for v in L):
                return None
            give_up.lift_give_up(code)
        made = []

        def trace():
            # (uninstalled evaluator: the tracer's own Python runs with its calls inlined)
            made.append(call_unhooked(convert_frame, code, L, G, C, frame.f_builtins, self.backend,
                                      self.fullgraph, self.dynamic))
            return made[0]

        entry = cache.lookup_or_compile(code, L, G, C, self.backend, self.fullgraph, trace)
        if made and self.gives_up:  # a new trace: no tensor work in it may mean the code runs as Python for good
            give_up.after_trace(code, made[0])
        self._refresh(code)
        return None if entry is None else entry.code

    def _refresh(self, code):
        """This callback's view of `code`'s entries, in cache order."""
        key = id(code)
        hot = self._hot

        def forget(_ref, key=key, hot=hot):
            hot.pop(key, None)

        mine = [(e.guards.check, e.code) for e in cache.cache_for(code).entries
                if e.made_for(self.backend, self.fullgraph)]
        hot[key] = (weakref.ref(code, forget), mine)

    def _clear_cache(self):
        self._hot.clear()


class _OtherRuleCallback(FrameCallback):
    """A callback whose skip prefixes are not the default: its skips are not cached."""


set_rule_type(FrameCallback)


def make_callback(backend_fn, fullgraph=False, skip_prefixes=DEFAULT_SKIP_PREFIXES, dynamic=None):
    cls = FrameCallback if tuple(skip_prefixes) == DEFAULT_SKIP_PREFIXES else _OtherRuleCallback
    return cls(backend_fn, fullgraph, skip_prefixes, dynamic)


class capture:
    """Trace every frame started inside the block; restores the previous hook on exit."""

    def __init__(self, backend="eager", fullgraph=False, skip_prefixes=DEFAULT_SKIP_PREFIXES, dynamic=None):
        check_options("tracer.capture", backend=backend, fullgraph=fullgraph, dynamic=dynamic)
        self.callback = make_callback(resolve(backend), fullgraph, skip_prefixes, dynamic)
        self.callback.gives_up = True
        self._prev = threading.local()

    def __enter__(self):
        set_error_handler(_report_callback_error)
        self._prev.value = set_eval_frame(self.callback)
        return self

    def __exit__(self, *exc):  # (no import here: it would run hooked, through importlib)
        set_eval_frame(self._prev.value)
        return False


def _report_callback_error(exc, code):
    if isinstance(exc, (FullGraphError, BackendError, Warning)):  # fullgraph=True, a backend that
        # failed (config.suppress_errors), or warnings made errors (-W error)
        raise exc
    name = getattr(code, "co_qualname", repr(code))
    log.warning("tracer callback failed for %s; the frame runs as Python: %s: %s", name, type(exc).__name__, exc)
    records.internal_error(name, f"frame hook callback failed: {type(exc).__name__}: {exc}")


def _skip_own_frames():
    for fn in (capture.__enter__, capture.__exit__, FrameCallback.__call__, FrameCallback._compile,
               FrameCallback._refresh, frame_rule, should_skip, _report_callback_error):
        skip_code(fn.__code__)


_skip_own_frames()


def _skip_native_regions():
    """Functions whose callees must run as eager code when they run natively (after a graph
    break, or in a frame run as Python): non-reentrant activation checkpointing recomputes
    its function eagerly in backward and checks that the recomputation saves the same
    tensors as the first run, which traced code need not (the traced case is a subgraph:
    variables/checkpoint.py)."""
    import torch.utils.checkpoint as ckpt
    fn = getattr(ckpt.checkpoint, "__wrapped__", ckpt.checkpoint)
    skip_code(fn.__code__, recursive=True)


_skip_native_regions()
