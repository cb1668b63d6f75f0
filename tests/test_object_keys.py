"""Tensors (and other objects compared by identity) as dict keys and set members.

- A dict input keyed by the model's parameters (an optimizer's state, an EMA table) is read
  by key through the key's own source (guards.sources.KeyedItemSource): the entry holds no
  parameter, and serves another model whose table is keyed by its own parameters.
- A set made in the frame may hold tensors and modules (`seen = set(); if p not in seen`):
  add, remove, `in`, `len` are traced; the order, which is by address, is never guessed
  (iterating such a set is a break) and the rebuilt set replays the same steps on the same
  objects."""
import collections
import enum

import pytest
import torch
from torch import nn

import tracer
from helpers import assert_captured, traced
from semantics_helpers import check, run, same


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def sgd_momentum(model, state, lr):
    """An optimizer step keyed by parameters, as torch.optim keeps its state."""
    for p in model.parameters():
        st = state[p]
        if "buf" not in st:
            st["buf"] = torch.zeros_like(p)
            st["step"] = torch.zeros(())  # (a tensor, as torch.optim keeps it: an int would be
            # specialised, one trace per value until it turns symbolic)
        st["buf"].mul_(0.9).add_(p.detach() * 0.1)
        st["step"] += 1
        p.data.add_(st["buf"], alpha=-lr)
    return len(state)


def _model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def test_an_optimizer_state_keyed_by_parameters_is_captured_and_shared_by_instances():
    c = tracer.compile(sgd_momentum)
    models = [_model(0), _model(1)]
    ref_models = [_model(0), _model(1)]
    states = [collections.defaultdict(dict) for _ in models]
    ref_states = [collections.defaultdict(dict) for _ in models]
    with traced() as t:
        for step in range(4):
            for m, s, rm, rs in zip(models, states, ref_models, ref_states):
                assert c(m, s, 0.1) == sgd_momentum(rm, rs, 0.1)
    for m, rm in zip(models, ref_models):
        for p, q in zip(m.parameters(), rm.parameters()):
            assert torch.equal(p, q)
    for s, rs in zip(states, ref_states):
        assert [v["step"].item() for v in s.values()] == [v["step"].item() for v in rs.values()] == [4] * 4
    # the first step (empty state) and the later ones (state keyed by parameters): two entries,
    # shared by both models
    assert t.frames_traced == 2 and t.fallbacks == 0 and t.graph_breaks == 0, t
    assert t.internal_errors == 0


def test_a_removed_key_is_seen_on_the_next_call():
    ema = {}

    def update(model, x):
        out = model(x)
        for p in model.parameters():
            if p in ema:
                ema[p] = ema[p] * 0.5 + p.detach() * 0.5
            else:
                ema[p] = p.detach().clone()
        return out, ema.get(model[0].weight) is not None

    m = _model(2)
    c = tracer.compile(update)
    x = torch.randn(2, 3)
    c(m, x)
    first = {id(k): v.clone() for k, v in ema.items()}
    out, has = c(m, x)
    assert has and torch.equal(ema[m[0].weight], first[id(m[0].weight)])
    del ema[m[0].weight]  # absent again: the presence guard fails, the entry for it is used
    out, has = c(m, x)
    assert has and torch.equal(ema[m[0].weight], m[0].weight.detach())
    assert same(out, m(x))


def test_get_and_setdefault_by_a_tensor_key():
    w, b = torch.ones(2), torch.zeros(2)
    table = {w: 3.0}

    def f(x, a, c):
        scale = table.get(a, 1.0) + table.get(c, 10.0)
        table.setdefault(c, 7.0)
        return x * scale, table[c], len(table)

    c_fn = tracer.compile(f)
    with traced() as t:
        out = c_fn(torch.ones(2), w, b)
    assert_captured(t, graphs=1)
    assert same(out, (torch.ones(2) * 13.0, 7.0, 2))
    assert table == {w: 3.0, b: 7.0} and list(table) == [w, b]


def test_a_set_deduplicating_parameters():
    shared = nn.Linear(3, 3)
    model = nn.ModuleList([shared, nn.Linear(3, 3), shared])

    def f(x):
        seen = set()
        total = x
        for layer in model:
            for p in layer.parameters():
                if p not in seen:
                    seen.add(p)
                    total = total + p.sum()
        return total, len(seen), model[0].weight in seen, bool(seen)

    check(f, torch.ones(3), graphs=1, dynamo=True)


def test_a_set_of_tensors_rebuilt_where_it_leaves_the_frame():
    def f(x, y, z):
        s = {x, y}
        s.add(z)
        s.discard(y)
        s.add(x * 2)
        return s, len(s)

    x, y, z = torch.ones(2), torch.zeros(2), torch.full((2,), 3.0)
    c = tracer.compile(f)
    with traced() as t:
        out, n = c(x, y, z)
    assert_captured(t, graphs=1)
    ref, n_ref = f(x, y, z)
    assert n == n_ref == 3
    assert x in out and z in out and y not in out
    made = [t for t in out if t is not x and t is not z]
    assert len(made) == 1 and torch.equal(made[0], x * 2)


def test_iterating_a_set_of_tensors_is_a_break_with_eagers_answer():
    def f(x, y):
        s = {x, y}
        total = 0
        for t in s:  # the order is by address
            total = total + t.sum()
        return total * 2

    c = tracer.compile(f)
    x, y = torch.ones(2), torch.full((2,), 2.0)
    _, d = run(c, f, x, y)
    assert d.breaks + d.fallbacks >= 1
    assert any("order of their addresses" in r for r in d.break_reasons + d.fallback_reasons), d


def test_a_set_of_tensors_made_from_another():
    def f(x, y):
        y2 = x.add_(1)  # the same object as x
        s = set({x})
        s.add(y2)
        s.add(y)
        t = set(s)
        t.discard(y)
        return len(s), len(t), x in t, y in t, t

    c = tracer.compile(f)
    a, b = torch.ones(2), torch.zeros(2)
    with traced() as tr:
        n_s, n_t, x_in, y_in, t = c(a, b)
    assert_captured(tr, graphs=1)
    assert (n_s, n_t, x_in, y_in) == (2, 1, True, False)
    assert len(t) == 1 and next(iter(t)) is a


def test_fromkeys_value_by_keyword():
    def f(x, y):
        d3 = collections.OrderedDict.fromkeys(("a", "b"), value=y)
        return x + d3["a"] + d3["b"]

    check(f, torch.ones(2), torch.zeros(2), graphs=1, dynamo=True)


def test_a_size_as_a_dict_key():
    def fn(x, cached):
        if x.shape not in cached:
            cached[x.shape] = x
        return x + cached[x.shape]

    c = tracer.compile(fn, fullgraph=True)
    cached, ref = {}, {}
    with traced() as t:
        for x in [torch.ones(2, 3), torch.full((2, 3), 2.0), torch.ones(3, 3), torch.ones(2, 3),
                  torch.full((3, 3), 5.0)]:
            assert torch.equal(c(x, cached), fn(x, ref))
    assert list(cached) == list(ref) == [torch.Size([2, 3]), torch.Size([3, 3])]
    assert t.fallbacks == 0 and t.internal_errors == 0, t


_REG = {}


class _Registered(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        _REG[id(self)] = float(scale)

    def forward(self, x):
        return self.fc(x) * _REG[id(self)]


class _RegisteredStack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Registered(i + 1) for i in range(4)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_id_of_a_module_or_object_read_by_the_frame_is_a_guarded_constant():
    """`REG[id(self)]` (a registry keyed by object ids): id() of a traced value was a graph
    break (torch.compile: 1 graph). The id of an object the frame reads from somewhere is
    a constant pinned by an identity guard: another instance is another entry, and repeated
    blocks read their own registry values."""
    x = torch.randn(2, 4)
    with traced() as t:
        for m in (_Registered(3), _Registered(5), _RegisteredStack()):
            c = tracer.compile(m)
            for _ in range(2):
                torch.testing.assert_close(c(x), m(x))
    assert_captured(t, breaks=0)
    assert t.recompiles == 1  # (the second _Registered: its own id)


class _StrMode(str, enum.Enum):
    GREEDY = "greedy"
    SAMPLE = "sample"


class _IntMode(enum.IntEnum):
    ONE = 1
    TWO = 2


_BY_SIZE = {(8, 8): 0.5, (16, 16): 0.25}
_BY_STR_MODE = {_StrMode.GREEDY: 2.0, _StrMode.SAMPLE: 3.0}
_BY_INT_MODE = {_IntMode.ONE: 5.0, _IntMode.TWO: 7.0}


def test_a_global_dict_keyed_by_tuples_or_str_and_int_enum_members_is_read_by_key():
    """Keys a keys guard cannot compare without merging unequal values ((1,) == (True,)) or
    running a class's own comparison: the whole frame ran as Python ("dict input with keys
    that cannot be guarded"), transformers' generate() among them (its modes table is keyed
    by a str Enum). Such a dict is now read by key, each read guarded by what it found."""
    def by_size(x):
        return x * _BY_SIZE[tuple(x.shape[-2:])]

    def by_modes(x, s, i):
        return x * _BY_STR_MODE[s] + _BY_INT_MODE[i]

    c1, c2 = tracer.compile(by_size), tracer.compile(by_modes)
    with traced() as t:
        for n in (8, 8):
            x = torch.randn(1, n, n)
            torch.testing.assert_close(c1(x), by_size(x))
        x = torch.randn(3)
        for s, i in ((_StrMode.GREEDY, _IntMode.ONE), (_StrMode.GREEDY, _IntMode.ONE),
                     (_StrMode.SAMPLE, _IntMode.TWO), ("greedy", 1)):
            torch.testing.assert_close(c2(x, s, i), by_modes(x, s, i))
    assert t.fallbacks == 0 and t.graph_breaks == 0 and t.internal_errors == 0, t
    assert t.graphs == 4, t  # (by_size once; by_modes per pair of keys read)


class _Mode(enum.Enum):
    TRAIN = 1
    EVAL = 2


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


_SCALES = {_Mode.TRAIN: 3.0, _Mode.EVAL: 0.25}


def _scale_by_mode(x, mode):
    scale = {_Mode.TRAIN: 2.0, _Mode.EVAL: 0.5}
    return x * scale[mode], {mode: 1}.get(_Mode.TRAIN, 5), mode in {_Mode.EVAL}, _SCALES[mode]


def test_enum_members_as_dict_keys_and_set_members():
    """A plain Enum compares by identity and hashes by its member's name: as a key of a dict or
    set made in the frame, or of a dict input, it is found exactly when the same member is
    used. Enum members were held opaque and refused as keys ('dict key / set member
    Opaque(<_Mode.TRAIN: 1>) is not a constant'): the whole frame ran as Python (torch.compile:
    one graph). Called with the other member, the guards take the other entry."""
    x = torch.ones(2)
    c, _ = check(_scale_by_mode, x, _Mode.TRAIN)
    with traced() as t:
        out, d = run(c, _scale_by_mode, x, _Mode.EVAL)
    assert out[1:] == (5, True, 0.25) and torch.equal(out[0], x * 0.5)
    assert_captured(t, recompiles=1)


def test_an_int_enum_key_finds_the_int():
    """An IntEnum member equals its int (int's == and hash): `{1: 2.0}[_Level.LOW]` finds 1,
    and `{_Level.LOW: 'a'}.get(1)` finds the member's key, as in eager."""
    def f(x, level):
        return x * {1: 2.0, 2: 3.0}[level], {_Level.LOW: "a"}.get(1), level in {2}, {level: 1}.get(1, 0)

    x = torch.ones(2)
    c, _ = check(f, x, _Level.LOW)
    out, d = run(c, f, x, _Level.HIGH)
    assert out[1:] == ("a", True, 0) and d.fallbacks == 0 and d.graphs == 1


class _LooseMode(enum.Enum):
    A = 1
    B = 2

    def __eq__(self, other):  # user code the lookup would run: not keyed by identity
        return self.value == getattr(other, "value", other)

    __hash__ = enum.Enum.__hash__


def test_an_enum_with_its_own_eq_is_not_keyed_by_identity():
    """An Enum whose class defines __eq__ runs user code on lookup: never an identity key (a
    break or a fallback with a reason, eager's answer either way)."""
    def f(x, m):
        return x + 1, {m: 1}.get(_LooseMode.A, 0)

    c = tracer.compile(f)
    out, d = run(c, f, torch.ones(2), _LooseMode.A)
    assert out[1] == 1
    assert d.breaks + d.fallbacks >= 1
    assert any("__eq__" in r or "not a constant" in r for r in d.break_reasons + d.fallback_reasons)
