"""CPython 3.15: what changed from 3.14 (everything else is inherited from ``py314``).

Checked against 3.15.2's ``opcode``/``dis`` metadata (its ``dis`` documentation is stale).

* An iterator takes two stack entries, ``[iterator, index | NULL]`` (``ITER_SLOTS``): GET_ITER
  pushes both (for a list or tuple CPython may keep the sequence itself and a tagged int
  index there; the tracer's own iterators use ``[iterator, NULL]``, which CPython's FOR_ITER
  also accepts), FOR_ITER reads them, POP_ITER drops both, and SEND / END_SEND /
  CLEANUP_THROW see the pair below the value.
* GET_YIELD_FROM_ITER is gone: ``GET_ITER 1..3`` is its ``yield from`` form (a generator or
  coroutine is kept as it is).
* LOAD_COMMON_CONSTANT grows to None, '', True, False, -1, list and set (the compiler emits it
  for ``None`` and ``-1``): still LOAD_CONST's argval (``dis._common_constants``).
* IMPORT_NAME's oparg packs lazy/eager flags (PEP 810) beside the name: ``dis`` decodes it.
* A generator expression calls ``iter()`` on its argument before RETURN_GENERATOR.
* TRACE_RECORD is the JIT's (never in code objects).
"""
from __future__ import annotations

from . import py314
from .py314 import *  # noqa: F401,F403
from .py314 import _i, _SHAPES  # noqa: F401

#: Stack entries a running ``for`` loop's iterator occupies.
ITER_SLOTS = 2

ALIASES: dict[str, tuple[str, ...]] = {k: v for k, v in py314.ALIASES.items() if k != "POP_ITER"}

_RENAMED = {k: v for k, v in py314._RENAMED.items() if k != "POP_ITER"}


def normalize(inst, code):
    """See py314.normalize (POP_ITER is its own instruction again: it drops two entries)."""
    if inst.opname == "POP_ITER":
        return inst
    return py314.normalize(inst, code)

