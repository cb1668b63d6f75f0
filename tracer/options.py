"""The checks on what users pass to `compile`, `capture`, `explain` and `export`.

A wrong option must fail where it is given, with one line that names it and says what is
accepted, never later inside a trace (where `check="x"` used to surface as "invalid literal for
int()" and `fullgraph="yes"` was taken as true). Each entry point calls `check_options` with
the options it has; the messages name the entry point.
"""
import numbers

from .graph.backends import NAMED, backend_name, inductor_with


def check_options(where, *, backend=None, fullgraph=False, dynamic=None, check=False, check_rtol=1e-4,
                  check_atol=1e-5, mode=None, options=None):
    """Raise TypeError/ValueError naming `where` (e.g. "tracer.compile") for a bad option."""
    if (mode is not None or options) and backend != "inductor":  # (an empty dict is no option)
        given = "mode" if mode is not None else "options"
        raise ValueError(f"{where}: {given} is inductor's; backend {backend_name(backend) if callable(backend) else repr(backend)} "
                         f"takes none (use backend='inductor', or configure your backend itself)")
    if mode is not None or options is not None:
        try:
            inductor_with(mode, options, dynamic)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: {e}") from None
    if not callable(backend) and backend not in NAMED:
        if not isinstance(backend, str):
            raise TypeError(f"{where}: backend must be a name or a callable (gm, example_inputs), "
                            f"not {type(backend).__name__}")
        raise ValueError(f"{where}: unknown backend {backend!r}; use a callable or one of {sorted(NAMED)}")
    if not isinstance(fullgraph, bool):
        raise TypeError(f"{where}: fullgraph must be True or False, not {fullgraph!r}")
    if dynamic not in (None, True, False) or not isinstance(dynamic, (bool, type(None))):
        raise TypeError(f"{where}: dynamic must be None, True or False, not {dynamic!r}")
    if not isinstance(check, (bool, int)):
        raise TypeError(f"{where}: check must be True, False or a number of calls, not {check!r}")
    if check < 0:
        raise ValueError(f"{where}: check is a number of calls to check, it cannot be {check}")
    for name, tol in (("check_rtol", check_rtol), ("check_atol", check_atol)):
        if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
            raise TypeError(f"{where}: {name} must be a number, not {tol!r}")
        if not tol >= 0:
            raise ValueError(f"{where}: {name} must be >= 0, got {tol}")


def check_callable(where, fn):
    if not callable(fn):
        raise TypeError(f"{where} expects a function or an nn.Module, got {type(fn).__name__} {fn!r:.60}")
