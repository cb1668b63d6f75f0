"""The C check (guards/fastpath.py): same answers as the generated Python check, while it
skips what its snapshot says cannot have changed, and after each way a module tree can
change under it.  Needs only `guards` and torch (runs on every CPython the C code builds
for: the dict-watcher path on 3.12+, dict version tags on 3.11)."""
import builtins
import gc
import random

import pytest
import torch
import torch.nn as nn

from guards import (AttrSource, ConstMatch, DictKeysMatch, GlobalSource, GlobalStateMatch,
                    IdMatch, ItemSource, LocalSource, Predicate, TensorMatch, TypeMatch,
                    compile_guards, fastpath)

pytestmark = pytest.mark.skipif(not fastpath.ENABLED, reason="guards._fastcheck is not built")

B = builtins.__dict__
M = LocalSource("m", 0)
X = LocalSource("x", 1)
HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def sub(src, name):
    return ItemSource(AttrSource(src, "_modules"), name)


def param(src, name):
    return ItemSource(AttrSource(src, "_parameters"), name)


def make_model():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Sequential(nn.Linear(4, 2)))
    m.scale = 0.5
    return m


def guards_for(m, x):
    """What a trace of `m(x)` guards (the shape of tracer's guards for a module tree)."""
    out = [IdMatch(M, m), TensorMatch(X, x), GlobalStateMatch(),
           Predicate.falsy_attrs(M, HOOKS, "has no hooks"),
           ConstMatch(AttrSource(M, "scale"), 0.5),
           Predicate.lacks_attr(M, "missing", "has no attribute 'missing'"),
           DictKeysMatch(AttrSource(M, "_modules"), tuple(m._modules))]
    for path, mod in m.named_modules():
        if not path:
            continue
        src = M
        for part in path.split("."):
            src = sub(src, part)
        out += [IdMatch(src, mod), TypeMatch(src, type(mod)),
                Predicate.falsy_attrs(src, HOOKS, "has no hooks"),
                TypeMatch(AttrSource(src, "_forward_hooks"), type(mod._forward_hooks)),
                DictKeysMatch(AttrSource(src, "_forward_hooks"), (), type(mod._forward_hooks))]
        attrs = {k: v for k, v in mod.__dict__.items()
                 if not k.startswith("_") and isinstance(v, (bool, int, float, str, tuple, type(None)))}
        out.append(Predicate.attrs_are(src, attrs, "attributes"))
        for name, p in mod._parameters.items():
            if p is not None:
                out += [IdMatch(param(src, name), p), TensorMatch(param(src, name), p)]
    return out


@pytest.fixture
def setup():
    m, x = make_model(), torch.randn(3, 4)
    gs = compile_guards(guards_for(m, x), builtins=B)
    L = (m, x)
    assert gs.check(L, {}, None)
    assert gs.check(L, {}, None)  # the second call runs from the snapshot
    st = gs.check.stats()
    assert st["state"] == "positive" and st["fast_hits"] >= 1, st
    # active: the global-state calls and the tensor input; the module tree is frozen
    assert st["frozen_nodes"] > 10 and st["active_ops"] <= len(GlobalStateMatch().calls()) + 2, st
    return m, x, gs


def agree(gs, L, G=None, expect=None):
    """check() (twice: slow then fast path) == the generated check == failures() empty."""
    G = {} if G is None else G
    full = gs.full_check(L, G, None)
    for _ in range(3):
        assert gs.check(L, G, None) is full
    assert (gs.failures(L, G, None) == []) is full
    if expect is not None:
        assert full is expect, gs.failures(L, G, None)
    return full


MUTATIONS = {
    "replace a parameter": lambda m: setattr(m[0], "weight", nn.Parameter(m[0].weight.detach().clone())),
    "parameter requires_grad": lambda m: m[0].weight.requires_grad_(False),
    "parameter .data of another shape": lambda m: setattr(m[0].weight, "data", torch.randn(4, 5)),
    # same shape: the record's dtype and strides fields alone tell these apart
    "parameter .data of another dtype": lambda m: setattr(m[0].weight, "data", m[0].weight.data.double()),
    "parameter .data of other strides": lambda m: setattr(m[0].weight, "data",
                                                          m[0].weight.data.t().contiguous().t()),
    "add a forward hook": lambda m: m[1].register_forward_hook(lambda *a: None),
    "add a pre-hook on the root": lambda m: m.register_forward_pre_hook(lambda *a: None),
    "change an attribute": lambda m: setattr(m[1], "eps", 1e-3),
    "training flag": lambda m: m[2].train(False) and m[2][0].train(True),
    "swap a module": lambda m: m.__setitem__(1, nn.LayerNorm(4)),
    "swap a nested module": lambda m: m[2].__setitem__(0, nn.Linear(4, 2)),
    "add a module": lambda m: m.append(nn.ReLU()),
    "change a plain attribute": lambda m: setattr(m, "scale", 0.25),
    "define the absent attribute": lambda m: setattr(m, "missing", 1),
    "absent attribute as a parameter": lambda m: m.register_parameter("missing", nn.Parameter(torch.ones(1))),
    "class gains a property": lambda m: setattr(type(m), "scale", property(lambda s: 1.0)),
    "replace an instance __dict__": lambda m: setattr(m[1], "__dict__", {**m[1].__dict__, "eps": 2.0}),
    "__class__ assignment": lambda m: setattr(m[1], "__class__", type("LN2", (nn.LayerNorm,), {})),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_each_change_fails_the_check_and_agrees(setup, name):
    m, x, gs = setup
    try:
        MUTATIONS[name](m)
        agree(gs, (m, x), expect=False)
    finally:
        if "scale" in nn.Sequential.__dict__:  # undo the class change for the other tests
            del nn.Sequential.scale


def test_an_unrelated_change_keeps_passing(setup):
    m, x, gs = setup
    m[0].some_cache = [1, 2]  # a write the guards do not read: slow path once, then fast
    agree(gs, (m, x), expect=True)
    before = gs.check.stats()["fast_hits"]
    assert gs.check((m, x), {}, None)
    assert gs.check.stats()["fast_hits"] == before + 1


def test_changes_undone_pass_again(setup):
    m, x, gs = setup
    old = m[0].weight
    m[0].weight = nn.Parameter(old.detach().clone())
    agree(gs, (m, x), expect=False)
    m[0].weight = old
    agree(gs, (m, x), expect=True)
    h = m[1].register_forward_hook(lambda *a: None)
    agree(gs, (m, x), expect=False)
    h.remove()
    agree(gs, (m, x), expect=True)


def test_negative_snapshot_fails_fast_until_the_tree_changes(setup):
    m, x, gs = setup
    m.scale = 1.0
    agree(gs, (m, x), expect=False)
    assert gs.check.stats()["state"] == "negative"
    m.scale = 0.5
    agree(gs, (m, x), expect=True)
    assert gs.check.stats()["state"] == "positive"


def test_inputs_are_checked_every_call(setup):
    m, x, gs = setup
    agree(gs, (m, torch.randn(3, 4)), expect=True)
    agree(gs, (m, torch.randn(2, 4)), expect=False)
    agree(gs, (m, torch.randn(3, 4, dtype=torch.float64)), expect=False)
    agree(gs, (m, torch.randn(3, 4).requires_grad_()), expect=False)
    agree(gs, (m, "not a tensor"), expect=False)
    agree(gs, (make_model(), x), expect=False)  # another model: its anchor fails
    with torch.no_grad():
        agree(gs, (m, x), expect=False)  # global state
    agree(gs, (m, x), expect=True)


def test_a_dead_anchor_fails():
    class Box:
        pass

    b = Box()
    gs = compile_guards([IdMatch(M, b), ConstMatch(AttrSource(M, "v"), None)], builtins=B)
    b.v = None
    assert gs.check((b,), {}, None) and gs.check((b,), {}, None)
    del b
    gc.collect()
    fresh = Box()
    fresh.v = None
    agree(gs, (fresh,), expect=False)
    assert any("no longer exists" in f for f in gs.failures((fresh,), {}, None))


def test_globals_are_fetched_every_call():
    g = {"scale": 2, "mod": nn.ReLU()}
    gs = compile_guards([ConstMatch(GlobalSource("scale"), 2), IdMatch(GlobalSource("mod"), g["mod"]),
                         Predicate.key_absent(LocalSource("G", 0), "len", "not shadowed")],
                        builtins=B)
    L = ({"a": 1},)
    assert agree(gs, L, g, expect=True)
    g["scale"] = 3
    agree(gs, L, g, expect=False)
    g["scale"] = 2
    g["unrelated"] = 1  # a script's globals change all the time: still fast and right
    agree(gs, L, g, expect=True)
    g["mod"] = nn.ReLU()
    agree(gs, L, g, expect=False)


def test_random_mutation_sequences_agree():
    rng = random.Random(0)
    names = list(MUTATIONS)
    for trial in range(12):
        m, x = make_model(), torch.randn(3, 4)
        gs = compile_guards(guards_for(m, x), builtins=B)
        agree(gs, (m, x), expect=True)
        for _ in range(3):
            name = rng.choice([n for n in names if "class" not in n])
            try:
                MUTATIONS[name](m)
            except Exception:  # noqa: BLE001 - some sequences make a later change impossible
                continue
            agree(gs, (m, x))


# -- guards the C check now answers without calling Python ----------------------------------

class Config:
    """A PretrainedConfig-like object: its own __getattribute__ maps aliases."""
    alias = {"hidden": "width"}

    def __init__(self):
        self.width = 8

    def __getattribute__(self, key):
        if key != "alias" and key in super().__getattribute__("alias"):
            key = super().__getattribute__("alias")[key]
        return super().__getattribute__(key)


def test_generic_lacks_is_frozen_and_fails_on_each_way_the_name_appears():
    C0 = LocalSource("c", 0)
    for change in (lambda c: setattr(c, "depth", 3),                    # instance attribute
                   lambda c: setattr(type(c), "depth", 4),              # class attribute
                   lambda c: setattr(c, "__dict__", {"depth": 1})):     # a new instance dict
        cls = type("Cfg", (Config,), {})
        c = cls()
        gs = compile_guards([IdMatch(C0, c),
                             Predicate.lacks_generic_attr(C0, "depth", "finds no 'depth'")],
                            builtins=B)
        assert agree(gs, (c,), expect=True)
        st = gs.check.stats()
        assert st["state"] == "positive" and st["active_ops"] == 0, st  # nothing re-run
        change(c)
        agree(gs, (c,), expect=False)


def test_same_function_op_follows_code_and_globals():
    def make(k):
        return lambda x: x + k

    f, g = make(1), make(2)  # same code, same globals: both pass
    S = LocalSource("f", 0)
    gs = compile_guards([Predicate.same_function(S, f.__code__, f.__globals__, "code of f")],
                        builtins=B)
    agree(gs, (f,), expect=True)
    agree(gs, (g,), expect=True)
    agree(gs, ((lambda x: x - 1),), expect=False)          # other code
    h = make(3)
    h.__code__ = make(0).__code__.replace(co_consts=(None,))  # code swapped in place
    agree(gs, (h,), expect=False)
    other = type(f)(f.__code__, {"__builtins__": builtins}, None, None, f.__closure__)
    agree(gs, (other,), expect=False)                        # other globals
    agree(gs, (len,), expect=False)                          # not a Python function


def test_nested_tensor_after_a_recorded_tensor_fails_without_aborting():
    x = torch.randn(3, 4)
    gs = compile_guards([TensorMatch(X, x), GlobalStateMatch()], builtins=B)
    L = (None, x)
    assert agree(gs, L, expect=True)  # TensorGuards passed: the metadata is recorded
    nt = torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)])
    agree(gs, (None, nt), expect=False)
    agree(gs, (None, torch.randn(3, 4)), expect=True)


class _Mode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _deterministic(warn_only=False):
    import contextlib

    @contextlib.contextmanager
    def ctx():
        before = (torch.are_deterministic_algorithms_enabled(),
                  torch.is_deterministic_algorithms_warn_only_enabled())
        torch.use_deterministic_algorithms(True, warn_only=warn_only)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    return ctx()


def _default_dtype(dt):
    import contextlib

    @contextlib.contextmanager
    def ctx():
        before = torch.get_default_dtype()
        torch.set_default_dtype(dt)
        try:
            yield
        finally:
            torch.set_default_dtype(before)
    return ctx()


STATE_CHANGES = {
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
    "autocast cpu": lambda: torch.autocast("cpu"),
    "default dtype": lambda: _default_dtype(torch.float64),
    "deterministic": _deterministic,
    "deterministic warn-only": lambda: _deterministic(warn_only=True),
    "torch function disabled": torch._C.DisableTorchFunction,
    "torch function subclass disabled": torch._C.DisableTorchFunctionSubclass,
    "a torch function mode": _Mode,
    "default device": lambda: torch.device("cpu"),
    "vmap level": None,
    "set_stance force_eager": lambda: torch.compiler.set_stance("force_eager"),
}


@pytest.mark.parametrize("name", list(STATE_CHANGES))
def test_global_state_reading_fails_on_each_fact(name):
    """The C++ state reading (O_STATE) answers for GlobalStateMatch's calls once they passed:
    each fact changed under it must fail the check, as the generated check does."""
    gs = compile_guards([GlobalStateMatch()], builtins=B)
    L = (None, None)
    for _ in range(3):  # recorded on the first pass, then answered by the reading
        assert agree(gs, L, expect=True)
    if name == "vmap level":
        out = []
        torch.vmap(lambda t: (out.append(agree(gs, L, expect=False)), t)[1])(torch.ones(2))
        assert out == [False]
    else:
        with STATE_CHANGES[name]():
            agree(gs, L, expect=False)
    agree(gs, L, expect=True)


def test_tensor_records_load_where_built():
    """A _tensormeta that was built for this torch but cannot load (a symbol torch does not
    export to it) would send every tensor to TensorGuards on every call: fail instead."""
    import importlib
    import importlib.machinery
    import os
    here = os.path.dirname(fastpath.__file__)
    name = fastpath.tensormeta_name(torch.__version__)
    if not any(os.path.exists(os.path.join(here, name + s))
               for s in importlib.machinery.EXTENSION_SUFFIXES):
        pytest.skip(f"guards.{name} is not built for this Python and torch")
    importlib.import_module(f"guards.{name}")  # an ImportError here is the failure
    assert fastpath._tensor_records() is not None


class _Lin(nn.Linear):
    """A class of its own, so that changing it leaves nn.Linear alone."""


DEEP_MUTATIONS = {  # each on the last of many objects checked by one run of steps
    "__class__ assignment": lambda m: setattr(m[-1], "__class__", type("Lin2", (_Lin,), {})),
    "replace an instance __dict__": lambda m: setattr(m[-1], "__dict__", {**m[-1].__dict__, "in_features": 5}),
    "the shared class gains a property": lambda m: setattr(_Lin, "_forward_hooks", property(lambda s: {0: print})),
}


@pytest.mark.parametrize("name", list(DEEP_MUTATIONS))
def test_steps_shared_by_many_objects(name):
    """A model of many modules of one class: the class's version tag is one step, and the
    steps of one kind run as one loop; a change on the last object of such a run, or to the
    shared class, still fails the check."""
    torch.manual_seed(0)
    m = nn.Sequential(*[_Lin(4, 4) for _ in range(6)])
    m.scale = 0.5  # (guards_for reads it)
    x = torch.randn(3, 4)
    gs = compile_guards(guards_for(m, x), builtins=B)
    L = (m, x)
    try:
        assert gs.check(L, {}, None) and gs.check(L, {}, None)
        steps = gs.check.steps()
        from guards import _fastcheck as fc
        tags = [a for kind, _, a in steps if kind == fc.S_CLASSTAG]
        assert len(tags) == len(set(tags)), steps  # one per class
        assert id(_Lin) in tags
        pins = [a for kind, _, a in steps if kind == fc.S_TYPEPIN]
        assert {id(mod) for mod in m} <= set(pins)  # each object's class, still per object
        DEEP_MUTATIONS[name](m)
        agree(gs, L, expect=False)
    finally:
        if "_forward_hooks" in _Lin.__dict__:
            del _Lin._forward_hooks


@pytest.mark.parametrize("n", [4, 12, 40])
def test_no_aliasing_of_batch_tensors_is_answered_by_the_batch(n):
    """A NoAliasing over tensors of the batch is implied by the batch passing (the records
    and TensorGuards both demand distinct objects): no op of its own, and one tensor passed
    twice still fails, with failures() naming the aliasing (n: compared by pairs up to 8,
    in a small hash set above)."""
    from guards import NoAliasing
    srcs = [LocalSource(f"a{k}", k) for k in range(n)]
    xs = [torch.randn(3) for _ in srcs]
    gs = compile_guards([TensorMatch(s, x) for s, x in zip(srcs, xs)] + [NoAliasing(srcs)], builtins=B)
    covered = [g for g in gs._op_guards if len(g) > 1]
    assert len(covered) == 1 and len(covered[0]) == n + 1, gs._op_guards  # batch + NoAliasing
    L = tuple(xs)
    assert gs.check(L, {}, None) and gs.check(L, {}, None)
    hits = gs.check.stats()["fast_hits"]
    assert hits >= 1
    for i, j in [(0, 2), (1, n - 1), (n - 2, n - 1)]:
        twice = tuple(xs[i] if k == j else x for k, x in enumerate(xs))
        agree(gs, twice, expect=False)
        assert gs.failures(twice, {}, None), "failures() must name what failed"
    agree(gs, L, expect=True)
    assert gs.check.stats()["fast_hits"] > hits  # the distinct inputs pass on the fast path


def _stance_object(stance):
    ef = __import__("torch._dynamo.eval_frame", fromlist=["_stance"])
    return type(ef._stance)(stance)


STANCE_CHANGES = {  # every way the stance a hit reads can become force_eager
    "the stance attribute": lambda ef: setattr(ef._stance, "stance", "force_eager"),
    "a new stance object": lambda ef: setattr(ef, "_stance", _stance_object("force_eager")),
    "set_stance": lambda ef: torch.compiler.set_stance("force_eager").__enter__(),
}


@pytest.mark.parametrize("name", list(STANCE_CHANGES))
def test_the_stance_read_fails_when_forced_eager_and_survives_torch_compile(name):
    """not_forced_eager() reads sys.modules[...]._stance.stance in C on every check: each way
    the stance becomes force_eager fails it. It is not a snapshot node: torch.compile writes
    torch._dynamo.eval_frame's globals on every call (`_in_optimized_module`), and a snapshot
    through that module's dict went to the slow path on each hit after one (a 12-layer
    encoder's warm call took 1.5 ms instead of 1.0 beside torch.compile)."""
    import torch._dynamo.eval_frame as ef
    saved = ef._stance
    ef._stance = _stance_object("default")
    m = nn.Sequential(nn.Linear(4, 4))
    gs = compile_guards([GlobalStateMatch(), IdMatch(M, m)], builtins=B)
    L = (m, None)
    try:
        for _ in range(3):
            assert agree(gs, L, expect=True)
        slow = gs.check.stats()["slow_calls"]
        # what each torch.compile call does: a write to eval_frame's globals
        ef._in_optimized_module = getattr(ef, "_in_optimized_module", False)
        assert gs.check(L, {}, None) and gs.check.stats()["slow_calls"] == slow
        STANCE_CHANGES[name](ef)
        for _ in range(3):
            agree(gs, L, expect=False)
        ef._stance = _stance_object("default")
        for _ in range(3):
            agree(gs, L, expect=True)
    finally:
        ef._stance = saved


def test_an_instance_value_over_a_plain_class_default_is_frozen_and_followed():
    """A dataclass-like object: `depth` is a class default the instance sets itself. The
    attribute read is frozen (nothing re-run on a hit) and each way its value can change
    fails the check: the instance value, deleting it (the class default shows through), the
    class default once it shows, a property on the class, a new instance dict."""
    C0 = LocalSource("c", 0)
    changes = [
        (lambda c: setattr(c, "depth", 3), False),
        (lambda c: delattr(c, "depth"), False),                                 # class's 1
        (lambda c: (delattr(c, "depth"), setattr(type(c), "depth", 2)), True),  # class's 2
        (lambda c: setattr(type(c), "depth", property(lambda s: 5)), False),
        (lambda c: setattr(c, "__dict__", {"depth": 4}), False),
        (lambda c: setattr(type(c), "other", 1), True),                         # unrelated
    ]
    for change, still in changes:
        cls = type("Cfg", (), {"depth": 1})
        c = cls()
        c.depth = 2
        gs = compile_guards([IdMatch(C0, c), ConstMatch(AttrSource(C0, "depth"), 2)], builtins=B)
        assert agree(gs, (c,), expect=True) and agree(gs, (c,), expect=True)
        st = gs.check.stats()
        assert st["state"] == "positive" and st["active_ops"] == 0, st
        change(c)
        agree(gs, (c,), expect=still)
