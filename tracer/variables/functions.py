"""Callables: user functions (inlined), nested functions and lambdas made in the frame,
builtins, bound methods, functools.partial.

User functions are *inlined*: their bytecode is interpreted by a nested translator frame
with the bound arguments as locals, so their tensor work lands in the caller's graph.
Closures are modelled with `CellBox`es shared between the creating frame and the function
object, which is what makes `nonlocal` correct.
"""
import functools
import itertools
import os
import sysconfig
import types

from guards.sources import AttrSource, ConstSource, ItemSource

from . import class_stand_ins
from ..exc import Unsupported, UserException
from .base import ConstantVariable, ObjectVariable, Variable
from bytecode_utils import arg_names, make_binder, versions
from ..runtime import compile_annotations as ann
from guards import IdMatch, Predicate


class CellBox:
    """A closure cell during tracing: its current Variable, and where the real cell lives."""

    _EMPTY = object()
    ESCAPE_WALK = True  # (graph/side_effects.escape follows its value)

    def __init__(self, value=_EMPTY, real_cell=None, source=None):
        self._value = value
        self.real_cell = real_cell   # a real cell object when the cell exists outside the trace
        self.source = source         # source of the cell *contents*
        self.dirty = False

    def get(self, tx):
        if self.dirty and self.real_cell is not None:  # (a cell of the frames, not shared state)
            tx.side_effects.pending_reads += 1  # (variables/blocks.py)
        if self._value is CellBox._EMPTY:
            if self.real_cell is None:
                raise Unsupported("free variable referenced before assignment")
            try:
                real = self.real_cell.cell_contents
            except ValueError:
                raise Unsupported("empty closure cell")
            self._value = builder.wrap(tx, real, self.source)
        return self._value

    def set(self, value):
        self._value = value
        self.dirty = True

    def is_empty(self):
        return self._value is CellBox._EMPTY and self.real_cell is None

    def peek(self):
        """The current value (for rebuilding a cell made during tracing)."""
        if self._value is CellBox._EMPTY:
            raise Unsupported("an empty closure cell of a called function")
        return self._value


def real_cell_box(tx, cell, source):
    """The one CellBox of a real closure cell in this trace: every function sharing the cell
    (and the root frame, for its own free variables) sees the same pending value."""
    boxes = tx.ctx.cell_boxes
    hit = boxes.get(id(cell))
    if hit is not None and hit.real_cell is cell:
        if hit.source is None:
            hit.source = source
        return hit
    box = boxes[id(cell)] = CellBox(real_cell=cell, source=source)
    return box


def iterator_of(items):
    return containers.IteratorVariable(items)


class BaseFunctionVariable(Variable):
    def python_type(self):
        return types.FunctionType

    def truthy(self, tx):
        return True

    def get_code(self):
        raise NotImplementedError

    def call(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)

    def bind_args(self, tx, args, kwargs):
        """Map call arguments onto parameter names, defaults filled, exactly as CPython does
        (the binder is a real function with the same signature; see bytecode_utils)."""
        code = self.get_code()
        binder = make_binder(code, tuple(self.default_vars(tx)) or None, self.kwdefault_vars(tx) or None)
        try:
            slots = binder(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"call to {code.co_name}() does not bind: {e} (the user code raises TypeError)")
        names = arg_names(code)
        result = dict(zip(names, slots))
        i = code.co_argcount + code.co_kwonlyargcount
        if code.co_flags & 0x04:
            result[names[i]] = containers.TupleVariable(list(slots[i]))
            i += 1
        if code.co_flags & 0x08:
            result[names[i]] = containers.DictVariable(dict(slots[i]))
        return result

    def getattr(self, tx, name):
        if name == "__code__":
            return ConstantVariable(self.get_code())
        raise Unsupported(f"function attribute {name!r}")

    def hasattr(self, tx, name):
        try:
            self.getattr(tx, name)
            return True
        except UserException as e:
            if issubclass(e.exc_type, AttributeError):
                return False
            raise


# Function attributes that are not in the function's __dict__ (CPython keeps them in slots).
_FUNCTION_SLOTS = ("__name__", "__qualname__", "__doc__", "__module__", "__defaults__", "__kwdefaults__",
                   "__code__", "__globals__", "__closure__", "__annotations__", "__builtins__", "__dict__")


class UserFunctionVariable(BaseFunctionVariable):
    """A real Python function object (guarded by identity when it has a source)."""

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def get_code(self):
        return self.fn.__code__

    def get_globals(self):
        return self.fn.__globals__

    def _own_source(self):
        """Where the function's defaults and cells are read from: its own source, or, for a
        function reached without one (a method found on a class, whose identity is guarded
        there), the function object itself, which the guards fix. Without a source, a list
        among them looked made in the frame and what the trace did to it was never written
        back (a closure `log.append` in a local class's method was lost)."""
        return self.source or ConstSource(self.fn)

    def default_vars(self, tx):
        src = AttrSource(self._own_source(), "__defaults__")
        return [builder.wrap(tx, v, ItemSource(src, i)) for i, v in enumerate(self.fn.__defaults__ or ())]

    def kwdefault_vars(self, tx):
        src = AttrSource(self._own_source(), "__kwdefaults__")
        return {k: builder.wrap(tx, v, ItemSource(src, k)) for k, v in (self.fn.__kwdefaults__ or {}).items()}

    def closure_cells(self, tx):
        src = AttrSource(self._own_source(), "__closure__")
        return [real_cell_box(tx, c, AttrSource(ItemSource(src, i), "cell_contents"))
                for i, c in enumerate(self.fn.__closure__ or ())]

    identity_guarded = True  # False while only its code is guarded (builder.py)

    def identity_key(self):
        return ("fn", id(self.fn))

    def pin_identity(self, tx):
        """The trace compares this function's identity: guard it from now on."""
        if not self.identity_guarded and self.source is not None:
            tx.guard(IdMatch(self.source, self.fn))
            self.identity_guarded = True

    def as_python_object(self):
        return self.fn

    def call(self, tx, args, kwargs):
        """Inlined, unless the function carries a torch.compile annotation (see
        compile_annotations.py): those are honoured as torch.compile honours them."""
        fn = self.fn
        made = class_stand_ins.method_var(tx, fn)
        if made is not None:  # a method of a class made in the frame: the function the body made
            return made.call(tx, args, kwargs)
        if ann.is_graph_break(fn):
            raise Unsupported("torch._dynamo.graph_break()")
        if ann.disabled(fn) is not None:
            ann.skip_disabled_frames(fn)  # what it wraps is never traced, when it runs natively
            raise Unsupported(f"{fn.__qualname__} is marked torch.compiler.disable: it runs as Python")
        if ann.allowed_in_graph(fn):
            return torch_calls.call_torch(tx, "call_function", fn, args, kwargs)
        if ann.marked_constant(fn):
            return _constant_result(fn, args, kwargs)
        if ann.is_shape_mark(fn):
            tx.ctx.shape_marks.append((fn.__name__, args, kwargs))  # for dynamic shapes (issue 12)
            tx.side_effects.defer_call(fn, args, kwargs)
            return ConstantVariable(None)
        if args and isinstance(args[0], nn_module.NNModuleVariable) and nn_module.is_module_dispatch(fn):
            return args[0].dispatch(tx, args[1:], kwargs)  # nn.Module.__call__(m), super().__call__()
        fold = folds.FOLDED.get(fn)
        if fold is not None:  # library bookkeeping evaluated by the trace (folds.py)
            return fold(tx, args, kwargs)
        inner = _dynamo_wrapped(fn)
        if inner is not None:
            return UserFunctionVariable(inner).call(tx, args, kwargs)
        inner = ann.torch_compiled(fn)
        if inner is not None:
            self.pin_identity(tx)
            return UserFunctionVariable(inner).call(tx, args, kwargs)
        # a call like an earlier one (a layer's forward, a helper) is replayed from its trace
        return blocks.call_function(tx, self, args, kwargs, lambda: BaseFunctionVariable.call(self, tx, args, kwargs))

    def getattr(self, tx, name):
        """The function object's own attribute (a functools.wraps wrapper has the wrapped
        function's __name__/__doc__/__wrapped__, not its code's): read from the object,
        guarded through its source."""
        pending = tx.side_effects.pending_attr(self, name)
        if pending is not None:
            return pending
        if name in ("__globals__", "__builtins__", "__closure__"):
            raise Unsupported(f"function attribute {name!r}")
        if name == "__code__":
            return ConstantVariable(self.fn.__code__)
        if name == "__class__":
            # a function's class cannot be reassigned: no guard (torchvision's
            # _log_api_usage_once(fn) reads fn.__class__.__name__ on every call)
            return builder.wrap(tx, type(self.fn), None)
        if name == "__annotations__" and lazy_annotations.LAZY:  # (may run its __annotate__)
            return lazy_annotations.read(tx, self.fn, self._own_source())
        try:
            value = getattr(self.fn, name)
        except AttributeError:
            if self.source is not None:
                tx.guard(Predicate.lacks_attr(self.source, name, f"has no attribute {name!r}"))
            raise exceptions.attribute_error("function", name)
        if name == "__dict__":
            if self.source is None and value:
                raise Unsupported("__dict__ of a function reached without a source")
            return builder.wrap(tx, value, AttrSource(self.source, "__dict__")) if self.source else containers.DictVariable({})
        return builder.wrap(tx, value, AttrSource(self.source, name) if self.source is not None else None)

    def setattr(self, tx, name, value):
        if name in _FUNCTION_SLOTS:
            raise Unsupported(f"setting function attribute {name!r}")
        tx.side_effects.store_attr(self, name, value)

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        cg.load_const(self.fn)  # a real function (a method found on a class): the object itself

    def __repr__(self):
        return f"UserFunction({self.fn.__qualname__})"


def _constant_result(fn, args, kwargs):
    """torch.compiler.assume_constant_result: called now, its result is a constant of the
    trace (unguarded: the annotation promises it never changes)."""
    try:
        cargs = [a.as_constant() for a in args]
        ckw = {k: v.as_constant() for k, v in kwargs.items()}
    except Unsupported:
        raise Unsupported(f"{fn.__qualname__} (assume_constant_result) called with non-constant arguments")
    value = fn(*cargs, **ckw)
    if not base.is_constant_value(value):
        raise Unsupported(f"{fn.__qualname__} (assume_constant_result) returned a {type(value).__name__}")
    return ConstantVariable(value)


def _lacks_attr(name):
    return lambda obj: not hasattr(obj, name)


def _has_attr(name):
    return lambda obj: hasattr(obj, name)


def _dynamo_wrapped(fn):
    """The function TorchDynamo wrapped, for its own monkeypatches installed once
    torch.compile has run in the process (`nn.Module.__init__` becomes `patched_init`, which
    tags each new module with dynamo's generation): dynamo's bookkeeping, not the program's."""
    if fn.__module__ != "torch._dynamo.mutation_guard" or fn.__name__ not in ("patched_init", "patched_setstate"):
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cell = cells.get("init") or cells.get("setstate")
    return cell.cell_contents if cell is not None else None


class NestedFunctionVariable(BaseFunctionVariable):
    """A function or lambda created by MAKE_FUNCTION inside the traced frame."""

    mutable = True  # one function object: rebuilt once, attributes can be set

    def __init__(self, code, f_globals, defaults, kwdefaults, closure, qualname):
        super().__init__(None)
        self.code = code
        self.f_globals = f_globals
        self.defaults = defaults or []      # Variables
        self.kwdefaults = kwdefaults or {}  # name -> Variable
        self.closure = closure or []        # CellBoxes
        self.qualname = qualname
        # what the real function object would hold: its slot attributes (as MAKE_FUNCTION
        # sets them, then changed by stores) and its __dict__ (functools.wraps fills both)
        doc = code.co_consts[0] if code.co_consts and isinstance(code.co_consts[0], str) else None
        module = f_globals.get("__name__")
        self.slots = {"__name__": ConstantVariable(code.co_name), "__qualname__": ConstantVariable(qualname),
                      "__doc__": ConstantVariable(doc), "__module__": tx_wrap_constant(module)}
        self.attrs = containers.DictVariable({})
        self.annotations = containers.DictVariable({})

    def getattr(self, tx, name):
        if name in self.slots:
            return self.slots[name]
        if name == "__annotations__":
            if "__annotate__" in self.slots and not self.annotations.items:
                raise Unsupported("__annotations__ of a function with lazy annotations (PEP 649)")
            return self.annotations
        if name == "__dict__":
            return self.attrs
        if name in self.attrs.items:
            return self.attrs.items[name]
        if name == "__defaults__":
            return containers.TupleVariable(self.defaults) if self.defaults else ConstantVariable(None)
        if name == "__kwdefaults__":
            return containers.DictVariable(self.kwdefaults) if self.kwdefaults else ConstantVariable(None)
        if name == "__code__":
            return ConstantVariable(self.code)
        if name in _FUNCTION_SLOTS:
            raise Unsupported(f"function attribute {name!r} of a function made in the frame")
        raise exceptions.attribute_error("function", name)

    def setattr(self, tx, name, value):
        tx.side_effects.changed(self, value)
        if name in ("__name__", "__qualname__"):
            if not (value.is_constant() and isinstance(value.as_constant(), str)):
                raise Unsupported(f"{name} must be set to a string (the user code raises TypeError)")
            self.slots[name] = value
        elif name in ("__doc__", "__module__"):
            self.slots[name] = value
        elif name == "__annotations__":
            if not isinstance(value, containers.DictVariable):
                raise Unsupported("__annotations__ must be set to a dict (the user code raises TypeError)")
            self.annotations = value
        elif name in _FUNCTION_SLOTS:
            raise Unsupported(f"setting function attribute {name!r} of a function made in the frame")
        else:
            self.attrs.items[name] = value

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.f_globals

    def default_vars(self, tx):
        return self.defaults

    def kwdefault_vars(self, tx):
        return self.kwdefaults

    def closure_cells(self, tx):
        return self.closure

    def reconstruct(self, cg):
        """The real function: the same code, globals, defaults and attributes, and a closure of
        the same cells (the frame's own cells, or cells made once here for those of inlined
        frames), so that it shares its variables with the code that runs after the graph."""
        for box in self.closure:
            cg.load_cell(box)
        cg.build(tuple, len(self.closure))
        closure = base.TempVariable(cg.store_tmp())
        slots = containers.DictVariable(dict(self.slots))
        cg.call_with(make_function, [ConstantVariable(self.code), _GlobalsVariable(self.f_globals),
                                     containers.TupleVariable(self.defaults), containers.DictVariable(self.kwdefaults), closure,
                                     slots, self.attrs, self.annotations])

    def __repr__(self):
        return f"NestedFunction({self.qualname})"


class _GlobalsVariable(Variable):
    """The globals dict a nested function was made with (a constant of the rewritten code)."""

    def __init__(self, g):
        super().__init__(None)
        self.g = g

    def reconstruct(self, cg):
        cg.load_const(self.g)


def make_function(code, f_globals, defaults, kwdefaults, closure, slots, attrs, annotations):
    """A function made in a traced frame, rebuilt after the graph (no user code runs)."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults or None, closure or None)
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    for name, value in slots.items():
        setattr(fn, name, value)
    fn.__dict__.update(attrs)
    if annotations:
        fn.__annotations__ = annotations
    return fn


def tx_wrap_constant(value):
    if not base.is_constant_value(value):
        raise Unsupported(f"a function's __module__ is {type(value).__name__}")
    return ConstantVariable(value)


class BuiltinVariable(ObjectVariable):
    """A builtin / math / operator function applied to Variables (see builtins_impl)."""

    fn = property(lambda self: self.value)

    def __init__(self, fn, source=None):
        super().__init__(fn, source)


    def is_constant(self):
        return False

    def call(self, tx, args, kwargs):
        return builtins_impl.call_builtin(tx, self.fn, args, kwargs)

    def getattr(self, tx, name):
        if self.fn is object or self.fn is dict:  # object.__setattr__(obj, ...), dict.__setitem__(obj, ...)
            slot = new_objects.slot_method(getattr(self.fn, name, None))
            if slot is not None:
                return slot
        if self.fn is itertools.chain and name == "from_iterable":
            return BuiltinVariable(itertools_impl.chain_from_iterable)
        if isinstance(self.fn, type):  # int.__name__, object.__mro__: a class like any other
            return objects.ClassVariable(self.fn, self.source).getattr(tx, name)
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):  # next.__name__: facts of a builtin
            return ConstantVariable(getattr(self.fn, name, None))
        return super().getattr(tx, name)

    def getitem(self, tx, key):
        return introspection.class_subscript(tx, self, key)  # list[int]



    def reconstruct(self, cg):
        cg.load_const(self.fn)

    def __repr__(self):
        return f"Builtin({getattr(self.fn, '__name__', self.fn)})"


class BuiltinMethodVariable(Variable):
    """`const.method` for methods of immutable constants ("sep".join, str.format, int.bit_length)."""

    def __init__(self, obj, name):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs) if not self.obj.is_constant() \
            else _call_constant_method(tx, self.obj, self.name, args, kwargs)

    def python_type(self):
        return types.BuiltinMethodType

    def truthy(self, tx):
        return True

    def getattr(self, tx, name):
        if name == "__name__":  # (unittest's assertRaises(exc, g.close) reads it)
            return ConstantVariable(self.name)
        return super().getattr(tx, name)

    def reconstruct(self, cg):
        cg.reconstruct(self.obj)
        cg.load_attr(self.name)

    def __repr__(self):
        return f"BuiltinMethod({self.obj!r}.{self.name})"


def _call_constant_method(tx, obj, name, args, kwargs):
    try:
        cargs = [a.as_constant() for a in args]
        ckw = {k: v.as_constant() for k, v in kwargs.items()}
    except Unsupported:
        if name == "format" and isinstance(obj.as_constant(), str):
            raise Unsupported("str.format with non-constant arguments")
        raise
    try:
        result = getattr(obj.as_constant(), name)(*cargs, **ckw)
    except Exception as e:  # noqa: BLE001 - the user's call raises it
        raise exceptions.folding_error(e, f"{type(obj.as_constant()).__name__}.{name}(...)") from None
    if not base.is_constant_value(result) and not isinstance(result, list):
        raise Unsupported(f"{type(obj.as_constant()).__name__}.{name} result")
    if isinstance(result, list):
        return containers.ListVariable([ConstantVariable(r) for r in result])
    return ConstantVariable(result)


class BoundMethodVariable(Variable):
    """`obj.method` where method is a Python function: calls it with obj prepended."""

    def __init__(self, func, obj, source=None):
        super().__init__(source)
        self.func, self.obj = func, obj

    def python_type(self):
        return types.MethodType

    def truthy(self, tx):
        return True

    def call(self, tx, args, kwargs):
        return self.func.call(tx, [self.obj, *args], kwargs)

    def getattr(self, tx, name):
        if name == "__self__":
            return self.obj
        if name == "__func__":
            return self.func
        return self.func.getattr(tx, name)

    def reconstruct(self, cg):
        """A bound method made in the trace (`self.method` kept in a local across a break):
        `types.MethodType(func, obj)`, which is the object `obj.method` gave."""
        if self.source is not None:
            return cg.load_source(self.source)
        cg.call_with(types.MethodType, [self.func, self.obj])


_PLACEHOLDER = getattr(functools, "Placeholder", None)  # functools.Placeholder (3.14+)


def is_placeholder(var):
    """Whether `var` is functools.Placeholder (3.14+). It is a singleton whose type cannot be
    subclassed, so the type guard on a Placeholder read from a source pins the object."""
    return _PLACEHOLDER is not None and isinstance(var, ObjectVariable) and var.value is _PLACEHOLDER


def fill_placeholders(pargs, args):
    """A partial's arguments `pargs` merged with later positional ones `args`, as CPython merges
    them at a call or when a partial is made of this partial: each Placeholder of `pargs`, left
    to right, takes the next of `args`; the rest of `args` follows. Placeholders left over
    (fewer `args`: a partial of a partial) stay."""
    merged, used = [], 0
    for a in pargs:
        if used < len(args) and is_placeholder(a):
            merged.append(args[used])
            used += 1
        else:
            merged.append(a)
    return merged + list(args[used:])


def make_partial(tx, fn, args, kwargs):
    """`functools.partial(fn, *args, **kwargs)` called in the frame, built as CPython builds it:
    a trailing or keyword Placeholder is eager's TypeError, and a partial of a partial whose
    instance dict was never made is one partial (func, merged args and keywords: what
    `.func` and `.args` read, and the count a call short of arguments names)."""
    if args and is_placeholder(args[-1]):
        raise exceptions.user_error(TypeError, "trailing Placeholders are not allowed")
    if any(is_placeholder(v) for v in kwargs.values()):
        raise exceptions.user_error(TypeError, "Placeholder cannot be passed as a keyword argument")
    if isinstance(fn, PartialVariable) and fn.merges_into_partial(tx):
        return PartialVariable(fn.func, fill_placeholders(fn.args, args), {**fn.kwargs, **kwargs})
    if not isinstance(fn, PartialVariable) and _is_partial_subclass(fn):
        raise Unsupported("functools.partial of an instance of a partial subclass")
    return PartialVariable(fn, args, kwargs)


def _is_partial_subclass(var):
    """A value of a subclass of functools.partial, which CPython may merge into a partial of
    it (by a test that changed across versions): not modelled."""
    t = base.known_type(var)
    return t is not None and issubclass(t, functools.partial)


def _dict_unmade_is(expected):
    return lambda p: _partial_dict_unmade(p) is expected


def _partial_dict_unmade(p):
    """Whether CPython made no instance dict for the partial `p` yet (its __reduce__ reports
    the dict without making it; reading `p.__dict__` would make it)."""
    return functools.partial.__reduce__(p)[2][3] is None


class PartialVariable(Variable):
    """functools.partial(fn, *args, **kwargs), created in the frame or passed in. On 3.14+
    `args` may hold Placeholders, which a call fills with its first positional arguments."""

    def __init__(self, func, args, kwargs, source=None, real=None):
        super().__init__(source)
        self.func, self.args, self.kwargs = func, list(args), dict(kwargs)
        self.real = real  # the partial object, when it came from the frame
        self.phcount = sum(1 for a in self.args if is_placeholder(a))

    def python_type(self):
        return functools.partial

    def call(self, tx, args, kwargs):
        if len(args) < self.phcount:
            raise exceptions.user_error(TypeError, "missing positional arguments in 'partial' call; "
                                        f"expected at least {self.phcount}, got {len(args)}")
        return self.func.call(tx, fill_placeholders(self.args, args), {**self.kwargs, **kwargs})

    def merges_into_partial(self, tx):
        """Whether `functools.partial(self, ...)` takes this partial's parts (CPython: a partial
        whose instance dict was never made). One made in the frame has none (the trace sets no
        attribute on it); one passed in is guarded to have none still, or to have one."""
        if self.real is None:
            return True
        unmade = _partial_dict_unmade(self.real)
        if self.source is not None:
            tx.guard(Predicate.made(self.source, _dict_unmade_is, (unmade,),
                                    "instance dict never made" if unmade else "instance dict made"))
        return unmade

    def getattr(self, tx, name):
        if name == "func":
            return self.func
        if name == "args":
            return containers.TupleVariable(self.args)
        if name == "keywords":
            return containers.DictVariable(self.kwargs)
        raise Unsupported(f"partial attribute {name!r}")

    def hasattr(self, tx, name):
        # what an instance finds through its class (`functools.partial.__name__` is the class's
        # own name, which an instance does not have)
        if name in ("func", "args", "keywords") or any(name in c.__dict__ for c in functools.partial.__mro__):
            return True
        if self.source is None:  # made in the frame: a fresh partial has no other attributes
            return False
        present = hasattr(self.real, name)
        tx.guard(Predicate.made(self.source, _has_attr if present else _lacks_attr, (name,),
                                f"{'has' if present else 'has no'} attribute {name!r}"))
        return present

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        # functools.partial(func, *args, **kwargs), from the parts (each rebuilt as usual)
        cg.extend(versions.load_const_callable(functools.partial))
        cg.reconstruct(self.func)
        for a in self.args:
            cg.reconstruct(a)
        names = tuple(self.kwargs)
        for n in names:
            cg.reconstruct(self.kwargs[n])
        cg.call(1 + len(self.args) + len(names), names)


class LruCacheVariable(ObjectVariable):
    """A `functools.lru_cache`-wrapped function (guarded by identity).

    Whether its body runs (and with it the body's effects, and what it reads) depends on the
    cache's state at that moment, which no trace can know or guard. A user's function is
    therefore a graph break, called natively: calling it while tracing ran its body before
    the frame's own earlier writes (a stale result, then cached for good), and folding the
    result skipped the body on later calls after `cache_clear()` or an eviction.

    A library's function (installed packages, the stdlib: transformers'
    `is_torch_*_available()`, `logger.warning_once`) is trusted as library globals are
    (DESIGN decision 4): called with constant arguments while tracing, its constant result
    folded, as a cache that answers the same for the same arguments."""

    def call(self, tx, args, kwargs):
        name = getattr(self.value, "__qualname__", repr(self.value))
        if not _library_function(self.value):
            result = self._pure_body(tx, args, kwargs)
            if result is None:
                raise Unsupported(f"lru_cache function {name}: whether its body runs depends on the "
                                  "cache, so it is called natively")
            return result
        if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
            raise Unsupported(f"lru_cache function {name} called with traced arguments")
        result = self.value(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
        if not base.is_constant_value(result):
            raise Unsupported(f"lru_cache function {name} returned a {type(result).__name__}, not a constant")
        return ConstantVariable(result)

    def _pure_body(self, tx, args, kwargs):
        """The user's function under the cache (`__wrapped__`, guarded as any function read),
        inlined on trial, as TorchDynamo traces it: kept only where running the body again
        gives what the cache would hold. That is, arguments that are constants (hashed by
        value: an object hashed by identity could have changed since it was cached), a body
        that reads nothing the trace guards (no global, attribute or input: its answer depends
        on the arguments alone), logs no side effect, adds no graph node, and a result that is
        an immutable constant (a cached list could be mutated by the caller and read back
        changed on the next hit; a fresh copy would not). What stays observable is the
        cache's own bookkeeping: `cache_info()` counts no hit or miss for these calls, and the
        cache is not filled; no answer the program computes from the call differs. None (the
        trial taken back): the call is a break."""
        consts = [*args, *kwargs.values()]
        if not all(type(a) is base.ConstantVariable and base.is_constant_value(a.value) for a in consts):
            return None
        src = AttrSource(self.source, "__wrapped__") if self.source is not None else None
        wrapped = builder.wrap(tx, self.value.__wrapped__, src)
        if not isinstance(wrapped, UserFunctionVariable):
            return None
        cp, n_guards, effects = tx.ctx.checkpoint(), len(tx.ctx.guards), tx.side_effects.sizes()
        try:
            result = tx.inline_call(wrapped, list(args), dict(kwargs))
        except Unsupported:
            result = None
        pure = result is not None and cp.restorable() and len(tx.ctx.guards) == n_guards and \
            tx.side_effects.sizes() == effects and _immutable_result(result)
        if pure:
            return result
        if not cp.restorable():
            raise Unsupported(f"lru_cache function {self.value.__qualname__}: its body is not a pure "
                              "function of constant arguments")
        cp.restore()
        return None

    def truthy(self, tx):
        return True


def _immutable_result(var):
    """A constant Variable of an immutable value, or a tuple of such."""
    if type(var) is containers.TupleVariable:
        return all(_immutable_result(v) for v in var.items)
    return type(var) is base.ConstantVariable and _immutable_constant(var.value)


def _immutable_constant(value):
    """None, a number, a string or bytes, or a tuple/frozenset of them."""
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable_constant(v) for v in value)
    return value is None or type(value) in (bool, int, float, complex, str, bytes)


_LIBRARY_DIRS = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib", "stdlib")})


def _library_function(fn):
    """Whether the function under a cache wrapper (or a method's) is defined in installed
    library code, not the user's."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    return code is not None and library_file(code.co_filename)


def library_file(filename):
    """Whether `filename` is installed library code (site-packages, the stdlib)."""
    return os.path.realpath(filename).startswith(_LIBRARY_DIRS)


def library_object(obj):
    """Whether a class or function `obj` comes from installed library code (its module's file
    is, or it has none: builtins)."""
    import sys
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    f = getattr(module, "__file__", None)
    return f is None or library_file(f)


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import containers, base, introspection, nn_module, folds, builtins_impl, new_objects, itertools_impl, objects, exceptions, builder, torch_calls, blocks, lazy_annotations  # noqa: E402
