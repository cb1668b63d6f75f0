"""A graph op that raises at run time (fake tensors let it through, the real kernel raises):
the writes the program made before that op must have happened, as in eager. The rewritten
code calls the graph first and replays writes after it, so it reruns the frame as Python
when a graph with no effects of its own raises (tracer/rewrite/rerun.py). Found by the fuzzer on
3.12 (seed 301557): an attribute set on an input tensor was lost."""
import sys
import warnings

import pytest
import torch

import tracer
from helpers import traced

LOG = []
COUNT = 0


def _both(fn, make_args, calls=2):
    """Eager and compiled on equal copies: same exception (type and message), same state."""
    c = tracer.compile(fn)
    for k in range(calls):
        args_e, args_c = make_args(), make_args()
        outs = []
        for f, args in ((fn, args_e), (c, args_c)):
            LOG.clear()
            try:
                outs.append(("ok", f(*args), list(LOG)))
            except Exception as e:  # noqa: BLE001 - the exception is what is compared
                outs.append((type(e).__name__, str(e), list(LOG)))
        (ke, ve, le), (kc, vc, lc) = outs
        assert ke == kc and le == lc, (outs, k)
        if ke != "ok":
            assert ve == vc
        yield args_e, args_c


def _state(args):
    return [vars(a) if isinstance(a, torch.Tensor) else a for a in args]


def test_writes_before_the_raising_op_happen():
    def g(y, lst):
        y.tag = 6
        lst.append(1)
        LOG.append("before")
        return (y > 0).relu()  # relu of a bool tensor raises in the kernel, not in fake mode

    for a_e, a_c in _both(g, lambda: (torch.ones(3), [])):
        assert _state(a_e) == _state(a_c) == [{"tag": 6}, [1]]


def test_in_a_loop_that_breaks_and_in_a_resume_function():
    def h(y, lst):
        w = 0
        while w < 2:
            w += 1
            y.tag = 5 + w
            lst.append(w)
            print("", end="")  # a break: the rest is a resume function
            y = (y > 0).relu()
        return y

    for a_e, a_c in _both(h, lambda: (torch.ones(3), [])):
        assert _state(a_e) == _state(a_c)


def test_closures_cells_and_a_star_signature():
    scale = 3

    def k(x, *rest, flag=True, **kw):
        global COUNT
        COUNT += 1
        def inner():
            return x * scale
        LOG.append(len(rest) + len(kw))
        y = inner() + rest[0]
        return (y > 0).relu() if flag else y

    global COUNT
    COUNT = 0
    list(_both(k, lambda: (torch.ones(2), torch.ones(2)), calls=1))
    assert COUNT == 2  # once eagerly, once compiled (the rerun is that call's only run)


def test_warm_calls_rerun_without_tracing_and_a_caller_sees_the_writes():
    def g(y, lst):
        lst.append(y.shape[0])
        return (y > 0).relu()

    c = tracer.compile(g)
    lst = []

    def caller():
        try:
            c(torch.ones(2), lst)
        except RuntimeError:
            return list(lst)

    assert caller() == [2]
    with traced() as t:
        assert caller() == [2, 2]
    assert t.frames_traced == 0 and t.recompiles == 0
    assert [e.kind for e in t.events] == ["rerun"]


def test_a_graph_with_its_own_effects_is_not_run_twice():
    """An in-place op on an input before the raising op: the graph is not rerun (it would
    add twice); it raises as eager does, the input changed once. (The writes traced before
    it are the known gap for such graphs: docs/reliability.md, "A graph that raises".)"""
    def m(x):
        x.add_(1)
        return (x > 0).relu()

    for a_e, a_c in _both(m, lambda: (torch.zeros(2),)):
        assert torch.equal(a_e[0], a_c[0]) and a_c[0].tolist() == [1.0, 1.0]


def test_a_graph_that_does_not_raise_is_unchanged():
    def g(y, lst):
        lst.append(1)
        return y.relu() * 2

    c = tracer.compile(g)
    with traced() as t:
        out = c(torch.tensor([-1.0, 2.0]), [])
    assert out.tolist() == [0.0, 4.0] and t.graphs == 1
    assert not t.of("rerun")


def test_a_write_before_an_in_place_op_on_an_intermediate_that_raises():
    """Fuzz seed 813313 (3.11): an overlapping in-place copy raises only in the real kernel,
    after `lst.append` in program order. The graph writes only a tensor it made itself, so
    running it twice changes nothing outside: it reruns."""
    def h(x, lst):
        y = x * 2
        lst.append(1)
        y[:1] = y[:1].expand_as(y)[:1]
        return y

    for a_e, a_c in _both(h, lambda: (torch.ones(3, 2), [])):
        assert a_e[1] == a_c[1] == [1]


def _reruns(fn, make_args, check):
    """Eager and compiled agree (exception, LOG, state) on two calls, and each compiled
    call reran the frame: the graph did raise, and the writes came from the rerun."""
    with traced() as t:
        for a_e, a_c in _both(fn, make_args):
            assert check(a_e, a_c) in (None, True), (a_e, a_c)  # (a check may assert or answer)
    assert len(t.of("rerun")) == 2 and t.graphs == 1 and not t.of("fallback")


def test_in_place_ops_on_inputs_are_applied_once_when_the_graph_reruns():
    """An in-place op on an input before the raising op (and a write between them): the graph
    works on a copy of the input and copies it back only when it returns, so a rerun starts
    from the unchanged input, and the input changes once, as in eager."""
    def m(x, lst):
        x.add_(1)
        x[0].mul_(3)
        lst.append(x.sum().item() if False else 1)
        return (x > 0).relu()

    def same(a_e, a_c):
        assert torch.equal(a_e[0], a_c[0]) and a_c[0].tolist() == [3.0, 1.0] and a_e[1] == a_c[1] == [1]

    _reruns(m, lambda: (torch.zeros(2), []), same)


class _Stats(torch.nn.Module):
    """Not a leaf module: its forward is traced, its buffer is a get_attr of the graph."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(1))
        self.register_buffer("var", torch.ones(1))

    def forward(self, x):
        return torch.nn.functional.batch_norm(x.view(3, 1), self.mean, self.var, training=True, momentum=0.5)


def test_hidden_writes_count_too_inplace_kwarg_out_and_buffers():
    """Writes an op's name does not show (`inplace=True`, `out=`, batch_norm's running
    stats, on an argument and on a module's buffer) are read off the aten schemas: the rerun
    does not apply them twice, and the state after it is eager's."""
    pool, calls = [_Stats(), _Stats()], []  # eager's module, the compiled call's

    def k(x, y, lst, rm, mod):
        torch.nn.functional.leaky_relu(x, 0.5, inplace=True)
        torch.mul(x, 2, out=y)
        torch.nn.functional.batch_norm(x.view(3, 1), rm, torch.ones(1), training=True, momentum=0.5)
        mod(x)
        LOG.append("after")
        lst.append(1)
        return (y > 0).relu()

    def same(a_e, a_c):
        assert all(torch.equal(a_e[i], a_c[i]) for i in (0, 1, 3)) and a_e[2] == a_c[2] == [1]
        assert torch.equal(a_e[4].mean, a_c[4].mean) and float(a_c[4].mean) != 0.0

    def make():
        calls.append(1)
        return torch.tensor([-2.0, 1.0, 4.0]), torch.zeros(3), [], torch.zeros(1), pool[len(calls) % 2 - 1]

    _reruns(k, make, same)


def test_a_graph_that_raises_inside_no_grad_leaves_the_grad_mode_as_it_was():
    def g(x, lst):
        lst.append(1)
        with torch.no_grad():
            y = (x > 0).relu()
        return y

    def same(a_e, a_c):
        assert a_e[1] == a_c[1] == [1] and torch.is_grad_enabled()

    _reruns(g, lambda: (torch.ones(2), []), same)


def test_a_written_input_with_a_view_among_the_outputs_reruns():
    """The snapshot is of the input itself: views the graph made of it stay views."""
    def m(x, lst):
        x.add_(1)
        v = x[:1]
        lst.append(1)
        if lst[0] == 2:
            return v
        return v, (x > 0).relu()

    _reruns(m, lambda: (torch.zeros(2), []),
            lambda a_e, a_c: torch.equal(a_e[0], a_c[0]) and a_c[0].tolist() == [1.0, 1.0])
    c = tracer.compile(m)
    x = torch.zeros(2)
    v = c(x, [2])
    v += 5  # a view of x, as in eager
    assert x.tolist() == [6.0, 1.0]


def test_a_leaf_batch_norm_in_training_is_restored_before_the_rerun():
    """BatchNorm is a leaf (call_module): it writes its own running stats, which are no graph
    input; the spy maps its writes to the module's buffers, which are snapshotted."""
    pool, calls = [torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)], []

    def f(x, bn, lst):
        y = bn(x)
        lst.append(1)
        return (y > 0).relu()

    def make():
        calls.append(1)
        return torch.arange(12.0).view(4, 3), pool[len(calls) % 2 - 1], []

    def same(a_e, a_c):
        assert a_e[2] == a_c[2] == [1]
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            assert torch.equal(getattr(a_e[1], name), getattr(a_c[1], name)), name
        assert int(a_c[1].num_batches_tracked) == len(calls) // 2

    _reruns(f, make, same)


def _draws_as_eager(r, seed):
    """r(x, lst) draws random numbers, appends to lst and raises: compiled, it reruns, and
    the list and the next draw after the call are eager's (twice: trace, then a hit)."""
    c = tracer.compile(r)
    with traced() as t:
        for _ in range(2):
            runs = []
            for fn in (r, c):
                torch.manual_seed(seed)
                lst = []
                with pytest.raises(RuntimeError, match="Boolean inputs"):
                    fn(torch.ones(3), lst)
                runs.append((lst, torch.rand(2)))
            assert runs[0][0] == runs[1][0] == [1] and torch.equal(runs[0][1], runs[1][1])
    assert len(t.of("rerun")) == 2 and not t.of("fallback")


def test_random_numbers_drawn_by_a_graph_that_raises_are_drawn_once():
    """The RNG state is saved before the graph and restored when it raises: the rerun draws
    the numbers eager draws, and the next draw after the call is eager's."""
    def r(x, lst):
        noise = torch.rand(3) + torch.nn.functional.dropout(x, 0.5, training=True)
        lst.append(1)
        return (noise > 0).relu()

    _draws_as_eager(r, 7)


def test_large_written_tensors_are_not_snapshotted_on_every_call():
    """An optimizer-like step writing a megabyte of state in place, beside a Python write: no
    copy of that state per call (rerun.SNAPSHOT_LIMIT), so such a graph does not rerun when it
    raises (the known gap, as in torch.compile: the write before the raising op is lost, the
    state changed once). Small states are snapshotted and rerun."""
    from tracer.rewrite import rerun

    def step(state, lst):
        state.mul_(0.9).add_(1.0)
        lst.append(1)
        return (state > 0).relu()

    for n, reruns in ((1000, 1), (rerun.SNAPSHOT_LIMIT // 4 + 1, 0)):
        c = tracer.compile(step)
        state_e, state_c, lst_e, lst_c = torch.ones(n), torch.ones(n), [], []
        with pytest.raises(RuntimeError):
            step(state_e, lst_e)
        with traced() as t, pytest.raises(RuntimeError):
            c(state_c, lst_c)
        assert torch.equal(state_e, state_c) and t.reruns == reruns
        assert lst_c == ([1] if reruns else [])
        tracer.reset()


def test_an_in_place_write_hidden_in_a_keyword_is_not_applied_twice():
    """Before the writes were read off the aten schemas, `inplace=True` did not count as a
    write: the graph was taken for pure, rerun, and the input halved twice (-0.5 for -1.0)."""
    def k(x, lst):
        torch.nn.functional.leaky_relu(x, 0.5, inplace=True)
        lst.append(1)
        return (x > 0).relu()

    _reruns(k, lambda: (torch.tensor([-2.0, 1.0]), []),
            lambda a_e, a_c: torch.equal(a_e[0], a_c[0]) and a_c[0].tolist() == [-1.0, 1.0])


def test_random_numbers_drawn_in_place_or_by_a_leaf_module_count_as_random():
    """`uniform_` on a tensor the graph made, and a leaf RReLU in training: random draws read
    off the aten ops' tags, not off a list of names; the RNG state is put back for the rerun."""
    act = torch.nn.RReLU()

    def r(x, lst):
        noise = torch.empty(3).uniform_() + act(x - 2)
        lst.append(1)
        return (noise > 0).relu()

    _draws_as_eager(r, 3)


@pytest.mark.parametrize("p, training, random", [(0.5, False, False), (0.0, True, False), (0.5, True, True)])
def test_dropout_switched_off_draws_nothing(p, training, random):
    """A graph's RNG state is saved before every call only when it draws: dropout in eval mode
    or with p == 0, and attention kernels without dropout (tagged as random for their
    dropout_p) do not. Inlined torch.nn modules put such nodes in every eval graph."""
    from tracer.rewrite import rerun

    def r(x, lst):
        y = torch.nn.functional.dropout(x, p, training=training)
        z = torch.nn.functional.scaled_dot_product_attention(y[None, None], y[None, None], y[None, None])
        lst.append(1)
        return (z > 0).relu()

    c = tracer.compile(r)
    x = torch.randn(4, 8)
    with pytest.raises(RuntimeError):
        c(x, [])
    gm = c.entries[0].graph
    effects = {rerun._effect(n, dict(gm.named_modules())) for n in gm.graph.nodes
               if n.op.startswith("call_")}
    assert ("random" in effects) == random, effects
    if random:
        _draws_as_eager(r, 7)


def test_a_try_around_a_raising_op_catches_it_when_the_graph_writes_an_input():
    """No Python write to replay, but the user's own `except` must see the kernel's error:
    the graph (which writes its input) reruns as Python, where the handler runs. Before, the
    error escaped the function: a crash of the user's program."""
    def g(x):
        x.add_(1)
        try:
            y = (x > 0).relu()
        except RuntimeError:
            y = x * 2
        return y

    c = tracer.compile(g)
    for _ in range(2):
        x_e, x_c = torch.zeros(2), torch.zeros(2)
        with traced() as t:
            got = c(x_c)
        assert torch.equal(got, g(x_e)) and torch.equal(x_e, x_c) and x_c.tolist() == [1.0, 1.0]
        assert t.reruns == 1 and t.internal_errors == 0


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "needs-grad"])
def test_a_context_managers_exit_runs_when_a_graph_inside_its_block_raises(grad):
    """Fuzz seed 880585 (3.11): a graph inside a @contextmanager block (after a break)
    writes an input, then an op raises in the kernel. The manager's `__exit__` (its
    `finally`) must run before the exception leaves the function, as in eager; it ran only
    when the generator was collected. The caller keeps the exception (and so the frames)."""
    import contextlib
    import io
    sink = io.StringIO()

    @contextlib.contextmanager
    def scope(log, v):
        log.append(v)
        try:
            yield v * 2
        finally:
            log.append(-v)

    def f(x, y, lst):
        with scope(lst, 3):
            print("inside", file=sink)  # a break: the rest of the block is a resume function
            y[:1] = y[:1].expand_as(y)[:1]  # overlapping copy: raises only in the kernel
            y = y + x
        return y

    c = tracer.compile(f)
    for _ in range(2):
        kept, logs = [], []
        for fn in (f, c):
            lst, y = [], torch.ones(3, 2, requires_grad=grad) * 1  # (needs grad: a history write)
            try:
                fn(torch.ones(3, 2), y, lst)
            except RuntimeError as e:
                kept.append(e)
            logs.append((lst, y.detach().tolist()))
        assert len(kept) == 2 and logs[0] == logs[1] and logs[1][0] == [3, -3]


def test_an_input_written_with_autograd_history_then_a_raise_under_a_try():
    """Fuzz seed 880585 with inputs that need grad. Nothing undoes autograd history, so the
    graph cannot rerun; a working copy copied back after the graph (AOTAutograd's way) would
    change autograd's own checks (a tensor saved for backward and written afterwards no
    longer fails backward: fuzz seed 860049). So the frame breaks at that write, which runs
    as Python: the except sees the error, gradients and state are eager's."""
    def f(x, w, lst):
        x.mul_(w)
        lst.append(1)
        try:
            y = (x > 0).relu()
        except RuntimeError:
            y = x * 3
        return y.sum()

    c = tracer.compile(f)
    for _ in range(2):
        res = []
        for fn in (f, c):
            a, w = torch.tensor([1.0, -2.0], requires_grad=True), torch.tensor([3.0, 4.0], requires_grad=True)
            x, lst = a * 1, []
            with traced() as t:
                out = fn(x, w, lst)
            out.backward()
            res.append((out.detach(), x.detach().clone(), a.grad, w.grad, lst))
        (oe, xe, ae, we, le), (oc, xc, ac, wc, lc) = res
        assert torch.equal(oe, oc) and torch.equal(xe, xc) and torch.equal(ae, ac) and torch.equal(we, wc)
        assert le == lc == [1] and t.internal_errors == 0 and t.fallbacks == 0
    entry = c.entries[0]
    assert [b.reason.split(",")[0] for b in entry.breaks] == ["the graph writes an input in place while "
                                                              "recording autograd history"]


def _functionalising(gm, example_inputs):
    """A user's backend: AOTAutograd with no compiler (as aot_eager): the tracer cannot know
    when it makes the graph's writes into its inputs."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified
    return aot_module_simplified(gm, example_inputs, fw_compiler=lambda g, _i: make_boxed_func(g.forward))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor", "user"])
def test_an_input_written_before_a_raising_op_under_a_compiling_backend(backend):
    """AOTAutograd copies a graph's new values into its inputs after the graph's last op, and
    inductor fused that copy into the kernel that raises: `x.add_(1); x[idx]` with idx out of
    range left x unwritten under aot_eager (eager: written; torch.compile: unwritten too), and
    under inductor the user saw the kernel's RuntimeError, not eager's IndexError. Such graphs
    now rerun: aot_eager's with nothing to snapshot (its inputs are untouched when it raises),
    inductor's and a user backend's with a snapshot of what they write."""
    def f(x, idx):
        x.add_(1)
        return x[idx] * 2

    c = tracer.compile(f, backend=_functionalising if backend == "user" else backend)
    x_c, x_e = torch.zeros(3), torch.zeros(3)
    assert torch.equal(c(x_c, torch.tensor([1])), f(x_e, torch.tensor([1]))) and torch.equal(x_c, x_e)
    with traced() as t:
        for _ in range(2):
            with pytest.raises(IndexError) as got:
                c(x_c, torch.tensor([10]))
            with pytest.raises(IndexError) as want:
                f(x_e, torch.tensor([10]))
            assert str(got.value) == str(want.value) and torch.equal(x_c, x_e)
        assert torch.equal(c(x_c, torch.tensor([2])), f(x_e, torch.tensor([2]))) and torch.equal(x_c, x_e)
    assert t.reruns == 2 and t.frames_traced == 0 and t.internal_errors == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_compiled_layer_under_non_reentrant_checkpoint_is_not_rerun_when_its_hook_stops_it(backend):
    """torch.utils.checkpoint's non-reentrant recomputation stops early by raising from its
    saved-tensors pack hook, which the graph's ops call. Before, the graph reran the frame as
    Python on that exception, the hook ran again for each save and checkpoint asserted
    ("target_frame.early_stop is set") in the user's backward. Now an exception out of the
    pack hook goes to the caller as it is: gradients equal eager's, the layer traced once."""
    from torch.utils.checkpoint import checkpoint

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.tanh(self.lin(x)) * 2

    torch.manual_seed(0)
    block = Block()
    compiled = tracer.compile(block, backend=backend)
    grads = []
    with traced() as t:
        for layer in (block, compiled, compiled):
            x = torch.randn(2, 4, generator=torch.Generator().manual_seed(1), requires_grad=True)
            block.zero_grad()
            checkpoint(layer, x, use_reentrant=False).sum().backward()
            grads.append((x.grad, block.lin.weight.grad.clone()))
    for got in grads[1:]:
        torch.testing.assert_close(got, grads[0])
    assert t.reruns == 0 and t.fallbacks == 0 and t.internal_errors == 0, t
    assert t.graphs == 1 and t.frames_traced == 1, t


def test_a_backend_whose_graph_fails_at_run_time_is_not_silent():
    """A backend's compiled callable that raises at run time where eager does not (a kernel
    that fails): the frame reran as Python on every call with nothing said but a line in
    tracer.stats(). Its answer is still Python's; a GraphRunWarning now says once that the
    graph is at fault. A graph whose raise the frame's own try catches says nothing."""
    def failing_backend(gm, example_inputs):
        def run(*args):
            raise RuntimeError("kernel launch failed")
        return run

    def work(x):
        return (x.sin() + 1).relu()

    def guarded(x):
        try:
            return (x[5] + 1).relu()
        except IndexError:
            return x * 0

    c = tracer.compile(work, backend=failing_backend)
    with pytest.warns(tracer.GraphRunWarning, match="kernel launch failed") as got:
        for _ in range(3):
            torch.testing.assert_close(c(torch.ones(3)), work(torch.ones(3)))
    assert len([w for w in got if issubclass(w.category, tracer.GraphRunWarning)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", tracer.GraphRunWarning)
        g = tracer.compile(guarded)
        for _ in range(2):
            torch.testing.assert_close(g(torch.ones(3)), guarded(torch.ones(3)))


def test_a_frame_argument_named_self_is_a_graph_input():
    """A function's parameter named `self` (a method's, given a tensor) made a placeholder
    named `self`, which FX's generated forward(self, ...) took for the module: the graph took
    one argument too few and every call reran as Python."""
    def f(self, x):
        return self * 2 + x

    c = tracer.compile(f)
    with traced() as t:
        for _ in range(2):
            a, b = torch.randn(2), torch.randn(2)
            torch.testing.assert_close(c(self=a, x=b), f(self=a, x=b))
            torch.testing.assert_close(c(a, b), f(a, b))
    assert t.reruns == 0 and t.graphs == 1 and t.fallbacks == 0, t
