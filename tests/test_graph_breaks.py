"""Graph breaks: the graph before the break, the unsupported instruction run natively, and
the rest of the frame captured again in a resume function.

Every test compares with eager on repeated calls and after guards change, and asserts the
graphs and the ops on each side of the break, so silently lost capture fails a test.
"""
import copy
import logging

import numpy as np
import pytest
import torch

import tracer
from tracer.exc import FullGraphError

from helpers import assert_captured, traced


class Recorder:
    """A backend that records each graph's call ops (function / method / module names)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append([_name(n) for n in gm.graph.nodes if n.op.startswith("call")])
        return gm.forward


def _name(node):
    if node.op == "call_method":
        return node.target
    if node.op == "call_module":
        return "module"
    return getattr(node.target, "__name__", str(node.target))


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \
            torch.allclose(a, b, equal_nan=True) and a.requires_grad == b.requires_grad
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def run(fn, *argsets, backend=None):
    """Call compiled and eager fn on each argument set (deep-copied for each); compare."""
    rec = backend or Recorder()
    c = tracer.compile(fn, backend=rec)
    for args in argsets:
        mine, ref = copy.deepcopy(args), copy.deepcopy(args)
        assert same(c(*mine), fn(*ref)), f"result differs for {fn.__name__}"
        assert same(list(mine), list(ref)), f"inputs mutated differently by {fn.__name__}"
    return c, rec


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def test_print_in_the_middle_keeps_both_sides(capsys):
    def f(x, y):
        a = torch.sin(x) + y
        print("middle")
        return torch.relu(a * 2)

    c, rec = run(f, (t(3), t(3, seed=1)), (t(3), t(3, seed=1)), (t(4), t(4, seed=2)))
    assert rec.graphs[:2] == [["sin", "add"], ["mul", "relu"]]
    assert len(rec.graphs) == 4  # two more after the shape change, not on the cache hit
    entry = c.entries[0]
    assert [b.lineno for b in entry.breaks] == [f.__code__.co_firstlineno + 2]
    assert "print" in entry.breaks[0].reason and entry.breaks[0].opname == "CALL"
    assert capsys.readouterr().out.count("middle") == 6


def test_data_dependent_branch_resumes_at_both_targets():
    def f(x):
        y = x * 3
        if y.sum() > 0:
            return y.exp()
        return y.neg()

    pos, neg = t(3).abs(), -t(3).abs()
    _, rec = run(f, (pos,), (neg,), (pos,), (neg,))
    assert rec.graphs[0] == ["mul", "sum", "gt"]
    assert sorted(map(tuple, rec.graphs[1:])) == [("exp",), ("neg",)]
    assert len(rec.graphs) == 3  # both continuations compiled once each


def test_item_steering_control_flow():
    def f(x):
        s = x.sum().item()
        if s > 0:
            return x * s
        return x - 1

    _, rec = run(f, (t(3).abs(),), (-t(3).abs(),))
    assert rec.graphs[0] == ["sum"]
    assert ["mul"] in rec.graphs and ["sub"] in rec.graphs


def test_numpy_call_in_the_middle():
    """A NumPy call on constants is NumPy's own value at trace time (numpy_vars.py): no
    break; one on data needs its value for float(): the break is there."""
    def f(x):
        y = x.cos()
        n = np.sqrt(16.0)
        return y * float(n)

    _, rec = run(f, (t(2),), (t(2),))
    assert rec.graphs == [["cos", "mul"]]

    def g(x):
        y = x.cos()
        n = np.sqrt(x.abs().numpy()).sum()
        return y * float(n)

    _, rec = run(g, (t(2),), (t(2),))
    assert rec.graphs[0][0] == "cos" and rec.graphs[-1] == ["mul"] and len(rec.graphs) == 2


def test_break_inside_no_grad_restores_grad_mode():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("inside")
            z = y + 1
        return z * x, z.requires_grad

    x = t(3).requires_grad_()
    c, rec = run(f, (x,), (x,))
    assert torch.is_grad_enabled()
    assert ["_set_grad_enabled", "mul"] == rec.graphs[0][:2]
    out, flag = c(x)
    assert flag is False and out.requires_grad  # z*x outside the block tracks x
    out.sum().backward()
    assert torch.allclose(x.grad, (x.detach() * 2 + 1))


def _no_grad_then_key_error(x, d):
    with torch.no_grad():
        y = x * 2
        z = d["missing"]  # raises KeyError after the graph: __exit__ must still run
    return y + z


def test_exception_at_a_break_inside_no_grad_restores_grad_mode():
    c = tracer.compile(_no_grad_then_key_error)
    with pytest.raises(KeyError, match="missing"):
        c(t(2), {})
    assert torch.is_grad_enabled()


def test_exception_inside_no_grad_keeps_the_graph_before_it():
    c = tracer.compile(_no_grad_then_key_error)
    with traced() as tr:
        with pytest.raises(KeyError, match="missing"):
            c(t(2), {})
    assert_captured(tr, min_ops=1, breaks=1)


def test_break_inside_try_finally():
    log = []

    def f(x, log):
        try:
            y = x + 1
            log.append("try")
            print("in try")
            y = y * 2
        finally:
            y = y - 0.5
            log.append("finally")
        return y

    _, rec = run(f, (t(2), log), (t(2), []))
    assert rec.graphs[0] == ["add"]
    assert ["mul", "sub"] in rec.graphs


def test_key_error_caught_by_the_users_except_is_traced():
    def f(x, d):
        y = x + 1
        try:
            y = y + d["k"]  # KeyError when "k" is missing: raised and caught inside the trace
        except KeyError:
            y = y * 10
        return y - 1

    c, rec = run(f, (t(2), {}), (t(2), {"k": 1.0}))
    assert rec.graphs == [["add", "mul", "sub"], ["add", "add", "sub"]]
    assert all(e.breaks == [] for e in c.entries)


@pytest.mark.loop_resumes
def test_break_in_a_for_loop_over_range():
    def f(x, n):
        out = []
        for i in range(n):
            out.append(x * i)
            print(i)
        return torch.stack(out).sum(0)

    _, rec = run(f, (t(2), 3), (t(2), 3))
    assert rec.graphs[0] == ["mul"]
    assert rec.graphs[-1] == ["stack", "sum"]
    assert len(rec.graphs) == 4


@pytest.mark.loop_resumes
def test_break_in_a_for_loop_over_a_list_of_tensors():
    def f(xs):
        total = xs[0] * 0
        for v in xs:
            total = total + v.sin()
            print("step")
        return total

    xs = [t(2, seed=i) for i in range(3)]
    _, rec = run(f, (xs,), (xs,))
    assert rec.graphs[0] == ["mul", "sin", "add"]
    assert all(g == ["sin", "add"] for g in rec.graphs[1:3])


def test_break_inside_an_inlined_helper_keeps_callers_capture():
    def helper(y):
        z = y.exp()
        print("helper")
        return z + 1

    def f(x):
        a = x.sin()
        b = helper(a)
        return b.cos()

    c, rec = run(f, (t(3),), (t(3),))
    assert rec.graphs == [["sin"], ["exp"], ["add"], ["cos"]]
    brk = c.entries[0].breaks[0]
    assert brk.user_stack[-1][2] == "helper" and brk.user_stack[0][2] == "f"


def test_side_effects_before_the_break_are_visible_to_the_unsupported_call():
    seen = []

    def spy(lst, d):
        print("spy")  # a graph break inside the helper: spy runs natively, at the call
        seen.append((list(lst), dict(d)))

    def f(x, lst, d):
        y = x * 2
        lst.append(1)
        d["k"] = 2
        spy(lst, d)
        lst.append(3)
        return y + len(lst)

    c, rec = run(f, (t(2), [], {}))
    assert seen[0] == ([1], {"k": 2}) and seen[1] == ([1], {"k": 2})  # compiled, then eager
    brk = c.entries[0].breaks
    assert len(brk) == 1 and brk[0].user_stack[-1][2] == "spy" and "print" in brk[0].reason
    assert rec.graphs[0] == ["mul"] and rec.graphs[-1] == ["add"]


def test_values_needed_after_the_break_are_graph_outputs_not_recomputed():
    def f(x):
        y = x.exp()
        print("break")
        return y + 1, y

    c, rec = run(f, (t(3),))
    assert rec.graphs == [["exp"], ["add"]]  # exp once, before the break; not again after it
    out, y = c(t(3))
    assert torch.equal(out, y + 1)


def test_user_exception_after_a_break_has_the_users_traceback():
    def f(x):
        y = x + 1
        print("break")
        raise ValueError("from user code")

    c = tracer.compile(f)
    with pytest.raises(ValueError, match="from user code") as info:
        c(t(2))
    lines = [entry.lineno + 1 for entry in info.traceback if str(entry.path).endswith("test_graph_breaks.py")]
    raise_line = f.__code__.co_firstlineno + 3
    assert lines[-1] == raise_line, (lines, raise_line)  # the innermost frame is the user's raise
    assert_captured(c, min_ops=1, breaks=1)


def test_fullgraph_raises_at_the_first_break_with_reason_and_line():
    def f(x):
        y = x + 1
        print("no")
        return y

    with pytest.raises(FullGraphError, match=r"print.*test_graph_breaks\.py:\d+"):
        tracer.compile(f, fullgraph=True)(t(2))


def test_guard_change_after_break_recompiles_resume():
    scale = {"v": 2.0}

    def f(x, cfg):
        y = x * cfg["v"]
        print("break")
        return y + cfg["v"]

    c, rec = run(f, (t(2), scale), (t(2), {"v": 3.0}))
    assert len(rec.graphs) == 4


def test_resume_functions_are_cached_per_code_and_offset():
    from tracer.rewrite import graph_break

    def f(x):
        y = x + 1
        print("b")
        return y * 2

    c = tracer.compile(f, dynamic=False)  # one entry per shape, each with its break
    for shape in (2, 3, 4):
        c(t(shape))
    resumes = graph_break._RESUME_CACHE[f.__code__]
    assert len(resumes) == 1
    assert_captured(c, min_ops=3, breaks=3, entries=3)


def test_explain_reports_graphs_breaks_and_guards(capsys):
    def helper(y):
        print("in helper")
        return y * 2

    def f(x):
        a = x.sin() + 1
        b = helper(a)
        if b.sum() > 0:
            b = b + 1
        return b.relu()

    report = tracer.explain(f, t(3).abs())
    assert report.graph_count >= 3
    reasons = [b["reason"] for b in report.breaks]
    assert any("print" in r for r in reasons) and any("data-dependent" in r for r in reasons)
    text = str(report)
    assert "Graph count" in text and "b = helper(a)" in text and "if b.sum() > 0:" in text
    assert f"{f.__code__.co_filename}:{f.__code__.co_firstlineno + 2}" in text
    assert "x: tensor float32" in text
    ops = [op for fr in report.frames for op in fr.ops]
    assert {".sin", "add", "mul", ".relu"} <= set(ops)


def test_breaks_are_logged(caplog):
    def f(x):
        print("x")
        return x + 1

    with caplog.at_level(logging.INFO, logger="tracer.breaks"):
        tracer.compile(f)(t(2))
    assert any("print" in r.getMessage() for r in caplog.records)


def test_raise_inside_try_is_caught_by_the_users_handler():
    def f(x, flag):
        y = x * 2
        try:
            if flag:
                raise ValueError("bad flag")  # raised and caught inside the trace
            y = y + 1
        except ValueError:
            y = y - 1
        return y.relu()

    c, rec = run(f, (t(3), True), (t(3), False), (t(3), True))
    assert rec.graphs == [["mul", "sub", "relu"], ["mul", "add", "relu"]]
    assert all(e.breaks == [] and e.reason is None for e in c.entries)


def test_exception_caught_in_the_frame_then_a_break_in_the_handler():
    def f(x, d):
        y = x * 2
        try:
            y = y + d["k"]
        except KeyError as e:
            print("missing", e)  # a break inside the handler: runs natively
            y = y - 1
        return y.relu()

    _, rec = run(f, (t(3), {}), (t(3), {"k": 1.0}))
    assert rec.graphs[0] == ["mul"]


def test_generator_expression_and_generator_consumed_in_frame():
    def gen(xs):
        for v in xs:
            yield v * 2

    def f(xs):
        total = sum(v.sin() for v in xs)
        return total + sum(gen(xs))

    xs = [t(2, seed=i) for i in range(3)]
    c, rec = run(f, (xs,), (xs,))
    assert len(rec.graphs) == 1 and c.entries[0].breaks == []


def test_a_break_does_not_keep_dead_values_alive():
    import gc
    import weakref

    class Thing:
        pass

    seen = []

    def on_free(r):
        seen.append("freed")

    def f(x):
        obj = Thing()
        ref = weakref.ref(obj, on_free)
        del obj  # eager frees it here
        print("break")
        gc.collect()
        return x + 1, ref() is None

    c = tracer.compile(f)
    out, freed = c(t(2))
    assert freed and seen == ["freed"]
    assert c.entries[0].code is not None and len(c.entries[0].breaks) == 1, c.entries[0].reason


@pytest.mark.loop_resumes
def test_a_break_in_every_iteration_of_a_long_loop_does_not_nest_frames():
    """Each iteration breaks at the same place: the resume function would call itself once
    per iteration (RecursionError after ~1000). The resume runs its loop as Python instead."""
    def f(x):
        n = 0
        while bool((x < 3000).all()):
            x = x + 1
            n += 1
        return x * 2, n

    x = torch.zeros(3)
    expected = f(x)
    before = tracer.stats()
    out = tracer.compile(f)(x)
    s = tracer.stats()
    assert torch.equal(out[0], expected[0]) and out[1] == expected[1] == 3000
    assert s.graphs - before.graphs >= 1 and s.graph_breaks - before.graph_breaks >= 1
    again = tracer.compile(f)(x)
    assert torch.equal(again[0], expected[0]) and again[1] == 3000


def test_a_break_in_a_loop_body_runs_the_frame_as_python_and_compiles_its_callee_once():
    """The default (config.loop_resume_limit = 0, as TorchDynamo): a sampling loop whose body
    breaks runs as Python, and the model it calls is traced as a frame of its own: one graph,
    one entry, reused by every iteration (it used to be one copy per iteration, 8 of them)."""
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())

    def sample(x, steps):
        for t in range(steps):
            x = x - 0.1 * net(x)
            print(end="")  # a graph break in the body
        return x

    c = tracer.compile(sample)
    before = tracer.stats()
    x = torch.randn(2, 4)
    with torch.no_grad():  # (as samplers run)
        assert torch.allclose(c(x, 20), sample(x, 20))
    s = tracer.stats()
    graphs = [e.frame for e in s.of("graph")[-(s.graphs - before.graphs):]]
    assert graphs == ["Sequential.forward"], graphs  # the loop frame made no graph
    assert s.fallbacks - before.fallbacks == 1 and "a break inside a loop" in " ".join(s.fallback_reasons)
    traced = s.frames_traced
    with torch.no_grad():
        assert torch.allclose(c(torch.ones(2, 4), 20), sample(torch.ones(2, 4), 20))
    assert tracer.stats().frames_traced == traced  # warm: nothing traced again


def _break_at_print(fn, *args):
    """Compile `fn`, call it twice against eager; return the first entry (checked captured)."""
    c = tracer.compile(fn, backend=Recorder())
    for _ in range(2):
        assert same(c(*copy.deepcopy(args)), fn(*copy.deepcopy(args)))
    entry = c.entries[0]
    assert entry.code is not None, entry.reason  # rewritten code, not the frame run as Python
    assert len(entry.breaks) == 1
    return c


def test_a_break_in_an_except_body_is_not_in_the_loop_after_it():
    """3.12+ put `except` bodies after the function's last line and jump back from them to
    the code after the `try`: a backward jump that is no loop. A break there is placed as
    any break (it was taken for a break in the loop before it, and the frame ran as Python)."""
    def f(x, d):
        try:
            n = d["missing"]
        except KeyError:
            print(end="")  # the break
            n = 1
        for i in range(3):  # (code long enough that the compiler does not copy it into the handler)
            x = x * 2 + i
        return x + n

    _break_at_print(f, torch.randn(3), {})


def test_a_break_on_a_path_that_leaves_a_loop_is_not_in_the_loop():
    """A break on a path that leaves the loop (an early return) runs once: it cannot make the
    chain of resume functions a break in the body makes, so it is placed as any break."""
    def f(x, stop):
        for i in range(4):
            x = x + i
            if i == stop:
                print(end="")  # the break, then the frame returns
                return x * 3
        return x

    _break_at_print(f, torch.randn(3), 2)


def test_a_break_in_an_except_body_inside_a_loop_is_in_the_loop():
    """The handler of a try inside the body reaches the loop's head again: in the loop."""
    def f(x, d):
        for i in range(3):
            try:
                x = x + d[i]
            except KeyError:
                print(end="")
                x = x - 1
        return x

    c = tracer.compile(f)
    x = torch.randn(3)
    assert torch.allclose(c(x, {}), f(x, {}))
    assert c.entries[0].code is None and "a break inside a loop" in c.entries[0].reason


class _Raised(Exception):
    pass


def _loop_data_break(x, n):
    for i in range(n):
        x = x - 1
        if not x.sum() >= 0:  # a break at a jump whose fall-through leaves the loop
            break
        x = x + 0
    return x, i


def _while_true_break(x):
    n = 0
    while True:
        n += 1
        x = x - 1
        if x.sum() < 0:
            break
    return x, n


def _raise_in_loop(x, exc, n):
    k = 0
    for _ in range(n):
        try:
            x = x - 1
            raise exc  # 3.12+: the instruction after it is handler cleanup, in no loop
        except Exception:
            k += 1
    return x, k


@pytest.mark.parametrize("fn, args", [
    (_loop_data_break, (torch.full((3,), 40.0), 100)),
    (_while_true_break, (torch.full((3,), 40.0),)),
    (_raise_in_loop, (torch.ones(3), _Raised("a"), 60)),
], ids=["for-if-break", "while-true-break", "raise-in-try"])
def test_a_break_whose_next_instruction_leaves_the_loop_is_in_the_loop(fn, args):
    """The break's own instruction is in the loop though the one after it is not: the frame
    runs as Python (the default), one frame traced. Tested on the next instruction alone,
    each iteration nested one more resume function (40 frames deep here, a RecursionError
    and minutes of tracing at a few thousand iterations)."""
    tracer.reset()
    before = tracer.stats()
    out, ref = tracer.compile(fn)(*args), fn(*args)
    assert torch.equal(out[0], ref[0]) and out[1] == ref[1]
    s = tracer.stats()
    assert s.frames_traced - before.frames_traced == 1
    assert "a break inside a loop" in " ".join(s.fallback_reasons)


def test_a_value_of_an_untraced_type_left_by_a_break_does_not_stop_the_resume():
    """`torch.manual_seed(3)` is a break; the Generator it returns is on the stack when the
    resume function starts (popped unused): wrapping it refused the whole resume frame, so
    everything after ran as plain Python (a fallback). Such a value is now held untouched,
    and only a use of it breaks: `torch.rand(3, generator=gen)` of a Generator argument."""
    def f(x):
        torch.manual_seed(3)
        return x + torch.rand(3)

    def g(x, gen):
        y = x * 2
        return y + torch.rand(3, generator=gen), y.sum()

    c = tracer.compile(f)
    for _ in range(2):
        torch.testing.assert_close(c(torch.ones(3)), f(torch.ones(3)))
    s = tracer.stats()
    assert s.fallbacks == 0 and s.graphs == 1 and s.graph_breaks == 1  # (nothing before the seed)
    cg = tracer.compile(g)
    for seed in (0, 1):
        got = cg(torch.ones(3), torch.Generator().manual_seed(seed))
        want = g(torch.ones(3), torch.Generator().manual_seed(seed))
        torch.testing.assert_close(got, want)
    s = tracer.stats()
    assert s.fallbacks == 0 and s.graph_breaks == 2
    assert "Generator" in s.of("break")[-1].reason


_OPT_MODEL = torch.nn.Linear(4, 1)
_OPT = torch.optim.SGD(_OPT_MODEL.parameters(), lr=0.1, momentum=0.9)
_MISSING = object()


def test_a_global_or_attribute_of_an_untraced_type_breaks_only_where_it_is_used():
    """A training step reading a global optimizer: `opt.zero_grad()` loaded a value of a
    type the tracer does not model at a LOAD_GLOBAL, which is no place for a break, so the
    whole frame ran as Python (a fallback; torch.compile: 3 graphs, 2 breaks). It is now held
    by its source and each use breaks (zero_grad, step; backward breaks anyway); the weights
    after three steps equal eager's."""
    def step(x, y):
        _OPT.zero_grad()
        loss = ((_OPT_MODEL(x) - y) ** 2).mean()
        loss.backward()
        _OPT.step()
        return loss.detach()

    x = torch.randn(6, 4)
    y = x.sum(1, keepdim=True)
    start = copy.deepcopy(_OPT_MODEL.state_dict())
    want = [step(x, y) for _ in range(3)]
    want_w = copy.deepcopy(_OPT_MODEL.state_dict())
    _OPT_MODEL.load_state_dict(start)
    _OPT.state.clear()
    c = tracer.compile(step)
    with traced() as t:
        got = [c(x, y) for _ in range(3)]
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    for k, v in want_w.items():
        torch.testing.assert_close(_OPT_MODEL.state_dict()[k], v)
    assert t.fallbacks == 0 and t.internal_errors == 0 and t.graphs >= 2
    assert any("SGD" in e.reason for e in tracer.stats().of("break"))


def test_an_object_sentinel_compared_with_is_is_captured():
    """`_MISSING = object()` as a default, compared with `is`: a value of type object made
    the frame run as Python (torch.compile: 1 graph). It is a constant pinned by identity."""
    def f(x, default=_MISSING):
        y = x.sin()
        if default is _MISSING:
            return y + 1
        return y + default

    c = tracer.compile(f)
    with traced() as t:
        for args in ((torch.ones(3),), (torch.ones(3), 2.0), (torch.zeros(3),)):
            torch.testing.assert_close(c(*args), f(*args))
    assert_captured(t, breaks=0)


def test_an_untraced_value_compared_with_none_is_guarded_by_its_type():
    """`if self.sched is not None:` on a value of a type the tracer does not model (a
    scheduler, a Generator argument): the jump took the not-None branch with no guard, so a
    later call with None ran the traced branch (a wrong answer). Its type is guarded now: the
    None call traces again, and both branches are captured without a break."""
    lin = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)

    class Trainer:
        def __init__(self, sched):
            self.sched = sched

        def step(self, x):
            loss = lin(x).sum()
            if self.sched is not None:
                return loss * 2
            return loss * 3

    def f(x, gen=None):
        if gen is None:
            return x + 1
        return x + torch.rand(3, generator=gen)

    x = torch.randn(2, 3)
    c = tracer.compile(Trainer.step)
    with traced() as t:
        for tr in (Trainer(torch.optim.lr_scheduler.StepLR(opt, 1)), Trainer(None), Trainer(None)):
            torch.testing.assert_close(c(tr, x), Trainer.step(tr, x))
    assert t.recompiles == 1 and t.graph_breaks == 0 and t.fallbacks == 0
    cf = tracer.compile(f)
    for gen in (torch.Generator().manual_seed(0), None):
        got = cf(torch.ones(3), gen)
        want = f(torch.ones(3), None if gen is None else torch.Generator().manual_seed(0))
        torch.testing.assert_close(got, want)


def _explained_work(x, y):
    z = (x.sin() + y).relu()
    print("z computed")
    return z * 2


def test_explain_and_dump_of_a_compiled_function_or_module_report_what_it_stands_for(capsys):
    """tracer.explain (and tracer-dump) of an object tracer.compile made traced its wrapper:
    the frame was placed at tracer/api.py, a call made before was a cache hit nobody reported
    ('Graph count: 0'), and a fresh one counted a break too many. They now report the
    function or module the object stands for, as for the plain one."""
    from tracer.tools.dump import trace_call
    x, y = torch.randn(8), torch.randn(8)
    compiled = tracer.compile(_explained_work)
    compiled(x, y)
    plain = tracer.explain(_explained_work, x, y)
    for target in (compiled, tracer.compile(_explained_work)):
        report = tracer.explain(target, x, y)
        assert (report.graph_count, report.break_count, report.op_count) == \
            (plain.graph_count, plain.break_count, plain.op_count) == (2, 1, 4)
        assert all(f.filename == __file__ for f in report.frames), [f.filename for f in report.frames]
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    report = tracer.explain(tracer.compile(module), torch.randn(2, 4))
    assert report.graph_count == 1 and "api.py" not in report.frames[0].filename
    out, made = trace_call(compiled, (x, y), {})
    torch.testing.assert_close(out, _explained_work(x, y))
    assert [code.co_filename for code, _e in made] == [__file__] * 2
