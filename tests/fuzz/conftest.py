"""Fuzz profiles: `ci` (default, bounded) and `long` (FUZZ_PROFILE=long or pytest --long)."""
import os

from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# CI: the same 40 programs every run (no flaky CI; about 1.5 s each, on every Python
# version); long: fresh random programs (and tests/fuzz/parallel_run.py for seed ranges).
# No shrinking in CI: a generated program is already small, and shrinking one that fails
# retraces it hundreds of times under hypothesis' line tracer (tens of minutes); the failing
# program's source is in the failure message.
settings.register_profile("fuzz-ci", max_examples=40, derandomize=True,
                          phases=(Phase.explicit, Phase.reuse, Phase.generate), **_COMMON)
settings.register_profile("fuzz-long", max_examples=1_000_000, derandomize=False, **_COMMON)


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False,
                     help="run the fuzz tests with the long hypothesis profile (hours)")


def pytest_configure(config):
    long = config.getoption("--long", default=False) or os.environ.get("FUZZ_PROFILE") == "long"
    config._fuzz_profile = "fuzz-long" if long else "fuzz-ci"
