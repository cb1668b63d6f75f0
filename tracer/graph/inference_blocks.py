"""Inference-mode blocks of a graph, as each kind of backend is given them.

The trace records a `with torch.inference_mode(mode):` block as torch.compile does, between
`torch.autograd.grad_mode._enter_inference_mode(mode)` and `_exit_inference_mode(guard)` nodes
(variables/mode_blocks.py). `guard` is a torch._C._InferenceMode, which gives the thread's
state back when it is left, or when it is destroyed: a graph that raises inside the block
leaves it in the traceback's frames, so the mode stays on in the caller's `except` block, and
the guards of nested blocks, destroyed with the frame in its slot order (outer first), give
back the wrong state. So the graph a backend gets has those nodes replaced (`for_backend`):

* for the eager backend, which runs the graph's own code, by `enter` and `leave` below, which
  keep the guards on a stack per thread; the compiled callable leaves the guards its call
  entered, innermost first, when it raises (`leaving_on_error`): the state an eager `with`
  leaves.
* for a compiling backend (AOTAutograd), by `torch._C._set_grad_enabled` nodes, as TorchDynamo
  compiles them (its fake_tensor_disable_inference_mode): what AOTAutograd compiles runs the
  block's ops in the frame's mode whatever it traced them in, and a guard entered while it
  traces, left behind when it raises there, gives back a dispatch state of that trace (its
  python dispatcher key) long after. Inference mode is no grad to the ops of the graph: where
  the difference shows, a tensor made in the block that leaves the graph, the frame breaks at
  the block instead (trace/convert_frame._inference_escapes_at).

Torch internals read here: torch.autograd.grad_mode._enter_inference_mode and
_exit_inference_mode, torch._C._InferenceMode; checked on torch 2.13.0, 2.14.1 and 2.15.0
(docs/torch.md lists them all; tests/test_torch_internals.py resolves each).
"""
import threading

import torch
import torch.fx as fx

from ..runtime.frame_hook import skip_code

_ENTER = torch.autograd.grad_mode._enter_inference_mode
_EXIT = torch.autograd.grad_mode._exit_inference_mode
_local = threading.local()


def opens(node):
    """Whether `node` enters an inference-mode block."""
    return node.op == "call_function" and node.target is _ENTER


def closes(node):
    """Whether `node` leaves an inference-mode block."""
    return node.op == "call_function" and node.target is _EXIT


def regions(graph):
    """{node: the enter node of the outermost inference-mode block it is made in}, for the
    nodes of `graph` made inside one."""
    inside, open_ = {}, []
    for node in graph.nodes:
        if opens(node):
            open_.append(node)
        elif closes(node):
            open_.pop()
        elif open_:
            inside[node] = open_[0]
    return inside


def _guards():
    stack = getattr(_local, "guards", None)
    if stack is None:
        stack = _local.guards = []
    return stack


def enter(mode):
    """The eager backend's `_enter_inference_mode(mode)`: the guard is kept on this thread's
    stack, not in the graph's frame."""
    stack = _guards()
    stack.append(torch._C._InferenceMode(mode))
    return len(stack)


def leave(depth):
    """The eager backend's `_exit_inference_mode`: leaves the innermost block."""
    _guards().pop().__exit__(None, None, None)


def leaving_on_error(compiled):
    """`compiled` (an eager graph with inference-mode blocks), leaving the blocks a call of it
    entered, innermost first, when it raises."""
    def run_leaving_blocks_on_error(*args):
        stack = _guards()
        depth = len(stack)
        try:
            return compiled(*args)
        except BaseException:
            while len(stack) > depth:
                stack.pop().__exit__(None, None, None)
            raise
    skip_code(run_leaving_blocks_on_error.__code__)
    run_leaving_blocks_on_error.__wrapped__ = compiled  # (tracer/tools/pyrender names the graph through it)
    return run_leaving_blocks_on_error


def for_backend(gm, compiling):
    """gm with its inference-mode nodes replaced for a compiling backend or the eager one
    (see above); gm itself when it has none. Its grad mode at the start is the one the graph
    is compiled in (its entry's guards hold it)."""
    if not any(opens(n) for n in gm.graph.nodes):
        return gm
    graph, env = fx.Graph(), {}
    grad, outer = torch.is_grad_enabled(), []  # (the grad mode the ops see, for a compiling backend)
    for node in gm.graph.nodes:
        new = env[node] = graph.node_copy(node, env.__getitem__)
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            grad = node.args[0]
        elif opens(node):
            outer.append(grad)
            grad = not node.args[0]  # (inference_mode(False) turns grad mode on)
            new.target, new.args = (torch._C._set_grad_enabled, (grad,)) if compiling else (enter, node.args)
        elif closes(node):
            grad = outer.pop()
            new.target, new.args = (torch._C._set_grad_enabled, (grad,)) if compiling else (leave, new.args)
    graph.lint()
    out = fx.GraphModule(gm, graph)
    if not compiling:  # (tracer/tools/pyrender names the graph through it)
        out.meta["traced_graph"] = gm
    return out
