"""What an attribute read resolved through the object's class is guarded (found by differential
testing against eager, 2026-11-25; each case returned the traced answer after the fact changed).

`obj.name` that finds `name` on the class (a method, a property, a staticmethod or
classmethod, `__call__`), or that falls back to the class's `__getattr__`, depends on three
facts the object's own guards do not cover: what the class (its MRO) holds under that name,
that the instance dict does not shadow it, and (for `__getattr__`) that ordinary lookup still
finds nothing. Patching a method (`mock.patch.object`), setting it on the instance, or
setting the attribute a `__getattr__` stood in for must recompile, and warm calls of the
unchanged program must not.
"""
from unittest import mock

import pytest
import torch

import tracer
from helpers import assert_captured, assert_warm, traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")


class A:
    def f(self, x):
        return x + 1

    @property
    def p(self):
        return 1.0

    @staticmethod
    def s(x):
        return x + 1

    @classmethod
    def c(cls, x):
        return x + 1

    def __call__(self, x):
        return x + 1


class Child(A):
    pass


def _same_after(fn, args, change, undo=None):
    """fn compiled: equal to eager before the change (captured, warm calls compile nothing),
    and after it (the change recompiles)."""
    tracer.reset()
    c = tracer.compile(fn)
    with traced() as t:
        assert torch.equal(c(*args), fn(*args))
    assert_captured(t)
    assert_warm(c, *args, fresh=False)
    change()
    try:
        with traced() as t:
            got = c(*args)
        assert torch.equal(got, fn(*args)), f"after the change: {got} vs eager {fn(*args)}"
        assert t.frames_traced >= 1, "the change did not recompile"
    finally:
        if undo is not None:
            undo()
    with traced() as t:  # and back: the first entry still serves
        assert torch.equal(c(*args), fn(*args))


def test_a_method_patched_on_the_class_recompiles():
    a = A()

    def g(x):
        return a.f(x)
    patcher = mock.patch.object(A, "f", lambda self, x: x - 1)
    _same_after(g, (torch.zeros(1),), patcher.start, patcher.stop)


def test_a_method_patched_on_a_base_class_recompiles():
    a = Child()

    def g(x):
        return a.f(x)
    patcher = mock.patch.object(A, "f", lambda self, x: x * 10)
    _same_after(g, (torch.ones(1),), patcher.start, patcher.stop)


def test_a_method_defined_on_the_subclass_later_recompiles():
    a = Child()

    def g(x):
        return a.f(x)
    _same_after(g, (torch.ones(1),), lambda: setattr(Child, "f", lambda self, x: x * 3),
                lambda: delattr(Child, "f"))


def test_a_method_shadowed_by_an_instance_attribute_recompiles():
    a = A()

    def g(x):
        return a.f(x)
    _same_after(g, (torch.zeros(1),), lambda: setattr(a, "f", lambda x: x + 100),
                lambda: delattr(a, "f"))


def test_a_method_of_an_argument_patched_on_the_class_recompiles():
    def g(obj, x):
        return obj.f(x)
    patcher = mock.patch.object(A, "f", lambda self, x: x - 1)
    _same_after(g, (A(), torch.zeros(1)), patcher.start, patcher.stop)


def test_a_replaced_property_recompiles():
    a = A()

    def g(x):
        return x * a.p
    _same_after(g, (torch.ones(1),), lambda: setattr(A, "p", property(lambda self: 5.0)),
                lambda: setattr(A, "p", A.__dict__["p"]))


def test_a_replaced_staticmethod_recompiles():
    a = A()

    def g(x):
        return a.s(x)
    old = A.__dict__["s"]
    _same_after(g, (torch.zeros(1),), lambda: setattr(A, "s", staticmethod(lambda x: x - 1)),
                lambda: setattr(A, "s", old))


def test_a_replaced_classmethod_recompiles():
    a = A()

    def g(x):
        return a.c(x)
    old = A.__dict__["c"]
    _same_after(g, (torch.zeros(1),), lambda: setattr(A, "c", classmethod(lambda cls, x: x - 1)),
                lambda: setattr(A, "c", old))


def test_a_replaced_dunder_call_recompiles():
    a = A()

    def g(x):
        return a(x)
    old = A.__dict__["__call__"]
    _same_after(g, (torch.zeros(1),), lambda: setattr(A, "__call__", lambda self, x: x - 1),
                lambda: setattr(A, "__call__", old))


def test_a_module_forward_patched_on_the_class_or_the_instance_recompiles():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1
    m = M()

    def g(x):
        return m(x) * 2
    patcher = mock.patch.object(M, "forward", lambda self, x: x - 1)
    _same_after(g, (torch.zeros(1),), patcher.start, patcher.stop)
    _same_after(g, (torch.zeros(1),), lambda: setattr(m, "forward", lambda x: x + 6),
                lambda: delattr(m, "forward"))


class Fallback:
    def __getattr__(self, name):
        return 1


def test_an_attribute_a_getattr_fallback_stood_in_for_recompiles_once_set():
    g = Fallback()

    def f(x):
        return x * g.scale
    _same_after(f, (torch.ones(1),), lambda: setattr(g, "scale", 10), lambda: delattr(g, "scale"))
    _same_after(f, (torch.ones(1),), lambda: setattr(Fallback, "scale", 7),
                lambda: delattr(Fallback, "scale"))


def test_fresh_objects_of_the_same_class_do_not_recompile():
    """The guards are on the class and the instance dict, not the object's identity."""
    def g(obj, x):
        return obj.f(x) + obj.c(x) + obj.s(x) * obj.p
    c = tracer.compile(g)
    x = torch.ones(2)
    assert torch.equal(c(A(), x), g(A(), x))
    assert_captured(c)
    for _ in range(3):
        with traced() as t:
            assert torch.equal(c(A(), x), g(A(), x))
        assert t.frames_traced == 0, str(t)


def test_a_compiled_module_runs_the_forward_eager_would_run_now():
    """`tracer.compile(m)` calls the forward the module's class or instance has at the call,
    as `m(x)` does: patched on the class, it is compiled in its turn; set on the instance,
    it runs as it is."""
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1
    m = M()
    cm = tracer.compile(m)
    x = torch.zeros(1)
    assert torch.equal(cm(x), m(x))
    with mock.patch.object(M, "forward", lambda self, x: x - 1):
        with traced() as t:
            assert torch.equal(cm(x), m(x)) and m(x).item() == -1.0
        assert t.frames_traced == 1, str(t)
    m.forward = lambda x: x * 0 + 7
    assert torch.equal(cm(x), m(x)) and m(x).item() == 7.0
    del m.forward
    with traced() as t:
        assert torch.equal(cm(x), m(x))
    assert t.frames_traced == 0, str(t)


def test_a_staticmethod_read_through_the_class_recompiles_when_replaced():
    def g(x):
        return A.s(x) + A.c(x)
    old_s, old_c = A.__dict__["s"], A.__dict__["c"]
    _same_after(g, (torch.zeros(1),), lambda: setattr(A, "s", staticmethod(lambda x: x - 1)),
                lambda: setattr(A, "s", old_s))
    _same_after(g, (torch.zeros(1),), lambda: setattr(A, "c", classmethod(lambda cls, x: x * 5)),
                lambda: setattr(A, "c", old_c))


def test_isinstance_of_a_users_abc_recompiles_after_register():
    import abc

    class Proto(abc.ABC):
        pass

    class Plain:
        pass
    a = Plain()

    def g(x):
        return x + isinstance(a, Proto)
    _same_after(g, (torch.zeros(1),), lambda: Proto.register(Plain))


def test_isinstance_of_a_runtime_checkable_protocol_reads_the_instance():
    """A Protocol's metaclass answers isinstance from the instance's attributes, not its
    type: a break (it was folded by type: eager True, compiled False)."""
    import typing

    @typing.runtime_checkable
    class HasFoo(typing.Protocol):
        def foo(self): ...

    class Plain:
        pass
    o = Plain()
    o.foo = lambda: 1

    def g(x):
        return x + isinstance(o, HasFoo)
    assert torch.equal(tracer.compile(g)(torch.zeros(1)), g(torch.zeros(1)))
    assert g(torch.zeros(1)).item() == 1.0


def test_hasattr_on_a_module_recompiles_once_the_attribute_is_set():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1 if hasattr(self, "extra") else x - 1
    m = M()

    def g(x):
        return m(x)
    _same_after(g, (torch.zeros(1),), lambda: setattr(m, "extra", 1), lambda: delattr(m, "extra"))


def test_truth_of_an_object_recompiles_once_its_class_defines_bool():
    class T:
        pass
    o = T()

    def g(x):
        return x + 1 if o else x - 1
    _same_after(g, (torch.zeros(1),), lambda: setattr(T, "__bool__", lambda self: False),
                lambda: delattr(T, "__bool__"))


def test_a_method_of_an_abc_subclass_patched_recompiles():
    """Classes of ABCMeta (collections.abc mixins, transformers' attention interfaces) are
    frozen by their version tag too: patching one must still recompile."""
    import abc
    import collections.abc

    class Registry(collections.abc.Mapping, metaclass=abc.ABCMeta):
        def __getitem__(self, k):
            return 2

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

        def scale(self, x):
            return x * 2
    r = Registry()

    def g(x):
        return r.scale(x) + r["k"]
    patcher = mock.patch.object(Registry, "scale", lambda self, x: x * 5)
    _same_after(g, (torch.ones(1),), patcher.start, patcher.stop)


# ---- lookups on a class reached without the object's own source ---------------------------
# (objects made in the frame, type(o), super(), the with statement: found by differential testing,
# 2026-11-25; each returned the traced answer after the class changed)

class _Made:
    def f(self, x):
        return x + 1

    @property
    def p(self):
        return 1.0

    def __call__(self, x):
        return x + 1

    data = 1.0


class _Manager:
    def __enter__(self):
        return 1.0

    def __exit__(self, *exc):
        return False


def test_a_method_of_an_object_made_in_the_frame_recompiles_when_patched():
    def g(x):
        return _Made().f(x)
    patcher = mock.patch.object(_Made, "f", lambda self, x: x - 1)
    _same_after(g, (torch.zeros(1),), patcher.start, patcher.stop)


def test_a_property_of_an_object_made_in_the_frame_recompiles_when_replaced():
    def g(x):
        return x + _Made().p
    patcher = mock.patch.object(_Made, "p", property(lambda self: 5.0))
    _same_after(g, (torch.zeros(1),), patcher.start, patcher.stop)


def test_calling_an_object_made_in_the_frame_recompiles_when_call_is_patched():
    def g(x):
        return _Made()(x)
    patcher = mock.patch.object(_Made, "__call__", lambda self, x: x - 1)
    _same_after(g, (torch.zeros(1),), patcher.start, patcher.stop)


def test_with_recompiles_when_enter_is_patched():
    cm = _Manager()

    def g(x):
        with cm as v:
            return x + v
    patcher = mock.patch.object(_Manager, "__enter__", lambda self: 7.0)
    _same_after(g, (torch.zeros(1),), patcher.start, patcher.stop)


def test_reads_through_type_of_an_object_recompile_when_the_class_changes():
    o = _Made()

    def g(x):
        return type(o).f(o, x) + type(o).data
    p1 = mock.patch.object(_Made, "f", lambda self, x: x - 1)
    _same_after(g, (torch.zeros(1),), p1.start, p1.stop)
    p2 = mock.patch.object(_Made, "data", 3.0)
    _same_after(g, (torch.zeros(1),), p2.start, p2.stop)


class _Base:
    def f(self, x):
        return x + 1

    @classmethod
    def make(cls, x):
        return x + 1


class _Derived(_Base):
    def f(self, x):
        return super().f(x) * 2

    @classmethod
    def make(cls, x):
        return super().make(x) * 2


class _Mid(_Base):
    pass


class _Deep(_Mid):
    def f(self, x):
        return super().f(x) * 2


def test_super_recompiles_when_the_base_method_is_patched():
    d = _Derived()

    def g(x):
        return d.f(x) + _Derived.make(x)
    p1 = mock.patch.object(_Base, "f", lambda self, x: x - 1)
    _same_after(g, (torch.zeros(1),), p1.start, p1.stop)
    p2 = mock.patch.object(_Base, "make", classmethod(lambda cls, x: x + 10))
    _same_after(g, (torch.zeros(1),), p2.start, p2.stop)


def test_super_recompiles_when_a_class_between_gains_the_method():
    d = _Deep()

    def g(x):
        return d.f(x)
    p = mock.patch.object(_Mid, "f", lambda self, x: x - 1, create=True)
    _same_after(g, (torch.zeros(1),), p.start, p.stop)


class _ScaledLinear(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


def test_super_forward_of_a_module_recompiles_when_the_base_forward_is_patched():
    m = _ScaledLinear(1, 1)

    def g(x):
        return m(x)
    p = mock.patch.object(torch.nn.Linear, "forward", lambda self, x: x * 0)
    with torch.no_grad():
        _same_after(g, (torch.ones(1, 1),), p.start, p.stop)


class _Plain:
    pass


def test_default_equality_recompiles_once_the_class_defines_eq():
    e1, e2 = _Plain(), _Plain()

    def g(x):
        return x + 1 if e1 == e2 else x - 1

    def add_eq():
        _Plain.__eq__ = lambda s, o: True

    def remove_eq():
        del _Plain.__eq__
    _same_after(g, (torch.zeros(1),), add_eq, remove_eq)


class _OnlyNe:
    def __ne__(self, other):
        return False


def test_not_equal_uses_a_classs_own_ne():
    n1, n2 = _OnlyNe(), _OnlyNe()

    def g(x):
        return x + (n1 != n2)
    c = tracer.compile(g)
    assert torch.equal(c(torch.zeros(1)), g(torch.zeros(1)))


def test_super_with_an_object_of_another_class_raises_as_python_does():
    class Duck:
        pass

    def g(x):
        try:
            return _Derived.f(Duck(), x)
        except TypeError:
            return x - 100
    with traced() as t:
        assert torch.equal(tracer.compile(g)(torch.zeros(1)), g(torch.zeros(1)))
    assert t.internal_errors == 0, str(t)


class _P1:
    def g(self, x):
        return x + 1


class _P2:
    def g(self, x):
        return x + 100


class _Q(_P1):
    def g(self, x):
        return super().g(x) * 2


def test_super_recompiles_when_the_class_bases_change():
    q = _Q()

    def g(x):
        return q.g(x)

    def rebase():
        _Q.__bases__ = (_P2,)

    def restore():
        _Q.__bases__ = (_P1,)
    _same_after(g, (torch.zeros(1),), rebase, restore)


# ---- bool() of an object passed in: its class's __bool__ / __len__ ----------------------
class Cache:
    """The shape of transformers' DynamicCache (5.1x): truth is len(self.layers) != 0."""

    def __init__(self, n):
        self.layers = list(range(n))

    def __len__(self):
        return len(self.layers)


class Flag:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


def _branch(x, obj):
    if obj:
        return x + 1
    return x - 1


@pytest.mark.parametrize("make", [lambda: (Cache(0), Cache(2)), lambda: (Flag(False), Flag(True))],
                         ids=["__len__", "__bool__"])
def test_bool_of_an_object_runs_its_class_method_and_guards_what_it_read(make):
    empty, full = make()
    x = torch.randn(3)
    c = tracer.compile(_branch)
    with traced() as t:
        torch.testing.assert_close(c(x, full), _branch(x, full))
    assert_captured(t, min_ops=1, graphs=1, breaks=0)
    assert_warm(c, x, full)
    with traced() as t:
        torch.testing.assert_close(c(x, empty), _branch(x, empty))
    assert t.recompiles == 1, str(t)
    if isinstance(full, Cache):
        full.layers.clear()  # what __len__ read changed: the object is now false
    else:
        full.on = False
    torch.testing.assert_close(c(x, full), _branch(x, full))


def test_bool_follows_a_bool_method_added_to_the_class_later():
    x, cache = torch.randn(3), Cache(2)
    c = tracer.compile(_branch)
    torch.testing.assert_close(c(x, cache), x + 1)
    with mock.patch.object(Cache, "__bool__", lambda self: False, create=True):
        with traced() as t:
            torch.testing.assert_close(c(x, cache), _branch(x, cache))
        assert t.recompiles == 1, str(t)
    torch.testing.assert_close(c(x, cache), x + 1)


class _Stored:
    pass


def _store_then_read(x, obj):
    obj.v = 2
    return x * obj.v


@pytest.mark.parametrize("change", ["property", "setattr"])
def test_an_attribute_store_recompiles_once_the_class_takes_it_over(change):
    """`obj.v = 2` is replayed after the graph and a later `obj.v` in the trace reads the
    stored value; both rely on the class having no descriptor under `v` and no `__setattr__`
    of its own. Neither was guarded: a property or a `__setattr__` added to the class later
    kept the traced answer (2 where eager gives 10)."""
    c = tracer.compile(_store_then_read)
    x = torch.ones(1)
    assert torch.equal(c(x, _Stored()), x * 2)
    if change == "property":
        patch = mock.patch.object(_Stored, "v", property(lambda self: 10, lambda self, v: None), create=True)
    else:
        patch = mock.patch.object(_Stored, "__setattr__", lambda self, n, v: object.__setattr__(self, n, v * 5),
                                  create=True)
    with patch:
        with traced() as t:
            got = c(x, _Stored())
        assert torch.equal(got, _store_then_read(x, _Stored())) and got.item() == 10.0
        assert t.recompiles == 1, str(t)
    with traced() as t:
        assert torch.equal(c(x, _Stored()), x * 2)
    assert t.frames_traced == 0, str(t)


# ---- a descriptor read on the class: `Cls.attr` runs type(d).__get__(d, None, Cls) ----------

_reads = []


class classproperty:  # the common recipe (transformers' configuration_utils has one)
    def __init__(self, fget):
        self.fget = fget

    def __get__(self, obj, cls):
        return self.fget(cls)


class counting_classproperty(classproperty):
    def __get__(self, obj, cls):
        _reads.append(1)
        return self.fget(cls)


class Cfg:
    base = 2.0

    @classproperty
    def scale(cls):
        return cls.base * 3

    @counting_classproperty
    def count(cls):
        return len(_reads)  # another value on every read


def _three_calls(f):
    """(compiled results, eager results, what the tracer did) of three calls of `f(ones(1))`,
    each run starting from an empty `_reads` (the descriptors below count their reads in it)."""
    c = tracer.compile(f)
    _reads.clear()
    with traced() as t:
        got = [c(torch.ones(1)).item() for _ in range(3)]
    _reads.clear()
    return got, [f(torch.ones(1)).item() for _ in range(3)], t


def test_a_descriptor_whose_value_changes_on_every_read_is_traced_on_the_class():
    """`Cfg.count` with a classproperty whose `__get__` appends to a list: the trace wrapped the
    raw class entry (the descriptor object) under the source `Cfg.count`, and the guard read
    `Cfg.count` again, running `__get__`: 'guards fail on the inputs they were built from'
    (an internal error and a fallback), and the guard's own reads shifted every later value
    ([3, 4, 5] where eager gives [1, 2, 3]). The `__get__` is now inlined: its effect on the
    list is the trace's, and what it read (the list's length) is guarded."""
    def f(x):
        return x * Cfg.count

    got, eager, t = _three_calls(f)
    assert got == eager == [1.0, 2.0, 3.0]
    assert_captured(t, min_ops=3, breaks=0)


def test_a_classproperty_is_captured_and_guards_what_it_read():
    """The side-effect-free recipe: `Cfg.scale` read through the class itself, through
    `type(obj)` and through an instance (each was an internal error or a break). The traced
    `__get__` reads `cls.base`: changing it recompiles, and so does replacing the descriptor."""
    obj = Cfg()

    def f(x, o):
        return x * Cfg.scale + type(o).scale - o.scale

    x = torch.ones(2)
    c = tracer.compile(f)
    with traced() as t:
        assert torch.equal(c(x, obj), f(x, obj))
    assert_captured(t, min_ops=2, breaks=0)
    assert_warm(c, x, obj)
    with mock.patch.object(Cfg, "base", 5.0):
        with traced() as t:
            assert torch.equal(c(x, obj), f(x, obj)) and c(x, obj)[0].item() == 15.0
        assert t.recompiles == 1, str(t)
    with mock.patch.object(Cfg, "scale", classproperty(lambda cls: -1.0)):
        with traced() as t:
            assert torch.equal(c(x, obj), f(x, obj)) and c(x, obj)[0].item() == -1.0
        assert t.recompiles == 1, str(t)


class _InstanceOnly:
    """A descriptor that gives itself on the class and the value on an instance."""

    def __get__(self, obj, cls):
        return self if obj is None else obj.k * 2


class _Holder:
    d = _InstanceOnly()

    def __init__(self, k):
        self.k = k


def test_a_user_descriptor_read_on_an_instance_is_traced():
    """`h.d` with a Python `__get__` on the descriptor's class was a graph break ('descriptor
    _InstanceOnly on _Holder'): it is inlined like a property's getter. On the class it gives
    the descriptor object itself, held by the class's guard, not re-read."""
    def f(x, h):
        return x * h.d + (_Holder.d is _Holder.__dict__["d"])

    x = torch.ones(2)
    c = tracer.compile(f)
    with traced() as t:
        assert torch.equal(c(x, _Holder(3)), f(x, _Holder(3)))
    assert_captured(t, min_ops=2, breaks=0)
    with traced() as t:
        assert torch.equal(c(x, _Holder(4)), f(x, _Holder(4)))
    assert t.recompiles == 1, str(t)


class _Meta(type):
    @property
    def counted(cls):
        _reads.append(1)
        return len(_reads)

    def twice(cls, x):
        return x * 2


class _WithMeta(metaclass=_Meta):
    pass


class _LookupMeta(type):
    def __getattribute__(cls, name):
        return 7 if name == "k" else super().__getattribute__(name)

    def __getattr__(cls, name):
        return 5


class _WithLookupMeta(metaclass=_LookupMeta):
    k = 1


def test_a_metaclass_property_and_method_are_traced_on_the_class():
    """A metaclass property read on the class ran its getter while tracing and again in the
    guard (a fallback, and [5, 6, 7] where eager gives [1, 2, 3]); a metaclass method was a
    break ('class _WithMeta has no attribute'). Both are bound to the class and traced."""
    def f(x):
        return _WithMeta.twice(x) * _WithMeta.counted

    got, eager, t = _three_calls(f)
    assert got == eager == [2.0, 4.0, 6.0]
    assert_captured(t, min_ops=6, breaks=0)


def test_a_metaclass_that_customises_lookup_is_a_break_not_a_guess():
    """A metaclass `__getattribute__` was ignored (`_WithLookupMeta.k` traced as the class's 1,
    eager 7), and an AttributeError of a class read was taken for the answer where the
    metaclass's `__getattr__` gives one (the trace took the except branch). Only the check of
    the new entry's guards on its own inputs caught them (an internal error, then a fallback):
    wrong answers without it. Both are breaks now."""
    def f(x):
        try:
            v = _WithLookupMeta.missing
        except AttributeError:
            v = -1
        return x * v + _WithLookupMeta.k

    x = torch.ones(1)
    c = tracer.compile(f)
    with traced() as t:
        assert torch.equal(c(x), f(x)) and f(x).item() == 12.0
    assert t.internal_errors == 0 and t.fallbacks == 0 and t.graph_breaks >= 1 and t.graphs >= 1, str(t)


def test_a_c_descriptor_that_does_not_give_itself_on_the_class_is_a_break():
    """`object.__subclasshook__` (a classmethod_descriptor: a new bound method on every read)
    was wrapped as the raw entry and guarded by re-reading it: an internal error. A C
    descriptor is relied on only where it gives itself back on the class."""
    def f(x):
        return x + (object.__subclasshook__ is not None) + A.s(x) + A.c(x) + (A.p is not None)

    x = torch.ones(1)
    c = tracer.compile(f)
    with traced() as t:
        assert torch.equal(c(x), f(x))
    assert t.internal_errors == 0 and t.fallbacks == 0 and t.graph_breaks == 1 and t.graphs >= 1, str(t)


class _StaticGet:
    """A descriptor whose `__get__` is a staticmethod: Python code, which CPython calls with
    the descriptor, the object and the class (a staticmethod is callable)."""

    @staticmethod
    def __get__(desc, obj, cls):
        _reads.append(1)
        return len(_reads)


class _HasStaticGet:
    d = _StaticGet()


def test_a_descriptor_whose_get_is_not_a_function_never_runs_while_tracing():
    """A `__get__` that is Python code but not a function (a staticmethod) is neither inlined
    nor called while tracing to see whether it gives the descriptor back: the read is a break,
    and the list it appends to grows once per call, as in eager."""
    def f(x):
        return x * _HasStaticGet.d

    got, eager, t = _three_calls(f)
    assert got == eager == [1.0, 2.0, 3.0]
    assert t.internal_errors == 0 and t.fallbacks == 0 and t.graph_breaks >= 1, str(t)
