"""`torch._C._group_tensors_by_device_and_dtype` on Variables.

Why a fold: torch's gradient clipping and foreach optimizers split their tensor lists by
device and dtype before each foreach kernel (torch.utils._foreach_utils). The C function
returns a dict `(device, dtype) -> (the lists' entries of that group, their indices)`, which is
no graph value: as an op it was a graph break in the middle of every `clip_grad_norm_`.

Its answer depends only on each entry's device and dtype (which a tensor's guards pin, and
which the trace knows exactly for a tensor it made) and on which entries are None. The trace
asks torch itself, on empty stand-ins of the same devices and dtypes, so the keys come in
torch's own order (a hash map's, not first-seen order), and builds the same dict from the
Variables at the indices torch gives. Anything torch refuses (an empty first list, a None in
it) is a graph break: the call runs as Python and raises as in eager.

Torch internals read here: torch._C._group_tensors_by_device_and_dtype; checked on torch 2.13.0
(docs/torch.md lists them all; tests/test_torch_internals.py resolves each).
"""
import torch

from ..exc import Unsupported
from .base import ConstantVariable
from .folds import folds

_GROUP = torch._C._group_tensors_by_device_and_dtype


@folds(_GROUP)
def fold_group_by_device_and_dtype(tx, args, kwargs):
    if len(args) != 2 or kwargs or not args[1].is_constant():
        raise Unsupported("_group_tensors_by_device_and_dtype() with other than (lists, with_indices)")
    lists = [_entries(lst) for lst in _entries(args[0])]
    try:
        groups = _GROUP([[_stand_in(v) for v in lst] for lst in lists], True)
    except (RuntimeError, TypeError) as e:
        raise Unsupported(f"_group_tensors_by_device_and_dtype() raises on these lists ({e})") from None
    with_indices = bool(args[1].as_constant())
    return containers.DictVariable({key: _group(lists, indices, with_indices)
                                    for key, (_, indices) in groups.items()})


def _entries(var):
    """The items of a list or tuple argument (torch takes any sequence of them)."""
    if not isinstance(var, containers.BaseSequence):
        raise Unsupported(f"_group_tensors_by_device_and_dtype() of {var}")
    return list(var.items)


def _stand_in(var):
    """An empty tensor of the entry's device and dtype (all the grouping reads), or None."""
    if isinstance(var, tensor.TensorVariable) and var.example.layout is torch.strided:
        return torch.empty(0, device=var.example.device, dtype=var.example.dtype)
    if var.is_constant() and var.as_constant() is None:
        return None
    raise Unsupported(f"_group_tensors_by_device_and_dtype() of a list holding {var}")


def _group(lists, indices, with_indices):
    """One value of the dict: each list's entries at `indices`, and the indices if asked."""
    picked = containers.ListVariable([containers.ListVariable([lst[i] for i in indices]) for lst in lists])
    kept = [ConstantVariable(i) for i in indices] if with_indices else []
    return containers.TupleVariable([picked, containers.ListVariable(kept)])


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions.
from . import containers, tensor  # noqa: E402
