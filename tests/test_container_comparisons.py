"""`==` between containers, as CPython compares them: item by item with
PyObject_RichCompareBool, which calls an object equal to itself without asking its `__eq__`
(a NaN held by two lists), and dicts by keys and values, OrderedDicts also by order.

Before: two lists holding the same NaN compared unequal in the trace (a wrong result), and
`==` between two dicts was a graph break.
"""
import collections
import operator

import torch

import tracer
from semantics_helpers import check, run


def test_the_same_nan_in_two_lists_compares_equal():
    def made_here(x):
        v = float("nan")
        return x + 1, [v] == [v], [v, 1] != [v, 1], [v, 2] == [v, 3]

    def passed_in(x, v):
        a, b = [v, 1], [v, 1]
        return x + 1, a == b, a != b, (v,) == (v,)

    check(made_here, torch.ones(2), graphs=1)
    c = tracer.compile(passed_in)
    for _ in range(2):  # (semantics_helpers.same compares floats with ==: a NaN input fails it)
        want, got = passed_in(torch.ones(2), float("nan")), c(torch.ones(2), float("nan"))
        assert torch.equal(want[0], got[0]) and want[1:] == got[1:] == (True, False, True)


def test_distinct_nans_are_not_guessed():
    def f(x, a, b):
        return x + 1, [a] == [b]

    nan = float("nan")
    for a, b in ((nan, nan), (nan, float("nan"))):
        want, got = f(torch.ones(2), a, b), tracer.compile(f)(torch.ones(2), a, b)
        assert want[1] == got[1]


def test_dict_equality_by_keys_and_values_and_ordered_dicts_by_order():
    def f(x):
        a, b = {"p": 1, "q": 2}, {"q": 2, "p": 1}
        oa, ob = collections.OrderedDict(a), collections.OrderedDict(b)
        return (x + 1, a == b, a != b, oa == ob, oa != ob, oa == b, a == {"p": 1}, {} == {},
                {"t": x} == {"t": x})

    _, d = check(f, torch.ones(2), graphs=1, dynamo=True)


def test_dict_items_compared_by_value_follow_the_values():
    def f(x, d):
        return x + 1, d == {"a": 1, "b": [2, 3]}, {"n": len(d)} == {"n": 2}

    c = tracer.compile(f)
    for d in ({"a": 1, "b": [2, 3]}, {"a": 1, "b": [2, 4]}, {"a": 1, "b": [2, 3]}):
        run(c, f, torch.ones(2), d)


def test_dict_iteration_reads_the_live_dict():
    """A loop over d.items() sees a value stored during the loop, a key removed and added
    again comes last, and next() after the dict grew raises CPython's RuntimeError; the
    iterators copied the items when made (wrong results on 4ae4eb4)."""
    def values_set_in_the_loop(x, d):
        out = []
        for k, v in d.items():
            out.append(v)
            if k == "a":
                d["b"] = 100
        return x + 1, out

    def moved_to_the_end(x, d):
        seen = []
        for k in d:
            seen.append(k)
            if k == "a":
                d.pop("b")
                d["b"] = 9
        return x + 1, seen

    def next_after_growth(x, d, s):
        it, si = iter(d), iter(s)
        next(it), next(si)
        d["new"] = 1
        s.add(99)
        out = []
        for i in (it, si):
            try:
                out.append(next(i))
            except RuntimeError as e:
                out.append(str(e))
        return x + 1, out

    check(values_set_in_the_loop, torch.ones(2), {"a": 1, "b": 2}, graphs=1)
    check(moved_to_the_end, torch.ones(2), {"a": 1, "b": 2, "c": 3}, graphs=1)
    check(next_after_growth, torch.ones(2), {"a": 1, "b": 2}, {1, 2, 3}, graphs=1)


def test_a_set_iterates_in_cpythons_order_for_its_history():
    def f(x, lst):
        s = set(lst)
        s.add(100)
        s.discard(64)
        t = {1, 9, 17}
        t.add("new")
        t.add(7)
        return x + 1, list(s), list(t), sorted(t, key=str)

    check(f, torch.ones(2), [64, 32, 0, 128], graphs=1)


def test_reversed_list_reads_the_live_list():
    """reversed(lst) reads by index from the end: an insert at the front during the loop is
    seen, as in CPython (it copied the list: [3, 2, 1] where eager gives [2, 1, -5])."""
    def f(x, lst):
        out = []
        for i, v in enumerate(reversed(lst)):
            out.append(v)
            if i == 0:
                lst.insert(0, -5)
        return x + 1, out

    check(f, torch.ones(2), [1, 2, 3], graphs=1)


def test_a_dict_against_a_non_dict_and_dict_union():
    """`d == None`, `d != 3`, `d == [1]`, `rope_type == "longrope"` with a dict (transformers'
    rope wrapper, ESM: 6 breaks a call) and PEP 584's `a | b`, `d |= b` (Mamba2's
    `kwargs | {...}`: 6 breaks and a fallback) were graph breaks; torch.compile captures them."""
    def compare(x, d):
        return x + (d == None) + (d != 3) + (d == [1]) + (d == "longrope")  # noqa: E711

    def union(x, d, **kw):
        merged = kw | {"lim": (0.0, 1.0)} | d
        acc = {"a": 1}
        acc |= merged
        acc |= [("b", 2)]
        od = collections.OrderedDict(z=1) | {"y": 2}
        return x * merged["lim"][1] + len(acc) + acc["b"], list(acc), type(od).__name__, list(od)

    check(compare, torch.ones(2), {"a": 1}, dynamo=True)
    check(union, torch.ones(2), {"c": 3}, dynamo=True)


def test_operator_module_comparisons_trace_as_the_operators_do():
    """operator.eq/ne/lt/le/gt/ge/is_/is_not on lists and dicts were a graph break each (they
    went to the arithmetic dispatch, which folds only constants), while `==` and `is` on the
    same values traced: now they are the comparisons `==`, `is`... themselves."""
    def f(x, l, d):
        return (x + 1, operator.eq(l, [1, 2]), operator.ne(l, [1, 2]), operator.is_(l, l),
                operator.is_not(l, [1, 2]), operator.eq(d, {"a": 1}), operator.lt(1, 2),
                operator.ge(x.shape[0], 2), list(map(operator.eq, [l, l], [[1, 2], [3]])),
                operator.eq(x, x).sum())

    check(f, torch.ones(2), [1, 2], {"a": 1}, graphs=1)
