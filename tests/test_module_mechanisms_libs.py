"""Module mechanisms of vision/diffusion libraries (issue 32), each on a small program:
compiled == eager, what was captured (graphs, breaks, no fallback), and warm calls compile
nothing. The zoo models that showed them: diffusers' UNet2DModel (a class `__getattr__` over
its config, `self.__dict__` reads), the UNet forward decorator (`from . import x` on every
call), forwards that annotate lists with torch.jit.annotate(List[Tensor], []), and submodules
whose `forward` is set on the instance."""
import functools
import sys
import textwrap
import types
from typing import Dict, List, Optional, Tuple

import pytest
import torch

import tracer


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


def run(fn, *args, graphs=1, breaks=0):
    """Compile fn, call it twice; compare with eager; assert the first call's graphs and
    breaks, no fallback, and that the second call traced nothing."""
    c = tracer.compile(fn)
    before = tracer.stats()
    out = c(*args)
    s = tracer.stats()
    torch.testing.assert_close(out, fn(*args))
    got = (s.graphs - before.graphs, s.graph_breaks - before.graph_breaks, s.fallbacks - before.fallbacks)
    assert got == (graphs, breaks, 0), f"{got}\n{s}"
    torch.testing.assert_close(c(*args), fn(*args))
    assert tracer.stats().frames_traced == s.frames_traced
    return c


# ---- cause 2: forward set on the instance ---------------------------------------------------

class _BoundImpl(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.forward = self._forward_impl

    def _forward_impl(self, x):
        return self.lin(x).relu()


class _Partial(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.forward = functools.partial(self._impl, scale=scale)

    def _impl(self, x, scale):
        return self.lin(x) * scale


def _doubled(self, x):
    return self.lin(x) * 2


class _Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = _BoundImpl(), _Plain(), _Partial(3.0)
        self.b.forward = types.MethodType(_doubled, self.b)

    def forward(self, x):
        return self.c(self.b(self.a(x))) + self.a.forward(x)


def test_forward_set_on_the_instance_is_inlined():
    """nn.Module.__call__ calls `self.forward`: the instance attribute (a bound method, a
    MethodType, a functools.partial) shadows the class's forward."""
    run(_Outer(), torch.randn(2, 4))


def test_forward_replaced_later_retraces():
    """The instance forward is guarded: replacing it (or deleting it) is a new entry, never
    the old trace."""
    m = _Outer()
    x = torch.randn(2, 4)
    c = run(m, x)
    m.c.forward = functools.partial(m.c._impl, scale=5.0)
    torch.testing.assert_close(c(x), m(x))
    m.a.forward = types.MethodType(_doubled, m.a)
    torch.testing.assert_close(c(x), m(x))
    m.a.forward = m.b.forward  # bound to another module
    torch.testing.assert_close(c(x), m(x))


# ---- cause 3: typing subscripts, torch.jit.annotate ------------------------------------------

class _Annotated(torch.nn.Module):
    def forward(self, x):
        outs = torch.jit.annotate(List[torch.Tensor], [])
        named = torch.jit.annotate(Dict[str, torch.Tensor], {})
        kinds = (Optional[int], Tuple[torch.Tensor, int], list[int], int | None)
        if not torch.jit.is_scripting() and not torch.jit.is_tracing():
            for i in range(3):
                outs.append(x * i)
        named["a"] = x
        return torch.stack(outs).sum(0) + named["a"] + len(kinds)


def test_typing_subscripts_and_jit_annotate():
    run(_Annotated(), torch.randn(2, 4))


def test_typing_subscript_args():
    """A subscript's result is the real annotation: its origin and args read back."""
    def f(x):
        t = Dict[str, Optional[int]]
        return x + len(t.__args__) + (t.__origin__ is dict)

    run(f, torch.randn(3))


# ---- cause 4: a module class with its own __getattr__ ----------------------------------------

class _ConfigMixin(torch.nn.Module):
    """diffusers' ModelMixin: a missing attribute is looked up in the config, else nn.Module's."""
    _keep_fp32 = None

    def __getattr__(self, name):
        in_config = "_internal" in self.__dict__ and hasattr(self.__dict__["_internal"], name)
        if in_config and name not in self.__dict__:
            return getattr(self.__dict__["_internal"], name)
        return super().__getattr__(name)


class _Configured(_ConfigMixin):
    def __init__(self, scale=2.0):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self._internal = types.SimpleNamespace(scale=scale)

    def forward(self, x):
        y = self.lin(x) * self.scale
        if getattr(self, "_keep_fp32", None) is not None:
            y = y + 1
        if hasattr(self, "_nope") or getattr(self, "_absent", None) is not None:
            y = y - 1
        return y + len(self.__dict__.get("_internal").__dict__)


def test_class_getattr_is_inlined():
    run(_Configured(), torch.randn(2, 4))


def test_class_getattr_guards():
    """What the class __getattr__ answered is guarded: a config value that changes, an
    attribute set later, retrace instead of reusing the entry."""
    m = _Configured()
    x = torch.randn(2, 4)
    c = run(m, x)
    m._internal.scale = 3.0
    torch.testing.assert_close(c(x), m(x))
    m._internal._nope = 1
    torch.testing.assert_close(c(x), m(x))
    object.__setattr__(m, "_absent", 1)
    torch.testing.assert_close(c(x), m(x))
    m2 = _Configured(scale=4.0)
    torch.testing.assert_close(c(x), m(x))
    torch.testing.assert_close(tracer.compile(m2)(x), m2(x))


class _ShadowingConfig(_ConfigMixin):
    """A config key that is also a submodule's name: the class __getattr__ answers first."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self._internal = types.SimpleNamespace(lin=None)

    def forward(self, x):
        return x + 1 if self.lin is None else self.lin(x)


def test_class_getattr_order():
    run(_ShadowingConfig(), torch.randn(2, 4))


# ---- cause 6: relative imports ---------------------------------------------------------------

@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `relpkg` with a submodule `relpkg.ops` whose function imports relatively."""
    root = tmp_path / "relpkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("SCALE = 3\n")
    (root / "helpers.py").write_text("def bump(x):\n    return x + 1\n")
    (root / "ops.py").write_text(textwrap.dedent("""
        import functools

        def scaled(fn):
            @functools.wraps(fn)
            def wrapper(x):
                from . import SCALE
                from .helpers import bump
                from .sub import deep
                return bump(fn(x)) * SCALE + deep(x)
            return wrapper

        @scaled
        def f(x):
            return x.sin()

        def g(x):
            from .not_loaded import h
            return h(x)

        def k(x):
            from . import lazy
            return lazy.twice(x)
    """))
    (root / "lazy.py").write_text("def twice(x):\n    return x * 2\n")
    (root / "sub" / "more.py").write_text("def deep(x):\n    from ..helpers import bump\n    return bump(x) * 2\n")
    (root / "sub" / "__init__.py").write_text("from .more import deep\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import relpkg.helpers
    import relpkg.ops
    import relpkg.sub
    yield relpkg.ops
    for name in [n for n in sys.modules if n == "relpkg" or n.startswith("relpkg.")]:
        del sys.modules[name]


def test_relative_import_in_a_traced_frame(package):
    run(package.f, torch.randn(3))


def test_relative_import_of_a_module_not_loaded_is_a_break(package):
    """Importing a module for the first time runs its code: a break that says so, and the
    import then happens natively (here it fails, as in eager)."""
    c = tracer.compile(package.g)
    with pytest.raises(ModuleNotFoundError):
        c(torch.randn(3))
    s = tracer.stats()
    assert any("not yet loaded: relpkg.not_loaded" in r for r in (*s.break_reasons, *s.fallback_reasons))


def test_relative_import_of_a_submodule_not_loaded_is_a_break(package):
    """`from . import lazy` imports the submodule (runs its code) the first time: a break there,
    the import happens natively; the result is eager's."""
    assert "relpkg.lazy" not in sys.modules
    x = torch.randn(3)
    c = tracer.compile(package.k)
    torch.testing.assert_close(c(x), x * 2)
    s = tracer.stats()
    assert any("would import a submodule" in r for r in (*s.break_reasons, *s.fallback_reasons))
    assert "relpkg.lazy" in sys.modules
