"""Autograd state the trace must leave exactly as eager does (found by a differential hunt
on 4ae4eb4; each test failed there):

* `x.data` was traced as `x.detach()`, which shares x's version counter: `x.data.add_(1)`
  bumped it, and backward through a graph that saved x raised "modified by an inplace
  operation" (eager: `.data` has a counter of its own);
* a `torch.no_grad()` object entered twice: the second block recorded autograd;
* `with fwAD.dual_level():` entered a real dual level while tracing (a torch function that
  changes state, called as a query): the compiled call raised "Nested forward mode AD is not
  supported", and the leaked level broke the next eager call too.

And gradients a compiling backend (AOTAutograd: aot_eager, inductor) got wrong where the eager
backend was right (a hunt on b6feaf6; each test failed there):

* a tensor made in the frame with requires_grad=True and used by the graph got no gradient
  (AOTAutograd differentiates with respect to the graph's inputs only);
* an in-place change of sizes or strides (`v.t_()`) of a tensor sharing its memory with
  another one, then a write into that memory: the gradient missed the change;
* an output of a multi-output view op (`unbind`, `split`) handed out of the graph came back
  as a tensor of its own: a later in-place write, which eager refuses, ran and left the
  gradient silently wrong; a view not requiring grad came back made in no-grad mode.

And a graph a compiling backend refused (a hunt on 3b2ba16): `x.set_(y)` of a graph input; and
grad mode left off by a backend that raised inside a `no_grad` block.
"""
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import tracer
from helpers import assert_captured, traced


def _grad_after(fn):
    x = torch.ones(3, requires_grad=True)
    y = fn(x)
    y.sum().backward()
    return x.grad, x._version


def test_data_in_place_keeps_the_version_counter_of_x():
    def f(x):
        y = x * x
        x.data.add_(1)
        return y

    c = tracer.compile(f)
    for _ in range(2):
        want, got = _grad_after(f), _grad_after(c)
        assert torch.equal(want[0], got[0]) and want[1] == got[1] == 0


def test_a_returned_data_tensor_has_its_own_version_counter():
    def f(x):
        return x.data

    c = tracer.compile(f)
    for fn in (f, c, c):
        x = torch.ones(3, requires_grad=True)
        y = (x * x).sum()
        d = fn(x)
        d.add_(1)
        y.backward()
        assert x._version == 0 and torch.equal(x.grad, torch.full((3,), 4.0))


def test_a_grad_mode_object_entered_twice_switches_both_times():
    def f(x):
        g = torch.no_grad()
        with g:
            y = x * 2
        with g:
            z = x * 3
        e = torch.enable_grad()
        with torch.no_grad():
            with e:
                u = x * 4
            with e:
                v = x * 5
        return y.requires_grad, z.requires_grad, u.requires_grad, v.requires_grad

    c = tracer.compile(f)
    x = torch.ones(3, requires_grad=True)
    assert f(x) == c(x) == c(x) == (False, False, True, True)


def test_forward_mode_ad_levels_are_entered_natively():
    def f(x):
        with fwAD.dual_level():
            d = fwAD.make_dual(x, torch.ones_like(x))
            return fwAD.unpack_dual(d.sin()).tangent

    c = tracer.compile(f)
    x = torch.tensor([0.0, 1.0, 2.0])
    want = f(x)
    for fn in (c, c, f):
        assert torch.allclose(fn(x), want)


def test_a_torch_function_handed_to_autograd_functional_or_torch_func():
    """jacobian(torch.sin, x) put the builtin into a graph node as an argument, which FX
    writes with repr() (`<built-in method sin ...>`: a SyntaxError, an internal error); jvp
    called a frame with functorch-wrapped tensors, which cannot be fakified (another). Both are
    breaks now, and the suite fails on any internal error."""
    def f(x):
        return torch.autograd.functional.jacobian(torch.sin, x)

    def g(x):
        return torch.func.jvp(torch.sin, (x,), (torch.ones_like(x),))

    x = torch.tensor([0.0, 1.0])
    for fn in (f, g):
        c = tracer.compile(fn)
        want = fn(x)
        for _ in range(2):
            got = c(x)
            assert all(torch.allclose(a, b) for a, b in zip(torch.utils._pytree.tree_leaves(want),
                                                           torch.utils._pytree.tree_leaves(got)))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_module_parameters_wrapped_by_torch_func_are_no_graph_inputs(backend):
    """Under `grad(lambda p: functional_call(model, p, (x,)))` the module's parameters are
    GradTrackingTensors (of type torch.Tensor): a frame argument so wrapped was refused, but a
    parameter read through the module became a graph input, and aot_eager raised BackendError
    ("Please convert all Tensors to FakeTensors first ... GradTrackingTensor"), for a compiled
    function calling grad and for a compiled model called inside it. Every graph input now
    takes the same refusal: those frames run as Python, with the reason; gradients are eager's,
    and the model outside the transform is still one graph."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    x = torch.randn(2, 4)

    def f(p, x):
        return torch.func.grad(lambda pp: torch.func.functional_call(model, pp, (x,)).pow(2).sum())(p)

    tracer.reset()
    want = f(params, x)
    cmodel = tracer.compile(model, backend=backend)
    with traced() as t:
        got = [tracer.compile(f, backend=backend)(params, x),
               torch.func.grad(lambda p: torch.func.functional_call(cmodel, p, (x,)).pow(2).sum())(params)]
    for g in got:
        for k in want:
            torch.testing.assert_close(g[k], want[k])
    assert t.internal_errors == 0 and t.fallbacks >= 2, t
    assert any("wrapped by a torch.func transform" in e.reason for e in t.of("fallback")), t
    with traced() as t:
        torch.testing.assert_close(cmodel(x), model(x))
    assert_captured(t, graphs=1, fallbacks=0)
    tracer.reset()


def test_torch_cond_with_torch_functions_runs_as_eager():
    """torch.cond(pred, torch.sin, torch.cos, (x,)) raised torch._dynamo's Unsupported through
    the compiled call (the builtins reached a graph node as arguments)."""
    def f(x):
        return torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,))

    c = tracer.compile(f)
    for x in (torch.tensor([0.0, 1.0, 2.0]), torch.tensor([-1.0, -2.0, 0.5])):
        assert torch.allclose(c(x), f(x))


def _flat(v):
    if isinstance(v, tuple):
        return [u for w in v for u in _flat(w)]
    return [(v.requires_grad, v.tolist()) if isinstance(v, torch.Tensor) else v]


def test_grad_mode_objects_as_decorators_are_traced():
    """`@torch.no_grad()`, `torch.enable_grad()(f)`, `@torch.set_grad_enabled(False)` and
    `@disable_saved_tensors_hooks(msg)` on a function made in the frame: each call runs inside a
    fresh manager, as torch's decorators do (set_grad_enabled puts back the mode its
    constructor switched). One graph with fullgraph=True (Dynamo's
    test_context_wrapping_grad_mode_decorator and kin)."""
    def f(x):
        @torch.no_grad()
        def a(t):
            return t * 2, torch.is_grad_enabled()

        @torch.set_grad_enabled(False)
        def b(t):
            return t * 3, torch.is_grad_enabled()

        c = torch.enable_grad()(lambda t: t * 4)
        e = torch.no_grad(lambda t: (t * 6, torch.is_grad_enabled()))  # the class given the function

        @torch.autograd.graph.disable_saved_tensors_hooks("no hooks here")
        def d(t):
            return t + 1, torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()

        mid = torch.is_grad_enabled()
        with torch.no_grad():
            cc = c(x)
        return a(x), b(x), mid, cc, d(x), torch.is_grad_enabled(), x * 5, e(x)

    x = torch.ones(2, requires_grad=True)
    compiled = tracer.compile(f, fullgraph=True)
    assert _flat(compiled(x)) == _flat(f(x)) == _flat(compiled(x))
    assert torch.is_grad_enabled()


def test_a_grad_mode_object_live_at_a_graph_break():
    """A grad-mode object made before a break and entered after it is rebuilt in its state,
    without switching the mode (set_grad_enabled's constructor would): it made the whole frame
    run as Python ("cannot rebuild"); a break inside a decorated function breaks the caller."""
    def made_before(x):
        x = x + 1
        ctx = torch.set_grad_enabled(False)
        print(end="")
        with ctx:
            y = x * 2
        return y, torch.is_grad_enabled()

    def entered_later(x):
        ctx = torch.no_grad()
        print(end="")
        with ctx:
            y = x * 2
        return y, x * 3, torch.is_grad_enabled()

    def breaks_inside(x):
        @torch.no_grad()
        def g(a):
            print(end="")
            return a * 2
        return g(x) + 1, torch.is_grad_enabled()

    x = torch.ones(2, requires_grad=True)
    for fn in (made_before, entered_later, breaks_inside):
        before = tracer.stats()
        assert _flat(tracer.compile(fn)(x)) == _flat(fn(x)), fn.__name__
        s = tracer.stats()
        assert s.fallbacks == before.fallbacks and s.graphs > before.graphs, fn.__name__
        assert torch.is_grad_enabled()


NO_GRAD, ENABLE_GRAD = torch.no_grad(), torch.enable_grad()


def _global_grad_managers(x):
    y = x * 2
    with NO_GRAD:
        z = x * 3
        with ENABLE_GRAD:
            w = x * 4
        inside = torch.is_grad_enabled()
    return y, z, w, inside, torch.is_grad_enabled()


def test_a_grad_mode_object_made_outside_the_frame_is_a_grad_mode_block():
    """A module-level `NO_GRAD = torch.no_grad()` used as `with NO_GRAD:` was two graph breaks
    (its __enter__ inlined, setting an attribute on it; then "torch.__exit__() changes global
    state outside the graph"). It is the grad-mode block a `torch.no_grad()` made in the frame
    is, the object guarded by its type."""
    x = torch.ones(2, requires_grad=True)
    c = tracer.compile(_global_grad_managers)
    with traced() as t:
        assert _flat(c(x)) == _flat(_global_grad_managers(x)) == _flat(c(x))
    assert_captured(t, graphs=1, breaks=0)
    assert torch.is_grad_enabled()


def test_grad_of_an_input_or_parameter_is_read_as_a_graph_input():
    """`x.grad` was a graph break ("reading .grad inside a traced frame"); torch.compile reads
    it as an input (gradient clipping, a norm of the gradients). It is now read through its
    source: None or a tensor, guarded like any input, so a grad that appears recompiles."""
    def read_grad(x):
        return x * x.grad

    def grad_norm(m, x):
        loss = m(x).sum()
        total = sum((p.grad.norm() ** 2 for p in m.parameters() if p.grad is not None), torch.zeros(()))
        return loss, total.sqrt()

    x = torch.randn(3, requires_grad=True)
    c = tracer.compile(read_grad)
    for g in (torch.ones(3), torch.full((3,), 2.0)):
        x.grad = g
        torch.testing.assert_close(c(x), read_grad(x))
    m, inp = torch.nn.Linear(3, 2), torch.randn(4, 3)
    cm = tracer.compile(grad_norm)
    for _ in range(2):
        torch.testing.assert_close(cm(m, inp), grad_norm(m, inp))
        m(inp).sum().backward()  # the grads exist from the second call on
    torch.testing.assert_close(cm(m, inp), grad_norm(m, inp))
    s = tracer.stats()
    assert s.graph_breaks == 0 and s.fallbacks == 0 and s.frames_traced == 3


# ---- compiling backends: gradients as eager's -------------------------------------------------

def _leaf_used(x):
    w = torch.ones(3, requires_grad=True)
    return w, (w * x).sum()


def _leaf_added(x):
    w = torch.zeros(3, requires_grad=True)
    return w + x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_leaf_made_in_the_frame_and_used_gets_its_gradient(backend):
    """`w = torch.ones(3, requires_grad=True)` used by the graph: under aot_eager w.grad stayed
    None (`w, (w * x).sum()`), and `w + x` of an x without grad did not require grad at all.
    A compiling backend breaks at the op that makes w (as torch.compile does), so w is an
    input of the graph after it; the eager backend keeps one graph."""
    x = torch.tensor([1., 2., 3.], requires_grad=True)
    c = tracer.compile(_leaf_used, backend=backend)
    with traced() as t:
        w, loss = c(x)
        out = tracer.compile(_leaf_added, backend=backend)(torch.randn(3))
    loss.backward()
    assert w.is_leaf and torch.equal(w.grad, x.detach()) and torch.equal(x.grad, torch.ones(3))
    assert out.requires_grad
    out.sum().backward()
    assert_captured(t, breaks=0 if backend == "eager" else 2)
    assert [b.reason for b in c.entries[0].breaks] == ([] if backend == "eager" else [
        "a tensor made with requires_grad=True is used by the graph: a compiling backend differentiates "
        "with respect to the graph's inputs only (torch.compile breaks here too)"])


def _shared_view_t(y, v, w):  # v is a view of y; both passed
    v.t_()
    v.add_(w)


def _shared_view_unsqueeze(y, v, w):
    v.unsqueeze_(0)
    v.mul_(w)


def _view_of_intermediate_t(x, w):
    z = (x * 1).view(2, 2)
    z.t_()
    z.add_(w)
    return z


def _aliased_input_loaded_after(b, w):
    def inner(z):  # b, the base of z, becomes a graph input only after z.t_()
        z.t_()
        b.mul_(2)
        return z * w
    return inner(b.view(2, 2))


def _grads_of_shared_view(fn, kind):
    """(values, x.grad, w.grad) of `fn` (compiled or not) of the program `kind`."""
    x = torch.arange(1., 5., requires_grad=True)
    w = torch.tensor([[0., 1.], [2., 3.]], requires_grad=True)
    if kind in (_shared_view_t, _shared_view_unsqueeze):
        y = x * 1
        fn(y, y.view(2, 2), w if kind is _shared_view_t else w.view(1, 2, 2))
        out = y
    else:
        out = fn(x if kind is _view_of_intermediate_t else x * 1, w).reshape(-1)
    (out * torch.tensor([1., 10., 100., 1000.])).sum().backward()
    return out.tolist(), x.grad.tolist(), w.grad.tolist()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_shared_view_t, _shared_view_unsqueeze, _view_of_intermediate_t,
                                _aliased_input_loaded_after])
def test_an_in_place_size_change_of_a_shared_tensor_then_a_write(backend, fn):
    """`v.t_()` of a tensor whose memory another tensor of the graph shares, then a write into
    that memory: under aot_eager w's gradient came out untransposed (no error; torch.compile's
    too), and `unsqueeze_` then `mul_` was a BackendError. The change is a graph break, and so
    is, after a change of a tensor alone in its memory, a write once another tensor shares it
    (`b`, z's base, read after `z.t_()`)."""
    want = _grads_of_shared_view(fn, fn)
    c = tracer.compile(fn, backend=backend)
    with traced() as t:
        assert _grads_of_shared_view(c, fn) == want
        assert _grads_of_shared_view(c, fn) == want
    assert t.graph_breaks >= 1 and t.fallbacks == 0 and t.internal_errors == 0


def _alone_t(v, w):
    v.t_()
    v.add_(w)
    return v * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_in_place_size_change_of_a_tensor_alone_in_its_memory_stays_in_the_graph(backend):
    """The same ops on an input that shares its memory with no other tensor of the graph (a
    view of a tensor not passed counts as alone) are one graph, as before; a later call
    passing a view of another input traces again (StorageSharing, compiling backends) or runs
    the graph as it is (eager) and is right."""
    c = tracer.compile(_alone_t, backend=backend)
    w = torch.tensor([[0., 1.], [2., 3.]], requires_grad=True)
    for make in (lambda x: (x * 1).view(2, 2), lambda x: (x * 1).view(2, 2).clone()):
        with traced() as t:
            for fn in (_alone_t, c):
                x = torch.arange(1., 5., requires_grad=True)
                w.grad = None
                fn(make(x), w).sum().backward()
                if fn is _alone_t:
                    want = x.grad, w.grad.clone()
            assert torch.equal(x.grad, want[0]) and torch.equal(w.grad, want[1])
        assert t.graph_breaks == 0 and t.fallbacks == 0 and t.internal_errors == 0


def _set_to_other(x, y):
    x.set_(y)  # x now lies in y's memory, with y's sizes
    return x + 1


def _set_to_nothing(x, y):
    z = x * 2
    x.set_()
    return z + y, x.shape


def _set_on_written(x, y):
    x.add_(1)
    torch.Tensor.set_(x, y)
    return x * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_set_to_other, _set_to_nothing, _set_on_written])
def test_set_of_an_input_is_a_break_under_a_compiling_backend(backend, fn):
    """`x.set_(y)` of a graph input: under aot_eager a BackendError ("Encountered a set_ on a
    graph input, but the input has other mutations"), and `x.set_()` raised a size mismatch,
    where eager runs. A compiling backend breaks at the set_ (as torch.compile does); the
    eager backend keeps one graph."""
    make = lambda: (torch.ones(3), torch.zeros(2, 3))  # noqa: E731
    ea, ca = make(), make()
    want = fn(*ea)
    c = tracer.compile(fn, backend=backend)
    with traced() as t:
        got = c(*ca)
    assert repr(got) == repr(want) and repr(ca) == repr(ea)
    assert_captured(t, breaks=0 if backend == "eager" else 1)
    if backend != "eager":
        assert "set_ of a graph input" in c.entries[0].breaks[0].reason
    assert repr(c(*make())) == repr(fn(*make()))


def _index_out_of_range_under_no_grad(x):
    with torch.no_grad():
        y = x[torch.tensor(7)]  # (fake tensors let it pass; AOTAutograd knows the index and raises)
    return y


def test_a_backend_that_raises_inside_a_no_grad_block_leaves_grad_mode_on():
    """AOTAutograd runs the graph's `_set_grad_enabled(False)` while it traces; raising inside
    the block (an index it finds out of range) left grad mode off after the call, which raised
    IndexError as eager does: every later op ran without autograd."""
    x = torch.randn(3, 3, requires_grad=True)
    with pytest.raises(IndexError) as want:
        _index_out_of_range_under_no_grad(x)
    c = tracer.compile(_index_out_of_range_under_no_grad, backend="aot_eager")
    with traced() as t:
        with pytest.raises(IndexError) as got:
            c(x)
    assert str(got.value) == str(want.value)
    assert torch.is_grad_enabled() and (x * 2).requires_grad
    assert t.fallbacks == 0 and t.internal_errors == 0


def _unbind_write(x):
    y = x * 2
    a, b = y.unbind(0)
    a.mul_(2)  # eager: RuntimeError (an output of a multi-output view op written in place)
    return y


def _split_write_after_break(x):
    y = x * 2
    a, b = y.split(1)
    print(end="")
    a.mul_(2)
    return y


def _unbind_returned(x):
    return list((x * 2).unbind(0))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_unbind_write, _split_write_after_break, _unbind_returned])
def test_an_output_of_unbind_handed_out_of_the_graph_is_still_its_view(backend, fn):
    """`a, b = (x * 2).unbind(0)` live at a graph break (or returned): AOTAutograd gave a, b
    back as tensors of their own, so `a.mul_(2)` ran where eager raises, and x's gradient was
    silently wrong ([[2, 2, 2], ...] against eager's error); at a break of its own before the
    write it was a BackendError. They are made again after the graph as views of y."""
    x = torch.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="is a view and is being modified inplace") as eager_error:
        out = fn(x)
        out[0].mul_(2)
    c = tracer.compile(fn, backend=backend)
    with traced() as t:
        for _ in range(2):
            with pytest.raises(RuntimeError, match="is a view and is being modified inplace") as e:
                out = c(x)
                out[0].mul_(2)
            assert str(e.value).split(".")[0] == str(eager_error.value).split(".")[0]
    assert t.fallbacks == 0 and t.internal_errors == 0


def _chunk_used(x):
    y = x * 2
    a, b = y.chunk(2)
    print(end="")
    return (a * 3 + b).sum() + y.sum()


def _no_grad_view_written(x, w):
    z = x.detach().clone().view(2, 2)
    print(end="")
    z.add_(w)
    return z


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_views_handed_out_of_the_graph_keep_their_gradients(backend):
    """Views remade after the graph give eager's gradients: unbind's outputs used after a
    break; and a view that does not require grad, written after the break by a tensor that
    does (AOTAutograd gave it back made in no-grad mode: "A view was created in no_grad mode
    and is being modified inplace", where eager runs)."""
    x = torch.arange(6.).reshape(2, 3).requires_grad_()
    _chunk_used(x).backward()
    want, x.grad = x.grad, None
    with traced() as t:
        tracer.compile(_chunk_used, backend=backend)(x).backward()
    assert torch.equal(x.grad, want)
    assert_captured(t, breaks=1)
    x = torch.arange(1., 5., requires_grad=True)
    w = torch.tensor([[0., 1.], [2., 3.]], requires_grad=True)
    want = _no_grad_view_written(x, w)
    want.sum().backward()
    want_grad, w.grad = w.grad, None
    with traced() as t:
        got = tracer.compile(_no_grad_view_written, backend=backend)(x, w)
    got.sum().backward()
    assert torch.equal(got, want) and torch.equal(w.grad, want_grad)
    assert_captured(t, breaks=1)


def test_a_view_of_a_parameter_under_no_grad_is_no_new_leaf():
    """Under no_grad, the fake of `self.cls_token.expand(...)` says requires_grad and is_leaf
    (the real view requires no grad): taken for a leaf made in the frame, it broke every ViT
    graph under a compiling backend (6 breaks). A view is never a new leaf."""
    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cls = torch.nn.Parameter(torch.randn(1, 1, 4))

        def forward(self, x):
            return torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) * 2

    m, x = Embed(), torch.randn(2, 3, 4)
    with torch.no_grad():
        for backend in ("eager", "aot_eager"):
            torch.testing.assert_close(tracer.compile(m, backend=backend)(x), m(x))
    s = tracer.stats()
    assert s.graph_breaks == 0 and s.fallbacks == 0 and s.graphs == 2
