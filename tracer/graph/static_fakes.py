"""Fakes of parameters and buffers, made without torch's meta converter where that is exact.

Why: a model's every parameter and buffer is a graph input with a static fake, and torch's
`FakeTensorMode.from_tensor` describes each tensor in full (views, storages, symbolic
contexts, autograd metadata) before making its fake: about 150 us each on this machine, a
tenth of a 48-layer encoder's first call (577 parameters). A plain parameter or buffer that
owns its whole storage, is no view and has no autograd history or gradient has nothing for
that description to find: its fake is a meta tensor of the same sizes, strides, dtype and
requires_grad, wrapped as a FakeTensor on the tensor's device (about 20 us). It is entered
in the converter's memo, so that `from_tensor` of the same tensor later returns this fake,
as it would have returned its own.

Anything else (a subclass, a view, a tensor whose storage anything else holds, a gradient,
inference or conj/neg bits, a functorch wrapper, another layout) goes through `from_tensor`
as before, which tracks aliasing between fakes. The meta tensor is made as `from_tensor`
makes its own: outside inference mode and outside the dispatch modes the user entered.

Torch internals read here: FakeTensorConverter.set_tensor_memo/_get_memo and the meta
converter's MetaTensorDescriber tables (forget_real_tensors); checked on torch 2.13.0 (docs/torch.md
lists them all; tests/test_torch_internals.py resolves each).
"""
import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_DEVICES = ("cpu", "cuda")
_wrapped = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
_use_count = getattr(torch._C, "_storage_Use_Count", None)


def _alone():
    """The use count of a storage only its tensor holds, as read here (the Python storage
    object asked for may count too; the tensor is kept alive while it is read)."""
    t = torch.empty(1)
    return _use_count(t.untyped_storage()._cdata)


_ALONE = _alone() if _use_count is not None else None


def static_fake(fake_mode, tensor):
    """`fake_mode.from_tensor(tensor, static_shapes=True)`, made the short way when exact."""
    fake = _short(fake_mode, tensor) if _plain(tensor) else None
    return fake if fake is not None else fake_mode.from_tensor(tensor, static_shapes=True)


def forget_real_tensors(fake_mode):
    """Drop what `fake_mode`'s converter knows of the real tensors it made fakes of: its
    describer keys them by `WeakIdRef`, a weakref on each user tensor, and
    `torch.utils.swap_tensors` refuses a tensor with any weakref ("Cannot swap t1 because it has
    weakref associated with it"). The fakes outlive the trace in the entry's graph (node
    metadata), and with them the mode; nothing fakifies a real tensor under it after the
    trace and the backend's compile. (TorchDynamo clears the same two tables after a compile:
    convert_frame._clear_fake_mode_weakrefs.)"""
    describer = fake_mode.fake_tensor_converter.meta_converter.describer
    describer.lookup_tensor.clear()
    describer.lookup_storage.clear()


def _plain(t):
    return (type(t) in _PLAIN and t.layout is torch.strided and t.device.type in _DEVICES
            and t.grad_fn is None and t._base is None and t.grad is None and t.storage_offset() == 0
            and not (t.is_quantized or t.is_inference() or t.is_conj() or t.is_neg()
                     or torch._is_functional_tensor(t) or (_wrapped is not None and _wrapped(t))))


def _short(fake_mode, t):
    converter = fake_mode.fake_tensor_converter
    if converter._get_memo(t) is not None:  # met before (by from_tensor): that fake
        return None
    storage = t.untyped_storage()
    if _ALONE is None or _use_count(storage._cdata) != _ALONE:
        return None  # another tensor holds its storage (`Parameter(a.data)`, a view of it)
    if torch.is_inference_mode_enabled() or torch._C._len_torch_dispatch_stack():
        with _disable_current_modes(), torch.inference_mode(False):
            fake = _make(fake_mode, t, storage)
    else:  # (the two context managers were a third of the short way's cost)
        fake = _make(fake_mode, t, storage)
    if fake is None:
        return None
    if type(t) is torch.nn.Parameter:
        fake._is_param = True  # (as the meta converter marks a parameter's fake)
    converter.set_tensor_memo(t, fake)
    return fake


def empty_fake(fake_mode, shape, stride, dtype, device):
    """What `torch.empty_strided` gives under `fake_mode`, made the short way (a meta tensor
    wrapped: a tenth of the cost of the op's dispatch through the mode)."""
    if torch.is_inference_mode_enabled() or torch._C._len_torch_dispatch_stack():
        with _disable_current_modes(), torch.inference_mode(False):
            meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    else:
        meta = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
    return FakeTensor(fake_mode, meta, device)


def _make(fake_mode, t, storage):
    meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta", requires_grad=t.requires_grad)
    if meta.untyped_storage().nbytes() != storage.nbytes():
        return None  # a larger storage than its sizes need: from_tensor describes it
    return FakeTensor(fake_mode, meta, t.device)
