"""Classes made inside a traced frame: `class` statements (`__build_class__`) and
`type(name, bases, ns)`.

The class body is traced like any function, on a fresh namespace (the frame's `namespace`,
read and written by the NAME instructions). What it leaves there becomes a real class made
at trace time (`FrameClassVariable.value`), so that the rest of the value model (instances,
method lookup, isinstance, super()) works on it as on any user class. That class never
leaves the trace: where the class, or an object or a type() that reaches it, escapes the
graph, the rewritten code makes a new one from the same parts (`rebuild_class`), once per
call, as eager makes one per call. Its methods are stand-ins whose calls and reads go back to
the functions the body made (`method_var`), so closures over the frame's cells and defaults
computed in the frame are the trace's own.

Only what has no effect of its own is made at trace time: the metaclass is `type` or
`abc.ABCMeta`, no base has an `__init_subclass__` of its own, no class attribute has a
`__set_name__`, the body adds no graph op and no side effect. Anything else is Unsupported;
it, and any other Unsupported once a class was made, runs the frame as Python rather than
breaking the graph (convert_frame._trace_once reads `TraceContext.frame_classes`): the code
after a break would be handed a new class on every call, and traced again each time.
"""
import abc
import builtins
import types

from ..exc import Unsupported
from . import class_stand_ins
from .builtins_impl import impl
from .exceptions import user_error
from .base import ConstantVariable, ObjectVariable, is_constant_value
from .objects import ClassVariable, lookup_type_attr

_SAFE_METACLASSES = (type, abc.ABCMeta)  # their __new__/__init__ only make the class

@impl(type)
def _type(tx, *args):
    """type(obj), or type(name, bases, ns): a class made in the frame."""
    if len(args) == 3:
        tx.ctx.frame_classes.append("type()")
        return make_type(tx, *args)
    if len(args) != 1:
        raise user_error(TypeError, "type() takes 1 or 3 arguments")
    return ClassVariable(args[0].python_type())


@impl(builtins.__build_class__)
def _build_class(tx, *args, **kwargs):
    """A class statement (LOAD_BUILD_CLASS): its body traced, the class made."""
    return build_class(tx, args, kwargs)


def build_class(tx, args, kwargs):
    """`__build_class__(body, name, *bases, metaclass=..., **kwds)`: the body traced on a new
    namespace, then the class made from it (make_class)."""
    tx.ctx.frame_classes.append("class")
    if len(args) < 2:
        raise Unsupported("__build_class__ with fewer than two arguments (the user code raises TypeError)")
    body, name = args[0], _constant_str(args[1], "class name")
    if not isinstance(body, functions.NestedFunctionVariable):
        raise Unsupported("__build_class__ of a function not made in the frame")
    kwargs = dict(kwargs)
    meta = kwargs.pop("metaclass", None)
    bases = list(args[2:])
    metaclass = _metaclass(meta, bases, kwargs)
    namespace = containers.DictVariable({})
    ops, effects = tx.output.count_ops(), _effects(tx)
    tx.inline_call(body, [], {}, namespace=namespace)
    if tx.output.count_ops() != ops or _effects(tx) != effects:
        raise Unsupported(f"the body of class {name} has tensor operations or side effects")
    classcell = namespace.items.pop("__classcell__", None)
    _drop_classdict_cell(namespace.items)
    return make_class(tx, metaclass, name, bases, namespace.items,
                      classcell.box if isinstance(classcell, stack_values.CellRef) else None)


def make_type(tx, name, bases, namespace):
    """`type(name, bases, ns)`: the namespace copied (type() copies it), `__module__` taken
    from the calling frame's globals where the namespace lacks it, as type() does."""
    name = _constant_str(name, "type() name")
    if bases.is_constant() and bases.as_constant() == ():
        bases = containers.TupleVariable([])
    if not isinstance(bases, containers.TupleVariable):
        raise Unsupported("type() with bases that are not a tuple of classes")
    if not isinstance(namespace, containers.DictVariable) or type(namespace).__name__ != "DictVariable":
        raise Unsupported("type() with a namespace that is not a dict")
    items = dict(namespace.items)
    if not all(isinstance(k, str) for k in items):
        raise Unsupported("type() with a namespace key that is not a string")
    if "__module__" not in items:
        items["__module__"] = ConstantVariable(tx.f_globals.get("__name__"))
    metaclass = _metaclass(None, list(bases.items), {})  # (type's own metaclass when a base has another)
    return make_class(tx, metaclass, name, list(bases.items), items, None)


def make_class(tx, metaclass, name, bases, items, classcell):
    """The real class made from the traced namespace `items` (name -> Variable), with the
    FrameClassVariable that stands for it; `classcell` is the body's `__class__` cell."""
    real_bases = tuple(_base_class(b) for b in bases)
    _check_init_subclass(name, real_bases)
    stand_ins, real_items = {}, {}
    class_cell = types.CellType()
    for key, var in items.items():
        real_items[key] = _real_value(tx, key, var, classcell, class_cell, stand_ins)
    if classcell is not None:
        real_items["__classcell__"] = class_cell
    try:
        cls = metaclass(name, real_bases, real_items)
    except Exception as e:  # noqa: BLE001 - what eager raises (a layout conflict, a bad MRO)
        raise Unsupported(f"making class {name} raises {type(e).__name__}: {e} (the user code raises it)")
    var = FrameClassVariable(cls, metaclass, name, bases, dict(items), classcell)
    class_stand_ins.register(cls, var, [fn for fn, _ in stand_ins.values()])
    tx.wrap_memo[id(cls)] = (cls, var)
    for fn, fn_var in stand_ins.values():
        tx.wrap_memo[id(fn)] = (fn, fn_var)
    if classcell is not None:
        classcell.set(var)  # (`__class__` and zero-argument super() in its methods)
    return var


def _drop_classdict_cell(items):
    """CPython 3.14+ hands every class body's namespace to type() as `__classdictcell__` too,
    which type.__new__ fills with the class's dict and removes: the cell annotation scopes
    read the class's names through. A class whose functions close over it (its
    `__annotate__`, a method's annotations) is not made here; otherwise the cell is read by
    nothing and is dropped."""
    ref = items.pop("__classdictcell__", None)
    if ref is None:
        return
    box = getattr(ref, "box", None)
    if box is None or any(box in getattr(v, "closure", ()) for v in items.values()
                          if isinstance(v, functions.NestedFunctionVariable)):
        raise Unsupported("a class body whose functions read the class's own dict (__classdictcell__: "
                          "its annotations' scope)")


def _constant_str(var, what):
    if not (var.is_constant() and isinstance(var.as_constant(), str)):
        raise Unsupported(f"{what} that is not a constant string")
    return var.as_constant()


def _effects(tx):
    """A count that grows with every side effect the trace records."""
    se = tx.side_effects
    return se.events, len(se.mutated_containers), len(se.deferred_calls)


def _metaclass(meta, bases, kwargs):
    """The metaclass CPython would pick (the most derived of `metaclass=` and the bases'
    types), which must be one whose making of a class runs no user code."""
    if kwargs:
        raise Unsupported(f"class keywords {sorted(kwargs)} are handed to __init_subclass__: not traced")
    winner = _base_class(meta) if meta is not None else type
    for b in bases:
        t = type(_base_class(b))
        if issubclass(winner, t):
            continue
        if issubclass(t, winner):
            winner = t
            continue
        raise Unsupported("metaclass conflict (the user code raises TypeError)")
    if winner not in _SAFE_METACLASSES:
        raise Unsupported(f"the metaclass {winner.__qualname__} may run code when the class is made: "
                          f"the class statement runs as Python")
    return winner


def _base_class(var):
    """The real class behind a base (or a `metaclass=`) Variable."""
    if isinstance(var, ObjectVariable) and isinstance(var.value, type):
        return var.value
    raise Unsupported(f"a class base or metaclass {var} that is not a class")


def _check_init_subclass(name, bases):
    """Making the class calls the bases' `__init_subclass__`: only object's (which does
    nothing) is allowed, since the class is made at trace time."""
    for b in bases:
        for klass in b.__mro__:
            if klass is not object and "__init_subclass__" in klass.__dict__:
                raise Unsupported(f"{klass.__qualname__}.__init_subclass__ runs when class {name} is made: "
                                  f"the class statement runs as Python")


def _real_value(tx, key, var, classcell, class_cell, stand_ins):
    """What the real class holds under `key` for the traced value `var`."""
    if isinstance(var, functions.NestedFunctionVariable):
        return _stand_in(tx, var, classcell, class_cell, stand_ins)
    if isinstance(var, containers.DictVariable) and key == "__annotations__":
        return {k: _real_value(tx, k, v, classcell, class_cell, stand_ins) for k, v in var.items.items()}
    if var.is_constant():
        value = var.as_constant()
    elif isinstance(var, ObjectVariable) and (var.source is not None or isinstance(var, FrameClassVariable)
                                              or not getattr(var, "mutable", False)):
        value = var.value
    else:
        raise Unsupported(f"class attribute {key!r} holds {var}, made in the frame")
    if not is_constant_value(value) and hasattr(type(value), "__set_name__"):
        raise Unsupported(f"class attribute {key!r} has a __set_name__, which runs when the class is made")
    return value


def _stand_in(tx, var, classcell, class_cell, stand_ins):
    """A real function for a method the body made: its calls and reads are the method's own
    (method_var), so its closure cells are never read; the `__class__` one is the cell
    type.__new__ fills."""
    hit = stand_ins.get(id(var))
    if hit is not None:
        return hit[0]
    closure = tuple(class_cell if box is classcell else types.CellType() for box in var.closure)
    defaults = tuple(_plain(d) for d in var.defaults) or None
    fn = types.FunctionType(var.code, var.f_globals, var.code.co_name, defaults, closure or None)
    fn.__qualname__ = var.qualname
    stand_ins[id(var)] = (fn, var)
    return fn


def _plain(var):
    """A default as the stand-in holds it (never read: only for signature-reading code)."""
    return var.as_constant() if var.is_constant() else None


def rebuild_class(metaclass, name, bases, namespace, classcell):
    """The class made again after the graph, from the parts the trace found (no user code
    runs: the trace checked that making it has no effects)."""
    if classcell is not None:
        namespace["__classcell__"] = classcell
    return metaclass(name, bases, namespace)


class FrameClassVariable(ClassVariable):
    """A class made in the frame: a new object on every call, so its reads are the trace's
    own (no guard) and it is rebuilt where it escapes."""

    mutable = True  # (one object per call: rebuilt once per rewritten code, CodeGen.reconstruct)

    def __init__(self, cls, metaclass, name, bases, items, classcell):
        super().__init__(cls)
        self.metaclass, self.name, self.bases = metaclass, name, bases
        self.items = items            # name -> Variable, as the body left them
        self.classcell = classcell    # the body's `__class__` CellBox, or None

    def getattr(self, tx, name):
        own = self.items.get(name)
        meta_attr, _ = lookup_type_attr(self.metaclass, name)
        if own is not None and not hasattr(type(meta_attr), "__set__") and \
                (isinstance(own, functions.NestedFunctionVariable) or own.is_constant()):
            return own  # (the body's own value: nothing to guard, the class is this call's)
        return super().getattr(tx, name)

    def setattr(self, tx, name, value):
        raise Unsupported(f"assignment to attribute {name!r} of class {self.name}, made in the frame")

    def delattr(self, tx, name):
        raise Unsupported(f"del of attribute {name!r} of class {self.name}, made in the frame")

    def reconstruct(self, cg):
        if self.classcell is not None:
            cg.new_cell(self.classcell)  # empty: type.__new__ fills it, the methods close over it
        cg.extend(versions.load_const_callable(rebuild_class))
        cg.load_const(self.metaclass)
        cg.load_const(self.name)
        cg.reconstruct(containers.TupleVariable(self.bases))
        cg.reconstruct(containers.DictVariable(self.items))
        if self.classcell is not None:
            cg.load_cell(self.classcell)
        else:
            cg.load_const(None)
        cg.extend(versions.call(5))

    def __repr__(self):
        return f"FrameClass({self.name})"


from bytecode_utils import versions  # noqa: E402
from . import containers, functions, stack_values  # noqa: E402
