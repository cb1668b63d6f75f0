"""Objects of user classes constructed inside the traced frame (tracer/variables/new_objects.py):
built symbolically, __init__ inlined, rebuilt after the graph without re-running user code."""
import dataclasses
from collections import OrderedDict
from typing import Optional

import pytest
import torch

import tracer

from helpers import assert_captured, traced
from semantics_helpers import check


def _run(fn, *args):
    """explain's report, then the compiled results of a first call and of a second one, which
    must trace nothing; no frame traced on the first call may run as Python."""
    tracer.reset()
    rep = tracer.explain(fn, *args)
    tracer.reset()
    compiled = tracer.compile(fn)
    with traced() as first:
        out = compiled(*args)
    assert_captured(first, min_ops=0, breaks=None)
    with traced() as second:
        out2 = compiled(*args)
    assert second.frames_traced == 0, str(second)
    return rep, out, out2


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert torch.allclose(a, b)
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys())
        for k in a:
            _same(a[k], b[k])
        if type(a) not in (dict, OrderedDict):
            _same(dict(vars(a)), dict(vars(b)))
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif hasattr(a, "__dict__") and not isinstance(a, type):
        assert vars(a).keys() == vars(b).keys()
        for k in vars(a):
            _same(vars(a)[k], vars(b)[k])
    else:
        assert a == b


@dataclasses.dataclass
class Point:
    x: torch.Tensor
    y: torch.Tensor
    scale: float = 2.0


@dataclasses.dataclass
class Scaled:
    x: torch.Tensor
    factor: float = 3.0

    def __post_init__(self):
        self.scaled = self.x * self.factor
        self.norm = None


class Base:
    def __init__(self, x):
        self.x = x
        self.kind = "base"


class Child(Base):
    def __init__(self, x, y):
        super().__init__(x)
        self.y = y + 1

    @property
    def total(self):
        return self.x + self.y

    def double(self):
        return self.total * 2


# --- the essential ModelOutput pattern ------------------------------------------------------------

class Output(OrderedDict):
    def __post_init__(self):
        class_fields = dataclasses.fields(self)
        for field in class_fields:
            v = self.__dict__.get(field.name)
            if v is not None:
                self[field.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        field_names = {field.name for field in dataclasses.fields(self)}
        if name in field_names and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class MyOutput(Output):
    logits: Optional[torch.Tensor] = None
    hidden: Optional[torch.Tensor] = None
    extra: Optional[torch.Tensor] = None


def test_dataclass_built_and_returned():
    def f(a, b):
        return Point(a.sin(), b + 1)

    x, y = torch.randn(3), torch.randn(3)
    rep, out, out2 = _run(f, x, y)
    _same(out, f(x, y))
    _same(out2, f(x, y))
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)


def test_dataclass_post_init():
    def f(a):
        s = Scaled(a)
        return s.scaled + 1, s

    x = torch.randn(4)
    rep, out, _ = _run(f, x)
    _same(out, f(x))
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)


def test_init_calling_super_init_property_and_method():
    def f(a):
        c = Child(a, a * 2)
        return c.double(), c

    x = torch.randn(2)
    rep, out, _ = _run(f, x)
    _same(out, f(x))
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)


def test_model_output_pattern_from_function():
    def f(a):
        out = MyOutput(logits=a * 2, hidden=a + 1)
        first = out[0] + out["hidden"] + out.logits
        out.extra = first
        return out

    x = torch.randn(3)
    rep, out, out2 = _run(f, x)
    ref = f(x)
    _same(out, ref)
    _same(out2, ref)
    assert list(out.keys()) == ["logits", "hidden", "extra"]
    assert out.to_tuple()[2] is out.extra
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)


def test_model_output_pattern_from_module_forward():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            out = MyOutput(logits=h.relu(), hidden=h)
            return out if x.shape[0] > 1 else out.to_tuple()

    m = M()
    x = torch.randn(2, 4)
    tracer.reset()
    rep = tracer.explain(m, x)
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)
    tracer.reset()
    cm = tracer.compile(m)
    for _ in range(2):
        _same(cm(x), m(x))


def test_new_object_passed_to_inlined_helper_and_mutated():
    def helper(p, t):
        p.x = p.x + t
        p.note = "changed"
        return p

    def f(a):
        p = Point(a, a)
        q = helper(p, a.cos())
        return q.x * q.scale, q is p, p

    x = torch.randn(3)
    rep, out, _ = _run(f, x)
    _same(out, f(x))
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)


def test_identity_preserved_when_returned_twice():
    def f(a):
        p = Point(a, a + 1)
        return p, p, [p]

    x = torch.randn(2)
    rep, out, out2 = _run(f, x)
    for o in (out, out2):
        assert o[0] is o[1] and o[2][0] is o[0]
        _same(o[0], Point(x, x + 1))
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)


def test_new_object_live_across_graph_break(capsys):
    def f(a):
        p = Point(a.sin(), a.cos())
        out = MyOutput(logits=a)
        print("break")
        p.x = p.x + 1
        return p, out, p.x + out.logits

    x = torch.randn(3)
    rep, out, out2 = _run(f, x)
    ref = f(x)
    _same(out, ref)
    _same(out2, ref)
    assert rep.break_count == 1


def test_new_object_stored_into_input_attribute():
    class Holder:
        pass

    h = Holder()

    def f(a, holder):
        holder.p = Point(a, a * 3)
        return a + 1

    x = torch.randn(2)
    tracer.reset()
    c = tracer.compile(f)
    out = c(x, h)
    assert torch.equal(out, x + 1)
    _same(h.p, Point(x, x * 3))
    assert_captured(c, min_ops=2, breaks=0)


def test_isinstance_and_is_on_new_objects():
    def f(a):
        p, q = Point(a, a), Point(a, a)
        return a + (1 if isinstance(p, Point) and p is not q and p is p else 0)

    x = torch.randn(2)
    rep, out, _ = _run(f, x)
    assert torch.equal(out, f(x))
    assert rep.break_count == 0, str(rep)


class Slotted(dict):  # (slots of a plain class are modelled: test_frame_constructs)
    __slots__ = ("x",)

    def __init__(self, x):
        super().__init__()
        self.x = x


class CustomNew:
    def __new__(cls, x):
        obj = super().__new__(cls)
        obj.made = True
        return obj

    def __init__(self, x):
        self.x = x


@pytest.mark.parametrize("cls, why", [(Slotted, "__slots__")])
def test_unsupported_classes_break_with_reason(cls, why):
    def f(a):
        return cls(a + 1)

    x = torch.randn(2)
    rep, out, _ = _run(f, x)
    assert torch.equal(out.x, x + 1)
    assert any(why in b["reason"] for b in rep.breaks), str(rep)


def test_a_class_with_its_own_new_is_built_in_the_graph():
    """A Python `__new__` is inlined (once a break: "custom __new__"): super().__new__ makes
    the object, __init__ follows, both attributes are on the rebuilt object."""
    def f(a):
        return CustomNew(a + 1)

    x = torch.randn(2)
    rep, out, _ = _run(f, x)
    assert torch.equal(out.x, x + 1) and out.made is True and type(out) is CustomNew
    assert not rep.breaks, str(rep)


class SuperAttrNew:
    def __new__(cls, x):
        make = super().__new__  # an attribute load of super() (3.12+: LOAD_SUPER_ATTR)
        obj = make(cls)
        obj.made = True
        return obj

    def __init__(self, x):
        self.x = x


def test_a_super_attribute_loaded_as_a_value_is_traced():
    """super().__new__ loaded as a value (not called at once; 3.12+: LOAD_SUPER_ATTR of a
    zero-argument super()) reaches object.__new__, which makes the new object: captured
    whole (it was a graph break at the load while custom __new__ was refused)."""
    def f(a):
        o = SuperAttrNew(a + 1)
        return o.x * 2, o.made

    x = torch.randn(2)
    tracer.reset()
    compiled = tracer.compile(f)
    with traced() as t:
        out = compiled(x)
    assert torch.equal(out[0], (x + 1) * 2) and out[1] is True
    assert_captured(t, min_ops=2)


def test_an_object_made_in_the_frame_that_is_its_own_iterator():
    """`list(c)` / a loop over an object whose __iter__ returns itself (a RecursionError inside
    the tracer before)."""
    class Count:
        def __init__(self, n):
            self.n, self.i = n, 0

        def __iter__(self):
            return self

        def __next__(self):
            if self.i >= self.n:
                raise StopIteration
            self.i += 1
            return self.i

    def f(x):
        c = Count(3)
        return x * sum(list(c)), [v for v in Count(2)], c.i

    # list(c) drains it as eager does; a loop takes it one item at a time (it may stop
    # half-way): a break there. Eager's values on every call, no internal error.
    compiled = tracer.compile(f)
    for _ in range(2):
        with traced() as t:
            out = compiled(torch.ones(2))
        assert torch.equal(out[0], torch.full((2,), 6.0)) and out[1:] == ([1, 2], 3)
        assert t.internal_errors == 0, str(t)


class _Vec:
    """Operator methods of a user class, as a small numeric wrapper writes them."""
    def __init__(self, t):
        self.t = t

    def __add__(self, o):
        if isinstance(o, (int, float, torch.Tensor)):
            return _Vec(self.t + o)
        return NotImplemented  # another _Vec: its __radd__ answers

    def __radd__(self, o):
        return _Vec(o + self.t * 10)

    def __iadd__(self, o):
        self.t = self.t + o
        return self

    def __neg__(self):
        return _Vec(-self.t)

    def __eq__(self, o):
        return isinstance(o, _Vec) and self.t.shape == o.t.shape

    def __lt__(self, o):
        return NotImplemented

    def __hash__(self):
        return 7


class _SubVec(_Vec):
    def __radd__(self, o):  # a subclass's own reflected method is asked first
        return _SubVec(o.t - self.t)

    def __gt__(self, o):
        return True


class _AddOnly:
    def __init__(self, n):
        self.n = n

    def __add__(self, o):
        return _AddOnly(self.n + (o.n if isinstance(o, _AddOnly) else o))


class _EqOnly:  # defines __eq__ alone: `!=` inverts it, and instances are unhashable
    def __init__(self, n):
        self.n = n

    def __eq__(self, o):
        return isinstance(o, _EqOnly) and o.n == self.n


def _raised(op):
    try:
        return op()
    except TypeError as e:
        return str(e)


def test_a_user_classs_operator_methods_are_inlined():
    """`v + 1`, `2 + v`, `-v`, `v == w`, `hash(v)` on objects of a user class were a graph break
    each (the operators modelled builtin values only): now CPython's protocol runs on the
    class's own methods, inlined: NotImplemented passes the turn to the reflected method (a
    subclass's own first), `+=` falls back to `__add__`, `!=` inverts `__eq__`, and where
    neither operand answers, CPython's TypeError."""
    def f(x, sub):
        v = _Vec(x)
        total = _AddOnly(1)
        total += 2  # no __iadd__: __add__
        v += 3
        return (x + 1, (v + 1).t, (2 + v).t, (v + sub).t, (sub + v).t, (-v).t, total.n,
                v == _Vec(x), v != _Vec(x), v == 1, 1 == v, v < sub, sub > v,
                _EqOnly(1) != _EqOnly(1), _EqOnly(1) != _EqOnly(2), _EqOnly(1) == 3, hash(v),
                _raised(lambda: _AddOnly(1) - 2), _raised(lambda: 1 - _AddOnly(1)),
                _raised(lambda: _EqOnly(1) < _EqOnly(2)), _raised(lambda: hash(_EqOnly(1))))

    check(f, torch.ones(2), _SubVec(torch.full((2,), 2.0)), graphs=1)


def test_an_operator_method_patched_on_the_class_recompiles():
    """The methods the protocol found (and those it found missing) are guarded on the class."""
    class Num:
        def __init__(self, n):
            self.n = n

        def __add__(self, o):
            return self.n + o

    def f(x, a):
        return x + 1, a + 1, 1 + a if hasattr(Num, "__radd__") else None

    c = tracer.compile(f)
    x = torch.ones(2)
    with traced() as t:
        assert c(x, Num(1))[1] == 2
        Num.__add__ = lambda self, o: self.n - o
        assert c(x, Num(1))[1] == 0
        Num.__radd__ = lambda self, o: o * 10
        assert c(x, Num(1))[2] == 10
    assert_captured(t, graphs=3, recompiles=2)
