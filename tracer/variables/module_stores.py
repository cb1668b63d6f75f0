"""`m.name = value` on an nn.Module, decided as torch.nn.Module.__setattr__ decides it.

A store on a module is replayed after the graph (graph/side_effects.py), so the trace has to
know at the store that it succeeds, and that a later read of `m.name` gives the value itself;
a store that raises in eager, replayed after the graph, raised only after the effects that
follow it in the source had happened (a wrong answer). Module.__setattr__ decides by the
value's type and by which of the module's three dicts holds the name, in this order: a
Parameter is registered; under a parameter's name anything else but None is a TypeError; a
Module is filed in `_modules`; under a submodule's name anything else but None is a TypeError;
under a buffer's name a tensor or None replaces the buffer, anything else is a TypeError;
any other name goes to the instance dict, through a data descriptor where the class has one.

Each fact the decision read is guarded (the names in the dicts, what the class holds). What
the trace cannot decide (a value of an unknown type, a class with its own __setattr__ or
registration methods, a registration hook, a descriptor in the way) is Unsupported: a break
at the store, which then runs natively and raises, if it raises, where eager does.

Torch internals read here: torch.nn.modules.module's _global_*_registration_hooks dicts
(docs/torch.md; tests/test_torch_internals.py resolves them).
"""
import torch
import torch.nn.modules.module as _module_impl

from guards import Predicate
from guards.sources import AttrSource, ConstSource

from ..exc import Unsupported

REGISTRATION_HOOKS = ("_global_module_registration_hooks", "_global_parameter_registration_hooks",
                      "_global_buffer_registration_hooks")
_MODULE_ENTRY = {name: torch.nn.Module.__dict__[name] for name in
                 ("__setattr__", "__getattr__", "register_parameter", "register_buffer")}


def check_store(tx, mod, name, value):
    """Unsupported unless `mod.module.name = value` succeeds, with the value where a later
    read finds it (its replay after the graph is then what eager did at the store)."""
    cls = type(mod.module)
    _class_gives(tx, mod, "__setattr__", _MODULE_ENTRY["__setattr__"], f"{cls.__name__} has its own __setattr__")
    if not isinstance(name, str) or not name or "." in name or name in ("__class__", "__dict__"):
        raise Unsupported(f"setting {name!r} on a module")
    kind = value.python_type()  # (unknown: Unsupported, a break)
    if not isinstance(kind, type):
        raise Unsupported(f"storing {value} on a module: its type is not known")
    if issubclass(kind, torch.nn.Parameter):
        if getattr(getattr(value, "example", None), "grad_fn", None) is not None:
            raise Unsupported(f"a non-leaf Parameter stored as {name!r} (the user code raises ValueError)")
        _registers(tx, mod, name, "register_parameter")
    elif _holds(tx, mod, "_parameters", name):
        _none_only(value, name, "parameter")
        _registers(tx, mod, name, "register_parameter")
    elif issubclass(kind, torch.nn.Module):
        _registers(tx, mod, name, None)
    elif _holds(tx, mod, "_modules", name):
        _none_only(value, name, "child module")
        _registers(tx, mod, name, None)
    elif _flagged_buffer(tx, value):
        raise Unsupported(f"a torch.nn.Buffer stored as {name!r} is registered as a buffer")
    elif _holds(tx, mod, "_buffers", name):
        if not (_is_none(value) or issubclass(kind, torch.Tensor)):
            raise Unsupported(f"a {kind.__name__} stored as buffer {name!r} (the user code raises TypeError)")
        _registers(tx, mod, name, "register_buffer")
    else:  # object.__setattr__: the instance dict, unless a data descriptor takes it
        attr, _ = objects.guarded_type_lookup(tx, objects.class_source(mod), cls, name)
        if attr is not None and hasattr(type(attr), "__set__"):
            raise Unsupported(f"setting {cls.__name__}.{name} runs a descriptor")


def _holds(tx, mod, dict_name, name):
    """Whether the module's `dict_name` holds `name`, guarded (the store's outcome turns on it)."""
    d = _tree_dict(mod.module, dict_name)
    present = name in d
    if mod.source is not None:
        src = AttrSource(mod.source, dict_name)
        tx.guard(Predicate.made(src, nn_module._has_key, (name, present),
                                f"{'has' if present else 'has no'} key {name!r}"))
    return present


def _tree_dict(module, dict_name):
    d = module.__dict__.get(dict_name)
    if not isinstance(d, dict):  # (Module.__init__ not run yet: the user code raises AttributeError)
        raise Unsupported(f"{type(module).__name__} has no {dict_name} dict")
    return d


def _none_only(value, name, what):
    if not _is_none(value):
        raise Unsupported(f"{value} stored as {what} {name!r} (the user code raises TypeError)")


def _registers(tx, mod, name, method):
    """What filing `name` in one of the three dicts relies on: no global registration hook (it
    may replace the value or raise); the class's registration method, if one is called, is
    nn.Module's; and nothing on the class under `name`, with nn.Module's own `__getattr__`
    (`register_*` raise KeyError where `hasattr(m, name)` finds another attribute, and a class
    attribute would win over the dicts when `m.name` is read)."""
    for dict_name in ("_parameters", "_buffers", "_modules"):
        _tree_dict(mod.module, dict_name)
    if any(getattr(_module_impl, hooks, None) for hooks in REGISTRATION_HOOKS):
        raise Unsupported("global nn.Module registration hooks are registered")
    tx.guard(Predicate.falsy_attrs(ConstSource(_module_impl), REGISTRATION_HOOKS,
                                   "no global nn.Module registration hooks"))
    cls = type(mod.module)
    for entry in ("__getattr__", method):
        if entry is not None:
            _class_gives(tx, mod, entry, _MODULE_ENTRY[entry], f"{cls.__name__} has its own {entry}")
    _class_gives(tx, mod, "__getattribute__", object.__getattribute__, f"{cls.__name__} has its own __getattribute__")
    if objects.guarded_type_lookup(tx, objects.class_source(mod), cls, name)[1] is not None:
        raise Unsupported(f"{cls.__name__} has a class attribute {name!r} beside the module's dicts")


def _class_gives(tx, mod, name, expected, reason):
    """The module's class gives `expected` under `name` (guarded), else Unsupported."""
    attr, _ = objects.guarded_type_lookup(tx, objects.class_source(mod), type(mod.module), name)
    if attr is not expected:
        raise Unsupported(reason)


def _flagged_buffer(tx, value):
    """Whether `value` is a torch.nn.Buffer: a tensor flagged `_is_buffer`, which
    Module.__setattr__ registers under any name. An input tensor's flag is read, and its
    absence guarded; a tensor the graph made has none."""
    real = getattr(value, "real", None)
    if not isinstance(value, tensor.TensorVariable) or real is None:
        return False
    if "_is_buffer" in getattr(real, "__dict__", {}):
        return True
    if value.real_source is not None:
        tx.guard(Predicate.made(value.real_source, tensor._lacks_instance_attr, ("_is_buffer",),
                                "has no attribute '_is_buffer'"))
    return False


def _is_none(value):
    return value.is_constant() and value.as_constant() is None


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions.
from . import nn_module, objects, tensor  # noqa: E402
