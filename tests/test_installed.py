"""What users install: run against a built wheel in a fresh environment (.ci/wheel-smoke),
these check that the installed package is the one under test and is whole.

Under the editable development install they are skipped (FRAMETRACER_FROM_WHEEL unset): there
the package is the source tree, which test_layers.py and the rest of the suite cover.
"""
import importlib
import importlib.metadata
import os
import pathlib
import subprocess
import sys
import sysconfig

import pytest
import torch

import tracer
from guards import fastpath

pytestmark = pytest.mark.skipif(os.environ.get("FRAMETRACER_FROM_WHEEL") != "1",
                                reason="checks an installed wheel (.ci/wheel-smoke sets FRAMETRACER_FROM_WHEEL=1)")

# the source tree the wheel was built from (for the list of subpackages and the example script);
# the tests run from a copy outside it, so that nothing on sys.path leads back to the tree
SOURCE = pathlib.Path(os.environ.get("FRAMETRACER_SOURCE", pathlib.Path(__file__).resolve().parent.parent))


def test_the_package_under_test_is_the_installed_one():
    site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
    here = pathlib.Path(tracer.__file__).resolve()
    assert site in here.parents, f"tracer imported from {here}, not from {site}"


def test_every_subpackage_and_c_extension_is_installed():
    site = pathlib.Path(tracer.__file__).resolve().parent.parent
    inits = sorted(SOURCE.glob("tracer/**/__init__.py"))
    assert len(inits) >= 7, f"no source tree at {SOURCE}"
    for init in sorted(SOURCE.glob("tracer/**/__init__.py")) + sorted(SOURCE.glob("guards/**/__init__.py")) + \
            sorted(SOURCE.glob("bytecode_utils/**/__init__.py")):
        name = ".".join(init.parent.relative_to(SOURCE).parts)
        mod = importlib.import_module(name)
        assert site in pathlib.Path(mod.__file__).resolve().parents, name
    tensormeta = "guards." + fastpath.tensormeta_name(torch.__version__)  # built for this torch
    for ext in ("tracer.runtime._eval_frame", "tracer.runtime._dispatch", "guards._fastcheck", tensormeta):
        assert importlib.import_module(ext).__file__.endswith(".so"), ext


def test_only_the_projects_own_import_packages_are_installed():
    dist = importlib.metadata.distribution("frametracer")
    tops = {pathlib.PurePosixPath(str(f)).parts[0] for f in dist.files}
    tops = {t for t in tops if not t.endswith((".dist-info", ".data")) and t not in ("..", "__pycache__")}
    assert tops == {"tracer", "guards", "bytecode_utils"}, tops


def test_a_compiled_model_runs_and_is_captured_from_the_wheel():
    tracer.reset()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    compiled = tracer.compile(model)
    assert torch.equal(compiled(x), model(x))
    s = tracer.stats()
    assert s.graphs == 1 and s.fallbacks == 0 and s.internal_errors == 0, s


def test_the_console_script_runs(tmp_path):
    exe = pathlib.Path(sys.executable).parent / "tracer-dump"
    target = SOURCE / "examples" / "dump_target.py"
    out = subprocess.run([str(exe), f"{target}:encoder", "--no-color"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "graph" in out.stdout.lower()
