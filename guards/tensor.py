"""TensorMatch: the tensor facts a graph was compiled for.

Why a module of its own: tensors are checked in C++ by ``torch._C._dynamo.guards.TensorGuards``
(exact Python type, dispatch key set, dtype, device, requires_grad, sizes, strides), and
the builder batches every TensorMatch of a set into ONE TensorGuards object, so the
per-call cost is a single C call.  TensorGuards copies metadata; it keeps no reference to
the example tensors (tested), and neither does TensorMatch: it holds plain metadata, a
one-tensor TensorGuards for the slow "why did it fail" path, and a weakref to the
example used only until the batch is built: the GuardSet then drops it (`forget_example`),
since `torch.utils.swap_tensors` refuses a tensor that any weakref points to (a module's
`.double()` under `set_swap_module_params_on_conversion`, after one compiled call, raised
"Couldn't swap Linear.weight").

TensorFact and StorageSharing pin what TensorGuards does not read, for the graphs that rely on
it: a fact of one tensor object a trace folded (its storage offset, whether it is a view...),
and how inputs over one storage lie in it.

Torch internals read here: TensorGuards, compute_overlapping_tensors and
torch._C._dispatch_keys; checked on torch 2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them
all; tests/test_torch_internals.py resolves each).
"""

from __future__ import annotations

import dataclasses
import operator
import weakref
from typing import Any

import torch
from torch._C._dynamo.guards import TensorGuards, compute_overlapping_tensors

from .guard import Guard, _tname
from .sources import Source


def none_nested(*values) -> bool:
    """No value is a nested tensor: TensorGuards aborts the process (not an exception) when
    it reads the strides of one, so the generated check asks this first."""
    for v in values:
        if getattr(v, "is_nested", False):
            return False
    return True


def make_tensor_guards(examples: list[torch.Tensor], sizes=None, strides=None) -> TensorGuards:
    """A TensorGuards over ``examples`` (copies their metadata only).

    ``sizes``/``strides``: per example, the expected sizes and strides with None for a
    dynamic entry (checked by the entry's ShapeMatch guards instead); default: the
    examples' own, all static."""
    return TensorGuards(
        *examples,
        dynamic_dims_sizes=[list(s) for s in sizes] if sizes else [list(t.shape) for t in examples],
        dynamic_dims_strides=[list(s) for s in strides] if strides else [list(t.stride()) for t in examples],
    )


def _no_example():
    """A forgotten example's stand-in for its weakref: always dead."""
    return None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TensorMatch(Guard):
    """Type, dispatch keys, dtype, device, shape, strides and requires_grad of a tensor.

    With dynamic shapes, ``shape``/``stride`` hold None for a symbolic entry: only the
    number of dims and the static entries are checked here (as torch's TensorGuards does
    with dynamic_dims_sizes); the symbolic ones are the ShapeMatch guards' job.
    ``names`` (for describe) spells each dynamic entry by its symbol, e.g. ``s0``.
    """

    source: Source
    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple
    stride: tuple
    requires_grad: bool
    dispatch_keys: str
    _single: Any = dataclasses.field(compare=False)
    _example_ref: Any = dataclasses.field(compare=False)
    aliased: bool = dataclasses.field(default=False, compare=False)  # checked as `is` another source
    names: tuple = dataclasses.field(default=(), compare=False)
    rank = 1

    def __init__(self, source: Source, example: torch.Tensor) -> None:
        if not isinstance(example, torch.Tensor):
            raise TypeError("TensorMatch needs a torch.Tensor example")
        s = object.__setattr__
        s(self, "source", source)
        s(self, "type", type(example))
        s(self, "dtype", example.dtype)
        s(self, "device", example.device)
        s(self, "shape", tuple(example.shape))
        s(self, "stride", tuple(example.stride()))
        s(self, "requires_grad", bool(example.requires_grad))
        s(self, "dispatch_keys", str(torch._C._dispatch_keys(example)))
        s(self, "_single", make_tensor_guards([example]))
        s(self, "_example_ref", weakref.ref(example))

    @property
    def dynamic(self) -> bool:
        return None in self.shape or None in self.stride

    def with_dynamic(self, sizes, strides, names=()) -> "TensorMatch":
        """This guard with the entries that are None in ``sizes``/``strides`` left unchecked."""
        ex = self._example_ref()
        sizes, strides = tuple(sizes), tuple(strides)
        if ex is None or len(sizes) != len(self.shape) or len(strides) != len(self.stride):
            raise ValueError("with_dynamic: example gone or rank differs")
        twin = self.uncached()
        object.__setattr__(twin, "shape", sizes)
        object.__setattr__(twin, "stride", strides)
        object.__setattr__(twin, "names", tuple(names))
        object.__setattr__(twin, "_single", make_tensor_guards([ex], [sizes], [strides]))
        return twin

    def for_sibling(self, source: Source, example: torch.Tensor) -> "TensorMatch":
        """This guard on `example` read through `source`, which the caller has checked passes
        it (a replayed block's parameter, checked by its block's check: the same facts,
        without asking torch for them again and making another TensorGuards)."""
        twin = self.uncached()
        object.__setattr__(twin, "source", source)
        object.__setattr__(twin, "_example_ref", weakref.ref(example))
        object.__setattr__(twin, "aliased", False)
        return twin

    def as_alias_of(self, other: "TensorMatch") -> "TensorMatch":
        """This guard, left out of the batch: a SameObject guard ties it to `other`."""
        twin = self.uncached()
        object.__setattr__(twin, "aliased", True)
        return twin

    def _key(self):
        return (self.source, id(self.type), self.dtype, str(self.device), self.shape,
                self.stride, self.requires_grad, self.dispatch_keys)

    def forget_example(self) -> None:
        """Drop the weakref to the example (the set this guard is compiled into no longer needs
        it): a weakref on a user tensor makes `torch.utils.swap_tensors` refuse it. What the
        guard checks is its metadata, never the example's identity."""
        object.__setattr__(self, "_example_ref", _no_example)

    def live_example(self) -> torch.Tensor | None:
        """The example if it is still alive and still matches this guard, else None."""
        t = self._example_ref()
        if t is None or not self._single.check(t):
            return None
        return t

    def conditions(self, ctx):
        # used when this guard is evaluated on its own (slow path, or no live example)
        v = ctx.value(self.source)
        return [f"{ctx.const(none_nested)}({v})", f"{ctx.const(self._single.check)}({v})"]

    def reason(self, value: Any) -> str | None:
        """None if ``value`` passes, else TensorGuards' explanation."""
        if not none_nested(value):
            return "a nested tensor"
        try:
            r = self._single.check_verbose(value, tensor_check_names=[self.source.name()])
        except Exception as e:  # noqa: BLE001 - explanation path only
            return f"{type(e).__name__}: {e}"
        return None if r is True else str(r)

    def describe(self):
        name = "tensor" if self.type is torch.Tensor else _tname(self.type)
        dt = str(self.dtype).replace("torch.", "")
        return (f"{self.source.name()}: {name} {dt} {self.device} shape {self._spell(self.shape, 0)} "
                f"stride {self._spell(self.stride, len(self.shape))} requires_grad={self.requires_grad}")

    def _spell(self, values, offset):
        """A shape/stride tuple, dynamic entries by symbol (``(s0, 4)``)."""
        if None not in values:
            return str(values)
        names = self.names
        parts = [str(v) if v is not None else (names[offset + i] if offset + i < len(names) else "*")
                 for i, v in enumerate(values)]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


# The facts of a tensor object that TensorGuards does not read, each as the traced code reads
# it (an attribute or a call without arguments): TensorFact guards one a trace folded.
FACT_READERS = {
    "storage_offset": operator.methodcaller("storage_offset"),
    "is_leaf": operator.attrgetter("is_leaf"),
    "_is_view": operator.methodcaller("_is_view"),
    "is_shared": operator.methodcaller("is_shared"),
    "is_pinned": operator.methodcaller("is_pinned"),
}


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TensorFact(Guard):
    """``x.<fact>`` (one of FACT_READERS) is still ``value``, as it was when the frame was
    entered. Why: the trace folded a fact of the input that its TensorMatch leaves out (where
    a slice starts in its storage, whether autograd made it, whether it is a view, whether its
    storage is shared or pinned); a later input that differs only there would get the first
    one's answer. Made only where a trace reads the fact (tracer/variables/tensor_facts.py),
    so frames that never read one pay nothing."""

    source: Source
    fact: str
    value: Any

    def _key(self):
        return (self.source, self.fact, type(self.value), self.value)

    def conditions(self, ctx):
        read = FACT_READERS[self.fact]
        return [f"{ctx.const(read)}({ctx.value(self.source)}) == {ctx.const(self.value)}"]

    def describe(self):
        call = "" if self.fact == "is_leaf" else "()"
        return f"{self.source.name()}.{self.fact}{call} == {self.value!r} (as traced)"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class StorageSharing(Guard):
    """Which of the given tensors share a storage, and how those lie in it, is as it was:
    ``groups[i]`` is the index of the first of them whose storage tensor i views;
    ``offsets`` (storage_offsets) is () when no two share one, else per tensor its storage
    offset where two of its group overlap in memory, None elsewhere.

    Why: a graph that writes into an input is functionalised by AOTAutograd (aot_eager,
    inductor) for the layout it was traced with. Inputs over one storage that do not overlap
    (`t[:3], t[3:]`) it takes as distinct: passed overlapping views later, the graph would
    read what was there before the write, where eager reads the written values. A group that
    overlaps it replaces by one base and makes each view of it again at the offset it was
    traced with (sizes and strides are TensorMatch's): those offsets must stay too. Whether
    two overlap is asked of AOTAutograd's own test (compute_overlapping_tensors), so the
    guard draws the line where the compiled graph does."""

    sources_: tuple
    groups: tuple
    offsets: tuple = ()

    def sources(self):
        return self.sources_

    def _key(self):
        return (self.sources_, self.groups, self.offsets)

    def conditions(self, ctx):
        values = ", ".join(ctx.value(s) for s in self.sources_)
        return [f"{ctx.const(storage_layout)}({values}) == {ctx.const((self.groups, self.offsets))}"]

    def describe(self):
        names = [s.name() for s in self.sources_]
        shared = [f"{names[i]} shares {names[g]}'s storage" for i, g in enumerate(self.groups) if g != i]
        text = ", ".join(shared) if shared else ", ".join(names) + " view distinct storages"
        if shared:
            at = [f"{names[i]} at {o}" for i, o in enumerate(self.offsets) if o is not None]
            text += f", overlapping ({', '.join(at)})" if at else ", without overlapping"
        return text + " (as traced)"


def storage_layout(*tensors):
    """(storage_groups, storage_offsets) of `tensors`: what StorageSharing compares."""
    groups = storage_groups(*tensors)
    return groups, storage_offsets(tensors, groups)


def storage_offsets(tensors, groups):
    """Per tensor, its storage offset if two tensors of its storage group overlap in memory
    (AOTAutograd's test: it then makes the group one base), else None; () when no two share a
    storage (the common case costs nothing more than the groups)."""
    members = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    shared = [m for m in members.values() if len(m) > 1]
    if not shared:
        return ()
    out = [None] * len(tensors)
    for m in shared:
        if len(compute_overlapping_tensors([tensors[i] for i in m], symbolic=False)) > 1:
            for i in m:
                out[i] = tensors[i].storage_offset()
    return tuple(out)


def storage_groups(*tensors):
    """For each tensor, the index of the first of `tensors` that views its storage (a tensor
    without one, sparse or nested, shares with none)."""
    first = {}
    out = []
    for i, t in enumerate(tensors):
        key = storage_id(t)
        out.append(first.setdefault(key if key != UNKNOWN_STORAGE else ("object", id(t)), i))
    return tuple(out)


def storage_id(tensor):
    """Which storage a (real or fake) tensor views: equal for a tensor and all its views.
    UNKNOWN_STORAGE for tensors without one (functorch's wrappers, nested and sparse tensors)."""
    try:
        return tensor.untyped_storage()._cdata
    except (NotImplementedError, RuntimeError):
        return UNKNOWN_STORAGE


UNKNOWN_STORAGE = -1
