"""Shared helpers (no tests here) for the bytecode_utils tests: real code objects from the stdlib."""

from __future__ import annotations

import importlib
import inspect
import types

# Modules whose code we decode, analyse and round-trip. A mix of plain functions, classes,
# closures, generators, async code, try/except/finally and with-blocks.
STDLIB_MODULES = [
    "json",
    "json.decoder",
    "json.encoder",
    "collections",
    "dis",
    "contextlib",
    "inspect",
    "typing",
    "asyncio.tasks",
    "argparse",
]


def walk_code(code: types.CodeType):
    """``code`` and every code object nested in its constants, depth first."""
    stack = [code]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


def module_code(name: str) -> types.CodeType:
    mod = importlib.import_module(name)
    return compile(inspect.getsource(mod), mod.__file__, "exec")


def stdlib_codes(name: str) -> list[types.CodeType]:
    return list(walk_code(module_code(name)))


def map_code_recursive(code: types.CodeType, fn) -> types.CodeType:
    """Apply ``fn`` to every nested code object (innermost first), then to ``code``."""
    consts = tuple(
        map_code_recursive(c, fn) if isinstance(c, types.CodeType) else c for c in code.co_consts
    )
    if consts != code.co_consts or any(a is not b for a, b in zip(consts, code.co_consts)):
        code = code.replace(co_consts=consts)
    return fn(code)
