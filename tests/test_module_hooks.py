"""A compiled module with hooks: its own __call__ runs the hooks as in eager and the forward
in between is the compiled one (FSDP2 and DDP register hooks; they must not turn a compiled
model into a silent plain-Python one)."""
import warnings

import pytest
import torch
import torch.distributions.transforms as T
import torch.nn as nn
import torch.nn.utils.prune as prune

import tracer
from helpers import assert_captured, traced
from tracer.variables import checkpoint, folds, torch_objects, torch_vars


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu() + 1


def test_forward_hooks_run_around_the_compiled_forward():
    tracer.reset()
    m = Net()
    seen = []
    m.register_forward_pre_hook(lambda mod, args: seen.append("pre") or (args[0] * 2,))
    m.register_forward_hook(lambda mod, args, out: seen.append("post") or out - 1)
    c = tracer.compile(m)
    x = torch.randn(3, 4)
    s0 = tracer.stats()
    out = c(x)
    torch.testing.assert_close(out, m(x))
    assert seen == ["pre", "post", "pre", "post"]
    s1 = tracer.stats()
    assert s1.graphs - s0.graphs == 1 and s1.ops - s0.ops >= 3, s1
    assert "forward" not in m.__dict__, "the module is left as it was"
    c(torch.randn(3, 4))
    assert tracer.stats().frames_traced == s1.frames_traced, "warm: nothing traced"
    tracer.reset()


def test_forward_called_by_name_runs_no_hooks():
    """`m.forward(x)` skips the hooks `m(x)` would run. A leaf's graph node used to run the
    module's __call__, hooks included (a wrong result); a hook added after compiling
    recompiles."""
    tracer.reset()
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda m, i, o: o * 10)
    plain = nn.Linear(2, 2)

    def f(x):
        return lin.forward(x) + plain.forward(x)

    c = tracer.compile(f)
    x = torch.randn(3, 2)
    for _ in range(2):
        torch.testing.assert_close(c(x), f(x))
    s = tracer.stats()
    assert s.graphs == 1 and s.fallbacks == 0, s
    plain.register_forward_hook(lambda m, i, o: o * 100)
    torch.testing.assert_close(c(x), f(x))
    assert tracer.stats().frames_traced == s.frames_traced + 1, "the new hook recompiles"
    tracer.reset()


def test_eager_backend_calls_leaf_forward_directly(monkeypatch):
    """The eager backend's graph calls each leaf module's forward, not Module.__call__ (its
    dispatch costs about a microsecond per module per call); the entry's guards (no hooks)
    make the two the same, and a hook registered later recompiles and runs. (Leaves: stock
    modules with inline_stock_modules off, or one whose forward could not be inlined.)"""
    from tracer.graph.backends import call_forward, direct_module_calls
    monkeypatch.setattr(tracer.config, "inline_stock_modules", False)
    tracer.reset()
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.ReLU())
    c = tracer.compile(m)
    x = torch.randn(2, 4)
    torch.testing.assert_close(c(x), m(x))
    gm = c._compiled_forward.entries[0].graph
    assert sum(n.op == "call_module" for n in gm.graph.nodes) == 3  # what dumps show
    run = direct_module_calls(gm)
    assert [n.target for n in run.graph.nodes if n.op == "call_function"] == [call_forward] * 3
    ins = (x, m[0].weight, m[0].bias, m[1].weight, m[1].bias)  # (a leaf's state: graph inputs)
    torch.testing.assert_close(run(*ins), gm(*ins))  # (the graph's outputs, as a tuple)
    seen = []
    m[1].register_forward_hook(lambda mod, i, o: seen.append(1) or o + 1)
    torch.testing.assert_close(c(x), m(x))
    assert seen == [1, 1]
    tracer.reset()


def test_patched_module_dispatch_is_honoured_before_and_after_compiling():
    """A process-wide patch of nn.Module.__call__ / _call_impl (profilers, debugging shims)
    runs as in eager: the module call is left to Python while it is patched, and patching
    after compiling recompiles (the class entries are guarded)."""
    tracer.reset()
    lin = nn.Linear(4, 4)

    def f(x):
        return lin(x) + 1

    x = torch.randn(2, 4)
    c = tracer.compile(f)
    torch.testing.assert_close(c(x), f(x))  # compiled while torch's own dispatch is in place
    orig = nn.Module._call_impl
    nn.Module._call_impl = lambda self, *a, **k: orig(self, *a, **k) * 2
    try:
        for _ in range(2):
            torch.testing.assert_close(c(x), f(x))
    finally:
        nn.Module._call_impl = orig
    seen = []
    orig_call = nn.Module.__call__

    def wrapped(self, *a, **k):
        seen.append(type(self).__name__)
        return orig_call(self, *a, **k)

    nn.Module.__call__ = wrapped
    try:
        torch.testing.assert_close(c(x), f(x))
        assert seen == ["Linear", "Linear"]  # eager's call and the compiled one
    finally:
        nn.Module.__call__ = orig_call
    torch.testing.assert_close(c(x), f(x))
    tracer.reset()


def _hooked(kind):
    """A Linear + Tanh whose Linear has a forward pre-hook that is an object of a torch class
    with a Python __call__ (the pruning methods, the old weight_norm and spectral_norm)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the old weight_norm is deprecated)
        if kind == "prune":
            prune.l1_unstructured(m[0], "weight", amount=0.5)
        elif kind == "prune twice":  # (a PruningContainer)
            prune.l1_unstructured(m[0], "weight", amount=0.5)
            prune.random_unstructured(m[0], "weight", amount=0.3)
        elif kind == "weight_norm":
            torch.nn.utils.weight_norm(m[0])
        else:
            torch.nn.utils.spectral_norm(m[0])
    return m


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("kind", ["prune", "prune twice", "weight_norm", "spectral_norm"])
def test_torch_class_pre_hooks_are_traced_as_python(kind, train, backend):
    """A forward pre-hook that is an object of a torch class (L1Unstructured, WeightNorm,
    SpectralNorm: their __module__ is torch's) was taken for a torch function to put in the
    graph: 'NNModule(self.0: Linear) passed to a torch op', and inside nn.Sequential's loop
    the whole frame ran as Python. Its __call__ is Python code, inlined as a user object's:
    one graph, no break, and outputs, gradients, the weight the hook sets on the module and
    spectral_norm's power-iteration buffers (written in place in train mode) equal eager's
    after every call."""
    tracer.reset()
    m, ref = _hooked(kind).train(train), _hooked(kind).train(train)
    c = tracer.compile(m, backend=backend)
    with traced() as t:
        for _ in range(3):
            x = torch.randn(2, 4)
            out, exp = c(x), ref(x)
            torch.testing.assert_close(out, exp)
            out.pow(2).sum().backward()
            exp.pow(2).sum().backward()
            for (name, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
                torch.testing.assert_close(p.grad, q.grad, msg=name)
            for (name, b), (_, e) in zip(m.named_buffers(), ref.named_buffers()):
                torch.testing.assert_close(b, e, msg=name)
            torch.testing.assert_close(m[0].weight, ref[0].weight)
    assert_captured(t, graphs=1, breaks=0, fallbacks=0)
    assert t.frames_traced == 1 and t.recompiles == 0, t
    tracer.reset()


def test_torch_transform_objects_are_traced_as_python():
    """A torch.distributions Transform called in a frame: its class's __call__ is Python (with
    cache_size=1 it keeps the last (x, y) on the object). Taken for a torch function, looking
    it up among the calls the tracer answers itself hashed it (TypeError: an internal error,
    the frame ran as Python); inlined, one graph, and the cache holds real tensors."""
    tracer.reset()
    for tr in (T.ExpTransform(), T.ExpTransform(cache_size=1),
               T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)]), T.SigmoidTransform().inv):
        def f(x):
            return tr(x) + 1

        x = torch.randn(3)
        with traced() as t:
            out = tracer.compile(f, backend="eager")(x)
        assert_captured(t, graphs=1, breaks=0, fallbacks=0)
        assert tr._cache_size == 0 or type(tr._cached_x_y[1]) is torch.Tensor
        torch.testing.assert_close(out, f(x))
    tracer.reset()


def _copy(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def test_op_objects_and_modelled_calls_stay_torch_functions():
    """The dispatcher's callables (an OpOverload, its packet, a higher-order operator, a
    custom op) have a Python __call__ too, and stay graph ops; so do the calls the value model
    answers itself (all functions)."""
    ops = [torch.ops.aten.sin, torch.ops.aten.sin.default, torch.ops.higher_order.cond]
    ops.append(torch.library.custom_op("tracer_tests::hook_probe", _copy, mutates_args=()))
    modelled = [*torch_vars.SAVED_HOOKS_CALLS, *folds.FOLDED, *torch_vars._DTYPE_ALGEBRA, checkpoint.CHECKPOINT]
    for fn in ops + modelled:
        assert not torch_objects.is_traced_object(fn, type(fn)), fn
    assert torch_objects.is_traced_object(prune.L1Unstructured(0.5), prune.L1Unstructured)
