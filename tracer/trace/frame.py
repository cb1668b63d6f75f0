"""The symbolic interpreter: one `Frame` per code object being interpreted.

A Frame holds a symbolic stack, locals and closure cells of Variables, and steps through
the decoded instructions, dispatching each to the handler registered for its opname (see
handlers/). The root frame is the user's frame; calls to user functions create child
frames that share one `TraceContext` (graph, guards, side effects), which is inlining.

Operations that several handlers and Variables need (binary operators, truthiness, calling
torch ops, wrapping real values) live here so there is exactly one implementation each.
"""
import dis
import operator
import types

import torch
from bytecode_utils import decode, versions
from guards import (AttrSource, BuiltinSource, ConstSource, GlobalSource, IdMatch, ItemSource, Predicate,
                    QueryMatch, TensorMatch)
from guards.sources import GlobalsDictSource, Source

from ..graph import node_meta
from ..exc import Unsupported, UserException
from ..runtime import config, policy
from ..runtime.frame_hook import is_skipped
from .handlers import HANDLERS
from ..graph.output_graph import getitem_node, storage_id
from ..variables.base import ConstantVariable, Variable, is_constant_value
from ..variables.builder import wrap
from ..variables.containers import (BaseSequence, DictVariable, ListVariable, NamedTupleVariable,
                                    SizeVariable, StructSeqVariable, TupleVariable, is_structseq)
from ..variables.functions import CellBox
from ..variables.exceptions import set_context
from ..variables.generators import GeneratorVariable, collect_generators
from ..variables.nn_module import (_DISPATCH, _GLOBAL_HOOK_DICTS, _stateless, guard_module, module_guard,
                                   NNModuleVariable)
from ..graph.shapes import SYM_TYPES, is_symbolic
from .context import TraceContext  # noqa: F401  (re-exported: Frame's callers build one)
from ..variables.sym import SliceVariable, SymNodeVariable, wrap_sym_result
from ..variables.tensor import TensorVariable
from guards.guard import AUTOCAST_DEVICES
from ..variables.torch_vars import GradModeVariable, tensor_match, TorchFunctionVariable
from .handlers.exceptions import exception_value
from ..variables.operators import binary_op, compare, contains, unary_op
from ..variables.objects import guarded_type_lookup, SuperVariable



BREAK = object()  # returned by Frame.run when it stopped at ctx.break_at


class Frame:
    def __init__(self, ctx, code, f_globals, locals_, cells, parent=None, func=None):
        self.ctx = ctx
        self.code = code
        self.instrs = decode(code)
        self.f_globals = f_globals
        self.locals = locals_
        self.cells = cells
        self.stack = []
        self.ip = 0
        self.kw_names = None
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.func = func
        self.current = None
        self.return_value = None
        ctx.frames.append(self)      # (released when the trace is done: convert_frame._release)
        self.generator = None        # the GeneratorVariable whose body this frame is
        self.suspended_value = None  # what the last YIELD_VALUE yielded (handlers/misc.py)

    # ---- shared state shortcuts ---------------------------------------------------------
    output = property(lambda self: self.ctx.output)
    side_effects = property(lambda self: self.ctx.side_effects)
    wrap_memo = property(lambda self: self.ctx.wrap_memo)

    def guard(self, g):
        self.ctx.guards.append(g)

    # ---- the interpreter loop -----------------------------------------------------------
    def run(self):
        ctx = self.ctx
        ctx.frame_stack.append(self)
        try:
            return self._run()
        finally:
            ctx.frame_stack.pop()

    def _run(self):
        instrs = self.instrs
        ctx = self.ctx
        while True:
            if self.ip >= len(instrs):
                raise Unsupported("fell off the end of the code")
            if (ctx.generators or ctx.foreign_generators) and not ctx.finalizing:
                collect_generators(ctx)  # a generator nothing refers to any more runs its finally
            inst = instrs[self.ip]
            self.current = inst
            if self.parent is None:
                if self.ctx.root_steps == self.ctx.break_at:
                    return BREAK
                self.ctx.root_steps += 1
            self.ip += 1
            self.ctx.steps += 1
            if self.ctx.steps > config.MAX_STEPS:
                raise Unsupported(f"trace longer than {config.MAX_STEPS} instructions (unbounded loop?)", breakable=False)
            if ctx.steps % 4096 == 0 and ctx.steps >= config.MAX_STEPS_WITHOUT_OPS and not ctx.output.count_ops():
                raise Unsupported(f"{ctx.steps} instructions traced and not one tensor operation: "
                                  f"a loop of plain Python runs as Python", breakable=False)
            handler = HANDLERS.get(inst.opname)
            if handler is None:
                raise Unsupported(f"opcode {inst.opname} is not supported")
            try:
                done = handler(self, inst)
            except Unsupported as e:
                if isinstance(e, UserException) and e.fresh:
                    e.fresh = False  # raised here, while the handled exception is current
                    if e.value is not None:
                        set_context(self, e.value)
                if isinstance(e, UserException) and inst.exn is not None:
                    self._to_handler(inst.exn, e)  # caught by a try block of this frame
                    continue
                if e.location is None:
                    e.location = self.location()
                if self.parent is None and e.root_step is None:
                    e.root_step, e.root_inst = self.ctx.root_steps - 1, inst
                e.user_stack.insert(0, (self.code.co_filename, inst.lineno, self.code.co_name))
                raise
            if done:
                return self.return_value

    def _to_handler(self, entry, exc):
        """Unwind to an exception-table handler the way CPython does: stack cut to the entry's
        depth, [lasti], then the exception."""
        del self.stack[entry.depth:]
        if entry.lasti:
            self.push(ConstantVariable(self.current.offset))
        self.push(exception_value(exc))
        self.ip = entry.target

    def raise_at_current(self, exc):
        """Raise the UserException `exc` where the frame stopped (a generator suspended at a
        yield, by throw()/close()): to its handler in this frame, else out of the frame."""
        entry = self.current.exn if self.current is not None else None
        if entry is None:
            raise exc
        self._to_handler(entry, exc)

    def location(self):
        inst = self.current
        return f"{self.code.co_filename}:{inst.lineno if inst else self.code.co_firstlineno}"

    def jump(self, inst):
        self.ip = inst.target

    # ---- stack helpers --------------------------------------------------------------------
    def push(self, v):
        assert isinstance(v, Variable), v
        self.stack.append(v)

    def pop(self):
        return self.stack.pop()

    def popn(self, n):
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # ---- wrapping real values ---------------------------------------------------------------
    def wrap(self, value, source):
        return wrap(self, value, source)

    def wrap_module(self, module, source, path, guarded=False):
        if source is not None and not guarded:
            guard_module(self, module, source)
        return NNModuleVariable(module, source, path)

    def module_tensor(self, tensor, source, path):
        """A parameter/buffer reached through a module: a get_attr node, guarded."""
        key = id(tensor)
        hit = self.wrap_memo.get(key)
        if hit is not None and hit[0] is tensor:
            var = hit[1]
            if source is not None and source != getattr(var, "real_source", None):
                # the same tensor under a second path (tied weights): that path must still
                # lead to it, or untying them (a new Parameter there) would reuse this graph
                self.guard(IdMatch(source, tensor))
            return var
        if source is not None:
            self.guard(IdMatch(source, tensor))
            self.guard(tensor_match(self.ctx, source, tensor))
        node = self.output.get_attr(tensor, path)
        var = TensorVariable(node, node.meta["example_value"], None, real=tensor, real_source=source)
        self.wrap_memo[key] = (tensor, var)
        return var

    def register_input_tensor(self, source):
        self.ctx.input_tensor_sources.append(source)

    def register_mutable_input(self, var):
        self.ctx.mutable_inputs.append(var)

    def must_stay_distinct(self, var):
        """An input whose identity the trace compared: in the NoAliasing guard, like a mutable
        one (convert_frame._distinct_sources)."""
        self.ctx.mutable_inputs.append(var)

    def guard_global_module_hooks(self):
        if not self.ctx.module_hooks_guarded:
            self.ctx.module_hooks_guarded = True
            from torch.nn.modules import module as m

            self.guard(Predicate.falsy_attrs(ConstSource(m), _GLOBAL_HOOK_DICTS, "no global nn.Module hooks"))
            for name in _DISPATCH:  # torch's own call dispatch (module_dispatch_is_torchs)
                guarded_type_lookup(self, ConstSource(torch.nn.Module), torch.nn.Module, name)

    def load_global(self, name):
        pending = self.side_effects.pending_global(self.f_globals, name)
        if pending is not None:
            return pending
        root = self.f_globals is self.ctx.f_globals
        library = policy.is_library_globals(self.f_globals)
        if name in self.f_globals:
            src = GlobalSource(name) if root else ItemSource(ConstSource(self.f_globals), name)
            if library:  # library module globals are code, treated as immutable: not guarded
                return self._wrap_unguarded(self.f_globals[name], src)
            return self.wrap(self.f_globals[name], src)
        builtins_dict = self.f_globals.get("__builtins__", self.ctx.f_builtins)
        if not isinstance(builtins_dict, dict):
            builtins_dict = builtins_dict.__dict__
        if name not in builtins_dict:
            raise Unsupported(f"name {name!r} is not defined (the user code raises NameError)")
        bsrc = BuiltinSource(name) if builtins_dict is self.ctx.f_builtins else \
            ItemSource(ConstSource(builtins_dict), name)
        if library:  # (library modules such as torch.* are treated as immutable)
            return self._wrap_unguarded(builtins_dict[name], bsrc)
        gsrc = GlobalsDictSource() if root else ConstSource(self.f_globals)
        self.guard(Predicate.key_absent(gsrc, name, f"{name!r} not shadowed by a global"))
        return self.wrap(builtins_dict[name], bsrc)

    def _wrap_unguarded(self, value, source):
        # data, not code, is always guarded: a tensor, and a constant, which is how a library
        # keeps a switch (torch.backends.mha's _is_fastpath_enabled, set by a setter function)
        if isinstance(value, torch.Tensor) or is_constant_value(value):
            return self.wrap(value, source)
        saved, self.ctx.guards = self.ctx.guards, []
        try:
            return self.wrap(value, source)
        finally:
            self.ctx.guards = saved

    # ---- operations shared by handlers and variables ---------------------------------------
    def python_object(self, var):
        """The real object behind a class/function/module Variable or a tuple of them."""
        if isinstance(var, TupleVariable):
            return tuple(self.python_object(v) for v in var.items)
        if var.is_constant():
            return var.as_constant()
        get = getattr(var, "as_python_object", None)
        if get is None:
            raise Unsupported(f"{var} used where a Python object is needed")
        return get()

    def truthy(self, var):
        return var.truthy(self)

    def values_equal(self, a, b):
        """Two items compared by a container's `==` (PyObject_RichCompareBool): an object is
        equal to itself without its `__eq__` being asked, so a NaN held twice compares equal.
        One Variable is one object; two Variables holding NaNs may or may not be one object,
        which only an identity guard could tell: refused."""
        if a is b:
            return True
        for v in (a, b):
            if v.is_constant() and isinstance(v.as_constant(), (float, complex)) and \
                    v.as_constant() != v.as_constant():
                raise Unsupported("a container comparison of NaN items (their identity decides)")
        result = self.compare("==", a, b)
        return result.truthy(self)

    def call_torch(self, kind, target, args, kwargs):
        node_args, fake_args = _to_fx(args)
        node_kwargs, fake_kwargs = _to_fx(kwargs)
        if kind == "call_function":
            fn = lambda: target(*fake_args, **fake_kwargs)  # noqa: E731
        else:
            fn = lambda: getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)  # noqa: E731
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        reads_state = kind == "call_function" and not _mentions_node((node_args, node_kwargs))
        if reads_state and _EFFECT_NAME.match(name):
            raise Unsupported(f"torch.{name}() changes global state outside the graph")
        mutating = name.endswith("_") or "out" in kwargs or target is operator.setitem
        if _writes_in_place(name, kwargs):
            _refuse_overlapping_write(name, fake_args, fake_kwargs)
        node, example = self.output.create_node(kind, target, node_args, node_kwargs, fn)
        node_meta.annotate(self, node, example, target)
        result = self.wrap_result(node, example, mutating=mutating, inputs=(args, kwargs))
        if reads_state and isinstance(result, ConstantVariable):
            self._guard_query(target, name, fake_args, fake_kwargs, result.value)
        return result

    def _guard_query(self, fn, name, args, kwargs, value):
        """A torch call on no tensor folded to a constant may have read global state (profiler
        on? cuda available? autocast dtype?): guard that the call still gives that value."""
        if fn in _STATE_IN_GLOBAL_GUARD or fn in _PURE_TORCH_QUERIES or value is None:
            return  # (a None result is most likely a call made for an effect: never re-run it in a guard)
        if fn in _AUTOCAST_QUERIES and _autocast_device_guarded(args, kwargs):
            return  # every entry's GlobalStateMatch compares that device's autocast state
        self.guard(QueryMatch(fn, tuple(args), tuple(sorted(kwargs.items())), value))

    def call_module(self, mod_var, args, kwargs):
        from torch.func import functional_call
        module = mod_var.module
        target = self.output.attr_name(self._module_to_call(mod_var), mod_var.path)
        node_args, fake_args = _to_fx(args)
        node_kwargs, fake_kwargs = _to_fx(kwargs)
        state = {}
        for name, t in list(module.named_parameters()) + list(module.named_buffers()):
            if mod_var.source is not None:
                self._guard_module_state(mod_var, name, t)
            state[name] = self.output.fake(t)
        self._guard_leaf_attrs(mod_var)
        fn = lambda: functional_call(module, state, tuple(fake_args), fake_kwargs)  # noqa: E731
        node, example = self.output.create_node("call_module", target, node_args, node_kwargs, fn)
        node.meta["module_state"] = {storage_id(t): name for name, t in state.items()}  # (rerun.py)
        node_meta.annotate(self, node, example, None, leaf_module=mod_var)
        return self.wrap_result(node, example, mutating=True)

    def _module_to_call(self, mod_var):
        """The module object the graph's call_module runs. One reached from the frame without
        parameters or buffers is guarded by type and attributes, not identity (nn_module.
        module_guard): another object passing those guards may be the one passed next time,
        and the traced object may change meanwhile (`a.eval()`, a hook added). The graph then
        calls a private copy made now, whose state is exactly what the guards require."""
        module = mod_var.module
        if mod_var.source is None or not _stateless(module) or module.__dict__.get("_modules"):
            return module
        copies = self.output.__dict__.setdefault("_stateless_copies", {})
        if id(module) not in copies:
            copies[id(module)] = (module, _shallow_leaf_copy(module))
        return copies[id(module)][1]

    def _guard_module_state(self, mod_var, dotted, tensor):
        src = mod_var.source
        parts = dotted.split(".")
        for sub in parts[:-1]:
            src = ItemSource(AttrSource(src, "_modules"), sub)
        owner = "_parameters" if isinstance(tensor, torch.nn.Parameter) else "_buffers"
        src = ItemSource(AttrSource(src, owner), parts[-1])
        self.guard(IdMatch(src, tensor))
        self.guard(tensor_match(self.ctx, src, tensor))

    def _guard_leaf_attrs(self, mod_var):
        """A leaf module's forward reads its plain attributes (training, eps, p, ...): guard them."""
        if mod_var.source is None:
            return
        for mod_path, m in mod_var.module.named_modules():
            src = mod_var.source
            for sub in (mod_path.split(".") if mod_path else []):
                src = ItemSource(AttrSource(src, "_modules"), sub)
            if mod_path:
                self.guard(module_guard(src, m))
            attrs = {k: v for k, v in m.__dict__.items() if not k.startswith("_") and is_constant_value(v)}
            if attrs:  # one guard per module for all its plain attributes (cheaper per call)
                desc = ", ".join(f"{k}={v!r}" for k, v in attrs.items())
                self.guard(Predicate.attrs_are(src, attrs, f"attributes {desc}"))

    def _under_handler(self):
        """Whether an exception raised here would be caught by an exception-table handler of
        this frame or of a frame it was inlined into (a try, a with)."""
        f = self
        while f is not None:
            if f.current is not None and f.current.exn is not None:
                return True
            f = f.parent
        return False

    def wrap_result(self, node, example, mutating=False, inputs=None):
        """The Variable for an op's result. `inputs` (the op's argument Variables): a result
        that IS one of the input tensors (`x.float()` of a float tensor, `x.contiguous()`,
        `torch.atleast_1d(x)`, `x += 1`; the fake kernel returns the very fake it was
        given, as the real one returns its input) is that input's Variable, so identity
        (`y is x`) and the Python attributes set on the object carry over. The node stays in
        the graph (an in-place op's write is its point; a no-op conversion costs nothing)."""
        ctx = self.ctx
        if not ctx.ops_under_handler:
            ctx.ops_under_handler = self._under_handler()
        if ctx.history_write_at is None and node.meta.get("writes") and ctx.output.writes_history(node):
            ctx.history_write_at = (ctx.root_steps - 1, ctx.root_frame.current)
        same = _tensors_by_fake(inputs) if inputs is not None else {}
        if isinstance(example, torch.Tensor):
            var = same.get(id(example))
            return var if var is not None else TensorVariable(node, example)
        if isinstance(example, SYM_TYPES) or (type(example) is torch.Size and any(map(is_symbolic, example))):
            return wrap_sym_result(self, node, example)
        if isinstance(example, (tuple, list)) and _has_tensor(example):
            items = []
            for i, ex in enumerate(example):
                var = same.get(id(ex)) if isinstance(ex, torch.Tensor) else None
                items.append(var if var is not None else
                             self.wrap_result(getitem_node(self.output, node, i), ex))
            fields = getattr(type(example), "_fields", None)
            if isinstance(example, list):
                return ListVariable(items)
            if is_structseq(type(example)):
                return StructSeqVariable(items, type(example))
            if fields is not None and type(example) is not tuple:
                return NamedTupleVariable(items, type(example))
            return TupleVariable(items)
        if example is None and mutating:
            return ConstantVariable(None)
        self.output.graph.erase_node(node)
        if is_constant_value(example):
            return ConstantVariable(example)
        if type(example) in (torch.no_grad, torch.enable_grad):
            # e.g. the `ctx_factory()` of @torch.no_grad(): a fresh grad-mode context manager
            return GradModeVariable(type(example) is torch.enable_grad)
        raise Unsupported(f"torch op returned {type(example).__name__}, which has no graph meaning")

    def binary_op(self, name, a, b):
        return binary_op(self, name, a, b)

    def unary_op(self, name, a):
        return unary_op(self, name, a)

    def compare(self, op, a, b):
        return compare(self, op, a, b)

    def getitem(self, obj, key):
        return obj.getitem(self, key)

    def contains(self, container, item):
        return contains(self, container, item)

    # ---- calls ------------------------------------------------------------------------------
    def call(self, fn, args, kwargs):
        return fn.call(self, args, kwargs)

    def inline_call(self, fn_var, args, kwargs):
        code = fn_var.get_code()
        if self.depth + 1 > config.MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining deeper than {config.MAX_INLINE_DEPTH} calls (recursion?)")
        if code.co_flags & (0x80 | 0x100 | 0x200):
            raise Unsupported(f"call to coroutine/async generator function {code.co_name}")
        if is_skipped(code):
            raise Unsupported(f"{code.co_name} is marked tracer.disable")
        bound = fn_var.bind_args(self, args, kwargs)
        cells = {}
        for name in code.co_cellvars:
            cells[name] = CellBox(bound.pop(name)) if name in bound else CellBox()
        for name, box in zip(code.co_freevars, fn_var.closure_cells(self)):
            cells[name] = box
        child = Frame(self.ctx, code, fn_var.get_globals(), bound, cells, parent=self, func=fn_var)
        if code.co_flags & 0x20:  # generator: resumed lazily, one yield per next()
            gen = GeneratorVariable(child)
            self.ctx.generators.append(gen)
            return gen
        return child.run()

    def zero_arg_super(self):
        if "__class__" not in self.cells or self.code.co_argcount == 0:
            raise Unsupported("super() outside a method")
        cls = self.python_object(self.cells["__class__"].get(self))
        first = self.code.co_varnames[0]
        obj = self.cells[first].get(self) if first in self.cells else self.locals[first]
        return SuperVariable(cls, obj)


# Torch queries whose answer GlobalStateMatch already guards, or that depend on their
# arguments only: no per-query guard.
_STATE_IN_GLOBAL_GUARD = {torch.is_grad_enabled, torch.is_inference_mode_enabled, torch.get_default_dtype,
                          torch.are_deterministic_algorithms_enabled,
                          torch.is_deterministic_algorithms_warn_only_enabled, torch._C._is_any_autocast_enabled}
# autocast queries answered by what every entry's GlobalStateMatch compares, for its devices:
# whether autocast is on (all off, or each device's flag and dtype). Not get_autocast_dtype:
# with autocast off, GlobalStateMatch does not compare dtypes (they change no op), so a
# folded dtype query keeps its own guard.
_AUTOCAST_QUERIES = {torch.is_autocast_enabled}


def _autocast_device_guarded(args, kwargs):
    """The device an autocast query asks about is one GlobalStateMatch compares
    (is_autocast_enabled() without one asks about cuda)."""
    kw = dict(kwargs)
    if len(args) + len(kw) > 1 or set(kw) - {"device_type"}:
        return False
    dev = args[0] if args else kw.get("device_type", "cuda")
    return isinstance(dev, str) and dev in AUTOCAST_DEVICES  # (it takes no torch.device)


_PURE_TORCH_QUERIES = {torch.promote_types, torch.can_cast, torch.is_tensor, torch.is_storage,
                       torch.result_type, torch.is_floating_point, torch.is_complex, torch.broadcast_shapes,
                       torch._none_or_dtype if hasattr(torch, "_none_or_dtype") else torch.is_tensor}
# Names of torch functions that set state rather than compute: never called while tracing.
# (a torch object's bound __enter__/__exit__, e.g. an autocast entered before the frame and
# left in it, is a context manager's effect too; autocast's nesting counter is state)
_EFFECT_NAME = __import__("re").compile(
    r"_?(set_|use_|enable_|disable_|reset_|clear_|register_|manual_seed|seed$|empty_cache|synchronize"
    r"|_enter__$|_exit__$|enter_|exit_|push_|pop_|increment_version"
    r"|\w*(increment|decrement)_nesting)")


def _shallow_leaf_copy(module):
    """A new module of the same class sharing the attribute values of `module` (a stateless
    leaf: no parameters, buffers or submodules), with empty hook dicts: no user code
    (`__deepcopy__`, `__reduce__`) runs, nothing it refers to is copied (a lock, or the object
    a state-dict hook is bound to), and hooks registered on `module` later do not reach it
    (its hooks are guarded empty when it is called)."""
    d = dict(module.__dict__)
    for k, v in d.items():
        if k.endswith(("_hooks", "_hooks_with_kwargs", "_hooks_always_called")) and isinstance(v, dict):
            d[k] = type(v)()
        elif isinstance(v, (dict, set)):
            d[k] = type(v)(v)
    new = object.__new__(type(module))
    object.__getattribute__(new, "__dict__").update(d)
    return new


def _mentions_node(value):
    if isinstance(value, torch.fx.Node):
        return True
    if isinstance(value, (list, tuple)):
        return any(_mentions_node(v) for v in value)
    if isinstance(value, dict):
        return any(_mentions_node(v) for v in value.values())
    return False


def _has_tensor(value):
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_has_tensor(v) for v in value)
    return False


_INPLACE_OPS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                "lshift", "rshift", "matmul")
_INPLACE_DUNDERS = frozenset(f"__i{op}__" for op in _INPLACE_OPS) | {"__setitem__"}
_INPLACE_OPERATORS = frozenset(f"i{op}" for op in _INPLACE_OPS) | {"setitem"}  # operator.iadd


def _writes_in_place(name, kwargs):
    """The op writes into its first argument (`add_`, `__iadd__`, `operator.iadd`,
    `x[i] = v`) or into `out=`."""
    if "out" in kwargs or name in _INPLACE_OPERATORS:
        return True
    if name.startswith("__") and name.endswith("__"):
        return name in _INPLACE_DUNDERS
    return name.endswith("_")


def _refuse_overlapping_write(name, fake_args, fake_kwargs):
    """An in-place write (`x.add_(1)`, `x[i] = v`, `out=`) into a tensor whose elements share
    memory (`a[:1].expand_as(a)`: a stride 0) raises RuntimeError in eager for most ops, but
    the fake kernels do not check it: traced, the graph would raise at run time, after the
    frame's earlier side effects were recorded but before they are replayed (they would be
    lost). Unsupported: the write runs as Python, after those effects, and raises (or not)
    as eager does."""
    written = [fake_args[0]] if fake_args else []
    out = fake_kwargs.get("out")
    written += list(out) if isinstance(out, (list, tuple)) else [out]
    for t in written:
        if isinstance(t, torch.Tensor) and _has_internal_overlap(t):
            raise Unsupported(f"{name or 'in-place op'}: writes into a tensor whose elements share "
                              f"memory (expanded; eager may raise at run time)")


def _has_internal_overlap(t):
    try:
        return torch._debug_has_internal_overlap(t) == 1  # 1: YES (a stride 0 over size > 1)
    except Exception:  # noqa: BLE001 - symbolic strides it cannot decide: no known overlap
        return False


def _tensors_by_fake(value, out=None):
    """id(fake tensor) -> the TensorVariable that holds it, for every tensor in an op's
    arguments (nested in lists, tuples and dicts too)."""
    out = {} if out is None else out
    if isinstance(value, TensorVariable):
        out.setdefault(id(value.example), value)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors_by_fake(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _tensors_by_fake(v, out)
    elif isinstance(value, BaseSequence):
        _tensors_by_fake(value.items, out)
    return out


def _to_fx(value):
    """Variables -> (FX node arguments, fake-tensor arguments), structure preserved."""
    if isinstance(value, dict):
        pairs = {k: _to_fx(v) for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    if isinstance(value, (list, tuple)):
        pairs = [_to_fx(v) for v in value]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if isinstance(value, (TensorVariable,)):
        return value.node, value.example
    if isinstance(value, SymNodeVariable):
        return value.node, value.value
    if isinstance(value, SliceVariable):
        return value.fx_arg()
    if isinstance(value, SizeVariable):
        nodes, fakes = _to_fx(value.items)
        return tuple(nodes), torch.Size(fakes)
    if isinstance(value, BaseSequence):
        nodes, fakes = _to_fx(value.items)
        kind = list if isinstance(value, ListVariable) else tuple
        return kind(nodes), kind(fakes)
    if value.is_constant():
        c = graph_constant(value.as_constant())
        return c, c
    if isinstance(value, TorchFunctionVariable):
        if isinstance(value.fn, (types.BuiltinFunctionType, types.FunctionType)):
            # FX writes a function argument with repr(): `<built-in method sin ...>` is no code
            raise Unsupported(f"the function {getattr(value.fn, '__name__', value.fn)} passed to a torch op")
        return value.fn, value.fn
    raise Unsupported(f"{value} passed to a torch op")


_GRAPH_SCALARS = (bool, int, float, complex, str)


def graph_constant(c):
    """A constant as a graph node argument: the generated FX code spells it with repr(), so it
    must be a builtin value (np.float64(2.0) would print as `np.float64(2.0)`: NameError in
    the graph's namespace). A subclass of a builtin scalar (numpy scalars, IntEnum members)
    is its builtin value, which torch treats the same way (a wrapped Python number)."""
    t = type(c)
    if t in _GRAPH_SCALARS or c is None or t in (tuple, list):
        return t(graph_constant(v) for v in c) if t in (tuple, list) else c
    for base in _GRAPH_SCALARS:
        if isinstance(c, base):
            return base(c)
    return c


def opnames_without_handler():
    """Opnames of this version's dis.opmap that decode (versions.ALIASES) to a name without
    a handler."""
    return sorted(name for name in dis.opmap
                  if any(n not in HANDLERS for n in versions.ALIASES.get(name, (name,))))
