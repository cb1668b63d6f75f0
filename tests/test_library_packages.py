"""Libraries built on torch whose package name begins with "torch" (torchvision, torchaudio,
torch_geometric...) are user code, not torch (issue 32, cause 1): runtime/policy.py classifies
by top-level package, so their Python functions are inlined (a function returning a tuple, a
function passed to another, one reading `fn.__module__` as torchvision's _log_api_usage_once
does), their objects are ordinary objects and their classes are built symbolically. Each test
builds a tiny package named `torchtinylib` in a temporary directory (no torchvision needed) and
compares compiled with eager, the graphs and breaks, and that warm calls trace nothing."""
import sys
import textwrap

import pytest
import torch

import tracer
from tracer.runtime import policy

_LIB = '''
import types
import torch


def _log_api_usage_once(obj):
    # as torchvision.utils does: the object's module and name, logged through torch's C hook
    module = obj.__module__
    if not module.startswith("torchtinylib"):
        module = f"torchtinylib.internal.{module}"
    name = obj.__class__.__name__
    if isinstance(obj, types.FunctionType):
        name = obj.__name__
    torch._C._log_api_usage_once(f"{module}.{name}")


def split_boxes(boxes):
    _log_api_usage_once(split_boxes)
    return boxes[:, :2], boxes[:, 2:], [boxes.shape[1] // 2]


def clip(boxes, size):
    return boxes.clamp(min=0, max=size)


def apply(fn, boxes):
    return fn(boxes, 4.0)


class Coder:
    def __init__(self, weights):
        _log_api_usage_once(self)
        self.weights = weights

    def encode(self, boxes):
        return boxes * self.weights[0] - self.weights[1]


class Mapper:
    """A callable helper object (torchvision's LevelMapper)."""

    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return torch.floor(x * self.k)


class Holder:
    """A plain container of tensors and sizes (torchvision's ImageList)."""

    def __init__(self, tensors, sizes):
        self.tensors = tensors
        self.sizes = sizes
'''


@pytest.fixture
def lib(tmp_path, monkeypatch):
    pkg = tmp_path / "torchtinylib"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(_LIB))
    monkeypatch.syspath_prepend(str(tmp_path))
    import torchtinylib
    tracer.reset()
    yield torchtinylib
    tracer.reset()
    sys.modules.pop("torchtinylib", None)


def run(fn, *args, graphs=1, breaks=0):
    """Compile fn, call it twice; compare with eager; assert the first call's graph/break
    counts, no fallback, and that the second call traced nothing."""
    c = tracer.compile(fn)
    out = c(*args)
    s = tracer.stats()
    torch.testing.assert_close(out, fn(*args))
    assert (s.graphs, s.graph_breaks, s.fallbacks) == (graphs, breaks, 0), f"{s}"
    torch.testing.assert_close(c(*args), fn(*args))
    assert tracer.stats().frames_traced == s.frames_traced
    return s


def test_policy_classifies_by_top_level_package():
    assert policy.is_torch_module("torch") and policy.is_torch_module("torch.nn.functional")
    assert policy.is_torch_module("torch._ops.torchvision")  # a library's registered ops are torch's
    for name in ("torchvision", "torchvision.ops.boxes", "torchaudio", "torch_geometric", None):
        assert not policy.is_torch_module(name)
    assert not policy.is_torch_value(object())  # (no __module__)


def test_library_function_returning_a_tuple_is_inlined(lib):
    """Once a single opaque node: 'torch op returned tuple, which has no graph meaning' (a
    tensor and a list of ints, as torchvision's swin3d window helpers return); its
    _log_api_usage_once(split_boxes) read `__module__` of a 'torch callable' (a break)."""
    def f(x):
        a, b, sizes = lib.split_boxes(x)
        return a * sizes[0] + b

    run(f, torch.randn(5, 4))


def test_library_function_passed_to_a_library_function(lib):
    """Once 'the function clip passed to a torch op'."""
    def f(x):
        return lib.apply(lib.clip, x) + 1

    run(f, torch.randn(5, 4) * 8)


class _Head(torch.nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.coder = lib.Coder((2.0, 0.5))
        self.mapper = lib.Mapper(3.0)
        self.lib = lib

    def forward(self, x):
        held = self.lib.Holder(self.lin(x), [(2, 2)])
        y = self.coder.encode(held.tensors)
        return self.mapper(y) + held.sizes[0][0]


def test_library_helper_objects_are_ordinary_objects(lib):
    """An attribute object (BoxCoder: once 'value of type BoxCoder', a fallback), a callable
    object (LevelMapper: once an internal error in FX, '... object has no attribute __name__'),
    and a container built in the frame (ImageList) are user objects: one graph."""
    m = _Head(lib)
    run(m, torch.randn(3, 4))


def test_library_object_constructed_inside_the_frame(lib):
    """Coder.__init__ logs through torch._C._log_api_usage_once(f"...{obj.__class__.__name__}")."""
    def f(x):
        return lib.Coder((3.0, 1.0)).encode(x)

    run(f, torch.randn(4))


class _TorchCallable:
    """A callable object of torch's (no __name__), of a part of torch that FX does not name
    from `torch` (torch._inductor): called as a torch callable, it is one graph node whose
    target is held as an object (FX names a node after its target's __name__: once an
    internal error, as torchvision's LevelMapper gave when torchvision was 'torch')."""

    __module__ = "torch._inductor.tracer_test_callable"

    def __call__(self, x):
        return torch.sin(x) * 2


def test_torch_callable_object_without_a_name_is_a_graph_node():
    tracer.reset()
    obj = _TorchCallable()

    def f(x):
        return obj(x) + 1

    try:
        run(f, torch.randn(4))
    finally:
        tracer.reset()


def test_torch_device_of_constants_is_a_constant(lib):
    """torchvision's make_coords_grid builds torch.device(device) inside inlined code."""
    def f(x):
        d = torch.device("cpu")
        return x + torch.arange(4, device=d)

    run(f, torch.randn(4))


# ---- a library's registered ops (torch.ops.torchvision.nms / roi_align) ------------------------

@torch.library.custom_op("tracer_tinylib::scale", mutates_args=())
def _scale(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k


@_scale.register_fake
def _(x, k):
    return torch.empty_like(x)


# (registered as torchvision registers nms: a schema, a kernel and a fake kernel; an op made
# with torch.library.custom_op runs a dataclass __init__ of torch's under the hook)
torch.library.define("tracer_tinylib::keep", "(Tensor x) -> Tensor")


@torch.library.impl("tracer_tinylib::keep", "cpu")
def _keep(x):
    return torch.nonzero(x > 0).flatten()


@torch.library.register_fake("tracer_tinylib::keep")
def _(x):
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty((n,), dtype=torch.long)


def test_library_op_is_a_graph_node():
    """torch.ops.<library>.<op> is torch's (module torch._ops.<library>): one node."""
    tracer.reset()

    def f(x):
        return torch.ops.tracer_tinylib.scale(x, 3.0) + 1

    try:
        run(f, torch.randn(4))
    finally:
        tracer.reset()


def test_library_op_with_a_data_dependent_shape_is_a_clean_break():
    """As torchvision's nms: its output size depends on the data, which fake tensors do not
    have; a graph break that names the op (as torch.compile breaks), not an error."""
    tracer.reset()

    def f(x):
        idx = torch.ops.tracer_tinylib.keep(x * 2)
        return idx + 1

    try:
        c = tracer.compile(f)
        x = torch.tensor([1.0, -1.0, 2.0, 0.0])
        torch.testing.assert_close(c(x), f(x))
        s = tracer.stats()
        assert s.fallbacks == 0 and s.internal_errors == 0, f"{s}"
        assert any("keep" in r for r in s.break_reasons), f"{s}"
    finally:
        tracer.reset()
