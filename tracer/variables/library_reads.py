"""What a trace took from a library namespace without a guard, kept with its entry.

A library namespace (runtime/policy.py LIBRARY_NAMESPACES: torch, math, operator...) is code,
trusted as immutable (rule 7): `F.gelu` in traced code, or a global an inlined torch function
reads, is not guarded. In the process that traced it that is the rule. A later process that
loads the entry from disk may hold other objects under those names: a kernel library that
replaced `torch.nn.functional.gelu` (in a module of its own, or a C function), a
`torch.linalg` function patched, a patch made after the first compile. So each such read is
noted here, on the trace's context, as what was read (kind, namespace, name) and what was found;
the entry keeps the notes (runtime.cache.Entry.library_reads), and the disk cache writes them with
it and checks each against the live namespace when it reads the entry back
(persist/library_io.py): another object there makes the entry stale, and the frame is traced
again.

Data is not noted: a library's constants and tensors are guarded by value like user data.
"""
import torch

from .base import is_constant_value

ATTR = "attr"      # getattr(namespace, name): a module attribute
GLOBAL = "global"  # a library frame's global: its globals dict, else their builtins
HAS = "has"        # hasattr(namespace, name), or a getattr that found nothing: its presence


def is_data(value):
    """A value a library namespace holds as data, guarded by value where it is read (the same
    test builder.wrap_unguarded makes): nothing to note."""
    return isinstance(value, torch.Tensor) or is_constant_value(value)


def note(tx, kind, namespace, name, value):
    """Record that the trace used `value`, found as `name` in `namespace` (a module, or a module's
    globals dict for GLOBAL), without a guard. The first value found is kept: a trace reads each
    name once (a later read of the same name finds the same object, nothing runs in between
    that the trace does not model)."""
    reads = tx.ctx.library_reads
    key = (kind, id(namespace), name)
    if key not in reads:
        reads[key] = (kind, namespace, name, value)


def note_attr(tx, module, name, value):
    """`module.name` read without a guard (a function, a class, a module...: the caller guards
    the data it reads by value)."""
    note(tx, ATTR, module, name, value)


def note_global(tx, f_globals, name, value):
    """A global (or builtin) of a library frame read without a guard."""
    if not is_data(value):
        note(tx, GLOBAL, f_globals, name, value)


def note_presence(tx, module, name, present):
    """Whether `module` has `name`, used without a guard (hasattr, a getattr's default)."""
    note(tx, HAS, module, name, bool(present))
