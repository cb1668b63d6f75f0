"""Suite-wide rules that keep the tests honest (issue 16).

* Any tracer internal error recorded during a test fails it (the fail-safe would otherwise
  turn the bug into a silent fallback and the test would pass). A test that injects faults
  says so with `@pytest.mark.internal_errors`.
* Guards are verified on every entry made anywhere in the suite: a new entry's guards pass
  on the inputs it was built from, `check()` and `failures()` agree there, and whenever
  `check()` rejects a call, `failures()` names a guard (config.verify_guards; a violation is
  an internal error, so it fails the test through the first rule).
* The recompile-limit warning is an error (pyproject's filterwarnings); a test about the
  limit opts out with `@pytest.mark.filterwarnings("default::tracer.RecompileLimitWarning")`.

* `@pytest.mark.one_version`: the test exercises nothing that differs between Python
  versions (a backend compiler such as inductor, a subprocess's plumbing, a file format, a
  browser). It runs on CPython 3.11 only, which keeps CI's three versions within its time
  budget; FRAMETRACER_ALL_VERSIONS=1 runs it everywhere.

`assert_captured` and `assert_warm` are the shared assertions: compiled == eager is not
enough; the frame must have been captured, and warm calls must compile nothing.
"""
import os
import sys

import pytest
import torch

import tracer
from tracer.runtime import config, records

config.verify_guards = True


def pytest_configure(config):
    config.addinivalue_line("markers", "internal_errors: the test injects faults; tracer internal "
                                       "errors are expected and do not fail it")
    config.addinivalue_line("markers", "loop_resumes: the test exercises breaks inside loop bodies traced "
                                       "in resume functions (config.loop_resume_limit = LOOP_RESUME_LIMIT; "
                                       "the default, 0, runs such a frame as Python)")
    config.addinivalue_line("markers", "cuda: needs a CUDA device, skipped without one "
                                       "(`python -m pytest -m cuda` where one is lent)")
    config.addinivalue_line("markers", "one_version: tests nothing that differs between Python "
                                       "versions; runs on CPython 3.11 only (FRAMETRACER_ALL_VERSIONS=1: all)")
    try:  # tqdm (inductor's progress bars) starts a monitor thread whose objects come and go
        import tqdm  # during later tests' leak counts: none here
        tqdm.tqdm.monitor_interval = 0
    except ImportError:
        pass


ONE_VERSION = (3, 11)


def pytest_collection_modifyitems(config, items):
    if sys.version_info[:2] == ONE_VERSION or os.environ.get("FRAMETRACER_ALL_VERSIONS") == "1":
        return
    skip = pytest.mark.skip(reason="one_version: nothing here differs between Python versions; "
                                   "it runs on CPython 3.11 (FRAMETRACER_ALL_VERSIONS=1 runs it here)")
    for item in items:
        if item.get_closest_marker("one_version"):
            item.add_marker(skip)


@pytest.fixture
def fresh_tracer():
    """An empty tracer cache and torch's seed 0, before and after the test (use with
    `pytestmark = pytest.mark.usefixtures("fresh_tracer")`)."""
    tracer.reset()
    torch.manual_seed(0)
    yield
    tracer.reset()


@pytest.fixture(autouse=True)
def _loop_resumes(request, monkeypatch):
    """`@pytest.mark.loop_resumes`: a break in a loop body is traced in resume functions for
    LOOP_RESUME_LIMIT iterations, the machinery those tests check (TRACER_LOOP_RESUMES=8)."""
    if request.node.get_closest_marker("loop_resumes"):
        from tracer.rewrite.graph_break import LOOP_RESUME_LIMIT
        monkeypatch.setattr(config, "loop_resume_limit", LOOP_RESUME_LIMIT)


@pytest.fixture(autouse=True)
def _fresh_stats():
    """tracer.stats() counts per test: a test's assertions on breaks, graphs or ops must not
    depend on what the tests before it did."""
    records.reset_stats()


@pytest.fixture(autouse=True)
def _no_internal_errors(_fresh_stats, request):
    before = records.stats().internal_errors
    yield
    if request.node.get_closest_marker("internal_errors"):
        return
    s = records.stats()
    if s.internal_errors > before:
        new = s.of("internal_error")[-(s.internal_errors - before):]
        pytest.fail("tracer internal error(s) during the test:\n" + "\n".join(f"  {e}" for e in new),
                    pytrace=False)
