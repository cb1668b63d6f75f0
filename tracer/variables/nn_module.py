"""torch.nn.Module instances.

Modules are inputs, not constants (as torch.compile since it inlines nn.Modules):
- A module is guarded by its structure, never by its identity: its class (TypeMatch), and
  what the trace reads of it, where it reads it: `training` and other attributes (by value),
  its hooks (empty), the names in `_modules` / `_parameters` / `_buffers` it walks, and each
  parameter and buffer it uses (tensor metadata). One entry serves every instance of one
  structure; the cache holds no module and no parameter (the graph module holds none).
  Identity is relied on only where the code does (`is`, a dict key: base.rely_on_identity
  puts the module in the NoAliasing guard).
- Parameters and buffers become graph inputs (placeholders), read from the module by their
  Source on every call (module_tensor): a replaced Parameter is picked up on the next call,
  an in-place update (BatchNorm's running stats) writes the real module's tensor. A tensor
  under two paths (tied weights) is one input, guarded to stay one object (SameObject);
  distinct ones are guarded to stay distinct (NoAliasing, with the other tensor inputs).
- Leaf torch.nn modules (only when `config.inline_stock_modules` is off, or a stock module
  whose forward cannot be traced: StockLeaf) become one `call_module` node. One with
  parameters or buffers calls a LeafCall (graph/leaf_call.py): a state-free template bound
  per call to the leaf's tensors, which are graph inputs like any module tensor, so it is
  guarded by structure too; only a leaf the template cannot stand in for (_state_as_inputs:
  an object attribute, a tensor subclass) is the graph's own object, guarded by identity
  (call_module). Tracing runs the leaf on fakes of its state, never touching the real
  buffers; so a module whose call runs more than torch's code (a parametrization, a forward
  set on the instance) is no leaf (is_leaf_module): it is inlined.
- User modules, containers and the Transformer stacks are inlined: their `forward` is
  interpreted like any user function, so their ops land in the graph.
- Every module that is called is guarded to have no forward hooks (a hook added later
  recompiles instead of being silently skipped); `training` is guarded where read.

Torch internals read here: torch.nn.modules.module's _global_*_hooks dicts; checked on torch
2.13.0, 2.14.1 and 2.15.0 (docs/torch.md lists them all; tests/test_torch_internals.py resolves
each).
"""
import types

import torch
from guards import ConstMatch, DictKeysMatch, IdMatch, LengthMatch, Predicate, SameObject, TypeMatch
from guards.sources import AttrSource, ConstSource, ItemSource

from ..graph.backends import _DISPATCH, is_module_dispatch, module_dispatch_is_torchs  # noqa: F401
from ..runtime import compile_annotations as ann, config
from ..exc import StockLeaf, Unsupported
from .base import ConstantVariable, ObjectVariable, is_constant_value

_CONTAINERS = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict,
               torch.nn.ParameterList, torch.nn.ParameterDict)
_INLINED_TORCH_MODULES = (torch.nn.TransformerEncoder, torch.nn.TransformerEncoderLayer,
                          torch.nn.TransformerDecoder, torch.nn.TransformerDecoderLayer,
                          torch.nn.Transformer)


def is_leaf_module(module):
    """A module of torch.nn that may be kept whole (one call_module node) when its forward is
    not inlined: not a container nor a Transformer stack (always inlined), and one whose call
    runs torch's code only (_runs_only_torch_code)."""
    cls = type(module)
    return (cls.__module__.startswith("torch.nn.") and not isinstance(module, _CONTAINERS)
            and not isinstance(module, _INLINED_TORCH_MODULES) and _runs_only_torch_code(module))


def _runs_only_torch_code(module):
    """A leaf's example output comes from running its call on fakes of its state (and its
    Python runs again in each graph call): sound for torch's stock forwards, which write
    nothing but their tensors. Not for a module whose call runs other code: a parametrized
    module in its tree (reading the weight runs the parametrizations, user modules, and under
    parametrize.cached() writes the fake result into parametrize's global cache, which the
    frame then read when it ran as Python: a crash), or a forward set on the instance. Such a
    module is inlined as a user module is, and what it cannot trace is a graph break there."""
    for m in module.modules():
        if "forward" in m.__dict__ or isinstance(m._modules.get("parametrizations"), torch.nn.ModuleDict):
            return False  # (parametrize.is_parametrized's test, without a getattr that runs code)
    return True


def _sub(source, dict_name, key):
    return ItemSource(AttrSource(source, dict_name), key) if source is not None else None


class NNModuleVariable(ObjectVariable):

    module = property(lambda self: self.value)
    # (one with a source is guarded by its exact type where it is wrapped: module_guard)
    type_guarded = property(lambda self: self.source is not None)
    def __init__(self, module, source=None, path=""):
        super().__init__(module, source)
        self.path = path or (readable_path(source) if source is not None else type(module).__name__)

    def truthy(self, tx):
        if isinstance(self.module, _CONTAINERS):
            return len(self.module) > 0
        return True

    def _child_path(self, name):
        return f"{self.path}.{name}"

    def getattr(self, tx, name):
        """`m.name`: with nn.Module's `__getattr__`, its three dicts first when the class has no
        attribute of that name (its __setattr__ keeps them apart from the instance dict), then
        the generic lookup. A class's own `__getattr__` (a config fallback) is inlined after the
        generic lookup; it reaches the dicts through `super().__getattr__` (module_getattr)."""
        pending = tx.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        objects.check_dict_not_written(tx, self, f"reading {name!r}")
        m = self.module
        cls = type(m)
        fallback, _ = objects.lookup_type_attr(cls, "__getattr__")
        attr, owner = objects.lookup_type_attr(cls, name)  # (owner: a class attribute may be None)
        if fallback is _MODULE_GETATTR and owner is None:  # (a method named like a submodule
            # wins, as in eager: __getattr__ runs only when ordinary lookup fails)
            found = self._module_dicts_attr(tx, name)
            if found is not None:
                return found
        if name == "__dict__" and type(attr) is types.GetSetDescriptorType:
            return objects.InstanceDictVariable(self)  # read key by key, each read guarded
        if attr is not None and hasattr(type(attr), "__set__"):
            objects.guard_class_lookup(tx, self, name, attr)
            return objects.bind_class_attr(tx, attr, self, cls)
        if name in m.__dict__:
            src = AttrSource(self.source, name) if self.source is not None else None
            return block_holes.passable(tx, builder.wrap(tx, m.__dict__[name], src))
        if owner is not None:
            src = AttrSource(self.source, name) if self.source is not None else None
            if objects._binds(attr):
                objects.guard_class_lookup(tx, self, name, attr)
            return objects.bind_class_attr(tx, attr, self, cls, src)
        if fallback is _MODULE_GETATTR:
            if self.source is not None:  # relied on when caught (getattr default, hasattr)
                tx.guard(Predicate.lacks_attr(self.source, name, f"has no attribute {name!r}"))
            raise exceptions.attribute_error(cls.__name__, name)
        if not isinstance(fallback, types.FunctionType):
            raise Unsupported(f"{cls.__name__}.__getattr__ is not a Python function")
        if self.source is not None:  # it stands in only while ordinary lookup finds nothing
            objects.guard_class_lookup(tx, self, "__getattr__", fallback, instance_dict=False)
            tx.guard(Predicate.lacks_generic_attr(self.source, name, f"ordinary lookup finds no {name!r}"))
        return functions.UserFunctionVariable(fallback).call(tx, [self, ConstantVariable(name)], {})

    def _module_dicts_attr(self, tx, name):
        """What nn.Module.__getattr__ finds in `_parameters`, `_buffers`, `_modules`; None
        when none holds `name`."""
        m = self.module
        params, buffers, modules = m.__dict__.get("_parameters"), m.__dict__.get("_buffers"), m.__dict__.get("_modules")
        if any(d is not None and objects.changed_in_trace(tx, d) is not None for d in (params, modules)):
            raise Unsupported(f"reading {name!r} of {self.path}, whose _parameters or _modules this frame changed")
        if params is not None and name in params:
            return self._tensor_attr(tx, params[name], _sub(self.source, "_parameters", name), name)
        written = objects.changed_in_trace(tx, buffers) if buffers is not None else None
        if written is not None:
            found = self._written_buffer(tx, written, name)
            if found is not None:
                return found
        elif buffers is not None and name in buffers:
            return self._tensor_attr(tx, buffers[name], _sub(self.source, "_buffers", name), name)
        if modules is not None and name in modules:
            sub = modules[name]
            src = _sub(self.source, "_modules", name)
            if sub is None:
                if src is not None:
                    tx.guard(ConstMatch(src, None))
                return ConstantVariable(None)
            return wrap_module(tx, sub, src, self._child_path(name))
        return None

    def _written_buffer(self, tx, written, name):
        """`name` in this module's `_buffers`, which the frame changed (`register_buffer`,
        `self._buffers[k] = t`): the trace's value, not the live dict's, which gets it only
        after the graph (read live, a grown rotary cache was the old one: a wrong size, the
        frame raised where eager ran). None when the dict does not hold `name`, now or before
        the frame (a miss is guarded on the live module: one the frame made is a break)."""
        if not isinstance(written, containers.DictVariable) or \
                (name not in written.keys and name in self.module._buffers):
            raise Unsupported(f"reading {name!r} of {self.path}, whose _buffers this frame changed")
        if name not in written.keys:
            return None
        value = written.stored[name]
        if isinstance(value, containers.UnreadValue):  # (that entry is the live one)
            return self._tensor_attr(tx, self.module._buffers[name], _sub(self.source, "_buffers", name), name)
        tx.side_effects.pending_reads += 1
        return value

    def module_getattr(self, tx, name):
        """nn.Module.__getattr__(m, name) called from a class's own `__getattr__`: the three
        dicts, else AttributeError. A miss is guarded as the absence of `name` from each dict
        (not `hasattr`, which would run the class's `__getattr__` again and may find it)."""
        found = self._module_dicts_attr(tx, name)
        if found is not None:
            return found
        if self.source is not None:
            for dict_name in _TREE_DICTS:
                if isinstance(self.module.__dict__.get(dict_name), dict):
                    tx.guard(Predicate.key_absent(AttrSource(self.source, dict_name), name,
                                                  f"{name!r} not in {dict_name}"))
        raise exceptions.attribute_error(type(self.module).__name__, name)

    def modelled_method(self, attr):
        """nn.Module.__getattr__ bound to this module (a class's own `__getattr__` deferring to
        it with `super().__getattr__(name)`): module_getattr, not an inlined walk of the dicts."""
        if attr is _MODULE_GETATTR:
            return objects.GenericGetattrVariable(self, self.module_getattr)
        return None

    def _tensor_attr(self, tx, value, source, name):
        if value is None:
            if source is not None:
                tx.guard(ConstMatch(source, None))
            return ConstantVariable(None)
        return module_tensor(tx, value, source, self._child_path(name))

    def setattr(self, tx, name, value):
        """Recorded, to replay after the graph, once module_stores has shown that it succeeds
        and where it files the value (else a break here: the store runs natively)."""
        module_stores.check_store(tx, self, name, value)
        tx.side_effects.store_attr(self, name, value)

    def hasattr(self, tx, name):
        """As getattr decides it, with its guards (a miss guards the absence): the answer
        changes when the attribute is set later."""
        return exceptions.hasattr_by_getattr(tx, self, name)

    # ---- containers ------------------------------------------------------------------
    def _items(self, tx):
        m = self.module
        self._not_written(tx, "the items", _changes_tree)
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict)):
            self._guard_len(tx, "_modules")
            return list(m._modules.keys())
        if isinstance(m, (torch.nn.ParameterList, torch.nn.ParameterDict)):
            self._guard_len(tx, "_parameters")
            return list(m._parameters.keys())
        raise Unsupported(f"iterating over {type(m).__name__}")

    def _guard_len(self, tx, dict_name):
        if self.source is not None:
            d = getattr(self.module, dict_name)
            tx.guard(LengthMatch(AttrSource(self.source, dict_name), len(d), type(d)))

    def iterate(self, tx):
        keys = self._items(tx)
        if isinstance(self.module, torch.nn.ModuleDict):
            return [ConstantVariable(k) for k in keys]
        if isinstance(self.module, torch.nn.ParameterDict):
            return [ConstantVariable(k) for k in keys]
        return [self.getattr(tx, k) for k in keys]

    def length(self, tx):
        return len(self._items(tx))

    def getitem(self, tx, key):
        m = self.module
        k = key.as_constant()
        if isinstance(m, (torch.nn.ModuleDict, torch.nn.ParameterDict)):
            self._items(tx)
            return self.getattr(tx, k)
        if isinstance(m, (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ParameterList)):
            keys = self._items(tx)
            if isinstance(k, slice):
                sub = [self.getattr(tx, name) for name in keys[k]]
                if isinstance(m, torch.nn.Sequential):
                    raise Unsupported("slicing an nn.Sequential (creates a new module)")
                return containers.ListVariable(sub)
            return self.getattr(tx, keys[k])
        raise Unsupported(f"indexing {type(m).__name__}")

    def call_method(self, tx, name, args, kwargs):
        if name in ("parameters", "buffers", "children", "modules", "named_parameters",
                    "named_buffers", "named_children", "named_modules", "keys", "values", "items"):
            return self._iter_method(tx, name, args, kwargs)
        if name == "forward":
            return self._explicit_forward(tx, args, kwargs)
        if name == "__len__":
            return ConstantVariable(self.length(tx))
        return self.getattr(tx, name).call(tx, args, kwargs)

    def _iter_method(self, tx, name, args=(), kwargs=None):
        if name in ("keys", "values", "items"):
            keys = self._items(tx)
            vals = [self.getattr(tx, k) for k in keys]
            if name == "keys":
                return functions.iterator_of([ConstantVariable(k) for k in keys])
            if name == "values":
                return functions.iterator_of(vals)
            return functions.iterator_of([containers.TupleVariable([ConstantVariable(k), v]) for k, v in zip(keys, vals)])
        items = self._walk_items(tx, name, args, kwargs)
        if name.startswith("named_"):
            return functions.iterator_of([containers.TupleVariable([ConstantVariable(k), v]) for k, v in items])
        return functions.iterator_of([v for _, v in items])

    def _guard_keys(self, tx, dict_name):
        if self.source is not None:
            d = getattr(self.module, dict_name)
            tx.guard(DictKeysMatch(AttrSource(self.source, dict_name), tuple(d.keys()), type(d)))

    def _named_children(self, tx):
        """(name, NNModuleVariable) of the direct children; keys and identities guarded."""
        self._guard_keys(tx, "_modules")
        out = []
        for k in self.module._modules:
            v = self.getattr(tx, k)  # guards identity, or `is None`
            if isinstance(v, NNModuleVariable):
                out.append((k, v))
        return out

    def _named_modules(self, tx, prefix="", memo=None, remove_duplicate=True):
        """Pre-order walk as nn.Module.named_modules: the module tree, guarded level by level."""
        if memo is None:
            memo = set()
        if remove_duplicate and id(self.module) in memo:
            return []
        if remove_duplicate:
            memo.add(id(self.module))
        out = [(prefix, self)]
        for k, child in self._named_children(tx):
            out.extend(child._named_modules(tx, prefix + ("." if prefix else "") + k, memo, remove_duplicate))
        return out

    def _named_tensors(self, tx, dict_name, prefix="", recurse=True, remove_duplicate=True):
        """As nn.Module._named_members over _parameters or _buffers."""
        mods = self._named_modules(tx, prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        seen, out = set(), []
        for mprefix, mvar in mods:
            mvar._guard_keys(tx, dict_name)
            for k, t in getattr(mvar.module, dict_name).items():
                v = mvar.getattr(tx, k)  # guards identity + metadata, or `is None`
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                out.append((mprefix + ("." if mprefix else "") + k, v))
        return out

    def _walk_items(self, tx, name, args, kwargs):
        import inspect
        self._not_written(tx, f"{name}()", _changes_tree)
        try:
            bound = inspect.signature(getattr(torch.nn.Module, name)).bind(
                None, *[a.as_constant() for a in args], **{k: v.as_constant() for k, v in (kwargs or {}).items()})
        except TypeError as e:
            raise Unsupported(f"nn.Module.{name}() called with bad arguments ({e})")
        bound.apply_defaults()
        a = dict(bound.arguments)
        a.pop("self")
        if name in ("children", "named_children"):
            return self._named_children(tx)
        if name in ("modules", "named_modules"):
            if a.get("memo") is not None:
                raise Unsupported("nn.Module.named_modules(memo=...)")
            return self._named_modules(tx, a.get("prefix", ""), None, a.get("remove_duplicate", True))
        dict_name = "_parameters" if "param" in name else "_buffers"
        return self._named_tensors(tx, dict_name, a.get("prefix", ""), a.get("recurse", True),
                                   a.get("remove_duplicate", True))

    # ---- calls -------------------------------------------------------------------------
    def _not_written(self, tx, what, counts):
        """A break before `what` when the frame wrote to this module (or below it) earlier in a
        way `counts(self, owner, name, value)` says `what` would miss: writes are replayed only
        after the graph, and `what` reads the live module (a leaf's call_module, the hook dicts
        and forward, the module tree): it then runs natively, after the writes."""
        for owner, name, value in tx.side_effects.writes_under(self):
            if counts(self, owner, name, value):
                raise Unsupported(f"{what} of {self.path}, which this frame wrote to before")

    def call(self, tx, args, kwargs):
        model = self._wrapped_model(tx)
        if model is not None:
            return model.call(tx, args, kwargs)
        m = self.module
        own = objects.lookup_type_attr(type(m), "__call__")[0]
        if own is not torch.nn.Module.__call__:
            # a subclass's own __call__ (HF's GradientCheckpointingLayer) is traced like any
            # method; its `super().__call__(...)` comes back to dispatch() (functions.py)
            if not isinstance(own, types.FunctionType):
                raise Unsupported(f"{type(m).__name__}.__call__ is a {type(own).__name__}, not a Python function")
            objects.guard_class_lookup(tx, self, "__call__", own, instance_dict=False)
            return functions.UserFunctionVariable(own).call(tx, [self, *args], kwargs)
        return self.dispatch(tx, args, kwargs)

    def _wrapped_model(self, tx):
        """The model a module wrapper stands for (compile_annotations.wraps_module: a
        tracer.compile'd module) when the wrapper has no hooks of its own (guarded): its call is
        then the model's call, hooks and forward as eager runs them, traced and guarded as the
        model (through `_orig_mod`), as TorchDynamo calls a nested torch.compile'd module's
        model. None otherwise: the wrapper's own __call__ is traced."""
        m = self.module
        if self.source is None:
            return None
        if ann.wraps_module(type(m)):
            model, source = m.__dict__.get(ann.ORIGINAL_MODULE), AttrSource(self.source, ann.ORIGINAL_MODULE)
        elif ann.wraps_module_in_modules(type(m)):  # (torch.compile's: a submodule)
            model, source = (m.__dict__.get("_modules") or {}).get(ann.ORIGINAL_MODULE), \
                _sub(self.source, "_modules", ann.ORIGINAL_MODULE)
        else:
            return None
        self._not_written(tx, "calling", _changes_call)
        objects.check_dict_not_written(tx, self, "calling")
        if not isinstance(model, torch.nn.Module) or any(m.__dict__.get(h) for h in _HOOK_DICTS):
            return None
        tx.guard(Predicate.falsy_attrs(self.source, _HOOK_DICTS, "has no forward/backward (pre-)hooks"))
        return builder.wrap(tx, model, source)

    def dispatch(self, tx, args, kwargs):
        """What nn.Module.__call__ does (torch's _wrapped_call_impl/_call_impl): the forward
        (pre-)hooks, then forward; reached by `m(...)` and by calling nn.Module.__call__ or
        `_call_impl` on the module explicitly (`super().__call__(...)`)."""
        m = self.module
        if not module_dispatch_is_torchs():
            raise Unsupported("nn.Module.__call__ or _call_impl is patched (a profiler or a shim?): "
                              "the module call runs as Python")
        self._not_written(tx, "calling", _changes_call)
        objects.check_dict_not_written(tx, self, "calling")
        if lazy_modules.needs_initialising(m):
            lazy_modules.initialise(tx, m, args, kwargs)  # (traces the frame again)
        if not (m.__dict__.get("_forward_hooks") or m.__dict__.get("_forward_pre_hooks")
                or _global_forward_hooks_registered()):
            self._check_hooks(tx)
            return self._forward(tx, args, kwargs)
        return self._call_with_hooks(tx, list(args), dict(kwargs))

    def _call_with_hooks(self, tx, args, kwargs):
        """Forward (pre-)hooks run as nn.Module._call_impl runs them: the global ones
        (`register_module_forward_hook`) first, then the module's; each pre-hook may replace
        the arguments, each hook the result. The hook dicts, global and the module's, are
        guarded exactly (which hooks, in order, each one's identity, which take kwargs), so
        registering or removing any hook recompiles. Backward hooks (global or not) and
        `always_call=True` hooks (run by _call_impl when forward raises) are Unsupported."""
        from torch.nn.modules import module as impl

        m = self.module
        if self.source is None:
            raise Unsupported(f"{type(m).__name__} with forward hooks and no source")
        for hname in _UNTRACED_HOOKS:
            if m.__dict__.get(hname):
                raise Unsupported(f"{type(m).__name__} has {hname.strip('_').replace('_', ' ')}")
        tx.guard(Predicate.falsy_attrs(self.source, _UNTRACED_HOOKS,
                                       "has no backward (pre-)hooks or always-called hooks"))
        for gname in _UNTRACED_GLOBAL_HOOKS:
            if getattr(impl, gname, None):
                raise Unsupported(f"global nn.Module {gname.strip('_').replace('_', ' ')} are registered")
        impl_src = ConstSource(impl)
        tx.guard(Predicate.falsy_attrs(impl_src, _UNTRACED_GLOBAL_HOOKS,
                                       "no global nn.Module backward or always-called hooks"))
        pre_kw = [_kw_dict(self.source, m, "_forward_pre_hooks_with_kwargs")]
        post_kw = [_kw_dict(self.source, m, "_forward_hooks_with_kwargs"),
                   _kw_dict(impl_src, impl, "_global_forward_hooks_with_kwargs")]
        pre = (_guarded_hooks(tx, impl_src, impl, "_global_forward_pre_hooks", pre_kw)
               + _guarded_hooks(tx, self.source, m, "_forward_pre_hooks", pre_kw))
        post = (_guarded_hooks(tx, impl_src, impl, "_global_forward_hooks", post_kw)
                + _guarded_hooks(tx, self.source, m, "_forward_hooks", post_kw))
        args_var = containers.TupleVariable(args)
        for hook, with_kwargs in pre:
            if with_kwargs:
                r = hook.call(tx, [self, args_var, containers.DictVariable(kwargs)], {})
                if not _is_none(r):
                    pair = r.iterate(tx) if r.python_type() is tuple else None
                    if pair is None or len(pair) != 2 or not isinstance(pair[1], containers.DictVariable):
                        raise Unsupported("forward pre-hook returned something other than (args, kwargs)")
                    args_var, kwargs = containers.TupleVariable(pair[0].iterate(tx)), dict(pair[1].items)
            else:
                r = hook.call(tx, [self, args_var], {})
                if not _is_none(r):
                    args_var = r if r.python_type() is tuple else containers.TupleVariable([r])
        # forward itself is inlined even for a leaf module: a call_module node would run the
        # module's __call__, and with it the hooks, a second time
        result = self._inline_forward(tx, args_var.iterate(tx), kwargs)
        for hook, with_kwargs in post:
            if with_kwargs:
                r = hook.call(tx, [self, args_var, containers.DictVariable(kwargs), result], {})
            else:
                r = hook.call(tx, [self, args_var, result], {})
            if not _is_none(r):
                result = r
        return result

    def _explicit_forward(self, tx, args, kwargs):
        """`m.forward(...)` called by name runs no hooks. A leaf's call_module node runs
        Module.__call__, which would run them: it is used only while the module and nn.Module
        have no hooks (guarded, as for `m(...)`); otherwise forward is inlined."""
        from torch.nn.modules import module as impl
        m = self.module
        if any(m.__dict__.get(h) for h in _HOOK_DICTS) or \
                any(getattr(impl, g, None) for g in _GLOBAL_HOOK_DICTS):
            return self._inline_forward(tx, args, kwargs)
        self._check_hooks(tx)
        return self._forward(tx, args, kwargs)

    def _forward(self, tx, args, kwargs):
        m = self.module
        if is_leaf_module(m):
            if type(m) in tx.ctx.leaf_breaks:
                raise Unsupported(f"the backend could not compile {type(m).__name__} as a graph leaf: "
                                  "it is called as Python")
            if not config.inline_stock_modules or type(m) in tx.ctx.stock_leaves:
                self._not_written(tx, "calling", _changes_leaf)
                return leaf_modules.call_module(tx, self, args, kwargs)
            try:  # as TorchDynamo: the module's ops go into the graph, no Python per call
                return self._inline_forward(tx, args, kwargs)
            except Unsupported as e:  # a leaf instead of a break (the trace starts again)
                raise StockLeaf(m, e) from e
        return self._inline_forward(tx, args, kwargs)

    def _inline_forward(self, tx, args, kwargs):
        m = self.module
        fn = None
        if "forward" in m.__dict__:
            forward, args = self._instance_forward(tx), list(args)
        else:
            fn = objects.lookup_type_attr(type(m), "forward")[0]
            if not isinstance(fn, types.FunctionType):
                raise Unsupported(f"{type(m).__name__}.forward is not a Python function")
            objects.guard_class_lookup(tx, self, "forward", fn)  # patched on the class or the instance
            forward, args = functions.UserFunctionVariable(fn), [self, *args]
        calls = tx.ctx.module_calls
        calls.append(self)  # nodes made inside say which modules they came from (node_meta)
        if self.source is not None:
            tx.ctx.module_roots[self.source] = None
        try:
            # (a layer like an earlier sibling is replayed from its trace: blocks.py)
            return forward.call(tx, args, kwargs)
        finally:
            calls.pop()

    def _instance_forward(self, tx):
        """`forward` set on the instance (a bound method, a functools.partial), which
        nn.Module.__call__ calls: wrapped (and guarded) through its source like any attribute;
        the module it is bound to is this variable (guarded to be the same object there)."""
        m, memo = self.module, tx.wrap_memo
        seeded = id(m) not in memo
        if seeded:
            memo[id(m)] = (m, self)
        try:
            return builder.wrap(tx, m.__dict__["forward"], AttrSource(self.source, "forward") if self.source else None)
        finally:
            if seeded:
                del memo[id(m)]

    def _check_hooks(self, tx):
        m = self.module
        from torch.nn.modules import module as nn_module_impl
        for gname in _GLOBAL_HOOK_DICTS:
            if getattr(nn_module_impl, gname, None):
                raise Unsupported("global nn.Module hooks are registered")
        for hname in _HOOK_DICTS:
            if m.__dict__.get(hname):
                raise Unsupported(f"{type(m).__name__} has {hname.strip('_').replace('_', ' ')}")
        if self.source is not None:  # one guard for the four hook dicts (a hook added later recompiles)
            tx.guard(Predicate.falsy_attrs(self.source, _HOOK_DICTS, "has no forward/backward (pre-)hooks"))
        guard_global_module_hooks(tx)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        raise Unsupported("a module without a source escapes the frame")

    def __repr__(self):
        return f"NNModule({self.path}: {type(self.module).__name__})"


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                      "_global_backward_pre_hooks")
_UNTRACED_HOOKS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks_always_called")
_UNTRACED_GLOBAL_HOOKS = ("_global_backward_hooks", "_global_backward_pre_hooks",
                          "_global_forward_hooks_always_called")


_TREE_DICTS = ("_modules", "_parameters", "_buffers")
_MODULE_GETATTR = torch.nn.Module.__dict__["__getattr__"]


def _changes_tree(mod_var, owner, name, value):
    """Whether a pending write can change a module tree: a changed container below it, a
    store to one of its three dicts or to a name one of them holds (`m.bias = None`), or a
    module or parameter stored (nn.Module.__setattr__ files those into the dicts; a plain
    tensor under a new name stays an attribute)."""
    if name is None or name in _TREE_DICTS:
        return True
    d = getattr(getattr(owner, "value", None), "__dict__", {})
    if any(isinstance(d.get(t), dict) and name in d[t] for t in _TREE_DICTS):
        return True
    return issubclass(value.python_type(), (torch.nn.Module, torch.nn.Parameter))


_CALL_READS = frozenset(_HOOK_DICTS + _UNTRACED_HOOKS + ("_forward_pre_hooks_with_kwargs",
                        "_forward_hooks_with_kwargs", "forward"))


def _changes_call(mod_var, owner, name, value):
    """What calling an inlined module reads live: its own hook dicts and `forward` (its
    forward's other reads see pending writes; its submodules are checked when called)."""
    if getattr(owner, "value", None) is not mod_var.module and owner.source != mod_var.source:
        return False
    if name is not None:
        return name in _CALL_READS
    src = owner.source
    return isinstance(src, AttrSource) and src.base == mod_var.source and src.attr in _CALL_READS


def _changes_leaf(mod_var, owner, name, value):
    """A leaf's call_module runs the live module: any write below it counts, but a constant
    equal to what the module already holds (`model.train()` on a model in training)."""
    if name is not None and value.is_constant():
        d = getattr(getattr(owner, "value", None), "__dict__", {})
        live = d.get(name, _ABSENT)
        if live is not _ABSENT and type(live) is type(value.as_constant()) and live == value.as_constant():
            return False
    return True


_ABSENT = object()


def _global_forward_hooks_registered():
    from torch.nn.modules import module as impl
    return bool(getattr(impl, "_global_forward_hooks", None) or getattr(impl, "_global_forward_pre_hooks", None))


def _kw_dict(owner_src, owner, name):
    """(source, dict) of a with-kwargs hook dict (hook id -> True) of a module or of
    torch.nn.modules.module."""
    return AttrSource(owner_src, name), getattr(owner, name, None) or {}


def _guarded_hooks(tx, owner_src, owner, name, kw_dicts):
    """[(hook Variable, takes kwargs)] of hook dict `owner.name`, guarded: its keys in order,
    each hook by its source, and for each hook whether each with-kwargs dict of `kw_dicts`
    holds its id (_call_impl passes kwargs when one does)."""
    hooks = owner.__dict__.get(name)
    if not isinstance(hooks, dict):
        raise Unsupported(f"{getattr(owner, '__name__', type(owner).__name__)}.{name} is not a dict")
    dsrc = AttrSource(owner_src, name)
    tx.guard(DictKeysMatch(dsrc, tuple(hooks.keys()), type(hooks)))
    out = []
    for hook_id, hook in hooks.items():
        takes_kwargs = False
        for ksrc, kdict in kw_dicts:
            present = hook_id in kdict
            tx.guard(Predicate.made(ksrc, _has_key, (hook_id, present),
                                    f"{'has' if present else 'has no'} key {hook_id!r}"))
            takes_kwargs = takes_kwargs or present
        out.append((builder.wrap(tx, hook, ItemSource(dsrc, hook_id)), takes_kwargs))
    return out


def _has_key(key, present):
    return lambda d: (key in d) == present


def _is_none(var):
    return var.is_constant() and var.as_constant() is None


def readable_path(source):
    """`G['model']._modules['layers']._modules['0']` -> `model.layers.0` (graph node names)."""
    import re
    name = source.name()
    name = re.sub(r"\._(?:modules|parameters|buffers)\['([^']*)'\]", r".\1", name)
    return re.sub(r"^G\['([^']*)'\]", r"\1", name)


def guard_module(tx, module, source):
    if source is not None:
        tx.guard(module_guard(source, module))


def module_guard(source, module):
    """What the trace specialised on when it met a module: its class. Everything else it
    relies on is guarded where it reads it (attributes, hooks, the names in its dicts, each
    parameter's and buffer's metadata), so any instance of the same structure passes: a new
    model of the same class, or one built per call (`nn.ReLU()(x)`, transformers'
    `ACT2FN[name]`) handed across a graph break. (A leaf the graph must hold itself, see
    _state_as_inputs, is pinned by identity in call_module.)"""
    return TypeMatch(source, type(module))


def stateless(module):
    if next(module.parameters(), None) is not None or next(module.buffers(), None) is not None:
        return False
    for m in module.modules():
        if is_leaf_module(m) and not all(is_constant_value(v) for k, v in m.__dict__.items()
                                         if not k.startswith("_")):
            return False  # a leaf forward may read an attribute no predicate would cover
    return True


# ---- what the interpreter asks of a module: wrapping it, its tensors, a leaf's call ----
def wrap_module(tx, module, source, path, guarded=False):
    if source is not None and not guarded:
        guard_module(tx, module, source)
    return NNModuleVariable(module, source, path)


def module_tensor(tx, tensor, source, path, like=None, match=None):
    """A parameter/buffer reached through a module: a graph input with static sizes, read from
    the module through `source` on every call and guarded like any tensor input (metadata,
    TensorMatch; distinct from the other tensor inputs, NoAliasing), never by identity. The
    same tensor under a second path (tied weights) is the same input, guarded to be the
    same object there still (untying them, a new Parameter at one path, retraces). `like`
    and `match`: a replayed block's first parameter's placeholder and TensorMatch, which
    this tensor was checked to pass (its guard is that one's copy).
    Without a source (a module the frame made) it is a constant of the graph (get_attr)."""
    key = id(tensor)
    hit = tx.wrap_memo.get(key)
    if hit is not None and hit[0] is tensor:
        var = hit[1]
        first = var.source if var.source is not None else getattr(var, "real_source", None)
        if source is not None and first is not None and source != first:
            tx.guard(SameObject(first, source))
        elif source is not None and first is None:
            tx.guard(IdMatch(source, tensor))  # (reached before without a source: a constant)
        return var
    if source is None:
        node = tx.output.get_attr(tensor, path)
        var = tensor_mod.TensorVariable(node, node.meta["example_value"], None, real=tensor)
    else:
        if type(tensor) not in (torch.Tensor, torch.nn.Parameter) and not isinstance(tensor, torch.nn.Parameter):
            raise Unsupported(f"a module tensor of subclass {type(tensor).__name__}")
        tx.guard(torch_vars.tensor_match(tx.ctx, source, tensor) if match is None else match.for_sibling(source, tensor))
        tx.ctx.input_tensor_sources.append(source)
        node = tx.output.add_input(tensor, source, static=True, name=path, like=like)
        var = tensor_mod.TensorVariable(node, node.meta["example_value"], source, real=tensor)
    tx.wrap_memo[key] = (tensor, var)
    return var


def guard_global_module_hooks(tx):
    if not tx.ctx.module_hooks_guarded:
        tx.ctx.module_hooks_guarded = True
        from torch.nn.modules import module as m

        tx.guard(Predicate.falsy_attrs(ConstSource(m), _GLOBAL_HOOK_DICTS, "no global nn.Module hooks"))
        for name in _DISPATCH:  # torch's own call dispatch (module_dispatch_is_torchs)
            objects.guarded_type_lookup(tx, ConstSource(torch.nn.Module), torch.nn.Module, name)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import block_holes, builder, lazy_modules, leaf_modules, containers, functions, exceptions, module_stores, objects, tensor as tensor_mod, torch_vars  # noqa: E402
