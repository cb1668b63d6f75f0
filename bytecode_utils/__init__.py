"""Pure bytecode tooling for frametracer (CPython 3.11-3.15): decode, analyse, build code objects.

Why a separate package: everything here is about code objects and nothing about torch or the
tracer, so it is tested on its own against large amounts of real bytecode (the stdlib), and
the interpreter can trust it. See docs/design.md, "Layers".
"""

from .analysis import (
    StackDepthError,
    basic_blocks,
    handler_depth,
    jump_targets,
    live_locals,
    stack_depths,
    successors,
)
from .codegen import (
    arg_count,
    arg_names,
    flat_args,
    flatten_signature,
    make_binder,
    make_code,
    make_function,
    prologue,
)
from .instructions import (
    BINARY_OP_NAMES,
    JUMP_OPNAMES,
    TERMINATOR_OPNAMES,
    UNCONDITIONAL_JUMP_OPNAMES,
    ExceptionTableEntry,
    Instruction,
    decode,
    exception_table,
    from_bytecode,
    is_jump,
    is_terminator,
    to_bytecode,
)

__all__ = [
    # instructions
    "Instruction",
    "ExceptionTableEntry",
    "decode",
    "exception_table",
    "is_jump",
    "is_terminator",
    "JUMP_OPNAMES",
    "UNCONDITIONAL_JUMP_OPNAMES",
    "TERMINATOR_OPNAMES",
    "BINARY_OP_NAMES",
    "to_bytecode",
    "from_bytecode",
    # analysis
    "jump_targets",
    "basic_blocks",
    "successors",
    "stack_depths",
    "handler_depth",
    "live_locals",
    "StackDepthError",
    # codegen
    "make_code",
    "prologue",
    "flatten_signature",
    "flat_args",
    "arg_count",
    "arg_names",
    "make_binder",
    "make_function",
]
