"""The one opname table and the decorator that fills it (see the package's docstring).

A handler module registers its functions here at import; the package's __init__ imports every
family module, so the table is complete once `tracer.trace.handlers` is imported."""
from bytecode_utils.versions import SUPPORTED, VERSION

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


def since(version):
    """The supported versions from `version` on."""
    return [v for v in SUPPORTED if v >= version]


def until(version):
    """The supported versions up to `version`, included."""
    return [v for v in SUPPORTED if v <= version]


PY311 = [(3, 11)]
PY312 = [(3, 12)]
SINCE_312, SINCE_313, SINCE_314, SINCE_315 = since((3, 12)), since((3, 13)), since((3, 14)), since((3, 15))
UNTIL_312, UNTIL_313, UNTIL_314 = until((3, 12)), until((3, 13)), until((3, 14))
