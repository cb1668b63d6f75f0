"""The optional C extensions (guards._fastcheck, guards._tensormeta_<torch>): setup.py goes on
without one that does not build, so the run time must fall back, and say so once, clearly,
instead of running slower in silence; and tensor records built against one torch must never
be used under another (their C++ reads torch's structures as that torch's headers laid them
out: the module name carries the torch version, and TORCH_VERSION is checked as well)."""
import subprocess
import sys
import types
import warnings

import pytest
import torch

from guards import fastpath

needs_fastcheck = pytest.mark.skipif(not fastpath.ENABLED, reason="guards._fastcheck is not built or not used here")


def test_the_records_module_name_carries_the_torch_version():
    assert fastpath.tensormeta_name("2.15.0+cu132") == "_tensormeta_2_15_0_cu132"
    assert fastpath.tensormeta_name("2.13.0") == "_tensormeta_2_13_0"


@needs_fastcheck
def test_records_of_another_torch_are_not_loaded(monkeypatch):
    """Under a torch no records were built for (a wheel built for another torch, or an
    environment sharing the tree with another torch's), the check warns and uses TensorGuards."""
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    with pytest.warns(RuntimeWarning, match=r"no tensor records for torch 2\.99\.0 \(guards\._tensormeta_2_99_0: "
                                            r"(built here only for _tensormeta_|not built)"):
        assert fastpath._tensor_records() is None


@needs_fastcheck
def test_records_whose_torch_version_differs_are_refused(monkeypatch):
    """A module found under this torch's name whose C++ was compiled against another torch
    (renamed by hand) is refused by its TORCH_VERSION."""
    fake = types.SimpleNamespace(TORCH_VERSION="2.13.0", _C_API=object())
    monkeypatch.setattr(fastpath.importlib, "import_module", lambda name: fake)
    monkeypatch.setattr(torch, "__version__", "2.15.0")
    with pytest.warns(RuntimeWarning, match=r"was built for torch 2\.13\.0, this is 2\.15\.0: not used"):
        assert fastpath._tensor_records() is None


def _import_without(module):
    """stderr and ENABLED of a fresh interpreter importing guards.fastpath with `module`
    unimportable (as if setup.py could not build it), all warnings shown."""
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from guards import fastpath\n"
            "print('ENABLED', fastpath.ENABLED)")
    r = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


@needs_fastcheck
def test_a_missing_guard_engine_falls_back_with_one_warning():
    out, err = _import_without("guards._fastcheck")
    assert "ENABLED False" in out
    assert err.count("RuntimeWarning") == 1, err
    assert "guards._fastcheck is not importable" in err and "generated Python code" in err, err


@needs_fastcheck
def test_missing_tensor_records_fall_back_with_one_warning():
    out, err = _import_without("guards." + fastpath.tensormeta_name(torch.__version__))
    assert "ENABLED True" in out  # the guard engine itself still runs
    assert err.count("RuntimeWarning") == 1, err
    assert f"no tensor records for torch {torch.__version__}" in err and "TensorGuards" in err, err


def test_a_whole_install_imports_without_a_fallback_warning():
    """Where the extensions are built (the development install, CI), importing warns nothing."""
    if not fastpath.ENABLED or fastpath._tensor_records() is None:
        pytest.skip("the extensions are not built here")
    code = "from guards import fastpath"
    r = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert fastpath._tensor_records() is not None
