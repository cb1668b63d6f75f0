"""Differential tests: Python semantics of traced frames must match eager Python exactly.

Every test runs the function eagerly (on deep copies), then compiled: the first call (trace),
a second call on fresh copies of the inputs (a cache hit: nothing traced), and — where a
guarded fact can change — a call after that change, which must recompile (naming a failed
guard) rather than return a stale result. `check` also asserts the frame was captured: no
fallback, at least `min_ops` ops in its graphs, exactly `breaks` graph breaks.
"""
import collections
import copy
import dataclasses
import functools
import math
import operator

import pytest
import torch

import tracer
from tracer.exc import FullGraphError

from helpers import assert_captured, traced
from semantics_helpers import check, run


# ---- helpers ---------------------------------------------------------------------------
def same(a, b):
    """Structural equality: same types, equal tensors (values, dtype, shape, requires_grad)."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and a.requires_grad == b.requires_grad
                and torch.allclose(a.detach(), b.detach(), equal_nan=True, atol=1e-6))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a.keys()) == list(b.keys()) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, functools.partial):
        return a.func is b.func and same(a.args, b.args) and same(a.keywords, b.keywords)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if hasattr(a, "__dict__") and not callable(a):
        return same(vars(a), vars(b))
    return a == b


def run_both(c, fn, args, kwargs):
    ea, ek = copy.deepcopy(args), copy.deepcopy(kwargs)
    ref = fn(*ea, **ek)
    ca, ck = copy.deepcopy(args), copy.deepcopy(kwargs)
    out = c(*ca, **ck)
    assert same(out, ref), f"result differs: {out!r} vs eager {ref!r}"
    assert same(ca, ea), f"mutated args differ: {ca!r} vs eager {ea!r}"
    assert same(ck, ek), f"mutated kwargs differ: {ck!r} vs eager {ek!r}"
    return out, ref


def check(fn, *args, expect_graph=True, c=None, min_ops=1, breaks=0, **kwargs):
    """Compare fn against eager on a first call and on a cache hit (fresh deep copies of the
    inputs: nothing may be traced); return the compiled fn. With `expect_graph`, everything
    traced on the first call was captured: no fallback, at least `min_ops` ops, exactly
    `breaks` graph breaks (None: any)."""
    if c is None:
        c = tracer.compile(fn)
    n0 = len(c.entries)
    with traced() as first:
        run_both(c, fn, args, kwargs)
    with traced() as warm:
        run_both(c, fn, args, kwargs)
    assert warm.frames_traced == 0 and warm.cache_hits >= 1, f"second identical call must hit the cache:\n{warm}"
    assert len(c.entries) == max(n0, 1) or n0 > 0 and len(c.entries) == n0 + 1
    e = c.entries[-1]
    if expect_graph:
        assert e.code is not None and e.reason is None, f"frame fell back: {e.reason}"
        if n0 == 0:
            assert_captured(first, min_ops=min_ops, breaks=breaks)
    return c


def recheck(c, fn, *args, guard=None, **kwargs):
    """After a guarded fact changed: result still equals eager, and the frame recompiled
    (the recompile names a failed guard: `guard`, a substring of it, when given); a second
    call hits the new entry."""
    n0 = len(c.entries)
    with traced() as t:
        run_both(c, fn, args, kwargs)
    assert len(c.entries) == n0 + 1, "changed guarded fact must recompile"
    reasons = [e.reason for e in t.of("recompile") if e.frame == fn.__code__.co_qualname]
    assert reasons and (guard is None or any(guard in r for r in reasons)), \
        f"recompile of {fn.__name__} should name {guard!r}: {reasons}"
    with traced() as warm:
        run_both(c, fn, args, kwargs)
    assert len(c.entries) == n0 + 1
    assert warm.frames_traced == 0, f"second call after the change must hit the cache:\n{warm}"


def t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# ---- locals, control flow ----------------------------------------------------------------
def test_locals_reassigned():
    def f(x, y):
        a = x + 1
        a = a * y
        b = a
        a = b - x
        return a, b

    c = check(f, t(3), t(3, seed=1))
    recheck(c, f, t(4), t(4, seed=1))
    recheck(c, f, t(3, dtype=torch.float64), t(3, dtype=torch.float64))


def test_if_on_python_values():
    def f(x, flag, n):
        if flag:
            x = x + 1
        else:
            x = x - 1
        if n > 2 and not flag:
            x = x * n
        elif n == 0 or flag is None:
            x = x / 2
        return x

    c = check(f, t(3), True, 3)
    recheck(c, f, t(3), False, 3)
    recheck(c, f, t(3), False, 0)
    recheck(c, f, t(3), None, 1)


def test_for_while_unrolled():
    def f(x, n):
        for i in range(n):
            x = x + i
        k = 0
        while k < n:
            x = x * 1.5
            k += 2
        for v in [1, 2.5, -1]:
            x = x - v
        return x, k

    c = check(f, t(3), 3)
    recheck(c, f, t(3), 5)


def test_loop_break_continue():
    def f(x, items):
        total = 0
        for i, v in enumerate(items):
            if v < 0:
                continue
            if v > 10:
                break
            total += v
            x = x + v * i
        else:
            total = -total
        return x, total

    c = check(f, t(2), [1, -2, 3])
    recheck(c, f, t(2), [1, 20, 3])


# ---- builtins ------------------------------------------------------------------------------
def test_iteration_builtins():
    def f(x, ys):
        out = []
        for i, y in enumerate(ys, 1):
            out.append(x * i + y)
        for a, b in zip(ys, reversed(ys)):
            out.append(a - b)
        for i in range(len(ys) - 1, -1, -1):
            out.append(ys[i])
        return out

    c = check(f, t(2), [t(2, seed=1), t(2, seed=2), t(2, seed=3)])
    recheck(c, f, t(2), [t(2, seed=1), t(2, seed=2)])


def test_sorted_min_max_sum_abs():
    def f(x, nums):
        s = sorted(nums)
        r = sorted(nums, reverse=True)
        return x * min(nums) + max(nums) + sum(nums) + abs(nums[0]), s, r, min(3, 4, 2), \
            max(nums, default=0), sum(nums, 10), abs(-x)

    c = check(f, t(3), [3, -1, 2])
    recheck(c, f, t(3), [3, -7, 2])


def test_any_all_len():
    def f(x, flags, xs):
        if any(flags):
            x = x + 1
        if all(flags):
            x = x + 2
        return x * len(xs), len(flags), any([]), all([])

    c = check(f, t(2), [False, True], (1, 2, 3))
    recheck(c, f, t(2), [True, True], (1, 2, 3))
    recheck(c, f, t(2), [False, False], (1, 2))


def test_isinstance_getattr_hasattr():
    class A:
        scale = 2.0

        def __init__(self):
            self.bias = 3

    def f(x, obj, v):
        if isinstance(v, int):
            x = x + v
        elif isinstance(v, (float, str)):
            x = x - 1
        if isinstance(x, torch.Tensor):
            x = x * getattr(obj, "scale")
        x = x + getattr(obj, "missing", 10)
        return x, hasattr(obj, "bias"), hasattr(obj, "nope"), isinstance(obj, A)

    c = check(f, t(2), A(), 3)
    recheck(c, f, t(2), A(), 2.5)


# ---- containers -----------------------------------------------------------------------------
def test_build_containers():
    def f(x, y):
        lst = [x, y, 1]
        tup = (x, 2, "a")
        d = {"a": x, "b": y, 3: 4}
        s = {1, 2, 3}
        s.add(4)
        lst2 = [*lst, *tup]
        d2 = {**d, "c": x + y}
        return lst, tup, d, s, lst2, d2, 3 in s, "a" in d

    check(f, t(2), t(2, seed=1))


def test_comprehensions():
    def f(x, ws):
        sq = [x * w for w in ws]
        dd = {i: x + w for i, w in enumerate(ws)}
        ss = {w * 2 for w in ws if w > 0}
        nested = [[a * b for b in ws] for a in range(2)]
        return sq, dd, ss, nested

    c = check(f, t(2), [1, 2, -3])
    recheck(c, f, t(2), [1, 2])


def test_genexpr_consumers():
    def f(x, ws):
        total = sum(w * 2 for w in ws)
        pos = all(w > 0 for w in ws)
        neg = any(w < 0 for w in ws)
        tup = tuple(x * w for w in ws)
        lst = list(w + 1 for w in ws)
        return total, pos, neg, tup, lst, sum(x * w for w in ws)

    c = check(f, t(2), [1, 2, 3])
    recheck(c, f, t(2), [1, -2, 3])


def test_unpacking():
    def f(x, seq, pair):
        a, b, c = seq
        first, *rest = seq
        *init, last = seq
        (p, q), r = pair, 5
        h, *mid, tl = [x, x + 1, x + 2, x + 3]
        return a + b + c, first, rest, init, last, p, q, r, mid, tl

    c = check(f, t(2), (1, 2, 3), (t(1), 7))
    recheck(c, f, t(2), (1, 2, 4), (t(1), 7))


def test_slicing():
    def f(x, lst):
        return lst[1:], lst[::-1], lst[:-1], lst[::2], (1, 2, 3, 4)[1:3], x[1:], x[::2], x[:, None], \
            "abcdef"[2:4]

    c = check(f, t(6), [1, 2, 3, 4])
    recheck(c, f, t(6), [1, 2, 3])


def test_strings():
    def f(x, name, n):
        s = f"{name}_{n}"
        u = name.upper()
        parts = "a,b,c".split(",")
        j = "-".join(parts)
        k = "{}:{:03d}".format(name, n)
        if s.startswith("lin") and name.endswith("r"):
            x = x + 1
        return x, s, u, parts, j, k, name.replace("i", "I"), len(name), f"{n:.2f}", str(n), repr(name)

    c = check(f, t(2), "linear", 3)
    recheck(c, f, t(2), "conv", 3)
    recheck(c, f, t(2), "linear", 4)


# ---- user functions --------------------------------------------------------------------------
def _helper(x, a, b=2, *args, scale=1.0, **kw):
    out = x * a + b * scale
    for v in args:
        out = out + v
    for k in sorted(kw):
        out = out - kw[k]
    return out


def test_user_function_call_forms():
    def f(x):
        return (_helper(x, 1), _helper(x, 1, 3), _helper(x, a=2), _helper(x, 1, 2, 3, 4),
                _helper(x, 1, scale=2.0), _helper(x, 1, 2, 5, scale=0.5, z=1, y=2),
                _helper(*(x, 2), **{"b": 4, "q": 1}))

    c = check(f, t(3))
    recheck(c, f, t(4))


def _kwonly(x, *, k, m=3):
    return x * k + m


def test_keyword_only():
    def f(x, k):
        return _kwonly(x, k=k), _kwonly(x, m=1, k=k)

    c = check(f, t(2), 2)
    recheck(c, f, t(2), 5)


def test_closures_nonlocal_lambda():
    def f(x, n):
        count = 0

        def inc(v):
            nonlocal count
            count += 1
            return v + count

        y = inc(x)
        y = inc(y)
        g = lambda v, s=n: v * s  # noqa: E731

        def outer(v):
            def inner(w):
                return w + v
            return inner(v)
        return g(y), count, outer(x)

    c = check(f, t(2), 3)
    recheck(c, f, t(2), 4)


def test_closure_of_compiled_function():
    scale = [2.0]

    def make(k):
        def f(x):
            return x * k + scale[0]
        return f

    f = make(3)
    c = check(f, t(2))
    f2 = make(5)  # same code, different closure cell contents
    c2 = tracer.compile(f2)
    with traced() as changed:
        run_both(c2, f2, (t(2),), {})
    assert changed.recompiles == 1 and "cell(k) == 3" in changed.of("recompile")[0].reason, str(changed)
    assert_captured(c2, min_ops=2, entries=1)  # (its own view of the code's cache)


def _fact(n):
    return 1 if n <= 1 else n * _fact(n - 1)


def _rec_apply(x, n):
    if n == 0:
        return x
    return _rec_apply(x.sin() + n, n - 1)


def test_recursion():
    def f(x, n):
        return x * _fact(n), _rec_apply(x, n)

    c = check(f, t(3), 4)
    recheck(c, f, t(3), 5)


def test_functools_partial():
    p = functools.partial(_helper, b=5)

    def f(x, q):
        inner = functools.partial(_helper, x, 2)
        return inner(3), q(x, 1), p(x, 2)

    c = check(f, t(2), functools.partial(_helper, scale=3.0))
    recheck(c, f, t(3), functools.partial(_helper, scale=3.0))


def test_math_operator():
    def f(x, n):
        a = math.sqrt(n) + math.floor(2.7) + math.pi + math.log(n)
        b = operator.add(x, n)
        c = operator.mul(b, 2)
        d = operator.getitem([1, 2, 3], 1)
        return c * a + d, math.ceil(n / 3), operator.neg(n), functools.reduce(operator.add, [1, 2, 3])

    c = check(f, t(2), 4)
    recheck(c, f, t(2), 9)


# ---- classes --------------------------------------------------------------------------------
class Base:
    factor = 2

    def __init__(self, w):
        self.w = w

    def apply(self, x):
        return x * self.w

    @property
    def double(self):
        return self.w * 2

    @classmethod
    def cfactor(cls):
        return cls.factor

    @staticmethod
    def shift(x):
        return x + 1


class Child(Base):
    factor = 3

    def apply(self, x):
        return super().apply(x) + self.cfactor()


def test_user_classes():
    def f(x, obj):
        y = obj.apply(x) + obj.double + Base.shift(x) + obj.shift(x)
        m = obj.apply
        return y + m(x), obj.cfactor(), type(obj).factor, obj.w

    c = check(f, t(2), Base(1.5))
    recheck(c, f, t(2), Child(1.5))
    recheck(c, f, t(2), Base(2.5))


def test_tensor_attribute_on_object():
    def f(x, obj):
        return obj.apply(x)

    c = check(f, t(2), Base(t(2, seed=5)))
    recheck(c, f, t(2), Base(t(2, seed=5, dtype=torch.float64)), guard="obj.w: tensor float32")


@dataclasses.dataclass
class Cfg:
    scale: float
    bias: torch.Tensor
    name: str = "x"


Point = collections.namedtuple("Point", ["x", "y"])


def test_dataclass_and_namedtuple():
    def f(x, cfg, p):
        y = x * cfg.scale + cfg.bias
        if cfg.name == "x":
            y = y + p.x
        return y, p.y, p[0], Point(y, 1), len(p)

    c = check(f, t(2), Cfg(2.0, t(2, seed=1)), Point(t(2, seed=2), 3))
    recheck(c, f, t(2), Cfg(3.0, t(2, seed=1)), Point(t(2, seed=2), 3))
    recheck(c, f, t(2), Cfg(3.0, t(2, seed=1), "y"), Point(t(2, seed=2), 3))


# ---- grad mode ----------------------------------------------------------------------------
def test_grad_mode_blocks():
    def f(x, w):
        with torch.no_grad():
            a = x * w
            with torch.enable_grad():
                b = x * w
        c = x * w
        return a, b, c

    x = t(3)
    w = t(3, seed=1).requires_grad_()
    c = check(f, x, w)
    # outside no_grad: in a no_grad caller, a new entry (grad mode is guarded)
    with torch.no_grad():
        recheck(c, f, x, w)


def test_set_grad_enabled():
    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x * 2
        return y, y.requires_grad

    c = check(f, t(2).requires_grad_(), False)
    recheck(c, f, t(2).requires_grad_(), True)


# ---- globals ------------------------------------------------------------------------------
G_SCALE = 2.0
G_TENSOR = torch.ones(3)
G_COUNTER = 0


def _read_globals(x):
    return x * G_SCALE + G_TENSOR


def test_globals_read_and_change():
    global G_SCALE, G_TENSOR
    old = G_SCALE, G_TENSOR
    try:
        c = check(_read_globals, t(3))
        G_SCALE = 5.0
        recheck(c, _read_globals, t(3))
        G_TENSOR = torch.full((3,), 7.0)  # same metadata, different values: read fresh, no stale
        run_both(c, _read_globals, (t(3),), {})
        G_TENSOR = torch.ones(3, dtype=torch.float64)
        recheck(c, _read_globals, t(3))
    finally:
        G_SCALE, G_TENSOR = old


def _write_globals(x, n):
    global G_COUNTER, G_NEW
    G_COUNTER = G_COUNTER + n
    G_NEW = x * 2
    return x + G_COUNTER


def test_globals_written():
    global G_COUNTER
    G_COUNTER = 0
    eager_x = t(2)
    ref = _write_globals(eager_x, 3)
    ref_counter, ref_new = G_COUNTER, G_NEW
    G_COUNTER = 0
    c = tracer.compile(_write_globals)
    out = c(t(2), 3)
    assert same(out, ref) and G_COUNTER == ref_counter and same(G_NEW, ref_new)
    assert_captured(c, min_ops=2)
    # second call: G_COUNTER changed (3), a guarded constant -> recompile, correct value
    out = c(t(2), 3)
    assert G_COUNTER == 6 and same(out, t(2) + 6)
    assert len(c.entries) == 2


# ---- mutation of inputs ---------------------------------------------------------------------
def test_list_mutation():
    def f(x, lst):
        lst.append(x + 1)
        a = lst.pop(0)
        lst[0] = lst[0] * 2
        lst.extend([3, 4])
        lst.insert(1, "s")
        return a, len(lst)

    c = check(f, t(2), [t(2, seed=1), t(2, seed=2)])
    recheck(c, f, t(2), [t(2, seed=1), t(2, seed=2), t(2, seed=3)])


def test_dict_mutation():
    def f(x, d):
        d["new"] = x
        v = d.pop("a")
        d.update({"b": d["b"] + 1, "c": 3})
        d.setdefault("e", 5)
        return v, sorted(d.keys())

    c = check(f, t(2), {"a": 1, "b": t(2, seed=1)})
    recheck(c, f, t(2), {"a": 1, "b": t(2, seed=1), "z": 0})


def test_returns_same_object():
    def f(x, lst, d, obj):
        lst.append(1)
        d["k"] = x
        return lst, d, obj, x

    lst, d, obj = [1], {"a": 2}, Base(1.0)
    x = t(2)
    c = tracer.compile(f)
    for _ in range(2):
        out = c(x, lst, d, obj)
        assert out[0] is lst and out[1] is d and out[2] is obj and out[3] is x
    assert lst == [1, 1, 1] and d["k"] is x
    assert c.entries[-1].reason is None
    assert_captured(c, min_ops=0, breaks=0)


def test_attribute_mutation():
    def f(x, obj):
        obj.w = obj.w + 1
        obj.extra = x * 2
        obj.w = obj.w * 2
        return obj.w

    c = check(f, t(2), Base(1.0))
    recheck(c, f, t(2), Base(2.0))


def test_mutation_aliasing():
    def f(x, a, b):
        a.append(x)
        return len(b)

    lst = [1]
    c = tracer.compile(f)
    ref = f(t(2), [1], [1])
    assert c(t(2), [1], [1]) == ref
    assert_captured(c, min_ops=0)
    # aliased: eager sees the append through b; the distinct-inputs guard fails: recompile
    lst2 = [1]
    with traced() as aliased:
        assert c(t(2), lst, lst) == f(t(2), lst2, lst2)
    assert aliased.recompiles == 1 and "distinct objects" in aliased.of("recompile")[0].reason
    assert lst == [1, lst[1]] and len(lst) == 2
    assert_captured(c, min_ops=0, entries=2)


# ---- return structures ------------------------------------------------------------------------
def test_nested_returns():
    def f(x, y):
        return {"a": (x, [y, 1, "s"]), "b": None, "c": {"d": x + y, "e": (1.5, True)}}, [x * 2], ()

    c = check(f, t(2), t(2, seed=1))
    recheck(c, f, t(5), t(5, seed=1))


# ---- tensors: in-place and autograd --------------------------------------------------------
def test_inplace_on_inputs():
    def f(x, y):
        x.add_(1)
        y.mul_(x)
        return x + y

    c = check(f, t(3), t(3, seed=1))
    recheck(c, f, t(4), t(4, seed=1))


def test_gradients():
    def f(x, w, b):
        return ((x @ w + b).relu() ** 2).sum()

    def grads(fn):
        x = t(4, 3)
        w = t(3, 2, seed=1).requires_grad_()
        b = t(2, seed=2).requires_grad_()
        loss = fn(x, w, b)
        loss.backward()
        return loss.detach(), w.grad, b.grad

    c = tracer.compile(f)
    ref = grads(f)
    for _ in range(2):
        out = grads(c)
        assert all(torch.allclose(a, r, atol=1e-6) for a, r in zip(out, ref))
    assert_captured(c, min_ops=5, entries=1)


# ---- unsupported: fall back with the eager result ----------------------------------------
def test_print_graph_breaks(capsys):
    def f(x):
        print("hello")
        return x + 1

    c = check(f, t(2), expect_graph=False)
    brk = c.entries[0].breaks
    assert c.entries[0].reason is None and len(brk) == 1 and "print" in brk[0].reason
    with pytest.raises(FullGraphError, match=r"print.*test_python_semantics\.py:\d+"):
        tracer.compile(f, fullgraph=True)(t(2))


def test_data_dependent_branch_graph_breaks():
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    c = check(f, t(3), expect_graph=False)
    brk = c.entries[0].breaks
    assert len(brk) == 1 and "data-dependent" in brk[0].reason and brk[0].opname.startswith("POP_JUMP")
    run_both(c, f, (-t(3).abs(),), {})
    run_both(c, f, (t(3).abs(),), {})
    with pytest.raises(FullGraphError, match=r"test_python_semantics\.py:\d+"):
        tracer.compile(f, fullgraph=True)(t(3))


def test_user_exception_surfaces():
    def f(x, d):
        return x + d["missing"]

    c = tracer.compile(f)
    with traced() as tr:
        with pytest.raises(KeyError, match="missing"):
            c(t(2), {"a": 1})
    # the failing subscript runs natively (a break there), in the user's frame
    assert_captured(tr, min_ops=0, breaks=1)
    assert "KeyError" in tr.of("break")[0].reason


# ---- generators are lazy: side effects stop where the consumer stops -------------------------
def test_generator_short_circuit_side_effects():
    def f(x, lst):
        r = any((lst.append(i), i > 1)[1] for i in range(5))
        g = (lst.append(-i) or i for i in range(5))
        first = next(g)
        for i, v in enumerate(map(lambda k: lst.append(k) or k, range(10))):
            if v >= 2:
                break
        return x + len(lst), r, first

    c = check(f, t(2), [])
    recheck(c, f, t(2), [1])


def test_dict_views_are_reusable_and_live():
    # regression: keys() used to be a one-shot iterator, so len() consumed it (wrong result)
    def f(x, d):
        k = d.keys()
        n = len(k)
        out = x * n
        for name in k:
            out = out + d[name]
        d["c"] = out
        items = d.items()
        return out, type(k).__name__, len(items), [name for name in k], "c" in k

    check(f, t(2), {"a": t(2), "b": t(2)})


def test_exceptions_raised_and_caught_inside_the_trace():
    # old-style iteration (collections.abc.Sequence.__iter__ stops on IndexError), an
    # attribute miss caught by `except AttributeError`, and getattr with a default
    from collections.abc import Sequence

    class View(Sequence):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if i >= self.n:
                raise IndexError("list index out of range")
            return i * 2

    class Cfg:
        def __init__(self):
            self.a = 1

    def f(x, cfg):
        total = x
        for item in View(3):
            total = total + item
        try:
            b = cfg.b
        except AttributeError:
            b = 5
        return total * getattr(cfg, "zz", 2) + b + cfg.a

    c = check(f, t(2), Cfg())
    assert c.entries[0].breaks == []
    later = Cfg()
    later.b = 100  # the attribute now exists: the miss was guarded, so this recompiles
    run_both(c, f, (t(2), later), {})
    assert len(c.entries) == 2


REGISTRY = None


def test_dict_subclass_input_read_through_super():
    global REGISTRY

    class Registry(dict):
        def get(self, key, default=None):
            return super().get(key, default)

    REGISTRY = Registry(a=2, b=3)

    def f(x):
        return x * REGISTRY.get("a") + REGISTRY.get("zz", 1) + len(REGISTRY) + ("b" in REGISTRY)

    c = check(f, t(2))
    assert c.entries[0].breaks == []
    REGISTRY["a"] = 10  # a guarded item changed: recompile, never a stale result
    run_both(c, f, (t(2),), {})
    REGISTRY["new"] = 1  # keys changed
    run_both(c, f, (t(2),), {})
    assert len(c.entries) == 3


def test_dict_changed_size_during_iteration_raises_like_cpython():
    def f(x, d):
        try:
            for k in d.keys():
                d[k + "x"] = 1
        except RuntimeError:
            return x + 1
        return x

    check(f, t(2), {"a": 1})


def test_tuple_accumulated_from_an_empty_constant():
    """`acc = ()` then `acc = acc + (h,)` per layer (how models collect hidden states and
    attentions when output_hidden_states=True): the empty tuple is a constant until it meets
    traced values (the zoo's output_attentions variant broke here in 9 models)."""
    from semantics_helpers import check

    def f(x):
        acc, extra = (), ()
        for _ in range(3):
            x = x + 1
            acc = acc + (x,)
        extra += (x * 2,)
        return acc, extra, () + extra, extra + (), (1,) + acc

    check(f, torch.randn(2), graphs=1)


class _Output(collections.OrderedDict):
    """Shaped like transformers' ModelOutput: an OrderedDict whose [] reads its own items."""

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return tuple(self[j] for j in self.keys())[k]


def test_ordered_dict_subclass_input_read_through_its_own_methods():
    """generate() passes encoder_outputs (a ModelOutput) into the compiled forward: its items
    are read through OrderedDict's methods, keys guarded in order (broke BART's generate)."""
    from semantics_helpers import check

    def f(out, x):
        return out[0] * x + out["b"], list(out.keys()), len(out.items())

    out = _Output(a=torch.randn(3), b=torch.randn(3))
    c, _ = check(f, out, torch.randn(3), graphs=1)
    other = _Output(b=torch.randn(3), a=torch.randn(3))  # other key order: other answer
    assert torch.equal(c(other, torch.ones(3))[0], f(other, torch.ones(3))[0])
    assert len(c.entries) == 2


def test_builtins_raising_type_errors_on_traced_arguments_reach_the_users_handler():
    """isinstance(x, 5) and getattr(x, 5) raise CPython's TypeError inside the user's try (they
    were tracer internal errors: the frame ran as Python). `type(name, bases, ns)` was a call
    form not modelled (the frame ran as Python); it is traced now (tests/test_frame_classes.py).
    Found by differential testing."""
    def bad_isinstance(x):
        try:
            return x + isinstance(x, 5)
        except TypeError as e:
            return x - len(str(e))

    def bad_getattr(x):
        try:
            return getattr(x, 5)
        except TypeError as e:
            return x * len(str(e))

    def make_type(x):
        T = type("T", (), {"k": 3})
        return x * T.k

    check(bad_isinstance, t(2))
    check(bad_getattr, t(2))
    c = check(make_type, t(2))  # (a class made in the frame: variables/frame_classes.py)
    assert c.entries[0].code is not None and not c.entries[0].breaks


def test_sum_of_floats_is_cpythons():
    """CPython 3.12+ adds a run of floats in sum() with compensation: `sum([0.1] * 10)` is 1.0
    there, and `sum([1e100, 1.0, -1e100])` is 1.0. The trace added them pairwise (0.9999999999999999
    and 0.0: a wrong answer, with no break). Constants are now summed by sum() itself; floats
    a trace cannot fold make sum() a break on 3.12+ (pairwise `+` is 3.11's sum)."""
    def folded(x):
        return x * sum([0.1] * 10), sum([0.1] * 10) == 1.0, sum([1e100, 1.0, -1e100])

    def given(x, vals):
        return x * sum(vals), sum(vals, 0.5)

    check(folded, torch.ones(2))
    c = tracer.compile(given)
    for vals in ([0.1] * 10, [1e100, 1.0, -1e100], [0.3, 0.6, 0.1]):  # (a float list becomes symbolic)
        run(c, given, torch.ones(2), vals)
    with traced() as t:
        for vals in ([0.7, 0.1, 0.1, 0.1],) * 2:
            run(c, given, torch.ones(2), vals)
    assert t.fallbacks == 0 and t.internal_errors == 0, t


def test_index_and_remove_of_a_missing_value_raise_cpythons_error_in_the_trace():
    """`l.remove(v)` and `t.index(v)` of a value not there were breaks ('value not found');
    a traced `try` now catches CPython's own ValueError, message included."""
    def f(x, lst, tup):
        msgs = []
        for op in (lambda: lst.remove(99), lambda: tup.index(7), lambda: lst.index(5)):
            try:
                op()
            except ValueError as e:
                msgs.append(str(e))
        return x + len(msgs), msgs, lst

    check(f, torch.ones(2), [1, 2], (1, 2))


def test_len_and_reversed_of_what_has_no_len_or_order_raise():
    """len() counted what iterating gave and reversed() reversed it, for values eager refuses:
    len() of a generator or an iterator, reversed() of a set, a generator or an iterator
    returned a value where eager raises TypeError."""
    def f(x):
        makers = (lambda: {1, 2, 3}, lambda: (i for i in range(3)), lambda: iter([1, 2]))
        errors = []
        for make in makers:
            for op in (len, reversed):
                try:
                    errors.append(list(op(make())) if op is reversed else op(make()))
                except TypeError as e:
                    errors.append(str(e))
        return x + len(errors), errors, list(reversed({"a": 1, "b": 2})), len({"a": 1}.keys())

    c = check(f, t(2))
    assert run_both(c, f, (t(2),), {})[0][1][:2] == [3, "'set' object is not reversible"]


class _Annotated:
    a: int


class _Plain:
    pass


def test_class_attributes_whose_getter_refuses_the_class():
    """type's own getters refuse some classes with AttributeError (`C.__abstractmethods__` of
    a plain class, `int.__annotations__`): the trace let it out, an internal error (the frame
    ran as Python). And hasattr(C, "__annotations__") answered from the class dicts: False on
    3.14, whose classes keep their annotations elsewhere (eager: True)."""
    def f(x):
        try:
            n = len(_Plain.__abstractmethods__)
        except AttributeError as e:
            n = len(str(e))
        flags = [hasattr(c, name) for c in (_Annotated, _Plain)
                 for name in ("__annotations__", "__abstractmethods__")]
        return x + n, flags, getattr(int, "__annotations__", None), _Annotated.__annotations__

    check(f, t(2))
