"""Per call and per process: what runs on every call of a compiled frame, and what lives as
long as the process.

The PEP 523 frame hook (`_eval_frame.c`, `frame_hook.py`), the compiled function's C hit path
(`_dispatch.c`), the per-code cache of entries and the recompile limit (`cache.py`), the records
users read (`records.py`, `logs.py`), the switches (`config.py`), torch.compile's annotations
(`compile_annotations.py`) and the one answer to "trace, skip or treat as library"
(`policy.py`).

The bottom floor of `tracer/`: it imports no other layer of the tracer. A trace is reached only
through the callback the face hands to the hook or the cache (see docs/design.md).
"""
