"""Which objects a dict or set made in the frame holds by identity (containers._IdKey).

An object is found as a key exactly when the same object is used if its `==` is identity
and its hash is a fixed function of the object that runs no user code: object's own (plain
instances, modules, functions), or a plain Enum member's. `Enum` defines only `__hash__`
(`hash(self._name_)`, fixed for the member) and compares by identity, so `{Mode.TRAIN: 2.0}`
is keyed like a module; the enum member was held opaque and refused as a key, which ran the
whole frame as Python. An IntEnum or StrEnum member compares equal to its int or str (the
class takes int's or str's `__eq__` and `__hash__`): it is a constant of the value model
(base.is_constant_value), found under `1` as in eager, never an identity key; so is a plain
Enum whose class defines its own `__eq__` or `__hash__`.
"""
import enum

_FIXED_HASHES = (object.__hash__, enum.Enum.__hash__)


def keyed_by_identity(cls):
    """Whether instances of `cls` as keys are equal only to themselves, with a hash that runs
    no user code (the class's entries themselves are guarded by the caller)."""
    return cls.__eq__ is object.__eq__ and any(cls.__hash__ is h for h in _FIXED_HASHES)
