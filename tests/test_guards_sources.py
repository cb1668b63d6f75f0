"""Sources: names, guard expressions, bytecode reconstruction, and rule 6 (hostile strings)."""

import builtins
import types

import bytecode
import pytest
from bytecode import Instr

from guards import (AttrSource, BuiltinSource, CellSource, ConstMatch, ConstSource,
                    DictKeysMatch, GlobalSource, ItemSource, LocalSource, TypeMatch, TypeSource,
                    compile_guards, is_from_global, is_from_local)
from guards.codegen import ExprContext

BUILTINS = builtins.__dict__


class Obj:
    pass


def eval_guard_expr(src, L, G, C):
    ctx = ExprContext(BUILTINS)
    fn, _ = ctx.compile("check_get", [f"return {src.guard_expr(ctx)}"])
    return fn(L, G, C)


def eval_reconstruct(src, argnames, L, G, closure, freevars):
    instrs = []
    if freevars:
        instrs.append(Instr("COPY_FREE_VARS", len(freevars)))
    instrs.append(Instr("RESUME", 0))
    instrs += src.reconstruct() + [Instr("RETURN_VALUE")]
    bc = bytecode.Bytecode(instrs)
    bc.argnames = list(argnames)
    bc.argcount = len(argnames)
    bc.freevars = list(freevars)
    bc.name = "recon"
    code = bc.to_code()
    fn = types.FunctionType(code, G, "recon", None, closure)
    return fn(*L)


def make_world():
    o = Obj()
    o.weight = [10, 20, 30]
    setattr(o, "odd name", {"k": 5})
    cfg = {"k": (7, 8), 3: "three"}
    G = {"w": 2.5, "cfg": cfg, "len": len}
    L = (o, [1, 2], {"a": 1})
    C = (types.CellType(42), types.CellType(o))
    return L, G, C


x, lst, d = LocalSource("x", 0), LocalSource("lst", 1), LocalSource("d", 2)
SOURCES = [
    x, lst, GlobalSource("w"), BuiltinSource("len"), CellSource("z", 0), CellSource("o", 1),
    AttrSource(x, "weight"), ItemSource(AttrSource(x, "weight"), 2), ItemSource(lst, -1),
    ItemSource(d, "a"), ItemSource(GlobalSource("cfg"), 3),
    ItemSource(ItemSource(GlobalSource("cfg"), "k"), 1),
    ItemSource(AttrSource(x, "odd name"), "k"), TypeSource(x), TypeSource(ItemSource(lst, 0)),
    AttrSource(CellSource("o", 1), "weight"), ConstSource((1, "a")),
]


@pytest.mark.parametrize("src", SOURCES, ids=lambda s: s.name())
def test_reconstruct_matches_guard_expr(src):
    L, G, C = make_world()
    G2 = dict(G)
    del G2["len"]  # BuiltinSource must fall through to builtins in bytecode
    expected = eval_guard_expr(src, L, G, C)
    got = eval_reconstruct(src, ["x", "lst", "d"], L, G2, C, ["z", "o"])
    assert got is expected or got == expected


def test_names():
    assert x.name() == "x"
    assert GlobalSource("w").name() == "G['w']"
    assert AttrSource(x, "weight").name() == "x.weight"
    assert ItemSource(AttrSource(x, "weight"), 0).name() == "x.weight[0]"
    assert ItemSource(x, "k").name() == "x['k']"
    assert CellSource("z", 0).name() == "cell(z)"
    assert TypeSource(x).name() == "type(x)"
    assert AttrSource(x, "a b").name() == "getattr(x, 'a b')"


def test_roots_depth_and_equality():
    s = ItemSource(AttrSource(x, "weight"), 0)
    assert s.base_root() == x and s.depth() == 2 and s.ancestors() == [AttrSource(x, "weight"), x]
    assert is_from_local(s) and not is_from_global(s)
    assert is_from_global(AttrSource(GlobalSource("m"), "a"))
    assert ItemSource(x, 1) != ItemSource(x, True) != ItemSource(x, 1.0)
    assert ItemSource(x, 1) == ItemSource(x, 1) and hash(ItemSource(x, 1)) == hash(ItemSource(x, 1))
    assert ConstSource(1) != ConstSource(True)
    assert len({AttrSource(x, "a"), AttrSource(x, "a"), AttrSource(x, "b")}) == 2


def test_guard_expr_uses_bound_constants():
    ctx = ExprContext(BUILTINS)
    assert AttrSource(x, "weight").guard_expr(ctx) == "getattr(L[0], _k0)"
    assert GlobalSource("w").guard_expr(ctx) == "G[_k1]"
    assert ctx.namespace["_k0"] == "weight" and ctx.namespace["_k1"] == "w"


HOSTILE = [
    "__import__('builtins').__setattr__('PWNED', 1)",
    "a'b\"c",
    "x\nimport builtins; builtins.PWNED = 2\n",
    "'); builtins.PWNED = 3 #",
    "\\",
    "\r\n# \u2028 \x00",
    "{}}{",
]


@pytest.mark.parametrize("s", HOSTILE)
def test_hostile_strings_are_data_only(s):
    o = Obj()
    setattr(o, s, 3)
    dct = {s: 4, "plain": 5}
    G = {s: 6}
    src_a = AttrSource(LocalSource("o", 0), s)
    src_k = ItemSource(LocalSource("dct", 1), s)
    src_g = GlobalSource(s)
    gs = compile_guards([
        TypeMatch(LocalSource("o", 0), Obj), TypeMatch(LocalSource("dct", 1), dict),
        ConstMatch(src_a, 3), ConstMatch(src_k, 4), ConstMatch(src_g, 6), ConstMatch(src_g, 6),
        DictKeysMatch(LocalSource("dct", 1), (s, "plain")),
        ConstMatch(ItemSource(LocalSource("dct", 1), "plain"), 5),
    ], builtins=BUILTINS)
    assert s not in gs.source_code
    assert gs.check((o, dct), G, None) is True
    assert gs.failures((o, dct), G, None) == []
    assert gs.check((o, dct), {s: 7}, None) is False
    assert gs.check((o, {"plain": 5, s: 4}), G, None) is False  # key order
    setattr(o, s, 8)
    assert gs.check((o, dct), G, None) is False
    assert len(gs.failures((o, dct), G, None)) == 1
    assert not hasattr(builtins, "PWNED")
    assert eval_reconstruct(src_a, ["o"], (o,), {}, None, []) == 8


@pytest.mark.parametrize("body,ok", [
    ("return (L[0] is _k0) and (len(L[1]) == 3) and (_v0 == 1.5e3)", True),
    ("return getattr(G[_k1], _k2).cell_contents is _k3", True),
    ("return L[0] == 'x'", False),              # a string literal
    ('return L[0] == "x"', False),
    ("return True  # a 'quoted' comment", False),
    ("return True  # a comment\\nreturn L", False),
    ("return True  # [0] TypeMatch", True),
    ("return __import__ is None", False),         # a name we never generate
    ("return L[0].__class__ is _k0", False),      # an attribute we never generate
])
def test_generated_text_check(body, ok):
    """Rule 6's defence in depth: generated guard text holds only our own identifiers."""
    ctx = ExprContext(BUILTINS)
    if ok:
        fn, _ = ctx.compile("check_t", [body])
        assert callable(fn)
    else:
        with pytest.raises(AssertionError):
            ctx.compile("check_t", [body])
