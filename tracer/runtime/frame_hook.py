"""Python side of the PEP 523 frame hook (the C part is tracer/runtime/_eval_frame.c).

API (callbacks are per thread; see the C file's header for the details):

    set_eval_frame(cb_or_None) -> previous     this thread's callback
    get_eval_frame() -> cb_or_None
    skip_code(code, recursive=False)           never hand `code`'s frames to the callback;
                                               recursive=True: nor anything it calls
    unskip_code(code), is_skipped(code) -> bool
    rule_skip(code), is_rule_skipped(code)     a skip decided by a rule, cached on the code:
    set_rule_type(type_or_None) -> previous    honoured for callbacks of exactly that type
    give_up(code), is_given_up(code),          like rule_skip, but a frame with a tensor among
    lift_give_up(code)                         its arguments lifts the mark and reaches the
    set_tensor_type(type_or_None)              callback (runtime/give_up.py)
    allow_unhooked(code), is_unhooked(code)    a given-up code whose trace saw every call it
                                               can make runs with the evaluator uninstalled
                                               once a watched run reached no traced frame
    call_unhooked(fn, *args)                   fn(*args) with the evaluator uninstalled, when
                                               called from the callback (a trace)
    untraced(fn)                               fn, called with this thread's callback off
    set_error_handler(fn_or_None) -> previous  fn(exc, code) when the callback fails
    clear_thread_caches()                      drop this thread's recycled call-through
                                               function (it keeps the last replacement code
                                               and its globals alive; call on cache reset)
    hook(cb)                                   context manager: set cb, restore the previous one
    disable(fn)                                decorator: nothing fn calls is intercepted

The callback is called as ``cb(frame)`` for every fresh Python function frame started on the
thread (not generators/coroutines, not module/class bodies, not frames of skipped code, not
frames started by the callback itself).  ``frame`` is a read-only :class:`FrameView` with
``f_code, f_globals, f_builtins, f_func, closure, f_lasti (-1), f_args, f_locals``.
``f_args`` is the tuple of the N argument-slot values in ``co_varnames`` order (positional,
keyword-only, the ``*args`` tuple, the ``**kwargs`` dict); ``f_locals`` (built on first
access) maps those names, plus the free-variable names of non-empty closure cells, to values.

It returns ``None`` (run the frame normally) or a code object to run instead: it must take
exactly N positional arguments (``co_argcount == N``, no ``*args``/``**kwargs``/keyword-only
flags, see :func:`flatten_code`) and have the same free variables as the original; it runs
with the original argument values, globals and closure, and its result is the call's result.

If the callback raises an ``Exception`` (or returns something unusable), the error is passed
to the error handler (default: printed as an unraisable exception) and the frame runs
normally.  ``KeyboardInterrupt``/``SystemExit``, and anything the error handler raises,
propagate from the intercepted call.
"""
from __future__ import annotations

import types

try:
    from . import _eval_frame as _C
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "tracer.runtime._eval_frame (the C frame hook, tracer/runtime/_eval_frame.c) is not built for this "
        "Python or failed to load. It needs CPython 3.11 to 3.15. Build it with "
        "`python setup.py build_ext --inplace` from the repository root, or install the project "
        f"with `pip install -e .` (or `make install`) (original error: {e})"
    ) from e

FrameView = _C.FrameView
set_eval_frame = _C.set_eval_frame
get_eval_frame = _C.get_eval_frame
skip_code = _C.skip_code
unskip_code = _C.unskip_code
is_skipped = _C.is_skipped
rule_skip = _C.rule_skip
is_rule_skipped = _C.is_rule_skipped
set_rule_type = _C.set_rule_type
give_up = _C.give_up
is_given_up = _C.is_given_up
lift_give_up = _C.lift_give_up
allow_unhooked = _C.allow_unhooked
is_unhooked = _C.is_unhooked
call_unhooked = _C.call_unhooked
set_tensor_type = _C.set_tensor_type
untraced = _C.untraced
set_error_handler = _C.set_error_handler
clear_thread_caches = _C.clear_thread_caches

CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08

__all__ = [
    "FrameView",
    "set_eval_frame",
    "get_eval_frame",
    "skip_code",
    "unskip_code",
    "is_skipped",
    "rule_skip",
    "is_rule_skipped",
    "set_rule_type",
    "give_up",
    "is_given_up",
    "lift_give_up",
    "allow_unhooked",
    "is_unhooked",
    "call_unhooked",
    "set_tensor_type",
    "untraced",
    "set_error_handler",
    "clear_thread_caches",
    "hook",
    "disable",
    "n_arg_slots",
    "flatten_code",
]


def n_arg_slots(code: types.CodeType) -> int:
    """N: positional + keyword-only + (1 if *args) + (1 if **kwargs)."""
    return (
        code.co_argcount
        + code.co_kwonlyargcount
        + bool(code.co_flags & CO_VARARGS)
        + bool(code.co_flags & CO_VARKEYWORDS)
    )


def flatten_code(code: types.CodeType) -> types.CodeType:
    """`code` with its N argument slots turned into plain positional parameters, the shape a
    replacement must have.  The localsplus layout is unchanged, so no bytecode edits."""
    return code.replace(
        co_argcount=n_arg_slots(code),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=code.co_flags & ~(CO_VARARGS | CO_VARKEYWORDS),
    )


class hook:
    """``with hook(cb): ...`` sets this thread's callback to ``cb`` (``None`` turns it off)
    and restores the previous one on exit, also when the block raises.  One instance per
    ``with``; nesting different instances is fine."""

    __slots__ = ("callback", "_prev", "_entered")

    def __init__(self, callback):
        if callback is not None and not callable(callback):
            raise TypeError(f"hook() expects a callable or None, not {type(callback).__name__}")
        self.callback = callback
        self._prev = None
        self._entered = False

    def __enter__(self):
        if self._entered:
            raise RuntimeError("this hook() is already active; create a new one to nest")
        self._prev = set_eval_frame(self.callback)
        self._entered = True
        return self

    def __exit__(self, exc_type, exc, tb):
        prev, self._prev = self._prev, None
        self._entered = False
        set_eval_frame(prev)
        return False


# The context manager's own frames must not reach the callback (`__exit__` runs hooked).
# Not recursive: a recursive skip would park the callback, and set_eval_frame inside it
# would then not affect the thread's real state.
for _f in (hook.__init__, hook.__enter__, hook.__exit__, n_arg_slots, flatten_code):
    skip_code(_f.__code__)
del _f


def disable(fn):
    """Decorator: while ``fn`` runs, no frame it starts (directly or not) is handed to the
    callback; ``fn`` itself is not either.  Marks ``fn.__code__``; returns ``fn``.

    Inside, the thread's callback reads as None; ``set_eval_frame``/``hook`` still work
    there, and whatever they leave set is dropped when ``fn`` returns."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if not isinstance(code, types.CodeType):
        raise TypeError(f"disable() expects a Python function, not {type(fn).__name__}")
    skip_code(code, recursive=True)
    return fn
