"""An entry's library reads (variables/library_reads.py) as plain values, and their check.

A trace reads library namespaces (torch, torch.nn.functional, torch.linalg, math...) without
guards: rule 7 trusts them as immutable code. Within the process that traced it that holds; the
next process that loads the entry may hold other objects under those names (a kernel library's
patch, a `torch_npu` import, a patch made after the first compile). So the entry's record lists
each such read, and loading the entry checks each against the live namespace.

Written, per read: (kind, namespace, name, what was found, its fingerprint).
- The namespace: a module, by its name (portable.Writer: "M"), or a library frame's globals, by
  their module's name ("G").
- What was found: described as any object of an entry is (portable.Writer: where to find it
  again, on its own, not through this namespace where it lives elsewhere: `F.gelu` is
  `torch._C._nn.gelu`; a function by its code's fingerprint too); an object no name finds (an
  instance a namespace holds: a flags object, torch._C._VariableFunctions) by its type.
- Its fingerprint (portable.fingerprint): what it is wherever it was found (a function's code,
  defaults and closure; another object's type, module and qualified name). A replacement
  placed under the very name the description uses (`torch.relu = my_relu`) is told apart here.
- For a presence (hasattr, a getattr that found nothing): whether the name was there.

Checked when the entry is read (`check_reads`): under each name the live namespace must hold
the object the description finds (the same object, or an equal constant), with the same
fingerprint, and each presence must hold. Otherwise the entry is Stale: the frame is traced
again, counted in tracer.stats().cache_stale with the name that changed.

torch.Tensor's and nn.Module's methods are reached through objects, not namespace reads: the
callables they hold under torch's names that are not torch's own are written with every entry
and compared when it is read (`class_patches`, below).
"""
import os
import sys
import types

import torch

from ..runtime import policy
from ..variables.base import is_constant_value
from ..variables.library_reads import GLOBAL, HAS
from .portable import Stale, Unportable, _module_of_dict, _same_bound, fingerprint

_MISSING = object()


def write_reads(w, reads):
    """The record's list of an entry's library reads ((kind, namespace, name, value) each)."""
    return tuple(_write_read(w, kind, namespace, name, value) for kind, namespace, name, value in reads)


def _write_read(w, kind, namespace, name, value):
    where = _write_namespace(w, namespace)
    if kind == HAS:
        return (kind, where, name, bool(value), None)
    return (kind, where, name, _write_value(w, value), _print(value))


def _write_namespace(w, namespace):
    """A module by its name, globals by their module's name (never a dict by its contents)."""
    if type(namespace) is dict:
        if _module_of_dict(namespace) is None:
            raise Unportable("a library frame whose globals are no module's")
        return w.write(namespace)
    return _by_module_name(w, namespace) or w.write(namespace)


def _write_value(w, value):
    """Where to find `value` again; for an object no name finds (an instance a namespace holds),
    its type; for one whose type no name finds either, nothing (its fingerprint is checked)."""
    by_name = _by_module_name(w, value)
    if by_name is not None:
        return by_name
    for obj, desc in ((value, lambda d: d), (type(value), lambda d: ("type", d))):
        try:
            return desc(w.write(obj))
        except Exception:  # noqa: BLE001 - Unportable, or a library object's __getattr__ that raises
            continue  # (torch.classes answers every name with a RuntimeError)
    return ("type", None)


def _by_module_name(w, obj):
    """("M", name) for a module that sys.modules holds under its name, a module subclass's
    instance too (torch._VF, which portable.Writer finds by no name)."""
    name = getattr(obj, "__name__", None) if isinstance(obj, types.ModuleType) else None
    if type(name) is not str or sys.modules.get(name) is not obj:
        return None
    w.deps.add(name)
    return ("M", name)


def _print(value):
    """portable.fingerprint, or the type's names where the object answers attribute reads by
    raising (computed alike when the entry is written and when it is read)."""
    try:
        return fingerprint(value)
    except Exception:  # noqa: BLE001
        t = type(value)
        return ("type", t.__module__, t.__qualname__)


def check_reads(r, reads):
    """Raise Stale unless every read of `reads` (as written) finds what the trace found."""
    for kind, where, name, desc, fp in reads:
        namespace = r.read(where)
        live = _live(kind, namespace, name)
        if kind == HAS:
            if (live is not _MISSING) != desc:
                raise Stale(f"{_spell(namespace, name)} {'is gone' if desc else 'appeared'} since the entry was "
                            f"written")
            continue
        if live is _MISSING or _print(live) != fp or not _finds(r, desc, live):
            raise Stale(f"{_spell(namespace, name)} is not what the entry was traced with (patched?)")


def _live(kind, namespace, name):
    """What the program finds under `name` now: a module attribute, or a library frame's global
    (its globals, then their builtins); _MISSING if nothing."""
    if kind == GLOBAL:
        if name in namespace:
            return namespace[name]
        builtins = namespace.get("__builtins__")
        builtins = builtins if isinstance(builtins, dict) else getattr(builtins, "__dict__", {})
        return builtins.get(name, _MISSING)
    try:  # (ATTR, HAS)
        return getattr(namespace, name)
    except Exception:  # noqa: BLE001 - a module __getattr__ that fails: not there
        return _MISSING


def _finds(r, desc, live):
    """Whether the written description finds `live` (by type for an object no name found)."""
    if type(desc) is tuple and desc and desc[0] == "type":
        return desc[1] is None or type(live) is r.read(desc[1])
    try:
        back = r.read(desc)
    except Stale:
        return False
    if back is live or _same_bound(live, back):
        return True
    if type(back) is not type(live) or not (is_constant_value(live) or type(live) in _CONTAINERS):
        return False
    try:  # (a value written by value: a constant, a container of named objects and constants)
        return bool(back == live)
    except Exception:  # noqa: BLE001
        return False


_CONTAINERS = (tuple, list, dict, set, frozenset)


def _spell(namespace, name):
    if type(namespace) is dict:
        return f"{namespace.get('__name__', '?')}.{name}"
    return f"{getattr(namespace, '__name__', '?')}.{name}"


# ---- torch's classes ------------------------------------------------------------------------
# A tensor's methods and nn.Module's call machinery are reached through the object, not read
# from a namespace: what these classes hold that is not torch's own is written with every entry
# and compared when it is read (`class_patches`). Only names the classes had (their own or
# inherited) when the tracer was imported count: torch's API, which the value model knows by
# name. A name added later is no code of torch's a trace relies on (transformers sets
# `nn.Module.smart_apply` when a model initialises its weights: counted, it made every entry of
# the processes that compiled before building a model stale in those that did not).
_CLASSES = (torch.Tensor, torch.nn.Module)
_TORCH_NAMES = {cls: frozenset(dir(cls)) for cls in _CLASSES}
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_C_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType,
                  types.MemberDescriptorType, types.ClassMethodDescriptorType)


def class_patches():
    """(class, name, fingerprint) of each function, descriptor or other callable of torch.Tensor
    and nn.Module, under one of torch's names, that is not torch's own: a monkeypatch (a
    profiler's wrapper of `Tensor.__add__`, a kernel library's `Module.__call__`), by what it
    is, not by the module it claims (`functools.wraps` copies `__module__`). Asked at each save
    and each load (~0.1 ms): a patch made after the first compile counts."""
    out = []
    for cls in _CLASSES:
        names = _TORCH_NAMES[cls]
        for name, v in vars(cls).items():
            if name not in names or isinstance(v, type) or _torch_own(v) or \
                    not (callable(v) or isinstance(v, (classmethod, property))):
                continue
            out.append((cls.__qualname__, name, fingerprint(v)))
    return tuple(sorted(out, key=lambda item: item[:2]))


def _torch_own(v):
    """Whether `v` is torch's own code: a Python function whose code is in torch's files (not one
    that only copied a torch function's names), a descriptor of a torch class, a C function of
    a torch module or class."""
    t = type(v)
    if t is types.FunctionType:
        return v.__code__.co_filename.startswith(_TORCH_DIR)
    if t is staticmethod or t is classmethod:
        return _torch_own(v.__func__)
    if t is property:
        return all(f is None or _torch_own(f) for f in (v.fget, v.fset, v.fdel))
    if t in _C_DESCRIPTORS:
        return policy.is_torch_value(v.__objclass__)
    if t is types.BuiltinFunctionType:
        owner = v.__self__
        if isinstance(owner, types.ModuleType):
            return policy.is_torch_module(owner.__name__)
        return isinstance(owner, type) and policy.is_torch_value(owner)
    return False


def check_class_patches(written):
    """Raise Stale unless torch's classes hold the same foreign callables as when the entry was
    written (none, in a process that patched nothing)."""
    now = class_patches()
    if now != tuple(written):
        changed = sorted({f"{c}.{n}" for c, n, _fp in set(now) ^ set(written)})
        raise Stale(f"{', '.join(changed[:3])} patched (or no longer) since the entry was written")
