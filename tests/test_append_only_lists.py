"""Lists a frame only appends to (issue 9: a logger, a collector of activations, a forward
hook): their length and items are not read, so not guarded, and the appends are replayed as
one `extend` after the graph. A list that grows on every call is not a recompile on every
call (TorchDynamo guards its length: one recompile per call until its limit). Every case
compares the lists and results with eager; reading the list makes it an ordinary input again
(length and items guarded)."""
import torch
import torch.nn as nn

import tracer
from helpers import assert_captured, traced

LOG = []


def _twice(fn, make_args, calls=5):
    """Eager and compiled side by side over `calls` calls with growing lists; returns the
    compiled function and the Traced of the calls after the first."""
    c = tracer.compile(fn)
    args_e, args_c = make_args(), make_args()
    for i in range(calls):
        x = torch.randn(3)
        with traced() as t:
            r_c = c(x, *args_c)
        r_e = fn(x, *args_e)
        assert torch.equal(r_c, r_e) if isinstance(r_e, torch.Tensor) else r_c == r_e
        assert _same(args_c, args_e), (args_c, args_e)
        if i == 0:
            first = t
        elif i == 1:
            later = t
        else:
            later.events += t.events
            later.frames_traced += t.frames_traced
    return c, first, later


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_a_list_argument_that_grows_every_call_is_not_a_recompile():
    def f(x, acts):
        y = x.sin()
        acts.append(y)
        acts.append(y.sum())
        return y * 2

    _c, first, later = _twice(f, lambda: ([],))
    assert first.graphs == 1 and first.fallbacks == 0 and first.graph_breaks == 0
    assert later.frames_traced == 0, later


def test_a_global_log_list():
    def f(x):
        y = x.cos()
        LOG.append(y.mean())
        return y + 1

    LOG.clear()
    c = tracer.compile(f)
    ref = []
    for _ in range(4):
        x = torch.randn(3)
        with traced() as t:
            r = c(x)
        assert torch.equal(r, x.cos() + 1)
        ref.append(x.cos().mean())
    assert _same(LOG, ref)
    assert t.frames_traced == 0 and t.cache_hits == 1


def test_a_forward_hook_collecting_activations():
    feats = []
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    m[1].register_forward_hook(lambda mod, inp, out: feats.append(out))
    c = tracer.compile(m)
    for i in range(4):
        x = torch.randn(2, 4)
        with traced() as t:
            out = c(x)
        assert torch.allclose(out, m(x))
        assert len(feats) == 2 * (i + 1) and torch.allclose(feats[-2], feats[-1])
        if i:
            assert t.frames_traced == 0, t


def test_reading_the_list_guards_its_length():
    """len() after the append: the answer depends on the length, so it is guarded."""
    def f(x, lst):
        lst.append(1)
        return x * len(lst)

    c, first, later = _twice(f, lambda: ([],), calls=3)
    assert later.recompiles >= 1  # a new length: a new entry, and the right answer


def test_append_then_read_back_and_pop():
    def f(x, lst):
        lst.append(x.sum())
        last = lst[-1]
        lst.append(x)
        lst.pop()
        return x + last

    _twice(f, lambda: ([torch.zeros(())],), calls=2)


def test_the_same_list_twice_and_nested_lists():
    def f(x, a, b, nested):
        a.append(1)
        b.append(2)          # the same list as a: [.., 1, 2] in order
        nested[0].append(x.sum())
        return x * 3

    def make():
        shared = []
        return (shared, shared, [[], "keep"])

    _c, first, later = _twice(f, make, calls=3)
    assert first.graphs == 1 and first.fallbacks == 0


def test_appends_on_both_sides_of_a_graph_break():
    def f(x, lst):
        lst.append(x.sum())
        print("between", end="")
        lst.append(x.prod())
        return x - 1

    _c, first, later = _twice(f, lambda: ([],), calls=3)
    assert first.graph_breaks == 1 and first.fallbacks == 0
    assert later.frames_traced == 0, later


def test_captured_with_ops():
    def f(x, lst):
        lst.append(x.relu())
        return x.exp()
    c = tracer.compile(f)
    lst = []
    c(torch.randn(2), lst)
    c(torch.randn(2), lst)
    assert_captured(c, min_ops=2, entries=1)
    assert len(lst) == 2
