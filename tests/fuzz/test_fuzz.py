"""Generated programs: compiled == eager (results, returned inputs, input mutation, gradients,
prints, globals, exceptions with their messages and chains), on the first inputs, the
cache-hit path, aliased inputs, inputs that require grad, and changed shapes, dtype,
constants and list lengths. See fuzz_gen.py and fuzz_shapes.py (the generator) and
fuzz_harness.py (the check).

Equality alone would pass a program whose frame silently ran as Python, so each test also
asserts what was captured, over all its programs: the share of programs whose `f` was traced
(not a whole-frame fallback), ops captured, and the share of calls with the same shapes as an
earlier call that traced nothing (a call with the same inputs again must trace nothing unless
the program keeps state between calls: the harness fails that program). The thresholds are
floors under what the fixed CI programs reach today (measured: see the report of issue 16),
so a change that loses capture fails here.

CI runs a bounded number of examples; `FUZZ_PROFILE=long pytest tests/fuzz` (or `--long`)
runs for hours; `tests/fuzz/long_run.py` loops over a seed range without hypothesis.
Failures found are kept as fixed programs in test_regressions.py.
"""
import collections
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


class Tally:
    """What the tracer made of a batch of programs (from each program's Report)."""

    def __init__(self):
        self.n = self.captured = self.ops = self.warm_calls = self.warm_hits = 0
        self.fallbacks = collections.Counter()

    def add(self, rep):
        self.n += 1
        self.captured += rep.captured
        self.ops += rep.ops
        self.warm_calls += rep.warm_calls
        self.warm_hits += rep.warm_hits
        if not rep.captured:
            self.fallbacks[(rep.fallback_reason or "?").split(" at ")[0]] += 1

    def check(self, min_capture, min_hits, min_ops):
        text = (f"{self.n} programs: captured {self.captured}, ops {self.ops}, cache hits "
                f"{self.warm_hits}/{self.warm_calls}; whole-frame fallbacks: {dict(self.fallbacks)}")
        assert self.n > 0, text
        assert not [r for r in self.fallbacks if "internal error" in r], text
        assert self.captured >= min_capture * self.n, text
        assert self.warm_hits >= min_hits * self.warm_calls, text
        assert self.ops >= min_ops * self.n, text


def test_generated_programs(request):
    tally = Tally()
    if request.config._fuzz_profile == "fuzz-ci":
        # CI: 40 programs from a fixed seed range. (Drawn through hypothesis, the 40 programs
        # changed with the set of test modules collected beside this one, and the capture
        # rate measured on them with it: 29 to 37 of 40 on one tree.)
        for seed in range(40):
            tracer.reset()
            tally.add(check_source(generate(random.Random(30_000 + seed))))
    else:
        @settings(_profile(request))
        @given(st.randoms(use_true_random=False))
        def check(rnd):
            src = generate(rnd)
            tracer.reset()
            tally.add(check_source(src))

        check()
    # measured on the 40 CI programs (seeds 30,000.., 2026-11-28): 36 of 40 captured on 3.11 to
    # 3.15. (3.13+ gave 27 until a break in an `except` body placed after the function's last
    # line stopped counting as a break in a loop: bytecode_utils.loop_components.)
    tally.check(min_capture=0.85, min_hits=0.8, min_ops=3)


def test_fixed_seeds_deeper_nesting(request):
    """A fixed seed range with deeper nesting, the same every run (reproducible in CI)."""
    n = 40 if request.config._fuzz_profile == "fuzz-ci" else 5000
    tally = Tally()
    for seed in range(n):
        tracer.reset()
        tally.add(check_source(generate(random.Random(10_000 + seed), max_depth=3), n_inputs=4))
    tally.check(min_capture=0.5, min_hits=0.75, min_ops=2.5)
