"""A graph that raises makes its frame run again as Python, from its start.

Why: the rewritten code calls the graph first and replays the side effects the traced code
made (attribute and container writes, globals, prints) after it. When an op in the graph
raises at run time (a kernel check that fake tensors do not make: `relu` of a bool tensor,
an index out of range), the writes the program made *before* that op in eager are never
made, and an `except` in the caller sees different state: a wrong result. If nothing
outside the graph has changed when it raises, the frame's locals are still its arguments.
So the rewritten code checks the graph's result for RERUN (what the graph call returns
instead of raising, `untraced(fn, graph_raised)` in the C hook: no cost when the graph
returns) and then calls the code as plain Python with the same arguments (the same closure
cells; the frame hook skips that copy), which raises where eager raises, with every earlier
write made.

What "nothing outside has changed" takes (`plan`): writes into tensors the graph made are
harmless; what it writes in place outside itself (graph inputs, parameters and buffers, a
leaf module's own state: read off the aten schemas while tracing, node.meta["writes"]) is
snapshotted before each call and copied back when it raises, and so is the RNG state of a
graph drawing random numbers (Plan.wrap); a grad-mode switch is undone (graph_raised).
Snapshots are taken only where the frame has Python writes to replay or a try/with of
its own around an op of the graph (the handler must see the exception where eager raises
it), or where the backend may make the graph's writes other than at their ops (inductor, a
user's backend): otherwise raising as-is is already what eager does. AOTAutograd's graphs
(aot_eager) write their inputs after their last op, so one that raises has written nothing:
they rerun with no snapshot. Autocast switches, an in-place
write that recorded autograd history on an input (a restore would not undo it) and ops we
cannot see into keep a graph from rerunning (a known gap: docs/reliability.md says so).

Torch internals read here: torch._C._autograd._unsafe_set_version_counter; checked on torch
2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them all; tests/test_torch_internals.py resolves
each).
"""
from __future__ import annotations

import sys
import threading
import types
import warnings

import bytecode as bc
import torch

from bytecode_utils import arg_names, flatten_signature, versions
from bytecode_utils.codegen import GENERATOR_FLAGS
from guards.tensor import UNKNOWN_STORAGE, storage_id

from ..exc import GraphRunWarning
from ..runtime import records
from ..graph.backends import AT_END, IN_ORDER, UNKNOWN
from ..graph.output_graph import reshapes
from ..runtime.frame_hook import skip_code


HISTORY = "the graph writes an input in place while recording autograd history"


class _Rerun:
    def __repr__(self):
        return "RERUN"


RERUN = _Rerun()

_RANDOM = frozenset({
    "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli",
    "multinomial", "normal", "poisson", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "alpha_dropout", "feature_alpha_dropout", "native_dropout", "rrelu", "gumbel_softmax",
    "fractional_max_pool2d", "fractional_max_pool3d", "standard_gamma", "binomial",
    "scaled_dot_product_attention",  # (its dropout_p)
})
# A call_function node calls torch, operator, math or a builtin; anything else (a function
# made allow_in_graph) may do what it likes, and is not run twice.
_KNOWN_MODULES = ("torch", "operator", "_operator", "math", "builtins")


def graph_raised(name, grad_mode=None, handled=False):
    """The on_error of a graph's `untraced` wrapper: record it, put the grad mode back as the
    graph found it (`grad_mode`, when the graph switches it: one that raises inside `no_grad`
    leaves it off), and tell the frame to rerun. Unless a handler of the frame is around the
    graph's ops (`handled`), a rerun that returns says the graph was wrong (GraphRunWarning)."""
    set_grad_enabled = torch._C._set_grad_enabled

    def on_error(exc):
        if grad_mode is not None:
            set_grad_enabled(grad_mode)
        if _from_saved_tensors_hook(exc):
            raise exc
        records.graph_rerun(name, exc)
        _RAISED.last = None if handled else (name, exc)
        return RERUN
    return on_error


_RAISED = threading.local()  # .last: (frame name, exception) of the graph the next rerun follows
_WARNED = set()              # (frame name, exception type) warned about (GraphRunWarning)


def _python_did_not_raise(name, exc):
    """The frame run as Python returned where its graph raised `exc`: the answer is Python's,
    and the graph disagreed with eager (a backend's compiled code failing at run time, or the
    tracer's fault). Never silent: a GraphRunWarning, once per frame and exception type."""
    key = (name, type(exc))
    if key in _WARNED:
        return
    _WARNED.add(key)
    first = str(exc).splitlines()[0] if str(exc) else ""
    warnings.warn(f"tracer: the compiled graph of {name} raised {type(exc).__name__}: {first}; the frame "
                  f"ran as Python instead and did not raise (its answer is used). The backend's "
                  f"compiled graph is at fault (shown once; tracer.stats() lists each rerun)",
                  GraphRunWarning, stacklevel=3)


def _from_saved_tensors_hook(exc):
    """Whether `exc` came out of the innermost saved-tensors pack hook, which the graph's ops
    call as eager's do. The hook has then run for every save up to the raise, as in eager: a
    rerun would run it again for each, and the hook counts them (torch.utils.checkpoint's
    non-reentrant recomputation stops early by raising from its pack hook, and asserts when
    it is called again: a compiled layer under checkpoint failed in backward). Such an
    exception goes to the caller as it is."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(True)
    code = getattr(hooks[0], "__code__", None) if hooks is not None else None
    tb = exc.__traceback__
    while code is not None and tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


def plan(code, gm, must_rerun, grad_at_start, history_changed, writes=IN_ORDER):
    """How this frame's graph is made safe to rerun: None when it cannot be (the graph then
    raises as before), else a Plan. `must_rerun`: the rewritten code replays Python writes
    after the graph, or a try/with of the traced code would catch an exception of one of
    its ops (only then is a snapshot of what the graph writes worth taking: otherwise the
    graph raising as-is is what eager does); `grad_at_start`: the grad mode the graph runs
    in (its entry's guards hold it); `history_changed(input node)`: an in-place write
    recorded autograd history on it (OutputGraph.history_changed); `writes`: when the
    compiled graph makes its in-place writes outside itself (backends.input_writes): only
    IN_ORDER makes a graph that raises leave eager's writes made."""
    if code.co_flags & GENERATOR_FLAGS:
        return None
    inputs = {}  # storage_id -> the placeholder / get_attr nodes over that storage
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr") and isinstance(node.meta.get("example_value"), torch.Tensor):
            sid = storage_id(node.meta["example_value"])
            if sid != UNKNOWN_STORAGE:
                inputs.setdefault(sid, []).append(node)
    written, grad_mode, rng, devices = {}, None, False, set()
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        example = node.meta.get("example_value")
        if isinstance(example, torch.Tensor):
            devices.add(example.device)
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        effect = _effect(node, modules)
        if effect == "unknown":
            return None
        grad_mode = grad_at_start if effect == "grad" else grad_mode
        rng = rng or effect == "random"
        state = node.meta.get("module_state", {})  # a leaf module's own tensors, by storage
        for sid in node.meta.get("writes", ()):
            # (a leaf module's forward sees fakes of its own state, the inputs and what it makes:
            # the fake mode refuses real tensors, so a write to none of those is to its own)
            if sid == UNKNOWN_STORAGE:
                return None  # a write we cannot place
            if sid in state:
                key = f"{node.target}.{state[sid]}"
                written[key] = ("attr", key, None)
            for n in inputs.get(sid, ()):
                written[n] = (n.op, n, n.meta["example_value"])
    if not (written or rng):
        return Plan(grad_mode)
    if written and writes == AT_END:
        # (AOTAutograd copies the new values into the inputs after the graph's last op: one
        # that raises leaves them untouched, and the rerun makes eager's writes up to it)
        return Plan(grad_mode, devices=devices if rng else None)
    if not must_rerun and not (writes == UNKNOWN and _on_host(written)):
        return None
    args, tensors, nbytes = [], [], 0
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for kind, what, example in written.values():
        if kind != "attr" and history_changed(what):
            # an in-place op recorded autograd history on it: a copied-back snapshot would
            # not undo that. (A working copy copied back after the graph, as AOTAutograd
            # does, would: but then autograd's own checks differ from eager's, a saved
            # tensor modified in place afterwards no longer raises in backward.) The frame
            # breaks at that write instead (convert_frame), so that it runs as Python.
            return HISTORY
        target = _attr(gm, what if kind == "attr" else what.target) if kind != "placeholder" else None
        t = example if target is None else target
        if t.is_inference() or t.layout != torch.strided:
            return None  # cannot be written back outside inference mode, or at all
        nbytes += _nbytes(t)
        if nbytes > SNAPSHOT_LIMIT:
            return None  # (an optimizer step writing its state: not copied on every call)
        if target is None:
            args.append(placeholders.index(what))
        elif all(target is not u for u in tensors):
            tensors.append(target)
    return Plan(grad_mode, args, tensors, devices if rng else None)


def _on_host(written):
    """Whether a write is to a tensor off the GPU. A compiled graph's failing check on a CUDA
    device is a device-side assert, which leaves the device unusable, not an exception a rerun
    could answer: a snapshot of what it writes would be a cost on every call for nothing."""
    return any(example is None or example.device.type != "cuda" for _k, _w, example in written.values())


# The most a graph's snapshot may copy per call (bytes): beyond it the graph is not rerun.
SNAPSHOT_LIMIT = 256 * 1024


def _nbytes(t):
    n = t.numel()
    if isinstance(n, torch.SymInt):
        n = n.node.hint if n.node.has_hint() else SNAPSHOT_LIMIT + 1
    return int(n) * t.element_size()


def _effect(node, modules):
    """What running `node` twice could change outside the graph, beside the storages its
    "writes" meta names: None, "grad" (the grad mode; an inference-mode block's guard is left
    when the graph raises: graph/inference_blocks.py), "random" (the RNG state) or
    "unknown" (autocast state, a tensor resized or re-pointed, code we do not know)."""
    if node.op == "call_module":
        mod = modules.get(node.target)
        if mod is None or "module_state" not in node.meta:
            return "unknown"
        random = node.meta.get("random") or (mod.training and isinstance(mod, torch.nn.modules.dropout._DropoutNd))
        return "random" if random else None
    if node.op == "call_function" and \
            (getattr(node.target, "__module__", None) or "").split(".")[0] not in _KNOWN_MODULES:
        return "unknown"
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if not isinstance(name, str) or reshapes(node) or name in ("_enter_autocast", "_exit_autocast"):
        return "unknown"
    if name in ("_set_grad_enabled", "_enter_inference_mode"):  # (inference mode switches grad mode too)
        return "grad"
    if "writes" not in node.meta and ((name.endswith("_") and not name.endswith("__")) or
                                       "out" in node.kwargs or name in ("__setitem__", "setitem")):
        return "unknown"  # a node made without the aten spy (output_graph.create_node)
    # the aten spy says whether a node drew (a dropout switched off draws nothing); the names
    # stand in only for nodes made without it
    if node.meta["random"] if "random" in node.meta else name in _RANDOM:
        if any(isinstance(a, torch.Generator) for a in (*node.args, *node.kwargs.values())):
            return "unknown"  # a generator of the user's own: its state is not saved
        return "random"
    return None


def _attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


class Plan:
    """A graph that may rerun: what to put back when it raises, so that nothing outside has
    changed when the frame runs again. `grad_mode`: the mode the graph found (None: it does
    not switch it; graph_raised puts it back). `args` (positions of graph inputs) and
    `tensors` (parameters, buffers, a leaf module's own state) are what the graph writes in
    place: the wrapper snapshots them (values and version counters) before each call and
    puts them back when it raises. `devices`: the RNG states to save and restore (a graph
    drawing random numbers)."""

    # whether a try/with of the traced code is around an op of the graph: the frame run as
    # Python then returns normally where the graph raised (no GraphRunWarning); set by the trace
    handled = False

    def __init__(self, grad_mode, args=(), tensors=(), devices=None):
        self.grad_mode, self.args, self.tensors, self.devices = grad_mode, tuple(args), tuple(tensors), devices

    def wrap(self, compiled):
        if not (self.args or self.tensors or self.devices is not None):
            return compiled
        arg_ix, fixed = self.args, self.tensors
        cuda = sorted({d.index or 0 for d in self.devices or () if d.type == "cuda"})
        rng = self.devices is not None
        no_grad = torch.no_grad

        def run_restoring_on_error(*args):
            saved = [(t, t.clone(), t._version) for t in fixed] + \
                [(args[i], args[i].clone(), args[i]._version) for i in arg_ix]
            states = _rng_states(cuda) if rng else None
            try:
                return compiled(*args)
            except Exception:
                with no_grad():
                    for t, snapshot, _v in saved:
                        t.copy_(snapshot)
                _set_versions([t for t, _s, _v in saved], [v for _t, _s, v in saved])
                if states is not None:
                    _set_rng_states(cuda, states)
                raise
        skip_code(run_restoring_on_error.__code__)
        run_restoring_on_error.__wrapped__ = compiled  # (tracer/tools/pyrender names the graph through it)
        return run_restoring_on_error


def _set_versions(tensors, versions):
    """Put the tensors' version counters (autograd's saved-tensor checks read them) back
    where they were before the graph: the rerun makes the user's writes again."""
    if tensors:
        _unsafe_set_version_counter(tuple(tensors), tuple(versions))


try:
    _unsafe_set_version_counter = torch._C._autograd._unsafe_set_version_counter
except AttributeError:  # (an older torch: counters stay one write ahead)
    def _unsafe_set_version_counter(tensors, versions):
        pass


def _rng_states(cuda):
    return torch.get_rng_state(), [torch.cuda.get_rng_state(i) for i in cuda]


def _set_rng_states(cuda, states):
    torch.set_rng_state(states[0])
    for i, state in zip(cuda, states[1]):
        torch.cuda.set_rng_state(state, i)


def _plain(code):
    """The code with a flat signature (the slots the rewritten code has), skipped by the frame
    hook. A new code object: the rewritten code holds it, never `code` itself, which keys
    the cache that holds the rewritten code (a reference back would keep both alive)."""
    plain = flatten_signature(code)
    skip_code(plain)
    return plain


class _Plain:
    """Holds the plain copy in the rewritten code's constants. Not the code object itself: it
    compares equal to the code it copies (a signature without *args is unchanged), and
    assembly merges equal constants, so a resume function made from that code would be made
    from the skipped copy and run untraced."""
    __slots__ = ("code",)

    def __init__(self, code):
        self.code = code


def run_as_python(plain, closure, *args):
    """The frame again, as plain Python, with its arguments (in its flat slots). Where it
    returns, the graph that raised was wrong: _python_did_not_raise says so."""
    globals_ = sys._getframe(1).f_globals
    raised, _RAISED.last = getattr(_RAISED, "last", None), None
    result = types.FunctionType(plain.code, globals_, plain.code.co_name, None, closure)(*args)
    if raised is not None:
        _python_did_not_raise(*raised)
    return result


def check_instrs(code, graph_out):
    """Instructions to put right after the graph call's store into `graph_out`."""
    cont = bc.Label()
    out = [bc.Instr("LOAD_FAST", graph_out), bc.Instr("LOAD_CONST", RERUN), bc.Instr("IS_OP", 0)]
    out += versions.cond_jump("POP_JUMP_IF_FALSE", cont)
    out += versions.load_const_callable(run_as_python)
    out.append(bc.Instr("LOAD_CONST", _Plain(_plain(code))))
    for name in code.co_freevars:
        out += versions.load_closure(name, free=True)
    out.append(bc.Instr("BUILD_TUPLE", len(code.co_freevars)) if code.co_freevars else bc.Instr("LOAD_CONST", None))
    names = arg_names(code)
    for name in names:
        out.append(bc.Instr("LOAD_DEREF", bc.CellVar(name)) if name in code.co_cellvars else bc.Instr("LOAD_FAST", name))
    out += versions.call(2 + len(names))
    out += versions.return_value()
    out.append(cont)
    return out
