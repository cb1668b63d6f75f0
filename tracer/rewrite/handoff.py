"""Sizes a graph break hands on as dynamic.

Automatic dynamic shapes make a dimension symbolic once a code object sees it change: one
trace with the first size, one more when it changes. Across a graph break the rest of the
frame is a new code object (a resume function), and what it is given is often already known
to vary: values the breaking trace held with symbolic sizes, and the results of the op that
broke it when that op's output size depends on the data (nonzero, nms, unique). Learning that
again cost each resume function, and each function called at a break, a trace of its own on
the first change: a detector's chain of them traced again on every call's first new size.

The break hands it on instead. For each argument of a resume function, and each parameter of a
Python function called at the break: the dimensions of the tensors in it that were symbolic
(an int or float that was a symbol stays one too, also as an item of a torch.Size or tuple:
`sz = x.shape` kept across the break), or dimension 0 for a result whose size came
from the data (such ops select rows, and what is made from their results keeps the rows). They
are recorded in that code object's FrameSizes (runtime/cache.py), and its traces make them
dynamic from the first. Only under automatic
dynamic (`dynamic=None`), and only ever more dynamic, never less: a guess that is too wide
costs a specialisation, never a wrong result (sizes 0 and 1 still specialise, as torch's
ShapeEnv does for every symbol).
"""
import types

import torch

from bytecode_utils import arg_names, versions
from bytecode_utils.resume import resume_origin

from ..graph.shapes import is_symbolic
from ..runtime.cache import cache_for, number_at
from ..variables.containers import (BaseSequence, DictVariable, IteratorVariable, ListIteratorVariable,
                                    ListVariable)
from ..variables.functions import BoundMethodVariable, UserFunctionVariable
from ..variables.nn_module import NNModuleVariable
from ..variables.objects import lookup_type_attr
from ..variables.base import ObjectVariable, Variable
from ..variables.stack_values import MethodRef, NullVariable
from ..variables.sym import SymNodeVariable
from ..variables.tensor import TensorVariable

DATA_ROWS = frozenset(((None, 0),))  # what a data-dependent result hands on: dim 0 of any rank
_DEPTH = 4  # containers looked into (a list of dicts of tensors is 2)
_GENERATOR = 0x20 | 0x80 | 0x100 | 0x200  # a call of these returns no value of the code's


def symbolic_dims(var, depth=0, path=()):
    """The dimensions that are symbolic in some tensor under `var` (a Variable: tensors, and
    tuples, lists and dicts of them), as (rank, dim): a list of boxes and masks hands on the
    boxes' dims to tensors of their rank, the masks' to theirs. An int (float) that is a
    symbol is handed at its item path (`number_at`): `var` itself, or an item of a torch.Size
    or tuple kept across the break (`path` None: under no path the receiving frame reads items
    by, an iterator's)."""
    if isinstance(var, TensorVariable):
        shape = getattr(var.example, "shape", ())
        return frozenset((len(shape), i) for i, s in enumerate(shape) if is_symbolic(s))
    if isinstance(var, SymNodeVariable):
        symbolic = path is not None and isinstance(var.value, (torch.SymInt, torch.SymFloat)) and \
            is_symbolic(var.value)
        return frozenset((number_at(path),)) if symbolic else frozenset()
    if depth >= _DEPTH:
        return frozenset()
    out = frozenset()
    for item, item_path in _items_with_paths(_seq_of(var), path):
        if isinstance(item, Variable):  # (not a list item never read)
            out |= symbolic_dims(item, depth + 1, item_path)
    if isinstance(var, ListVariable) and var.append_only:
        # an input list whose own items were never read (reading them would guard its length):
        # its items get what this frame was handed for the argument it is read through
        policy = var.unread_by.output.shapes.policy
        if policy.mode is None and var.source is not None:
            out |= policy.frame.handed_under(var.source)
    return out


def _items_with_paths(var, path):
    """(item, its item path under the argument, or None) for the items of a container: the
    path the receiving frame's sources read the item by (ItemSource keys)."""
    def under(key):
        return None if path is None else path + (key,)
    if isinstance(var, ListVariable) and var.append_only:
        return [(v, None) for v in var.appended]  # (after items never read: no index known)
    if isinstance(var, BaseSequence):
        return [(v, under(i)) for i, v in enumerate(var.items)]
    if isinstance(var, IteratorVariable):
        return [(v, None) for v in var.items]
    if isinstance(var, DictVariable):  # (an unread value of an input dict: no Variable of the trace's)
        return [(v, under(k) if type(k) in (int, str) else None) for k, v in var.stored.items()]
    return []


def _seq_of(var):
    """The list a list iterator reads (a comprehension's `.0`; it lets go of it when done)."""
    if isinstance(var, ListIteratorVariable) and var.lst is not None:
        return var.lst
    return var


def hand_to(code, names, dims):
    """Record `dims[i]` (a set of (rank or None, dim)) for argument `names[i]` of `code`."""
    sizes = None
    for name, d in zip(names, dims):
        if d:
            sizes = sizes or cache_for(code).sizes
            sizes.hand(name, d)


def hand_to_resume(rcode, arg_dims):
    """`arg_dims`: per positional argument of the resume code, the dimensions handed on."""
    hand_to(rcode, rcode.co_varnames[:len(arg_dims)], arg_dims)


def hand_to_callee(instrs, inst, inputs):
    """The break runs `inst`, a call, natively: the Python function it calls is traced as a
    frame of its own. Hand it the symbolic dimensions of its positional arguments; return its
    code (None: not a plain call of a Python function), whose return value the resume
    function gets (link_return)."""
    if inst.opname != "CALL" or versions.call_kw_names(instrs, inst.index):
        return None
    values = [v for v in inputs if not isinstance(v, NullVariable)]
    if not values:
        return None
    fn, first = _callee(values[0])
    if fn is None:
        return None
    code = fn.__code__
    dims = [symbolic_dims(a) for a in values[1:]]
    if any(dims):
        hand_to(code, arg_names(code)[:code.co_argcount], [frozenset()] * first + dims)
    return code


def link_return(callee, rcode, name):
    """What `callee` returns is argument `name` of `rcode`: the sizes its traces return as
    symbolic (hand_return) are handed on to it, those already seen at once."""
    if callee.co_flags & _GENERATOR:
        return
    sizes = cache_for(callee).sizes
    sizes.returns_to.add((rcode, name))
    if sizes.returned:
        hand_to(rcode, [name], [sizes.returned])


def hand_return(code, ret):
    """A trace of `code` returns `ret` (a Variable): a resume function returns what its
    original code returns, so the original's links (link_return) get its symbolic sizes."""
    dims = symbolic_dims(ret)
    if not dims:
        return
    origin = resume_origin(code)
    sizes = cache_for(origin[0] if origin is not None else code).sizes
    sizes.returned |= dims
    for rcode, name in sizes.returns_to:
        hand_to(rcode, [name], [dims])


def note_root_call(ctx, code, bound):
    """The root frame calls `code` with `bound` ({parameter: Variable}): if the frame runs as
    Python after all, that call runs natively, its frame traced on its own (hand_to_callees).
    Read when the trace fails (root_call_dims): a list's items are wrapped, with their sizes,
    when first read."""
    ctx.root_calls.append((code, {n: _seq_of(v) for n, v in bound.items()}))


def root_call_dims(root_calls):
    """[(code, {parameter: symbolic dimensions})] of TraceContext's `root_calls`."""
    out = []
    for code, bound in root_calls:
        dims = {name: d for name, d in ((n, symbolic_dims(v)) for n, v in bound.items()) if d}
        if dims:
            out.append((code, dims))
    return out


def hand_to_callees(call_dims):
    """A frame runs as Python: the calls its trace made with symbolic sizes (root_call_dims)
    hand them on."""
    for code, dims in call_dims:
        hand_to(code, list(dims), list(dims.values()))


def _callee(var):
    """(the Python function a call of `var` runs a frame of, how many arguments go before the
    call's own: a bound `self`), or (None, 0). Read without running user code: attributes
    through the class's dict, submodules through `_modules`."""
    if isinstance(var, UserFunctionVariable):
        return var.fn, 0
    if isinstance(var, BoundMethodVariable) and isinstance(var.func, UserFunctionVariable):
        return var.func.fn, 1
    if isinstance(var, NNModuleVariable):
        return _plain_forward(var.module), 1
    if isinstance(var, MethodRef) and isinstance(var.obj, ObjectVariable):
        obj = var.obj.value
        if isinstance(obj, torch.nn.Module) and var.name in obj.__dict__.get("_modules", {}):
            return _plain_forward(obj._modules[var.name]), 1
        if var.name in getattr(obj, "__dict__", {}):
            return None, 0
        attr = lookup_type_attr(type(obj), var.name)[0]
        if isinstance(attr, types.FunctionType):
            return attr, 1
        if isinstance(attr, staticmethod) and isinstance(attr.__func__, types.FunctionType):
            return attr.__func__, 0
    return None, 0


def _plain_forward(module):
    """The forward function nn.Module.__call__ runs for `module` (None: one of its own)."""
    if module is None or type(module).__call__ is not torch.nn.Module.__call__ or "forward" in module.__dict__:
        return None
    forward = lookup_type_attr(type(module), "forward")[0]
    return forward if isinstance(forward, types.FunctionType) else None
