"""The disk cache's codec (tracer/persist/portable.py) and guard writer (guards_io.py), in one
process: what can be described is read back as the very object (or an exactly equal value),
through marshal; what cannot is Unportable with a reason, never a wrong description."""
import builtins
import collections
import enum
import marshal
import operator
import sys
import types

import numpy as np
import pytest
import torch

import tracer
from guards import (AttrSource, ComputedNumberSource, ConstSource, LocalSource, ShapeMatch, TensorPropSource,
                    TypeMatch, compile_guards)
from guards.guard import Predicate
from tracer.persist import guards_io
from tracer.persist.portable import Reader, Unportable, Writer, code_key, portable_filename
from tracer.trace.handlers.exceptions import GradRestore
from tracer.variables.iterator_inputs import IterRestSource


class Color(enum.Enum):
    RED = 1


def _round_trip(obj):
    w = Writer()
    desc = marshal.loads(marshal.dumps(w.write(obj)))
    return Reader().read(desc), w


@pytest.mark.parametrize("obj", [
    torch.nn.functional.relu, torch.add, torch.float16, torch.channels_last, torch.strided,
    torch.ops.aten.add.Tensor, torch.ops.aten.mm, collections.OrderedDict.__setitem__, dict.__new__,
    dict.fromkeys, print, len, torch.nn.Linear, torch.nn.Linear.forward, Color.RED, torch.manual_seed,
    types.MethodType, types.GeneratorType, type(iter(range(3))), type({}.items()), types.TracebackType,
    vars(collections), collections,
], ids=repr)
def test_named_objects_come_back_as_themselves(obj):
    back, _ = _round_trip(obj)
    # (a builtin bound to a class, dict.fromkeys, is a new equal object at every read)
    assert back is obj or (type(back) is types.BuiltinMethodType and back == obj)


@pytest.mark.parametrize("value", [
    (1, 2.5, "a", None, True), [1, [2, (3,)]], {"a": 1, 2: (3, 4)}, frozenset({1, 2}), slice(1, None, 2), Ellipsis,
    -0.0, float("nan"), 1 + 2j, b"xy", torch.Size([2, 3]), torch.device("cpu"), np.float64(0.25), np.int32(7),
], ids=repr)
def test_values_come_back_exactly_equal(value):
    back, _ = _round_trip(value)
    assert type(back) is type(value)
    if isinstance(value, float) and value != value:
        assert back != back
    else:
        assert back == value or repr(back) == repr(value)


def test_bound_method_of_a_described_object():
    back, _ = _round_trip(GradRestore(True).__exit__)
    assert isinstance(back, types.MethodType) and back.__func__ is GradRestore.__exit__ and back.__self__.prev is True


def test_what_has_no_name_is_unportable_with_a_reason():
    def local():
        pass

    class Local:
        pass
    for obj in (local, Local, Local(), lambda: 0, object(), torch.randn(2)):
        with pytest.raises(Unportable) as e:
            Writer().write(obj)
        assert str(e.value)


def test_code_objects_keep_their_constants_and_key():
    def f(x, k=3):
        return [x * k for _ in range(2)], {"a": frozenset({1, 2})}
    back, _ = _round_trip(f.__code__)
    assert back == f.__code__ and code_key(back) == code_key(f.__code__)


def test_deps_name_the_modules_a_description_reads():
    _, w = _round_trip(np.linalg.norm)
    assert any(d.startswith("numpy") for d in w.deps)


def test_portable_filename_is_relative_to_its_sys_path_entry():
    import transformers
    name = portable_filename(transformers.__file__)
    assert name == "transformers/__init__.py"
    assert portable_filename("/nowhere/x.py") == "/nowhere/x.py"


def test_guards_of_every_source_kind_round_trip():
    """A plain Source class (IterRestSource sets its attribute in __init__) and a dataclass one,
    inside guards written and read back: same description, same key."""
    L = ([1, 2, 3], torch.nn.Linear(2, 2))
    src = IterRestSource(LocalSource("it", 0))
    guards = [TypeMatch(src, tuple), TypeMatch(AttrSource(LocalSource("m", 1), "weight"), torch.nn.Parameter),
              Predicate.made(ConstSource(collections), _has, ("OrderedDict",), "has OrderedDict")]
    frame = guards_io.FrameValues(L, {}, None, {})
    w = Writer()
    descs = marshal.loads(marshal.dumps(tuple(guards_io._write_guard(w, g, frame) for g in guards)))
    back = [guards_io._read_guard(Reader(), d, frame, []) for d in descs]
    assert [g.describe() for g in back] == [g.describe() for g in guards]
    assert [g._key() for g in back[:2]] == [g._key() for g in guards[:2]]  # (a kind-less check: by id)
    assert back[2].fn(collections) and not back[2].fn(types)


def _has(name):
    return lambda m: hasattr(m, name)


def test_a_guard_on_a_computed_number_round_trips():
    """A ShapeMatch over a float computed from sizes (ComputedNumberSource: a function and
    operand expressions) is written as plain values and reads back with the same check."""
    n = TensorPropSource(LocalSource("x", 0), "size", 0)
    c = ComputedNumberSource(operator.truediv, ["_z0", "(_z0 * 3) / 2"], [n])
    g = ShapeMatch("math.trunc(_z0 * 4.0 * _z1) == 10", [c, n])
    frame = guards_io.FrameValues((torch.randn(5),), {}, None, {})
    desc = marshal.loads(marshal.dumps(guards_io._write_guard(Writer(), g, frame)))
    back = guards_io._read_guard(Reader(), desc, frame, [])
    assert back.describe() == g.describe() and back._key() == g._key()
    checks = [compile_guards([x], builtins={}).check for x in (g, back)]
    assert [[ck((torch.randn(size),), {}, None) for size in (3, 4, 5)] for ck in checks] == [[False, True, False]] * 2


def test_a_name_that_finds_other_code_is_stale():
    """A function is written by its name and its code: a name that finds other code in the
    reading process (monkeypatched, or defined under an environment switch) is Stale."""
    from tracer.persist.portable import Stale
    import json
    desc = marshal.loads(marshal.dumps(Writer().write(json.dumps)))
    original = json.dumps
    try:
        json.dumps = lambda *a, **k: "patched"
        with pytest.raises(Stale, match="not the code the entry was traced with"):
            Reader().read(desc)
    finally:
        json.dumps = original
    assert Reader().read(desc) is json.dumps


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
        self.b.weight = self.a.weight  # one tensor under two sources: an aliased TensorMatch

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) * 2


def test_a_guard_set_reads_back_in_its_written_order_with_the_same_check():
    """The reader compiles the written order as it is (no second ordering or deduplication):
    the same guards, split and generated text, tied weights' guard included; it passes on the
    call it was traced from and another instance, and fails where the weights are not tied."""
    from tracer.runtime import cache
    tracer.reset()
    model, x = _Tied(), torch.randn(2, 4)
    compiled = tracer.compile(model, backend="eager")
    assert torch.equal(compiled(x), model(x))
    [entry] = [e for c, cc in cache._CACHES.items() if c is _Tied.forward.__code__ for e in cc.entries]
    gs = entry.guards
    assert any(type(g).__name__ == "SameObject" for g in gs.guards)
    L, G = (model, x), vars(sys.modules[__name__])  # (the frame's locals by position)
    frame = guards_io.FrameValues(L, G, None, vars(builtins))
    w = Writer()
    descs = marshal.loads(marshal.dumps(guards_io.write_guards(w, gs, frame)))
    groups = marshal.loads(marshal.dumps(guards_io.write_groups(w, gs)))
    back = guards_io.read_guards(Reader(), descs, frame, vars(builtins), gs.split, groups)
    assert back.describe() == gs.describe() and back.split == gs.split and set(back.groups) == set(gs.groups)
    assert back.source_code == gs.source_code
    assert back(L, G, None) and gs(L, G, None)
    assert back((_Tied(), x), G, None)  # another instance: modules are guarded by structure
    untied = _Tied()
    untied.b.weight = torch.nn.Parameter(torch.randn(4, 4))
    assert not back((untied, x), G, None) and not gs((untied, x), G, None)
    tracer.reset()


def _round_trip_set(gs, L, G):
    """A compiled entry's guard set written and read back as the disk cache does."""
    frame = guards_io.FrameValues(L, G, None, vars(builtins))
    w = Writer()
    descs = marshal.loads(marshal.dumps(guards_io.write_guards(w, gs, frame)))
    return guards_io.read_guards(Reader(), descs, frame, vars(builtins), gs.split)


def _scaled_by_offset(x):
    return x * x.storage_offset()


def test_a_tensor_fact_guard_reads_back_with_the_same_check():
    """The warm start writes a TensorFact (an offset the trace read) as its fields: read back,
    it says the same and answers the same, on the traced offset (pass) and another (fail)."""
    tracer.reset()
    c = tracer.compile(_scaled_by_offset)
    t = torch.arange(8.)
    c(t[2:5])
    [entry] = c.entries
    G = vars(sys.modules[__name__])
    back = _round_trip_set(entry.guards, (t[2:5],), G)
    assert back.describe() == entry.guards.describe() and "x.storage_offset() == 2" in back.describe()
    for x, ok in [(torch.ones(7)[2:5], True), (t[3:6], False), (torch.zeros(3), False)]:
        assert back((x,), G, None) == ok and entry.guards((x,), G, None) == ok, x
    tracer.reset()


def _write_then_add(x, y):
    x.add_(1)
    return x + y


def test_a_storage_sharing_guard_reads_back_with_its_overlap_offsets():
    """StorageSharing's overlap offsets are one of its fields, written and read with it: read
    back, it says the same and answers the same, on the traced layout (pass), overlapping
    views at another offset and views that no longer overlap (fail)."""
    tracer.reset()
    c = tracer.compile(_write_then_add, backend="aot_eager")
    t = torch.arange(8.)
    c(t[:3], t[1:4])
    [entry] = c.entries
    G = vars(sys.modules[__name__])
    back = _round_trip_set(entry.guards, (t[:3], t[1:4]), G)
    assert back.describe() == entry.guards.describe()
    assert "y shares x's storage, overlapping (x at 0, y at 1)" in back.describe()
    u = torch.arange(8.)
    for args, ok in [((u[:3], u[1:4]), True), ((u[1:4], u[2:5]), False), ((u[:3], u[3:6]), False),
                     ((u[:3], torch.arange(8.)[1:4]), False)]:
        assert back(args, G, None) == ok and entry.guards(args, G, None) == ok, args
    tracer.reset()
