"""The value model and its semantics: what each kind of Python value is while a frame is traced
(a `Variable` per value, with the `Source` it was read from), and what operations do to it:
calls, attributes, operators, builtins, iteration, torch calls, modules.

The one place where modules import one another in a cycle (a list's `sort` calls user functions,
a user function builds lists): those imports are module objects imported at the bottom of each
module (see docs/design.md). Above this layer sits the interpreter, which this package reaches
only through the `tx` it is handed; below it, the graph, the runtime, guards and bytecode_utils.
"""
