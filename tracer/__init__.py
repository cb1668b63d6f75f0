"""frametracer: a bytecode-level frame-evaluation tracer for PyTorch.

    import tracer

    @tracer.compile                     # or tracer.compile(fn_or_module, backend=..., fullgraph=...)
    def f(x, y):
        return (x.sin() + y).relu()

How to use it: README.md and docs/usage.md; the data flow and the layers: docs/design.md.
"""
from .api import CompiledFunction, CompiledModule, compile, reset
from .runtime.cache import RecompileLimitWarning
from .runtime.records import reset_stats, stats
from .capture import capture
from .check import CheckError
from .explain import explain
from .export import ExportAssumptionWarning, ExportError, export
from .runtime.frame_hook import disable
from .exc import BackendError, FullGraphError, GraphRunWarning, Unsupported
from .graph.shapes import mark_dynamic, mark_static
from .runtime import config, logs as _logs
from .runtime import cache as _cache
from .persist.store import CacheFileWarning, Store as _Store
from .warm_start import CacheError, load_cache, save_cache
# Every module of the tracer is imported now, none lazily while a frame is being traced: an
# import runs the user's import hooks (sys.meta_path) and changes sys.modules, state a trace
# must not touch (capture() tracing pytest's import hook saw the hook's cache change under
# the guards it had just built, when tracing first reached these two modules).
from .variables import builtins_impl as _builtins_impl  # noqa: E402,F401
from .variables import new_objects as _new_objects  # noqa: E402,F401

_cache.OPEN_STORE[0] = _Store  # the disk cache (config.cache_dir, TRACER_CACHE_DIR)
_logs.configure_from_env()  # TRACER_LOGS=graph,guards,breaks,bytecode,recompiles

__all__ = ["config", "compile", "capture", "disable", "explain", "reset", "stats", "reset_stats", "mark_dynamic",
           "mark_static", "CompiledFunction",
           "CompiledModule", "FullGraphError", "BackendError", "Unsupported", "RecompileLimitWarning", "CheckError", "export", "ExportError",
           "ExportAssumptionWarning", "save_cache", "load_cache", "CacheError", "CacheFileWarning", "GraphRunWarning"]
