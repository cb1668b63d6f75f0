"""Real decoding loops with dynamic shapes (issue 12): tiny HF GPT2 and LLaMA from configs
(random weights, nothing downloaded). The KV cache grows by one token per step: the tracer
must stay compiled (no fallback, no recompile limit), give eager's tokens, and compile no
more graphs than torch.compile does on the same loop (counted side by side here).
"""
import warnings

import pytest
import torch

import tracer

tf = pytest.importorskip("transformers")
STEPS = 24


def _gpt2():
    c = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64,
                      bos_token_id=0, eos_token_id=0)
    return tf.GPT2LMHeadModel(c)


def _llama():
    c = tf.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                       intermediate_size=64, vocab_size=100, max_position_embeddings=64)
    return tf.LlamaForCausalLM(c)


MODELS = {"gpt2": _gpt2, "llama": _llama}


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    tracer.reset()
    torch._dynamo.reset()


def _model(name):
    torch.manual_seed(0)
    return MODELS[name]().eval()


def greedy(forward, ids, steps=STEPS):
    """A manual greedy loop with past_key_values: the prompt, then one token per step."""
    past, cur, out = None, ids, []
    for _ in range(steps):
        o = forward(input_ids=cur, past_key_values=past, use_cache=True)
        past = o.past_key_values
        cur = o.logits[:, -1:].argmax(-1)
        out.append(cur)
    return torch.cat(out, 1)


def _torch_compile_count(run):
    from torch._dynamo.testing import CompileCounter
    counter = CompileCounter()
    out = run(lambda f: torch.compile(f, backend=counter))
    return out, counter.frame_count


def _tracer_count(run):
    out = run(lambda f: tracer.compile(f))
    s = tracer.stats()
    assert (s.fallbacks, s.recompile_limits, s.graph_breaks) == (0, 0, 0), str(s)
    return out, s.graphs


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_loop_with_kv_cache(name):
    ids = torch.randint(1, 100, (2, 8))
    with torch.no_grad():
        ref = greedy(_model(name), ids)

        def run(compile_):
            return greedy(compile_(_model(name)), ids)
        ours, our_graphs = _tracer_count(run)
        theirs, their_graphs = _torch_compile_count(run)
    assert torch.equal(ours, ref) and torch.equal(theirs, ref)
    assert our_graphs <= their_graphs, (our_graphs, their_graphs)
    assert our_graphs <= 3  # prompt, first step, then one symbolic graph for every cache length


@pytest.mark.parametrize("name", list(MODELS))
def test_generate(name):
    ids = torch.randint(1, 100, (2, 8))
    kw = dict(max_new_tokens=STEPS, do_sample=False, pad_token_id=0, attention_mask=torch.ones_like(ids))
    with torch.no_grad():
        ref = _model(name).generate(ids, **kw)

        def run(compile_):
            model = _model(name)
            model.forward = compile_(model.forward)  # as the HF docs do with torch.compile
            return model.generate(ids, **kw)
        ours, our_graphs = _tracer_count(run)
        theirs, their_graphs = _torch_compile_count(run)
    assert torch.equal(ours, ref) and torch.equal(theirs, ref)
    assert ref.shape == (2, 8 + STEPS)
    assert our_graphs <= their_graphs, (our_graphs, their_graphs)
