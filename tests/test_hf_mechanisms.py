"""Mechanisms that HuggingFace-style models rely on, with plain torch and small classes.

Each test compares the compiled result with eager and checks what was captured.
"""
import torch

import tracer

from helpers import assert_captured, assert_warm, traced


def _explain(fn, *args, **kwargs):
    tracer.reset()
    return tracer.explain(fn, *args, **kwargs)


# ---- zero-argument super() after a graph break ---------------------------------------------

class _Base:
    def get(self, key, default=None):
        return {"a": 1}.get(key, default)


class _Child(_Base):
    def get(self, key, default=None):
        print("break", end="")  # a graph break before super()
        return super().get(key, default)


def test_zero_arg_super_in_resume_function(capsys):
    obj = _Child()

    def f(x):
        return x + obj.get("a", 5) + obj.get("b", 7)

    x = torch.ones(3)
    tracer.reset()
    with traced() as t:
        out = tracer.compile(f)(x)
    assert torch.equal(out, f(x))
    # get() is inlined, breaks at its print (f breaks at the call, get runs as its own frame
    # and breaks there too); super().get in get's resume function is traced
    assert_captured(t, min_ops=1, breaks=None)
    assert t.graph_breaks >= 2 and all("print" in e.reason for e in t.of("break")), str(t)
    c = tracer.compile(f)
    assert torch.equal(c(x), f(x))
    assert_warm(c, x)


def test_zero_arg_super_resume_when_self_is_not_otherwise_live():
    class A:
        def val(self):
            return 3

    class B(A):
        def val(self):
            y = len([1, 2])
            print("", end="")   # break; only super() needs `self` afterwards
            return super().val() + y

    def f(x):
        return x * B().val()

    x = torch.ones(2)
    tracer.reset()
    c = tracer.compile(f)
    with traced() as t:
        assert torch.equal(c(x), f(x))
    assert_captured(t, min_ops=1, breaks=None)
    assert t.graph_breaks >= 1 and all("print" in e.reason for e in t.of("break")), str(t)
    assert_warm(c, x)


# ---- objects with a Python __getattribute__ (HF PretrainedConfig) ----------------------------

class _Config:
    attribute_map = {"hidden": "hidden_size"}

    def __init__(self):
        self.hidden_size = 4
        self.scale = 2.0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class _SpecConfig(_Config):
    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            raise AttributeError(key)
        return super().__getattribute__(key)


def test_custom_getattribute_is_inlined():
    cfg = _SpecConfig()

    def f(x):
        return x * cfg.scale + cfg.hidden + getattr(cfg, "missing", 3)

    x = torch.ones(3)
    rep = _explain(f, x)
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)
    tracer.reset()
    cf = tracer.compile(f)
    assert torch.equal(cf(x), f(x))
    cfg.scale = 5.0              # guarded attribute value
    assert torch.equal(cf(x), f(x))
    cfg.missing = 10             # the absent attribute appears: guarded absence
    assert torch.equal(cf(x), f(x))
    cfg._spec = {"scale"}        # the instance-dict read of _spec is guarded too
    try:
        f(x)
        raise AssertionError("expected AttributeError")
    except AttributeError:
        pass
    try:
        cf(x)
        raise AssertionError("expected AttributeError")
    except AttributeError:
        pass


class _Registry:
    _global = {"a": 1.5}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]


def test_python_getitem_is_inlined():
    reg = _Registry()

    def f(x):
        return x * reg["a"]

    x = torch.ones(2)
    rep = _explain(f, x)
    assert rep.break_count == 0, str(rep)
    tracer.reset()
    cf = tracer.compile(f)
    assert torch.equal(cf(x), f(x))
    reg._local["a"] = 4.0
    assert torch.equal(cf(x), f(x))


def test_is_compiling_is_true_while_tracing():
    def f(x):
        if torch.compiler.is_compiling():
            return x + 1
        return x - 1

    x = torch.zeros(2)
    rep = _explain(f, x)
    assert rep.break_count == 0 and rep.graph_count == 1
    tracer.reset()
    assert torch.equal(tracer.compile(f)(x), x + 1)   # as under torch.compile


def test_super_on_the_stack_at_a_graph_break():
    class A:
        def scale(self, k):
            return 2 * k

    class B(A):
        def scale(self, k):
            return super().scale(print("", end="") or k)   # break with super().scale on the stack

    b = B()

    def f(x):
        return x * b.scale(3)

    x = torch.ones(2)
    tracer.reset()
    cf = tracer.compile(f)
    with traced() as t:
        assert torch.equal(cf(x), f(x))
    assert torch.equal(cf(x), f(x))
    assert_captured(t, min_ops=1, breaks=None)
    assert t.graph_breaks >= 1 and all("print" in e.reason for e in t.of("break")), str(t)
    assert_warm(cf, x)


# ---- torch.finfo / slice() ------------------------------------------------------------------

def test_finfo_and_slice_builtin_fold():
    def f(x, keep):
        m = torch.finfo(x.dtype).min
        s = slice(-keep, None)
        return x.masked_fill(x > 0.5, m)[:, s] + torch.iinfo(torch.int32).bits

    x = torch.rand(2, 6)
    rep = _explain(f, x, 2)
    assert rep.break_count == 0 and rep.graph_count == 1, str(rep)
    tracer.reset()
    cf = tracer.compile(f)
    assert torch.equal(cf(x, 2), f(x, 2))
    assert torch.equal(cf(x, 3), f(x, 3))
    xd = x.double()
    assert torch.equal(cf(xd, 2), f(xd, 2))


def test_custom_getattribute_frame_traced_through_hook_does_not_recurse():
    """The rewritten code of a __getattribute__ frame must not read attributes through
    that same __getattribute__ (guards/reloads use object.__getattribute__)."""
    cfg = _SpecConfig()

    def g(x):
        print("", end="")                    # break: cfg's __getattribute__ frames run natively
        return x * cfg.scale + cfg.hidden

    x = torch.ones(2)
    tracer.reset()
    cg = tracer.compile(g)
    with traced() as t:
        for _ in range(3):
            assert torch.equal(cg(x), g(x))
    assert_captured(t, min_ops=2, breaks=1)  # the print; the reads after it are traced
    assert t.frames_traced == 2 and t.recompiles == 0, str(t)  # g and its resume function, once


def test_method_decorated_with_torch_no_grad_is_inlined():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        @torch.no_grad()
        def rope(self, x):
            return x.cos()

        def forward(self, x):
            return self.lin(self.rope(x)) * 2

    m = M()
    x = torch.randn(2, 3, requires_grad=True)
    c = tracer.compile(m)
    out, ref = c(x), m(x)
    assert torch.allclose(out, ref) and out.requires_grad == ref.requires_grad
    entry = c._compiled_forward.entries[0]
    assert entry.breaks == [] and entry.reason is None
    ops = [n.target for n in entry.graph.graph.nodes if n.op == "call_function"]
    assert torch._C._set_grad_enabled in ops  # the no_grad region is in the graph
