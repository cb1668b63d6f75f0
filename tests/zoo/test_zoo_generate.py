"""`model.generate()` across the zoo (issue 9): every decoder LM and encoder-decoder, greedy,
on a left-padded batch (as batched generation pads), with the model's forward compiled as
the HF docs do with torch.compile. Tokens equal eager's; no fallback, no recompile limit;
graphs no more than torch.compile makes on the same call (counted side by side); and a
second generate() with fresh prompts of the same shapes compiles nothing.

`make test` runs two models; `ZOO=full` runs every decoder and encoder-decoder.
"""
import os
import warnings

import pytest
import torch

pytest.importorskip("transformers")

import hf_specs  # noqa: E402
import torch._dynamo  # noqa: E402
from torch._dynamo.testing import CompileCounter  # noqa: E402

import tracer  # noqa: E402

SPECS = hf_specs.hf_specs()
FULL = os.environ.get("ZOO", "") == "full"
FAST = {"qwen2", "bart"}
NEW = 6
CASES = [name for name, (family, _b, _i) in SPECS.items() if family in ("decoder", "seq2seq")]


def _prompt(gen, family):
    ids = hf_specs.ids(gen)
    mask = hf_specs.left_padded() if family == "decoder" else hf_specs.right_padded()
    return ids, mask


def _generate(model, ids, mask):
    return model.generate(ids, attention_mask=mask, max_new_tokens=NEW, min_new_tokens=NEW,
                          do_sample=False, num_beams=1, pad_token_id=0, eos_token_id=None)


@pytest.mark.parametrize("name", CASES)
def test_generate(name):
    if not FULL and name not in FAST:
        pytest.skip("full zoo: ZOO=full")
    family, build, _inputs = SPECS[name]
    gen = torch.Generator().manual_seed(0)
    (ids1, mask1), (ids2, mask2) = _prompt(gen, family), _prompt(gen, family)

    def fresh_model():
        torch.manual_seed(0)
        return build().eval()

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager = fresh_model()
        ref1, ref2 = _generate(eager, ids1, mask1), _generate(eager, ids2, mask2)

        tracer.reset()
        tracer.reset_stats()
        model = fresh_model()
        model.forward = tracer.compile(model.forward)
        got1 = _generate(model, ids1, mask1)
        s1 = tracer.stats()
        got2 = _generate(model, ids2, mask2)
        s2 = tracer.stats()

        torch._dynamo.reset()
        counter = CompileCounter()
        theirs = fresh_model()
        theirs.forward = torch.compile(theirs.forward, backend=counter)
        _generate(theirs, ids1, mask1)
        torch._dynamo.reset()
        tracer.reset()

    assert torch.equal(got1, ref1) and torch.equal(got2, ref2)
    assert got1.shape[1] == ids1.shape[1] * (family == "decoder") + NEW + (family != "decoder")
    assert (s1.fallbacks, s1.recompile_limits, s1.internal_errors) == (0, 0, 0), str(s1)
    assert s1.graphs <= counter.frame_count, f"{s1.graphs} graphs; torch.compile: {counter.frame_count}\n{s1}"
    assert s2.frames_traced == s1.frames_traced, f"the second generate() traced again\n{s2}"
