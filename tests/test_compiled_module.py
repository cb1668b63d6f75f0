"""`tracer.compile(module)` is the module, to the user (issue "One long process, many models",
part 3): copies (deepcopy for EMA, pickle for DataLoader workers, torch.save checkpoints) are
compiled copies with the same options, and the wrapper's attributes, containers, tree walks
and mode switches are the model's. Every compiled result is compared with eager; a copy's
first call must be a capture of its own (tracer.stats()).

A compiled function is a function to copy and pickle (deepcopy gives it back, pickle names it),
and a compiled function or module met inside another trace is traced inline as what it wraps.

Where torch.compile's OptimizedModule differs (torch 2.13), the test says so: its
named_parameters()/named_modules() add an `_orig_mod.` prefix, it has no iteration or
indexing, and it is always sized (`__len__` on every wrapper).
"""
import copy
import io
import pickle

import pytest
import torch
import torch._dynamo
import torch.nn as nn

import tracer
from helpers import assert_captured, traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")

SEEN = []


def counting(gm, example_inputs):
    """A module-level backend: picklable by reference."""
    SEEN.append(gm)
    return gm.forward


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("shift", torch.ones(4))
        self.scale = 2.0

    def forward(self, x):
        return (self.lin(x) + self.shift).relu() * self.scale


class Stack(nn.Module):
    def __init__(self, n=2):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).tanh()
        return x


def close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def _x():
    return torch.randn(3, 4)


def _assert_compiled_copy(orig, new, x):
    """`new` is a compiled copy of `orig`: another model with equal weights, the same options,
    results equal to its own eager model's, and its first call a capture of its own."""
    assert isinstance(new, tracer.CompiledModule)
    assert new._orig_mod is not orig._orig_mod and type(new._orig_mod) is type(orig._orig_mod)
    assert new._tracer_options == orig._tracer_options
    for (k, a), (k2, b) in zip(orig.state_dict().items(), new.state_dict().items()):
        assert k == k2 and a is not b and torch.equal(a, b)
    with traced() as t:
        out = new(x)
    close(out, new._orig_mod(x))
    close(out, orig(x))
    # modules are graph inputs: a copy of the same structure is served by the entry its
    # original made (a cache hit) or, on fresh caches, by a capture of its own; never Python
    assert t.fallbacks == 0 and (t.graphs >= 1 or t.cache_hits >= 1), str(t)
    assert_captured(new, min_ops=2)
    with torch.no_grad():  # the copy runs with its own weights, read at call time
        for p in new._orig_mod.parameters():
            p.add_(0.5)
    with traced() as warm:
        out = new(x)
    close(out, new._orig_mod(x))
    assert not torch.allclose(out, orig(x))
    assert warm.frames_traced == 0 and warm.cache_hits >= 1, str(warm)


# ---- copies ---------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["deepcopy", "pickle", "torch.save"])
def test_a_copy_is_compiled_with_the_same_options(how):
    SEEN.clear()
    c = tracer.compile(Net(), backend=counting, fullgraph=True, dynamic=False)
    x = _x()
    close(c(x), c._orig_mod(x))
    assert len(SEEN) == 1
    if how == "deepcopy":
        new = copy.deepcopy(c)
    elif how == "pickle":
        new = pickle.loads(pickle.dumps(c))
    else:
        buf = io.BytesIO()
        torch.save(c, buf)
        buf.seek(0)
        new = torch.load(buf, weights_only=False)
    tracer.reset()  # (else the copy is served by c's entry: one entry serves every instance)
    _assert_compiled_copy(c, new, x)
    assert len(SEEN) == 2  # the copy's own trace went to the same backend
    f = new._compiled_forward
    assert f._fullgraph is True and f._dynamic is False and f._backend is counting


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_backend_by_name_travels_by_name(backend):
    c = tracer.compile(Stack(), backend=backend)
    x = _x()
    close(c(x), c._orig_mod(x))
    new = pickle.loads(pickle.dumps(c))
    assert new._tracer_options["backend"] == backend
    _assert_compiled_copy(c, new, x)


def test_ema_copy_is_independent():
    """The EMA pattern: a deep copy updated from the live model, each its own weights and its
    own compiled frames (the copy's entries are guarded on the copy)."""
    c = tracer.compile(Net())
    x = _x()
    c(x)
    ema = copy.deepcopy(c)
    for p in ema.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        for pe, p in zip(ema.parameters(), c.parameters()):
            pe.mul_(0.5).add_(p + 1, alpha=0.5)
    close(ema(x), ema._orig_mod(x))
    close(c(x), c._orig_mod(x))
    assert not torch.equal(ema(x), c(x))
    assert all(not p.requires_grad for p in ema.parameters())
    assert all(p.requires_grad for p in c.parameters())


def test_copy_of_a_fresh_wrapper_and_a_shallow_copy():
    """A wrapper never called is copied alike; copy.copy wraps the same model."""
    c = tracer.compile(Net())
    x = _x()
    _assert_compiled_copy(c, copy.deepcopy(c), x)
    shallow = copy.copy(c)
    assert shallow is not c and shallow._orig_mod is c._orig_mod and shallow._tracer_options == c._tracer_options
    close(shallow(x), c._orig_mod(x))


def test_hooks_on_the_wrapper_are_copied():
    calls = []
    c = tracer.compile(Net())
    c.register_forward_hook(lambda mod, args, out: calls.append(type(mod).__name__))
    x = _x()
    close(c(x), c._orig_mod(x))
    new = copy.deepcopy(c)
    close(new(x), new._orig_mod(x))
    assert calls == ["CompiledModule", "CompiledModule"]


def test_an_unpicklable_backend_says_so_in_one_line():
    c = tracer.compile(Net(), backend=lambda gm, ex: gm.forward)
    x = _x()
    close(c(x), c._orig_mod(x))
    with pytest.raises(TypeError) as ei:
        pickle.dumps(c)
    msg = str(ei.value)
    assert "\n" not in msg and "cannot pickle a compiled Net" in msg and "<lambda>" in msg, msg
    assert "not picklable" in msg and "backend by name" in msg
    with pytest.raises(TypeError, match="not picklable"):
        torch.save(c, io.BytesIO())
    new = copy.deepcopy(c)  # a deep copy does not pickle: the backend is shared
    assert new._tracer_options["backend"] is c._tracer_options["backend"]
    _assert_compiled_copy(c, new, x)


def test_torch_load_with_weights_only_refuses_a_whole_module():
    """torch.load defaults to weights_only=True (torch >= 2.6): a whole compiled module, like
    any module, needs weights_only=False; the error names the global to trust. Its
    state_dict is the model's (no `_orig_mod.` prefix) and loads with weights_only=True, into a
    compiled module or a plain one."""
    c = tracer.compile(Net())
    x = _x()
    close(c(x), c._orig_mod(x))
    buf = io.BytesIO()
    torch.save(c, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="weights_only") as ei:
        torch.load(buf)
    assert "tracer.api._rebuild_compiled_module" in str(ei.value)

    buf = io.BytesIO()
    torch.save(c.state_dict(), buf)
    for target in (tracer.compile(Net()), Net()):
        buf.seek(0)
        target.load_state_dict(torch.load(buf))
        close(target(x), c(x))


# ---- the wrapper is the model ----------------------------------------------------------------
def test_an_attribute_write_lands_on_the_model_and_the_forward_reads_it():
    m = Net()
    c = tracer.compile(m)
    x = _x()
    close(c(x), m(x))
    c.scale = 3.0
    assert m.scale == 3.0 and "scale" not in c.__dict__
    close(c(x), m(x))
    close(c(x), (m.lin(x) + m.shift).relu() * 3.0)
    c.lin = nn.Linear(4, 4)  # a module: registered on the model
    assert m.lin is c.lin and m._modules["lin"] is c.lin
    close(c(x), m(x))
    c.extra = 1
    assert m.extra == 1
    del c.extra
    assert not hasattr(m, "extra") and not hasattr(c, "extra")
    c.training = False
    assert m.training is False and c.training is False


def test_model_attributes_named_like_the_wrappers_internals_stay_the_models():
    class Opts(nn.Module):
        def __init__(self):
            super().__init__()
            self._options = {"k": 2.0}
            self._forward = 1.0
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * self._options["k"] + self._forward

    m = Opts()
    c = tracer.compile(m)
    x = _x()
    close(c(x), m(x))
    assert c._options is m._options and c._forward == 1.0
    c._options = {"k": 3.0}
    c._forward = 2.0
    assert m._options == {"k": 3.0} and m._forward == 2.0
    close(c(x), m.lin(x) * 3.0 + 2.0)


@pytest.mark.one_version
def test_pickle_into_a_fresh_process():
    """A DataLoader worker's view: the pickled compiled module, loaded in another process,
    traces there and equals eager."""
    import os
    import subprocess
    import sys
    c = tracer.compile(Net(), backend=counting)
    x = _x()
    close(c(x), c._orig_mod(x))
    data = pickle.dumps((c, x))
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import pickle, sys, torch, tracer; c, x = pickle.loads(sys.stdin.buffer.read()); "
            "out = c(x); s = tracer.stats(); "
            "assert isinstance(c, tracer.CompiledModule) and c._tracer_options['backend'].__name__ == 'counting'; "
            "assert torch.allclose(out, c._orig_mod(x)) and s.graphs == 1 and s.fallbacks == 0, str(s); print('ok')")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]))
    done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == b"ok", done.stderr.decode()[-3000:]


# ---- a compiled function held by a model ----------------------------------------------------
@tracer.compile
def compiled_act(x):
    """Module-level: pickled by reference, like the function it compiles."""
    return torch.relu(x) * 2


class WithAct(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = act

    def forward(self, x):
        return self.act(self.lin(x))


def test_deepcopy_of_a_model_holding_a_compiled_function():
    """The EMA copy of a model whose activation is a compiled function: deepcopy raised
    "TypeError: cannot pickle 'CompiledFunction' object" (the C base type has no reduction).
    A compiled function copies as a function does, as itself: the copy calls the same compiled
    function, its cache entries shared (they guard what they read)."""
    m = WithAct(compiled_act)
    x = _x()
    close(m(x), m.lin(x).relu() * 2)
    for new in (copy.deepcopy(m), copy.deepcopy(tracer.compile(m))._orig_mod):
        assert new.act is compiled_act and new.lin is not m.lin
        with traced() as t:
            out = new(x)
        close(out, new.lin(x).relu() * 2)
        assert t.fallbacks == 0 and t.internal_errors == 0 and t.cache_hits >= 1, str(t)
    assert_captured(compiled_act, min_ops=2)
    assert copy.copy(compiled_act) is compiled_act


def test_pickle_of_a_compiled_function_is_by_reference():
    """pickle (torch.save, DataLoader workers) stores a module-level compiled function by its
    module and name, as it stores the function; it raised TypeError before."""
    x = _x()
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(compiled_act, protocol=protocol)) is compiled_act
    m = WithAct(compiled_act)
    new = pickle.loads(pickle.dumps(m))
    assert new.act is compiled_act
    with traced() as t:
        out = new(x)
    close(out, m(x))
    assert t.fallbacks == 0 and t.graphs + t.cache_hits >= 1, str(t)


def test_pickle_of_a_compiled_lambda_or_closure_fails_as_for_the_function():
    """A compiled lambda or closure cannot be found by name: pickle's own error for such a
    function, naming it (not "cannot pickle 'CompiledFunction' object")."""
    def make():
        def local(x):
            return x + 1
        return local

    for fn, name in ((lambda x: x * 2, "<lambda>"), (make(), "local")):
        c = tracer.compile(fn)
        close(c(torch.ones(2)), fn(torch.ones(2)))
        with pytest.raises((pickle.PicklingError, AttributeError)) as info:
            pickle.dumps(c)
        assert name in str(info.value) and "CompiledFunction' object" not in str(info.value)
        assert copy.deepcopy(c) is c  # (as copy.deepcopy of the function gives the function)


# ---- compiled inside compiled --------------------------------------------------------------
class Outer(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(self.inner(x)) + self.inner.lin.bias.sum()


def test_a_compiled_submodule_is_traced_as_its_model():
    """A model whose submodule was compiled, compiled in its turn: one graph. Tracing reached
    the wrapper's `self._compiled_forward(...)` and broke there ("descriptor wrapper_descriptor
    on CompiledFunction"): two graphs. The wrapper is now called as its model (guarded as the
    model; a hook on the model is traced as eager runs it, one on the wrapper recompiles)."""
    net = Net()
    o = Outer(tracer.compile(net))
    co = tracer.compile(o)
    x = _x()

    def eager(x, k=1.0):
        return o.out(net(x) * k) + net.lin.bias.sum()

    with traced() as t:
        close(co(x), eager(x))
    assert_captured(t, graphs=1, breaks=0)
    assert t.frames_traced == 1, str(t)
    handle = net.register_forward_hook(lambda mod, args, out: out * 3)
    with traced() as t:
        close(co(x), eager(x))  # (net's own call runs its hook)
    assert_captured(t, graphs=1, breaks=0)
    handle.remove()
    handle = o.inner.register_forward_hook(lambda mod, args, out: out * 5)
    with traced() as t:
        close(co(x), eager(x, 5.0))
    assert_captured(t, graphs=1, breaks=0)
    handle.remove()
    with traced() as t:
        close(co(x), eager(x))
    assert t.frames_traced == 0 and t.cache_hits >= 1, str(t)


@tracer.compile
def compiled_inner(x):
    return x.sin() + 1


def calls_compiled_inner(x):
    return compiled_inner(x) * 2


def test_a_compiled_function_called_from_a_traced_frame_is_inlined():
    """A compiled function called from a compiled function (or a method compiled on its
    class): its original function is inlined, one graph; the global that names it is guarded
    (another compiled function there recompiles); a break inside breaks the caller at the call,
    which runs the inner one's own cache."""
    global compiled_inner
    c = tracer.compile(calls_compiled_inner)
    x = _x()
    with traced() as t:
        close(c(x), (x.sin() + 1) * 2)
    assert_captured(t, graphs=1, breaks=0)
    assert t.frames_traced == 1, str(t)
    saved = compiled_inner
    try:
        compiled_inner = tracer.compile(lambda x: x.cos())
        with traced() as t:
            close(c(x), x.cos() * 2)
        assert_captured(t, graphs=1, breaks=0, recompiles=1)

        def breaks(x):
            torch._dynamo.graph_break()
            return x.tan()
        compiled_inner = tracer.compile(breaks)
        with traced() as t:
            close(c(x), x.tan() * 2)
        assert t.graph_breaks >= 1 and t.fallbacks == 0 and t.internal_errors == 0, str(t)
    finally:
        compiled_inner = saved

    class WithMethod(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        @tracer.compile
        def helper(self, x):
            return self.lin(x).relu()

        def forward(self, x):
            return self.helper(x) + 1

    m = WithMethod()
    with traced() as t:
        close(tracer.compile(m)(x), m.lin(x).relu() + 1)
    assert_captured(t, graphs=1, breaks=0)


def test_len_bool_iter_getitem_follow_the_model():
    empty = tracer.compile(nn.ModuleList())
    assert len(empty) == 0 and not empty and bool(empty) is bool(nn.ModuleList())  # (torch.compile: also falsy)
    assert list(empty) == []

    layers = [nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)]
    seq = tracer.compile(nn.Sequential(*layers))
    assert len(seq) == 3 and bool(seq)
    assert list(seq) == layers and seq[0] is layers[0] and seq[-1] is layers[2]  # (torch.compile: no)
    assert list(seq[1:]) == layers[1:] and isinstance(seq[1:], nn.Sequential)
    assert list(reversed(seq)) == layers[::-1]
    x = _x()
    close(seq(x), seq._orig_mod(x))
    seq[1] = nn.Tanh()  # indexing writes the model
    assert isinstance(seq._orig_mod[1], nn.Tanh)
    close(seq(x), seq._orig_mod(x))

    ml = tracer.compile(nn.ModuleList(layers[:1]))
    same = ml
    ml += [layers[1]]
    assert ml is same and len(ml._orig_mod) == 2  # (`+=` keeps the wrapper)
    assert layers[1] in ml
    del ml[0]
    assert list(ml) == [layers[1]]

    md = tracer.compile(nn.ModuleDict({"a": layers[0]}))
    assert "a" in md and md["a"] is layers[0] and list(md) == ["a"] and len(md) == 1
    assert list(md.keys()) == ["a"]

    plain = tracer.compile(Net())
    assert bool(plain)  # no len on the model: always true, and len() refuses as on the model
    with pytest.raises(TypeError, match="has no len"):
        len(plain)
    with pytest.raises(TypeError, match="not iterable"):
        iter(plain)
    with pytest.raises(TypeError, match="not subscriptable"):
        plain[0]


def test_repr_dir_and_isinstance():
    m = Net()
    c = tracer.compile(m)
    assert repr(c) == repr(m) and str(c) == str(m)
    assert set(dir(m)) <= set(dir(c)) and {"lin", "shift", "scale", "forward"} <= set(dir(c))
    assert isinstance(c, nn.Module) and isinstance(c, tracer.CompiledModule)
    assert c.lin is m.lin and c.shift is m.shift and c._orig_mod is m


def test_state_and_tree_walks_are_the_models():
    m = Stack()
    c = tracer.compile(m)
    assert [id(p) for p in c.parameters()] == [id(p) for p in m.parameters()]
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in m.named_parameters()]  # no _orig_mod.
    assert [n for n, _ in c.named_modules()] == [n for n, _ in m.named_modules()]
    assert list(c.children()) == list(m.children())
    assert list(c.state_dict()) == list(m.state_dict())
    assert c.get_submodule("layers.0") is m.layers[0]
    sd = {k: torch.zeros_like(v) for k, v in m.state_dict().items()}
    c.load_state_dict(sd)
    assert all(torch.equal(p, torch.zeros_like(p)) for p in m.parameters())
    x = _x()
    close(c(x), m(x))
    c.zero_grad()
    opt = torch.optim.SGD(c.parameters(), lr=0.1)
    assert opt.param_groups[0]["params"][0] is m.layers[0].weight


def test_compiled_module_inside_a_model_is_walked_as_the_model():
    """A compiled submodule: its parent's parameter names and state_dict keys are those of the
    plain model (torch.compile's wrapper adds `_orig_mod.` to the parameter names only)."""
    class Outer(nn.Module):
        def __init__(self, sub):
            super().__init__()
            self.sub = sub
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.sub(x))

    plain = Outer(Net())
    wrapped = Outer(tracer.compile(Net()))
    assert [n for n, _ in wrapped.named_parameters()] == [n for n, _ in plain.named_parameters()]
    assert list(wrapped.state_dict()) == list(plain.state_dict())
    wrapped.load_state_dict(plain.state_dict())
    x = _x()
    close(wrapped(x), plain(x))
    wrapped.eval()
    assert wrapped.sub._orig_mod.training is False
    wrapped.double()
    assert wrapped.sub._orig_mod.lin.weight.dtype == torch.float64


def test_to_train_eval_return_the_wrapper():
    m = Net()
    c = tracer.compile(m)
    x = _x()
    assert c.eval() is c and m.training is False and c.training is False
    assert c.train() is c and m.training is True
    assert c.train(False) is c and m.training is False
    assert c.to(torch.float64) is c and m.lin.weight.dtype == torch.float64
    close(c(x.double()), m(x.double()))
    assert c.float() is c and m.lin.weight.dtype == torch.float32
    assert c.requires_grad_(False) is c and not m.lin.weight.requires_grad
    assert c.apply(lambda mod: None) is c
    assert c.to("cpu") is c and c.cpu() is c
    close(c(x), m(x))


def test_dropout_follows_train_and_eval_through_the_wrapper():
    class Drop(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(x) * 2

    c = tracer.compile(Drop())
    x = torch.ones(64, 64)
    c.eval()
    close(c(x), x * 2)
    c.train()
    out = c(x)
    assert (out == 0).any() and out.max() == 4.0
    c.eval()
    close(c(x), x * 2)
