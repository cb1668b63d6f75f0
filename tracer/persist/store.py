"""The cache directory: where entries live between processes (TRACER_CACHE_DIR).

Layout: `<dir>/<environment>/<code key[:2]>/<code key>/<record digest>.entry`.

- `environment` is a digest of what every entry depends on besides its own code: the Python
  version, torch's version, frametracer's version and the digest of its own files, and the
  record format. Another Python, torch or tracer never reads this directory's entries. What a
  process did to torch's namespaces and classes (a patch) is checked per entry, when it is read
  (library_io.py): it may change at any time, after the directory was opened too.
- `code key` identifies a code object across processes (portable.code_key: file, qualified
  name, first line, bytecode, constants, names): an edited function is another key.
- One file per entry, named by the digest of its contents: two processes that make the same
  entry write the same name; a file is written to a temporary name in the same directory and
  renamed into place, so a reader sees a whole file or none.
- A file starts with MAGIC and the SHA-256 of the rest: a truncated or corrupt file is
  ignored, with one warning per process, never a crash.

`Store.load` runs on a code object's first cache miss in the process; `Store.save` after each
trace. Both are called by runtime/cache.py through `cache.STORE` (this package sits above the
runtime layer, which only holds the hook).
"""
import hashlib
import json
import marshal
import os
import pathlib
import sys
import tempfile
import threading
import warnings
import zipfile

import torch

from ..runtime import gc_pause, records
from . import entry_io
from .guards_io import FrameValues
from .portable import Stale, Unportable, Writer, code_key

MAGIC = b"FTC\x01"
INDUCTOR = "inductor"  # the subdirectory given to TORCHINDUCTOR_CACHE_DIR when it is unset
MAX_ENTRIES_PER_CODE = 64  # newest first: an entry that never matches again ages out


class CacheFileWarning(RuntimeWarning):
    """A cache file could not be read (truncated, corrupt): it is ignored."""


def _package_sources():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found = []
    for pkg in ("tracer", "guards", "bytecode_utils"):
        for directory, dirs, files in os.walk(os.path.join(root, pkg)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            # sources only (the extensions are built from the .c/.cpp files hashed here)
            found += [os.path.join(directory, f) for f in files if f.endswith((".py", ".c", ".h", ".cpp"))]
    return root, sorted(found)


def _package_digest():
    """frametracer's own code: an edit in the tracer is a new environment. The digest of the
    files' contents is remembered (in the temporary directory) under their sizes and times, so
    a process reads ~150 stat results instead of every file."""
    root, files = _package_sources()
    stats = hashlib.sha256()
    for path in files:
        st = os.stat(path)
        stats.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    memo = os.path.join(tempfile.gettempdir(), f"frametracer-digest-{stats.hexdigest()[:24]}")
    try:
        with open(memo) as fh:
            digest = fh.read().strip()
        if len(digest) == 16:
            return digest
    except OSError:
        pass
    h = hashlib.sha256()
    for path in files:
        h.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as fh:
            h.update(fh.read())
    digest = h.hexdigest()[:16]
    try:
        _write_atomic(pathlib.Path(tempfile.gettempdir()), os.path.basename(memo), digest.encode())
    except OSError:
        pass
    return digest


_ENV = []


def environment():
    """The directory name every entry of this process goes under (see module docstring)."""
    if not _ENV:
        mine = _package_digest()  # (its version would add nothing: a release is its files)
        # -O and -OO compile other code (`if __debug__:` blocks, asserts, docstrings)
        parts = (sys.version, sys.implementation.cache_tag, sys.flags.optimize, torch.__version__, mine,
                 entry_io.FORMAT)
        _ENV.append(hashlib.sha256(repr(parts).encode()).hexdigest()[:20])
        _ENV.append({"python": sys.version.split()[0], "torch": torch.__version__, "frametracer": mine,
                     "format": entry_io.FORMAT})
    return _ENV[0]


ENVIRONMENT_FILE = "environment.json"  # what an environment directory was made by (listings)


def _builtins_of(G):
    b = G.get("__builtins__", __builtins__)
    return b if isinstance(b, dict) else vars(b)


class Store:
    def __init__(self, path, read_only=False):
        self.path = os.fspath(path)
        self.read_only = read_only
        self.root = pathlib.Path(self.path) / environment()
        self._warned = set()
        self._lock = threading.Lock()
        self.unusable = None if read_only else _unusable_dir(self.path)
        if self.unusable is not None:  # a user's mistake: said once, and the process traces as without
            self.read_only = True
            self._warn(f"tracer: the cache directory {self.path} cannot be used ({self.unusable}); "
                       f"running without the disk cache")
        elif not read_only:  # inductor's own caches (FX graphs, AOTAutograd, kernels) beside ours,
            # so a loaded entry's inductor compile is warm too, unless the user chose a place
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(os.path.abspath(self.path), INDUCTOR))

    def _dir(self, key):
        return self.root / key[:2] / key

    # ---- writing --------------------------------------------------------------------------------
    def save(self, code, entry, L, G, C):
        """Write `entry` (just traced for `code`); an entry that cannot be written exactly is
        recorded in tracer.stats() with the reason, and not written."""
        if self.read_only:
            return False
        try:
            key = code_key(code)
            record = entry_io.write_entry(code, entry, FrameValues(L, G, C, _builtins_of(G)))
            payload = marshal.dumps(record)
        except Unportable as e:
            records.disk_unsaved(code, str(e))
            return False
        except Exception as e:  # noqa: BLE001 - a bug here must not fail the user's call
            records.internal_error(records.name_of(code), f"cache entry not written: {type(e).__name__}: {e}")
            return False
        data = MAGIC + hashlib.sha256(payload).digest() + payload
        directory = self._dir(key)
        try:
            if not self.root.is_dir():
                self.root.mkdir(parents=True, exist_ok=True)
                _write_atomic(self.root, ENVIRONMENT_FILE, json.dumps(_ENV[1]).encode())
            directory.mkdir(parents=True, exist_ok=True)
            _write_atomic(directory, _record_name(record) + ".entry", data)
        except OSError as e:
            self._warn(f"tracer: cannot write to the cache directory {self.path}: {e}")
            return False
        except Exception as e:  # noqa: BLE001 - a bug here must not fail the user's call
            records.internal_error(records.name_of(code), f"cache entry not written: {type(e).__name__}: {e}")
            return False
        records.disk_saved(code)
        return True

    # ---- reading --------------------------------------------------------------------------------
    def read_records(self, code):
        """The readable records of `code`'s entries, oldest first (corrupt files are warned
        about once and skipped)."""
        directory = self._dir(code_key(code))
        try:
            files = [p for p in directory.iterdir() if p.suffix == ".entry"]
        except OSError:
            return []
        files.sort(key=_mtime)
        out = []
        for path in files[-MAX_ENTRIES_PER_CODE:]:
            record = self.read_file(path)
            if record is not None:
                out.append(record)
        return out

    def read_file(self, path):
        try:
            data = path.read_bytes()
        except OSError:
            return None  # (removed by another process meanwhile)
        payload = data[len(MAGIC) + 32:]
        if data[:len(MAGIC)] != MAGIC or hashlib.sha256(payload).digest() != data[len(MAGIC):len(MAGIC) + 32]:
            self._warn(f"tracer: ignoring the corrupt or truncated cache file {path}")
            return None
        try:
            record = marshal.loads(payload)
        except (ValueError, EOFError, TypeError):
            self._warn(f"tracer: ignoring the unreadable cache file {path}")
            return None
        if not isinstance(record, dict) or record.get("format") != entry_io.FORMAT:
            return None
        return record

    def load(self, code, L, G, C, backend_fn, fullgraph):
        """The entries saved for `code` that apply to this backend and this call's values."""
        with gc_pause.paused():
            return self._load(code, L, G, C, backend_fn, fullgraph)

    def _load(self, code, L, G, C, backend_fn, fullgraph):
        if self.unusable is not None:
            return []
        wanted = None
        out = []
        for record in self.read_records(code):
            if record["fullgraph"] != bool(fullgraph):
                continue
            if wanted is None:
                try:
                    wanted = Writer().write(backend_fn)
                except Unportable:
                    return []
            if record["backend"] != wanted:
                continue
            builtins = _builtins_of(G)
            try:
                out.append(entry_io.read_entry(code, record, FrameValues(L, G, C, builtins), builtins, backend_fn))
            except Stale as e:
                records.disk_stale(code, str(e))
            except Exception as e:  # noqa: BLE001 - a record we wrote but cannot read: skip it
                records.internal_error(records.name_of(code), f"cache entry unreadable: {type(e).__name__}: {e}")
        if out:
            records.disk_loaded(code, len(out))
        return out

    def _warn(self, message):
        with self._lock:
            if message in self._warned or len(self._warned) > 20:
                return
            self._warned.add(message)
        warnings.warn(message, CacheFileWarning, stacklevel=_user_level())


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tracer/


def _user_level():
    """warnings.warn's stacklevel for the user's line: the first frame outside the tracer
    (a warning pointed at the tracer's own source says nothing to the user)."""
    f, level = sys._getframe(2), 2
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f, level = f.f_back, level + 1
    return level


def _unusable_dir(path):
    """Why `path` cannot hold a cache (a file, a directory that cannot be made or written), or
    None. Asked once per directory: torch's own caches go under it too (TORCHINDUCTOR_CACHE_DIR),
    and torch raised at its import on a path that is a file, for torch.compile as well."""
    if os.path.exists(path) and not os.path.isdir(path):
        return "it is not a directory"
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        return e.strerror or type(e).__name__
    if not os.access(path, os.W_OK | os.X_OK):
        return "not writable"
    return None


def _record_name(record):
    """An entry file's name: a digest of what the record says, not of marshal's bytes (marshal
    flags objects by their reference counts, which differ between two processes making the
    same record, and so does the marshal of a code object inside it: it is spelled by its key)."""
    return hashlib.sha256(repr(_canonical(record)).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _canonical(value):
    t = type(value)
    if t is dict:
        return tuple((k, _canonical(v)) for k, v in sorted(value.items()))
    if t is tuple:
        if len(value) == 3 and value[0] == "code" and type(value[1]) is bytes:
            return ("code", code_key(marshal.loads(value[1])), _canonical(value[2]))
        return tuple(_canonical(v) for v in value)
    return value


def _write_atomic(directory, name, data):
    """`directory/name` holds `data` whole or not at all, for every reader at every moment."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        _unlink(tmp)
        raise


# ---- shipping a cache: tracer.save_cache / tracer.load_cache ------------------------------------

def pack(cache_dir, archive):
    """Write the entries of `cache_dir` made by this Python/torch/frametracer into the zip file
    `archive`; returns how many."""
    root = pathlib.Path(cache_dir) / environment()
    n = 0
    tmp = pathlib.Path(str(archive) + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
        for path in sorted([*root.rglob("*"), *(root.parent / INDUCTOR).rglob("*")]):
            if path.is_file() and not path.name.startswith(".tmp-"):
                z.write(path, path.relative_to(root.parent).as_posix())
                n += path.suffix == ".entry"
    os.replace(tmp, archive)
    return n


def unpack(archive, cache_dir):
    """Add the entries of a `pack`ed archive to `cache_dir` (only this environment's: another
    Python's or torch's entries would never be read); returns how many."""
    env = environment()
    n = 0
    others = {}  # another environment's directory -> what made it (its environment.json)
    ours = False  # (a cache of this environment holding no entry is still one)
    with zipfile.ZipFile(archive) as z:
        for info in z.infolist():
            parts = pathlib.PurePosixPath(info.filename).parts
            ours = ours or parts[:1] in ((env,), (INDUCTOR,))
            if len(parts) == 2 and parts[0] != env and parts[1] == ENVIRONMENT_FILE:
                try:
                    others[parts[0]] = json.loads(z.read(info))
                except ValueError:
                    others[parts[0]] = {}
            if len(parts) < 2 or parts[0] not in (env, INDUCTOR) or ".." in parts or info.is_dir():
                continue
            target = pathlib.Path(cache_dir).joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(target.parent, target.name, z.read(info))
            n += target.suffix == ".entry"
    if not n and not others and not ours:
        raise ValueError("it holds no cache entries: not a file written by tracer.save_cache")
    if not n and others:
        made = "; ".join(_made_by(info) for info in others.values())
        warnings.warn(f"tracer.load_cache: {archive} holds only entries of another environment ({made}); "
                      f"this process is {_made_by(_ENV[1])}: none can be used", CacheFileWarning,
                      stacklevel=_user_level())
    return n


def _made_by(info):
    keys = ("python", "torch", "frametracer")
    return ", ".join(f"{k} {info[k]}" for k in keys if k in info) or "unknown"


# ---- what a cache holds: tracer-dump --cache ----------------------------------------------------

def listing(cache_dir):
    """[(environment info, [(code key, [record summary...])...])...] of every environment in
    `cache_dir` (records of other formats are counted, not read)."""
    out = []
    for env_dir in sorted(p for p in pathlib.Path(cache_dir).iterdir() if p.is_dir() and p.name != INDUCTOR):
        try:
            info = json.loads((env_dir / ENVIRONMENT_FILE).read_text())
        except (OSError, ValueError):
            info = {}
        info["id"] = env_dir.name
        info["current"] = env_dir.name == environment()
        reader = Store(cache_dir, read_only=True)
        codes = []
        for code_dir in sorted(env_dir.glob("*/*")):
            summaries = []
            for path in sorted(code_dir.glob("*.entry"), key=_mtime):
                record = reader.read_file(path)
                size = _size(path)
                if record is None:
                    summaries.append({"file": path.name, "bytes": size, "unreadable": True})
                    continue
                summaries.append({"file": path.name, "bytes": size, "name": record["name"],
                                  "where": f"{record.get('file')}:{record.get('line')}",
                                  "guards": len(record["guards"]), "captured": record["code"] is not None,
                                  "ops": record["ops"], "breaks": [b[0] for b in record["breaks"]],
                                  "reason": record["reason"], "deps": sorted(record["deps"])})
            codes.append((code_dir.name, summaries))
        out.append((info, codes))
    return out


def _size(path):
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mtime(path):
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass
