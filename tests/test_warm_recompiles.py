"""A compiled model whose guard check runs from its C snapshot (warm calls, nothing traced)
still recompiles on each structural change: an added hook, a changed attribute, a module
swapped for one of another structure, a parameter's metadata changed in place. A parameter
or leaf module replaced by one of the same structure is read at call time (modules are graph
inputs): the same entry runs, with the new tensors, and is warm again after one slow check."""
import pytest
import torch
import torch.nn as nn

import tracer
from guards import fastpath


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    yield
    tracer.reset()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.0)
        self.gain = 2.0

    def forward(self, x):
        return x + self.drop(self.fc(self.norm(x))) * self.gain


def make():
    torch.manual_seed(0)
    return nn.Sequential(Block(), Block()).eval()


def _hooked(m):
    m[1].fc.register_forward_hook(lambda mod, i, o: o * 2)


CHANGES = {
    "add a forward hook to a submodule": _hooked,
    "add a forward pre-hook to a submodule": lambda m: m[0].norm.register_forward_pre_hook(
        lambda mod, args: (args[0] * 2,)),
    "change a leaf attribute": lambda m: setattr(m[1].norm, "eps", 0.5),
    "change a user attribute": lambda m: setattr(m[0], "gain", 3.0),
    "training flag": lambda m: m[1].drop.train(),
    "swap a module": lambda m: m.__setitem__(0, Block()),
    "parameter requires_grad": lambda m: m[0].fc.bias.requires_grad_(False),
    "parameter .data of another dtype": lambda m: setattr(m[0].fc, "weight",
                                                          nn.Parameter(m[0].fc.weight.double())),
}


SAME_STRUCTURE = {
    "replace a parameter": lambda m: setattr(m[0].fc, "weight", nn.Parameter(torch.randn(8, 8))),
    "swap a leaf module": lambda m: setattr(m[1], "fc", nn.Linear(8, 8)),
    "replace a buffer-free block": lambda m: m.__setitem__(0, Block().eval()),
}


@pytest.mark.parametrize("name", list(SAME_STRUCTURE))
def test_same_structure_change_after_warm_calls_is_read_live(name):
    m = make()
    c = tracer.compile(m)
    x = torch.randn(3, 8)
    with torch.no_grad():
        for _ in range(3):
            assert torch.allclose(c(x), m(x))
        entry = c._compiled_forward.entries[0]
        before = tracer.stats()
        SAME_STRUCTURE[name](m)
        assert torch.allclose(c(x), m(x)), name
        after = tracer.stats()
        assert after.frames_traced == before.frames_traced and after.recompiles == before.recompiles, name
        assert len(c._compiled_forward.entries) == 1
        for _ in range(3):
            assert torch.allclose(c(x), m(x)), name
        if fastpath.ENABLED:  # the snapshot was taken anew on the new objects
            st = entry.guards.check.stats()
            assert st["state"] == "positive" and st["fast_hits"] >= 4, st


@pytest.mark.parametrize("name", list(CHANGES))
def test_change_after_warm_calls_recompiles(name):
    m = make()
    c = tracer.compile(m)
    x = torch.randn(3, 8)
    with torch.no_grad():
        for _ in range(3):
            assert torch.allclose(c(x), m(x))
        entry = c._compiled_forward.entries[0]
        if fastpath.ENABLED:  # the warm calls were answered by the snapshot
            st = entry.guards.check.stats()
            assert st["state"] == "positive" and st["fast_hits"] >= 2, st
            # active: the global-state calls (every call: grad mode, dtype, modes...) and the
            # tensor inputs; the module tree is frozen in the snapshot
            from guards import GlobalStateMatch
            assert st["active_ops"] <= len(GlobalStateMatch().calls()) + 2, st
            assert st["frozen_nodes"] >= 5, st
        before = tracer.stats()
        CHANGES[name](m)
        if name == "parameter .data of another dtype":
            x = x.double()
            m.double()
        out = c(x)
        assert torch.allclose(out, m(x)), name
        after = tracer.stats()
        # the root frame recompiled (a module with hooks is run by the call, its frames
        # traced on their own: more than one frame then)
        assert after.recompiles >= before.recompiles + 1, (name, after)
        assert after.frames_traced > before.frames_traced, (name, after)
        assert len(c._compiled_forward.entries) == 2
        # and the new entry is warm in turn
        c(x)
        assert tracer.stats().frames_traced == after.frames_traced


def test_unrelated_attribute_write_does_not_recompile():
    m = make()
    c = tracer.compile(m)
    x = torch.randn(3, 8)
    with torch.no_grad():
        c(x)
        c(x)
        before = tracer.stats()
        m[0].fc.note = "written by user code"  # changes a watched __dict__, not a guarded fact
        for _ in range(3):
            assert torch.allclose(c(x), m(x))
        assert tracer.stats().frames_traced == before.frames_traced
        if fastpath.ENABLED:
            assert c._compiled_forward.entries[0].guards.check.stats()["state"] == "positive"


class Config:
    """Shaped like transformers' PretrainedConfig: a Python __getattribute__ that maps aliases
    (inlined by the tracer), options read with getattr(..., default) and hasattr."""
    attribute_map = {"hidden": "width"}

    def __init__(self):
        self.width = 8

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Configured(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x) * self.config.hidden
        if getattr(self.config, "scale", None) is not None:
            y = y * self.config.scale
        if hasattr(self.config, "shift"):
            y = y + self.config.shift
        return y


CONFIG_CHANGES = {
    "option set on the instance": lambda m: setattr(m.config, "scale", 3.0),
    "option defined on the class": lambda m: setattr(Config, "shift", 1.0),
    "alias remapped": lambda m: Config.attribute_map.__setitem__("scale", "width"),
    "aliased value changed": lambda m: setattr(m.config, "width", 2),
}


@pytest.mark.parametrize("name", list(CONFIG_CHANGES))
def test_config_with_own_getattribute_is_checked_in_c_and_recompiles(name):
    torch.manual_seed(0)
    m = Configured().eval()
    c = tracer.compile(m)
    x = torch.randn(3, 8)
    try:
        with torch.no_grad():
            for _ in range(3):
                assert torch.allclose(c(x), m(x))
            entry = c._compiled_forward.entries[0]
            if fastpath.ENABLED:  # absent options are proven from the snapshot, not re-asked
                from guards import Predicate
                gs = entry.guards
                assert sum(getattr(g, "kind", None) == "lacks_generic" for g in gs.guards) == 2
                active = [gs.guards[i] for i in gs.check.active_guards()]
                assert not [g for g in active if isinstance(g, Predicate) and "lacks" in (g.kind or "")], \
                    [g.describe() for g in active]
            before = tracer.stats()
            CONFIG_CHANGES[name](m)
            assert torch.allclose(c(x), m(x)), name
            assert tracer.stats().recompiles >= before.recompiles + 1, name
            after = tracer.stats()
            assert torch.allclose(c(x), m(x))
            assert tracer.stats().frames_traced == after.frames_traced  # warm again
    finally:
        Config.attribute_map.pop("scale", None)
        if "shift" in Config.__dict__:
            del Config.shift
