"""`tracer.compile(..., check=True)`: jit.trace's `check_trace` habit for a tracer.

The first calls of each new cache entry also run the original function eagerly, on copies of
the inputs, and compare with the compiled call: outputs, inputs the call mutated (tensors,
containers, a module's state), and gradients of the outputs with respect to input tensors
and parameters that require grad. A mismatch raises `CheckError` naming the entry, its graph
and the first difference. Tolerances are options (`check_rtol`, `check_atol`).

Why copies and the same RNG state: the eager run must see exactly what the compiled run sees
and must not touch the user's objects, so it runs on deep copies, starting from the RNG state
the compiled call starts from (dropout draws the same masks with the eager backend; a backend
with its own RNG, like inductor, needs deterministic models to be checked). Gradients are
taken with `torch.autograd.grad` (no `.grad` is written) and `retain_graph=True` (the user can
still call backward on what the compiled call returned).
"""
import copy
import logging
import math

import torch
import torch.utils._pytree as pytree

from .runtime.frame_hook import hook

log = logging.getLogger("tracer")


class CheckError(AssertionError):
    """A compiled call disagreed with the eager call (tracer.compile(..., check=True))."""


def checked(run, entry, eager_fn, calls, rtol, atol, on_done, name, own_slots=()):
    """`run` (an entry's runner, taking the argument slots) that, for its first `calls` calls,
    also runs `eager_fn(*slots)` on copies and compares. `on_done(plain_run)` is called after
    the last checked call, so the caller can drop the wrapper from its hot path. `own_slots`:
    the slots the call makes for the frame alone (its `*args` tuple and `**kwargs` dict),
    which it may change as its own locals: not compared as inputs (the eager run is handed
    fresh ones)."""
    left = [calls]

    def inputs(slots):
        return [s for i, s in enumerate(slots) if i not in own_slots]

    def run_checked(*L):
        left[0] -= 1
        if left[0] <= 0:
            on_done(run)
        try:
            copies = _copy(L)
        except Exception as e:  # noqa: BLE001 - an input that cannot be copied: say so, run
            log.warning("tracer check=True: call not checked, its inputs cannot be copied (%s: %s)",
                        type(e).__name__, e)
            return run(*L)
        rng = _rng_state()
        with hook(None):  # the eager run is plain Python: nothing in it is traced
            expected = eager_fn(*copies)
        _set_rng_state(rng)
        got = run(*L)
        where = _compare("output", got, expected, rtol, atol) or \
            _compare("input", inputs(L), inputs(copies), rtol, atol) or \
            _compare_grads(got, expected, L, copies, rtol, atol)
        if where:
            graph = entry.graph.code.strip() if entry.graph is not None else "(no graph)"
            raise CheckError(f"tracer check failed for {name} (cache entry with {entry.ops} ops, "
                             f"{len(entry.breaks)} graph breaks): {where}\nthe entry's graph:\n{graph}")
        return got

    run_checked._entry = entry
    return run_checked


# ---- copying -------------------------------------------------------------------------------

def _copy(L):
    memo = {}
    for t in _leaves(L):  # tensors that are not graph leaves cannot be deep-copied: detach
        if isinstance(t, torch.Tensor) and not t.is_leaf and id(t) not in memo:
            memo[id(t)] = t.detach().clone().requires_grad_(t.requires_grad)
    return copy.deepcopy(tuple(L), memo)


def _leaves(tree):
    return [x for x in pytree.tree_leaves(tree)]


def _rng_state():
    return torch.random.get_rng_state(), (torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None)


def _set_rng_state(state):
    cpu, cuda = state
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


# ---- comparing -----------------------------------------------------------------------------

def _compare(path, got, expected, rtol, atol):
    """The first difference between two values, as text; None when they agree."""
    if isinstance(got, torch.nn.Module) and isinstance(expected, torch.nn.Module):
        return _compare(f"{path} (module state)", got.state_dict(keep_vars=False),
                        expected.state_dict(keep_vars=False), rtol, atol)
    if isinstance(got, torch.Tensor) or isinstance(expected, torch.Tensor):
        return _compare_tensors(path, got, expected, rtol, atol)
    if isinstance(got, dict) and isinstance(expected, dict):
        if list(got) != list(expected):
            return f"{path}: keys {list(got)} != {list(expected)}"
        for k in got:
            d = _compare(f"{path}[{k!r}]", got[k], expected[k], rtol, atol)
            if d:
                return d
        return None
    if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
        if type(got) is not type(expected) or len(got) != len(expected):
            return f"{path}: {type(got).__name__} of {len(got)} != {type(expected).__name__} of {len(expected)}"
        for i, (a, b) in enumerate(zip(got, expected)):
            d = _compare(f"{path}[{i}]", a, b, rtol, atol)
            if d:
                return d
        return None
    if hasattr(got, "__dict__") and type(got) is type(expected) and not callable(got) \
            and hasattr(expected, "__dict__"):
        return _compare(f"{path} (attributes)", vars(got), vars(expected), rtol, atol)
    if isinstance(got, float) and isinstance(expected, float):
        if math.isclose(got, expected, rel_tol=rtol, abs_tol=atol) or (got != got and expected != expected):
            return None
        return f"{path}: {got!r} != {expected!r}"
    try:
        same = bool(got == expected) if type(got) is type(expected) else False
    except Exception:  # noqa: BLE001 - values without a usable ==: identity is all we can say
        same = got is expected
    return None if same else f"{path}: {_short(got)} != {_short(expected)}"


def _compare_tensors(path, got, expected, rtol, atol):
    if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)):
        return f"{path}: {_short(got)} != {_short(expected)}"
    for what in ("shape", "dtype", "device"):
        if getattr(got, what) != getattr(expected, what):
            return f"{path}: {what} {getattr(got, what)} != {getattr(expected, what)}"
    if got.requires_grad != expected.requires_grad:
        return f"{path}: requires_grad {got.requires_grad} != {expected.requires_grad}"
    a, b = got.detach(), expected.detach()
    if a.is_floating_point() or a.is_complex():
        close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = a == b
    if bool(close.all()):
        return None
    bad = (~close).nonzero()[0].tolist()
    diff = (a.double() - b.double()).abs().max().item() if not a.is_complex() else float("nan")
    return (f"{path}: values differ (max abs diff {diff:.3g}; first at index {tuple(bad)}: "
            f"{a[tuple(bad)].item()!r} vs {b[tuple(bad)].item()!r})")


def _compare_grads(got, expected, L, copies, rtol, atol):
    outs_g = [t for t in _leaves(got) if isinstance(t, torch.Tensor) and t.requires_grad]
    outs_e = [t for t in _leaves(expected) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs_g or len(outs_g) != len(outs_e):
        return None  # (a requires_grad difference was reported as an output difference)
    wrt_g, wrt_e = _grad_leaves(L), _grad_leaves(copies)
    if not wrt_g or len(wrt_g) != len(wrt_e):
        return None
    gen = torch.Generator().manual_seed(0)
    cot = [torch.randn(t.shape, generator=gen, dtype=t.dtype if t.is_floating_point() else torch.float32)
           .to(t.device) for t in outs_g]
    with hook(None):
        g = torch.autograd.grad(outs_g, wrt_g, cot, retain_graph=True, allow_unused=True)
        e = torch.autograd.grad(outs_e, wrt_e, cot, allow_unused=True)
    for i, (a, b) in enumerate(zip(g, e)):
        if a is None and b is None:
            continue
        if a is None or b is None:
            return f"gradient {i}: {'none' if a is None else 'a value'} != {'none' if b is None else 'a value'}"
        d = _compare_tensors(f"gradient of input leaf {i}", a, b, rtol, atol)
        if d:
            return d
    return None


def _grad_leaves(L):
    out, seen = [], set()
    for x in L:
        tensors = list(x.parameters()) if isinstance(x, torch.nn.Module) else _leaves(x)
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf and id(t) not in seen:
                seen.add(id(t))
                out.append(t)
    return out


def _short(v):
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."
