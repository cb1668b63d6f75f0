"""TensorMatch (batched into one TensorGuards) and no-keep-alive."""

import builtins
import gc
import weakref

import torch

from guards import (AttrSource, IdMatch, LocalSource, NoAliasing, TensorMatch,
                    TypeMatch, compile_guards)

B = builtins.__dict__
x, y = LocalSource("x", 0), LocalSource("y", 1)


def cg(*guards):
    return compile_guards(list(guards), builtins=B)


def test_tensor_match_changes():
    a = torch.randn(3, 4)
    gs = cg(TensorMatch(x, a))
    assert "TensorMatch batch" in gs.source_code
    assert gs.check((a,), {}, None)
    assert gs.check((torch.zeros(3, 4),), {}, None)
    changed = [
        torch.randn(3, 5), torch.randn(4, 3), torch.randn(3, 4, 1),
        torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4).requires_grad_(),
        torch.randn(4, 3).t(),  # same shape, other strides
        torch.nn.Parameter(torch.randn(3, 4), requires_grad=False),  # other Python type
        torch.randn(3, 4, dtype=torch.complex64).conj().real,  # other dtype anyway
        torch.randn(3, 4).to_sparse(),  # other layout / dispatch keys
        [1, 2], 3.0, None,
    ]
    for v in changed:
        assert not gs.check((v,), {}, None), v
        fails = gs.failures((v,), {}, None)
        assert len(fails) == 1 and fails[0].startswith("x: tensor float32 cpu shape (3, 4)")


def test_tensor_dispatch_keys():
    c = torch.randn(2, dtype=torch.complex64)
    gs = cg(TensorMatch(x, c))
    assert gs.check((torch.randn(2, dtype=torch.complex64),), {}, None)
    assert not gs.check((c.conj(),), {}, None)  # conj bit is a dispatch key


def test_tensor_batch_and_reason():
    a, b = torch.randn(2, 3), torch.randn(5, requires_grad=True)
    gs = cg(TensorMatch(x, a), TensorMatch(y, b), NoAliasing([x, y]))
    assert gs.source_code.count("TensorMatch batch") == 1
    assert gs.check((a, b), {}, None)
    assert not gs.check((a, torch.randn(5)), {}, None)
    assert not gs.check((a, a), {}, None)
    f = gs.failures((a, torch.randn(5)), {}, None)
    assert len(f) == 1 and f[0].startswith("y: tensor float32 cpu shape (5,)")
    assert "requires_grad" in f[0]
    f = gs.failures((torch.randn(2, 3, dtype=torch.float16), b), {}, None)
    assert len(f) == 1 and "dtype" in f[0]
    assert gs.describe().splitlines()[0].startswith("[0] x: tensor float32 cpu shape (2, 3)")


def test_nested_tensor_source_after_base_guard():
    class M:
        pass

    m = M()
    m.w = torch.randn(2)
    ms = LocalSource("m", 0)
    gs = cg(TensorMatch(AttrSource(ms, "w"), m.w), IdMatch(ms, m))
    lines = gs.source_code.splitlines()
    id_line = next(i for i, ln in enumerate(lines) if "IdMatch" in ln)
    tg_line = next(i for i, ln in enumerate(lines) if "TensorMatch" in ln)
    assert id_line < tg_line
    assert gs.check((m,), {}, None)
    m.w = torch.randn(3)
    assert not gs.check((m,), {}, None)


def test_dead_example_falls_back_to_single_checks():
    g = TensorMatch(x, torch.randn(2, 2))  # example dies at once
    gs = cg(g)
    assert "TensorMatch batch" not in gs.source_code
    assert gs.check((torch.randn(2, 2),), {}, None)
    assert not gs.check((torch.randn(2, 3),), {}, None)


def test_a_built_guard_set_holds_no_weakref_to_its_examples():
    """The examples' weakrefs serve only the set's build (the batch): kept after it, they made
    `torch.utils.swap_tensors` refuse every tensor a compiled call had guarded. The set still
    batches its tensors and checks what it checked."""
    t = torch.randn(2, 2)
    gs = cg(TensorMatch(x, t))
    assert "TensorMatch batch" in gs.source_code
    assert weakref.getweakrefcount(t) == 0
    torch.utils.swap_tensors(t, torch.zeros(2, 3))
    assert not gs.check((t,), {}, None)
    assert gs.check((torch.zeros(2, 2),), {}, None)


def test_guards_do_not_keep_objects_alive():
    class Thing:
        pass

    t = torch.randn(4, 4)
    o = Thing()
    rt, ro = weakref.ref(t), weakref.ref(o)
    guards = [TensorMatch(x, t), IdMatch(y, o), TypeMatch(y, Thing)]
    gs = compile_guards(guards, builtins=B)
    assert gs.check((t, o), {}, None)
    del t, o
    gc.collect()
    assert rt() is None and ro() is None
    assert not gs.check((torch.randn(4, 4), Thing()), {}, None)
    assert gs.check((torch.randn(4, 4), None), {}, None) is False


# (The batched check's per-call cost is measured in benchmarks/micro.py, not here.)
