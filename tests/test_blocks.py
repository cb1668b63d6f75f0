"""Repeated blocks traced once (tracer/variables/blocks.py): a module call like an earlier
sibling's is replayed from that sibling's trace. Each model is traced with replays and without;
the graphs must be the same node by node, the guards the same set, the outputs and gradients
equal to eager, and the replays must have happened (or, where the block does what a replay
cannot promise, not have)."""
import re

import pytest
import torch

import tracer
from tracer.runtime import cache, config
from helpers import traced


def _entries():
    return [e for _c, cc in cache._CACHES.items() for e in cc.entries]


def _structure(graph):
    """The graph as (op, target, args) with nodes named by position: names an unrolled trace
    spent on nodes it erased (a constant result) are not part of the structure."""
    index = {n: i for i, n in enumerate(graph.nodes)}

    def arg(a):
        if isinstance(a, torch.fx.Node):
            return ("node", index[a])
        if isinstance(a, (tuple, list)):
            return tuple(arg(x) for x in a)
        if isinstance(a, dict):
            return tuple((k, arg(v)) for k, v in a.items())
        return repr(a)
    return [(n.op, n.name if n.op == "placeholder" else "", str(n.target), arg(n.args), arg(n.kwargs))
            for n in graph.nodes]


def _guards(entry):
    """The guard set's facts, sorted, each once (a replayed block's guards are one unit of the
    set, not deduplicated against the guards around it: `layers[0].norm2.eps` read by the layer
    and by its replayed norm is checked twice). Identity is one fact however it is said: a replayed
    call checks `layers[1].f is <the function>` where the unrolled trace, which met the object
    before through `layers[0].f`, says `layers[0].f is layers[1].f` (with `layers[0].f is
    <the function>` in both)."""
    out, same = [], set()
    for line in entry.guards.describe().splitlines():
        line = re.sub(r"^\[\d+\] ", "", line)
        m = re.fullmatch(r"(\S+) is (the \w+ object at 0x[0-9a-f]+|\S+)", line)
        if m and m.group(2) not in ("None", "True", "False", "Ellipsis"):
            same.update(m.group(1, 2) if not m.group(2).startswith("the ") else m.group(1, 1))
        else:
            out.append(line)
    return sorted(set(out)) + sorted(f"{s} is fixed" for s in same)


def _trace(fn, args, reuse):
    tracer.reset()
    tracer.reset_stats()
    config.reuse_blocks = reuse
    try:
        compiled = tracer.compile(fn, backend="eager")
        out = compiled(*args)
    finally:
        config.reuse_blocks = True
    s = tracer.stats()
    entries = [e for e in _entries() if e.graph is not None]
    assert s.internal_errors == 0 and s.fallbacks == 0 and s.graph_breaks == 0
    assert len(entries) == 1
    return out, entries[0], s, compiled


def _check_same_as_unrolled(fn, args, min_replays):
    out, entry, s, compiled = _trace(fn, args, True)
    torch.testing.assert_close(out, fn(*args))
    # the entry serves later calls on fresh inputs
    fresh = [torch.randn_like(a).requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) and
             a.is_floating_point() else a for a in args]
    torch.testing.assert_close(compiled(*fresh), fn(*fresh))
    assert tracer.stats().frames_traced == 1
    structure, guards = _structure(entry.graph.graph), _guards(entry)
    entry.graph.graph.lint()
    _out2, entry2, s2, _ = _trace(fn, args, False)
    assert s2.blocks_replayed == 0
    assert s.blocks_replayed >= min_replays
    assert structure == _structure(entry2.graph.graph)
    assert guards == _guards(entry2)


def _metadata_as_unrolled(fn, args):
    """Each replayed node names the modules and the lines around the replay, as the unrolled
    trace's node does (nn_module_stack, stack_trace); the replay's stats."""
    _out, entry, s, _c = _trace(fn, args, True)
    _out, entry2, _s2, _c = _trace(fn, args, False)
    for a, b in zip(entry.graph.graph.nodes, entry2.graph.graph.nodes):
        assert a.meta.get("nn_module_stack") == b.meta.get("nn_module_stack"), a
        assert a.meta.get("stack_trace") == b.meta.get("stack_trace"), a
    return s


class Stack(torch.nn.Module):
    def __init__(self, n=5, block=None):
        super().__init__()
        self.layers = torch.nn.ModuleList(block() if block else Block() for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
        self.act = torch.nn.GELU()
        self.scale = 0.5

    def forward(self, x):
        h = self.fc2(self.act(self.fc1(self.norm(x))))
        return x + self.scale * h


def test_encoder_stack_is_the_unrolled_graph():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
    m = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 32)
    _check_same_as_unrolled(m, (x,), min_replays=5)
    # the unit replayed is the layer, not only its norms and linears: the kind whose calls are
    # largest is called for layers 1 to 5 (layer 0 takes the frame's input: another kind)
    _out, entry, _s, _c = _trace(m, (x,), True)
    calls = {}
    for n in entry.graph.graph.nodes:
        tag = n.meta.get("block_call")
        if tag is not None:
            calls.setdefault(tag[0], {}).setdefault(tag[1], []).append(n)
    largest = max(calls.values(), key=lambda c: len(c[1]) if 1 in c else 0)
    assert sorted(largest) == [0, 1, 2, 3, 4] and len(largest[1]) >= 12  # (attention, feed-forward, norms)


def test_block_stack_with_gradients():
    torch.manual_seed(0)
    m = Stack(6)
    x = torch.randn(3, 16, requires_grad=True)
    _check_same_as_unrolled(m, (x,), min_replays=5)
    tracer.reset()
    compiled = tracer.compile(m, backend="eager")
    out = compiled(x)
    grads = torch.autograd.grad(out.sum(), [x, *m.parameters()])
    ref = torch.autograd.grad(m(x).sum(), [x, *m.parameters()])
    for a, b in zip(grads, ref):
        torch.testing.assert_close(a, b)


def test_a_sibling_whose_attribute_differs_is_traced_not_replayed():
    """The guards re-targeted to the sibling fail (its `scale` differs): it is inlined, and its
    own value is used."""
    torch.manual_seed(0)
    m = Stack(4)
    m.layers[2].scale = 3.0
    x = torch.randn(2, 16)
    out, entry, s, compiled = _trace(m, (x,), True)
    torch.testing.assert_close(out, m(x))
    assert any("scale == 3.0" in g for g in _guards(entry))
    m.layers[3].scale = 2.0  # a change after compiling: the guard re-targeted to layer 3 fails
    torch.testing.assert_close(compiled(x), m(x))
    assert tracer.stats().recompiles == 1


class Indexed(torch.nn.Module):
    """Reads a table by its own index, and a table keyed by itself."""
    def __init__(self, i, table):
        super().__init__()
        self.i, self.table = i, table
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x) * self.table[self.i] + KEYED.get(self, 0.0)


KEYED = {}


def test_per_layer_index_and_object_keyed_table():
    torch.manual_seed(0)
    table = [1.0, 2.0, 3.0, 4.0]
    m = Stack(4, block=None)
    m.layers = torch.nn.ModuleList(Indexed(i, table) for i in range(4))
    KEYED.clear()
    KEYED[m.layers[1]] = 10.0
    KEYED[m.layers[3]] = -1.0
    x = torch.randn(2, 8)
    try:
        out, _entry, _s, compiled = _trace(m, (x,), True)
        torch.testing.assert_close(out, m(x))
        torch.testing.assert_close(compiled(torch.ones(2, 8)), m(torch.ones(2, 8)))
    finally:
        KEYED.clear()


class Counting(Block):
    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1
        return super().forward(x)


class Viewing(torch.nn.Module):
    def forward(self, x):
        return x.transpose(0, 1)


def test_blocks_with_side_effects_or_views_of_inputs_are_not_replayed():
    torch.manual_seed(0)
    m = Stack(3, block=Counting)
    x = torch.randn(2, 16)
    out, _e, s, _c = _trace(m, (x,), True)
    torch.testing.assert_close(out, Stack.forward(m, x))
    assert [layer.calls for layer in m.layers] == [2, 2, 2]  # the compiled call's, then eager's
    v = Stack(3, block=Viewing)
    x = torch.randn(2, 3)
    out, _e, s, _c = _trace(v, (x,), True)
    torch.testing.assert_close(out, v(x))
    assert s.blocks_replayed == 0


def test_aliased_arguments_are_another_kind_of_call():
    class Two(torch.nn.Module):
        def forward(self, a, b):
            return a * 2 + b if a is b else a - b

    class Caller(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.t1, self.t2 = Two(), Two()

        def forward(self, x):
            y = x + 1
            return self.t1(y, y + 0) + self.t2(y, y)

    m = Caller()
    x = torch.randn(4)
    out, _e, _s, _c = _trace(m, (x,), True)
    torch.testing.assert_close(out, m(x))


def tiny_llama(layers=4):
    """A tiny HF LlamaForCausalLM (random weights, eval) and 6 token ids."""
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                   num_key_value_heads=2, num_hidden_layers=layers, vocab_size=64,
                                   max_position_embeddings=32)
    return transformers.LlamaForCausalLM(cfg).eval(), torch.randint(0, 64, (1, 6))


def test_tiny_llama_without_cache():
    model, ids = tiny_llama()
    _check_same_as_unrolled(lambda i: model(i, use_cache=False).logits, (ids,), min_replays=3)


def test_gpt2_with_its_cache():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 64, (1, 6))
    _check_same_as_unrolled(lambda i: model(i).logits, (ids,), min_replays=1)


def test_conv_stages_in_train_mode():
    """BatchNorm in training writes its running stats in place: those blocks are not replayed;
    the rest are, and the module state after the call matches eager's."""
    torch.manual_seed(0)

    def stage():
        return torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    m = torch.nn.Sequential(*[stage() for _ in range(3)]).train()
    ref = torch.nn.Sequential(*[stage() for _ in range(3)]).train()
    ref.load_state_dict(m.state_dict())
    x = torch.randn(2, 4, 8, 8)
    out, _e, s, _c = _trace(m, (x,), True)
    torch.testing.assert_close(out, ref(x))
    for a, b in zip(m.state_dict().values(), ref.state_dict().values()):
        torch.testing.assert_close(a, b)


def test_same_class_same_input_other_parameter_shapes():
    """Two Linear layers read the same input but have other weight shapes (Falcon's
    query_key_value and dense_h_to_4h): the second is not a replay of the first."""
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = torch.nn.Linear(8, 4), torch.nn.Linear(8, 6), torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.a(x).sum(-1) + self.b(x).sum(-1) + self.c(x).sum(-1)

    torch.manual_seed(0)
    m = Two()
    x = torch.randn(3, 8)
    out, _e, s, _c = _trace(m, (x,), True)
    torch.testing.assert_close(out, m(x))
    assert s.blocks_replayed == 1  # c, like a


def test_a_store_pending_on_a_sibling_is_what_it_reads():
    """The frame sets a sibling's attribute before calling it: the write is pending (replayed
    after the graph), and the inlined call reads the new value; a replay checked on the live
    module would read the old one, so there is none."""
    class Setter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stack = Stack(3)

        def forward(self, x):
            x = self.stack.layers[0](x)
            self.stack.layers[1].scale = 4.0
            x = self.stack.layers[1](x)
            return self.stack.layers[2](x)

    torch.manual_seed(0)
    m = Setter()
    ref_model = Setter()
    ref_model.load_state_dict(m.state_dict())
    x = torch.randn(2, 16)
    out, _e, s, _c = _trace(m, (x,), True)
    torch.testing.assert_close(out, ref_model(x))
    assert m.stack.layers[1].scale == 4.0
    assert s.blocks_replayed >= 1  # layer 2 (nothing pending on it)


def test_a_replayed_guard_set_reads_back_as_the_same_text():
    """The disk cache hands a reader the code the writer compiled for the very same guard text:
    re-targeted guards must make the text an inlined trace makes (a predicate's own function
    each), or a warm start compiles the whole guard set again."""
    import builtins
    import marshal
    import sys
    from tracer.persist import guards_io
    from tracer.persist.portable import Reader, Writer

    torch.manual_seed(0)
    m = Stack(4)
    x = torch.randn(2, 16)
    _out, entry, s, _c = _trace(m, (x,), True)
    assert s.blocks_replayed >= 3
    gs = entry.guards
    L, G = (m, x), vars(sys.modules[__name__])
    frame = guards_io.FrameValues(L, G, None, vars(builtins))
    w = Writer()
    descs = marshal.loads(marshal.dumps(guards_io.write_guards(w, gs, frame)))
    groups = marshal.loads(marshal.dumps(guards_io.write_groups(w, gs)))
    assert groups and len(gs.groups) == len(groups)  # the blocks' guards are checked by groups
    back = guards_io.read_guards(Reader(), descs, frame, vars(builtins), gs.split, groups)
    assert set(back.groups) == set(gs.groups)
    assert back.source_code == gs.source_code
    assert back(L, G, None)


class _Helper(torch.nn.Module):
    def scale_of(self, x):
        return x * 1.0


class _Helper2(_Helper):
    def scale_of(self, x):
        return x * 100.0


class _ListLayer(torch.nn.Module):
    """Holds a plain list (not registered): its length and its items' classes are facts the
    layer's forward relies on."""

    def __init__(self, helper, n):
        super().__init__()
        self.mods, self.ks = [helper], [2.0] * n

    def forward(self, x):
        for k in self.ks:
            x = x * k
        return self.mods[0].scale_of(x) + 1


@pytest.mark.parametrize("twice", [True, False])
def test_a_value_wrapped_before_the_recorded_call_is_not_trusted_for_siblings(twice):
    """A layer called twice (`l(l(x))`), or whose list was read before its call: its second
    call is the first of its kind, and finds the list and the helper in the wrap memo, which
    adds no guard. Such a call is not recorded: the sibling (another list length, a helper of
    another class) is traced, and the answer is eager's (it was 3.8e4 away, found by review)."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([_ListLayer(_Helper(), 1), _ListLayer(_Helper2(), 3)])

        def forward(self, x):
            for layer in self.layers:
                if twice:
                    x = layer(layer(x))
                else:
                    x = layer(x * len(layer.ks))
            return x

    m, x = Model(), torch.randn(2, 4)
    tracer.reset()
    c = tracer.compile(m, backend="eager")
    with traced() as t:
        out = c(x)
    torch.testing.assert_close(out, m(x))
    assert (t.graph_breaks, t.internal_errors, t.fallbacks) == (0, 0, 0), t


# ---- calls of functions and methods (blocks.call_function) ----------------------------------

def _rotate(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def _rope(q, k, cos, sin):
    return q * cos + _rotate(q) * sin, k * cos + _rotate(k) * sin


class _Attn(torch.nn.Module):
    """Writes to a cache made in the frame (a side effect: the layer is never replayed), and
    calls helpers that can be: a function without a root, a method, a function given the
    module, and a config with its own __getattribute__."""

    def __init__(self, cfg, idx):
        super().__init__()
        self.cfg, self.idx = cfg, idx
        self.q, self.k = torch.nn.Linear(16, 16), torch.nn.Linear(16, 8)

    def _scale(self, t):
        return t * self.cfg.scale

    def forward(self, x, cos, sin, cache):
        q, k = _rope(self.q(x), self.k(x).repeat(1, 2), cos, sin)
        cache[self.idx] = k
        return _attend(self, self._scale(q), k)


def _attend(module, q, k):
    return torch.softmax(q @ k.transpose(-1, -2) / module.cfg.width, -1) @ k


class _Cfg:
    def __init__(self):
        self.scale, self.width = 0.5, 4.0

    def __getattribute__(self, name):
        if name == "width":
            return object.__getattribute__(self, "width") * 2
        return object.__getattribute__(self, name)


class _Model(torch.nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.cfg = _Cfg()
        self.layers = torch.nn.ModuleList(_Attn(self.cfg, i) for i in range(n))

    def forward(self, x):
        # (read here first, as HF models read their config: a shared object met first through
        # the first layer is checked again through each sibling, where an unrolled trace says
        # `layers[0].cfg is layers[1].cfg`: sound, but not the unrolled guard set)
        cos, sin = torch.cos(x[..., :16] * self.cfg.scale), torch.sin(x[..., :16])
        cache = {}
        for layer in self.layers:
            x = x + layer(x, cos, sin, cache)
        return x, sum(c.sum() for c in cache.values())


def test_helpers_of_layers_that_write_a_cache_are_replayed():
    torch.manual_seed(0)
    m = _Model()
    x = torch.randn(3, 16)
    # the layers are not blocks (their cache argument is made in the frame); their helpers
    # are: _rope (and _rotate in the first), _scale, _attend, __getattribute__, the Linears
    _check_same_as_unrolled(m, (x,), min_replays=3 * 4)
    # the replayed nodes name the modules and the lines around the replay, not the first call's
    _metadata_as_unrolled(m, (x,))


def test_a_store_between_two_calls_of_a_helper_is_read_by_the_second():
    """A helper reading a global that the frame sets again between the calls, one reading a
    list the frame stored in a global and then changed, and one reading an attribute of an
    input object set between the calls: each second call sees the new value."""
    class Obj:
        pass

    def f(x, obj):
        global _G, _L
        _G = 2.0
        a = _read_g(x)
        _G = 3.0
        b = _read_g(x)
        _L = []
        c = _read_l(x)
        _L.append(1)
        d = _read_l(x)
        obj.v = 5.0
        e = _read_obj(x, obj)
        obj.v = 7.0
        g = _read_obj(x, obj)
        return a, b, c, d, e, g

    x = torch.randn(4)
    obj = Obj()
    obj.v = 1.0
    ref = f(x, obj)
    obj.v = 1.0
    tracer.reset()
    tracer.reset_stats()
    with traced() as t:
        out = tracer.compile(f, backend="eager")(x, obj)
    torch.testing.assert_close(out, ref)
    assert t.frames_traced == 1 and t.graph_breaks == 0 and t.internal_errors == 0
    assert obj.v == 7.0 and _L == [1] and _G == 3.0


_G, _L = 1.0, []


def _read_g(x):
    return x * _G


def _read_l(x):
    return x + len(_L)


def _read_obj(x, obj):
    return x * obj.v


def test_a_kind_keeps_a_record_per_weight_shape():
    """Linears of two shapes called in turn: each shape's first call is recorded, and the
    later ones of both are replayed."""
    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))
            self.b = torch.nn.ModuleList(torch.nn.Linear(8, 4) for _ in range(3))

        def forward(self, x):
            return [a(x).sum(-1) + b(x).sum(-1) for a, b in zip(self.a, self.b)]

    torch.manual_seed(0)
    m = Two()
    _check_same_as_unrolled(m, (torch.randn(2, 8),), min_replays=4)


# ---- what a replay must not take for the same call (found by review) --------------------------

_SHARED = {"inner": {"k": [1]}}
_LIST = []


def _len_shared(x):
    return x * len(_SHARED["inner"]["k"])


def _append_shared(x):
    _SHARED["inner"]["k"].append(1)
    return x * 2


def _div(x, s):
    return x / s


def _by_dim(x):
    return x * 2 if x.dim() == 1 else x * 3


def _by_conj(z):
    return z * 2 if z.is_conj() else z * 3


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.sub = torch.nn.Module()
        self.sub.k = 1.0

    def forward(self, x):
        return self.lin(x) * (2.0 if self is _LIST[0] else 3.0) * self.sub.k


def _escaped_list(x):
    lst = []
    _SHARED["inner"]["k"] = lst   # a list made in the frame, reachable from a global now
    a = _len_shared(x)
    lst.append(1)                 # changed where no store is logged
    lst.append(1)
    return a, _len_shared(x)


def _escaped_append(x):
    lst = []
    _SHARED["inner"]["k"] = lst
    a, b = _append_shared(x), _append_shared(x)   # the second one's append must happen too
    return a, b, torch.tensor(float(len(lst)))


def _signed_zero(x):
    return _div(x, 0.0), _div(x, -0.0)


def _in_place_metadata(x):
    a = _by_dim(x).sum()
    x.unsqueeze_(0)
    return a, _by_dim(x).sum()


def _conj_bit(z):
    return _by_conj(z.view(z.shape)), _by_conj(z.conj())


def _root_found_again(x):
    return _LIST[0](x), _LIST[1](x)   # `self is _LIST[0]` is the root itself in the first call


def _store_through_an_alias(x):
    alias = _LIST[1].sub
    alias.k = 5.0                     # pending on the sibling, through another source
    return _LIST[0](x), _LIST[1](x)


@pytest.mark.parametrize("program,args", [
    (_escaped_list, lambda: (torch.ones(2),)),
    (_escaped_append, lambda: (torch.ones(2),)),
    (_signed_zero, lambda: (torch.ones(2),)),
    (_in_place_metadata, lambda: (torch.ones(3),)),
    (_conj_bit, lambda: (torch.ones(2, dtype=torch.complex64),)),
    (_root_found_again, lambda: (torch.ones(2),)),
    (_store_through_an_alias, lambda: (torch.ones(2),)),
], ids=lambda p: getattr(p, "__name__", ""))
def test_what_differs_between_two_calls_is_not_replayed(program, args):
    """Two calls of one kind that differ where no key, guard or logged store says so: each is
    traced as eager runs it (each of these returned the first call's value once)."""
    torch.manual_seed(0)
    _LIST[:] = [_Scaled(), _Scaled()]

    def reset():
        _SHARED["inner"]["k"] = [1]
        for m in _LIST:
            m.sub.k = 1.0
    reset()
    ref = program(*args())
    reset()
    tracer.reset()
    tracer.reset_stats()
    with traced() as t:
        out = tracer.compile(program, backend="eager")(*args())
    torch.testing.assert_close(out, ref)
    assert t.frames_traced == 1 and t.graph_breaks == 0 and t.internal_errors == 0 and t.fallbacks == 0
    reset()


def test_a_replay_names_the_modules_around_it_where_the_first_call_had_none():
    def helper(x):
        return torch.relu(x) * 2

    class Sub(torch.nn.Module):
        def forward(self, x):
            return helper(x)

    class Top(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = Sub(), Sub()

        def forward(self, x):
            y = self.a(x + 1)         # recorded inside `a`
            z = helper(y)             # replayed where no module is called
            return self.b(helper(z))  # (a record made outside a module, replayed inside `b`)

    m = Top()
    x = torch.randn(2)
    assert _metadata_as_unrolled(m, (x,)).blocks_replayed >= 2
