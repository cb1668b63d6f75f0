"""runtime/policy.py: trace it, skip it, or treat it as a library, one answer for every caller
(the frame hook by filename, the value model by module name, the interpreter by globals)."""
import copy
import logging
import os
import subprocess
import sys
import sysconfig
import textwrap
import urllib.parse

import pytest
import torch

import tracer
from tracer.runtime import policy
from tracer.runtime.policy import DEFAULT_SKIP_PREFIXES, SKIP, TRACE, frame_rule
from tracer.variables import new_objects


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def _user_fn(x):
    return x + 1


def _code_in(directory):
    """A code object whose file is in `directory` (what the hook sees of a frame there)."""
    return _user_fn.__code__.replace(co_filename=os.path.join(directory, "somewhere.py"))


def _answers(name):
    return (policy.is_untraced_module(name), policy.constructs_symbolically(name),
            policy.is_library_namespace(name))


# ---- each category, by module name ---------------------------------------------------------

@pytest.mark.parametrize("name, untraced, constructed, library", [
    # torch: inlined where not put in the graph, its namespaces are code, its classes are not
    # user classes (nn modules are built by new_objects.is_torch_module_class instead)
    ("torch", False, False, True),
    ("torch.nn.functional", False, False, True),
    # libraries with no tensor programs: opaque values, never constructed, guarded by identity
    ("numpy", True, False, False),
    ("numpy.linalg", True, False, False),
    ("scipy.special", True, False, False),
    ("sympy.core.numbers", True, False, False),
    ("mpmath", True, False, False),
    ("networkx", True, False, False),
    ("PIL", True, False, False),
    ("PIL.Image", True, False, False),
    ("matplotlib.pyplot", True, False, False),
    ("pandas.core.frame", True, False, False),
    # standard library: logging/warnings are called, not inlined; some classes are not built
    ("logging", True, False, False),
    ("warnings", True, False, False),
    ("functools", False, False, True),
    ("typing", False, False, True),
    ("enum", False, False, False),
    ("dataclasses", False, True, True),
    ("collections", False, True, True),
    ("contextlib", False, True, False),
    # test tooling: skipped by the hook only
    ("_pytest.logging", False, True, False),
    # user code, and names that only look like a library's
    ("my_model", False, True, False),
    ("my_model.numpy", False, True, False),
    ("torchvision", False, True, False),
    ("PILLOW_helpers", False, True, False),
    (None, False, True, False),
    ("", False, True, False),
])
def test_categories_by_module_name(name, untraced, constructed, library):
    assert _answers(name) == (untraced, constructed, library)


def test_categories_by_globals():
    assert policy.is_library_globals(torch.nn.functional.__dict__)
    assert policy.is_library_globals(vars(__import__("dataclasses")))
    assert not policy.is_library_globals(globals())  # this test module: user code
    assert not policy.is_library_globals({})  # exec'd code with no __name__
    np = pytest.importorskip("numpy")
    # numpy's frames are never traced (an untraced library): its globals are not a library's
    assert not policy.is_library_globals(vars(np))


def test_categories_by_code_object():
    assert frame_rule(_user_fn.__code__, ()) is TRACE
    assert frame_rule(logging.getLogger.__code__, ()) is SKIP  # standard library
    assert frame_rule(torch.nn.Module._call_impl.__code__, ()) is SKIP  # torch's internals
    assert frame_rule(tracer.compile.__code__, ()) is SKIP  # the tracer itself
    for name in policy.UNTRACED_LIBRARIES + policy.TOOLING:
        where = policy._package_dir(name)
        if where is not None:
            assert where in DEFAULT_SKIP_PREFIXES, name
            assert frame_rule(_code_in(where), ()) is SKIP, name


# ---- the callers agree ---------------------------------------------------------------------

def _hook_skips(name):
    """Whether capture()'s rule skips frames of code in package `name` (None: not installed, or
    no Python code)."""
    where = policy._package_dir(name)
    if where is None:
        spec = __import__("importlib.util").util.find_spec(name)
        if spec is not None and spec.origin == "frozen":  # abc: its frames say <frozen abc>
            return frame_rule(_user_fn.__code__.replace(co_filename=f"<frozen {name}>"), ()) is not TRACE
        if spec is None or spec.origin is None or not os.path.isabs(spec.origin):
            return None  # not installed, or built in (no Python frames)
        where = os.path.dirname(spec.origin)  # a stdlib module (logging is a package, warnings is not)
    return frame_rule(_code_in(where), ()) is not TRACE


@pytest.mark.parametrize("name", sorted(set(
    policy.TORCH + policy.UNTRACED_LIBRARIES + policy.UNTRACED_STDLIB + policy.NOT_CONSTRUCTED_STDLIB
    + policy.LIBRARY_NAMESPACES + policy.TOOLING + ("capture_helpers", "contextlib", "dataclasses"))))
def test_capture_and_the_value_model_agree(name):
    """Code the value model never inlines is never the root of a capture() trace either; code
    the hook traces is user code to the value model too (inlined, built, guarded)."""
    skipped = _hook_skips(name)
    if skipped is None:
        pytest.skip(f"{name}: not installed, or no Python code")
    if policy.is_untraced_module(name):
        assert skipped and not policy.constructs_symbolically(name)
    if not skipped:
        assert _answers(name) == (False, True, False)
    if policy.is_library_namespace(name):
        assert skipped and not policy.is_untraced_module(name)


def test_the_old_lists_are_gone():
    """The answers come from policy.py only: none of the callers keeps its own list."""
    import importlib
    from tracer.trace import frame
    capture_mod = importlib.import_module("tracer.capture")  # (tracer.capture is the class)
    from tracer.variables import builder
    for mod, name in [(builder, "UNTRACED_LIBRARIES"), (new_objects, "_UNTRACED_ROOTS"),
                      (frame, "_LIBRARY_ROOTS"), (frame, "_is_library_globals"), (capture_mod, "_package_dir")]:
        assert not hasattr(mod, name), (mod.__name__, name)
    # the public API's prefixes are the policy's (capture(skip_prefixes=DEFAULT_SKIP_PREFIXES + ...))
    assert capture_mod.DEFAULT_SKIP_PREFIXES is DEFAULT_SKIP_PREFIXES
    assert sysconfig.get_paths()["stdlib"] + os.sep in DEFAULT_SKIP_PREFIXES


# ---- the value model follows the policy ----------------------------------------------------

def _pil_like():
    """A function and a class that say they are PIL's (PIL need not be installed)."""
    def resize(x):
        return x * 2

    class Image:
        def __init__(self):
            self.size = 3

    resize.__module__ = Image.__module__ = "PIL.Image"
    return resize, Image


def test_an_untraced_librarys_function_is_called_not_inlined():
    resize, Image = _pil_like()

    def f(x):
        return resize(x + 1) - 1

    c = tracer.compile(f)
    x = torch.ones(3)
    assert torch.equal(c(x), f(x))
    entry = c.entries[0]
    assert len(entry.breaks) == 1 and "PIL.Image" in entry.breaks[0].reason, entry.breaks
    assert not new_objects.is_user_class(Image)
    Image.__module__ = __name__
    assert new_objects.is_user_class(Image)


def test_sympy_is_not_inlined():
    sympy = pytest.importorskip("sympy")

    def f(x):
        return x * int(sympy.sqrt(4)) + 1

    c = tracer.compile(f)
    x = torch.ones(3)
    assert torch.equal(c(x), f(x))
    assert any("sympy" in b.reason for e in c.entries for b in e.breaks), [e.breaks for e in c.entries]


# ---- skip prefixes are found without importing the packages --------------------------------

def test_package_dir_does_not_import(tmp_path, monkeypatch):
    pkg = tmp_path / "policy_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert policy._package_dir("policy_probe_pkg") == str(pkg) + os.sep
    assert "policy_probe_pkg" not in sys.modules
    assert policy._package_dir("policy_probe_no_such_pkg") is None


def test_untraced_libraries_are_skipped_without_being_imported(tmp_path):
    """A fresh process with (fake) PIL and matplotlib on its path: `import tracer` puts their
    directories among the skip prefixes and imports neither."""
    log = tmp_path / "imported.txt"
    for name in ("PIL", "matplotlib"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"open({str(log)!r}, 'a').write(__name__ + '\\n')\nraise ImportError('fake {name}')\n")
    probe = textwrap.dedent(f"""
        import os, sys
        import tracer
        from tracer.runtime.policy import DEFAULT_SKIP_PREFIXES
        for name in ("PIL", "matplotlib"):
            assert os.path.join({str(tmp_path)!r}, name) + os.sep in DEFAULT_SKIP_PREFIXES, name
            assert name not in sys.modules, name
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
    assert not log.exists(), log.read_text()


def test_typing_extensions_frames_are_library_frames():
    """An optimizer step under a compiled function runs torch's decorators, which call
    typing_extensions (a site-packages module, not the standard library): its frames are not
    traced as the user's, so no 'call to sys._getframe' break is counted against the user."""
    import typing_extensions

    from tracer.runtime import policy
    assert policy.should_skip(typing_extensions._collect_parameters.__code__)
    m = torch.nn.Linear(4, 2)
    ref = copy.deepcopy(m)
    opt, ref_opt = torch.optim.SGD(m.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)

    def step(model, o, x):
        loss = model(x).pow(2).mean()
        loss.backward()
        o.step()
        o.zero_grad()
        return loss

    compiled = tracer.compile(step)
    before = tracer.stats()
    for _ in range(3):
        x = torch.randn(3, 4)
        assert torch.allclose(compiled(m, opt, x), step(ref, ref_opt, x))
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), ref.parameters()))
    after = tracer.stats()
    assert after.graphs - before.graphs >= 1
    new_breaks = [e for e in after.of("break")[-(after.graph_breaks - before.graph_breaks):]]
    assert not any("typing_extensions" in (e.where or "") for e in new_breaks), [str(e) for e in new_breaks]
    assert "call to sys._getframe, which is not traced" not in after.break_reasons


def test_code_the_standard_library_generates_is_not_a_frame_of_its_own():
    """A dataclass's generated methods and a namedtuple's `__new__` are compiled from text as
    "<string>", like a user's exec'd code: the hook skips them (torch.cond's first call in a
    process reads importlib.metadata's entry points, one namedtuple each: they were traced
    one by one and recompiled to the limit); a user's exec'd function is still traced, and
    both kinds are still inlined inside a trace."""
    import collections
    import dataclasses

    Pair = collections.namedtuple("Pair", "a b")

    @dataclasses.dataclass
    class Box:
        x: int
        y: int = 2

    ns = {}
    exec("def user(x):\n    return x + 1\n", ns)
    assert frame_rule(Pair.__new__.__code__, ()) == SKIP
    assert frame_rule(Box.__init__.__code__, ()) == SKIP and frame_rule(Box.__eq__.__code__, ()) == SKIP
    assert frame_rule(ns["user"].__code__, ()) == TRACE

    def f(x, urls):
        # urlsplit is lru_cached: called natively, it makes a SplitResult (a namedtuple) in
        # library code, where the hook sees the generated __new__ as a frame
        return x + sum(len(urllib.parse.urlsplit(u).netloc) for u in urls)

    tracer.reset()
    c = tracer.compile(f)
    with _no_warnings():
        for k in range(3):
            urls = [f"http://host{k}-{i}.org/p" for i in range(12)]
            assert torch.equal(c(torch.ones(2), urls), f(torch.ones(2), urls))
    frames = [e.frame for e in tracer.stats().of("frame")]
    assert "<lambda>" not in frames, frames


class _no_warnings:
    def __enter__(self):
        import warnings
        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)
