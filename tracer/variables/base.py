"""The symbolic value model: a `Variable` says what a value is, and where it came from.

Every value on the interpreter's stack or in its locals is a Variable. Subclasses model one
kind of Python value each (tensors, constants, containers, functions, modules, objects).
`source` is how to fetch the real value again from the frame (a `guards.sources.Source`), or
None for values created during tracing. Operations the interpreter performs on values
(attribute reads, calls, subscripts, iteration) are methods here; the default of every
method is `Unsupported`, so a value kind supports exactly what it implements.
"""
from ..exc import Unsupported


class Variable:
    """Base of all symbolic values."""

    source = None
    mutable = False  # True for list/dict/set/user objects whose contents may change
    ESCAPE_WALK = True  # (graph/side_effects.escape follows its attributes)

    def __init__(self, source=None):
        self.source = source

    # ---- what is it -------------------------------------------------------------
    def python_type(self):
        raise Unsupported(f"type of {self} is unknown")

    def is_constant(self):
        return False

    def as_constant(self):
        """The Python value, when it is known exactly at trace time."""
        raise Unsupported(f"{self} is not a compile-time constant")

    def truthy(self, tx):
        """bool(value) when it can be decided at trace time."""
        raise Unsupported(f"bool() of {self} is not known at trace time")

    # ---- operations -------------------------------------------------------------
    def getattr(self, tx, name):
        raise Unsupported(f"attribute {name!r} of {self}")

    def setattr(self, tx, name, value):
        raise Unsupported(f"setting attribute {name!r} on {self}")

    def delattr(self, tx, name):
        raise Unsupported(f"del of attribute {name!r} of {self}")

    def call(self, tx, args, kwargs):
        raise Unsupported(f"calling {self}")

    def call_method(self, tx, name, args, kwargs):
        """obj.name(*args, **kwargs); default: fetch the attribute then call it."""
        return self.getattr(tx, name).call(tx, args, kwargs)

    def getitem(self, tx, key):
        raise Unsupported(f"subscript of {self}")

    def setitem(self, tx, key, value):
        raise Unsupported(f"item assignment on {self}")

    def delitem(self, tx, key):
        raise Unsupported(f"item deletion on {self}")

    def iterate(self, tx):
        """All items, for unpacking and for-loops over finite Python values."""
        raise Unsupported(f"iterating over {self}")

    def next(self, tx):
        """The next item of an iterator (FOR_ITER, next()); None when exhausted. Values that
        are not modelled iterators (an opaque generator from outside the frame, passed to a
        comprehension) cannot be advanced while tracing: a graph break."""
        raise Unsupported(f"advancing {self} (not an iterator the tracer models)")

    def length(self, tx):
        return len(self.iterate(tx))

    def hasattr(self, tx, name):
        raise Unsupported(f"hasattr on {self}")

    # ---- codegen ----------------------------------------------------------------
    def reconstruct(self, cg):
        """Emit bytecode that leaves this value on the stack of the rewritten frame."""
        if self.source is not None:
            cg.load_source(self.source)
            return
        raise Unsupported(f"cannot rebuild {self} after the graph")

    def __repr__(self):
        return f"{type(self).__name__}()"


def known_type(var):
    """var's Python type, None where the trace does not know it (python_type refuses)."""
    try:
        t = var.python_type()
    except Unsupported:
        return None
    return t if isinstance(t, type) else None


def is_heap_type(t):
    """Whether class `t` was made by a class statement or type() (Py_TPFLAGS_HEAPTYPE), not
    written in C as a static type."""
    return bool(t.__flags__ & (1 << 9))


def tp_name(t):
    """The type's name as CPython's messages spell it (tp_name: a C type's carries its module
    unless it is a builtin, a class's is its __name__)."""
    if is_heap_type(t) or t.__module__ == "builtins":
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


def check_builtin_attr(var, name):
    """Raise the AttributeError CPython raises for `var.name` when `var` is an instance of a
    builtin type (dict, list, tuple, str, int, ...) that has no attribute `name`.

    Such instances have no `__dict__` and no attribute hooks, so the type alone decides. The
    miss is then a user exception at this very instruction (catchable by a traced `try`),
    never a lazy attribute that would only fail when rebuilt at a later graph break, outside
    the user's handler."""
    try:
        t = var.python_type()
    except Unsupported:
        return
    if (type(t) is type and t.__module__ == "builtins" and not t.__dictoffset__
            and not hasattr(t, name)):
        raise exceptions.attribute_error(t.__name__, name)


MAX_UNROLL = 50_000  # items of a constant sequence a loop over it may be unrolled into


class UntracedValue(Variable):
    """A frame's argument of a type the tracer does not model (a torch.Generator, a storage,
    an autograd node): held by its source and passed on untouched. Any use of it is a graph
    break there, with the reason its wrapping gave. (A resume function gets the value the
    break's call returned this way: `torch.manual_seed(3)`'s Generator, popped unused, made
    the whole rest of the frame run as Python.)"""

    def __init__(self, value, reason, source):
        super().__init__(source)
        self.value, self.reason = value, reason

    def __repr__(self):
        return self.reason


class TempVariable(Variable):
    """A value generated code already holds in a temporary local (code generation only)."""

    def __init__(self, name):
        super().__init__(None)
        self.name = name

    def reconstruct(self, cg):
        cg.emit("LOAD_FAST", self.name)


class ObjectVariable(Variable):
    """A Variable standing for one real Python object (`value`), compared by identity.

    Functions, classes, modules, nn.Modules, user objects: they share what identity gives
    (`is`, `isinstance`, passing the object to a call) and how to rebuild them after the
    graph (from their source, else as the object itself).
    """

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def identity_key(self):
        return ("obj", id(self.value))

    def as_python_object(self):
        return self.value

    def reconstruct(self, cg):
        if self.source is not None:
            return cg.load_source(self.source)
        cg.load_const(self.value)


CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis),
                  range, slice, type(NotImplemented))


MAX_UNROLL = 100_000  # items a constant iterable may unroll into


def _length(value):
    if isinstance(value, range):  # len() overflows past sys.maxsize
        return max(0, (value.stop - value.start + value.step - (1 if value.step > 0 else -1)) // value.step)
    return len(value)


def is_constant_value(value):
    """Immutable values the tracer folds: scalars, strings, and tuples/frozensets of them."""
    import torch
    if isinstance(value, CONSTANT_TYPES) or isinstance(value, (torch.dtype, torch.device,
                                                                  torch.layout, torch.memory_format)):
        return True
    if type(value) in (tuple, frozenset, torch.Size):
        return all(is_constant_value(v) for v in value)
    return False


class ConstantVariable(Variable):
    """A Python value known exactly at trace time (guarded when it came from a source)."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def is_constant(self):
        return True

    def as_constant(self):
        return self.value

    def truthy(self, tx):
        return bool(self.value)

    def getattr(self, tx, name):
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            raise Unsupported(f"constant {self.value!r} has no attribute {name!r}") from e
        if is_constant_value(attr) or numpy_vars.is_numpy_scalar(attr) or numpy_vars.is_numpy_dtype(attr):
            return ConstantVariable(attr)
        if callable(attr):
            return functions.BuiltinMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of constant {type(self.value).__name__}")

    def getitem(self, tx, key):
        try:
            item = self.value[key.as_constant()]
            return self if item is self.value else ConstantVariable(item)  # t[:] is t
        except Exception as e:  # noqa: BLE001 - "abc"[7], (1, 2)["x"]: the user code raises it
            raise exceptions.folding_error(e, f"{type(self.value).__name__}[...]") from None

    def iterate(self, tx):
        if isinstance(self.value, (str, bytes, range, tuple, frozenset)):
            n = self.length(tx)
            if n > MAX_UNROLL:  # (range(1 << 1000): the items would never fit in memory)
                raise Unsupported(f"iterating over a {type(self.value).__name__} of {n} items: too many to unroll")
            return [ConstantVariable(v) for v in self.value]
        raise Unsupported(f"iterating over {type(self.value).__name__}")

    def length(self, tx):
        try:
            return len(self.value)
        except Exception as e:  # noqa: BLE001 - len(range(1 << 100)) raises OverflowError, as in the user code
            raise exceptions.folding_error(e, "len(...)") from None

    def hasattr(self, tx, name):
        return hasattr(self.value, name)

    def reconstruct(self, cg):
        if self.source is not None and not _one_of_a_kind(self.value):
            # The object this call was given, not the equal one the trace saw: code run
            # natively after a break (`a is b`, id(), a NaN compared in a list) and the
            # caller see identity, which the value guards do not pin. (Loaded before any
            # write of the frame's effects: codegen's phase 1.)
            return cg.load_source(self.source)
        cg.load_const(self.value)

    def __repr__(self):
        return f"Constant({self.value!r})"


def _one_of_a_kind(value):
    """A value CPython keeps one object of: every equal value is that object."""
    return value is None or value is Ellipsis or value is NotImplemented or isinstance(value, bool) or \
        type(value) is int and -5 <= value <= 256 or type(value) in (tuple, str, bytes) and len(value) == 0


def rely_on_identity(tx, var):
    """The trace decided something by `var`'s identity (`a is b`, a dict key). A function pins
    its own identity (`pin_identity`); any other object with a source must stay as distinct
    from the frame's other such inputs as it was (its source joins the NoAliasing guard), or
    two arguments that are one object on a later call would take the traced answer. One
    without a source was made in the frame, or is baked in: no input can be it."""
    pin = getattr(var, "pin_identity", None)
    if pin is not None:
        pin(tx)
    elif var.source is not None and getattr(var, "identity_key", None) is not None:
        var.identity_relied = True  # (variables/blocks.py: not a record's root, nor under one)
        tx.ctx.mutable_inputs.append(var)  # (convert_frame._distinct_sources)


def python_object(var):
    """The real object behind a class/function/module Variable or a tuple of them."""
    if isinstance(var, containers.TupleVariable):
        return tuple(python_object(v) for v in var.items)
    if var.is_constant():
        return var.as_constant()
    get = getattr(var, "as_python_object", None)
    if get is None:
        raise Unsupported(f"{var} used where a Python object is needed")
    return get()


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions, so that
# either may be imported first; their names are read when a function runs.
from . import exceptions, functions, containers, numpy_vars  # noqa: E402
