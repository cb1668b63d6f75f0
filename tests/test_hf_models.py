"""Real HuggingFace models from tiny configs with random weights (nothing downloaded):
tracer.compile must give eager's answer on the first and second call, and capture graphs.

Skipped when `transformers` is not installed (it is in the `test` extras)."""
import warnings

import pytest
import torch

import tracer

tf = pytest.importorskip("transformers")


def _gpt2():
    c = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                      bos_token_id=0, eos_token_id=0)
    return tf.GPT2LMHeadModel(c), dict(input_ids=torch.randint(0, 100, (2, 8))), "logits"


def _bert():
    c = tf.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                      vocab_size=100, max_position_embeddings=64)
    ids = torch.randint(0, 100, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 6:] = 0
    return tf.BertModel(c), dict(input_ids=ids, attention_mask=mask), "last_hidden_state"


def _llama():
    c = tf.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                       intermediate_size=64, vocab_size=100, max_position_embeddings=64)
    return tf.LlamaForCausalLM(c), dict(input_ids=torch.randint(0, 100, (2, 8))), "logits"


def _t5():
    c = tf.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_kv=16, num_heads=2, d_ff=64,
                    vocab_size=100)
    kw = dict(input_ids=torch.randint(0, 100, (2, 8)), decoder_input_ids=torch.randint(0, 100, (2, 5)))
    return tf.T5ForConditionalGeneration(c), kw, "logits"


def _vit():
    c = tf.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
                     image_size=16, patch_size=4)
    return tf.ViTModel(c), dict(pixel_values=torch.randn(2, 3, 16, 16)), "last_hidden_state"


MODELS = {"gpt2": _gpt2, "bert": _bert, "llama": _llama, "t5": _t5, "vit": _vit}


@pytest.fixture(autouse=True)
def _quiet():
    tracer.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    tracer.reset()


# Models the tracer captures whole today (the others still break: see the README).
WHOLE = {"gpt2", "llama", "vit"}


@pytest.mark.parametrize("name", list(MODELS))
def test_tiny_hf_model_matches_eager(name):
    torch.manual_seed(0)
    model, kwargs, key = MODELS[name]()
    model.eval()
    with torch.no_grad():
        ref = getattr(model(**kwargs), key)
        rep = tracer.explain(model, **kwargs)
        assert torch.allclose(getattr(rep.result, key), ref, atol=1e-5)
        assert rep.graph_count >= 1 and rep.op_count > 0, str(rep)
        if name in WHOLE:  # captured like TorchDynamo: one graph, no break
            assert (rep.graph_count, rep.break_count) == (1, 0), str(rep)
        tracer.reset()
        compiled = tracer.compile(model)
        for _ in range(2):  # first call traces, second runs from the cache
            out = getattr(compiled(**kwargs), key)
            assert torch.allclose(out, ref, atol=1e-5)
