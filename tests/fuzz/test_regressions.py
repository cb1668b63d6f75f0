"""Programs the fuzzer found failing, fixed as plain tests (source kept verbatim).

Each runs through the same differential check as the fuzzer (fuzz_harness.check_source):
compiled == eager on every input set, same mutations, prints, globals and exceptions; and
each asserts what was captured (the Report, or tests/helpers.py's assertions).
"""
import pytest
import torch

import tracer
from fuzz_harness import check_source
from helpers import assert_captured, traced


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def test_lambda_with_default_tuple_constant():
    """MAKE_FUNCTION with defaults given as one tuple constant `(2,)` was an internal error
    (AttributeError in the handler; the frame fell back, so still right, but not traced)."""
    src = '''import torch
import numpy as np

def f(x, y, n, s, lst, d):
    inner1 = lambda a, b=2: a * b - x
    y = inner1(y + 1.0)
    return (y, n,)
'''
    rep = check_source(src)
    assert rep.captured and rep.compiled.entries[0].reason is None
    assert rep.ops >= 3 and rep.graph_breaks == 0 and rep.warm_hits == rep.warm_calls == 2


@pytest.mark.loop_resumes
def test_resume_function_uses_the_running_frames_globals():
    """One code object exec'd into two namespaces shares one cache entry; the resume function
    after a graph break was a constant bound to the *first* namespace's globals, so the
    `print(..., file=SINK)` in the handler wrote to the other namespace's SINK."""
    src = '''import torch
import numpy as np

def f(x, y, n, s, lst, d):
    try:
        n = n // (n - n)
    except ZeroDivisionError as e:
        print('zd', type(e).__name__, file=SINK)
        n = n % 1000
    t1 = x
    return {'out': x, 'rest': []}
'''
    rep = check_source(src, filename="<string>")
    # one break: the print in the handler (the division by zero of constants is raised and
    # caught inside the trace)
    assert rep.captured and rep.graph_breaks == 1, rep
    # an equal code object (filename is not compared) from another exec: caches are keyed by
    # code identity, so it is traced anew, and its resume function uses its own globals
    rep = check_source(src, filename="/tmp/fuzz_prog.py")
    assert rep.captured and rep.graph_breaks == 1, rep


def test_same_code_two_globals_after_break():
    import io
    import torch
    src = "def f(x):\n    print('hi', file=SINK)\n    return x + K\n"
    code = compile(src, "<string>", "exec")
    ns1, ns2 = {"SINK": io.StringIO(), "K": 1}, {"SINK": io.StringIO(), "K": 2}
    exec(code, ns1)
    exec(code, ns2)
    f1, f2 = tracer.compile(ns1["f"]), tracer.compile(ns2["f"])
    with traced() as tr:
        assert torch.equal(f1(torch.zeros(1)), torch.ones(1))
        assert torch.equal(f2(torch.zeros(1)), torch.full((1,), 2.0))
    assert ns1["SINK"].getvalue() == "hi\n" and ns2["SINK"].getvalue() == "hi\n"
    # one entry for f (shared code), a resume function per globals (K is guarded there)
    assert_captured(tr, min_ops=2, breaks=1)


def _loops_mutating_their_list():
    def f_zip(x, lst):
        for j, k in zip(range(3), lst):
            lst.pop()
            x = x + k
        return x

    def f_for(x, lst):
        for k in lst:
            if len(lst) > 1:
                lst.pop()
            x = x + k
        return x

    def f_enum_append(x, lst):
        for i, k in enumerate(lst):
            if len(lst) < 5:
                lst.append(i)
            x = x + k
        return x

    def f_iter_next(x, lst):
        it = iter(lst)
        lst.append(7)
        return x + next(it) + sum(it)

    def f_break_inside(x, lst):
        for k in lst:
            print("k", k)          # a graph break inside the loop: the iterator is rebuilt
            if len(lst) > 1:
                lst.pop()
            x = x + k
        return x, lst
    return [f_zip, f_for, f_enum_append, f_iter_next, f_break_inside]


@pytest.mark.parametrize("fn", _loops_mutating_their_list(), ids=lambda f: f.__name__)
@pytest.mark.loop_resumes
def test_loop_over_a_list_sees_its_mutation(fn, capsys):
    """Iterating a list snapshot its items at GET_ITER/zip/enumerate: a loop that popped
    from the list it iterated ran too many times (fuzz seed 100413: wrong result and list)."""
    c = tracer.compile(fn)
    with traced() as tr:
        for lst in ([1, 2, 3], [5], [], [1, 2, 3, 4, 5, 6]):
            a, b = list(lst), list(lst)
            r1, r2 = fn(torch.zeros(1), a), c(torch.zeros(1), b)
            assert str(r1) == str(r2) and a == b
    assert_captured(tr, min_ops=0, breaks=None)  # no fallback, whatever the list


# ---- found by the CPython oracle (tests/cpython_oracle.py) ------------------------------------
def test_iterator_types_and_identity_across_a_break():
    def f(x, seq):
        e = enumerate(seq, start=11)
        kinds = [type(i).__name__ for i in (e, zip(seq), map(abs, seq), reversed(seq), iter(()))]
        print("break")
        return x, kinds, iter(e) is e, list(e)

    c = tracer.compile(f)
    r1, r2 = f(torch.ones(1), [1, 2]), c(torch.ones(1), [1, 2])
    assert r1[1:] == r2[1:]
    # the enumerate, not advanced yet, is made again over the list at the break (issue 35):
    # one break, at the print (the frame ran as Python before)
    assert_captured(c, min_ops=0, breaks=1, fallbacks=0)


def test_exec_into_a_dict_built_in_the_frame():
    def f(x):
        g = {}
        h = g
        exec("y = 3", g)
        return x + h["y"]

    c = tracer.compile(f)
    assert torch.equal(c(torch.zeros(1)), torch.full((1,), 3.0))
    # exec reads the frame's locals: no break can be placed, the frame runs as Python
    assert_captured(c, min_ops=0, fallbacks=1)
    assert "exec" in c.entries[0].reason


def test_locals_read_after_a_break():
    """eval(..., locals()) after a graph break saw only the locals liveness called live
    (CPython oracle: test_set TestSubset*.test_issubset, NameError 'x')."""
    def f(x, y):
        out = []
        for case in "<", "==":
            out.append(eval("x" + case + "y", locals()))
        return out

    c = tracer.compile(f)
    assert c(1, 2) == f(1, 2)
    assert_captured(c, min_ops=0, fallbacks=1)  # locals() is not traced: runs as Python
    assert "locals()" in c.entries[0].reason


# ---- found by the fuzzer's new shapes (issue 16) ---------------------------------------------
@pytest.mark.loop_resumes
def test_builtin_raising_on_constants_is_the_users_exception():
    """`len(n)` of an int was an internal error (the builtin's implementation raised TypeError
    inside the tracer, and the frame ran as Python): it is the user's TypeError, with CPython's
    message, caught by the frame's own handler without a graph break, or raised unchanged."""
    src = '''import torch

def f(x, y, n, s, lst, d):
    try:
        n = len(n)
    except TypeError as e:
        print('caught', e, file=SINK)
        n = 5
    y = x * n
    return (y, len(s) if n > 9 else n)
'''
    rep = check_source(src)
    assert rep.captured and rep.ops >= 1 and rep.warm_hits == rep.warm_calls
    assert rep.graph_breaks == 1  # the print in the handler; the TypeError itself is traced


@pytest.mark.loop_resumes
def test_subscript_of_a_constant_raising_is_the_users_exception():
    """`x.shape[0]` of a 0-d tensor (seed 100047) was an internal error (IndexError inside the
    tracer): it is the user's IndexError, catchable, or raised with CPython's message."""
    src = '''import torch

def f(x, y, n, s, lst, d):
    x = x.sum() * s
    try:
        n = x.shape[0]
    except IndexError:
        n = 3
    return (x + n + y.shape[n % 2 + 1],)
'''
    rep = check_source(src)
    assert rep.captured and rep.ops >= 2 and rep.raised  # y.shape[2] of a 2-d input raises


def test_aliased_tensors_name_the_guard_that_fails():
    """A batched tensor check rejects one tensor passed under two sources, a fact no single
    guard stated: with aliased inputs, check() was False while failures() named nothing (an
    internal error under verify_guards; seed 19 of the new shapes, whose frame ran as Python
    and so had no distinct-inputs guard). failures() now names the aliasing."""
    def gen(t):
        yield t

    def f(x, y):
        z = x + y
        return z, gen(z)  # (a generator escapes: once the frame ran as Python with the tensors'
                          # guards only; now the generator is rebuilt and the frame captured)

    c = tracer.compile(f)
    a = torch.ones(2)
    assert torch.equal(c(a, torch.ones(2))[0], torch.full((2,), 2.0))
    with traced() as aliased:
        assert torch.equal(c(a, a)[0], torch.full((2,), 2.0))
    assert aliased.recompiles == 1 and aliased.internal_errors == 0, str(aliased)
    reason = aliased.of("recompile")[0].reason  # the failed guard names the aliasing
    assert "x and y are the same tensor" in reason or "x, y are distinct objects" in reason, reason
    assert_captured(c, min_ops=1, fallbacks=0, entries=2)


# ---- an op whose result is its input object; a write the fake kernels do not check -----------
def test_conversion_that_returns_its_input_keeps_its_attributes():
    """`y.float()` of a float tensor IS y (as `.to()`, `.contiguous()`, `torch.atleast_1d`,
    `torch.as_tensor` when nothing changes): the trace made it a fresh tensor, so the
    attribute set on y before was missing after (fuzz p10: `hasattr(y, 'tag')` took the other
    branch, values off by the tag). The result of an op that returns one of its input tensors
    is now that input's Variable."""
    src = '''import torch

def f(x, y, n, s, lst, d):
    y.tag = 2
    y = y.float()
    if hasattr(y, 'tag'):
        y = y + y.tag
    else:
        y = y - 1
    return (y,)
'''
    rep = check_source(src)  # the float64 input set takes the else branch (a fresh tensor)
    assert rep.captured and rep.ops >= 1 and rep.graph_breaks == 0
    assert rep.warm_hits == rep.warm_calls == 2


def test_ops_returning_their_input_keep_identity():
    def f(x):
        z = x * 2
        a = z.float()
        b = x.add_(1)
        x += 1  # operator.iadd: the same object again
        c = torch.atleast_1d(z)
        e = torch.as_tensor(x)
        x.tag = 5
        return z, a is z, b is x, c is z, e is x, x.contiguous().tag

    c = tracer.compile(f)
    x1, x2 = torch.ones(2, 3), torch.ones(2, 3)
    r1, r2 = f(x1), c(x2)
    assert torch.equal(r1[0], r2[0]) and r1[1:] == r2[1:] == (True, True, True, True, 5)
    assert torch.equal(x1, x2) and x2.tag == 5
    assert_captured(c, min_ops=3, breaks=0)


def _scalar_write_into_overlap_raises():
    """Whether eager rejects `x[..., 0] = 1.0` into an expanded tensor: torch 2.13.0 and 2.14.1
    do (the overlap check of copy_), 2.15.0 writes a Python scalar as a fill, without it."""
    a = torch.zeros(2, 3)
    try:
        a[:1].expand_as(a)[..., 0] = 1.0
    except RuntimeError:
        return True
    return False


def test_in_place_write_into_an_expanded_tensor_keeps_earlier_effects():
    """`x[..., 0] = v` into `a[:1].expand_as(a)` raises RuntimeError in eager (elements share
    memory), but the fake kernels accept it: the graph raised at run time, before the global
    list's `COUNTER[0] += 1` recorded earlier in the trace was replayed (fuzz p3: COUNTER [4]
    vs [0]). Such a write is now a graph break: it runs as Python, after the effects.
    The fuzzer's program writes a Python float, which eager accepts from torch 2.15 on (see
    _scalar_write_into_overlap_raises): there it must not raise either; the same program
    writing a tensor raises on every torch."""
    fuzz_p3 = '''import torch
import numpy as np

def helper(a):
    COUNTER[0] += 1
    return a[:1].expand_as(a)

def f(x, y, n, s, lst, d):
    x = helper(y)
    x[..., 0] = float(n)
    try:
        n = int(np.int64(n) + 1)
    except ZeroDivisionError:
        pass
    return (x,)
'''
    rep = check_source(fuzz_p3)
    if _scalar_write_into_overlap_raises():
        assert rep.raised and rep.captured and rep.ops >= 1 and rep.graph_breaks == 1
    else:
        assert not rep.raised and rep.captured and rep.ops >= 1 and rep.graph_breaks >= 1
    rep = check_source(fuzz_p3.replace("x[..., 0] = float(n)", "x[..., 0] = torch.tensor(float(n))"))
    assert rep.raised and rep.captured and rep.ops >= 1 and rep.graph_breaks == 1

    def g(x, log):
        log.append(1)
        b = x[:1].expand_as(x)
        b += 1
        return b

    c = tracer.compile(g)
    with traced() as tr:
        log = []
        with pytest.raises(RuntimeError, match="refers to a single memory location"):
            c(torch.ones(2, 3), log)
    assert log == [1]
    assert_captured(tr, min_ops=1, breaks=1)
    assert "share memory" in tr.of("break")[0].reason, str(tr)


@pytest.mark.loop_resumes
def test_fuzz_seed_920003():
    """A frame that breaks at an in-place write with autograd history (a relu_ on a view):
    the exceptions the trace raised and handled held its Python frames in a cycle with the
    call's real tensors. The first relu_'s AsStrided node so lived on, and a backward that
    fails in eager and compiled alike named it (`output 0 of AsStrided`) where eager names
    `Relu` (when the collector did not happen to run in between)."""
    src = '''import contextlib
import functools
import torch
import numpy as np

def helper0(a, m):
    hl = [m, 1]
    hd = {'a': a, 'b': m}
    a.relu_()
    m = COUNTER[0] + ((m * m) % 97)
    a = torch.sort(a, dim=-1)[0]
    hd.pop('a', None)
    return (a - (m + 4))

def helper1(a, m=3):
    hl = [m, 1]
    hd = {'a': a, 'b': m}
    if hl:
        m = hl.pop()
    return a.select(-1, 0).unsqueeze(-1)

class Track:
    def __init__(self, log, quiet=False):
        self.log = log
        self.quiet = quiet
    def __enter__(self):
        self.log.append(1)
        return self
    def __exit__(self, et, ev, tb):
        self.log.append(2 if et is None else 3)
        return self.quiet and et is KeyError

def f(x, y, n, s, lst, d):
    global ACC
    for e1 in range(len(lst) % 4 + 1):
        COUNTER.append(e1)
        COUNTER.append(e1)
        n = int(x.sum().item() > 0) + e1
        COUNTER.append(e1)
        COUNTER.append(e1)
    n = ((-2 // 2)) % 1000
    s = round(y.sum().item())
    x = helper1(torch.maximum(y, x))
    x.note = lst
    t2 = x
    with Track(lst, quiet=True) as cm3:
        try:
            n = int(np.int64(n) + 1)
            y = torch.cos(t2)
        except ZeroDivisionError:
            print('handled', file=SINK)
        finally:
            n = (1) % 1000
        for j5, k4 in zip(range(3), lst):
            n = ((t2.size(-1) + k4)) % 1000
            s = float(y.size(-1))
            k4 = (((((k4 * n) % 97) * min(8, k4)) % 97)) % 1000
        lst.insert(0, (n // 3))
    t6 = helper0(t2, len(lst)) + (x + y.shape[-1])
    try:
        n = int(y.sum().item()) % 1000
        t2 = helper0(t2, t6.ndim)
    except IndexError:
        print('handled', file=SINK)
    return (x, d, n, d,)
'''
    rep = check_source(src)  # (each input set runs with the cyclic collector off)
    assert rep.captured and rep.ops >= 3


def test_fuzz_seed_943689():
    """An in-place write through a view of a multi-output view (`torch.split(a, 1, -1)[0]`,
    transposed, `add_`): autograd refuses even to name such a view's grad_fn once its base
    was written, and reading it to ask whether the write changed the input's history was an
    internal error (the frame ran as Python). Now it counts as changed: the frame breaks at
    the write, which runs natively and raises eager's error into the user's handler."""
    src = '''import contextlib
import functools
import torch
import numpy as np

import contextlib

class RecCM:
    def __init__(self, tag):
        self.tag = tag
    def __enter__(self):
        print('enter', self.tag, file=SINK)
        return self
    def __exit__(self, typ, value, tb):
        print('exit', self.tag, typ.__name__ if typ else None, file=SINK)
        return False

class SuppressCM:
    def __enter__(self):
        return self
    def __exit__(self, typ, value, tb):
        if typ is not None:
            print('suppressed', typ.__name__, file=SINK)
        return typ is not None and issubclass(typ, (KeyError, IndexError))

@contextlib.contextmanager
def gen_cm(tag):
    print('setup', tag, file=SINK)
    try:
        yield tag * 2
    finally:
        print('teardown', tag, file=SINK)

def tag_of(a):
    print('tag_of', file=SINK)
    return getattr(a, 'tag', -1) + (10 if hasattr(a, 'tag') else 0)

def helper0(a, m):
    hl = [m, 1]
    hd = {'a': a, 'b': m}
    a.add_(1.5)
    return torch.split(a, 1, -1)[0]

class Acc:
    scale = 3
    def __init__(self, t, k):
        self.t = t
        self.k = k
    def step(self, a):
        self.t = a
        self.k = (self.k + 1) % 7
        return self.t
    @property
    def doubled(self):
        return self.t * 1
    @classmethod
    def make(cls, t):
        return cls(t, cls.scale)
    @staticmethod
    def combine(a, b):
        return -b

def f(x, y, n, s, lst, d):
    if x.sum() > 0:
        n = getattr(x, 'tag', 0) + int(hasattr(x, 'tag'))
        n = tag_of(y) + n
    else:
        s = round(y.sum().item())
        for k1 in lst[:2]:
            y = helper0(y, x.ndim).abs()
    o2 = Acc.make(x - x)
    m3 = x > float((n + n))
    x = ((x * len(x)) + helper0(y, (n // 1)).amax())
    try:
        try:
            v4 = y.transpose(0, -1)
            v4.add_(1.0)
        except ArithmeticError:
            n = (n + 1) % 1000
        else:
            n = ((-1 // 1)) % 1000
        finally:
            print('finally', n, file=SINK)
    except Exception as e2:
        print('outer', type(e2).__name__, e2, file=SINK)
    s = (s * 0.5 + (n if n > n else n - 1))
    s = s
    y = torch.nn.functional.gelu(y)
    x = torch.maximum(torch.maximum(y, x), y)
    return (x, d, n, m3, d,)

'''
    rep = check_source(src)  # internal errors fail the test (conftest)
    assert rep.captured and rep.ops >= 3
