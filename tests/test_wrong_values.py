"""Values a trace once got wrong (issue 35), each reproduced as found and compared with eager:
attribute lookups that differ from Python's order, a keyword named like our own parameter, a
leaf tensor a compiling backend handed back without its requires_grad. Each test failed before
its fix; each also checks that the work was captured (no silent fallback)."""
import collections
import functools
import operator
import typing

import pytest
import torch

import tracer
from semantics_helpers import check, run
from helpers import assert_captured, traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")


def _add(a, b):
    return a + b


def test_a_partial_has_no_name_or_qualname():
    """`functools.partial.__name__` is the class's own name; an instance has neither
    `__name__` nor `__qualname__` (the trace asked the class object)."""
    def f(x):
        p = functools.partial(_add, 1)
        return x + 1, hasattr(p, "__name__"), hasattr(p, "__qualname__"), hasattr(p, "func")

    x = torch.ones(2)
    with traced() as t:
        got = tracer.compile(f)(x)
    assert got[1:] == f(x)[1:] == (False, False, True)
    torch.testing.assert_close(got[0], x + 1)
    assert_captured(t)


class _Shadowed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(2, 2)  # in _modules; the class attribute below wins lookups

    def proj(self, x):  # noqa: F811 - the point: a method named like the submodule
        return x * 100

    def forward(self, x):
        return self.proj(x) + self._modules["proj"](x)


def test_a_method_named_like_a_submodule_is_what_self_finds():
    """Python finds a class attribute before nn.Module.__getattr__ looks in `_modules`: eager
    calls the method; the trace called the submodule."""
    m = _Shadowed()
    x = torch.randn(3, 2)
    with traced() as t:
        got = tracer.compile(m)(x)
    torch.testing.assert_close(got, m(x))
    assert_captured(t, min_ops=2)


class _Pair(typing.NamedTuple):
    a: int
    b: int


class _PairWithDict(_Pair):
    pass


def test_deque_extendleft_and_a_namedtuple_subclass_attribute():
    """Two of the shapes the issue listed, found correct here; kept as guards against their
    return: `deque.extendleft` reverses, and an attribute set on an instance of a NamedTuple
    subclass (which has a __dict__) made in the frame is on the returned object."""
    def f(x):
        d = collections.deque([1, 2])
        d.extendleft([3, 4])
        n = _PairWithDict(1, 2)
        n.extra = 5
        return x + 1, list(d), n

    x = torch.ones(1)
    with traced() as t:
        out, dq, n = tracer.compile(f)(x)
    assert dq == [4, 3, 1, 2] and n == (1, 2) and n.extra == 5 and type(n) is _PairWithDict
    # (the attribute set on the NamedTuple subclass instance is captured: the rebuilt object has it)
    assert_captured(t)


def test_extend_pulls_a_generator_one_item_at_a_time():
    """`deque.extend`/`extendleft` add each item before the generator computes the next, so a
    generator that reads the deque sees it grow (Dynamo's test_deque_extendleft: the trace read
    the generator whole first and gave deque([3, 2, 1, 1]) for eager's deque([4, 2, 1, 1]));
    extending by the deque itself copies it first, as CPython does."""
    def f(x):
        y = collections.deque([1])
        y.extendleft(y[0] + z for z in range(3))
        b = collections.deque([1], maxlen=3)
        b.extend(b[-1] * 2 for _ in range(4))
        s = collections.deque([1, 2])
        s.extend(s)
        w = [1]
        w.extend(w[-1] + 1 for _ in range(3))
        return x + 1, y, b, s, w

    x = torch.ones(1)
    with traced() as t:
        out = tracer.compile(f, fullgraph=True)(x)
    ref = f(x)
    assert out[1:] == ref[1:] and ref[1] == collections.deque([4, 2, 1, 1]) and torch.equal(out[0], ref[0])
    assert_captured(t)


class _SetOnly:
    def __set__(self, obj, value):
        obj.__dict__["_v"] = value


class _HasSetOnly:
    d = _SetOnly()


def test_a_set_only_data_descriptor_reads_back_as_itself():
    def f(x):
        return x + 1, type(_HasSetOnly().d).__name__

    x = torch.ones(1)
    with traced() as t:
        got = tracer.compile(f)(x)
    assert got[1] == "_SetOnly"
    assert_captured(t)


@pytest.mark.parametrize("x_grad", [False, True], ids=["no-grad-input", "grad-input"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_leaf_made_with_requires_grad_in_the_frame_keeps_it(backend, x_grad):
    """`torch.ones(2, requires_grad=True)` returned from the frame is a leaf that requires
    grad, whatever the backend, and gradients reach it: AOTAutograd handed it back without
    requires_grad (no input needing a gradient: the graph ran under no_grad) or, with one,
    as an output of its backward node (not a leaf, its .grad never filled)."""
    def f(x):
        w = torch.ones(2, requires_grad=True)
        return x * 2, w

    x = torch.ones(2, requires_grad=x_grad)
    with traced() as t:
        y, w = tracer.compile(f, backend=backend)(x)
    assert w.requires_grad and w.is_leaf and y.requires_grad == x_grad
    ((w * 3).sum() + y.sum()).backward() if x_grad else (w * 3).sum().backward()
    torch.testing.assert_close(w.grad, torch.full((2,), 3.0))
    if x_grad:
        torch.testing.assert_close(x.grad, torch.full((2,), 2.0))
    assert_captured(t)


def test_a_keyword_named_self_reaches_the_function():
    """A compiled function with a parameter named `self`, called by keyword: the call's own
    keyword (our wrapper's first parameter took it: "got multiple values for argument 'self'")."""
    def f(self, x):
        return self * 2 + x

    a, b = torch.ones(2), torch.full((2,), 3.0)
    with traced() as t:
        got = tracer.compile(f)(self=a, x=b)
    torch.testing.assert_close(got, f(self=a, x=b))
    assert_captured(t)


# ---- found by a review of this session's container, exception and constructor changes ------

def _same_calls(fn, *args):
    """Compiled vs eager on two calls (semantics_helpers.run: results or exceptions, and what
    the call did to its arguments)."""
    c = tracer.compile(fn)
    for _ in range(2):
        run(c, fn, *args)


def test_dict_update_stores_each_pair_as_the_generator_yields_it():
    def reads_the_dict(x):
        d = {}
        d.update((k, len(d)) for k in "abc")
        return x + 1, d

    def raises_half_way(x):
        def pairs():
            yield (1, 2)
            raise KeyError("boom")
        d = {}
        try:
            d.update(pairs())
        except KeyError:
            pass
        return x + 1, d

    for fn in (reads_the_dict, raises_half_way):
        _same_calls(fn, torch.ones(1))


def test_sets_iterate_and_pop_in_cpythons_table_order():
    """A constant set literal is merged from a frozenset (a presized table), set(d) of a dict
    too: the members' order (and the one pop() takes, after a graph break) is that table's; a
    set leaving the frame is rebuilt by replaying its history."""
    def f(x, extra):
        s = {16, 1, 2, 3, 4}
        t = set({16: 0, 1: 0, 2: 0, 3: 0, 4: 0})
        u = {"apple", "banana"}.union({"cherry"}, extra)
        u.update(["k"])
        u.remove("k")
        w = {16, 1, 2, 3, 4}
        w.discard(16)
        w.add(32)
        return x + 1, list(s), list(t), list(u), w, list(w), w.pop(), s

    _same_calls(f, torch.ones(1), ["q", "r"])


def test_hasattr_answered_by_the_type_is_guarded():
    P = collections.namedtuple("P", "a")

    def f(x, p):
        return x + 1, hasattr(p, "foo")

    c = tracer.compile(f)
    assert c(torch.ones(1), P(1))[1] is False
    P.foo = 3
    assert c(torch.ones(1), P(1))[1] is True


class _ArgsShadowed(ValueError):
    args = ("fixed",)


class _Falsy(ValueError):
    def __bool__(self):
        return False


class _NotAnException:
    pass


def test_exception_classes_that_change_their_instances_are_not_modelled():
    def f(x):
        try:
            raise _ArgsShadowed("m")
        except _ArgsShadowed as e:
            a = e.args
        try:
            raise _Falsy("b")
        except _Falsy as e:
            b = bool(e)
        return x + 1, a, b

    def catches_a_plain_class(x):
        try:
            raise KeyError("a")
        except _NotAnException:
            return x
        except KeyError:
            return x + 1

    _same_calls(f, torch.ones(1))
    _same_calls(catches_a_plain_class, torch.ones(1))


def test_legacy_tensor_types_are_cpu_tensors_under_another_default_device():
    def f(x):
        return x + 1, torch.LongTensor([1, 2]).device, torch.Tensor(2, 3).device

    with torch.device("meta"):
        _same_calls(f, torch.ones(2, device="cpu"))


def test_set_methods_raise_as_eager_on_unhashable_members():
    def f(x):
        try:
            ok = {1, 2}.issubset([[1]])
        except TypeError as e:
            ok = str(e)
        t = {frozenset({1})}
        t.remove({1})  # (a set is looked up as a frozenset)
        return x + 1, ok, t

    _same_calls(f, torch.ones(1))
    with traced() as t:
        tracer.compile(f)(torch.ones(1))
    assert t.internal_errors == 0


def test_a_repeated_sequence_keeps_its_kind_and_leaves_the_other_operand_alone():
    """`n *= lst` with an int n was modelled as `lst *= n` (the list grew in place; eager makes
    a new list and leaves it alone); `q * 2` of a deque gave a list; `q *= 2` of a bounded
    deque kept every item until rebuilt (`len(q)` was 6; eager drops the oldest past maxlen)."""
    def f(x, lst):
        n = 2
        n *= lst
        q = collections.deque([1, 2, 3], maxlen=4)
        doubled = q * 2
        q *= 2
        return x + 1, n, lst, doubled, q, len(q)

    c = tracer.compile(f)
    with traced() as t:
        for _ in range(2):
            run(c, f, torch.ones(1), [1, 2])
    assert_captured(t)


def _module_with_getattr(name, source):
    """A user module in sys.modules whose globals are `source` run (a PEP 562 __getattr__)."""
    import sys
    import types
    mod = types.ModuleType(name)
    exec(source, mod.__dict__)
    sys.modules[name] = mod
    return mod


_LAZY_SOURCE = """
calls = []
TABLE = {'scale': 3.0}
def __getattr__(name):
    calls.append(name)
    if name in TABLE:
        return TABLE[name]
    if name == 'counted':
        return float(len(calls))
    if name == 'cached':
        global cached
        cached = 7.0
        return cached
    raise AttributeError(name)
"""


@pytest.fixture
def lazy_mod():
    import sys
    mod = _module_with_getattr("lazy_getattr_mod", _LAZY_SOURCE)
    yield mod
    del sys.modules["lazy_getattr_mod"]


def test_a_module_getattr_runs_once_per_read(lazy_mod):
    """PEP 562: `mod.scale`, absent from the module's dict, is `mod.__getattr__('scale')`. The
    trace called it directly once more than the program did, and the guard on `mod.scale` read
    through it on every check (the counter moved by two per call; with a value that followed
    the counter the entry failed its own guards: an internal error, then 5, 6, 7 for 1, 2, 3).
    Now the call is traced (inlined, its append replayed), once per read as in eager."""
    def f(x):
        return x * lazy_mod.scale

    c = tracer.compile(f)
    x = torch.ones(2)
    with traced() as t:
        outs = [c(x) for _ in range(3)]
    assert lazy_mod.calls == ["scale"] * 3
    lazy_mod.calls.clear()
    ref = f(x)
    assert all(torch.equal(o, ref) for o in outs) and lazy_mod.calls == ["scale"]
    assert_captured(t, recompiles=0)
    assert t.frames_traced == 1 and t.cache_hits == 2


def test_a_module_getattr_whose_answer_changes_per_call(lazy_mod):
    """The brief's repro: the answer is the number of calls so far. Eager 1, 2, 3; each call
    appends once and the guards (on the list's length, not on a read through the hook) follow."""
    def f(x):
        return x * lazy_mod.counted

    c = tracer.compile(f)
    x = torch.ones(1)
    with traced() as t:
        got = [c(x).item() for _ in range(3)]
    lazy_mod.calls.clear()
    assert got == [f(x).item() for _ in range(3)] == [1.0, 2.0, 3.0]
    assert t.internal_errors == 0 and t.fallbacks == 0 and t.graphs == 3


def test_module_getattr_under_getattr_hasattr_and_from_import(lazy_mod):
    """getattr with a default, hasattr (the hook raising AttributeError is False) and `from m
    import name` (CPython's import asks `hasattr(m, '__path__')` first, through the hook) each
    call the hook exactly as often as eager, on every call, cached or not."""
    def f(x):
        from lazy_getattr_mod import scale
        return (x * getattr(lazy_mod, "nope", 2.0) + scale, hasattr(lazy_mod, "scale"),
                hasattr(lazy_mod, "nothing"))

    c = tracer.compile(f)
    x = torch.ones(2)
    ref = [f(x) for _ in range(2)]
    eager_calls = list(lazy_mod.calls)
    lazy_mod.calls.clear()
    with traced() as t:
        got = [c(x) for _ in range(2)]
    assert lazy_mod.calls == eager_calls
    assert eager_calls == ["__path__", "scale", "nope", "scale", "nothing"] * 2
    assert all(torch.equal(a[0], b[0]) and a[1:] == b[1:] for a, b in zip(got, ref))
    assert_captured(t, recompiles=0)


def test_a_module_getattr_that_caches_its_answer(lazy_mod):
    """A hook that stores its answer as a global runs once: the second read in the same call
    finds the pending store, and the next call, the name now in the dict, reads it plainly."""
    def f(x):
        return x * lazy_mod.cached + lazy_mod.cached

    c = tracer.compile(f)
    x = torch.ones(2)
    with traced() as t:
        outs = [c(x) for _ in range(2)]
    assert lazy_mod.calls == ["cached"] and lazy_mod.cached == 7.0
    assert all(torch.equal(o, torch.full((2,), 14.0)) for o in outs)
    assert_captured(t)
    assert t.recompiles == 1  # the dict now holds 'cached': read by ordinary lookup


def test_a_guard_on_a_module_attribute_never_calls_its_getattr(lazy_mod):
    """A value in the dict of a module that has a __getattr__ is guarded by ordinary lookup:
    once the name is deleted, the guard fails without calling the hook, and the new trace
    calls it as the program does."""
    lazy_mod.direct = 2.0

    def f(x):
        return x * lazy_mod.direct if hasattr(lazy_mod, "direct") else x

    c = tracer.compile(f)
    x = torch.ones(2)
    c(x)
    del lazy_mod.direct
    lazy_mod.calls.clear()
    with traced() as t:
        out = c(x)
    assert lazy_mod.calls == ["direct"]  # hasattr's own call, once
    assert torch.equal(out, x)
    assert t.recompiles == 1 and t.fallbacks == 0


class _LazyModuleClass(__import__("types").ModuleType):
    def __getattr__(self, name):  # a lazy-module class (transformers' _LazyModule's shape)
        if name == "lazy":
            return 4.0
        raise AttributeError(name)


def test_a_module_class_getattr_answers_hasattr_as_the_program_asks():
    """A module whose class defines __getattr__ answers after ordinary lookup too: its
    presence guards stay hasattr's (ordinary lookup alone would fail them on their own
    inputs)."""
    m = _LazyModuleClass("lazy_class_mod")
    m.present = 1.0

    def f(x):
        return x * (2 if hasattr(m, "lazy") else 3) + hasattr(m, "present") + hasattr(m, "gone") + m.lazy

    x = torch.ones(2)
    with traced() as t:
        out = tracer.compile(f)(x)
    torch.testing.assert_close(out, f(x))
    assert_captured(t)


def test_a_library_module_getattr_still_answers_lazily():
    """torch's own __getattr__ (lazy submodules) and math's plain attributes are read as
    before: trusted, unguarded, captured."""
    import math

    def f(x):
        return x * math.pi + torch.nn.functional.relu(x)

    c = tracer.compile(f)
    x = torch.ones(2)
    with traced() as t:
        out = c(x)
    torch.testing.assert_close(out, f(x))
    assert_captured(t, min_ops=2)


# ---- Python's protocols as CPython runs them (a semantics hunt) ---------------------------
def test_operator_contains_takes_the_container_first():
    """`operator.contains(a, b)` is `b in a`: the trace swapped its arguments, so
    `operator.contains("abc", "a")` was False (and a list's answer the other way round)."""
    def f(x, seq):
        return (x + 1, operator.contains("abc", "a"), operator.contains("a", "abc"),
                operator.contains(seq, 2), operator.contains(seq, 5))

    check(f, torch.ones(2), [1, 2, 3])


class _Bag:
    """Iterable, no __contains__: `in` iterates it."""
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


class _Countdown:
    """Its own iterator: `in` stops at the first equal item, the rest stays for later."""
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


class _OldSequence:
    """Only __getitem__: the old sequence protocol (0, 1, 2... until IndexError)."""
    def __getitem__(self, i):
        if i >= 3:
            raise IndexError(i)
        return i * 10


class _Unsearchable:
    pass


class _NotAContainer:
    __contains__ = None


class _IntContains:
    def __contains__(self, item):
        return 1  # `in` gives bool(1)


def test_in_searches_a_user_object_without_contains_as_cpython_does():
    """`item in obj` for a class without __contains__ raised a made-up AttributeError ("no
    attribute '__contains__'"), which the program's own try caught: CPython iterates the
    object (its __iter__, else __getitem__ from 0), or raises its TypeError when it can do
    neither. A __contains__ answering 1 gave 1 for `in`, not True."""
    def f(x, bag, countdown, seq, items):
        try:
            none = 1 in _Unsearchable()
        except TypeError as e:
            none = str(e)
        try:
            not_container = 1 in _NotAContainer()
        except TypeError as e:
            not_container = str(e)
        return (x + 1, 2 in bag, 5 in bag, 3 in countdown, countdown.n, 20 in seq, 5 in seq,
                2 in _Bag(items), 2 in _OldSequence(), 0 in _IntContains(), none, not_container)

    check(f, torch.ones(2), _Bag([1, 2]), _Countdown(5), _OldSequence(), [1, 2])


def test_in_relies_on_the_class_still_lacking_contains():
    """The search is guarded on what the class defines: a __contains__ added later is used."""
    class Bag(_Bag):
        pass

    def f(x, bag):
        return x + 1, 7 in bag

    c = tracer.compile(f)
    x = torch.ones(2)
    with traced() as t:
        assert c(x, Bag([1]))[1] is False
        Bag.__contains__ = lambda self, item: True
        assert c(x, Bag([1]))[1] is True
    assert_captured(t, graphs=2, recompiles=1)


class _Answers:
    """__bool__ and __len__ answering whatever it was given."""
    def __init__(self, truth=None, size=None):
        self.truth, self.size = truth, size

    def __bool__(self):
        return self.truth


class _Sized:
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __iter__(self):
        return iter([1, 2])  # not what len() counts


def _outcome(op):
    try:
        return op()
    except (TypeError, ValueError, OverflowError) as e:
        return repr(e)


@pytest.mark.parametrize("truth, size", [(True, 3), (1, -1), (None, 2.0), (0.0, 1 << 70), (False, True),
                                         (torch.ones(()), 0)])
def test_bool_and_len_check_what_the_class_answers(truth, size):
    """bool() of an object whose __bool__ answered 1 (or a tensor) took the answer's truth,
    where CPython raises TypeError ('__bool__ should return bool, returned int'); a __len__
    answering -1, 2.0 or 2**70 counted as true, where CPython raises ValueError, TypeError or
    OverflowError; and len() of an object passed in counted what iterating it gave (2), not
    what its __len__ said. Objects passed in and made in the frame alike."""
    def f(x, answers, sized):
        made = _Sized(sized.size)
        return (x + 1, _outcome(lambda: "yes" if answers else "no"), _outcome(lambda: bool(sized)),
                _outcome(lambda: len(sized)), _outcome(lambda: not made), _outcome(lambda: len(made)),
                _outcome(lambda: bool(_Answers(answers.truth))))

    check(f, torch.ones(2), _Answers(truth), _Sized(size))


class _Base:
    def name(self):
        return "base"


class _Derived(_Base):
    def name(self):
        return super().__class__.__name__, super().name(), super().__class__ is super

    @classmethod
    def kind(cls):
        return super().__class__


def test_super_class_is_super_not_the_instances_class():
    """`super().__class__` is the super object's own class (CPython's super_getattro skips
    the MRO for `__class__`): the trace gave the instance's class, `_Derived`."""
    def f(x, obj):
        return x + 1, obj.name(), _Derived().name(), _Derived.kind()

    check(f, torch.ones(2), _Derived())


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_negative_base_to_a_traced_power_keeps_its_sign(backend):
    """FX prints `operator.pow(-2, n)` as `-2 ** n`, which Python reads as `-(2 ** n)`: the
    graph's `(-2) ** t` of a tensor t (an int or a float base), and `(-1) ** n` of an int
    that became dynamic or of a size, came out negative for every even power (AOTAutograd's
    graph, traced again from ours, printed its own node the same way)."""
    def f(x, t, n):
        return (-2) ** t, (-1.5) ** t.double(), x * (-1) ** n, x * (-2) ** x.shape[0]

    c = tracer.compile(f, backend=backend)
    t = torch.tensor([1, 2, 3, 4])
    with traced() as tr:
        for n in (2, 3, 4, 6, 7):
            x = torch.ones(n)
            for got, expected in zip(c(x, t, n), f(x, t, n)):
                torch.testing.assert_close(got, expected)
    assert_captured(tr, min_ops=5, graphs=2, recompiles=1)
