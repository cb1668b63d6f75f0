"""A graph that raises makes its frame run again as Python, from its start.

Why: the rewritten code calls the graph first and replays the side effects the traced code
made (attribute and container writes, globals, prints) after it. When an op in the graph
raises at run time (a kernel check that fake tensors do not make: `relu` of a bool tensor,
an index out of range), the writes the program made *before* that op in eager are never
made, and an `except` in the caller sees different state: a wrong result. Nothing observable
has happened yet when the graph raises, if the graph itself changes nothing (no in-place op,
no random numbers, no grad-mode or autocast switch, no module with buffers or dropout): the
frame's locals are still its arguments. So the rewritten code checks the graph's result for
RERUN (what the graph call returns instead of raising, `untraced(fn, graph_raised)` in the
C hook: no cost when the graph returns) and then calls the code as plain Python with the
same arguments (the same closure cells; the frame hook skips that copy), which raises where
eager raises, with every earlier write made. A graph that changes something keeps raising
as before (a known gap: the README says so).
"""
from __future__ import annotations

import sys
import types

import bytecode as bc
import torch

from bytecode_utils import arg_names, flatten_signature, versions
from bytecode_utils.codegen import GENERATOR_FLAGS

from . import records


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


def graph_raised(name):
    """The on_error of a graph's `untraced` wrapper: record it, and tell the frame to rerun."""
    def on_error(exc):
        records.graph_rerun(name, exc)
        return RERUN
    return on_error


def applies(code, gm):
    """Whether a graph error can rerun this frame: a plain function frame whose graph has no
    effect outside its outputs."""
    return not code.co_flags & GENERATOR_FLAGS and graph_is_pure(gm)


def graph_is_pure(gm):
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if "out" in node.kwargs:
            return False
        if node.op == "call_module":
            mod = modules.get(node.target)
            if mod is None or any(True for _ in mod.buffers()) or \
                    (mod.training and isinstance(mod, torch.nn.modules.dropout._DropoutNd)):
                return False
            continue
        if node.op == "call_function" and \
                (getattr(node.target, "__module__", None) or "").split(".")[0] not in _KNOWN_MODULES:
            return False
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        if not isinstance(name, str) or (name.endswith("_") and not name.endswith("__")) or \
                name in _RANDOM or name in ("__setitem__", "setitem", "_set_grad_enabled",
                                            "_enter_autocast", "_exit_autocast"):
            return False
    return True


def _plain(code):
    """The code with a flat signature (the slots the rewritten code has), skipped by the frame
    hook. A new code object: the rewritten code holds it, never `code` itself, which keys
    the cache that holds the rewritten code (a reference back would keep both alive)."""
    plain = flatten_signature(code)
    try:
        from .frame_hook import skip_code
        skip_code(plain)
    except ImportError:
        pass
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
    """The frame again, as plain Python, with its arguments (in its flat slots)."""
    globals_ = sys._getframe(1).f_globals
    return types.FunctionType(plain.code, globals_, plain.code.co_name, None, closure)(*args)


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
