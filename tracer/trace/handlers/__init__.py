"""Instruction handlers, one per opname, grouped by family in the modules of this package.

`HANDLERS[opname](frame, inst)` executes one instruction symbolically. It returns True only
when the frame is finished (RETURN_VALUE). An opname without a handler makes the frame fall
back with the opname as the reason (rule 5); `tests/test_opcodes.py` enumerates dis.opmap.

This is the one opname table for every supported CPython version. Names are the decoded,
normalised ones (bytecode_utils.versions.normalize: e.g. 3.12's LOAD_ATTR with the method
bit arrives as LOAD_METHOD). A handler whose behaviour differs between versions is
registered per version: `@handler("END_FOR", versions=[(3, 12)])`; only the running
version's handlers enter the table.
"""
from . import attributes, calls, containers, control_flow, exceptions, load_store, matching, misc, operators  # noqa: F401
from .registry import HANDLERS

__all__ = ["HANDLERS"]
