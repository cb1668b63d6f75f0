"""The HuggingFace zoo: tiny models from configs (random weights, nothing downloaded), run
as people run them, each beside torch.compile (tests/zoo/harness.py says what is checked).

`make test` runs one model per family; `ZOO=full` runs every model in eval and train mode.
"""
import os

import pytest
import torch

pytest.importorskip("transformers")

import harness  # noqa: E402  (tests/zoo is on sys.path: pytest's rootdir-relative import)
import hf_specs  # noqa: E402

SPECS = hf_specs.hf_specs()
FULL = os.environ.get("ZOO", "") == "full"
FAST = hf_specs.FAST
# Where the tracer splits more than torch.compile, and why (also in docs/semantics.md, "Real models").
KNOWN_SPLITS = {}

CASES = [(name, mode) for name in SPECS for mode in ("eval", "train")]


@pytest.mark.parametrize("name,mode", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_hf_model(name, mode):
    if not FULL and (name, mode) not in FAST:
        pytest.skip("full zoo: ZOO=full")
    family, build, inputs = SPECS[name]
    torch.manual_seed(0)
    model = build()
    train = mode == "train"
    counts = harness.check(model, lambda gen: inputs(gen, labels=train), train=train)
    # A split is a graph more than torch.compile makes. Breaks are counted per frame (a break
    # in a callee is one in each caller up the stack, in both tools, counted differently), so
    # a break is allowed only where torch.compile breaks too (wav2vec2 train: 10 graphs each;
    # our breaks also count a `with` whose manager torch.compile leaves to Python).
    known = (name, mode) in KNOWN_SPLITS
    assert counts.breaks == 0 or counts.tc_breaks > 0 or known, str(counts)
    assert counts.graphs <= counts.tc_graphs or known, str(counts)
    assert counts.fallbacks == 0, str(counts)
