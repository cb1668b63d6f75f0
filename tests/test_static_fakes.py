"""Parameters' and buffers' fakes made the short way (tracer/graph/static_fakes.py): the same
metadata as torch's from_tensor, the same memo, and from_tensor itself for anything else."""
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import tracer
from helpers import traced
from tracer.graph import static_fakes
from tracer.graph.static_fakes import static_fake


def _facts(f):
    return (type(f), tuple(f.shape), f.stride(), f.storage_offset(), f.dtype, f.device, f.requires_grad,
            f.is_leaf, getattr(f, "_is_param", False), f.untyped_storage().nbytes(), f._is_view())


def test_short_fake_has_from_tensors_facts_and_is_memoised():
    tensors = [torch.nn.Parameter(torch.randn(3, 4)), torch.nn.Parameter(torch.randn(5), requires_grad=False),
               torch.empty_strided((2, 3), (1, 2)).normal_(), torch.zeros(4, dtype=torch.int64), torch.randn(())]
    for t in tensors:
        assert static_fakes._plain(t), t
        short_mode, ref_mode = FakeTensorMode(), FakeTensorMode()
        short = static_fakes._short(short_mode, t)  # (the short way is taken)
        assert short is not None, t
        ref = ref_mode.from_tensor(t, static_shapes=True)
        assert isinstance(short, FakeTensor) and _facts(short) == _facts(ref)
        assert short_mode.from_tensor(t) is short  # (later from_tensor calls find it)
        assert static_fake(short_mode, t) is short
        with short_mode:  # it computes like any fake
            y = (short * 2).sum()
        assert y.requires_grad == t.requires_grad


def test_tensors_the_short_way_cannot_describe_go_through_from_tensor():
    base = torch.randn(6)
    grad = torch.nn.Parameter(torch.randn(3))
    grad.grad = torch.ones(3)
    others = {
        "a view": base[2:],
        "a view at offset 0 of a larger storage": base[:3],
        "history": torch.randn(3, requires_grad=True) * 2,
        "a gradient": grad,
        "an inference tensor": torch.inference_mode()(lambda: torch.ones(2))(),
        "conj bit": torch.randn(2, dtype=torch.complex64).conj(),
    }
    for what, t in others.items():
        mode = FakeTensorMode()
        if static_fakes._plain(t):  # (a plain-looking view: the storage size tells)
            assert static_fakes._short(mode, t) is None, what
        ref = FakeTensorMode().from_tensor(t, static_shapes=True)
        got = static_fake(mode, t)
        assert _facts(got) == _facts(ref), what


def test_tied_and_flat_parameters_compile_to_eager_answers():
    """Tied weights (one tensor, two paths) and parameters that are views of one flat buffer
    (as FSDP keeps them): the fakes keep the aliasing, the compiled model eager's values."""
    torch.manual_seed(0)

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4)
            self.b.weight = self.a.weight
            flat = torch.randn(20)
            self.register_buffer("flat", flat)
            self.register_buffer("w", flat[:16].view(4, 4))

        def forward(self, x):
            return self.b(self.a(x)) + x @ self.w + self.flat[16:]

    m = Tied()
    x = torch.randn(2, 4)
    c = tracer.compile(m, fullgraph=True, backend="aot_eager")
    with traced() as t:
        for _ in range(2):
            torch.testing.assert_close(c(x), m(x))
    assert (t.frames_traced, t.graphs, t.graph_breaks, t.internal_errors, t.recompiles) == (1, 1, 0, 0, 0), t


def test_fakes_made_under_inference_mode_and_of_shared_storages_are_from_tensors():
    """Found by review: a trace under torch.inference_mode() gave a parameter an inference
    fake (`w.is_inference()` answered True in the trace, False in eager); and a parameter
    sharing its storage with another (`Parameter(a.data)`) must keep the aliasing, which only
    from_tensor tracks."""
    lin = torch.nn.Linear(4, 4)
    with torch.inference_mode():
        mode = FakeTensorMode()
        fake = static_fake(mode, lin.weight)
        assert not fake.is_inference() and fake.requires_grad

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = lin

            def forward(self, x):
                w = self.lin.weight
                return self.lin(x) * (2 if w.is_inference() else 3), w.is_inference()

        m, x = M(), torch.randn(2, 4)
        ref = m(x)
        got = tracer.compile(m, backend="eager")(x)
    assert got[1] == ref[1] is False and torch.equal(got[0], ref[0])
    a = torch.nn.Parameter(torch.randn(3))
    b = torch.nn.Parameter(a.data)
    assert static_fakes._short(FakeTensorMode(), a) is None and static_fakes._short(FakeTensorMode(), b) is None
    mode = FakeTensorMode()
    fa, fb = static_fake(mode, a), static_fake(mode, b)
    assert fa.untyped_storage()._cdata == fb.untyped_storage()._cdata  # (from_tensor's aliasing)
