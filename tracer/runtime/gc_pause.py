"""Garbage collection paused over a burst of allocations that makes no garbage worth a pause.

A trace and a disk-cache read each allocate hundreds of thousands of objects (Variables, fake
tensors, guards, decoded records) that live until they end. CPython starts a collection every
few hundred allocations and, now and then, one of the whole heap: in a process holding a model
and torch, that is millions of objects walked for nothing (a fifth of a 12-layer LLaMA's trace,
two thirds of a GPT2 cache load). Collections resume afterwards, where the trace's own cycles
(frames and their Variables) are garbage to collect. A process that turned collection off
keeps it off. The backend's compile is not covered: inductor makes garbage worth collecting.
"""
import contextlib
import gc


@contextlib.contextmanager
def paused():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
