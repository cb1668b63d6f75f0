"""Frames with no tensor work: given up on, so that `capture()` is safe around a whole program.

Under `tracer.capture()` every frame of the program reaches the frame hook: the data
pipeline's tokenizer, vocabulary, collate and metrics code as much as the model. A trace of
such a frame makes no graph, or only a graph of Python-scalar operations, while every Python
value it read became a guard, so the next token, label or running sum is a recompile (and,
eight of them later, a RecompileLimitWarning). Running the frame as Python is always correct
and costs nothing; tracing it gains nothing.

The rule (`after_trace`, called by the hook's callback with each entry it traced):

* A trace has **tensor work** when its entry guards a tensor (a `TensorMatch`:
  a tensor reached the trace as an input, a global, a closure cell or an attribute), or its
  graph holds a node whose value is a tensor (a tensor made inside, e.g. `torch.tensor(rows)`,
  or a module parameter). A graph whose every node is a Python scalar (SymInt arithmetic made
  by automatic dynamic) is not tensor work: it is never worth running.
* A code object that had one trace with tensor work is never given up on.
* Otherwise the code is **given up on** after
  - one complete trace without tensor work (the frame returned; nothing of it is left
    untraced, so the trace saw everything this call does), or
  - one trace without tensor work that fell back (the whole frame runs as Python: its
    entry, guarded by nothing but global state, would serve every later call anyway;
    given up, a later call with a tensor argument is traced instead), or
  - two traces without tensor work that broke: what followed the break was not seen the
    first time, and the second trace is a recompile, i.e. the frame's Python values change
    from call to call.
* **Data churn.** A frame with tensor work but no tensor coming in (no tensor guard: it makes
  its tensors from Python values, as a collate function does with `torch.tensor(rows)`) is
  given up on at its first recompile where a value read out of a container (a list item, a
  dict value: an `ItemSource`) changed, as a constant or a length: the values are data, every
  batch would be a new entry, and eight of them the recompile limit. Frames a tensor comes
  into (a model's forward) are never given up on this way: their recompiles follow the
  cache's rules (automatic dynamic, the limit).
* Given up on: the C hook (`_eval_frame.give_up`) runs the frame as Python from then on;
  the cost per call is a flag check and a scan of the argument slots for a tensor.
* **Unhooked.** Even a frame the hook does nothing with costs something while our PEP 523
  evaluator is installed: CPython inlines Python-to-Python calls only when none is, so each
  call under a given-up frame went through the evaluator (call-heavy pure Python ran 1.3-1.4x
  its plain time under `capture()`). A given-up code whose trace saw every call it can make
  (`trace/coverage.py`: every call instruction of every code it ran was run, or calls a
  builtin) is allowed to run *unhooked*: its next run is watched, and if nothing under it
  reached the callback (nothing traced, no compiled entry run), later runs uninstall the
  evaluator for their duration (when no other thread has a callback), so CPython runs the
  whole subtree as it does without us. One run in 64 is watched again; a watched run that
  reaches the callback (a function table now holds a function with tensor work) ends the
  unhooked runs of that code for good. A call the trace did not see (the other arm of an
  `if` that calls a model) keeps the code hooked, so what it reaches is still captured. A call
  with a tensor among its arguments (or in its `*args`) lifts the mark and is traced as
  usual: a function called with ints first and tensors later is captured when the tensors
  arrive (and, having had tensor work, is never given up on again). A tensor reaching it
  another way (inside a list, a global) finds it run as Python: correct, not captured.
* Decided by `capture()`'s callback only (`FrameCallback.gives_up`); honoured by every callback
  of the default rule (`capture()` with the default skip prefixes, and the callback
  `tracer.compile` uses for frames after a graph break); a callback with other prefixes checks
  the mark in Python on a miss. Why compile's callback does not decide: a given-up frame's
  callees, inlined while it was traced, reach the hook as frames of their own when it runs as
  Python, each traced once (and given up in its turn); a warm compiled call must trace nothing. A given-up frame still inlines normally when
  a traced frame calls it: the mark only stops a trace from *starting* there.
* Each code given up on is recorded once (`records.given_up`: `tracer.stats().given_up`
  names it with the reason), never as a warning. `tracer.reset()` lifts every mark.

Compared with torch.compile (torch/_dynamo/convert_frame.py): dynamo raises SkipFrame when a
frame's trace produced no graph ops ("skipping because no torch.* ...") and marks the code
skipped for good, whatever arguments come later; a frame with ops whose Python values keep
changing recompiles until `recompile_limit` and then runs eagerly with a warning. Here a
scalar-only graph counts as no work, a tensor argument revives a given-up frame, and the
mark is named once in stats().
"""
import torch
from bytecode_utils.instructions import PerCode
from guards.guard import ConstMatch, LengthMatch
from guards.sources import ItemSource
from guards.tensor import TensorMatch

from . import cache, records
from .frame_hook import allow_unhooked, give_up as _c_give_up, is_given_up, lift_give_up, set_tensor_type

set_tensor_type(torch.Tensor)

PARTIAL_TRACES = 2  # traces that stopped early, without tensor work, before a code is given up on

_tensor_free = PerCode()  # code -> traces without tensor work so far
_had_tensor_work = PerCode()  # code -> True: never given up on
_given_up = PerCode()  # code -> reason (lifted by reset(), or by the hook when a tensor arrives)


def tensor_work(entry):
    """Whether the trace behind `entry` touched a tensor (see the module's docstring)."""
    if any(isinstance(g, TensorMatch) for g in entry.guards.guards):
        return True
    gm = entry.graph
    if gm is None:
        return False
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        if node.op == "get_attr" or "example_value" not in node.meta:
            return True  # (a parameter, or a node whose value we cannot see: assume work)
        if _holds_tensor(node.meta["example_value"]):
            return True
    return False


def _holds_tensor(v):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (tuple, list)):
        return any(_holds_tensor(x) for x in v)
    return False


def after_trace(code, entry):
    """Decide, after a trace of `code` made `entry`, whether the code is given up on."""
    if _had_tensor_work.get(code):
        if _churn(code, entry):
            give_up(code, "its tensors are made from Python data whose values change between calls")
        return
    if tensor_work(entry):
        _had_tensor_work[code] = True
        _tensor_free[code] = 0
        return
    n = _tensor_free.get(code, 0) + 1
    _tensor_free[code] = n
    complete = entry.code is not None and not entry.breaks
    if complete:
        give_up(code, "a complete trace made no tensor work")
    elif entry.code is None:
        give_up(code, f"a trace made no tensor work and fell back: {entry.reason}")
    elif n >= PARTIAL_TRACES:
        give_up(code, f"{n} traces made no tensor work (the last one broke)")
    else:
        return
    if entry.saw_every_call:
        allow_unhooked(code)


def _item_facts(entry):
    """{source: value or length} of the entry's guards on values read out of containers;
    None when a tensor comes into the frame."""
    facts = {}
    for g in entry.guards.guards:
        if isinstance(g, TensorMatch):
            return None
        if isinstance(g, (ConstMatch, LengthMatch)):
            src = g.source
            if isinstance(src, ItemSource) or any(isinstance(a, ItemSource) for a in src.ancestors()):
                facts[(type(g), src)] = g.value if isinstance(g, ConstMatch) else g.length
    return facts


def _churn(code, entry):
    """A recompile of a frame with no tensor coming in, where a value read out of a container
    differs from the entry before it."""
    entries = cache.cache_for(code).entries
    if len(entries) < 2 or entries[-1] is not entry:
        return False
    new, old = _item_facts(entry), _item_facts(entries[-2])
    if not new or not old:
        return False
    return any(k in old and old[k] != v for k, v in new.items())


def give_up(code, reason):
    _c_give_up(code)
    if is_given_up(code):
        if _given_up.get(code) is None:
            records.given_up(code, reason)
        _given_up[code] = reason


def given_up(code):
    """Whether `code` is given up on now (the hook lifts the mark when a tensor arrives)."""
    return is_given_up(code)


class _Reset:
    """cache.reset() (tracer.reset()) lifts every mark and forgets the counts."""

    def _clear_cache(self):
        for code, _reason in _given_up.items():
            lift_give_up(code)
        _given_up.clear()
        _tensor_free.clear()
        _had_tensor_work.clear()


_RESET = _Reset()
cache.register_view(_RESET)
