"""Dict inputs whose values are guarded only where the trace reads them.

A dict passed in, read as a global or as a module's attribute had every value guarded as soon
as the trace touched it: a training loop that bumps `cfg["step"]` while the frame reads only
`cfg["scale"]` recompiled on every call until the recompile limit, then ran as plain Python
(torch.compile: one frame). A frame that only writes `state["k"] = n` was guarded on the old
value of every key, so each call's write failed the next call's guards. Now the keys (and
their order) are guarded, and a value when the trace reads it: `[]`, get(), pop(), values()
and items() as a loop reaches them, a comparison, `**d`. Every case compares results and the
dicts themselves with eager, after mutations and graph breaks too: the dict keeps its
identity, and a value the trace never read is the caller's object, moved but not rebuilt.
"""
import collections

import torch
import torch.nn as nn

import tracer
from helpers import assert_captured, traced

CFG = {"scale": 2.0, "step": 0}


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def test_a_global_config_whose_unread_entry_changes_every_call_is_traced_once():
    def f(x):
        return x * CFG["scale"]

    c = tracer.compile(f)
    with traced() as t:
        for i in range(10):
            CFG["step"] = i
            x = torch.randn(3)
            assert torch.equal(c(x), f(x))
    assert t.frames_traced == 1 and t.recompiles == 0 and t.recompile_limits == 0, t
    assert_captured(t)
    CFG["scale"] = 3.0  # the value it read is still guarded
    with traced() as t:
        x = torch.randn(3)
        assert torch.equal(c(x), x * 3.0)
    assert t.recompiles == 1, t
    CFG["scale"] = 2.0


def test_a_frame_that_only_writes_an_entry_is_not_guarded_on_the_old_value():
    def f(x, n, state):
        state["k"] = n
        return x + n

    c = tracer.compile(f)
    s_e, s_c = {"k": 0, "other": [1]}, {"k": 0, "other": [1]}
    other = s_c["other"]
    with traced() as t:
        for n in range(2, 12):
            x = torch.randn(3)
            assert torch.equal(c(x, n, s_c), f(x, n, s_e))
            assert _same(s_c, s_e) and s_c["other"] is other
    # one recompile: n changed and became a symbolic int (torch.compile: two frames too)
    assert t.recompiles == 1 and t.recompile_limits == 0, t
    assert all("state" not in e.reason for e in t.of("recompile")), t


def test_a_module_config_dict():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.cfg = {"a": 2, "step": 0}

        def forward(self, x):
            return self.lin(x) * self.cfg["a"]

    m = M()
    c = tracer.compile(m)
    with traced() as t:
        for i in range(6):
            m.cfg["step"] = i
            x = torch.randn(2, 3)
            torch.testing.assert_close(c(x), m(x))
    assert t.frames_traced == 1 and t.recompiles == 0, t


def test_values_read_by_a_loop_are_guarded_up_to_where_it_stopped():
    def f(x, d):
        for k, v in d.items():
            if k == "stop":
                break
            x = x * v
        return x

    c = tracer.compile(f)
    d = {"a": 2.0, "stop": None, "late": 0}
    x = torch.randn(3)
    assert torch.equal(c(x, d), f(x, d))
    with traced() as t:
        d["late"] = 7  # after the break: never read
        assert torch.equal(c(x, d), f(x, d))
    assert t.frames_traced == 0, t
    with traced() as t:
        d["a"] = 3.0  # read: guarded
        assert torch.equal(c(x, d), f(x, d))
    assert t.recompiles == 1, t


def test_reading_the_whole_dict_guards_every_value():
    def f(x, d):
        def g(a, b):
            return a + b
        return x + g(**d) + (d == {"a": 1, "b": 2}), {**d}

    c = tracer.compile(f)
    x = torch.randn(3)
    d = {"a": 1, "b": 2}
    assert _same(c(x, d), f(x, d))
    with traced() as t:
        d["b"] = 5
        assert _same(c(x, d), f(x, d))
    assert t.recompiles == 1, t


def _mutations(d, x):
    d["a"] = d["a"] + 1
    del d["gone"]
    popped = d.pop("p")
    d.setdefault("new", 1)
    d.update(u=2)
    return x * popped


def _mutations_od(d, x):
    d.move_to_end("first")
    k, v = d.popitem(last=False)
    d["z"] = 0
    return x + 1, k, v


def test_mutations_replay_unread_values_as_the_callers_objects():
    kept, t_kept = [1, 2], torch.ones(2)

    def make():
        return {"a": 1, "gone": 0, "p": 3, "keep": kept, "t": t_kept, "last": "s"}

    for fn, mk in ((_mutations, make),
                   (_mutations_od, lambda: collections.OrderedDict(first=kept, second=1, keep=t_kept))):
        c = tracer.compile(fn)
        for i in range(3):
            d_e, d_c = mk(), mk()
            if "last" in d_c:
                d_e["last"] = d_c["last"] = i  # an unread value changes
            x = torch.randn(3)
            with traced() as t:
                r_c = c(d_c, x)
            r_e = fn(d_e, x)
            assert _same(r_c, r_e) and _same(d_c, d_e), (d_c, d_e)
            assert d_c["keep"] is d_e["keep"]  # moved, never rebuilt
            if i == 0:
                assert_captured(t)
            else:
                assert t.frames_traced == 0, t


def test_an_unread_value_written_across_a_graph_break():
    def f(x, d):
        d["out"] = x * 2
        torch._dynamo.graph_break()
        d["n"] = d["n"] + 1
        return x

    c = tracer.compile(f)
    lst = [0]
    d_e, d_c = {"n": 0, "keep": lst, "out": None}, {"n": 0, "keep": lst, "out": None}
    for _ in range(3):
        x = torch.randn(3)
        with traced() as t:
            c(x, d_c)
        f(x, d_e)
        assert _same(d_c, d_e) and d_c["keep"] is lst
    assert t.graph_breaks == 0 and t.fallbacks == 0, t


def test_a_defaultdict_keeps_its_factory_and_unread_values():
    def f(x, d):
        d["missing"].append(1)
        return x + len(d["a"])

    c = tracer.compile(f)
    for i in range(3):
        d_e = collections.defaultdict(list, a=[1], b=i)
        d_c = collections.defaultdict(list, a=[1], b=i)
        x = torch.randn(3)
        with traced() as t:
            assert torch.equal(c(x, d_c), f(x, d_e))
        assert _same(dict(d_c), dict(d_e)) and d_c.default_factory is list
        assert i == 0 or t.frames_traced == 0, t
