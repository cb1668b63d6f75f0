"""Namedtuples as objects (named_tuples.NamedTupleVariable): methods, properties and class data
of a namedtuple class, `_replace` / `_asdict` / `_make`, and a subclass whose instances have a
__dict__ (an attribute set on one made in the frame, or on an input before the call). Each
compiled result is compared with eager's; each is captured whole, and later calls with other
values or a patched class give eager's answer."""
import collections
from typing import NamedTuple

import pytest
import torch

import tracer


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    yield
    tracer.reset()


class Pair(NamedTuple):
    scale: int
    value: torch.Tensor
    OFFSET = 3

    def total(self):
        return self.value * self.scale + self.OFFSET

    @property
    def double(self):
        return self.value * 2


class Tagged(Pair):  # no __slots__: its instances have a __dict__
    def more(self):
        return self.total() + self.OFFSET


Plain = collections.namedtuple("Plain", "x y")


def _same(got, want):
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want)
    elif isinstance(want, tuple):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        assert getattr(got, "__dict__", {}).keys() == getattr(want, "__dict__", {}).keys()
    else:
        assert got == want


def _captured(n_frames=1):
    s = tracer.stats()
    assert s.graph_breaks == 0 and s.internal_errors == 0 and s.fallbacks == 0
    assert s.frames_traced == n_frames


def test_methods_properties_and_generated_helpers():
    def f(p, q, x):
        r = Plain(x, 2)
        p2 = p._replace(scale=5)
        d = p._asdict()
        m = Plain._make([x + 1, 3])
        return p.total() + p.double + q.more(), p2, d["scale"], r._fields, m, p2.total(), Pair.OFFSET

    x = torch.randn(3)
    p, q = Pair(2, x), Tagged(3, x + 1)
    c = tracer.compile(f, backend="eager", fullgraph=True)
    _same(c(p, q, x), f(p, q, x))
    _captured()
    p4 = Pair(4, torch.randn(3))  # another int: a retrace (a symbolic one), eager's answer
    _same(c(p4, q, x), f(p4, q, x))


def test_an_attribute_set_on_a_namedtuple_made_in_the_frame():
    def f(x):
        t = Tagged(2, x)
        t.extra = x.sum()
        t.note = "made here"
        return t, t.more() + t.extra

    x = torch.randn(4)
    c = tracer.compile(f, backend="eager", fullgraph=True)
    got, want = c(x), f(x)
    _same(got, want)
    assert got[0].note == "made here" and torch.equal(got[0].extra, want[0].extra)
    _captured()


def test_an_input_with_instance_attributes():
    def f(t):
        return t.total() * t.tag

    x = torch.randn(3)
    t = Tagged(2, x)
    t.tag = 5
    c = tracer.compile(f, backend="eager", fullgraph=True)
    _same(c(t), f(t))
    _captured()
    t.tag = 7  # a constant read from the instance dict: guarded
    _same(c(t), f(t))
    u = Tagged(2, x)
    u.tag, u.total = 1, lambda: x * 100  # an instance attribute shadows the class's method
    _same(c(u), f(u))
    assert tracer.stats().internal_errors == 0


def test_a_class_attribute_patched_after_the_call_recompiles():
    def f(p):
        return p.total()

    p = Pair(2, torch.randn(3))
    c = tracer.compile(f, backend="eager", fullgraph=True)
    _same(c(p), f(p))
    old = Pair.OFFSET
    try:
        Pair.OFFSET = 10
        _same(c(p), f(p))
    finally:
        Pair.OFFSET = old
    _same(c(p), f(p))
