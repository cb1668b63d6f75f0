"""Code-generation contexts shared by sources, guards and the builder.

Why this exists: rule 6 of the design says generated guard code never contains user
strings.  Everything that is not a generated identifier -- attribute names, dict keys,
global names, guarded values, types, helper callables -- is bound as a constant in the
namespace of the generated function, and the generated text refers to it only through a
fresh name from ``ctx.const(value)``.  The only words in the generated text are
identifiers made here (``_k3``, ``_v1``), Python keywords/builtins we chose, ``L``, ``G``,
``C`` and integer literals we format ourselves.

Two contexts:

* ``ExprContext`` -- every source value is spelled inline (``getattr(L[0], _k1)``).  Used
  for ``Source.guard_expr`` on its own and for the per-guard slow path.
* ``HoistContext`` -- each source value is computed once into a local (``_v2 = ...``),
  emitted just before the first condition that needs it; used for the fast check function.
"""

from __future__ import annotations

import contextlib
import hashlib
import keyword
import re
from typing import Any

# Code objects compiled from generated text, by the text's digest: a process that reads guard
# sets from the disk cache (tracer/persist/) is handed the code the writing process compiled
# for the very same text (`precompiled`), and skips compile(), most of a loaded guard set's
# cost. `recording()` collects what a guard set compiled, for the writer.
_PRECOMPILED: dict[str, Any] = {}
_PRECOMPILED_MAX = 20_000
_RECORDERS: list[list] = []
# texts up to this size are kept once compiled, for the next set making the same text: the
# group checks of a model's repeated blocks (builder.GuardSet._group_check) are one text
_REUSED_MAX = 100_000


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def precompiled(pairs) -> None:
    """Make ``(digest, code)`` pairs available to ``ExprContext.compile``."""
    if len(_PRECOMPILED) > _PRECOMPILED_MAX:
        _PRECOMPILED.clear()
    _PRECOMPILED.update(pairs)


@contextlib.contextmanager
def recording():
    """Yields the list of ``(digest, code)`` compiled inside the block (one thread at a time:
    guard sets are built under the cache's lock)."""
    rec: list = []
    _RECORDERS.append(rec)
    try:
        yield rec
    finally:
        _RECORDERS.remove(rec)


class ExprContext:
    """Binds constants to fresh names; spells source values inline."""

    def __init__(self, builtins: dict | None = None, prefix: str = "_k") -> None:
        self.builtins = builtins if builtins is not None else {}
        self.namespace: dict[str, Any] = {}
        self._by_id: dict[tuple[type, int], str] = {}
        self._prefix = prefix

    def const(self, value: Any) -> str:
        """Return a fresh identifier bound to ``value`` (deduplicated by identity)."""
        key = (type(value), id(value))
        name = self._by_id.get(key)
        if name is None:
            name = f"{self._prefix}{len(self._by_id)}"
            self._by_id[key] = name
            self.namespace[name] = value  # keeps value alive, so its id stays unique
        return name

    def value(self, source) -> str:
        """Expression that evaluates to the value of ``source``."""
        return source.guard_expr(self)

    def compile(self, name: str, body_lines: list[str], args: str = "L, G, C") -> tuple[Any, str]:
        """exec() a ``def name(L, G, C)`` (or ``def name(V)``) with the given body; return
        (function, text)."""
        text = f"def {name}({args}):\n" + "".join(f"    {ln}\n" for ln in body_lines)
        digest = text_digest(text)
        code = _PRECOMPILED.get(digest)
        if code is None:  # (a precompiled text was checked where it was compiled: the same text)
            _check_generated(text)
            code = compile(text, f"<guards:{name}>", "exec")
            if len(text) <= _REUSED_MAX:  # sibling blocks' group checks, one-value checks
                precompiled(((digest, code),))
        for rec in _RECORDERS:
            rec.append((digest, code))
        ns = dict(self.namespace)
        ns["__builtins__"] = {"getattr": getattr, "type": type, "len": len, "id": id,
                              "tuple": tuple, "map": map, "bool": bool, "Exception": Exception}
        exec(code, ns)  # noqa: S102 - generated text only
        fn = ns[name]
        # a code object of its own: one shared by functions with different globals (sibling
        # blocks' group checks) would have CPython's specialized global loads miss on each
        # call, which made a 12-layer model's check 40% slower
        fn.__code__ = fn.__code__.replace()
        return fn, text


class ArgContext(ExprContext):
    """Spells one source as ``V``, the argument of a one-value condition ``def check(V)``
    (the C check hands it the value it already has)."""

    def __init__(self, source, builtins: dict | None = None) -> None:
        super().__init__(builtins)
        self._arg = source

    def value(self, source) -> str:
        return "V" if source == self._arg else source.guard_expr(self)


class HoistContext(ExprContext):
    """Like ExprContext, but each distinct source is loaded once into a local variable."""

    def __init__(self, builtins: dict | None = None) -> None:
        super().__init__(builtins)
        self._locals: dict[Any, str] = {}
        self.pending: list[str] = []  # assignment lines not yet emitted

    def value(self, source) -> str:
        name = self._locals.get(source)
        if name is None:
            expr = source.guard_expr(self)  # recursion loads bases first
            if source.is_root_cheap():
                return expr  # L[0] etc: as cheap as a local, no need to hoist
            name = f"_v{len(self._locals)}"
            self._locals[source] = name
            self.pending.append(f"{name} = {expr}")
        return name

    def take_pending(self) -> list[str]:
        out, self.pending = self.pending, []
        return out


class GroupContext(HoistContext):
    """A HoistContext in which `root` is ``V``, the argument of ``check_group(V, L, G, C)``:
    guards read through one module (a block of a model) make the same text for each of the
    module's siblings, compiled once (builder.GuardSet._group_check)."""

    def __init__(self, root, builtins: dict | None = None) -> None:
        super().__init__(builtins)
        self._locals[root] = "V"


_ALLOWED_WORDS = {
    "def", "return", "if", "not", "and", "or", "is", "in", "try", "except", "True", "False",
    "None", "getattr", "type", "len", "id", "tuple", "map", "bool", "Exception", "L", "G", "C", "V",
    "cell_contents",
}


_WORD = re.compile(r"(?<![\w.])[A-Za-z_]\w*|\.[A-Za-z_]\w*")
_OUR_COMMENT = re.compile(r"  # [\w .\[\]]*$", re.M)  # "# [3] TypeMatch", "# [0..4] TensorMatch batch"


def _check_generated(text: str) -> None:
    """Defence in depth for rule 6: the text may hold only our own identifiers.

    A regular expression, not tokenize: this runs for every generated check and tokenize was
    a seventh of a fuzz program's compile time. It is stricter than the tokenizer: no quote
    character may appear at all, a comment only at a line's end and of words, dots and brackets
    (the builder's "# [3] TypeMatch"), and attribute names after a dot are words too.
    """
    text = _OUR_COMMENT.sub("", text)
    for bad in ("'", '"', "#", "\\"):
        if bad in text:
            line = next(ln for ln in text.splitlines() if bad in ln)
            raise AssertionError(f"string literal or comment in generated guard code: {line[:120]!r}")
    for w in _WORD.findall(text):
        w = w.lstrip(".")
        if not (w in _ALLOWED_WORDS or keyword.iskeyword(w)
                or (w[:2] in ("_k", "_v", "_r") and w[2:].isdigit()) or w.startswith("check")):
            raise AssertionError(f"unexpected identifier in generated guard code: {w!r}")
