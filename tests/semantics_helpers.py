"""Shared checks for the Python-semantics regression tests (issue 10).

`run` calls a function eagerly and through `tracer.compile` on deep copies of the same
inputs, asserts the results (and any mutation of the inputs) are equal, and returns what the
tracer did during the compiled call (a `Delta` of `tracer.stats()`). `dynamo_graphs` counts
the graphs torch.compile makes for the same call (torch._dynamo with a counting backend,
after torch._dynamo.reset()), so a test can put the two side by side.
"""
import collections
import copy
import dataclasses
import functools
import types

import torch

import tracer


def same(a, b):
    """Structural equality: same types, equal tensors (values, dtype, shape, requires_grad)."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                and a.requires_grad == b.requires_grad
                and torch.allclose(a.detach(), b.detach(), equal_nan=True, atol=1e-6))
    if type(a) is not type(b):
        return False
    if type(a).__module__ == "numpy" and hasattr(a, "dtype"):  # an ndarray or a NumPy scalar
        import numpy as np
        if a.dtype != b.dtype or np.shape(a) != np.shape(b):
            return False
        if a.dtype.kind not in "biufc":
            return bool(np.array_equal(a, b))
        return bool(np.allclose(a, b, equal_nan=True, atol=1e-6))
    if isinstance(a, BaseException):
        return a.args == b.args
    if isinstance(a, collections.deque):
        return a.maxlen == b.maxlen and same(list(a), list(b))
    if isinstance(a, types.FunctionType):  # made by the call: the same code and defaults
        return a.__code__ is b.__code__ and same(a.__defaults__, b.__defaults__)
    if isinstance(a, functools.partial):
        return a.func is b.func and same(a.args, b.args) and same(a.keywords, b.keywords)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a.keys()) == list(b.keys()) and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if _slot_state(a) and not callable(a) and not isinstance(a, type):
        if not same(_slot_state(a), _slot_state(b)):
            return False
        if not hasattr(a, "__dict__"):
            return True
    if hasattr(a, "__dict__") and not callable(a) and not isinstance(a, type):
        return same(vars(a), vars(b))
    return a == b


def _slot_state(obj):
    """The values in an object's __slots__ (private names mangled), by name; absent ones left out."""
    out = {}
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            attr = f"_{klass.__name__.lstrip('_')}{name}" if name.startswith("__") else name
            if hasattr(obj, attr):
                out[attr] = getattr(obj, attr)
    return out


@dataclasses.dataclass
class Delta:
    """What the tracer did during one compiled call."""
    frames: int
    graphs: int
    breaks: int
    fallbacks: int
    ops: int
    break_reasons: list
    fallback_reasons: list
    dynamo_graphs: int = None  # torch.compile's count for the same call, when asked for


def _snapshot():
    s = tracer.stats()
    return s, len(s.of("break")), len(s.of("fallback"))


def _outcome(fn, args, kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 - the exception is the result to compare
        return ("raised", e)


def run(c, fn, *args, **kwargs):
    """Eager vs compiled on copies of the inputs: results (or the exception raised: same type
    and args) and input mutations must agree. Returns (compiled result, Delta)."""
    ea, ek = copy.deepcopy(args), copy.deepcopy(kwargs)
    ref = _outcome(fn, ea, ek)
    ca, ck = copy.deepcopy(args), copy.deepcopy(kwargs)
    before, nb, nf = _snapshot()
    out = _outcome(c, ca, ck)
    after = tracer.stats()
    assert out[0] == ref[0], f"compiled {out[0]} {out[1]!r}, eager {ref[0]} {ref[1]!r}"
    assert same(out[1], ref[1]), f"result differs: {out[1]!r} vs eager {ref[1]!r}"
    assert same(ca, ea), f"mutated args differ: {ca!r} vs eager {ea!r}"
    assert same(ck, ek), f"mutated kwargs differ: {ck!r} vs eager {ek!r}"
    delta = Delta(frames=after.frames_traced - before.frames_traced, graphs=after.graphs - before.graphs,
                  breaks=after.graph_breaks - before.graph_breaks, fallbacks=after.fallbacks - before.fallbacks,
                  ops=after.ops - before.ops,
                  break_reasons=[e.reason for e in after.of("break")[nb:]],
                  fallback_reasons=[e.reason for e in after.of("fallback")[nf:]])
    return out[1], delta


def check(fn, *args, graphs=None, breaks=0, dynamo=False, **kwargs):
    """Compile fn, compare with eager on a first call, then on a warm call (which must trace
    nothing). Asserts the frame was captured with `graphs` graphs (default: at least one) and
    `breaks` graph breaks, no fallback; with dynamo=True, our graph count must not exceed
    torch.compile's (unless it captures nothing). Returns (compiled function, Delta of the first call)."""
    c = tracer.compile(fn)
    _, d = run(c, fn, *args, **kwargs)
    assert d.fallbacks == 0, f"a frame ran as Python: {d.fallback_reasons}"
    assert d.breaks == breaks, f"expected {breaks} graph breaks, got {d.break_reasons}"
    if graphs is None:
        assert d.graphs >= 1, "nothing was captured"
    else:
        assert d.graphs == graphs, f"expected {graphs} graphs, got {d.graphs}"
    _, warm = run(c, fn, *args, **kwargs)
    assert warm.frames == 0, "a warm call traced again"
    if dynamo:
        theirs = dynamo_graphs(fn, *args, **kwargs)
        # as few graphs as torch.compile, or something where it captures nothing
        assert d.graphs <= theirs or theirs == 0, f"{d.graphs} graphs; torch.compile makes {theirs}"
        d.dynamo_graphs = theirs
    return c, d


_FRESH = [0]


def fresh(fn):
    """A copy of fn with its own code object, hence its own cache (parametrized tests would
    otherwise share one function's recompile limit)."""
    _FRESH[0] += 1  # (equal code objects share a cache: the copy needs a name of its own)
    code = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{_FRESH[0]}")
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def dynamo_graphs(fn, *args, **kwargs):
    """Graphs torch.compile makes for one call of fn (a counting backend, fresh caches)."""
    import torch._dynamo
    torch._dynamo.reset()
    count = [0]

    def backend(gm, example_inputs):
        count[0] += 1
        return gm.forward

    try:
        torch.compile(fn, backend=backend)(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception:  # noqa: BLE001 - the program raises under both; only the count matters
        pass
    finally:
        torch._dynamo.reset()
    return count[0]
