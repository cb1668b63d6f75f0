"""Classes made inside a compiled frame (tracer/variables/frame_classes.py): a `class`
statement or `type(name, bases, ns)`. Before, either made the whole frame run as Python
("LOAD_BUILD_CLASS: class definition inside a traced frame", "type() with 3 positional
argument(s) ... is not modelled"). Now the class body is traced, the frame is one graph, and
the class is made again on every call where the program can see it (returned, stored,
compared), as eager makes one per call."""
import abc
import sys

import torch
from torch import nn

import tracer

from helpers import assert_captured, traced


class Base:
    """A module-level base for classes made in the frame."""
    k = 10

    def shift(self, y):
        return y + self.k


_STORE = {"cls": None}


def _captured(fn, *args, calls=3):
    """compiled == eager on a first call and later ones (fresh class each call), one graph,
    no break, no fallback, nothing traced again after the first call; the results."""
    tracer.reset()
    compiled = tracer.compile(fn)
    outs = []
    with traced() as first:
        outs.append(compiled(*args))
    _same(outs[0], fn(*args))
    assert_captured(first, min_ops=0, graphs=1, breaks=0, fallbacks=0)
    with traced() as later:
        for _ in range(calls - 1):
            got, want = compiled(*args), fn(*args)
            _same(got, want)
            outs.append(got)
    assert later.frames_traced == 0 and later.recompiles == 0 and later.internal_errors == 0, str(later)
    return outs


def _same(got, want):
    if isinstance(got, torch.Tensor):
        assert torch.allclose(got, want)
    elif isinstance(got, tuple):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)
    elif isinstance(got, type):
        assert got.__qualname__ == want.__qualname__ and got is not want
    elif hasattr(got, "__dict__"):
        assert type(got).__qualname__ == type(want).__qualname__
        _same(tuple(vars(got).values()), tuple(vars(want).values()))
    else:
        assert got == want


def test_class_statement_is_one_graph():
    """The brief's repro: a class with a class attribute and a method, used in the frame."""
    def f(x):
        class P:
            k = 2

            def scale(self, y):
                return y * self.k
        return P().scale(x) + P.k
    _captured(f, torch.randn(3))


def test_type_with_three_arguments():
    """type(name, bases, ns) makes the class; its attribute is read in the graph."""
    def f(x):
        P = type("P", (), {"k": 3})
        return x * P.k
    _captured(f, torch.randn(3))


def test_type_three_arguments_returned_sets_module():
    """The class type() makes is new per call and names the caller's module, as eager."""
    def f(x):
        P = type("P", (Base,), {"k": 4})
        return P().shift(x), P
    outs = _captured(f, torch.randn(3))
    assert outs[0][1] is not outs[1][1]
    assert outs[0][1].__module__ == __name__ and outs[0][1].k == 4 and outs[0][1].__mro__[1] is Base


def test_returned_class_is_new_per_call():
    """A returned class and instance: a new class object on each call, the instance of it,
    and an instance of an earlier call's class is not an instance of the new one."""
    def f(x):
        class P:
            k = 2

            def scale(self, y):
                return y * self.k
        p = P()
        return p.scale(x), P, p
    outs = _captured(f, torch.randn(3))
    (_, c1, p1), (_, c2, p2) = outs[0], outs[1]
    assert c1 is not c2 and type(p1) is c1 and type(p2) is c2
    assert not isinstance(p1, c2) and isinstance(p2, c2)
    assert c2.__qualname__.endswith("<locals>.P") and c2().scale(torch.ones(1)).item() == 2


def test_class_stored_to_a_global_is_new_per_call():
    """A class stored where the caller sees it is the one made in that call."""
    def f(x):
        class Q:
            def twice(self, y):
                return y * 2
        _STORE["cls"] = Q
        return Q().twice(x)
    tracer.reset()
    compiled = tracer.compile(f)
    seen = []
    with traced() as t:
        for _ in range(3):
            assert torch.allclose(compiled(torch.ones(2)), torch.ones(2) * 2)
            seen.append(_STORE["cls"])
    assert_captured(t, graphs=1, breaks=0)
    assert t.frames_traced == 1, str(t)
    assert len({id(c) for c in seen}) == 3 and seen[2]().twice(3) == 6


def test_identity_compared_in_the_frame():
    """`is` and isinstance between the frame's class and one passed in: never the same."""
    def f(x, other):
        class P:
            pass
        p = P()
        return x + (P is other) + isinstance(p, other) + isinstance(p, P) * 10
    old = type("P", (), {})
    _captured(f, torch.zeros(2), old)


def test_methods_close_over_the_frame():
    """Methods read and write the frame's locals through their cells; defaults from the frame."""
    def f(x, n):
        scale = n * 2
        calls = []

        class P:
            def __init__(self, bias=scale + 1):
                self.bias = bias

            def run(self, y):
                calls.append(1)
                return y * scale + self.bias
        p = P()
        out = p.run(x) + p.run(x)
        return out, len(calls)
    _captured(f, torch.randn(3), 3)


def test_inheritance_from_a_module_class_and_a_frame_class():
    """Bases: a module-level class and another class of the frame; super() with and without
    arguments; class attributes found through the MRO."""
    def f(x):
        class A(Base):
            k = 1

            def shift(self, y):
                return super().shift(y) * 2

        class B(A):
            def shift(self, y):
                return super(B, self).shift(y) + self.k
        return B().shift(x), issubclass(B, Base), B.k
    _captured(f, torch.randn(3))


def test_class_decorator_and_abc_metaclass():
    """A decorator of the frame applied to the class, and `metaclass=abc.ABCMeta`."""
    def f(x):
        def tag(cls):
            cls_k = cls.k
            return cls_k
        @tag
        class P(metaclass=abc.ABCMeta):
            k = 5
        return x * P
    _captured(f, torch.randn(3))


def test_annotations_in_the_body():
    """A class body with annotations (SETUP_ANNOTATIONS)."""
    def f(x):
        class P:
            a: int = 3
            b: float
        return x * P.a, P.__annotations__["a"] is int
    if sys.version_info >= (3, 14):  # (annotations are lazy: `__annotate__` reads the class's
        # own dict through __classdictcell__, not modelled: the frame runs as Python, once)
        compiled = tracer.compile(f)
        with traced() as t:
            for _ in range(3):
                x = torch.randn(2)
                got, want = compiled(x), f(x)
                assert torch.equal(got[0], want[0]) and got[1] is want[1] is True
        # (its __annotate__, called natively, runs as Python too)
        assert 1 <= t.fallbacks == t.frames_traced <= 2 and t.recompiles == 0 and t.internal_errors == 0, str(t)
        return
    _captured(f, torch.randn(2))


def test_nn_module_subclass_made_in_the_frame():
    """An nn.Module subclass defined and called in the frame: one graph, as eager."""
    def f(x):
        class Double(nn.Module):
            def __init__(self):
                super().__init__()
                self.factor = 2

            def forward(self, y):
                return torch.relu(y) * self.factor
        return Double()(x)
    _captured(f, torch.randn(4))


def test_unsupported_class_runs_the_frame_as_python_once():
    """A base whose __init_subclass__ runs user code: the class is made natively. The frame
    runs as Python, its reason named, not a graph break: code after a break would get a new
    class each call, whose guards by identity fail, a recompile per call up to the limit.
    Later calls trace nothing; answers as eager's."""
    registry = []

    class Registered:
        def __init_subclass__(cls):
            registry.append(cls.__name__)

    def f(x):
        y = x * 2

        class P(Registered):
            pass
        return y + len(registry) + P.__name__.count("P")
    tracer.reset()
    compiled = tracer.compile(f)
    with traced() as t:
        for k in range(1, 6):
            got = compiled(torch.ones(2))
            assert registry == ["P"] * k
            assert torch.allclose(got, torch.ones(2) * 2 + k + 1)
    assert t.fallbacks == 1 and t.graph_breaks == 0 and t.internal_errors == 0, str(t)
    # (the frame itself is not traced again; __init_subclass__, called natively with a new
    # class each time, is: its guard on `cls` by identity, as before this change)
    assert "<locals>.f:" not in str(t), str(t)
    rep = str(tracer.explain(f, torch.ones(2)))
    assert "__init_subclass__" in rep and "after a class made in the frame" in rep


def test_class_body_with_a_tensor_op_runs_the_frame_as_python():
    """A class body computing on an input tensor is not made at trace time: the frame runs
    as Python once (no recompile per call), the answer eager's."""
    def f(x):
        class P:
            w = x * 3
        return P.w + 1
    tracer.reset()
    compiled = tracer.compile(f)
    with traced() as t:
        for _ in range(4):
            x = torch.randn(2)
            assert torch.allclose(compiled(x), x * 3 + 1)
    assert t.fallbacks == 1 and t.internal_errors == 0 and t.graph_breaks == 0 and t.recompiles == 0, str(t)


def test_a_class_with_a_staticmethod_does_not_recompile_per_call():
    """A class whose body makes a staticmethod (not made at trace time) and is used after:
    before, a graph break at the class statement sent a new class to the code after it on
    every call (8 recompiles and a RecompileLimitWarning); now the frame runs as Python."""
    def g(x):
        class Q:
            @staticmethod
            def k():
                return 3
        y = x + 1
        return y * Q.k()
    tracer.reset()
    compiled = tracer.compile(g)
    with traced() as t:
        for _ in range(10):
            x = torch.randn(3)
            assert torch.allclose(compiled(x), (x + 1) * 3)
    assert t.recompiles == 0 and t.internal_errors == 0 and t.frames_traced <= 2, str(t)
