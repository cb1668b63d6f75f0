"""Instruction handlers, one per opname, grouped by family in the modules of this package.

`HANDLERS[opname](frame, inst)` executes one instruction symbolically. It returns True only
when the frame is finished (RETURN_VALUE). An opname without a handler makes the frame fall
back with the opname as the reason (rule 5); `tests/test_opcodes.py` enumerates dis.opmap.
"""
HANDLERS = {}


def handler(*opnames):
    def register(fn):
        for name in opnames:
            assert name not in HANDLERS, name
            HANDLERS[name] = fn
        return fn
    return register


from . import attributes, calls, containers, control_flow, exceptions, load_store, matching, misc, operators  # noqa: E402,F401
