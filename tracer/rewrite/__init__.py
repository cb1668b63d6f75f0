"""The code CPython runs instead of the original: the rewritten code object of an entry
(`codegen.py`), graph breaks and resume functions (`graph_break.py`), and the rerun of a frame
as Python when its graph raises (`rerun.py`). Reads the trace's results (Variables, the output
graph), never the interpreter.
"""
