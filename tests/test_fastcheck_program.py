"""guards._fastcheck.Program on its own (no torch, no tracer): a snapshot through an
object's instance __dict__ must notice every way the attribute it relies on can change.
This is the test that keeps the C check off CPython 3.13 (see guards/fastpath.py): run it
there with `python -m pytest tests/test_fastcheck_program.py` after building the extension."""
import sys
import weakref

import pytest

fc = pytest.importorskip("guards._fastcheck")


class Obj:
    pass


def make():
    o = Obj()
    o.x, o.y = 5, 1
    ref = weakref.ref(o)

    def full(L, G, C):
        try:
            return L[0] is ref() is not None and type(L[0].x) is int and L[0].x == 5
        except Exception:  # noqa: BLE001 - the generated check's own rule
            return False

    def slow(L, G, C):  # GuardSet._slow_check, for these two guards
        tok = prog.capture(L, G, C)
        ok = full(L, G, C)
        if tok:
            frozen = {0, 1} - prog.active_guards()
            facts = {0: lambda: L[0] is ref(), 1: lambda: type(L[0].x) is int and L[0].x == 5}
            prog.commit(L, G, C, ok or all(facts[i]() for i in frozen), tok)
        return ok

    nodes = [(fc.N_LOCAL, -1, 0, None), (fc.N_ATTR, 0, 0, "x")]
    ops = [(fc.O_ID, 0, (0,), ref, None, None, 1, (0,)), (fc.O_EQ, 0, (1,), int, 5, None, 0, (1,))]
    prog = fc.Program(full, slow, nodes, ops)
    return o, prog, full


CHANGES = [
    ("unrelated attribute", lambda o: setattr(o, "y", 2)),
    ("attribute store", lambda o: setattr(o, "x", 6)),
    ("restore", lambda o: setattr(o, "x", 5)),
    ("store through __dict__", lambda o: o.__dict__.__setitem__("x", 7)),
    ("restore", lambda o: setattr(o, "x", 5)),
    ("delete", lambda o: delattr(o, "x")),
    ("restore", lambda o: setattr(o, "x", 5)),
    ("replace __dict__", lambda o: setattr(o, "__dict__", {"x": 8})),
    ("restore", lambda o: setattr(o, "x", 5)),
    ("class property", lambda o: setattr(Obj, "x", property(lambda s: 9))),
]


@pytest.mark.skipif(sys.version_info[:2] >= (3, 13), reason="known to fail on 3.13.0: see guards/fastpath.py")
def test_snapshot_through_instance_dict_sees_every_change():
    o, prog, full = make()
    L = (o,)
    try:
        assert prog(L, {}, None) and prog(L, {}, None)
        assert prog.stats()["state"] == "positive" and prog.stats()["active_ops"] == 0
        for name, change in CHANGES:
            change(o)
            for _ in range(2):  # the slow path, then the fast one
                assert prog(L, {}, None) is full(L, {}, None), name
    finally:
        if "x" in Obj.__dict__:
            del Obj.x
