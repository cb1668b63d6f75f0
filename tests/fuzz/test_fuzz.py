"""Generated programs: compiled == eager (results, input mutation, prints, globals,
exception types), on the first inputs, the cache-hit path, and changed shapes, dtype,
constants and list lengths. See fuzz_gen.py (the generator) and fuzz_harness.py (the check).

CI runs a bounded number of examples; `FUZZ_PROFILE=long pytest tests/fuzz` (or `--long`)
runs for hours; `tests/fuzz/long_run.py` loops over a seed range without hypothesis.
Failures found are kept as fixed programs in test_regressions.py.
"""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracer
from fuzz_gen import generate
from fuzz_harness import check_source


@pytest.fixture(autouse=True)
def _fresh(request):
    tracer.reset()
    yield
    tracer.reset()


def _profile(request):
    return settings.get_profile(request.config._fuzz_profile)


def test_generated_programs(request):
    @settings(_profile(request))
    @given(st.randoms(use_true_random=False))
    def check(rnd):
        check_source(generate(rnd))

    check()


def test_fixed_seeds_deeper_nesting(request):
    """A fixed seed range with deeper nesting, the same every run (reproducible in CI)."""
    n = 40 if request.config._fuzz_profile == "fuzz-ci" else 5000
    for seed in range(n):
        check_source(generate(random.Random(10_000 + seed), max_depth=3), n_inputs=4)
