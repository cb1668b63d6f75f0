"""Guard kinds and compiled guard sets: pass on the original values, fail on each change."""

import builtins
import gc
import math
import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from guards import (AttrSource, CellSource, ConstMatch, DictKeysMatch, GlobalSource,
                    GlobalStateMatch, IdMatch, ItemSource, LengthMatch, LocalSource, NoAliasing,
                    Predicate, SameObject, TensorMatch, TypeMatch, compile_guards)

B = builtins.__dict__
x, y = LocalSource("x", 0), LocalSource("y", 1)


def cg(*guards):
    return compile_guards(list(guards), builtins=B)


class Obj:
    pass


# -- constants --------------------------------------------------------------------------
CONSTS = [0, 1, -7, 2**70, True, False, None, Ellipsis, 1.5, 0.0, -0.0, float("nan"),
          float("inf"), "s", "", b"b", 2 + 3j, slice(1, None, 2), torch.float32, torch.int64,
          torch.device("cpu"), torch.Size([2, 3]), (), (1, "a", 2.5), (1, (2, None), 0.0),
          (slice(None), 1)]


@pytest.mark.parametrize("value", CONSTS, ids=repr)
def test_const_match_passes_on_itself(value):
    gs = cg(ConstMatch(x, value))
    assert gs.check((value,), {}, None) is True
    assert gs.failures((value,), {}, None) == []


def _ident(v):
    """What must match for a constant to behave the same: exact types, float sign bits."""
    if type(v) is tuple:
        return (tuple, tuple(_ident(e) for e in v))
    if type(v) is float:
        return (float, repr(v), math.copysign(1.0, v))
    if type(v) is slice:
        return (slice, _ident(v.start), _ident(v.stop), _ident(v.step))
    if type(v) is torch.Size:
        return (torch.Size, tuple(v))
    return (type(v), v)


@pytest.mark.parametrize("a", CONSTS, ids=repr)
def test_const_match_distinguishes_everything(a):
    gs = cg(ConstMatch(x, a))
    for b in CONSTS + [1.0, 1 + 0j, -float("nan"), (1, "a", 2.5, 4), [1, "a", 2.5],
                       torch.device("cpu", 0), (1, (2, None), -0.0), (True, "a", 2.5)]:
        assert gs.check((b,), {}, None) == (_ident(a) == _ident(b)), (a, b)


def test_one_true_onefloat_differ():
    for a, others in [(1, [True, 1.0, 1 + 0j]), (True, [1, 1.0]), (1.0, [1, True])]:
        gs = cg(ConstMatch(x, a))
        assert gs.check((a,), {}, None)
        for o in others:
            assert not gs.check((o,), {}, None)
            assert gs.failures((o,), {}, None) == [f"x == {a!r} ({type(a).__name__})"]


scalars = st.one_of(st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=True),
                    st.sampled_from([0.0, -0.0, 1.0]), st.text(max_size=3),
                    st.binary(max_size=2))
consts = st.recursive(scalars, lambda c: st.tuples(c, c) | st.tuples(c), max_leaves=5)


@settings(max_examples=300, deadline=None)
@given(consts, consts)
def test_const_match_property(a, b):
    gs = cg(ConstMatch(x, a))
    assert gs.check((b,), {}, None) == (_ident(a) == _ident(b))


def test_unsupported_const_rejected():
    for v in ([1], {1: 2}, Obj(), (1, [2])):
        with pytest.raises(TypeError):
            ConstMatch(x, v)


def test_complex_with_zero_parts_keeps_their_signs():
    gs = cg(ConstMatch(x, complex(0, 1)))
    assert gs.check((complex(0, 1),), {}, None)
    assert not gs.check((complex(-0.0, 1),), {}, None) and not gs.check((1j + 1,), {}, None)


def test_dedupe_keeps_distinct_constants():
    gs = cg(ConstMatch(x, 1), ConstMatch(x, 1), ConstMatch(x, True), TypeMatch(x, int),
            TypeMatch(x, int))
    assert len(gs.guards) == 3
    assert not gs.check((1,), {}, None) and not gs.check((True,), {}, None)


# -- type, id, len, dict keys, globals, cells -------------------------------------------
def test_type_match():
    gs = cg(TypeMatch(x, list))
    assert gs.check(([],), {}, None)
    assert not gs.check(((),), {}, None)
    assert not gs.check((type("L", (list,), {})(),), {}, None)
    assert gs.failures(((),), {}, None) == ["type(x) is list"]


def test_id_match_and_expiry():
    o = Obj()
    gs = cg(IdMatch(x, o), IdMatch(y, None))
    assert gs.check((o, None), {}, None)
    assert not gs.check((Obj(), None), {}, None)
    assert not gs.check((o, 0), {}, None)
    assert gs.failures((o, 0), {}, None) == ["y is None"]
    del o
    gc.collect()
    assert gs.expired()
    assert not gs.check((None, None), {}, None)  # dead weakref -> None must not match


def test_length_match():
    gs = cg(LengthMatch(x, 2, list))
    assert gs.check(([1, 2],), {}, None)
    assert not gs.check(([1],), {}, None)
    assert not gs.check(([1, 2, 3],), {}, None)
    assert not gs.check(((1, 2),), {}, None)
    assert gs.failures(([1],), {}, None) == ["len(x) == 2 (list)"]


def test_dict_keys_match():
    gs = cg(DictKeysMatch(x, ("a", 1)))
    assert gs.check(({"a": 0, 1: 0},), {}, None)
    assert not gs.check(({1: 0, "a": 0},), {}, None)  # order
    assert not gs.check(({"a": 0, 1: 0, "b": 0},), {}, None)  # addition
    assert not gs.check(({"a": 0},), {}, None)  # removal
    assert not gs.check(({"a": 0, True: 0},), {}, None)  # 1 vs True key
    assert not gs.check(({"a": 0, 1.0: 0},), {}, None)
    from collections import OrderedDict
    assert not gs.check((OrderedDict([("a", 0), (1, 0)]),), {}, None)
    with pytest.raises(TypeError):
        DictKeysMatch(x, (Obj(),))


def test_global_reassigned():
    g = GlobalSource("scale")
    gs = cg(ConstMatch(g, 2.0))
    assert gs.check((), {"scale": 2.0}, None)
    assert not gs.check((), {"scale": 3.0}, None)
    assert not gs.check((), {}, None)  # deleted global: KeyError -> False
    assert gs.failures((), {"scale": 3.0}, None) == ["G['scale'] == 2.0 (float)"]


def test_closure_cell_changed():
    def outer():
        k = 3
        def inner():
            return k
        return inner
    f = outer()
    c = CellSource("k", 0)
    gs = cg(ConstMatch(c, 3))
    assert gs.check((), {}, f.__closure__)
    f.__closure__[0].cell_contents = 4
    assert not gs.check((), {}, f.__closure__)
    assert not gs.check((), {}, None)
    assert not gs.check((), {}, (types.CellType(),))  # empty cell: ValueError -> False
    assert gs.failures((), {}, f.__closure__) == ["cell(k) == 3 (int)"]


def test_same_object_and_no_aliasing():
    a, b = [1], [1]
    gs = cg(SameObject(x, y))
    assert gs.check((a, a), {}, None) and not gs.check((a, b), {}, None)
    na = cg(NoAliasing([x, y, LocalSource("z", 2)]))
    assert na.check((a, b, 3), {}, None) and not na.check((a, b, a), {}, None)
    assert na.failures((a, a, b), {}, None) == ["x, y, z are distinct objects"]


def test_predicate():
    gs = cg(Predicate(x, lambda v: v > 3, "x > 3"))
    assert gs.check((5,), {}, None) and not gs.check((2,), {}, None)
    assert not gs.check(("s",), {}, None)  # TypeError -> False
    assert gs.failures((2,), {}, None) == ["x: x > 3"]


def test_never_raises():
    gs = cg(TypeMatch(x, int), ConstMatch(AttrSource(LocalSource("q", 5), "a"), 1),
            ConstMatch(CellSource("c", 3), 1), ConstMatch(GlobalSource("g"), 1))
    for args in [((), {}, None), (None, None, None), ((1,), 5, 7), ((1,) * 9, {}, ())]:
        assert gs.check(*args) is False
        assert isinstance(gs.failures(*args), list)


def test_base_guards_run_first():
    calls = []

    class Weird:
        @property
        def a(self):
            calls.append(1)
            return 1

    class Plain:
        a = 1

    src = AttrSource(x, "a")
    gs = cg(ConstMatch(src, 1), TypeMatch(x, Plain))  # given in the "wrong" order
    assert gs.check((Plain(),), {}, None)
    assert not gs.check((Weird(),), {}, None)
    assert gs.failures((Weird(),), {}, None) == [f"type(x) is {Plain.__module__}.{Plain.__qualname__}"]
    assert calls == []  # the property of an unexpected type never ran


# -- global state -----------------------------------------------------------------------
def test_global_state():
    gs = cg(GlobalStateMatch())
    assert gs.check((), {}, None)
    with torch.no_grad():
        assert not gs.check((), {}, None)
        assert "grad_enabled=True" in gs.failures((), {}, None)[0]
    with torch.inference_mode():
        assert not gs.check((), {}, None)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert not gs.check((), {}, None)
    finally:
        torch.set_default_dtype(old)
    with torch.autocast("cpu"):
        assert not gs.check((), {}, None)
        inside = cg(GlobalStateMatch())
        assert inside.check((), {}, None)
    with torch.autocast("cpu", dtype=torch.float16):
        assert not inside.check((), {}, None)
    assert not inside.check((), {}, None)
    torch.use_deterministic_algorithms(True)
    try:
        assert not gs.check((), {}, None)
    finally:
        torch.use_deterministic_algorithms(False)
    assert gs.check((), {}, None)
    with torch.no_grad():
        ng = cg(GlobalStateMatch())
        assert ng.check((), {}, None)
    assert not ng.check((), {}, None)


def test_no_user_eq_runs_in_const_and_keys_checks():
    calls = []

    class Meta(type):
        def __eq__(cls, other):
            calls.append("meta")
            return True
        __hash__ = type.__hash__

    class Sneaky(metaclass=Meta):
        def __eq__(self, other):
            calls.append("eq")
            return True
        __hash__ = object.__hash__

    gs = cg(ConstMatch(x, (1, "a")), DictKeysMatch(y, ("k",)))
    assert not gs.check(((Sneaky(), "a"), {"k": 1}), {}, None)
    assert not gs.check(((1, "a"), {Sneaky(): 1}), {}, None)
    assert gs.check(((1, "a"), {"k": 1}), {}, None)
    assert calls == []
    with pytest.raises(TypeError):
        DictKeysMatch(x, ((1,),))


def test_empty_set_and_source_code_is_one_condition_per_line():
    assert cg().check((), {}, None) is True
    gs = cg(TypeMatch(y, list), DictKeysMatch(x, ("a",)), LengthMatch(y, 1, list))
    conds = [ln for ln in gs.source_code.splitlines() if ln.strip().startswith("if not")]
    assert len(conds) == 4 and all(ln.rstrip().split("#")[0].endswith("return False  ")
                                   or "return False" in ln for ln in conds)
    assert len(gs.describe().splitlines()) == 3


def test_a_type_match_a_dict_keys_match_implies_is_left_out_and_runs_first():
    """DictKeysMatch checks the exact type first: the TypeMatch of the same source and type
    beside it is dropped, and the DictKeysMatch runs where it ran (before what reads through
    the dict). Another type, or another source, is kept. Answers are the same either way."""
    item = ItemSource(x, "a")
    gs = cg(ConstMatch(item, 3), DictKeysMatch(x, ("a",)), TypeMatch(x, dict), TypeMatch(y, list))
    kinds = [type(g).__name__ for g in gs.guards]
    assert kinds == ["DictKeysMatch", "TypeMatch", "ConstMatch"], kinds
    assert gs.guards[1].source == y
    for L, want in [(({"a": 3}, []), True), (({"a": 4}, []), False), (({"b": 3}, []), False),
                    (({"a": 3}, ()), False), ((Obj(), []), False), ((type("D", (dict,), {})(a=3), []), False)]:
        assert gs.check(L, {}, None) is want and gs.full_check(L, {}, None) is want, L
    kept = cg(DictKeysMatch(x, ("a",)), TypeMatch(x, Obj))
    assert [type(g).__name__ for g in kept.guards] == ["TypeMatch", "DictKeysMatch"]
    assert not kept.check(({"a": 1},), {}, None)
