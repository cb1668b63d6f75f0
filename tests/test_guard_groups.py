"""Guards checked by group (guards/builder.py) and graph inputs loaded through shared prefixes
(tracer/rewrite/codegen.py): the two ways a model's repeated blocks stop costing a first call
per layer. Each answer is compared with the flat form's, and each compiled call with eager."""
import dis

import pytest
import torch

import tracer
from guards import compile_guards
from tracer.runtime import cache


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    yield
    tracer.reset()


def _encoder(layers):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def run(model, x):
    return model(x)


def _entry():
    entries = [e for _c, cc in cache._CACHES.items() for e in cc.entries if e.graph is not None]
    assert len(entries) == 1
    return entries[0]


def _traced_encoder12():
    """(model, input, compiled run, the entry's guard set) of a 12-layer encoder traced in one
    graph, its layers replayed, equal to eager."""
    m, x = _encoder(12), torch.randn(2, 5, 32)
    compiled = tracer.compile(run, backend="eager")
    torch.testing.assert_close(compiled(m, x), m(x))
    s = tracer.stats()
    assert s.internal_errors == 0 and s.graph_breaks == 0 and s.blocks_replayed >= 10
    return m, x, compiled, _entry().guards


def _flat(gs):
    """The same guards compiled as one function (no groups)."""
    return compile_guards(gs.guards, builtins=gs.builtins, split=gs.split)


class _Linear(torch.nn.Linear):
    def forward(self, x):
        return super().forward(x) * 2


def _mutations(m):
    """(what, apply, undo) for changes a guard must see in one layer of many."""
    saved = {}

    def set_attr(obj, name, value):
        def apply():
            saved[(id(obj), name)] = obj.__dict__.get(name, getattr(obj, name))
            setattr(obj, name, value)
        return apply, lambda: setattr(obj, name, saved[(id(obj), name)])

    def hook(mod):
        handle = []
        return (lambda: handle.append(mod.register_forward_hook(lambda *a: None)),
                lambda: handle.pop().remove())

    other = _Linear(32, 64)
    return [
        ("a layer's norm eps", *set_attr(m.layers[7].norm1, "eps", 1e-3)),
        ("a layer in training mode", *set_attr(m.layers[3], "training", True)),
        ("a submodule replaced by one of another class", *set_attr(m.layers[5], "linear1", other)),
        ("a forward hook on a layer's attention", *hook(m.layers[9].self_attn)),
        ("the last layer's activation", *set_attr(m.layers[11], "activation", torch.nn.functional.gelu)),
    ]


def test_group_checks_answer_as_the_flat_check_and_share_their_code():
    m, x, compiled, gs = _traced_encoder12()
    assert len(gs.groups) >= 12
    # one text per kind of group, not per layer: compiled once, bound per layer
    texts, calls = gs.source_code.count("def check_group"), gs.source_code.count("group of")
    assert 1 <= texts <= calls // 3
    flat = _flat(gs)
    assert "check_group" not in flat.source_code
    L, G = (m, x), globals()
    assert gs.full_check(L, G, None) and flat.full_check(L, G, None) and gs.check(L, G, None)
    for what, apply, undo in _mutations(m):
        apply()
        try:
            assert not gs.full_check(L, G, None), what
            assert not flat.full_check(L, G, None), what
            assert not gs.check(L, G, None), what
            assert gs.failures(L, G, None), what
            torch.testing.assert_close(compiled(m, x), m(x))  # a new entry: eager's answer
        finally:
            undo()
        assert gs.full_check(L, G, None) and flat.full_check(L, G, None), what
        assert gs.check(L, G, None), what


def test_group_text_is_made_once_per_kind_and_never_shared_across_kinds(monkeypatch):
    """A replayed layer's group text comes from its kind's (builder._template_key): made for
    the first block and its first sibling only. A layer that differs (one norm's eps) is
    inlined, and its group has a text of its own: its fact is checked on it, and the others'
    on them."""
    from guards import builder
    made, roots = [], {}
    real, real_key = builder.GuardSet._group_check, builder._template_key

    def key_of(root, *a):  # (a text is made from a key's templates: whose root they were read from)
        key, ids = real_key(root, *a)
        roots[id(key[1])] = root
        return key, ids
    monkeypatch.setattr(builder, "_template_key", key_of)
    monkeypatch.setattr(builder.GuardSet, "_group_check", lambda self, *a: made.append(roots[id(a[0])]) or real(self, *a))
    m, x = _encoder(12), torch.randn(2, 5, 32)
    m.layers[7].norm1.eps = 1e-3
    compiled = tracer.compile(run, backend="eager")
    torch.testing.assert_close(compiled(m, x), m(x))
    s = tracer.stats()
    assert s.internal_errors == 0 and s.graph_breaks == 0 and s.blocks_replayed >= 9
    gs = _entry().guards
    calls = gs.source_code.count("group of")
    layers = [r for r in made if r.name().endswith("]") and "_modules['layers']._modules[" in r.name()
              and r.name().count("_modules[") == 2]
    assert calls >= 12 and len(made) < calls // 2, (len(made), calls)
    assert len(layers) <= 4, layers  # (layer 0, the first recorded, its first sibling, layer 7)
    L, G = (m, x), globals()
    assert gs.full_check(L, G, None) and gs.check(L, G, None)
    for k, eps in ((7, 1e-5), (3, 1e-3), (8, 1e-3)):
        old = m.layers[k].norm1.eps
        m.layers[k].norm1.eps = eps
        try:
            assert not gs.full_check(L, G, None) and not gs.check(L, G, None), k
            assert not _flat(gs).full_check(L, G, None), k
        finally:
            m.layers[k].norm1.eps = old
        assert gs.full_check(L, G, None) and gs.check(L, G, None), k
    torch.testing.assert_close(compiled(m, x), m(x))
    assert tracer.stats().frames_traced == s.frames_traced


def test_a_second_model_passes_the_group_checks():
    m, x = _encoder(12), torch.randn(2, 5, 32)
    compiled = tracer.compile(run, backend="eager")
    compiled(m, x)
    gs = _entry().guards
    other = _encoder(12)
    L = (other, torch.randn(2, 5, 32))
    assert gs.full_check(L, globals(), None) and _flat(gs).full_check(L, globals(), None)
    before = tracer.stats().frames_traced
    torch.testing.assert_close(compiled(*L), other(L[1]))
    assert tracer.stats().frames_traced == before  # served by the entry: nothing traced


def test_graph_inputs_are_loaded_through_shared_prefixes():
    m, x = _encoder(12), torch.randn(2, 5, 32)
    compiled = tracer.compile(m, backend="eager")
    torch.testing.assert_close(compiled(x), m(x))
    entry = _entry()
    n_inputs = len([n for n in entry.graph.graph.nodes if n.op == "placeholder"])
    instrs = list(dis.get_instructions(entry.code))
    assert n_inputs > 12 * 10
    # each parameter: a temporary, its key, a subscript, and each module's dict read once
    # (a chain from `self` for each parameter was 12 instructions each)
    assert len(instrs) < 7 * n_inputs
    modules_reads = [i for i in instrs if i.opname == "LOAD_ATTR" and i.argval == "_modules"]
    assert len(modules_reads) <= 2 + 2 * 12  # the root's, the list's, each layer's and its attention's
    # the temporaries are read on every call: a parameter replaced is the one used
    with torch.no_grad():
        m.layers[4].linear2.weight = torch.nn.Parameter(torch.randn_like(m.layers[4].linear2.weight))
        m.layers[10].norm2.bias.add_(1.0)
    before = tracer.stats().frames_traced
    torch.testing.assert_close(compiled(x), m(x))
    assert tracer.stats().frames_traced == before


def test_a_tensor_checked_one_by_one_under_a_group_root_is_still_checked():
    """Found by review: when a tensor guard's example has died, the batch is off and each
    TensorMatch is emitted alone; one whose source is under a group's root was taken for that
    group (which holds only the other guards) and left out of the check, so a tensor of
    another shape passed."""
    import builtins
    import gc
    import types
    from guards import AttrSource, ConstMatch, LocalSource, TensorMatch
    root = AttrSource(LocalSource("x", 0), "m")
    t = torch.randn(3)
    guards = [ConstMatch(AttrSource(root, n), 1) for n in "abcd"] + [TensorMatch(AttrSource(root, "w"), t)]
    del t
    gc.collect()
    gs = compile_guards(guards, builtins=builtins.__dict__, groups=(root,))
    assert "check_group" in gs.source_code and "TensorMatch" in gs.source_code

    def frame(w):
        return (types.SimpleNamespace(m=types.SimpleNamespace(a=1, b=1, c=1, d=1, w=w)),)
    assert gs.full_check(frame(torch.randn(3)), {}, None) and gs.check(frame(torch.randn(3)), {}, None)
    for bad in (torch.randn(5), torch.randn(3, dtype=torch.float64), torch.randn(3).requires_grad_()):
        assert not gs.full_check(frame(bad), {}, None) and not gs.check(frame(bad), {}, None)


def test_a_replayed_layer_is_one_unit_of_the_set_and_its_guards_are_named_one_by_one():
    """A replayed layer's ~100 guards are one unit of the set (retarget.BlockGuards): copied,
    hashed, ordered and grouped once, not per layer. What is numbered, named and written is
    still each guard (`gs.guards`): a deep change in one layer fails the fast check, the
    generated check and the flat form's, and failures() names the very fact."""
    from guards.retarget import BlockGuards
    m, x, compiled, gs = _traced_encoder12()
    units = [g for g in gs._units if type(g) is BlockGuards]
    roots = {g.source.name() for g in units}
    assert len(units) >= 10 and all(f"_modules['layers']._modules['{k}']" in " ".join(roots) for k in range(2, 12))
    assert len(gs._units) < len(gs.guards) // 3 and len(gs) == len(gs.guards)
    assert not any(type(g) is BlockGuards for g in gs.guards)
    assert all(0 <= i < len(gs) for ops in gs._op_guards for i in ops)
    L, G = (m, x), globals()
    flat = _flat(gs)
    assert gs.check(L, G, None) and gs.full_check(L, G, None) and flat.full_check(L, G, None)
    old = m.layers[9].self_attn.dropout
    m.layers[9].self_attn.dropout = 0.5
    try:
        assert not gs.check(L, G, None) and not gs.full_check(L, G, None) and not flat.full_check(L, G, None)
        why = gs.failures(L, G, None)
        assert any("_modules['9']" in w and "dropout" in w for w in why), why
        torch.testing.assert_close(compiled(m, x), m(x))  # a new entry: eager's answer
    finally:
        m.layers[9].self_attn.dropout = old
    assert gs.check(L, G, None) and gs.full_check(L, G, None)


@pytest.mark.skipif(not __import__("guards.fastpath", fromlist=["ENABLED"]).ENABLED, reason="no C guard program here")
def test_a_replayed_layers_c_ops_are_copies_of_its_first_siblings(monkeypatch):
    """A replayed layer's C nodes and ops are the first sibling's, copied with its own root
    node and guard numbers (fastpath.Plan.keep_block/repeat_block), not made again guard by
    guard: the program is exactly the one made guard by guard, and answers alike."""
    from guards import fastpath
    m, x, compiled, gs = _traced_encoder12()
    made = []
    monkeypatch.setattr(fastpath.fc, "Program", lambda *a: made.append(a) or object())
    kept = []
    real_repeat = fastpath.Plan.repeat_block
    monkeypatch.setattr(fastpath.Plan, "repeat_block", lambda *a: kept.append(real_repeat(*a)) or kept[-1])
    fastpath.build(gs, *_parts(gs))
    monkeypatch.setattr(fastpath.Plan, "repeat_block", lambda *a: False)
    fastpath.build(gs, *_parts(gs))
    assert sum(kept) >= 9, kept
    (_f1, _s1, nodes, ops), (_f2, _s2, nodes_one_by_one, ops_one_by_one) = made
    assert nodes == nodes_one_by_one and len(ops) == len(ops_one_by_one)
    for a, b in zip(ops, ops_one_by_one):  # (ops of Python checks hold functions made per build)
        assert a[:3] + a[-2:] == b[:3] + b[-2:] and all(type(u) is type(v) for u, v in zip(a[3:6], b[3:6])), (a, b)


def _parts(gs):
    """(first, batch, rest) as GuardSet.__init__ hands them to fastpath.build."""
    from guards.builder import _width
    n, k = 0, 0
    while n < gs.split[0]:
        n += _width(gs._units[k])
        k += 1
    return gs._units[:k], gs._batch, gs._units[k + gs.split[1]:]
