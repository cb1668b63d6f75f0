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
from bytecode_utils.versions import VERSION

HANDLERS = {}


def handler(*opnames, versions=None):
    """Register the decorated function for `opnames` (on `versions` only, if given)."""
    def register(fn):
        if versions is not None and VERSION not in versions:
            return fn
        for name in opnames:
            assert name not in HANDLERS, name
            HANDLERS[name] = fn
        return fn
    return register


PY311 = [(3, 11)]
PY312 = [(3, 12)]
PY313 = [(3, 13)]
SINCE_312 = [(3, 12), (3, 13)]
UNTIL_312 = [(3, 11), (3, 12)]


from . import attributes, calls, containers, control_flow, exceptions, load_store, matching, misc, operators  # noqa: E402,F401
