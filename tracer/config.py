"""Switches read by the tracer at run time (plain module attributes; set them in code).

verify_guards: check what can be checked cheaply only at compile time anyway, but also the
    costly invariants: a new entry's `failures()` is empty on its own inputs, and an entry
    whose `check()` rejects a call names a failing guard. Off by default (it compiles each
    entry's slow path); the test suite turns it on (tests/conftest.py).
"""
import os

verify_guards = os.environ.get("TRACER_VERIFY_GUARDS", "") not in ("", "0")
