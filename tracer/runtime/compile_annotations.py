"""Code written for torch.compile, honoured as torch.compile honours it.

User code (and libraries) already carry torch.compile's annotations; the tracer reads them
instead of tracing through them:

  torch._dynamo.graph_break()                  a graph break at the call
  torch.compiler.disable / torch._dynamo.disable
                                               the function runs as Python: a traced caller
                                               breaks at the call, and nothing it calls is
                                               traced (recursive=False: only its own frame)
  torch.compiler.allow_in_graph(fn)            fn is one graph node, run on fake tensors at
                                               trace time (never inlined)
  torch.compiler.assume_constant_result(fn)    fn() is called once at trace time; its result
                                               is a constant of the graph (not guarded: that
                                               is the annotation's contract)
  torch.compiler.is_compiling()/is_dynamo_compiling()
                                               True while tracing (torch_vars.py)
  torch._dynamo.mark_dynamic/maybe_mark_dynamic/mark_static/mark_unbacked
                                               recorded (shapes stay static, issue 12) and
                                               made natively after the graph, so the tensor
                                               carries the mark as in eager
  torch.compiler.set_stance("force_eager")     compiled functions run as Python;
                                               "eager_on_recompile" runs what would recompile
                                               as Python, "fail_on_recompile" raises there
  a class marked __script_if_tracing_wrapper   its objects stand for their `__original_fn`:
                                               a call (or a method bound from one) is that
                                               function's, inlined (WRAPPER_MARK below)
  tracer.compile(module): MODULE_WRAPPER_MARK  a call with no hooks on the wrapper is its
                                               model's call (`_orig_mod`), as TorchDynamo
                                               calls a nested torch.compile'd module's model

Nothing here imports torch._dynamo: the annotations can only exist if the user's program
imported it, so each check looks the module up in sys.modules.

Torch internals read here: torch._dynamo's decorators, trace_rules._allowed_callable_ids and
eval_frame._stance; checked on torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them all;
tests/test_torch_internals.py resolves each).
"""
import sys
import types

from .frame_hook import skip_code

# TorchDynamo inlines `obj.__original_fn` wherever an object whose attribute
# `__script_if_tracing_wrapper` is true is called (torch.jit's script_if_tracing wrappers set both
# on the function): the one attribute protocol, needing no import of torch._dynamo, by which an
# object says "calling me is calling this Python function". tracer.compile's CompiledFunction
# sets the mark on its class, so torch.compile traces a tracer-compiled function as the function
# it compiled (as it does a nested torch.compile), and so does the tracer (wraps_original).
WRAPPER_MARK = "__script_if_tracing_wrapper"
ORIGINAL = "__original_fn"
# The module counterpart, the tracer's own (TorchDynamo knows its OptimizedModule by type): a
# module whose class sets this mark is, called with no hooks of its own, its model `_orig_mod`
# called (hooks and all). CompiledModule sets it; a trace that meets one calls the model.
MODULE_WRAPPER_MARK = "_tracer_module_wrapper"
ORIGINAL_MODULE = "_orig_mod"


def _dynamo_attr(module, name):
    m = sys.modules.get(module)
    return getattr(m, name, None) if m is not None else None


def is_graph_break(fn):
    gb = _dynamo_attr("torch._dynamo.decorators", "graph_break")
    return gb is not None and fn is gb


def wraps_original(cls):
    """Whether the objects of class `cls` stand for their `__original_fn`, by the mark on the
    class. torch.jit marks each function object instead: those stay functions, inlined as such."""
    return _marked(cls, WRAPPER_MARK)


def wraps_module(cls):
    """Whether the modules of class `cls` are, called, their `_orig_mod` called."""
    return _marked(cls, MODULE_WRAPPER_MARK)


def wraps_module_in_modules(cls):
    """Whether the modules of class `cls` are torch.compile's wrappers (TorchDynamo's
    OptimizedModule, known by type where torch._dynamo is imported: it is, where one exists),
    which hold their model in `_modules["_orig_mod"]`: called, the model is called, as
    TorchDynamo itself inlines a nested torch.compile'd module."""
    opt = _dynamo_attr("torch._dynamo.eval_frame", "OptimizedModule")
    try:
        return opt is not None and issubclass(cls, opt)
    except TypeError:
        return False


def torch_compiled(fn):
    """The Python function a torch.compile wrapper compiles (TorchDynamo's compile_wrapper,
    which keeps it as `_torchdynamo_orig_callable` beside `_torchdynamo_inline`), or None.
    Called in a traced frame it is that function called, inlined, as TorchDynamo inlines a
    nested torch.compile; traced, the wrapper's own body would switch TorchDynamo's frame hook
    (a break), and the call then ran under both hooks."""
    d = getattr(fn, "__dict__", None)
    if not d or "_torchdynamo_inline" not in d:
        return None
    made_by = sys.modules.get("torch._dynamo.eval_frame")  # (functools.wraps: not fn.__module__)
    if made_by is None or getattr(fn, "__code__", None) is None or \
            fn.__code__.co_filename != getattr(made_by, "__file__", None):
        return None
    inner = d.get("_torchdynamo_orig_callable")
    return inner if type(inner) is types.FunctionType else None


def _marked(cls, mark):
    """Whether class `cls` sets `mark` true, read from the classes' own dicts: no descriptor or
    metaclass runs."""
    try:
        return any(k.__dict__.get(mark) is True for k in cls.__mro__ if k is not object)
    except Exception:  # noqa: BLE001 - a class with a hostile __mro__ or __dict__ is simply not marked
        return False


def disabled(fn):
    """(original callable, recursive) for a torch.compiler.disable wrapper, else None."""
    try:
        if getattr(fn, "_torchdynamo_disable", False) is not True:
            return None
        return getattr(fn, "_torchdynamo_orig_callable", None), getattr(fn, "_torchdynamo_disable_recursive", True)
    except Exception:  # noqa: BLE001 - an object with a hostile __getattr__ is simply not annotated
        return None


def allowed_in_graph(fn):
    ids = _dynamo_attr("torch._dynamo.trace_rules", "_allowed_callable_ids")
    if ids is None:
        return False
    try:
        return id(fn) in ids
    except Exception:  # noqa: BLE001
        return False


def marked_constant(fn):
    try:
        return getattr(fn, "_dynamo_marked_constant", False) is True
    except Exception:  # noqa: BLE001
        return False


_SHAPE_MARKS = ("mark_dynamic", "maybe_mark_dynamic", "mark_static", "mark_unbacked", "mark_static_address")


def is_shape_mark(fn):
    return any(fn is _dynamo_attr("torch._dynamo.decorators", n) for n in _SHAPE_MARKS) and fn is not None


def stance():
    """torch.compiler.set_stance's current stance ("default" when torch._dynamo is not loaded)."""
    s = _dynamo_attr("torch._dynamo.eval_frame", "_stance")
    return getattr(s, "stance", "default") if s is not None else "default"


def skip_disabled_frames(fn):
    """A disable wrapper is about to run natively: keep the tracer's frame hook out of the
    function it wraps (and, for recursive=True, of everything that function calls)."""
    info = disabled(fn)
    if info is None or info[0] is None:
        return
    code = getattr(getattr(info[0], "__func__", info[0]), "__code__", None)
    if code is None:
        return
    skip_code(code, recursive=bool(info[1]))
