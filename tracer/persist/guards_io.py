"""An entry's guards on disk: each guard as its kind and its facts, its Sources as their path.

Most guards and every Source are frozen dataclasses of plain facts (a source path, a type, a
constant, a length, dict keys): they are written field by field through the codec
(portable.py) and rebuilt without running their constructors. Four kinds hold what only
exists in one process and are written as what they mean instead:

- IdMatch pins an object. An object with an importable name is written by that name. A plain
  function without one (a decorator's wrapper, a closure kept in a registry) is written as
  its value: code key, globals module, defaults and closure contents, each compared when it is
  read; the live object is then found again through the guard's own Source on the call that
  loads the entry, and pinned as the original was.
- TensorMatch holds a TensorGuards made from an example tensor: rebuilt from an empty tensor of
  the saved metadata, whose dispatch keys must equal the saved ones.
- Predicate holds a function: only the kinds its constructors make are written (the
  constructor is called again with the saved argument); `same_function` finds its function
  through its Source like an IdMatch.
- ShapeMatch keeps a parsed tree: rebuilt from its expression and tokens.

Anything else (a Predicate without a kind, an identity the codec cannot describe) raises
Unportable, and the entry is not saved: a guard set is never written with a guard left out.
"""
import dataclasses
import types

import torch

from guards import GuardSet, compile_guards
from guards.codegen import ExprContext, recording
from guards.guard import _MISSING, IdMatch, Predicate, exact_equal
from guards.shape import ShapeMatch
from guards.sources import DERIVED_ATTRS, Source
from guards.tensor import TensorMatch

from .portable import Reader, Stale, Unportable, Writer, code_key

_PREDICATE_KINDS = ("key_absent", "attrs", "falsy", "lacks", "class_entry", "lacks_generic")
_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)
_FN_DEPTH = 4  # closures of closures of ... a function written by value


# ---- writing -----------------------------------------------------------------------------------

def write_guards(w: Writer, guard_set: GuardSet, frame):
    """`frame` (FrameValues) reads the values the entry was traced from: the owner of a class
    entry and the function of a same-function guard are found through their sources."""
    return tuple(_write_guard(w, g, frame) for g in guard_set.guards)


def write_groups(w: Writer, guard_set: GuardSet):
    """The set's group roots (guards/builder.py): read back with its guards, they make the
    same text, whose compiled code the record holds. None when one cannot be written (the
    reader then checks the set as one function: the same answers, compiled again)."""
    try:
        return tuple(_write_source(w, s) for s in guard_set.groups)
    except Unportable:
        return None


def _write_guard(w, g, frame):
    if isinstance(g, IdMatch):
        kind, ref = g._ref
        obj = ref() if kind == "weak" else ref
        if kind == "weak" and obj is None:
            raise Unportable(f"guard `{g.describe()}`: its object is gone")
        desc = _write_object(w, obj, g.describe())
        if desc[0] != "name":
            _getter_code(w, frame, g.source)
        return ("id", _write_source(w, g.source), desc)
    if isinstance(g, TensorMatch):
        if g.type not in _TENSOR_TYPES:
            raise Unportable(f"guard `{g.describe()}`: a tensor of type {g.type.__qualname__}")
        return ("tensor", _write_source(w, g.source), w.write(g.type), w.write(g.dtype), str(g.device),
                g.shape, g.stride, g.requires_grad, g.dispatch_keys, g.aliased, g.names)
    if isinstance(g, Predicate):
        src = _write_source(w, g.source)
        if g.kind == "same_function":
            code, _globals_id = g.arg
            fn = _value(w, frame, g.source)
            if type(fn) is not types.FunctionType or fn.__code__ is not code:
                raise Unportable(f"guard `{g.describe()}`: its function is not found through its source")
            return ("same_function", src, code_key(code), _globals_module(w, fn, g), g.description)
        if g.kind == "class_entry" and g.arg[1] is _MISSING:
            return ("pred", src, "class_lacks", ("T", (g.arg[0],)), g.description)
        if g.kind == "class_entry":
            return ("pred", src, g.kind, ("T", (g.arg[0], _write_class_entry(w, g, frame))), g.description)
        if g.kind is None and g.maker is not None:
            return ("made", src, w.write(g.maker), w.write(g.arg), g.description)
        if g.kind not in _PREDICATE_KINDS:
            raise Unportable(f"guard `{g.describe()}`: a check written as a Python function")
        return ("pred", src, g.kind, w.write(g.arg), g.description)
    if isinstance(g, ShapeMatch):
        return ("shape", g.expr, tuple(_write_source(w, s) for s in g.tokens))
    return ("g", w.write(type(g)), _write_fields(w, g))


def _write_fields(w, obj):
    """The instance's own fields: a dataclass's, or the attributes a plain Source class set in
    its __init__ (IterRestSource); never the cached hash."""
    if dataclasses.is_dataclass(obj):
        items = [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    else:
        items = [(k, v) for k, v in vars(obj).items() if k not in DERIVED_ATTRS]
    return tuple((k, _write_source(w, v) if isinstance(v, Source) else _write_value(w, v)) for k, v in items)


def _write_value(w, v):
    if type(v) is tuple and any(isinstance(x, Source) for x in v):
        return ("sources", tuple(_write_source(w, s) for s in v))
    return w.write(v)


def _write_source(w, s):
    """One description object per distinct source: marshal writes it once and the reader
    rebuilds one Source for all its guards (equal sources are then the same object, which
    the guard set's deduplication and hoisting compare cheaply)."""
    if not isinstance(s, Source):
        raise Unportable(f"{s!r} is not a Source")
    memo = w.__dict__.setdefault("sources", {})
    desc = memo.get(s)
    if desc is None:
        fields = _write_fields(w, s)
        desc = memo[s] = ("src", w.write(type(s)), fields)
    return desc


def _write_object(w, obj, what, depth=0):
    """An identity: by name; a value (a class's __mro__ tuple) or a plain function without a
    name by what it holds, the object itself found again through the guard's source."""
    try:
        desc = w.write(obj)
        if type(desc) is not tuple or desc[0] in _VALUE_TAGS:
            return ("live", desc)
        return ("name", desc)
    except Unportable as e:
        if type(obj) is not types.FunctionType or depth >= _FN_DEPTH:
            raise Unportable(f"guard `{what}`: {e}") from None
    cells = tuple(_write_cell(w, c, what, depth + 1) for c in obj.__closure__ or ())
    return ("fn", code_key(obj.__code__), _globals_module(w, obj, what),
            _write_object(w, obj.__defaults__, what, depth + 1),
            _write_object(w, obj.__kwdefaults__, what, depth + 1), cells)


def _write_cell(w, cell, what, depth):
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell (a name assigned later in the enclosing function)
        return ("empty",)
    return _write_object(w, value, what, depth)


def _getter_code(w, frame, source):
    """A reader finds this source's object again by compiling a getter (FrameValues): compile it
    here, and the record hands the reader its code (`w.getter_code`, written beside the guard
    set's own compiled code), which skips a compile() per source on a warm start."""
    try:
        _value(w, frame, source)
    except Unportable:  # the reader checks what it finds; here only the code is wanted
        pass


def _globals_module(w, fn, what):
    globals_ = getattr(fn, "__globals__", None)
    desc = w.write(globals_) if globals_ is not None else None
    if type(desc) is not tuple or desc[0] != "G":
        raise Unportable(f"guard `{what}`: a function whose globals are no module's")
    return desc[1]


def _value(w, frame, source):
    """The value the writer's call reads through `source`; its getter's code goes into the
    record as `_getter_code`'s does."""
    with recording() as compiled:
        try:
            return frame.value(source)
        except Stale as e:
            raise Unportable(str(e)) from None
        finally:
            w.__dict__.setdefault("getter_code", []).extend(compiled)


def _write_class_entry(w, g, frame):
    """A class entry by value or name, else as `vars(owner)[name]` of the class in the guarded
    class's MRO that holds it (a dataclass's `__dataclass_fields__`, a dict of Field objects)."""
    name, entry = g.arg
    try:
        return w.write(entry)
    except Unportable:
        pass
    klass = _value(w, frame, g.source)
    for owner in getattr(klass, "__mro__", ()):
        if vars(owner).get(name, _MISSING) is entry:
            return w._checked(entry, ("C", w.write(owner), name))
    raise Unportable(f"guard `{g.describe()}`: its class entry is not found again")


# ---- reading -----------------------------------------------------------------------------------

class FrameValues:
    """Evaluates Sources on the call that loads an entry (L, G, C and its builtins)."""

    def __init__(self, L, G, C, builtins):
        self.args, self.builtins = (L, G, C), builtins

    def value(self, source):
        ctx = ExprContext(self.builtins)
        get, _ = ctx.compile("check_value", [f"return {source.guard_expr(ctx)}"])
        try:
            return get(*self.args)
        except Exception as e:  # noqa: BLE001 - the guard would fail on this call
            raise Stale(f"{source.name()} cannot be read on this call ({type(e).__name__})") from None


def read_guards(r: Reader, descs, frame: FrameValues, builtins, split=None, groups=None) -> GuardSet:
    """`split`: the written set's (guards before tensors, tensors), its guards read back in
    their order: they are not ordered and deduplicated again. `groups`: write_groups'."""
    examples = []  # TensorMatch keeps only a weakref to its example until the set is built
    guards = [_read_guard(r, d, frame, examples) for d in descs]
    roots = tuple(_read_source(r, d) for d in groups or ())
    return compile_guards(guards, builtins=builtins, split=split, groups=roots)


def _read_guard(r, d, frame, examples):
    kind = d[0]
    if kind == "id":
        src = _read_source(r, d[1])
        return IdMatch(src, _read_object(r, d[2], lambda: frame.value(src)))
    if kind == "tensor":
        return _read_tensor(r, d, examples)
    if kind == "pred":
        src, pkind, arg, description = _read_source(r, d[1]), d[2], r.read(d[3]), d[4]
        return _predicate(src, pkind, arg, description)
    if kind == "made":
        return Predicate.made(_read_source(r, d[1]), r.read(d[2]), r.read(d[3]), d[4])
    if kind == "same_function":
        src = _read_source(r, d[1])
        fn = frame.value(src)
        globals_ = vars(r.read(("M", d[3])))
        if type(fn) is not types.FunctionType or code_key(fn.__code__) != d[2] or fn.__globals__ is not globals_:
            raise Stale(f"{src.name()} is not the function the entry was traced with")
        return Predicate.same_function(src, fn.__code__, globals_, d[4])
    if kind == "shape":
        return ShapeMatch(d[1], tuple(_read_source(r, s) for s in d[2]))
    if kind == "g":
        return _read_fields(r, r.read(d[1]), d[2])
    raise Stale(f"unknown guard kind {kind!r}")


def _predicate(src, kind, arg, description):
    if kind == "key_absent":
        return Predicate.key_absent(src, arg[0], description)
    if kind == "attrs":
        return Predicate.attrs_are(src, {k: v for k, _t, v in arg}, description)
    if kind == "falsy":
        return Predicate.falsy_attrs(src, arg, description)
    if kind == "lacks":
        return Predicate.lacks_attr(src, arg[0], description)
    if kind == "class_entry":
        return Predicate.class_entry(src, arg[0], arg[1], description)
    if kind == "class_lacks":
        return Predicate.class_lacks(src, arg[0], description)
    if kind == "lacks_generic":
        return Predicate.lacks_generic_attr(src, arg[0], description)
    raise Stale(f"unknown predicate kind {kind!r}")


def _read_tensor(r, d, examples):
    _k, src, typ, dtype, device, shape, stride, requires_grad, keys, aliased, names = d
    typ, dtype = r.read(typ), r.read(dtype)
    try:
        example = torch.empty_strided([1 if s is None else s for s in shape],
                                      [1 if s is None else s for s in stride], dtype=dtype, device=device)
    except Exception as e:  # noqa: BLE001 - a device this process does not have
        raise Stale(f"a {device} tensor cannot be made here ({type(e).__name__})") from None
    if typ is torch.nn.Parameter:
        example = torch.nn.Parameter(example, requires_grad=requires_grad)
    else:
        example.requires_grad_(requires_grad)
    if str(torch._C._dispatch_keys(example)) != keys:
        raise Stale("a tensor whose dispatch keys this process cannot reproduce")
    examples.append(example)
    g = TensorMatch(_read_source(r, src), example)
    if None in shape or None in stride:
        g = g.with_dynamic(shape, stride, names)
    if aliased:
        g = g.as_alias_of(g)
    return g


def _read_fields(r, cls, fields):
    obj = cls.__new__(cls)
    for name, desc in fields:
        object.__setattr__(obj, name, _read_value(r, desc))
    return obj


def _read_value(r, desc):
    if type(desc) is tuple and desc and desc[0] == "src":
        return _read_source(r, desc)
    if type(desc) is tuple and desc and desc[0] == "sources":
        return tuple(_read_source(r, s) for s in desc[1])
    return r.read(desc)


def _read_source(r, desc):
    memo = r.__dict__.setdefault("sources", {})
    hit = memo.get(id(desc))
    if hit is not None and hit[0] is desc:
        return hit[1]
    _tag, cls, fields = desc
    source = _read_fields(r, r.read(cls), fields)
    memo[id(desc)] = (desc, source)
    return source


def _read_object(r, desc, live):
    """The object an IdMatch pins: by name, or the live function its Source yields now, if
    it is the function the entry was traced with (`live()` reads it)."""
    if desc[0] == "name":
        return r.read(desc[1])
    obj = live()
    if not _same_function_value(r, ("name", desc[1]) if desc[0] == "live" else desc, obj):
        raise Stale("an object the entry pinned differs in this process")
    return obj


_VALUE_TAGS = frozenset({"T", "L", "D", "F", "sl", "E", "NI", "Sz", "dev"})


def _same_function_value(r, desc, obj):
    """Whether `obj` (a function's default, closure content, or the function) is what `desc`
    wrote: values equal exactly, named objects the same object, functions recursively."""
    if desc[0] == "empty":
        return obj is _EMPTY
    if desc[0] == "live":
        desc = ("name", desc[1])
    if desc[0] == "name":
        try:
            want = r.read(desc[1])
        except Stale:
            return False
        if type(desc[1]) is not tuple or desc[1][0] in _VALUE_TAGS:
            return exact_equal(obj, want)
        return obj is want
    _fn, key, module, defaults, kwdefaults, cells = desc
    if type(obj) is not types.FunctionType or code_key(obj.__code__) != key:
        return False
    if obj.__globals__ is not vars(r.read(("M", module))):
        return False
    closure = obj.__closure__ or ()
    if len(closure) != len(cells):
        return False
    if not _same_function_value(r, defaults, obj.__defaults__) or \
            not _same_function_value(r, kwdefaults, obj.__kwdefaults__):
        return False
    return all(_same_function_value(r, c, _contents(cell)) for c, cell in zip(cells, closure))


_EMPTY = object()


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY
