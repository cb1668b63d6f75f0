"""A Python module's own `__getattr__` (PEP 562): what `mod.name` does when the module's
ordinary lookup (its `__dict__`, then its type) finds no `name`.

CPython's module lookup calls `mod.__dict__['__getattr__'](name)` then, on every read. Reading
the attribute at trace time ran that user function once more than the program did, and a
guard on `mod.name` ran it again on every check (a counter in it moved by two per call, and
the entry failed its own guards). Here the call is traced like any call of the function
(inlined: its effects happen once per call, as in eager), under guards that the module still
lacks `name` and still has that `__getattr__`; and the guards and sources of a module that has
one read by `object.__getattribute__`, which never calls it.

A library namespace (runtime/policy.py: torch's lazy submodules, deprecations) keeps its
trusted read at trace time, except for a data value its `__getattr__` computes: that would be
guarded through the hook on every check, so it is a graph break.
"""
from guards import Predicate
from guards.sources import AttrSource, ConstSource, GenericAttrSource

from ..exc import Unsupported
from .base import ConstantVariable


def found_by_lookup(module, name):
    """Whether the module's ordinary lookup (`object.__getattribute__`: its dict, its type's
    MRO) finds `name`, so that `getattr(module, name)` runs no `__getattr__`."""
    return name in module.__dict__ or objects.lookup_type_attr(type(module), name)[1] is not None


def hook_for(module, name):
    """The module's own `__getattr__` if reading `module.name` calls it, else None."""
    if found_by_lookup(module, name):
        return None
    return module.__dict__.get("__getattr__")


def base_source(var):
    """Where the module is read from: its source, else the module itself (`import m` inside
    the frame: no source, and its attributes are still facts of this call)."""
    return var.source if var.source is not None else ConstSource(var.module)


def attr_source(module, base, name):
    """The source of `module.name` as ordinary lookup finds it: by `object.__getattribute__`
    when the module has a `__getattr__` (once `name` is gone, a plain read would call it)."""
    if "__getattr__" in module.__dict__:
        return GenericAttrSource(base, name)
    return AttrSource(base, name)


def call_hook(tx, var, name, hook):
    """`var.module.name` answered by the module's `__getattr__`: the call traced as the
    program makes it, guarded on what made it the answer."""
    base = base_source(var)
    tx.guard(Predicate.lacks_generic_attr(
        base, name, f"ordinary lookup finds no {name!r} (the module's __getattr__ answers)"))
    fn = builder.wrap(tx, hook, GenericAttrSource(base, "__getattr__"))
    return fn.call(tx, [ConstantVariable(name)], {})


def refuse_computed_data(module, name):
    """A library namespace's data value made by its `__getattr__` (`torch.has_cuda`): a
    guard on it would call the hook on every check."""
    raise Unsupported(f"{module.__name__}.{name} is computed by the module's __getattr__ on each read")


def guard_presence(tx, var, name, present):
    """Whether a user module has `name` is a fact of this call (a later `mod.FAST = True` must
    fail the guard). Checked by ordinary lookup, so the guard never calls a `__getattr__`; an
    absence also needs the module to have none (one added later may answer `name`)."""
    base = base_source(var)
    if objects.lookup_type_attr(type(var.module), "__getattr__")[1] is not None:
        # (a module class's own __getattr__, a lazy-module class, answers after ordinary
        # lookup too: asked by hasattr, as the program asks it)
        tx.guard(Predicate.made(base, functions._has_attr, (name,), f"has attribute {name!r}") if present
                 else Predicate.lacks_attr(base, name, f"has no attribute {name!r}"))
        return
    if present:
        tx.guard(Predicate.made(base, has_by_lookup, (name,), f"has attribute {name!r}"))
        return
    tx.guard(Predicate.lacks_generic_attr(base, name, f"has no attribute {name!r}"))
    tx.guard(Predicate.key_absent(GenericAttrSource(base, "__dict__"), "__getattr__",
                                  "has no module __getattr__"))


def has_by_lookup(name):
    """The check of `guard_presence`: ordinary lookup finds `name` (no `__getattr__` runs)."""
    def check(obj):
        try:
            object.__getattribute__(obj, name)
        except AttributeError:
            return False
        return True
    return check


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions.
from . import builder, functions, objects  # noqa: E402
