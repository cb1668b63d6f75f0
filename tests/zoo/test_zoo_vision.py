"""The vision zoo (issue 32): timm, torchvision and diffusers models from tiny configs (random
weights, nothing downloaded), run as people run them, each beside torch.compile
(tests/zoo/harness.py says what is checked: outputs and gradients equal eager's, on the first
call and on fresh inputs; warm calls compile nothing; graphs and breaks counted beside
torch.compile's).

The libraries install with the extra "vision" (`make test TORCH=2.14.1 EXTRAS=test,vision`:
torchvision is built for one torch); without them every case skips. `make test` runs the
FAST subset (one model per library and family that differ in what they exercise); `ZOO=full`
runs every model in eval and, where users train it, train mode.

Detectors keep a data-dependent number of boxes, so fresh inputs change sizes inside them:
they are checked with `warm="like_tc"`: no more frames traced again, and no more graphs
compiled again, than torch.compile on the same calls (both counted alike: harness.tc_counts).
What lets the tracer trace fewer again is rewrite/handoff.py: sizes that are dynamic where a
value comes from stay dynamic across graph breaks.
"""
import os
import warnings

import pytest

import tracer

import harness  # noqa: E402  (tests/zoo is on sys.path: pytest's rootdir-relative import)
import vision_specs  # noqa: E402

SPECS = vision_specs.vision_specs()
FULL = os.environ.get("ZOO", "") == "full"
FAST = {("timm_efficientnet_b0", "eval"), ("timm_vit", "train"), ("tv_swin3d", "eval"),
        ("tv_fasterrcnn", "eval"), ("diffusers_unet2d", "eval"), ("diffusers_ddim_loop", "eval")}
# Where the tracer makes more graphs than torch.compile, and why (the same table is in
# benchmarks/vision_zoo.md).
KNOWN_SPLITS = {
    ("tv_maskrcnn", "eval"): "62 graphs to 44: paste_mask_in_image runs per mask, with int() of box "
                             "coordinates and max(tensor, 0) giving an int or a tensor by value; its "
                             "resume functions retrace per mask until the recompile limit",
    ("tv_retinanet", "eval"): "9 graphs to 5: the per-image comprehension frames are traced on their "
                              "own and retrace once per image (the index they capture is guarded by "
                              "value); torch.compile skips frames with no tensor in their locals",
}
# Frames run as Python for a reason of their own, per model (paste_mask_in_image writes a slice
# whose bounds come from int() of box coordinates).
KNOWN_FALLBACKS = {("tv_maskrcnn", "eval"): ("slice with non-constant bounds",)}
# Where the recompile limit is reached (the frame then runs as Python, with the warning).
KNOWN_LIMITS = {("tv_maskrcnn", "eval")}
LAZY_ITERATORS = ("lazy iterator escapes", "value of type enumerate", "value of type zip")

CASES = [(name, mode) for name, spec in SPECS.items() for mode in ("eval", "train")
         if mode == "eval" or spec[4]]
if not SPECS:
    CASES = [("no vision library", "eval")]


@pytest.mark.parametrize("name,mode", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_vision_model(name, mode):
    if not SPECS:
        pytest.skip("torchvision, timm and diffusers are not installed (the extra 'vision')")
    if not FULL and (name, mode) not in FAST:
        pytest.skip("full zoo: ZOO=full")
    import torch
    lib, family, build, inputs, _ = SPECS[name]
    torch.manual_seed(0)
    model = build()
    train = mode == "train"
    detection = family == "detection"
    with warnings.catch_warnings():
        if (name, mode) in KNOWN_LIMITS:
            warnings.simplefilter("ignore", tracer.RecompileLimitWarning)
        counts = harness.check(model, lambda gen: inputs(gen, train), train=train,
                               warm="like_tc" if detection else True, atol=1e-4, rtol=1e-3)
    known = (name, mode) in KNOWN_SPLITS
    assert counts.graphs <= counts.tc_graphs or known, str(counts)
    # frames run as Python: only those with a break inside a loop (as torch.compile runs them)
    # and the detectors' lazy iterators: a `for` over zip() that breaks, and a 3.11
    # comprehension frame whose iterator argument is an enumerate object (LAZY_ITERATORS)
    other = {r: n for r, n in counts.fallback_reasons.items()
             if "a break inside a loop" not in r
             and not any(k in r for k in LAZY_ITERATORS + KNOWN_FALLBACKS.get((name, mode), ()))}
    assert not other, str(counts)
    if detection:  # fresh images: no more traced again than torch.compile converts again
        assert counts.warm_frames <= counts.tc_warm_frames, str(counts)
        assert counts.warm_graphs <= counts.tc_warm_graphs, str(counts)
