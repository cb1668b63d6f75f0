"""One trace of one frame: the symbolic interpreter and its state.

`convert_frame.py` turns a frame into a cache entry; `frame.py` is the interpreter loop (a
stack, locals, cells and unwinding); `context.py` is the state shared by every frame of one
trace, declared once with its checkpoint, restore and release; `handlers/` holds one function
per instruction name. Everything a value does (call, add, iterate, guard) is asked of the value
model in `tracer/variables/`, which sees this layer only as the interpreter `tx` it is given.
"""
