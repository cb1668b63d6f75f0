"""Dynamic-shapes fuzz profile (issue 12): generated programs that compute with sizes, run
over call sequences whose sizes change; compiled == eager on every call, warm calls trace
nothing, no internal error, and the programs were captured (equality alone would pass a
silent whole-frame fallback: the capture floor is under what the CI programs reach, 100% on
2026-11-23). CI: a fixed set of programs (derandomized); the long run is
`python tests/fuzz/long_run_shapes.py` (or FUZZ_PROFILE=long for the hypothesis test)."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer
from fuzz_gen_shapes import generate_shapes, sequences
from fuzz_shapes_check import check_shapes


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


MIN_CAPTURE = 0.95


def _assert_captured(reports):
    missed = [r.fallback_reason for r in reports if not r.captured]
    assert len(missed) <= (1 - MIN_CAPTURE) * len(reports), (
        f"{len(missed)} of {len(reports)} programs ran whole as Python: {missed[:5]}")


def test_generated_shape_programs(request):
    reports = []

    @settings(settings.get_profile(request.config._fuzz_profile), max_examples=(
        40 if request.config._fuzz_profile == "fuzz-ci" else 1_000_000))
    @given(st.randoms(use_true_random=False))
    def check(rnd):
        tracer.reset()
        dynamic = rnd.choice([None, None, None, True])
        reports.append(check_shapes(generate_shapes(rnd), sequences(rnd), dynamic=dynamic))

    check()
    _assert_captured(reports)


def test_fixed_seeds(request):
    """A fixed seed range, the same every run (reproducible in CI)."""
    n = 25 if request.config._fuzz_profile == "fuzz-ci" else 2000
    reports = []
    for seed in range(n):
        tracer.reset()
        rnd = random.Random(20_000 + seed)
        reports.append(check_shapes(generate_shapes(rnd), sequences(rnd, seed),
                                    dynamic=None if seed % 4 else True))
    _assert_captured(reports)
