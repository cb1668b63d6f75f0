"""Backends: exactly torch.compile's protocol, `backend(gm, example_inputs) -> callable`.

Named backends delegate to torch: "eager" runs the GraphModule's generated forward,
"aot_eager" runs AOTAutograd with no compiler (checks the graph functionalises and
differentiates), "inductor" is torch's own compiler. A callable is used as is.

Torch internals read here: aot_module_simplified, compile_fx and torch._C._get_tracing_state;
checked on torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them all;
tests/test_torch_internals.py resolves each).
"""
import torch

from ..exc import BackendError
from ..runtime import config
from ..runtime.frame_hook import skip_code
from . import aot_outputs, inference_blocks, subgraphs
from .output_graph import printable
from .shapes import forget_inputs, static_tracing_context


def eager(gm, example_inputs):
    return direct_module_calls(gm).forward


def call_forward(module, *args, **kwargs):
    """`module(*args, **kwargs)` without nn.Module.__call__'s dispatch (about a microsecond
    per call: a model's graph calls dozens of leaf modules). Equivalent under the entry's
    guards: a call_module node is only made while the module and nn.Module have no hooks and
    nn.Module's dispatch is torch's own (variables/nn_module.py; the translator guards both),
    which is all that dispatch acts on; forward is
    looked up per call, as __call__ does. Under torch.jit tracing __call__ also records the
    module's scope, so it is used then."""
    if _jit_tracing():
        return module(*args, **kwargs)
    return module.forward(*args, **kwargs)


_jit_tracing = torch._C._get_tracing_state


_DISPATCH = ("__call__", "_wrapped_call_impl", "_call_impl")  # nn.Module's call, in order


def is_module_dispatch(fn):
    """`fn` is one of nn.Module's call-dispatch functions (called on a module: dispatch())."""
    return any(torch.nn.Module.__dict__.get(name) is fn for name in _DISPATCH)


def module_dispatch_is_torchs():
    """Whether nn.Module's call dispatch is torch's own, not patched process-wide (profilers
    and debugging shims wrap `__call__` or `_call_impl`). The tracer models that dispatch
    (hooks, then forward) and the eager backend skips it (backends.call_forward): both only
    hold for torch's own."""
    file = torch.nn.modules.module.__file__
    return all(getattr(getattr(torch.nn.Module.__dict__.get(name), "__code__", None), "co_filename", None)
               == file for name in _DISPATCH) and \
        torch.nn.Module.__dict__["__call__"] is torch.nn.Module.__dict__["_wrapped_call_impl"]


def direct_module_calls(gm):
    """A GraphModule running gm's graph with each call_module node calling the module's
    forward through call_forward. gm itself (the graph users see in dumps and explain())
    keeps its call_module nodes; other backends get it as it is."""
    if not any(n.op == "call_module" for n in gm.graph.nodes) or not module_dispatch_is_torchs():
        return gm
    graph = torch.fx.Graph()
    env = {}
    for n in gm.graph.nodes:
        if n.op == "call_module":
            mod = graph.get_attr(n.target)
            args = torch.fx.map_arg(n.args, env.__getitem__)
            kwargs = torch.fx.map_arg(n.kwargs, env.__getitem__)
            env[n] = graph.call_function(call_forward, (mod, *args), kwargs)
            env[n].meta = n.meta
        else:
            env[n] = graph.node_copy(n, env.__getitem__)
    graph.lint()
    return torch.fx.GraphModule(gm, graph)


def aot_eager(gm, example_inputs):
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    def nop(g, _inputs):
        return make_boxed_func(printable(g).forward)

    # A graph compiled outside its trace (read from disk) gets a ShapeEnv of its own, as under
    # inductor: one holding `t.item()` or `nonzero` (fullgraph=True) cannot be traced again
    # without one; a trace's own graph runs in its trace's context (Shapes.backend_context).
    return _in_tracing_context(
        lambda: aot_module_simplified(gm, example_inputs, fw_compiler=nop, bw_compiler=nop), example_inputs)


def inductor(gm, example_inputs):
    """torch's compile_fx. A graph of static sizes gets a tracing context with its own
    ShapeEnv, as torch.compile gives every graph: inductor's FX graph cache and AOTAutograd's
    cache bypass a graph compiled without one ("No shape env"), and those caches are what make
    a later process's compile of the same graph warm (the disk cache, tracer/persist/)."""
    from torch._inductor.compile_fx import compile_fx
    gm = _outlined(gm)
    return _in_tracing_context(lambda: compile_fx(gm, example_inputs), example_inputs)


def _outlined(gm):
    """gm with its repeated blocks as one subgraph each (graph/subgraphs.py), which inductor
    lowers once; gm itself with config.inductor_subgraphs off."""
    return subgraphs.outline(gm) if config.inductor_subgraphs else gm


def _in_tracing_context(run, example_inputs):
    from torch._guards import TracingContext, tracing
    if TracingContext.try_get() is not None:
        return run()
    tc = static_tracing_context(example_inputs)
    try:
        with tracing(tc):
            return run()
    finally:
        forget_inputs(tc)


NAMED = {"eager": eager, "aot_eager": aot_eager, "inductor": inductor}

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


class Inductor:
    """inductor with torch.compile's `mode` and `options`, turned into inductor config patches
    exactly as torch.compile turns them (torch._TorchCompileInductorWrapper: mode presets,
    option names and types checked). One object per distinct configuration (`inductor_with`):
    cache entries are matched to their backend by identity, so the instances of a model class
    compiled with the same mode share their entries.

    `cudagraphs` (mode "reduce-overhead" or "max-autotune", or the option
    "triton.cudagraphs"): inductor records the graph's kernels in CUDA graphs (cudagraph trees)
    and replays them. A replay reads its inputs from fixed addresses, so each other input is
    copied in on every call: the module parameters and buffers the graph reads (graph inputs,
    as a module's tensors are here: output_graph.add_input's `static`) are marked static, with
    the metadata through which AOTAutograd learns the same from TorchDynamo
    (`_mark_static_inputs`). A call of a compiled function starts a new step of the trees
    (api.CompiledFunction: `new_step`), as a call of a torch.compile'd one does."""

    def __init__(self, mode, options, dynamic):
        self.mode, self.options, self.dynamic = mode, dict(options or {}), dynamic
        self.config = torch._TorchCompileInductorWrapper(mode, self.options, dynamic).config
        self.cudagraphs = bool(self.config.get("triton.cudagraphs", False))
        self.__qualname__ = f"inductor(mode={mode!r})" if not self.options else \
            f"inductor(mode={mode!r}, options={self.options!r})"

    def __call__(self, gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx
        gm = _outlined(gm)
        if self.cudagraphs:
            _mark_static_inputs(gm, example_inputs)
        return _in_tracing_context(lambda: compile_fx(gm, example_inputs, config_patches=dict(self.config)),
                                   example_inputs)

    def __repr__(self):
        return self.__qualname__


_INDUCTORS = {}


def inductor_with(mode=None, options=None, dynamic=None):
    """The inductor backend for torch.compile's `mode` and `options`: plain `inductor` for
    none, otherwise the one Inductor object of that configuration. A bad mode, option name or
    option type raises ValueError naming it (torch's own check, in one line)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(map(repr, MODES))}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"options must be a dict of inductor config names to values, not {type(options).__name__}")
    if mode in (None, "default") and not options:
        return inductor
    key = (mode, repr(sorted((options or {}).items())), dynamic)
    if key not in _INDUCTORS:  # (torch's wrapper checks the options: only on a new configuration)
        try:
            _INDUCTORS[key] = Inductor(mode, options, dynamic)
        except RuntimeError as e:  # torch: "Unexpected optimization option x, known options are [...]"
            raise ValueError(str(e).split(", known options")[0]) from None
    return _INDUCTORS[key]


def _mark_static_inputs(gm, example_inputs):
    """Tell AOTAutograd which graph inputs keep their address between calls (a module's
    parameters and buffers), in the form TorchDynamo gives it: a compile id in gm.meta, a
    source on every placeholder, the static type in the placeholder's `tensor_dict`, and the
    sources of gm's own parameters (those of its call_module targets). inductor's cudagraphs
    then reads those inputs in place instead of copying them on every replay; one whose
    address does change (another instance of the model) is recorded again, as torch.compile's
    unguarded static inputs are. A tensor the user marked (`torch._dynamo.mark_static_address`,
    as transformers' StaticCache marks its key and value tensors) is static too."""
    from torch._dynamo.source import LocalSource
    from torch._guards import CompileId
    gm.meta.setdefault("dynamo_compile_id", CompileId(frame_id=0, frame_compile_id=0))
    names = [n for n, _ in gm.named_parameters(remove_duplicate=False)] + \
        [n for n, _ in gm.named_buffers(remove_duplicate=False)]
    gm._param_name_to_source = {n: LocalSource(f"__tracer_attr_{i}") for i, n in enumerate(names)}
    for i, (node, value) in enumerate(zip(gm.graph.find_nodes(op="placeholder"), example_inputs)):
        node._dynamo_source = LocalSource(f"__tracer_input_{i}")
        marked = getattr(value, "_dynamo_static_input_type", None)
        if marked or node.meta.get("static_address"):
            node.meta.setdefault("tensor_dict", {})["_dynamo_static_input_type"] = marked or "unguarded"


def new_step():
    """A new top-level call of a compiled function: cudagraph trees may reuse the memory of the
    previous call's outputs from here on (what torch.compile's entry does on every call; without
    it each call would be recorded as a continuation of the last)."""
    from torch._dynamo.mutation_guard import GenerationTracker
    GenerationTracker.generation += 1


def resolve(backend):
    if callable(backend):
        return backend
    try:
        return NAMED[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; use a callable or one of {sorted(NAMED)}")


# When a compiled graph makes its in-place writes into tensors outside itself: at each op, as
# eager; after its last op; or not known. What a graph that raises has written (rewrite/rerun).
IN_ORDER, AT_END, UNKNOWN = "in order", "at end", "unknown"


def input_writes(backend_fn):
    """IN_ORDER, AT_END or UNKNOWN for the backend: eager runs the graph as traced;
    aot_eager's functionalised graph copies the new values into its inputs after its last op;
    inductor may fuse a copy-back into an earlier kernel, and a user's backend may do anything."""
    if backend_fn is eager:
        return IN_ORDER
    return AT_END if backend_fn is aot_eager else UNKNOWN


def backend_name(backend_fn):
    """How an error names a backend: its name, or its type's for a callable object."""
    return getattr(backend_fn, "__qualname__", None) or getattr(backend_fn, "__name__", None) \
        or type(backend_fn).__name__


def compile_graph(backend_fn, gm, example_inputs):
    """The backend's callable for gm, giving gm's outputs with eager's autograd facts
    (aot_outputs.py: what a compiling backend gives back otherwise), and its inference-mode
    blocks as the backend can run them (inference_blocks.py)."""
    compiling = backend_fn is not eager
    given = inference_blocks.for_backend(gm, compiling)
    remade = aot_outputs.remade_views(given, example_inputs) if compiling else None
    try:
        compiled = _restarting(backend_fn, given if remade is None else remade.gm, example_inputs)
    except Exception as e:
        err = BackendError(f"backend {backend_name(backend_fn)} raised {type(e).__name__}: {e}")
        err.backend = backend_fn
        raise err from e
    if not callable(compiled):
        err = BackendError(f"backend {backend_name(backend_fn)} returned {type(compiled).__name__}, "
                           f"not a callable")
        err.backend = backend_fn
        raise err
    compiled = _unhooked(compiled)
    if given is not gm and not compiling:
        compiled = inference_blocks.leaving_on_error(compiled)
    if remade is not None:
        compiled = remade.wrap(compiled)
    leaves = aot_outputs.made_leaves(gm) if backend_fn is not eager else ()
    return aot_outputs.with_leaves(compiled, leaves) if leaves else compiled


def _restarting(backend_fn, gm, example_inputs, tries=3):
    """backend_fn(gm, example_inputs), compiled again when it raises torch's RestartAnalysis:
    its signal to compile again with what it learnt, not a failure. (AOTAutograd's pass that
    turns float scalars into tensors raises it for a 0-dim float64 CPU input on the first such
    compile of a process, after recording the symbol it specialises; torch.compile restarts.)

    The grad mode is put back after each attempt: a compiling backend runs the graph's
    `_set_grad_enabled` nodes while it traces, and one that raises inside a `no_grad` block
    (an index it finds out of range) left grad mode off for the caller, after an error eager
    raises too, and for everything after it."""
    grad = torch.is_grad_enabled()
    for attempt in range(tries):
        try:
            return backend_fn(gm, example_inputs)
        except Exception as e:  # noqa: BLE001 - only RestartAnalysis is retried
            from torch._dynamo.exc import RestartAnalysis  # (imported only then: torch._dynamo)
            if not isinstance(e, RestartAnalysis) or attempt == tries - 1:
                raise
        finally:
            torch._C._set_grad_enabled(grad)


def _unhooked(compiled):
    """The compiled graph runs with the frame hook off, as TorchDynamo runs its graphs: the
    Python frames its kernels start (a custom op's Python implementation, an autograd
    Function) are the graph's own work, not user frames to trace. Marks the callable's code
    (a GraphModule's generated forward) or, for other callables, wraps it once."""
    code = getattr(getattr(compiled, "__func__", compiled), "__code__", None)
    if code is not None:
        skip_code(code, recursive=True)
        return compiled

    def run_graph(*args):
        return compiled(*args)
    return run_graph


def _mark_wrapper():
    skip_code(_unhooked(len).__code__, recursive=True)  # the one code object of run_graph


_mark_wrapper()


__all__ = ["resolve", "compile_graph", "backend_name", "NAMED", "torch"]
