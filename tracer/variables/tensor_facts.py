"""Tensor facts a trace folds to constants that the inputs' TensorMatch does not pin.

An input's TensorMatch (torch's TensorGuards) checks its type, dispatch keys, dtype, device,
sizes, strides and requires_grad; a metadata query those decide (`x.dim()`,
`x.is_contiguous()`, `x.is_conj()`, `x.is_inference()`...) needs nothing more. The queries
here read more of the tensor object, so each read is guarded where it is made, on the inputs
its answer came from (a TensorFact each, guards/tensor.py): a frame that never reads one pays
nothing on its calls.

- where a tensor starts in its storage (`storage_offset`): an input's own; of a tensor the
  trace made, that of every input whose storage it views (`x[1:].storage_offset()` is x's
  plus 1); a symbolic offset (dynamic shapes) is the ShapeEnv's to guard;
- how the tensor object was made (`is_leaf`, `_is_view`): an input's own; a tensor an op made
  answers from its op and its inputs' guarded facts (requires_grad, grad mode);
- its storage's kind (`is_shared`, `is_pinned`): the input storage it views, answered from the
  real input (a fake tensor does not know it); a tensor over a storage the graph makes is a
  graph break, as is what no guard can pin: an address, a reference count, storage identity.
"""
import torch

from guards.tensor import FACT_READERS, UNKNOWN_STORAGE, TensorFact, storage_id

from ..exc import Unsupported
from ..graph.shapes import is_symbolic

# fact -> which inputs its answer came from: the input the tensor is ("object") or every input
# over the tensor's storage ("storage")
_FACTS = {"storage_offset": "storage", "is_leaf": "object", "_is_view": "object",
          "is_shared": "storage", "is_pinned": "storage"}
# facts the real input answers (the fake's answer is made up)
_FROM_REAL = frozenset({"is_shared", "is_pinned"})
# answers that change without the tensor changing, or name storage identity: never folded
_UNGUARDABLE = frozenset({"data_ptr", "const_data_ptr", "mutable_data_ptr", "_use_count", "is_set_to",
                          "storage_type", "_storage_id", "_storage_address"})  # (the last two: torch._C's)


def is_fact(name):
    """Whether folding `x.<name>` (an attribute or a call) may need fold()."""
    return name in _FACTS or name in _UNGUARDABLE


def fold(tx, var, name, value, with_args=False):
    """The constant `var.<name>` folds to, its answer `value` computed on the fake: the facts
    it came from are guarded (TensorFact on each input it depends on), a fact of the real
    input replaces the fake's answer, and one that no guard can pin is Unsupported (as is a
    fact asked `with_args`: the guards read each without)."""
    if name in _UNGUARDABLE:
        raise Unsupported(f"{name}() of a tensor reads an address or identity of its memory, which no "
                          "guard can pin")
    if with_args and name in _FACTS:
        raise Unsupported(f"Tensor.{name}() with arguments")
    kind = _FACTS.get(name)
    if kind is None or is_symbolic(value):  # (a symbolic offset: the ShapeEnv guards its uses)
        return value
    inputs = _inputs_of(tx, var.example, by_storage=kind == "storage")
    for source, real, fake in inputs:
        if name != "storage_offset" or not is_symbolic(fake.storage_offset()):
            tx.guard(TensorFact(source, name, FACT_READERS[name](real)))
    if name in _FROM_REAL:
        if not inputs:
            raise Unsupported(f"Tensor.{name}() of a tensor over a storage the graph makes (fake tensors "
                              "do not know it)")
        return FACT_READERS[name](inputs[0][1])
    return value


def _inputs_of(tx, fake, by_storage):
    """(source, real tensor, its fake) of the graph input whose fake is `fake`; of a tensor
    the trace made, with `by_storage`, of each input over the same storage (a view the trace
    makes shares its input's fake storage; which of them it was made from is not known)."""
    tensors = [(source, real, node.meta.get("example_value")) for source, node, real in tx.output.inputs
               if isinstance(real, torch.Tensor)]
    itself = [t for t in tensors if t[2] is fake]
    sid = storage_id(fake) if by_storage else UNKNOWN_STORAGE
    if itself or sid == UNKNOWN_STORAGE:
        return itself
    return [t for t in tensors if isinstance(t[2], torch.Tensor) and storage_id(t[2]) == sid]
