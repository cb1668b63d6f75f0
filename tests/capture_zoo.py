"""Real models for capture() vs compile(): stock torch.nn modules (one sample of each entry
of torch's own `module_db`, the Transformer family with several), a few user models, and tiny
HuggingFace models from configs (random weights, nothing downloaded).

`zoo()` yields `Case`s; `run_case` runs one under eager, `tracer.compile` and
`tracer.capture` and returns what each did (outputs, ops, graphs, frames traced, and what a
warm call under capture traced). Shared by tests/test_capture_models.py and
benchmarks/capture_models.py.
"""
import copy
import dataclasses
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

# module_db entries whose sample is not a deterministic forward of a plain module.
_SKIP_DB = {
    "nn.LinearCrossEntropyLoss",   # 857 samples, none small
    "nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d",  # sample's _random_samples dtype fails eager
}
# Several samples for these (masks, batch_first, norm_first, need_weights...).
_MANY_SAMPLES = {"nn.MultiheadAttention": 6, "nn.TransformerEncoderLayer": 4, "nn.TransformerEncoder": 3,
                 "nn.TransformerDecoderLayer": 3, "nn.Transformer": 3, "nn.Embedding": 2,
                 "nn.LSTM": 2, "nn.CrossEntropyLoss": 3, "nn.NLLLoss": 2}


@dataclasses.dataclass
class Case:
    name: str
    make: object          # () -> (module, args, kwargs), fresh each time
    train: bool = False


def _db_cases(device="cpu"):
    """One `Case` per module_db sample (several for the entries in _MANY_SAMPLES), the module
    and its inputs on `device`."""
    try:
        from torch.testing._internal.common_modules import module_db
    except ImportError:  # needs `expecttest` (test extras)
        return []
    cases = []
    for info in module_db:
        if info.name in _SKIP_DB:
            continue
        try:
            samples = info.module_inputs_func(info, device=device, dtype=torch.float32,
                                              requires_grad=False, training=False)
        except Exception:  # noqa: BLE001 - a sample generator that needs something we lack
            continue
        for k, sample in enumerate(samples[:_MANY_SAMPLES.get(info.name, 1)]):
            cases.append(Case(f"{info.name}[{k}]", _db_maker(info, sample, device)))
    return cases


class Caller(nn.Module):
    """Calls a stock module from a user module's forward: the stock module is then traced
    into (inlined), not compiled as the root."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, *args, **kwargs):
        return self.m(*args, **kwargs)


def _db_maker(info, sample, device="cpu"):
    def make():
        torch.manual_seed(0)
        ci = sample.constructor_input
        m = info.module_cls(*ci.args, **ci.kwargs).to(device)
        m.eval()
        fi = sample.forward_input
        return m, tuple(fi.args), dict(fi.kwargs)
    return make


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.out(torch.tanh(self.fc2(F.relu(self.fc1(x)))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
        self.conv2, self.bn2 = nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(torch.flatten(x, 1))


class TinyGPT(nn.Module):
    def __init__(self, vocab=50, d=32, heads=2, layers=2):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Embedding(16, d)
        layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, ids):
        h = self.emb(ids) + self.pos(torch.arange(ids.shape[1]))
        n = ids.shape[1]
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return self.head(self.norm(self.blocks(h, mask=mask, is_causal=True)))


def _user_cases():
    def mk(cls, *shape, ids=False):
        def make():
            torch.manual_seed(0)
            m = cls().eval()
            x = torch.randint(0, 50, shape) if ids else torch.randn(*shape)
            return m, (x,), {}
        return make
    return [Case("user.MLP", mk(MLP, 4, 8)), Case("user.CNN", mk(CNN, 2, 3, 8, 8)),
            Case("user.TinyGPT", mk(TinyGPT, 2, 8, ids=True))]


def _hf_cases():
    try:
        import transformers as tf
    except ImportError:
        return []

    def gpt2():
        c = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                          bos_token_id=0, eos_token_id=0)
        return tf.GPT2LMHeadModel(c), (), dict(input_ids=torch.randint(0, 100, (2, 8)))

    def llama():
        c = tf.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                           intermediate_size=64, vocab_size=100, max_position_embeddings=64)
        return tf.LlamaForCausalLM(c), (), dict(input_ids=torch.randint(0, 100, (2, 8)))

    def vit():
        c = tf.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                         image_size=16, patch_size=4)
        return tf.ViTModel(c), (), dict(pixel_values=torch.randn(2, 3, 16, 16))

    def seeded(fn):
        def make():
            torch.manual_seed(0)
            m, a, k = fn()
            return m.eval(), a, k
        return make
    return [Case("hf.gpt2", seeded(gpt2)), Case("hf.llama", seeded(llama)), Case("hf.vit", seeded(vit))]


def zoo(hf=True):
    return _db_cases() + _user_cases() + (_hf_cases() if hf else [])


# ---- running one case -----------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    eager: object
    compiled: object
    captured: object
    compile_stats: object
    capture_stats: object
    warm_stats: object      # stats after a second call under capture (same inputs)


def _call(m, args, kwargs):
    torch.manual_seed(1)
    with torch.no_grad():
        return m(*args, **kwargs)


def _captured_call(m, args, kwargs):
    """`model(...)` inside capture(), with no frame of ours in between."""
    torch.manual_seed(1)
    with torch.no_grad(), tracer.capture():
        return m(*args, **kwargs)


def run_case(case):
    """Eager, compile() and capture() on fresh copies of one model (caches reset between)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m, args, kwargs = case.make()
        eager = _call(m, args, kwargs)  # (also materialises lazy modules)
        m_c, m_k = copy.deepcopy(m), copy.deepcopy(m)

        tracer.reset()
        tracer.reset_stats()
        compiled = _call(tracer.compile(m_c), args, kwargs)
        compile_stats = tracer.stats()

        tracer.reset()
        tracer.reset_stats()
        captured = _captured_call(m_k, args, kwargs)
        capture_stats = tracer.stats()
        _captured_call(m_k, args, kwargs)
        warm_stats = tracer.stats()
        tracer.reset()
    return Result(eager, compiled, captured, compile_stats, capture_stats, warm_stats)


def same(a, b, atol=1e-5):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and torch.allclose(a, b, atol=atol, equal_nan=True))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y, atol) for x, y in zip(a, b))
    if hasattr(a, "to_tuple"):  # HuggingFace ModelOutput: its tensors (a cache object is not compared)
        return type(a) is type(b) and list(a.keys()) == list(b.keys()) and all(
            same(a[k], b[k], atol) for k in a.keys() if isinstance(a[k], torch.Tensor))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k], atol) for k in a)
    return a == b
