"""Comprehensions, on every version, and graph breaks inside them.

3.11 compiles a list/dict/set comprehension into a function of its own (inlined by the
interpreter, traced as its own frame after a break). Since 3.12 (PEP 709) they are part of
the enclosing frame's bytecode: the outer binding of the loop variable is saved with
LOAD_FAST_AND_CLEAR and restored after, behind an extra exception-table handler, and a cell
variable gets a fresh cell from a MAKE_CELL in the middle of the function. A graph break
inside one (a print in `[f(x) for x in xs]`) must still leave the rest of the frame
captured: the partly built list and the iterator are on the stack at the break and are
handed to the resume function like any other stack values. (TorchDynamo on 3.12 runs the
whole frame eagerly in this case.)

Each test compares with eager (results, printed output, the restored outer variable) and
asserts which ops were captured on each side of the break.
"""
import sys

import pytest
import torch

import tracer
from test_graph_breaks import run, t

#: 3.12+: comprehensions are in the frame (PEP 709). On 3.11 a comprehension that reads a
#: local of the frame makes that local a cell (its function closes over it), and a frame
#: with cells cannot be resumed: the frame runs as Python and the comprehension's own frame
#: is traced (with its breaks) instead.
PEP709 = sys.version_info >= (3, 12)


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def _all_ops(rec):
    return [op for g in rec.graphs for op in g]


@pytest.mark.loop_resumes
def test_print_inside_a_list_comprehension_keeps_the_frame_captured(capsys):
    def f(x, n):
        y = x.sin() + 1
        out = [print("item", i) or y * i for i in range(n)]
        return torch.stack(out).cos() + y

    c, rec = run(f, (t(3), 3), (t(3, seed=1), 3))
    assert capsys.readouterr().out.count("item") == 12  # 3 per call, compiled and eager, twice
    ops = _all_ops(rec)
    assert ops.count("mul") >= 3  # inside the comprehension
    if PEP709:
        entry = c.entries[0]
        assert entry.code is not None and entry.breaks, "the root frame is captured, with a break"
        assert "print" in entry.breaks[0].reason
        assert rec.graphs[0][:2] == ["sin", "add"]  # before the comprehension
        assert "stack" in ops and "cos" in ops  # and after it


@pytest.mark.parametrize("kind", ["dict", "set"])
@pytest.mark.loop_resumes
def test_break_inside_dict_and_set_comprehensions(kind, capsys):
    def fd(x, keys):
        base = x.exp()
        d = {k: print(k) or base * k for k in keys}
        return sum(d.values()).relu()

    def fs(x, keys):
        base = x.sum().item()  # a break before: .item()
        s = {print(k) or k * 2 for k in keys}
        return x.relu() * (sorted(s)[-1] + base)

    f = fd if kind == "dict" else fs
    c, rec = run(f, (t(4), [1, 2, 3]), (t(4, seed=2), [1, 2, 3]))
    ops = _all_ops(rec)
    if kind == "dict":
        assert ops.count("mul") == 3
    if PEP709:  # (3.11: a break at the call of the comprehension's function cannot pass
        # that function, made in the frame, to a resume function: the rest runs as Python)
        assert c.entries[0].code is not None and "relu" in ops
        assert rec.graphs[0] == (["exp"] if kind == "dict" else ["sum"])


@pytest.mark.loop_resumes
def test_outer_loop_variable_is_restored_after_the_comprehension(capsys):
    def f(x, xs):
        i = 100  # shadowed by the comprehension's i, and back afterwards
        parts = [print(i) or x * i for i in xs]
        return sum(parts) + i

    c, rec = run(f, (t(2), [1, 2]), (t(2), [3, 4, 5]))
    assert _all_ops(rec).count("mul") >= 2
    if PEP709:
        assert c.entries[0].code is not None and "add" in _all_ops(rec)


@pytest.mark.loop_resumes
def test_comprehension_variable_unbound_before_and_after(capsys):
    """3.12+: k has no outer binding: LOAD_FAST_AND_CLEAR saves a NULL, restored after (k is
    unbound again), also across a break inside the comprehension."""
    def f(x, xs):
        out = [x * k for k in xs]
        more = [print(k) or x + k for k in xs]
        return torch.stack(out + more).sum()

    c, rec = run(f, (t(3), [1.0, 2.0]), (t(3, seed=1), [1.0, 2.0]))
    ops = _all_ops(rec)
    assert ops.count("mul") == 2 and ops.count("add") == 2
    if PEP709:
        assert c.entries[0].code is not None and rec.graphs[0][:2] == ["mul", "mul"]
        assert "sum" in ops


def test_comprehension_without_a_break_is_one_graph():
    def f(x, ys):
        a = [x * y for y in ys]
        b = {i: v.cos() for i, v in enumerate(a)}
        c = {y for y in ys if y > 1.0}
        return torch.stack(list(b.values())).sum() + len(c)

    c, rec = run(f, (t(3), [1.0, 2.0, 3.0]), (t(3, seed=4), [1.0, 2.0, 3.0]))
    assert c.entries[0].code is not None and not c.entries[0].breaks
    assert len(rec.graphs) == 1 and rec.graphs[0].count("mul") == 3 and rec.graphs[0].count("cos") == 3


@pytest.mark.loop_resumes
def test_nested_comprehensions_with_a_break_in_the_inner_one(capsys):
    def f(x, n):
        y = x.tanh()
        grid = [[print(i, j) or y * (i + j) for j in range(2)] for i in range(n)]
        return torch.stack([torch.stack(row) for row in grid]).sum() + y

    c, rec = run(f, (t(3), 2))
    assert _all_ops(rec).count("mul") == 4
    if PEP709:
        assert c.entries[0].code is not None and rec.graphs[0] == ["tanh"]
        assert "sum" in _all_ops(rec)


def test_exception_inside_a_comprehension_reaches_the_outer_handler():
    def f(x, xs):
        i = "outer"
        try:
            vals = [x / len(v) for v in xs]
        except TypeError:
            return x.neg(), i
        return torch.stack(vals), i

    c, rec = run(f, (t(2), [[1], 3]), (t(2), [[1], [1, 2]]))
    ops = _all_ops(rec)
    assert "neg" in ops and "stack" in ops  # the except path, then the normal one
    if PEP709:
        assert all(e.code is not None for e in c.entries)


def test_comprehension_capturing_a_cell_is_correct():
    def f(x, xs):
        fns = [lambda: x * k for k in xs]  # k is a cell of the frame (MAKE_CELL inside it on 3.12+)
        return torch.stack([g() for g in fns]).sum()

    c, rec = run(f, (t(3), [1.0, 2.0, 3.0]), (t(3, seed=5), [1.0, 2.0, 3.0]))
    if c.entries[0].code is not None:
        assert _all_ops(rec).count("mul") == 3


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 709 inlining is 3.12+")
def test_the_comprehension_is_in_the_frame_on_3_12_plus():
    import dis

    def f(xs):
        return [x for x in xs]

    names = {i.opname for i in dis.get_instructions(f)}
    assert "LOAD_FAST_AND_CLEAR" in names and not any(
        isinstance(c, type(f.__code__)) for c in f.__code__.co_consts)


def test_a_break_in_a_frame_whose_comprehension_variable_is_a_cell():
    """3.12+ inline comprehensions (PEP 709): a comprehension variable captured by a lambda is
    a cell of the frame, saved, made and restored in its slot by instructions the resume
    code kept as a second, local slot: every break in such a frame was an internal error
    (the frame ran as Python; a MAKE_CELL dropped with them crashed the process). 3.11 makes
    the comprehension a function of its own, so there this passes before and after."""
    def after(x):
        fs = {k: (lambda: k) for k in "ab"}
        if x.sum() > 0:
            return x + 1, [g() for g in fs.values()]
        return x - 1, [g() for g in fs.values()]

    def before(x):
        y = x * 2
        torch._dynamo.graph_break()
        fs = [lambda: y * i for i in range(3)]
        return [f() for f in fs]

    def reused(x):
        i = x + 1
        get = lambda: i  # noqa: E731
        ys = [i * 2 for i in range(3)]
        get2 = lambda: i  # noqa: E731  (3.13: LOAD_FAST of the cell, after the comprehension)
        return get2() + get(), ys

    for fn, x in ((after, torch.tensor([1.0, 2.0])), (after, torch.tensor([-1.0, -2.0])),
                  (before, torch.ones(2)), (reused, torch.ones(2))):
        c = tracer.compile(fn)
        for _ in range(2):
            got, want = c(x), fn(x)
            assert repr(got) == repr(want)
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0


def test_a_comprehension_cell_beside_a_frame_cell_across_two_breaks():
    """The frame's own cell `k`, captured by `g` before a comprehension that reuses the name
    as a cell variable: the resume code saves and restores the slot of its free variable `k`
    (3.12 writes those instructions on a stand-in local moved to the free slot once
    assembled, and moved back when a second break decodes the resume code again), so `g`
    sees the resume's store and the lambdas their own cell. Before, on 3.12, every break in
    such a frame was an internal error (CI on 3.12 only)."""
    def shared(x):
        k = 5
        g = lambda: k  # noqa: E731
        fs = [lambda: k for k in "ab"]
        if x.sum() > 0:
            k = 7
        torch._dynamo.graph_break()
        y = x * g()
        torch._dynamo.graph_break()
        return y + len(fs), [f() for f in fs], k, g()

    def twice(x):
        fs = {k: (lambda: k) for k in "ab"}
        y = x + 1
        torch._dynamo.graph_break()
        y = y * 2
        gs = [lambda: k for k in "cd"]
        torch._dynamo.graph_break()
        return y, [g() for g in fs.values()], [g() for g in gs]

    for fn in (shared, twice):
        c = tracer.compile(fn)
        for x in (torch.ones(2), -torch.ones(2), torch.ones(2)):
            got, want = c(x), fn(x)
            assert repr(got) == repr(want)
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0 and s.graph_breaks >= 4
