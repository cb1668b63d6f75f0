"""The one place that knows how each CPython version spells its instructions.

Why this package exists: 3.11 to 3.15 differ in how a call is laid out on the stack
(where the NULL goes, PRECALL, KW_NAMES vs CALL_KW), how a method or a closure is loaded, how
a conditional jump reads its operand (3.13 wants an exact bool), and in a dozen renamed or
fused instructions. Everything that knows such a difference lives here, in one module per
version (``py311``, ``py312`` builds on it, ``py313`` on that, then ``py314``, ``py315``),
chosen once at import:

* **normalisation** (``normalize``): decoded instructions whose meaning is the same across
  versions get one name, so the interpreter has one handler for them (3.11's
  ``POP_JUMP_FORWARD_IF_TRUE`` is ``POP_JUMP_IF_TRUE``; 3.12's ``LOAD_ATTR`` with the method
  bit is ``LOAD_METHOD``; ``LOAD_FAST_CHECK`` is ``LOAD_FAST`` ...). ``ALIASES`` says which
  names a raw opname may become.
* **emit helpers**: every code generator (tracer codegen, graph breaks, resume functions,
  guard sources) builds calls, NULLs, method loads, closures, conditional jumps and returns
  through these functions; none spells a version's instruction sequence itself
  (``tests/test_version_boundary.py`` checks that).
* **stack layout facts** the interpreter needs (``split_call``, ``callable_and_null``).

Adding a version is one new module here plus its handlers; nothing else in the tree
changes. This package imports only ``bytecode`` and the standard library (layering rule).
"""
from __future__ import annotations

import sys

SUPPORTED = ((3, 11), (3, 12), (3, 13), (3, 14), (3, 15))

VERSION = sys.version_info[:2]

if VERSION == (3, 11):
    from . import py311 as impl
elif VERSION == (3, 12):
    from . import py312 as impl
elif VERSION == (3, 13):
    from . import py313 as impl
elif VERSION == (3, 14):
    from . import py314 as impl
elif VERSION == (3, 15):
    from . import py315 as impl
else:  # pragma: no cover - refused at build time too (setup.py)
    raise ImportError(
        f"frametracer supports CPython 3.11 to 3.15; this is {sys.version.split()[0]}"
    )

# The public surface: one name per fact, same signature on every version.
ALIASES = impl.ALIASES
CALL_PREFIX_OPNAMES = impl.CALL_PREFIX_OPNAMES
CALL_OPNAMES = impl.CALL_OPNAMES
SEND_KEEPS_RECEIVER = impl.SEND_KEEPS_RECEIVER
ITER_SLOTS = impl.ITER_SLOTS
NOT_JUMPS = impl.NOT_JUMPS
normalize = impl.normalize
call_kw_names = impl.call_kw_names
compare_to_bool = impl.compare_to_bool
break_shape = impl.break_shape
call_ex_has_kwargs = impl.call_ex_has_kwargs
fix_decoded = impl.fix_decoded
decodable = impl.decodable
slot_of_cell = impl.slot_of_cell
finish_code = impl.finish_code
subscr = impl.subscr
split_call = impl.split_call
callable_and_null = impl.callable_and_null
push_null = impl.push_null
load_callable = impl.load_callable
load_const_callable = impl.load_const_callable
call = impl.call
call_const_on_tos = impl.call_const_on_tos
load_method = impl.load_method
load_attr = impl.load_attr
load_global = impl.load_global
load_closure = impl.load_closure
make_function = impl.make_function
cond_jump = impl.cond_jump
return_value = impl.return_value
return_const = impl.return_const
relocatable = impl.relocatable
native = impl.native
native_plain_attr = impl.native_plain_attr

__all__ = [
    "SUPPORTED", "VERSION", "ALIASES", "CALL_PREFIX_OPNAMES", "CALL_OPNAMES",
    "SEND_KEEPS_RECEIVER", "ITER_SLOTS", "NOT_JUMPS", "normalize", "call_kw_names", "compare_to_bool", "break_shape", "call_ex_has_kwargs", "fix_decoded", "finish_code",
    "subscr", "split_call",
    "callable_and_null", "push_null", "load_callable", "load_const_callable", "call",
    "call_const_on_tos", "load_method", "load_attr", "load_global", "load_closure",
    "make_function", "cond_jump", "return_value", "return_const", "relocatable", "native",
    "native_plain_attr",
]
