"""Named loggers, the TRACER_LOGS switch, and the per-entry notification used by tools.

    TRACER_LOGS=graph,guards,breaks,bytecode,recompiles python my_script.py
    TRACER_LOGS=+graph,breaks    # `+name`: that logger at DEBUG (more detail), as TORCH_LOGS

turns on, at import of `tracer`, a stderr handler for each named logger under `tracer.`
(`all` turns on every one, `+all` at DEBUG). What each logger says, as frames are traced:

    name               at INFO (`name`)                      adds at DEBUG (`+name`)
    tracer.graph       ops per captured graph                the graph's code
    tracer.guards      number of guards per new entry        the guards, one per line
    tracer.breaks      each graph break / fallback: reason,  the user stack (inlined calls)
                       file:line and the source line
    tracer.bytecode    original and rewritten bytecode       -
    tracer.recompiles  which guard failed on a recompile     -

`records.frame_traced` calls `entry_created(code, entry)` for every entry made; this module
logs from there and appends `(code, entry)` to every active `record()` list, which is how
`tracer-dump` sees every frame traced during one call (callees traced through the frame hook
included). `TRACER_TRACE=dir` (records.py) writes the same events as JSON lines.
"""
import contextlib
import dis
import linecache
import logging
import os
import sys

NAMES = ("graph", "guards", "breaks", "bytecode", "recompiles")
graph_log = logging.getLogger("tracer.graph")
guards_log = logging.getLogger("tracer.guards")
breaks_log = logging.getLogger("tracer.breaks")
bytecode_log = logging.getLogger("tracer.bytecode")

_recorders = []  # lists receiving (code, entry), innermost last


def configure(spec, stream=None):
    """Enable the loggers named in `spec` ("graph,+guards" or "all"); returns the names enabled
    (a `+` prefix kept for those at DEBUG)."""
    names = []
    for item in (n.strip() for n in (spec or "").split(",")):
        if item.lstrip("+") == "all":
            names += [item[:-3] + n for n in NAMES]
        elif item:
            names.append(item)
    enabled = []
    for item in names:
        name = item.lstrip("+")
        if name not in NAMES:
            print(f"tracer: unknown TRACER_LOGS name {name!r} (known: {', '.join(NAMES)}, all; "
                  f"+name for more detail)", file=sys.stderr)
            continue
        logger = logging.getLogger(f"tracer.{name}")
        logger.setLevel(logging.DEBUG if item.startswith("+") else logging.INFO)
        if not any(getattr(h, "_tracer_logs", False) for h in logger.handlers):
            handler = logging.StreamHandler(stream or sys.stderr)
            handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
            handler._tracer_logs = True
            logger.addHandler(handler)
        enabled.append(item)
    return enabled


def configure_from_env():
    return configure(os.environ.get("TRACER_LOGS", ""))


@contextlib.contextmanager
def record():
    """Collect `(code, entry)` for every cache entry made inside the block, in order."""
    out = []
    _recorders.append(out)
    try:
        yield out
    finally:
        _recorders.remove(out)


def breaks_of(entry):
    """Every graph break / fallback of an entry as dicts: reason, filename, lineno, user_stack."""
    out = []
    for b in getattr(entry, "breaks", None) or ():
        out.append({"reason": str(getattr(b, "reason", b)), "filename": getattr(b, "filename", None),
                    "lineno": getattr(b, "lineno", None),
                    "user_stack": [_stack_item(s) for s in (getattr(b, "user_stack", None) or ())]})
    if getattr(entry, "code", None) is None and getattr(entry, "reason", None):
        filename, lineno = split_location(getattr(entry, "location", None))
        if not any(b["reason"] == entry.reason for b in out):
            out.append({"reason": entry.reason, "filename": filename, "lineno": lineno, "user_stack": []})
    return out


def _stack_item(item):
    if isinstance(item, (tuple, list)) and len(item) == 3:
        filename, lineno, name = item
        return f"{name} ({filename}:{lineno})"
    return str(item)


def split_location(location):
    if not location or ":" not in location:
        return None, None
    filename, _, line = location.rpartition(":")
    return (filename, int(line)) if line.isdigit() else (location, None)


def source_line(filename, lineno):
    return linecache.getline(filename, lineno).rstrip("\n") if filename and lineno else ""


def caret(line):
    """A caret line under the code of `line` (leading blanks and a trailing comment excluded)."""
    stripped = line.lstrip()
    return " " * (len(line) - len(stripped)) + "^" * max(1, len(_without_comment(stripped)))


def _without_comment(text):
    import io
    import tokenize
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                return text[:tok.start[1]].rstrip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return text.rstrip()


def dis_text(code, width=60):
    """`dis` listing of `code`, one line per instruction; long constant reprs are shortened."""
    out = []
    for ins in dis.get_instructions(code):
        if ins.starts_line is not None and out:
            out.append("")
        line = f"{ins.starts_line:>4}" if ins.starts_line is not None else "    "
        rep = ins.argrepr.splitlines()[0] if ins.argrepr else ""
        if len(rep) > width or (ins.argrepr and "\n" in ins.argrepr):
            rep = rep[:width - 4] + " ...>" if rep.startswith("<") else rep[:width - 3] + "..."
        arg = "" if ins.arg is None else f"{ins.arg:>4}"
        target = ">>" if ins.is_jump_target else "  "
        out.append(f"{line} {target}{ins.offset:>5} {ins.opname:<22}{arg}{f' ({rep})' if rep else ''}".rstrip())
    return "\n".join(out)


def entry_created(code, entry):
    for rec in _recorders:
        rec.append((code, entry))
    name = entry.name or code.co_qualname
    if entry.graph is not None and graph_log.isEnabledFor(logging.INFO):
        if graph_log.isEnabledFor(logging.DEBUG):
            graph_log.debug("graph for %s: %d ops\n%s", name, entry.ops, entry.graph.code.strip())
        else:
            graph_log.info("graph for %s: %d ops", name, entry.ops)
    if guards_log.isEnabledFor(logging.INFO):
        if guards_log.isEnabledFor(logging.DEBUG):
            guards_log.debug("guards for %s:\n%s", name, entry.guards.describe())
        else:
            guards_log.info("guards for %s: %d", name, len(entry.guards))
    if breaks_log.isEnabledFor(logging.INFO):
        for b in breaks_of(entry):
            line = source_line(b["filename"], b["lineno"])
            where = f"{b['filename']}:{b['lineno']}" if b["lineno"] else "unknown location"
            extra = f"\n    {line}\n    {caret(line)}" if line else ""
            if breaks_log.isEnabledFor(logging.DEBUG):
                extra += "".join(f"\n    from {s}" for s in b["user_stack"])
            breaks_log.info("graph break in %s at %s: %s%s", name, where, b["reason"], extra)
    if bytecode_log.isEnabledFor(logging.INFO):
        rewritten = dis_text(entry.code) if entry.code is not None else "(none: the frame runs as Python)"
        bytecode_log.info("original bytecode of %s:\n%s\nrewritten bytecode of %s:\n%s",
                          name, dis_text(code), name, rewritten)
