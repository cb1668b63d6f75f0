"""The FX side of a trace: the graph being built (`output_graph.py`), symbolic sizes
(`shapes.py`), node metadata torch's tools read (`node_meta.py`), the log of mutations to replay
after the graph (`side_effects.py`) and the backends that compile a finished graph
(`backends.py`). Knows torch.fx and torch, not Variables or the interpreter.
"""
