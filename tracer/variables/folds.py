"""Library functions the trace evaluates itself instead of inlining their code.

Each entry maps a real function object to `fold(tx, args, kwargs) -> Variable`. A fold is an
exact model of the function on Variables (it reads what the function reads, through the
same guarded sources, and runs the same user hooks symbolically); it exists where the
function's own implementation is bookkeeping the tracer cannot follow cheaply (`id()` memo
tables, C reduce protocols). See introspection.py (inspect.signature) and copying.py
(copy.deepcopy, copy.copy).
"""
FOLDED = {}


def folds(fn):
    """Register the decorated function as the fold of `fn`."""
    def register(fold):
        FOLDED[fn] = fold
        return fold
    return register


# the modules that register folds (they import this one for `folds`)
from . import copying, foreach_groups, introspection  # noqa: E402,F401
