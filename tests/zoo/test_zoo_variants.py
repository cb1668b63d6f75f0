"""The HuggingFace zoo called the other ways people call it (issue 9): with every layer's
attentions and hidden states returned, with tuples instead of ModelOutput (return_dict=False),
and under CPU autocast (bfloat16), each beside eager and torch.compile as in test_zoo_hf.py.

`make test` runs a few (model, variant) pairs; `ZOO=full` runs every model with every variant.
"""
import os

import pytest
import torch

pytest.importorskip("transformers")

import harness  # noqa: E402
import hf_specs  # noqa: E402

SPECS = hf_specs.hf_specs()
FULL = os.environ.get("ZOO", "") == "full"
FAST = {("llama", "outputs"), ("bert", "tuple"), ("gpt2", "autocast")}

# variant -> (extra keyword arguments, autocast dtype or None, tolerance)
VARIANTS = {
    "outputs": (dict(output_attentions=True, output_hidden_states=True), None, 1e-5),
    "tuple": (dict(return_dict=False), None, 1e-5),
    "autocast": ({}, torch.bfloat16, 2e-2),
}
CASES = [(name, v) for name in SPECS for v in VARIANTS]


def _eager_accepts(model, kwargs, dtype):
    """Whether the model runs this variant eagerly at all (some attention implementations
    refuse output_attentions; a vision model has no attention mask...): the variant is then
    not applicable, which is not the tracer's business."""
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            model(**kwargs)
        return None
    except Exception as e:  # noqa: BLE001 - any refusal by the model itself
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_hf_model_variant(name, variant):
    if not FULL and (name, variant) not in FAST:
        pytest.skip("full zoo: ZOO=full")
    family, build, inputs = SPECS[name]
    extra, dtype, tol = VARIANTS[variant]
    torch.manual_seed(0)
    model = build().eval()

    def make_inputs(gen):
        return {**inputs(gen, labels=False), **extra}

    refused = _eager_accepts(model, make_inputs(torch.Generator().manual_seed(0)), dtype)
    if refused:
        pytest.skip(f"eager {name} refuses the {variant} variant: {refused[:200]}")
    if dtype is None:
        counts = harness.check(model, make_inputs)
    else:
        def call(**kw):
            with torch.autocast("cpu", dtype=dtype):
                return model(**kw)
        counts = harness.check(model, make_inputs, call=call, atol=tol, rtol=tol)
    assert counts.fallbacks == 0, str(counts)
    assert counts.breaks == 0, str(counts)
    assert counts.graphs <= counts.tc_graphs, str(counts)
