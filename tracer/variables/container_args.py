"""The arguments the container model's methods take, checked as CPython checks them.

Why a module of its own: the list/deque/dict models read the arguments they expect
(`args[0]`, `args[1] if len(args) > 1`), so a call with one missing read past the end (an
error of the tracer) and a call with one too many ignored it (`l.pop(1, 2)` popped,
`d.clear(1)` cleared, where eager raises TypeError). A list's or deque's methods that only
move items run as the kind's own C method (`ListVariable.moves`), which checks its arguments
itself; the others are checked here first.
"""
from ..exc import Unsupported
from .base import ConstantVariable

# The arguments each dict method the model answers takes (the same in every CPython version):
# (fewest, most, the last ones that may be given by name).
DICT_ARGS = {"get": (1, 2), "pop": (1, 2), "setdefault": (1, 2), "keys": (0, 0), "values": (0, 0),
             "items": (0, 0), "copy": (0, 0), "clear": (0, 0), "__contains__": (1, 1),
             "__getitem__": (1, 1), "__setitem__": (2, 2), "__len__": (0, 0),
             "move_to_end": (1, 2, ("last",)), "popitem": (0, 1, ("last",))}


def check_arity(what, args, kwargs, low, high, keywords=()):
    """A method of the model called with `low`..`high` arguments, of which only the last ones,
    named in `keywords`, may be given by name. Any other call is a break, where CPython raises
    its own TypeError."""
    if not low <= len(args) + len(kwargs) <= high or any(k not in keywords for k in kwargs):
        raise Unsupported(f"{what} with these arguments (the user code raises TypeError)")


def check_dict_call(cls, name, args, kwargs):
    """`d.name(*args, **kwargs)` on a dict model of class `cls`, checked where DICT_ARGS knows
    the method (`update` takes any keywords; the model checks its positional count itself)."""
    if name in DICT_ARGS:
        check_arity(f"{cls.__name__}.{name}()", args, kwargs, *DICT_ARGS[name])


def index_value(var):
    """What an index argument (`l.pop(i)`, `l.insert(i, v)`, `dq.rotate(n)`) stands for, handed
    to the container's real method, which checks it as CPython does: its constant value (a
    tensor only when the trace made it from a constant)."""
    if isinstance(var, tensor.TensorVariable):
        return containers.sequence_index(var)
    return var.as_constant()



def not_found(kind, name, target):
    """What `kind.name(target)` raises where no item equals `target` (`list.index`,
    `list.remove`, `tuple.index`): CPython's own ValueError and message, as the user's
    exception a traced `try` catches, where `target` is a constant; a break otherwise (the
    message would show a traced value)."""
    if type(target) is ConstantVariable:
        exceptions.user_errors(lambda: getattr(kind(), name)(target.value), f"{kind.__name__}.{name}")
    raise Unsupported(f"{kind.__name__}.{name}: value not found (the user code raises ValueError)")


# Modules of the value model that also import this one (the one import cycle, see
# docs/design.md): imported as modules, after this module's own definitions.
from . import containers, exceptions, tensor  # noqa: E402
