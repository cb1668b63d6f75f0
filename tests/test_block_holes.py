"""Repeated blocks that hand an object made in the frame (a KV cache) to calls: the calls are
traced again where the block is replayed (tracer/variables/block_holes.py). Every program is
compared with eager, and the replayed trace with the unrolled one (graph, guards, metadata)."""
import pytest
import torch

import tracer
from tracer.runtime import config
from tracer.variables import block_holes

from test_blocks import _check_same_as_unrolled, _metadata_as_unrolled, _trace, tiny_llama


class Cache:
    """A KV cache as HF's DynamicCache keeps one: a list of per-layer entries, filled lazily."""

    def __init__(self, n):
        self.layers = [CacheLayer() for _ in range(n)]

    def update(self, k, v, idx):
        return self.layers[idx].update(k, v)


class CacheLayer:
    def __init__(self):
        self.ready = False

    def update(self, k, v):
        if not self.ready:
            self.keys, self.values, self.ready = k[:, :0], v[:, :0], True
        self.keys = torch.cat([self.keys, k], dim=1)
        self.values = torch.cat([self.values, v], dim=1)
        return self.keys, self.values


class Attn(torch.nn.Module):
    def __init__(self, idx, d=16):
        super().__init__()
        self.idx = idx
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x, cache):
        q, k, v = self.q(x), self.k(x), self.v(x)
        if cache is not None:
            k, v = cache.update(k, v, self.idx)
        w = torch.softmax(q @ k.transpose(-1, -2) / 4.0, dim=-1)
        return self.o(w @ v)


class Layer(torch.nn.Module):
    def __init__(self, idx, d=16):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.attn = Attn(idx, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))

    def forward(self, x, cache=None):
        x = x + self.attn(self.norm(x), cache)
        return x + self.mlp(x)


class Model(torch.nn.Module):
    def __init__(self, n=4, layer=Layer):
        super().__init__()
        self.layers = torch.nn.ModuleList(layer(i) for i in range(n))

    def forward(self, x):
        cache = Cache(len(self.layers))
        for layer in self.layers:
            x = layer(x, cache)
        return x, cache


def _replays(fn, args):
    """How many calls of each function were replayed, and the result."""
    counts = {}
    orig = tracer.variables.blocks.Block.replay

    def spy(self, tx, var, a, k):
        r = orig(self, tx, var, a, k)
        if r is not None:
            counts[self.fn.__qualname__] = counts.get(self.fn.__qualname__, 0) + 1
        return r
    tracer.variables.blocks.Block.replay = spy
    try:
        out, entry, s, compiled = _trace(fn, args, True)
    finally:
        tracer.variables.blocks.Block.replay = orig
    return counts, out, compiled


def _cache_state(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


def test_layers_writing_a_cache_made_in_the_frame_are_replayed():
    torch.manual_seed(0)
    m = Model(5).eval()
    x = torch.randn(2, 3, 16)
    counts, (out, cache), compiled = _replays(m, (x,))
    ref, ref_cache = m(x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(_cache_state(cache), _cache_state(ref_cache))
    # (layer 0 takes the frame's input, another kind than the layers after it; its attention
    # does not: it is recorded there and replayed in the four others)
    assert counts.get("Layer.forward") == 3 and counts.get("Attn.forward") == 4, counts
    # later calls, other values
    x2 = torch.randn(2, 3, 16)
    out2, cache2 = compiled(x2)
    ref2, ref_cache2 = m(x2)
    torch.testing.assert_close(out2, ref2)
    torch.testing.assert_close(_cache_state(cache2), _cache_state(ref_cache2))
    assert tracer.stats().frames_traced == 1
    # the graph, the guards and each node's module stack and stack trace are the unrolled trace's
    def first(t):
        return m(t)[0]
    _check_same_as_unrolled(first, (x,), min_replays=8)
    _metadata_as_unrolled(first, (x,))


def test_with_gradients():
    torch.manual_seed(0)
    m = Model(4)
    x = torch.randn(2, 3, 16, requires_grad=True)
    counts, (out, _cache), _c = _replays(m, (x,))
    assert counts.get("Layer.forward") == 2, counts
    out.sum().backward()
    grads = [p.grad.clone() for p in m.parameters()] + [x.grad.clone()]
    m.zero_grad()
    x.grad = None
    ref, _ = m(x)
    ref.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grads, [p.grad for p in m.parameters()] + [x.grad])


class ReadsCache(Layer):
    def forward(self, x, cache=None):
        x = super().forward(x, cache)
        return x * len(cache.layers[0].keys[0])  # the cache's state, read by the layer itself


class UsesIndex(Attn):
    def forward(self, x, cache):
        return super().forward(x, cache) * (self.idx + 1)  # the index, used outside the call


class UsesIndexLayer(Layer):
    def __init__(self, idx, d=16):
        super().__init__(idx, d)
        self.attn = UsesIndex(idx, d)


class PrefilledCache(Cache):
    def __init__(self, n):
        super().__init__(n)
        for i in range(0, n, 2):  # every other layer has two cached positions already
            self.layers[i].update(torch.zeros(2, 2, 16), torch.zeros(2, 2, 16))


class PrefilledModel(Model):
    def forward(self, x):
        cache = PrefilledCache(len(self.layers))
        for layer in self.layers:
            x = layer(x, cache)
        return x, cache


class CountingCache(Cache):
    def update(self, k, v, idx):
        keys, values = self.layers[idx].update(k, v)
        return keys * len(self.layers[: idx + 1]), values  # another scale per layer: a constant


class ShadowingCache(Cache):
    def update(self, k, v, idx):
        if idx == 1:
            self.update = lambda k, v, idx: (k, v)  # an instance attribute from now on
        return super().update(k, v, idx)


def _model_with(cache_cls):
    class M(Model):
        def forward(self, x):
            cache = cache_cls(len(self.layers))
            for layer in self.layers:
                x = layer(x, cache)
            return x
    return M


@pytest.mark.parametrize("model", [
    lambda: Model(4, ReadsCache),
    lambda: Model(4, UsesIndexLayer),
    lambda: PrefilledModel(4),
    lambda: _model_with(CountingCache)(4),
    lambda: _model_with(ShadowingCache)(4),
], ids=["reads-cache", "uses-index", "prefilled", "result-differs", "shadowed-method"])
def test_what_a_replay_cannot_promise_is_traced(model):
    """A layer that reads the cache itself, uses its index outside the call, or whose cache
    call comes back otherwise for a sibling (another shape, another constant, an instance
    attribute shadowing the method) gives eager's answer: traced, or traced again without
    replaying that layer."""
    torch.manual_seed(0)
    m = model().eval()
    x = torch.randn(2, 3, 16)
    def first(r):
        return r[0] if isinstance(r, tuple) else r
    out, _entry, s, compiled = _trace(m, (x,), True)
    torch.testing.assert_close(first(out), first(m(x)))
    x2 = torch.randn(2, 3, 16)
    torch.testing.assert_close(first(compiled(x2)), first(m(x2)))
    assert s.internal_errors == 0 and s.fallbacks == 0


def test_a_replay_that_differs_is_traced_again_without_it():
    torch.manual_seed(0)
    m = PrefilledModel(4).eval()
    x = torch.randn(2, 3, 16)
    block_holes._NO_HOLES.clear()
    counts, (out, cache), _c = _replays(m, (x,))
    ref, ref_cache = m(x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(_cache_state(cache), _cache_state(ref_cache))
    # (the cache of the layer after a prefilled one came back longer: its attention is inlined)
    assert Attn.forward in block_holes._NO_HOLES
    block_holes._NO_HOLES.clear()


class CacheInTry(Layer):
    def forward(self, x, cache=None):
        try:
            h = self.attn(self.norm(x), cache)
        except KeyError:
            h = 0
        return x + h + self.mlp(x)


class CacheInList(Layer):
    def forward(self, x, cache=None):
        return x + self._attend(self.norm(x), [cache])  # handed on in a list: not a hole

    def _attend(self, h, box):
        return self.attn(h, box[0])


@pytest.mark.parametrize("layer", [CacheInTry, CacheInList], ids=["try", "list"])
def test_layers_that_are_not_replayed_stay_correct(layer):
    torch.manual_seed(0)
    m = Model(4, layer).eval()
    x = torch.randn(2, 3, 16)
    counts, (out, cache), _c = _replays(m, (x,))
    ref, ref_cache = m(x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(_cache_state(cache), _cache_state(ref_cache))
    assert "Layer.forward" not in counts and f"{layer.__name__}.forward" not in counts


def test_tiny_llama_with_its_cache():
    model, ids = tiny_llama()
    counts, out, compiled = _replays(lambda i: model(i), (ids,))
    ref = model(ids)
    torch.testing.assert_close(out.logits, ref.logits)
    for layer, ref_layer in zip(out.past_key_values.layers, ref.past_key_values.layers):
        torch.testing.assert_close((layer.keys, layer.values), (ref_layer.keys, ref_layer.values))
    assert counts.get("LlamaAttention.forward") == 3, counts  # (the decoder layers too, around them)
    # a decode step from the returned cache (an input now: its writes are stores, not replayed)
    nxt = torch.randint(0, 64, (1, 1))
    step = tracer.compile(lambda i, c: model(i, past_key_values=c).logits, backend="eager")
    ref_step = model(nxt, past_key_values=ref.past_key_values).logits
    torch.testing.assert_close(step(nxt, out.past_key_values), ref_step)
    _check_same_as_unrolled(lambda i: model(i).logits, (ids,), min_replays=3)


def test_reuse_blocks_off_traces_every_layer():
    torch.manual_seed(0)
    m = Model(3).eval()
    x = torch.randn(2, 3, 16)
    config.reuse_blocks = False
    try:
        out, _ = tracer.compile(m, backend="eager")(x)
    finally:
        config.reuse_blocks = True
    torch.testing.assert_close(out, m(x)[0])


# ---- programs from the review of the mechanism: each gave a wrong value or an internal error --

class Peek:
    def __init__(self, first=None):
        self.first, self.kept, self.n, self.seen = first, None, 0, []

    def peek(self):
        return self.first

    def store(self, t):
        if self.kept is None:
            self.kept = t

    def load(self):
        return self.kept

    def tick(self, layer):
        self.n += 1
        if self.n == 3:
            layer.layer_idx = 99  # only the third layer's call stores

    def update(self, k, idx):
        self.seen.append(idx)
        return k * 2

    def begin(self):
        self.n += 1
        if self.n >= 3:
            torch.set_grad_enabled(False)

    def end(self):
        torch.set_grad_enabled(True)

    def grad_update(self, k):
        self.seen.append(torch.is_grad_enabled())
        return k.detach() * (2 if torch.is_grad_enabled() else 3)

    def touch(self, t):
        self.n += 1
        if self.n == 3:
            t.unsqueeze_(0)


class Small(torch.nn.Module):
    def __init__(self, i, body):
        super().__init__()
        self.lin, self.layer_idx, self.body = torch.nn.Linear(4, 4), i, body

    def forward(self, x, cache, inp):
        return self.body(self, x, cache, inp)


def _peek(self, x, cache, inp):  # the hole returns the block's own argument (layer 0's x)
    return self.lin(x) + cache.peek()


def _stored(self, x, cache, inp):  # ... a tensor the block made and an earlier hole kept
    k = self.lin(x)
    cache.store(k)
    return k + 10 * cache.load()


def _returned(self, x, cache, inp):  # ... and the block returns it
    return self.lin(x) + cache.peek()


def _store_then_pass(self, x, cache, inp):  # a hole stores on the module; the next gets its int
    cache.tick(self)
    return x + cache.update(self.lin(x), self.layer_idx)


def _grad_toggle(self, x, cache, inp):  # a hole turns grad mode off on some layers only
    k = self.lin(x)
    cache.begin()
    y = k * 2 if torch.is_grad_enabled() else k * 3
    cache.end()
    return x + y


def _grad_off_around(self, x, cache, inp):  # the block's own code turns grad off around a hole
    k = self.lin(x)
    torch.set_grad_enabled(False)
    k2 = cache.grad_update(k)
    torch.set_grad_enabled(True)
    return x + k2


def _input_changed(self, x, cache, inp):  # a hole changes an input's shape on one layer
    cache.touch(inp)
    return self.lin(x) + inp.sum() + inp.dim()


class Frame(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.layers = torch.nn.ModuleList(Small(i, body) for i in range(4))

    def forward(self, inp):
        x = inp * 1
        cache = Peek(x)
        for layer in self.layers:
            x = layer(x, cache, inp)
        return x, cache.seen, inp.shape


@pytest.mark.parametrize("body", [_peek, _stored, _returned, _store_then_pass, _grad_toggle, _grad_off_around,
                                  _input_changed])
@pytest.mark.parametrize("grad", [False, True])
def test_review_programs(body, grad):
    """Compiled equals eager (outputs, what the cache saw, the input's shape after, the
    modules' attributes after), whatever the replay of the layers decided."""
    if grad and body is _input_changed:
        pytest.skip("unsqueeze_ of a leaf that requires grad raises in eager")
    torch.manual_seed(0)
    a = torch.randn(2, 4, requires_grad=grad)
    m = Frame(body)
    try:
        ref = m(a.detach().clone().requires_grad_(grad))
        after = [layer.layer_idx for layer in m.layers]
        for i, layer in enumerate(m.layers):
            layer.layer_idx = i
        out, _entry, _s, _c = _trace(m, (a.detach().clone().requires_grad_(grad),), True)
    finally:
        torch.set_grad_enabled(True)
    torch.testing.assert_close(out[0], ref[0])
    assert out[1:] == ref[1:]
    assert [layer.layer_idx for layer in m.layers] == after


class PeekLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, cache):
        y = cache.peek()  # layer 0's cache hands back layer 0's own argument, before its use
        return self.lin(x) + y


class PeekFrame(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(PeekLayer() for _ in range(4))


class FirstCache:
    def __init__(self):
        self.first = None

    def peek(self):
        return self.first


class PeekFrame2(PeekFrame):
    def forward(self, inp):  # (layer 0's cache hands back layer 0's own argument)
        x = inp * 1
        cache = FirstCache()
        cache.first = x
        for layer in self.layers:
            x = layer(x, cache)
        return x


def test_a_hole_that_returned_the_block_argument():
    torch.manual_seed(0)
    m, a = PeekFrame2(), torch.randn(2, 4)
    with torch.no_grad():
        out, _entry, _s, _c = _trace(m, (a,), True)
        torch.testing.assert_close(out, m(a))


def test_a_sibling_without_the_attribute_it_hands_on():
    torch.manual_seed(0)
    m = Frame(_store_then_pass)
    del m.layers[3].layer_idx
    a = torch.randn(2, 4)
    with pytest.raises(AttributeError):
        m(a)
    tracer.reset()
    tracer.reset_stats()
    with pytest.raises(AttributeError):
        tracer.compile(m, backend="eager")(a)
    assert tracer.stats().internal_errors == 0


class BufCache:
    def __init__(self):
        self.n = 0

    def touch(self, layer, k):
        self.n += 1
        if self.n == 3:
            layer.buf.unsqueeze_(0)  # only layer 2's call changes its buffer's shape
        return k * 2


class BufLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("buf", torch.zeros(4))

    def forward(self, x, cache):
        k = cache.touch(self, self.lin(x))  # a hole given the module itself
        return x + k + (1.0 if self.buf.dim() == 1 else 100.0)  # the buffer's shape, read after it


class BufFrame(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(BufLayer() for _ in range(4))

    def forward(self, x):
        cache = BufCache()
        for layer in self.layers:
            x = layer(x, cache)
        return x, [layer.buf.dim() for layer in self.layers]


def test_a_hole_that_changes_the_shape_of_a_tensor_it_reaches():
    """(second review) A tensor the hole reaches through the module, not as an argument."""
    torch.manual_seed(0)
    a = torch.randn(2, 4)
    ref = BufFrame()
    m = BufFrame()
    m.load_state_dict(ref.state_dict())
    with torch.no_grad():
        expected = ref(a)
        out, _entry, _s, _c = _trace(m, (a,), True)
    torch.testing.assert_close(out[0], expected[0])
    assert out[1] == expected[1] == [1, 1, 2, 1]


def _scaled_update(scale):
    def update(cache, k):  # a closure per layer: the same code, another cell
        cache.seen.append(scale)
        return k * scale
    return update


class ClosureLayer(torch.nn.Module):
    def __init__(self, i):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.update = _scaled_update(float(i + 1))

    def forward(self, x, cache):
        return x + self.update(cache, self.lin(x))  # the hole's function is the sibling's own


class ClosureFrame(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(ClosureLayer(i) for i in range(4))

    def forward(self, x):
        cache = Peek()
        for layer in self.layers:
            x = layer(x, cache)
        return x, cache.seen


def test_a_hole_calls_the_siblings_own_function():
    torch.manual_seed(0)
    m, a = ClosureFrame(), torch.randn(2, 4)
    with torch.no_grad():
        counts, out, _c = _replays(m, (a,))
        ref = m(a)
    torch.testing.assert_close(out[0], ref[0])
    assert out[1] == ref[1] == [1.0, 2.0, 3.0, 4.0]
    assert counts.get("ClosureLayer.forward", 0) >= 2, counts
    _check_same_as_unrolled(lambda t: m(t)[0], (a,), min_replays=2)


def test_hf_decoders_with_their_cache_are_the_unrolled_trace():
    """Mixtral's layers call the forward their checkpointing wrapper closes over: the hole's
    function is that same Variable again, whose defaults are guarded as in the unrolled trace."""
    pytest.importorskip("transformers")
    from zoo.hf_specs import hf_specs
    for name in ("mixtral", "gpt2"):
        _family, build, inputs = hf_specs()[name]
        torch.manual_seed(0)
        model = build().eval()
        kw = inputs(torch.Generator().manual_seed(0))
        names = sorted(kw)

        def call(*a):
            return model(**dict(zip(names, a))).logits
        with torch.no_grad():
            _check_same_as_unrolled(call, tuple(kw[k] for k in names), min_replays=1)
