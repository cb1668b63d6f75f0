"""torch.compile's `mode=` and `options=` through `tracer.compile`, on the CPU.

What is checked, and why:

* A bad mode or option is the user's mistake: it must be refused when `compile()` is called
  (not at the first call, deep inside inductor), in one line that names `tracer.compile`.
* A mode or option changes how inductor compiles, never what the model computes: outputs equal
  eager's, the work is captured, warm calls trace nothing. On the CPU inductor does not use
  CUDA graphs, so `mode="reduce-overhead"` runs here too (tests/test_cuda_modes.py replays
  the CUDA graphs on a GPU).
* Entries are matched to their backend by identity, so a configuration has one backend object
  (`backends.inductor_with`): two instances of a model class compiled alike share one trace.
* With CUDA graphs (`reduce-overhead`), each call of a compiled function starts a new step of
  inductor's cudagraph trees (`_CudagraphFunction`, `backends.new_step`), and the graph tells
  inductor which inputs keep their address between calls (a module's parameters and buffers,
  and tensors marked by `torch._dynamo.mark_static_address`): `static_address` on the
  placeholders, turned into TorchDynamo's metadata by `backends._mark_static_inputs`.
* A copy (deepcopy, pickle) of a compiled module keeps its mode; the disk cache saves an entry
  compiled with options and a later process (here: an emptied tracer with new backend objects,
  which is what a new process has) loads it by the backend's configuration.

Models are tiny and run under no_grad so that inductor's compiles stay short. The tests that
compile with inductor are `one_version` (inductor is the same on every Python); the ones that
test the tracer's own paths (graph metadata, the call path of `_CudagraphFunction`) run on
every version.
"""
import copy
import pickle

import pytest
import torch
from torch import nn

import tracer
from helpers import assert_captured, assert_warm, traced
from tracer.api import CompiledFunction, _CudagraphFunction
from tracer.graph import backends
from tracer.runtime import config

pytestmark = pytest.mark.usefixtures("fresh_tracer")


class _Net(nn.Module):
    """Linear + GELU + LayerNorm, and a registered buffer: 4 parameters and 1 buffer."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 16)
        self.ln = nn.LayerNorm(16)
        self.register_buffer("scale", torch.full((16,), 0.5))

    def forward(self, x):
        return self.ln(nn.functional.gelu(self.lin(x))) * self.scale


class _WithState(_Net):
    """_Net plus a second input added to the output (a static KV-cache-like tensor)."""

    def forward(self, x, kv):
        return self.ln(nn.functional.gelu(self.lin(x))) * self.scale + kv


_MODULE_TENSORS = {"self_lin_weight", "self_lin_bias", "self_ln_weight", "self_ln_bias", "self_scale"}


def _generation():
    from torch._dynamo.mutation_guard import GenerationTracker
    return GenerationTracker.generation


def _placeholders(gm):
    return list(gm.graph.find_nodes(op="placeholder"))


def _close(got, want):
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# ---- 1. mistakes are refused at compile(), in one line ----------------------------------------

def _be(gm, example_inputs):
    return gm.forward


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(backend="eager", mode="reduce-overhead"), ValueError, ["mode is inductor's", "'eager'"]),
    (dict(backend=_be, options={"epilogue_fusion": False}), ValueError, ["options is inductor's", "_be"]),
    (dict(backend="inductor", mode="fast"), ValueError,
     ["unknown mode 'fast'", "'default'", "'reduce-overhead'", "'max-autotune'", "'max-autotune-no-cudagraphs'"]),
    (dict(backend="inductor", options={"no_such_option": 1}), ValueError,
     ["Unexpected optimization option no_such_option"]),
    (dict(backend="inductor", options={"epilogue_fusion": "yes"}), ValueError, ["epilogue_fusion", "bool"]),
    (dict(backend="inductor", options=[("epilogue_fusion", False)]), TypeError, ["options must be a dict", "list"]),
], ids=["mode-eager", "options-callable", "unknown-mode", "unknown-option", "option-type", "options-not-dict"])
@pytest.mark.parametrize("target", ["function", "module", "decorator"])
def test_bad_mode_or_options_is_one_line_at_compile_time(kwargs, exc, words, target):
    """compile() itself raises (nothing is called), one line, starting with `tracer.compile:`."""
    def f(x):
        return x + 1
    with traced() as t, pytest.raises(exc) as ei:
        if target == "function":
            tracer.compile(f, **kwargs)
        elif target == "module":
            tracer.compile(_Net(), **kwargs)
        else:
            tracer.compile(**kwargs)
    msg = str(ei.value)
    assert ei.type is exc, ei.value
    assert msg.count("\n") == 0, msg
    assert msg.startswith("tracer.compile: "), msg
    for w in words:
        assert w in msg, msg
    assert t.frames_traced == 0, str(t)


# ---- 2. compiled == eager, captured, warm ------------------------------------------------------

@pytest.mark.one_version  # inductor's kernels
@pytest.mark.parametrize("kwargs", [dict(mode="reduce-overhead"), dict(options={"epilogue_fusion": False})],
                         ids=["reduce-overhead", "options"])
def test_module_with_mode_or_options_equals_eager_and_is_warm(kwargs):
    """A mode or options: the same values as eager, one graph with every op, no trace on warm
    calls (same and fresh inputs)."""
    model = _Net().eval()
    c = tracer.compile(model, backend="inductor", **kwargs)
    assert c._compiled_forward._backend is backends.inductor_with(kwargs.get("mode"), kwargs.get("options"))
    x = torch.randn(4, 8)
    with torch.no_grad():
        with traced() as t:
            got = c(x)
        _close(got, model(x))
        assert_captured(t, min_ops=4, graphs=1)
        assert_captured(c, min_ops=4, entries=1)
        x2 = torch.randn(4, 8)
        same, fresh = assert_warm(c, x, fresh=(x2,))
    _close(same, model(x))
    _close(fresh, model(x2))


# ---- 3. one backend object per configuration ---------------------------------------------------

@pytest.mark.one_version  # inductor's kernels
def test_two_instances_with_the_same_mode_share_one_trace():
    """Both instances' compiled forwards hold the same backend object, so the second instance
    is a cache hit of the first's entry (its tensors are graph inputs): one frame traced."""
    a, b = _Net().eval(), _Net().eval()
    ca = tracer.compile(a, backend="inductor", mode="reduce-overhead")
    cb = tracer.compile(b, backend="inductor", mode="reduce-overhead")
    assert ca._compiled_forward._backend is cb._compiled_forward._backend
    x = torch.randn(4, 8)
    with torch.no_grad(), traced() as t:
        got_a, got_b = ca(x), cb(x)
    _close(got_a, a(x))
    _close(got_b, b(x))
    assert not torch.allclose(got_a, got_b)  # (each with its own weights)
    assert t.frames_traced == 1 and t.recompiles == 0, str(t)
    assert_captured(t, min_ops=4, graphs=1)
    assert t.cache_hits >= 1, str(t)


def test_inductor_with_gives_one_object_per_configuration():
    """Equal configurations: the same object; another option value, mode or none: another."""
    off = backends.inductor_with(None, {"epilogue_fusion": False})
    assert backends.inductor_with(None, {"epilogue_fusion": False}) is off
    assert backends.inductor_with(None, dict(epilogue_fusion=False)) is off
    on = backends.inductor_with(None, {"epilogue_fusion": True})
    assert on is not off and isinstance(on, backends.Inductor)
    ro = backends.inductor_with("reduce-overhead")
    assert backends.inductor_with("reduce-overhead", {}) is ro and ro not in (on, off)
    assert ro.cudagraphs and not off.cudagraphs
    # no configuration at all: the plain inductor backend
    assert backends.inductor_with() is backends.inductor
    assert backends.inductor_with("default", {}) is backends.inductor
    # compile() gives every function of a configuration that object
    f = tracer.compile(lambda x: x + 1, backend="inductor", options={"epilogue_fusion": False})
    g = tracer.compile(lambda x: x - 1, backend="inductor", options={"epilogue_fusion": False})
    assert f._backend is g._backend is off


# ---- 4. reduce-overhead: every call starts a new cudagraph-trees step --------------------------

def _add_one(x):
    return x.sin() + 1


def test_reduce_overhead_calls_each_start_a_new_step():
    """mode="reduce-overhead" gives a _CudagraphFunction: every call (first and warm, of a
    function, a bound method, a module) advances GenerationTracker.generation; a plain inductor
    compile gives a CompiledFunction, whose warm calls leave it alone. (Not one_version: the
    call path of a subclass of the C dispatcher differs between Python versions.)"""
    fn = tracer.compile(_add_one, backend="inductor", mode="reduce-overhead")
    assert type(fn) is _CudagraphFunction
    model = _Net().eval()
    mod = tracer.compile(model, backend="inductor", mode="reduce-overhead")
    assert type(mod._compiled_forward) is _CudagraphFunction

    class Holder:
        def step(self, x):
            return x.cos() * 2
    holder = Holder()
    meth = tracer.compile(holder.step, backend="inductor", mode="reduce-overhead")
    assert type(meth.__func__) is _CudagraphFunction

    x = torch.randn(4, 8)
    with torch.no_grad(), traced() as t:
        for c, eager in ((fn, _add_one), (mod, model), (meth, holder.step)):
            for _ in range(3):
                before = _generation()
                got = c(x)
                assert _generation() >= before + 1, c
                _close(got, eager(x))
    assert t.frames_traced == 3 and t.recompiles == 0, str(t)
    assert_captured(t, min_ops=6, graphs=3)

    plain = tracer.compile(_add_one, backend="inductor")
    other = tracer.compile(_add_one, backend="inductor", options={"epilogue_fusion": False})
    no_cg = tracer.compile(_add_one, backend="inductor", mode="max-autotune-no-cudagraphs")
    assert type(plain) is CompiledFunction and type(other) is CompiledFunction and type(no_cg) is CompiledFunction
    assert type(tracer.compile(_add_one, backend="inductor", mode="max-autotune")) is _CudagraphFunction
    with torch.no_grad():
        _close(plain(x), _add_one(x))
        before = _generation()
        _close(plain(x), _add_one(x))  # warm
        assert _generation() == before


# ---- 5. static inputs: the module's tensors, and tensors marked static -------------------------

def test_module_tensors_are_static_address_placeholders():
    """The graph's placeholders of the module's parameters and buffer carry
    meta["static_address"]; the call's own inputs do not. _mark_static_inputs turns exactly
    those (and an input marked by torch._dynamo.mark_static_address) into TorchDynamo's
    "static input" metadata, with a compile id in gm.meta."""
    graphs = []

    def record(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward
    model = _WithState().eval()
    c = tracer.compile(model, backend=record)
    x, kv = torch.randn(4, 8), torch.zeros(16)
    torch._dynamo.mark_static_address(kv)
    with torch.no_grad(), traced() as t:
        got = c(x, kv)
    _close(got, model(x, kv))
    assert_captured(t, min_ops=4, graphs=1)
    gm = c._compiled_forward.entries[0].graph
    assert gm is graphs[0][0]
    static = {n.name for n in _placeholders(gm) if n.meta.get("static_address")}
    assert static == _MODULE_TENSORS, [(n.name, n.meta.get("static_address")) for n in _placeholders(gm)]
    assert {n.name for n in _placeholders(gm)} == _MODULE_TENSORS | {"x", "kv"}

    gm, example_inputs = graphs[0]
    assert "dynamo_compile_id" not in gm.meta
    backends._mark_static_inputs(gm, example_inputs)
    assert "dynamo_compile_id" in gm.meta
    kinds = {n.name: n.meta.get("tensor_dict", {}).get("_dynamo_static_input_type") for n in _placeholders(gm)}
    assert kinds == {**dict.fromkeys(_MODULE_TENSORS, "unguarded"), "kv": kv._dynamo_static_input_type, "x": None}
    assert all(getattr(n, "_dynamo_source", None) is not None for n in _placeholders(gm))


@pytest.mark.one_version  # inductor's kernels
def test_reduce_overhead_marks_the_entry_graph_for_inductor():
    """Through the real path: a module compiled with mode="reduce-overhead" hands inductor a
    graph whose parameter and buffer placeholders say "static input" and whose input does not."""
    model = _Net().eval()
    c = tracer.compile(model, backend="inductor", mode="reduce-overhead")
    x = torch.randn(4, 8)
    with torch.no_grad(), traced() as t:
        _close(c(x), model(x))
    assert_captured(t, min_ops=4, graphs=1)
    gm = c._compiled_forward.entries[0].graph
    kinds = {n.name: n.meta.get("tensor_dict", {}).get("_dynamo_static_input_type") for n in _placeholders(gm)}
    assert kinds == {**dict.fromkeys(_MODULE_TENSORS, "unguarded"), "x": None}, kinds
    assert "dynamo_compile_id" in gm.meta


# ---- 6. copies keep the mode ------------------------------------------------------------------

@pytest.mark.one_version  # inductor's kernels
@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copy_of_a_compiled_module_keeps_the_mode(how):
    """deepcopy / pickle round trip: the copy is compiled with the same mode (options, class of
    its compiled forward, backend object) and computes what the copied model computes eagerly."""
    model = _Net().eval()
    c = tracer.compile(model, backend="inductor", mode="reduce-overhead")
    x = torch.randn(4, 8)
    with torch.no_grad():
        _close(c(x), model(x))
    new = copy.deepcopy(c) if how == "deepcopy" else pickle.loads(pickle.dumps(c))
    assert new is not c and new._orig_mod is not model
    assert new._tracer_options["mode"] == "reduce-overhead" and new._tracer_options["backend"] == "inductor"
    assert type(new._compiled_forward) is _CudagraphFunction
    assert new._compiled_forward._backend is c._compiled_forward._backend
    with torch.no_grad():
        new.scale.mul_(3.0)  # (its own buffer: the copy computes with its own state)
        x2 = torch.randn(4, 8)
        before = _generation()
        with traced() as t:
            got = new(x2)
        assert _generation() >= before + 1
        _close(got, new._orig_mod(x2))
        _close(c(x2), model(x2))
    assert not torch.allclose(got, model(x2))
    assert t.fallbacks == 0 and t.internal_errors == 0, str(t)
    assert_captured(new, min_ops=4)


# ---- 7. the disk cache -----------------------------------------------------------------------

@pytest.mark.one_version  # inductor's kernels (the entry's bytecode is checked by test_persist.py)
def test_entry_with_options_is_saved_and_loaded_by_its_configuration(tmp_path, monkeypatch):
    """An entry compiled with options is written (the Inductor backend is portable) and, with
    the tracer's caches emptied and new backend objects made (what a new process has), read
    back instead of traced, matched by configuration (another option value is not served it);
    its graph keeps the static_address marks and the loaded entry computes what eager does.
    (In this process rather than a child: a suite process may hold torch patches other tests
    left, which a fresh one's entries would be stale under, see persist/library_io.py.)"""
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir
    # (the Store would set TORCHINDUCTOR_CACHE_DIR for the rest of the session: keep it as it is)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", inductor_cache_dir())
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    options = {"epilogue_fusion": False}
    model = _Net().eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        c = tracer.compile(model, backend="inductor", options=options)
        _close(c(x), model(x))
    s = tracer.stats()
    assert s.frames_traced == 1 and s.cache_saved >= 1 and s.cache_unsaved == {}, s
    assert_captured(c, min_ops=4, entries=1)
    assert list(tmp_path.rglob("*.entry")), list(tmp_path.rglob("*"))
    first_backend = c._compiled_forward._backend

    # "the next process": no entries in memory, no backend objects made yet
    tracer.reset()
    monkeypatch.setattr(backends, "_INDUCTORS", {})
    model2 = _Net().eval()
    model2.load_state_dict(model.state_dict())
    with torch.no_grad():
        model2.scale.fill_(2.0)  # (a tensor the graph reads as an input, not a constant)
        other = tracer.compile(model2, backend="inductor", options={"epilogue_fusion": True})
        with traced() as t:  # another configuration: never served the entry
            _close(other(x), model2(x))
        assert t.frames_traced == 1 and tracer.stats().cache_loaded == 0, str(t)
        c2 = tracer.compile(model2, backend="inductor", options=options)
        assert c2._compiled_forward._backend is not first_backend
        with traced() as t:
            got = c2(x)
        _close(got, model2(x))
        after = tracer.stats()
        assert after.cache_loaded >= 1 and t.frames_traced == 0, (after, str(t))
        assert_warm(c2, x)
    entry = c2._compiled_forward.entries[0]
    assert entry.backend is c2._compiled_forward._backend
    assert {n.name for n in _placeholders(entry.graph) if n.meta.get("static_address")} == _MODULE_TENSORS
    assert_captured(c2, min_ops=4, entries=1)
