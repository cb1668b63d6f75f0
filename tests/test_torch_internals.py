"""Every torch internal that docs/torch.md lists (its table's first column) resolves on the
installed torch. Why: private names move between releases without notice; a torch that moved
one should fail here, by name, rather than somewhere subtler. The doc is the one list (a new
internal read by the tracer goes there), so this test cannot drift from it."""
import importlib
import pathlib
import re

import pytest
import torch
from packaging.specifiers import SpecifierSet

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "torch.md"


def _listed():
    rows = re.findall(r"^\| `([\w.]+)` \|", DOC.read_text(), flags=re.M)
    assert len(rows) >= 30, "docs/torch.md's table of internals was not found"
    return rows


def _resolve(dotted):
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("dotted", _listed())
def test_listed_torch_internal_resolves(dotted):
    try:
        _resolve(dotted)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"torch {torch.__version__} has no {dotted} ({e}): see docs/torch.md for where it is read")


def test_the_tested_torches_are_in_the_declared_range():
    """pyproject's torch requirement admits every torch docs/torch.md says is tested, and the
    one running the suite (a torch outside the range is untested: the test says so)."""
    root = DOC.parent.parent
    spec = SpecifierSet(re.search(r'"torch([^"]+)"', (root / "pyproject.toml").read_text()).group(1))
    tested = re.findall(r"\d+\.\d+\.\d+", re.search(r"\*\*Tested: (.*?)\*\*", DOC.read_text()).group(1))
    assert len(tested) >= 3 and all(v in spec for v in tested), (spec, tested)
    assert torch.__version__.split("+")[0] in spec, f"torch {torch.__version__} is outside the tested {spec}"
