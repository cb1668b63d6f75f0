"""`tracer.save_cache(path)` / `tracer.load_cache(path)`: ship traced entries beside a model file.

The disk cache (tracer/persist/, `TRACER_CACHE_DIR` or `tracer.config.cache_dir`) writes each
entry when it is traced. `save_cache` packs the entries this Python, torch and frametracer made
into one zip file; `load_cache` adds a packed file's entries to the cache directory (a fresh
temporary one when none is set), where a code object's first call finds them. Entries made by
another Python, torch or frametracer are left out: they would never be read.
"""
import os
import tempfile
import zipfile

from .persist import store
from .runtime import config


class CacheError(ValueError):
    """save_cache/load_cache was asked for something it cannot do (the message says what)."""


def save_cache(path):
    """Write this environment's entries of the cache directory to the zip file `path`; returns
    how many. The cache directory must have been set before the entries were traced."""
    if not config.cache_dir:
        raise CacheError("tracer.save_cache: no cache directory is set, so no entry was written; set "
                         "TRACER_CACHE_DIR (or tracer.config.cache_dir) before compiling")
    if not os.path.isdir(config.cache_dir):
        raise CacheError(f"tracer.save_cache: the cache directory {config.cache_dir} holds no entries yet")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CacheError(f"tracer.save_cache: {parent} is not a directory")
    return store.pack(config.cache_dir, path)


def load_cache(path):
    """Add the entries of a file written by `save_cache` to the cache directory (a new temporary
    directory when none is set); returns how many this environment can use."""
    if not os.path.isfile(path):
        raise CacheError(f"tracer.load_cache: {path}: " + ("a directory, not a file written by tracer.save_cache"
                                                            if os.path.isdir(path) else "no such file"))
    if not config.cache_dir:
        config.cache_dir = tempfile.mkdtemp(prefix="tracer-cache-")
    try:
        return store.unpack(path, config.cache_dir)
    except zipfile.BadZipFile:
        raise CacheError(f"tracer.load_cache: {path} is not a file written by tracer.save_cache") from None
    except ValueError as e:
        raise CacheError(f"tracer.load_cache: {path}: {e}") from None
