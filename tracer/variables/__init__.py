"""The value model and its semantics: what each kind of Python value is while a frame is traced
(a `Variable` per value, with the `Source` it was read from), and what operations do to it:
calls, attributes, operators, builtins, iteration, torch calls, modules.

The one place where modules import one another in a cycle (a list's `sort` calls user functions,
a user function builds lists): those imports are module objects imported at the bottom of each
module (see docs/design.md). Above this layer sits the interpreter, which this package reaches
only through the `tx` it is handed; below it, the graph, the runtime, guards and bytecode_utils.
"""

# The package loads its modules in one fixed order, whichever module a caller names: `base`
# first (every other module derives from it, and its own last lines start the chain of the
# rest), then each module. tests/test_layers.py checks that this order loads the package in a
# fresh process and that no module of it imports a layer above.
from . import base  # noqa: E402,F401  (first)
from . import (autograd_function, builder, builtins_impl, checkpoint, collections_vars, container_args, containers,  # noqa: E402,F401
               copying, descriptors, dict_storage, exceptions, folds, foreach_groups, frame_classes, functions, generators, input_tuples, introspection,
               itertools_impl, keyed_dict, lazy_annotations, lazy_reads, library_reads, live_iterators, mode_blocks,
               module_stores, new_objects, nn_module, object_protocols, objects, operator_getters, operators, speculate, stack_values, sym,
               templates, tensor, tensor_facts, torch_calls, torch_vars)
