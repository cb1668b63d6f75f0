"""Callables: user functions (inlined), nested functions and lambdas made in the frame,
builtins, bound methods, functools.partial.

User functions are *inlined*: their bytecode is interpreted by a nested translator frame
with the bound arguments as locals, so their tensor work lands in the caller's graph.
Closures are modelled with `CellBox`es shared between the creating frame and the function
object, which is what makes `nonlocal` correct.
"""
import functools
import types

from guards.sources import AttrSource, ItemSource

from ..exc import Unsupported
from .base import ConstantVariable, ObjectVariable, Variable


class CellBox:
    """A closure cell during tracing: its current Variable, and where the real cell lives."""

    _EMPTY = object()

    def __init__(self, value=_EMPTY, real_cell=None, source=None):
        self._value = value
        self.real_cell = real_cell   # a real cell object when the cell exists outside the trace
        self.source = source         # source of the cell *contents*
        self.dirty = False

    def get(self, tx):
        if self._value is CellBox._EMPTY:
            if self.real_cell is None:
                raise Unsupported("free variable referenced before assignment")
            try:
                real = self.real_cell.cell_contents
            except ValueError:
                raise Unsupported("empty closure cell")
            self._value = tx.wrap(real, self.source)
        return self._value

    def set(self, value):
        self._value = value
        self.dirty = True


def iterator_of(items):
    from .containers import IteratorVariable
    return IteratorVariable(items)


class BaseFunctionVariable(Variable):
    def python_type(self):
        return types.FunctionType

    def truthy(self, tx):
        return True  # functions define neither __bool__ nor __len__

    def get_code(self):
        raise NotImplementedError

    def call(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)

    def bind_args(self, tx, args, kwargs):
        """Map call arguments onto parameter names, defaults filled, exactly as CPython does
        (the binder is a real function with the same signature; see bytecode_utils)."""
        from bytecode_utils import arg_names, make_binder
        from .containers import DictVariable, TupleVariable
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
            result[names[i]] = TupleVariable(list(slots[i]))
            i += 1
        if code.co_flags & 0x08:
            result[names[i]] = DictVariable(dict(slots[i]))
        return result

    def getattr(self, tx, name):
        if name == "__name__":
            return ConstantVariable(self.get_code().co_name)
        if name == "__qualname__":
            return ConstantVariable(self.get_code().co_qualname)
        if name == "__code__":
            return ConstantVariable(self.get_code())
        raise Unsupported(f"function attribute {name!r}")


class UserFunctionVariable(BaseFunctionVariable):
    """A real Python function object (guarded by identity when it has a source)."""

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def call(self, tx, args, kwargs):
        from .folds import FOLDED
        fold = FOLDED.get(self.fn)
        if fold is not None:
            return fold(tx, args, kwargs)
        inner = _dynamo_wrapped(self.fn)
        if inner is not None:
            return UserFunctionVariable(inner).call(tx, args, kwargs)
        return tx.inline_call(self, args, kwargs)

    def get_code(self):
        return self.fn.__code__

    def get_globals(self):
        return self.fn.__globals__

    def default_vars(self, tx):
        defaults = self.fn.__defaults__ or ()
        src = AttrSource(self.source, "__defaults__") if self.source else None
        return [tx.wrap(v, ItemSource(src, i) if src else None) for i, v in enumerate(defaults)]

    def kwdefault_vars(self, tx):
        kw = self.fn.__kwdefaults__ or {}
        src = AttrSource(self.source, "__kwdefaults__") if self.source else None
        return {k: tx.wrap(v, ItemSource(src, k) if src else None) for k, v in kw.items()}

    def closure_cells(self, tx):
        cells = self.fn.__closure__ or ()
        src = AttrSource(self.source, "__closure__") if self.source else None
        return [CellBox(real_cell=c, source=AttrSource(ItemSource(src, i), "cell_contents") if src else None)
                for i, c in enumerate(cells)]

    def identity_key(self):
        return ("fn", id(self.fn))

    def as_python_object(self):
        return self.fn

    def reconstruct(self, cg):
        # the function object itself (found on a class, a library module...): the trace
        # specialised on it, so it is the object this code stands for
        if self.source is not None:
            return cg.load_source(self.source)
        cg.load_const(self.fn)

    def __repr__(self):
        return f"UserFunction({self.fn.__qualname__})"


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

    def __init__(self, code, f_globals, defaults, kwdefaults, closure, qualname):
        super().__init__(None)
        self.code = code
        self.f_globals = f_globals
        self.defaults = defaults or []      # Variables
        self.kwdefaults = kwdefaults or {}  # name -> Variable
        self.closure = closure or []        # CellBoxes
        self.qualname = qualname

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
        raise Unsupported("a function created in the traced frame escapes it")

    def __repr__(self):
        return f"NestedFunction({self.qualname})"


class BuiltinVariable(ObjectVariable):
    """A builtin / math / operator function applied to Variables (see builtins_impl)."""

    fn = property(lambda self: self.value)

    def __init__(self, fn, source=None):
        super().__init__(fn, source)


    def is_constant(self):
        return False

    def call(self, tx, args, kwargs):
        from ..builtins_impl import call_builtin
        return call_builtin(tx, self.fn, args, kwargs)

    def getattr(self, tx, name):
        if self.fn is object or self.fn is dict:  # object.__setattr__(obj, ...), dict.__setitem__(obj, ...)
            from .new_objects import slot_method
            slot = slot_method(getattr(self.fn, name, None))
            if slot is not None:
                return slot
        return super().getattr(tx, name)



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


def _call_constant_method(tx, obj, name, args, kwargs):
    from .base import is_constant_value
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
        from ..exc import folding_error
        raise folding_error(e, f"{type(obj.as_constant()).__name__}.{name}(...)") from None
    if not is_constant_value(result) and not isinstance(result, list):
        raise Unsupported(f"{type(obj.as_constant()).__name__}.{name} result")
    if isinstance(result, list):
        from .containers import ListVariable
        return ListVariable([ConstantVariable(r) for r in result])
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


class PartialVariable(Variable):
    """functools.partial(fn, *args, **kwargs), created in the frame or passed in."""

    def __init__(self, func, args, kwargs, source=None):
        super().__init__(source)
        self.func, self.args, self.kwargs = func, list(args), dict(kwargs)

    def python_type(self):
        return functools.partial

    def call(self, tx, args, kwargs):
        return self.func.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def getattr(self, tx, name):
        if name == "func":
            return self.func
        if name == "args":
            from .containers import TupleVariable
            return TupleVariable(self.args)
        raise Unsupported(f"partial attribute {name!r}")

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        # functools.partial(func, *args, **kwargs), from the parts (each rebuilt as usual)
        cg.emit("PUSH_NULL")
        cg.load_const(functools.partial)
        cg.reconstruct(self.func)
        for a in self.args:
            cg.reconstruct(a)
        names = tuple(self.kwargs)
        for n in names:
            cg.reconstruct(self.kwargs[n])
        if names:
            cg.emit("KW_NAMES", names)
        cg.emit("PRECALL", 1 + len(self.args) + len(names))
        cg.emit("CALL", 1 + len(self.args) + len(names))


class LruCacheVariable(ObjectVariable):
    """A `functools.lru_cache`-wrapped function (guarded by identity).

    Called with constant arguments, it is called for real while tracing and its result, if
    a constant, is folded: that is the cache's contract (same arguments, same result), and
    it is what eager does at this call (the body runs on a miss, once; later calls hit).
    Other calls are Unsupported: inlining the body would bypass the cache."""

    def call(self, tx, args, kwargs):
        if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
            raise Unsupported(f"lru_cache function {self.value.__qualname__} called with traced arguments")
        result = self.value(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
        from .base import is_constant_value
        if not is_constant_value(result):
            raise Unsupported(f"lru_cache function {self.value.__qualname__} returned a "
                              f"{type(result).__name__}, not a constant")
        return ConstantVariable(result)

    def truthy(self, tx):
        return True
