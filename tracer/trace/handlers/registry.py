"""The one opname table and the decorator that fills it (see the package's docstring).

A handler module registers its functions here at import; the package's __init__ imports every
family module, so the table is complete once `tracer.trace.handlers` is imported."""
from bytecode_utils.versions import VERSION

HANDLERS = {}


def handler(*opnames, versions=None):
    """Register the decorated function for `opnames` (on `versions` only, if given)."""
    def register(fn):
        if versions is not None and VERSION not in versions:
            return fn
        for name in opnames:
            assert name not in HANDLERS, name
            HANDLERS[name] = fn
        return fn
    return register


PY311 = [(3, 11)]
PY312 = [(3, 12)]
PY313 = [(3, 13)]
SINCE_312 = [(3, 12), (3, 13)]
UNTIL_312 = [(3, 11), (3, 12)]
