"""Descriptions of live objects that another process can rebuild: the codec of the disk cache.

Why not pickle: a cache entry's constants and guards hold functions, classes, module dicts,
torch ops and dtypes, and a few of the tracer's own objects (the compiled graph, the rerun
machinery). Pickle would also write whatever else it is handed (a user's tensor, a closure's
state) and run arbitrary code to read it back. Here an object is written only as *where to find
it again* (a module and a qualified name, an attribute of something found so, an op's name)
or as a plain value, and every description is read back in the writing process and compared
(`is`, or exact equality for values) before it is used: what cannot be described exactly is
`Unportable`, with the reason, and the entry holding it is not saved (rule 1: a guard set that
dropped a guard is never written).

A description is a marshal-able value: None, bool, int, float, complex, str, bytes inline;
everything else a tuple whose first item is a tag (TAGS below).

Staleness: a description names an object, not its contents. The modules it names (`Writer.deps`)
are recorded with a digest of their source file (store.py), so an edited helper function, model
class or library file makes the entry unloadable; torch and the standard library are covered by
their versions, which are part of every key.
"""
import enum
import hashlib
import importlib
import marshal
import os
import sys
import types

import torch

from ..variables import numpy_vars

_SCALARS = (type(None), bool, int, float, complex, str, bytes)


class Unportable(Exception):
    """An object with no description another process can rebuild exactly."""


class Stale(Exception):
    """A description that no longer names what it named when written (reading only)."""


# type -> (tag, describe(writer, obj) -> payload); tag -> rebuild(reader, payload). Other
# modules of this package register the tracer's own objects (graphs, the rerun machinery).
_EXT_WRITERS = {}
_EXT_READERS = {}


def register(typ, tag, write, read):
    _EXT_WRITERS[typ] = (tag, write)
    _EXT_READERS[tag] = read


def _torch_names():
    """torch's singleton descriptors (dtypes, layouts, memory formats, qschemes) by identity."""
    out = {}
    for name in dir(torch):
        v = getattr(torch, name, None)
        if isinstance(v, (torch.dtype, torch.layout, torch.memory_format, torch.qscheme)):
            out.setdefault(id(v), name)
    return out


def _builtin_types():
    """Types of CPython's own objects that no module exports under a name (iterators, method,
    generator, traceback...): named by `types`' spelling, or by the exemplar that makes them."""
    def gen():
        yield
    out = {name: getattr(types, name) for name in dir(types) if isinstance(getattr(types, name), type)}
    exemplars = {"range_iterator": iter(range(0)), "list_iterator": iter([]), "tuple_iterator": iter(()),
                 "set_iterator": iter(set()), "str_iterator": iter(""), "bytes_iterator": iter(b""),
                 "dict_keyiterator": iter({}), "dict_valueiterator": iter({}.values()),
                 "dict_itemiterator": iter({}.items()), "dict_keys": {}.keys(), "dict_values": {}.values(),
                 "dict_items": {}.items(), "list_reverseiterator": reversed([]), "generator": gen(),
                 "longrange_iterator": iter(range(2 ** 64, 2 ** 64 + 1))}
    out.update({name: type(v) for name, v in exemplars.items()})
    return out


_BUILTIN_TYPES = _builtin_types()
_BUILTIN_NAMES = {id(t): name for name, t in _BUILTIN_TYPES.items()}
_TORCH_NAMES = {}
_MODULE_DICTS = {}  # id(module.__dict__) -> module name
_MODULES_SEEN = [0]  # len(sys.modules) when _MODULE_DICTS was made


def _module_of_dict(d):
    """The name of the module whose globals `d` is, or None (the map is rebuilt when modules
    were imported since it was made)."""
    if _MODULES_SEEN[0] != len(sys.modules):
        _MODULE_DICTS.clear()
        for name, m in list(sys.modules.items()):
            if isinstance(m, types.ModuleType):
                _MODULE_DICTS[id(m.__dict__)] = name
        _MODULES_SEEN[0] = len(sys.modules)
    name = _MODULE_DICTS.get(id(d))
    if name is not None and getattr(sys.modules.get(name), "__dict__", None) is d:
        return name
    return None


class Writer:
    """Describes objects; `deps` collects the names of the modules the descriptions read."""

    def __init__(self):
        self.deps = set()
        self._memo = {}
        self._busy = set()

    def write(self, obj):
        t = type(obj)
        if t in _SCALARS:
            return obj
        key = id(obj)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        desc = self._describe(obj, t)
        self._memo[key] = (obj, desc)
        return desc

    def _describe(self, obj, t):
        if t is tuple:
            return ("T", tuple(self.write(v) for v in obj))
        if t is list:
            return ("L", tuple(self.write(v) for v in obj))
        if t is dict:
            name = _module_of_dict(obj)  # a module's globals: by name (guard sources read them)
            if name is not None:
                self.deps.add(name)
                return ("G", name)
            return ("D", tuple((self.write(k), self.write(v)) for k, v in obj.items()))
        if t is frozenset:
            return ("F", tuple(self.write(v) for v in obj))
        if t is slice:
            return ("sl", self.write(obj.start), self.write(obj.stop), self.write(obj.step))
        if obj is Ellipsis:
            return ("E",)
        if obj is NotImplemented:
            return ("NI",)
        ext = _EXT_WRITERS.get(t)
        if ext is not None:
            tag, write = ext
            return ("X", tag, write(self, obj))
        if t is types.CodeType:
            return self._code(obj)
        if t is torch.device:
            return ("dev", str(obj))
        if t is torch.Size:
            return ("Sz", tuple(int(v) for v in obj))
        if t is types.MethodType:  # a method bound to an object described in its own right
            desc = ("MB", self.write(obj.__self__), obj.__func__.__name__)
            back = Reader().read(desc)
            if type(back) is not types.MethodType or back.__func__ is not obj.__func__:
                raise Unportable(f"{_short(obj)} is not found again through its object")
            return desc
        if _is_numpy_scalar(obj):
            desc = ("npv", self.write(t), obj.item())
            back = Reader().read(desc)
            if type(back) is not t or not (back == obj or (back != back and obj != obj)):
                raise Unportable(f"{_short(obj)} does not read back exactly")
            return desc
        if numpy_vars.is_numpy_dtype(obj):  # np.dtype("float32"): by its descriptor string
            desc = ("npd", obj.str)
            if Reader().read(desc) != obj:
                raise Unportable(f"{_short(obj)} does not read back exactly")
            return desc
        if t is types.ModuleType:
            return self._checked(obj, ("M", obj.__name__))
        if id(obj) in self._busy:  # (an object reached again while describing itself)
            raise Unportable(f"{_short(obj)} is only found through itself")
        self._busy.add(id(obj))
        try:
            last = None
            for desc in self._candidates(obj, t):
                try:
                    return self._checked(obj, desc)
                except Unportable as e:
                    last = str(e)  # (the message: an exception kept in this frame would be a
                    # cycle through its traceback, holding the call's values until a collection)
        finally:
            self._busy.discard(id(obj))
        if last is not None:
            raise Unportable(last)
        raise Unportable(f"{t.__module__}.{t.__qualname__} object {_short(obj)} has no importable name")

    def _candidates(self, obj, t):
        """Where `obj` may be found again, most likely first (each is verified by _checked)."""
        if isinstance(obj, (torch.dtype, torch.layout, torch.memory_format, torch.qscheme)):
            if not _TORCH_NAMES:
                _TORCH_NAMES.update(_torch_names())
            name = _TORCH_NAMES.get(id(obj))
            if name is not None:
                yield ("A", ("M", "torch"), name)
            return
        if isinstance(obj, torch._ops.OpOverload):
            yield ("op", obj._schema.name, obj._overloadname)
            return
        if isinstance(obj, torch._ops.OpOverloadPacket):
            yield ("opp", obj._qualified_op_name)
            return
        if isinstance(obj, enum.Enum):
            yield ("A", self.write(t), obj.name)
            return
        if t is type and id(obj) in _BUILTIN_NAMES:
            yield ("BT", _BUILTIN_NAMES[id(obj)])
            return
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        name = getattr(obj, "__name__", None)
        if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
            yield ("R", module, qualname)
        if isinstance(module, str) and isinstance(name, str) and name != qualname and "<" not in name:
            yield ("R", module, name)  # a builtin method of torch's _VariableFunctions: torch.<name>
        if isinstance(module, str) and isinstance(qualname, str) and "." in module and "<" not in qualname:
            parts = module.split(".")
            for i in range(len(parts) - 1, 0, -1):  # re-exported by a parent package under its
                yield ("R", ".".join(parts[:i]), qualname)  # name (torch.manual_seed, a wrapper)
        objclass = getattr(obj, "__objclass__", None)
        if isinstance(objclass, type) and isinstance(name, str):
            yield ("C", self.write(objclass), name)  # a slot wrapper, a method descriptor
        owner = getattr(obj, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType) and isinstance(name, str):
            try:
                yield ("B", self.write(owner), name)  # a bound builtin: dict.__new__
            except Unportable:
                pass
        entry = self._class_entry(obj)
        if entry is not None:
            yield entry

    def _class_entry(self, obj):
        """A raw class-dict entry (property, staticmethod, classmethod...) by its owner's name."""
        for attr in ("fget", "__func__", "__wrapped__"):
            inner = getattr(obj, attr, None)
            qn = getattr(inner, "__qualname__", None)
            module = getattr(inner, "__module__", None)
            if isinstance(qn, str) and isinstance(module, str) and "." in qn and "<" not in qn:
                owner, name = qn.rsplit(".", 1)
                return ("C", ("R", module, owner), name)
        return None

    def _code(self, code):
        consts = tuple(self.write(c) for c in code.co_consts)
        bare = code.replace(co_consts=(None,) * len(code.co_consts))
        return ("code", marshal.dumps(bare), consts)

    def _checked(self, obj, desc):
        """`desc`, read back here: it must give `obj` itself."""
        try:
            back = Reader().read(desc)
        except Exception as e:  # noqa: BLE001 - any failure to find it again is the answer
            raise Unportable(f"{_short(obj)} cannot be found again by its name ({type(e).__name__}: {e})") from None
        if back is not obj and not (type(obj) is torch.device and back == obj) and not _same_bound(obj, back):
            raise Unportable(f"{_short(obj)} is not what its name {_spell(desc)} finds")
        self._note_deps(desc)
        if (desc[0] in _NAMED and callable(obj) and not isinstance(obj, type)) or type(obj) in _DESCRIPTORS:
            return ("FP", desc, fingerprint(obj))
        return desc

    def _note_deps(self, desc):
        tag = desc[0]
        if tag in ("M", "G", "R"):
            self.deps.add(desc[1])
        for part in desc[1:]:
            if type(part) is tuple and part and type(part[0]) is str:
                self._note_deps(part)


class Reader:
    """Rebuilds described objects. Raises Stale when a name no longer finds anything."""

    def __init__(self):
        self._memo = {}

    def read(self, desc):
        if type(desc) is not tuple:
            return desc
        key = id(desc)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is desc:
            return hit[1]
        obj = self._rebuild(desc)
        self._memo[key] = (desc, obj)
        return obj

    def _rebuild(self, desc):
        tag = desc[0]
        r = self.read
        if tag == "T":
            return tuple(r(v) for v in desc[1])
        if tag == "L":
            return [r(v) for v in desc[1]]
        if tag == "D":
            return {r(k): r(v) for k, v in desc[1]}
        if tag == "F":
            return frozenset(r(v) for v in desc[1])
        if tag == "sl":
            return slice(r(desc[1]), r(desc[2]), r(desc[3]))
        if tag == "E":
            return Ellipsis
        if tag == "NI":
            return NotImplemented
        if tag == "X":
            return _EXT_READERS[desc[1]](self, desc[2])
        if tag == "code":
            bare = marshal.loads(desc[1])
            return bare.replace(co_consts=tuple(r(c) for c in desc[2]))
        if tag == "dev":
            return torch.device(desc[1])
        if tag == "BT":
            try:
                return _BUILTIN_TYPES[desc[1]]
            except KeyError:
                raise Stale(f"no builtin type {desc[1]!r} here") from None
        if tag == "FP":
            obj = r(desc[1])
            if fingerprint(obj) != desc[2]:
                raise Stale(f"{_spell(desc[1])} is not the code the entry was traced with")
            return obj
        if tag == "MB":
            return _getattr(r(desc[1]), desc[2])
        if tag == "npv":
            return r(desc[1])(desc[2])
        if tag == "npd":
            return _import("numpy").dtype(desc[1])
        if tag == "Sz":
            return torch.Size(desc[1])
        if tag == "M":
            return _import(desc[1])
        if tag == "G":
            return vars(_import(desc[1]))
        if tag == "R":
            obj = _import(desc[1])
            for part in desc[2].split("."):
                obj = _getattr(obj, part)
            return obj
        if tag == "A":
            return _getattr(r(desc[1]), desc[2])
        if tag == "C":
            owner = r(desc[1])
            try:
                return vars(owner)[desc[2]]
            except (KeyError, TypeError):
                raise Stale(f"{_spell(desc)}: no such class entry") from None
        if tag == "B":
            return _getattr(r(desc[1]), desc[2])
        if tag == "op":
            ns, name = desc[1].split("::", 1)
            packet = _getattr(getattr(torch.ops, ns), name)
            return _getattr(packet, desc[2] or "default")
        if tag == "opp":
            ns, name = desc[1].split("::", 1)
            return _getattr(getattr(torch.ops, ns), name)
        raise Stale(f"unknown description tag {tag!r}")


def _same_bound(obj, back):
    """A builtin bound to a class (`dict.fromkeys`): each read makes a new bound object, equal
    to the first (the same class, the same C function)."""
    return type(obj) is types.BuiltinMethodType and type(back) is types.BuiltinMethodType and \
        isinstance(obj.__self__, type) and obj.__self__ is back.__self__ and obj == back


def _is_numpy_scalar(obj):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.generic) and type(obj).__module__ == "numpy" and \
        isinstance(obj.item(), (bool, int, float, complex))


def _import(name):
    try:
        return sys.modules.get(name) or importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - a module that no longer imports is stale
        raise Stale(f"module {name} does not import ({type(e).__name__}: {e})") from None


def _getattr(obj, name):
    try:
        return getattr(obj, name)
    except Exception as e:  # noqa: BLE001
        raise Stale(f"{_short(obj)} has no attribute {name!r} ({type(e).__name__})") from None


def _short(obj):
    try:
        r = repr(obj)
    except Exception:  # noqa: BLE001 - a user repr that raises
        r = f"<{type(obj).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."


def _spell(desc):
    if type(desc) is not tuple:
        return repr(desc)
    tag = desc[0]
    if tag == "R":
        return f"{desc[1]}.{desc[2]}"
    if tag in ("M", "G"):
        return desc[1]
    if tag in ("A", "B"):
        return f"{_spell(desc[1])}.{desc[2]}"
    if tag == "C":
        return f"{_spell(desc[1])}.__dict__[{desc[2]!r}]"
    return tag


_NAMED = frozenset({"R", "A", "B", "C"})
_DESCRIPTORS = (staticmethod, classmethod, property)
_FP_DEPTH = 4


def fingerprint(obj, depth=0):
    """What a name must still find for an entry to apply: a Python function's code (by its
    key), defaults and closure contents; a descriptor's functions; another callable's type and
    name. A name describes where an object is, not what it is: a function monkeypatched, or
    defined under an `if` on an environment variable, is found under the same name in another
    process with other code (and its module file unchanged)."""
    t = type(obj)
    if t is types.FunctionType:
        if depth >= _FP_DEPTH:
            return ("fn", code_key(obj.__code__))
        return ("fn", code_key(obj.__code__), _value_print(obj.__defaults__, depth),
                _value_print(obj.__kwdefaults__, depth),
                tuple(_value_print(_cell(c), depth) for c in obj.__closure__ or ()))
    if t is staticmethod or t is classmethod:
        return (t.__name__, fingerprint(obj.__func__, depth + 1))
    if t is property:
        return ("property", *(fingerprint(f, depth + 1) for f in (obj.fget, obj.fset, obj.fdel)))
    if t is types.MethodType:
        return ("method", fingerprint(obj.__func__, depth + 1))
    if obj is None:
        return None
    return ("obj", t.__module__, t.__qualname__, str(getattr(obj, "__module__", "")),
            str(getattr(obj, "__qualname__", getattr(obj, "__name__", ""))))


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:
        return _EMPTY_CELL


_EMPTY_CELL = object()


def _value_print(v, depth):
    """A default's or closure cell's part of a fingerprint: plain values by value, functions by
    their own fingerprint, anything else by its type (its identity is this process's)."""
    t = type(v)
    if v is None or t in (bool, int, float, complex, str, bytes):
        return (t.__name__, repr(v))
    if t is tuple or t is list:
        return (t.__name__, tuple(_value_print(x, depth) for x in v))
    if t is dict:
        return ("dict", tuple((repr(k), _value_print(x, depth)) for k, x in v.items()))
    if v is _EMPTY_CELL:
        return ("empty",)
    if t in (types.FunctionType, staticmethod, classmethod, property, types.MethodType):
        return fingerprint(v, depth + 1)
    if t is type:
        return ("type", v.__module__, v.__qualname__)
    return ("obj", t.__module__, t.__qualname__)


def _canon(value):
    """A process-independent spelling of a code constant (frozenset order depends on the
    string hash seed; code objects are spelled by their own key)."""
    t = type(value)
    if t is types.CodeType:
        return ("code", code_key(value))
    if t is tuple:
        return tuple(_canon(v) for v in value)
    if t is frozenset:
        return ("frozenset", tuple(sorted(repr(_canon(v)) for v in value)))
    if t in (float, complex):
        return (t.__name__, repr(value))
    return (t.__name__, repr(value))


_CODE_KEYS = {}  # id(code) -> (code, key): code objects are immutable
_FILENAMES = {}  # co_filename -> its portable spelling


def portable_filename(path):
    """A source file as its module's name spells it (`transformers/models/gpt2/modeling_gpt2.py`)
    in every virtual environment, on every machine, however the process was started (an editable
    install's import hook, PYTHONPATH, the current directory), so a cache shipped with a model
    (tracer.save_cache) finds its entries; a file of no imported module (a script) relative to the
    sys.path entry that holds it; anything else keeps its absolute path."""
    hit = _FILENAMES.get(path)
    if hit is not None:
        return hit
    out = _by_module(path)
    if out is None and os.path.isabs(path):
        best = ""
        for entry in sys.path:
            root = os.path.join(os.path.abspath(entry or os.curdir), "")
            if path.startswith(root) and len(root) > len(best):
                best = root
        out = path[len(best):].replace(os.sep, "/") if best else None
    out = out or path
    if len(_FILENAMES) > 100_000:
        _FILENAMES.clear()
    _FILENAMES[path] = out
    return out


def _by_module(path):
    """The module-name spelling of `path` if an imported module (not __main__) has it as its
    file: the longest dotted name made of the path's last parts that sys.modules holds with
    this very file (`.../tracer/graph/backends.py` -> tracer.graph.backends)."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].replace(os.sep, "/").split("/")
    package = parts[-1] == "__init__"
    if package:
        parts = parts[:-1]
    for i in range(len(parts)):
        name = ".".join(parts[i:])
        if name and name != "__main__":
            m = sys.modules.get(name)
            if m is not None and getattr(m, "__file__", None) == path:
                return name.replace(".", "/") + ("/__init__.py" if package else ".py")
    return None


def code_key(code):
    """What identifies a code object across processes: its file, qualified name, first line,
    bytecode, line table, exception table, names and constants (nested code by its own key)."""
    hit = _CODE_KEYS.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    parts = (portable_filename(code.co_filename), code.co_qualname, code.co_firstlineno, code.co_code,
             code.co_linetable,
             code.co_exceptiontable, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
             code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
             code.co_stacksize, _canon(code.co_consts))
    key = hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()
    if len(_CODE_KEYS) > 100_000:
        _CODE_KEYS.clear()
    _CODE_KEYS[id(code)] = (code, key)
    return key
