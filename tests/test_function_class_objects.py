"""Function and class objects read in traced code are the objects Python has (issue 10):
functools.wraps attributes, function attributes, type(obj).__mro__ with mixins, hasattr on
a functools.partial, nonlocal stores into a called function's cell."""
import functools
import operator

import torch

from helpers import assert_captured, traced
from semantics_helpers import check, run
import tracer


def deco(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


@deco
def inner(x):
    "inner's doc"
    return x + 1


def test_wraps_attributes_of_a_decorated_function():
    def f(x):
        return inner(x), inner.__name__, inner.__qualname__, inner.__doc__, inner.__module__, \
            inner.__wrapped__ is inner.__wrapped__, inner.__wrapped__.__name__

    check(f, torch.ones(2), dynamo=True)


def test_wraps_applied_inside_the_frame():
    def f(x):
        def base(y):
            "base doc"
            return y * 2

        @functools.wraps(base)
        def wrapped(y):
            return base(y) + 1
        return wrapped(x), wrapped.__name__, wrapped.__doc__, wrapped.__wrapped__ is base, \
            hasattr(wrapped, "nothing")

    check(f, torch.ones(2), dynamo=True)


def plain(a, b=3, *, c=4):
    return a


def test_function_attributes_module_defaults():
    def f(x):
        return x + len(plain.__module__) + plain.__defaults__[0] + plain.__kwdefaults__["c"], \
            plain.__name__, getattr(plain, "marker", None)

    c, _ = check(f, torch.ones(2), dynamo=True)
    plain.marker = "set"
    try:
        _, d = run(c, f, torch.ones(2))
        assert d.frames == 1  # the attribute's absence was guarded
    finally:
        del plain.marker


class Mixin:
    def hello(self):
        return "mixin"


class Base:
    pass


class WithMixin(Mixin, Base):
    pass


def test_mro_with_a_mixin():
    def f(x, o):
        mro = type(o).__mro__
        return x + len(mro), [k.__name__ for k in mro], type(o).__bases__, WithMixin.__name__, \
            int.__name__, type(o).__qualname__

    check(f, torch.ones(2), WithMixin(), dynamo=True)


def test_comprehension_broken_halfway_keeps_its_items():
    class Loud:
        def __init__(self, name):
            self.name = name

        @property
        def label(self):
            print("reading", self.name)  # a graph break inside the comprehension
            return self.name

    def f(x, items):
        return x + 1, [i.label for i in items], {i.name: i.label for i in items}

    c = tracer.compile(f)
    run(c, f, torch.ones(1), [Loud("a"), Loud("b")])


def test_hasattr_on_a_partial():
    def f(x, p):
        q = functools.partial(torch.mul, other=2)
        return x + hasattr(p, "func") + hasattr(p, "nope") + hasattr(q, "keywords") + hasattr(q, "nope"), \
            p.keywords

    p = functools.partial(torch.add, alpha=2)
    c, _ = check(f, torch.ones(2), p, dynamo=True)
    p.nope = 1
    _, d = run(c, f, torch.ones(2), p)
    assert d.frames == 1


def make_accumulator():
    total = torch.zeros(2)

    def add(v):
        nonlocal total
        total = total + v
        return total
    return add


def test_nonlocal_store_into_a_called_functions_cell():
    acc, ref = make_accumulator(), make_accumulator()

    def f(x):
        acc(x)
        return acc(x * 2)

    def g(x):
        ref(x)
        return ref(x * 2)

    c = tracer.compile(f)
    before = tracer.stats()
    for _ in range(3):
        out, expected = c(torch.ones(2)), g(torch.ones(2))
        assert torch.equal(out, expected)
    after = tracer.stats()
    assert torch.equal(acc.__closure__[0].cell_contents, ref.__closure__[0].cell_contents)
    assert after.frames_traced - before.frames_traced == 1  # traced once, no break, no recompile
    assert after.graph_breaks == before.graph_breaks and after.fallbacks == before.fallbacks


def test_an_abstract_class_cannot_be_instantiated():
    """`Base()` of an ABC with abstract methods left raises CPython's TypeError in traced code
    too (uncaught: the frame breaks there; caught: the except branch runs); a concrete
    subclass is built as usual."""
    import abc

    class Base(abc.ABC):
        @abc.abstractmethod
        def go(self, x): ...

    class Impl(Base):
        def go(self, x):
            return x * 2

    def uncaught(x):
        Base()
        return x + 1

    def caught(x):
        try:
            Base()
        except TypeError as e:
            return x - 1, str(e)
        return x, ""

    def concrete(x):
        return Impl().go(x)
    x = torch.ones(2)
    c = tracer.compile(uncaught)
    for _ in range(2):
        out, _d = run(c, uncaught, x)  # (run compares the exception raised with eager's)
    c, _d = check(caught, x)
    result, _d = run(c, caught, x)
    assert result[0].tolist() == [0.0, 0.0] and "abstract" in result[1]
    check(concrete, x)


class _SpecConfig:
    """transformers' config mixin reads its own __dict__ in __getattribute__."""

    def __init__(self):
        self.problem_type = None
        self._spec = 3

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if key == "scaled":
            return spec * 10
        return super().__getattribute__(key)


def test_an_instance_dict_read_after_a_store_sees_the_store():
    """`obj.__dict__.get(k)` after the trace stored on obj was a graph break (BERT sequence
    classification with labels stores `config.problem_type`: 2 breaks a call). A key the
    trace stored reads the stored value; the others the real dict."""
    def f(x, cfg):
        if cfg.problem_type is None:
            cfg.problem_type = "cls"
        if cfg.problem_type == "cls":
            return x + cfg.scaled + cfg.__dict__["problem_type"].count("c")
        return x - 1

    x = torch.ones(2)
    c, _ = check(f, x, _SpecConfig())
    cfg = _SpecConfig()
    out = c(x, cfg)
    assert out.tolist() == [32.0, 32.0] and cfg.problem_type == "cls"
    result, _d = run(c, f, x, cfg)  # now "cls" from the start: another entry, equal to eager
    assert result.tolist() == [32.0, 32.0]


def _args_of(*args, **kwargs):
    return args, kwargs


def test_partial_of_a_partial_is_one_partial():
    """CPython makes `partial(partial(f, 1), 2)` one partial of f with args (1, 2) when the
    inner one never had an instance dict made. The trace nested them: `.func` was the inner
    partial and `.args` (2,), where eager has f and (1, 2)."""
    def f(x, p):
        q = functools.partial(functools.partial(_args_of, 1, k=1), 2, j=2)
        r = functools.partial(p, x)
        return x + 1, q.func is _args_of, q.args, q.keywords, r.func is _args_of, r.args, r(3)

    p = functools.partial(_args_of, 0)
    c, d = check(f, torch.ones(2), p)
    assert d.graphs == 1 and d.breaks == 0
    p.__dict__  # (made now: CPython no longer merges p into a partial of it)
    _, d = run(c, f, torch.ones(2), p)
    assert d.frames == 1 and d.fallbacks == 0  # a guard on p's instance dict told the difference


class _Shaped:
    def __init__(self, t):
        self.inner = _Box(t)
        self.scale = 3


class _Box:
    def __init__(self, t):
        self.t = t


def test_operator_itemgetter_and_attrgetter_made_in_the_frame_are_traced():
    """`operator.itemgetter(1)` / `operator.attrgetter("shape")` made in the frame and called
    (also several keys, a dotted name, as sort key): a break where each was made ("constructing
    a itemgetter object") and another where it was called, where torch.compile captures one
    graph. Now each call is the subscripts / attribute reads it stands for, traced (and
    guarded) as the plain ones, and eager's TypeErrors are raised in the frame."""
    def f(x, d, obj):
        first = operator.itemgetter(1)([x, x + 1])
        a, b = operator.itemgetter("a", "b")(d)
        t, scale = operator.attrgetter("inner.t", "scale")(obj)
        pairs = sorted([(1, 3), (2, 1)], key=operator.itemgetter(1))
        try:
            operator.attrgetter(1)
        except TypeError as e:
            msg = str(e)
        return x.reshape(operator.attrgetter("shape")(x)[::-1]) * a + b, first, t * scale, pairs, msg

    c, d = check(f, torch.ones(2, 3), {"a": 2, "b": 3}, _Shaped(torch.ones(3)), graphs=1, dynamo=True)
    run(c, f, torch.ones(2, 3), {"a": 4, "b": 5}, _Shaped(torch.ones(3)))  # changed inputs, eager's values


def test_operator_getters_passed_in_or_across_a_break():
    """A getter handed to the frame (or to a resume function at a break) was a break at its
    call ("descriptor wrapper_descriptor on itemgetter"). Now it is modelled by the constants it
    was made from, guarded: a getter of other keys recompiles."""
    def f(x, g):
        return x * len(repr(g([10, 20, 30]))), g

    c = tracer.compile(f)
    for g, traces in ((operator.itemgetter(0, 2), 1), (operator.itemgetter(0, 2), 0), (operator.itemgetter(1), 1)):
        with traced() as t:
            out = c(torch.ones(2), g)
        torch.testing.assert_close(out[0], f(torch.ones(2), g)[0])
        assert out[1] is g and t.frames_traced == traces
        if traces:
            assert_captured(t, graphs=1, breaks=0)
    assert len(c.entries) == 2

    def across(x):
        g = operator.attrgetter("shape")
        torch._dynamo.graph_break()
        return x.reshape(g(x)[::-1]), g

    with traced() as t:
        out = tracer.compile(across)(torch.ones(2, 3))
    assert out[0].shape == (3, 2) and out[1].__reduce__() == (operator.attrgetter, ("shape",))
    assert_captured(t, graphs=1, breaks=1)


_LRU_SCALE = [2]


@functools.lru_cache(None)
def _doubled(n):
    return n * 2, n + 1


@functools.lru_cache(None)
def _scaled(n):
    return n * _LRU_SCALE[0]  # reads shared state: the cache keeps the first answer


@functools.lru_cache(None)
def _listed(n):
    return [n]


def test_a_pure_lru_cache_function_is_traced_and_an_impure_one_stays_a_break():
    """A call of a user's lru_cache function was always a break ("whether its body runs
    depends on the cache"). torch.compile traces `__wrapped__`; now so does the trace where
    that cannot differ from the cache: constant arguments, a body that reads nothing guarded
    and logs no effect, an immutable result (one graph, no break). A body reading a global
    list whose value changes later (the cache keeps the old answer) and one returning a list
    (the caller may mutate the cached object) stay breaks, with eager's answers."""
    def pure(x):
        n, s = _doubled(3)
        return x * n, s

    check(pure, torch.ones(2), graphs=1, breaks=0, dynamo=True)

    def impure(x):
        return x * _scaled(3)

    c = tracer.compile(impure)
    for scale in (2, 5):
        _LRU_SCALE[0] = scale
        with traced() as t:
            torch.testing.assert_close(c(torch.ones(2)), impure(torch.ones(2)))
        assert t.fallbacks == 0 and t.internal_errors == 0
    assert _scaled(3) == 6  # the first answer, kept by the cache (so by both calls)

    def mutable(x):
        xs = _listed(3)
        xs.append(1)
        return x * len(xs)

    with traced() as t:
        out = tracer.compile(mutable)(torch.ones(2))
    assert out.tolist() == [2.0, 2.0] and _listed(3) == [3, 1]  # the cached list itself
    assert t.graph_breaks == 1 and t.fallbacks == 0
