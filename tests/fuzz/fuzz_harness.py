"""Differential check of one generated program: compiled == eager, on several input sets.

`check_source(src)` execs the source twice into fresh namespaces (one run eagerly, one
compiled, each with its own print sink and global counter), then for each input set (the
first one twice, so the cache-hit path runs too, then changed shapes, dtype, constants, list
lengths and dict contents) compares: the result (same types and structure, tensors by
dtype/shape/allclose with equal_nan), the inputs after the call (mutations), the printed
output, the globals (COUNTER, ACC), and, when eager raises, the exception type.
Raises `Mismatch` with a readable description on the first difference.
"""
import copy
import io
import math
import warnings

import numpy as np
import torch

import tracer


class Mismatch(AssertionError):
    pass


def same(a, b, path="result"):
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"{path}: tensor vs {type(b).__name__}"
        if a.shape != b.shape or a.dtype != b.dtype or a.requires_grad != b.requires_grad:
            return f"{path}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}"
        if not torch.allclose(a.detach(), b.detach(), equal_nan=True, rtol=1e-4, atol=1e-5):
            return f"{path}: values differ\n{a}\n{b}"
        return None
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: len {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        for k in a:
            d = same(a[k], b[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b) or math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4) or a == b:
            return None
        return f"{path}: {a!r} vs {b!r}"
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def input_sets(seed=0):
    """The first input set, then one per changed fact the trace may have specialised on."""
    g = torch.Generator().manual_seed(seed)

    def t(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    base = (t(3, 4), t(3, 4), 2, 0.5, [1, 2, 3], {"a": t(3, 4), "b": 1})
    return [
        base,
        base,                                                            # cache hit
        (t(3, 4), t(3, 4), 2, 0.5, [1, 2, 3], {"a": t(3, 4), "b": 1}),  # new values, same facts
        (t(2, 5), t(2, 5), 2, 0.5, [1, 2, 3], {"a": t(2, 5), "b": 1}),  # shape
        (t(4), t(4), 2, 0.5, [1, 2, 3], {"a": t(4), "b": 1}),           # rank
        (t(3, 4, dtype=torch.float64), t(3, 4, dtype=torch.float64), 2, 0.5, [1, 2, 3],
         {"a": t(3, 4, dtype=torch.float64), "b": 1}),                 # dtype
        (t(3, 4), t(3, 4), 7, -1.5, [1, 2, 3], {"a": t(3, 4), "b": 1}),  # constants
        (t(3, 4), t(3, 4), 2, 0.5, [4, 0, 2, 9, 5], {"a": t(3, 4), "b": 1}),  # list length
        (t(3, 4), t(3, 4), 2, 0.5, [], {"a": t(3, 4), "b": t(3, 4), "k": 3}),  # empty list, dict
    ]


def _namespace():
    return {"SINK": io.StringIO(), "COUNTER": [0], "ACC": 0, "__name__": "fuzzprog"}


def _call(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - comparing user exceptions is the point
        return None, e


def check_source(src, backend="eager", n_inputs=None, filename="<string>"):
    try:
        return _check(src, backend, n_inputs, filename)
    except Mismatch as e:
        raise Mismatch(f"{e}\n--- program ---\n{src}") from e.__cause__


def _check(src, backend, n_inputs, filename):
    code = compile(src, filename, "exec")
    ns_e, ns_c = _namespace(), _namespace()
    exec(code, ns_e)
    exec(code, ns_c)
    eager = ns_e["f"]
    compiled = tracer.compile(ns_c["f"], backend=backend)
    sets = input_sets()[:n_inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # recompile-limit warnings are expected here
        for k, args in enumerate(sets):
            a_e, a_c = copy.deepcopy(args), copy.deepcopy(args)
            r_e, x_e = _call(eager, a_e)
            r_c, x_c = _call(compiled, a_c)
            where = f"input set {k}"
            if x_e is not None or x_c is not None:
                if type(x_e) is not type(x_c):
                    raise Mismatch(f"{where}: eager raised {x_e!r}, compiled raised {x_c!r}") from x_c
            else:
                d = same(r_e, r_c)
                if d:
                    raise Mismatch(f"{where}: {d}")
            d = same(list(a_e), list(a_c), "inputs")
            if d:
                raise Mismatch(f"{where}: inputs mutated differently: {d}")
            if ns_e["SINK"].getvalue() != ns_c["SINK"].getvalue():
                raise Mismatch(f"{where}: printed output differs:\n{ns_e['SINK'].getvalue()!r}\n"
                               f"{ns_c['SINK'].getvalue()!r}")
            for name in ("COUNTER", "ACC"):
                if ns_e[name] != ns_c[name]:
                    raise Mismatch(f"{where}: global {name} {ns_e[name]} vs {ns_c[name]}")
    return compiled


__all__ = ["check_source", "Mismatch", "same", "input_sets", "np"]
