"""Render a rewritten code object as readable pseudo-Python, from its actual instructions.

The tracer's rewritten frames are straight-line code built from a few patterns (codegen.py):
load graph inputs from their sources and call the compiled graph, index its outputs, build
containers, replay side effects (STORE_ATTR / STORE_SUBSCR / STORE_GLOBAL / STORE_DEREF /
method calls), return. This walks the instructions with a symbolic stack of expression
strings; anything it does not know is kept as a `# OPNAME arg` comment, never guessed.
Instructions are read through `bytecode_utils.decode` (names normalised across versions) and
the call layout through `versions.split_call`, so the same walk serves 3.11 to 3.15.
"""
import dis

from bytecode_utils import decode, versions

_NULL = object()
_LITERALS = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis))
_COND_JUMPS = {"POP_JUMP_IF_FALSE": "{}", "POP_JUMP_IF_TRUE": "not {}",
               "POP_JUMP_IF_NONE": "{} is not None", "POP_JUMP_IF_NOT_NONE": "{} is None"}
_COMPARE = ("<", "<=", "==", "!=", ">", ">=")
_BINARY = {0: "+", 1: "&", 2: "//", 3: "<<", 4: "@", 5: "*", 6: "%", 7: "|", 8: "**", 9: ">>", 10: "-",
           11: "/", 12: "^"}


class _Copied(str):
    """A stack entry duplicated by COPY: once stored, the entries left show the name."""


def _const(value, graph_names):
    for fn, name in graph_names:
        if value is fn:
            return name
    if isinstance(value, _LITERALS):
        return repr(value)
    if isinstance(value, slice):
        parts = ["" if p is None else repr(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if value.step is not None else "")
    if isinstance(value, tuple):
        inner = ", ".join(_const(v, graph_names) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if callable(value) and type(value).__name__ in ("method", "function") and \
            type(getattr(value, "__self__", None)).__name__ in ("TracedGraph", "GraphModule"):
        return "compiled_graph"
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    mod = getattr(value, "__module__", None)
    if type(value).__name__ == "function":  # user functions (resume functions too): qualname only
        return name
    if name:
        return f"{mod}.{name}" if mod and mod != "builtins" else name
    return f"<{type(value).__name__}>"


def _graph_names(graphs, code):
    """Constants of `code` that are (wrappers of) the compiled graphs, named graph_0, graph_1..."""
    consts = [c for c in code.co_consts if callable(c) and not isinstance(c, type)
              and not isinstance(c, _LITERALS)]
    names = []
    forwards = [getattr(gm, "forward", None) for gm in graphs]
    for c in consts:
        inner = c
        for _ in range(5):  # frame_hook.untraced(rerun's run_restoring_on_error(compiled graph))
            inner = getattr(inner, "__wrapped__", inner)
        owner = getattr(inner, "__self__", None)
        meta = getattr(owner, "meta", None)
        if isinstance(meta, dict):  # the graph given to the backend in the traced one's stead
            owner = meta.get("traced_graph", owner)
        for i, gm in enumerate(graphs):
            if inner is gm or owner is gm or inner == forwards[i]:
                names.append((c, f"graph_{i}"))
    if not names and len(graphs) == 1:  # a backend's own callable: the only graph call there is
        calls = [c for c in consts if getattr(c, "__module__", "") not in ("builtins",)]
        if len(calls) == 1:
            names.append((calls[0], "graph_0"))
    return names


def render_code(code, graphs=()):
    """Pseudo-Python for `code` (a rewritten CodeType); one statement per line."""
    if code is None:
        return None
    names = _graph_names(list(graphs), code)
    args = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    lines = [f"def {code.co_name}({', '.join(args)}):"]
    stack = []
    ends = []  # the instruction indices where the open `if` blocks end (forward jumps' targets)

    def out(text):  # (statements come indented one level; an open `if` adds one more each)
        lines.append("    " * len(ends) + text)

    def pop(n=1):
        vals = [stack.pop() if stack else "<?>" for _ in range(n)]
        return vals[::-1]

    instrs = decode(code)
    for ins in instrs:
        while ends and ends[-1] <= ins.index:
            ends.pop()
        op, arg, av = ins.opname, ins.arg, ins.argval
        if op in ("RESUME", "NOP", "MAKE_CELL", "COPY_FREE_VARS") or op in versions.CALL_PREFIX_OPNAMES:
            continue
        if op == "PUSH_NULL":
            stack.append(_NULL)
        elif op == "LOAD_CONST":
            stack.append(_const(av, names))
        elif op in ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_NAME"):
            stack.append(av)
        elif op == "LOAD_GLOBAL":
            stack.extend(versions.callable_and_null(av, _NULL) if arg & 1 else [av])
        elif op == "LOAD_ATTR":
            stack.append(f"{pop()[0]}.{av}")
        elif op == "LOAD_METHOD":
            obj = pop()[0]
            stack.extend(versions.callable_and_null(f"{obj}.{av}", _NULL))
        elif op == "BINARY_SUBSCR":
            obj, key = pop(2)
            stack.append(f"{obj}[{key[1:-1] if key.startswith('(') and key.endswith(')') else key}]")
        elif op == "BINARY_OP":
            a, b = pop(2)
            sym = _BINARY.get(arg % 13, "?") + ("=" if arg >= 13 else "")
            stack.append(f"({a} {sym} {b})")
        elif op in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET"):
            items = pop(arg)
            if op == "BUILD_TUPLE":
                stack.append(f"({items[0]},)" if arg == 1 else f"({', '.join(items)})")
            elif op == "BUILD_LIST":
                stack.append(f"[{', '.join(items)}]")
            else:
                stack.append(f"{{{', '.join(items)}}}" if items else "set()")
        elif op == "BUILD_MAP":
            items = pop(2 * arg)
            stack.append("{" + ", ".join(f"{items[i]}: {items[i + 1]}" for i in range(0, len(items), 2)) + "}")
        elif op == "BUILD_CONST_KEY_MAP":
            keys = stack.pop()
            vals = pop(arg)
            keys = [k.strip() for k in keys.strip("()").split(",") if k.strip()]
            stack.append("{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, vals)) + "}")
        elif op in versions.CALL_OPNAMES:
            if versions.CALL_OPNAMES[op]:  # the keyword names are a stack operand
                pop()
            kw_names = versions.call_kw_names(instrs, ins.index) or ()
            items = pop(arg + 2)
            fn, argv = versions.split_call(items, lambda v: v is _NULL)
            if kw_names:
                n = len(kw_names)
                argv = argv[:-n] + [f"{k}={v}" for k, v in zip(kw_names, argv[-n:])]
            stack.append(f"{fn}({', '.join(argv)})")
        elif op == "IS_OP":
            a, b = pop(2)
            stack.append(f"{a} {'is not' if arg else 'is'} {b}")
        elif op == "CONTAINS_OP":
            a, b = pop(2)
            stack.append(f"{a} {'not in' if arg else 'in'} {b}")
        elif op == "COMPARE_OP" and ins.argrepr.strip("bool()") in _COMPARE:
            a, b = pop(2)
            stack.append(f"({a} {ins.argrepr.strip('bool()')} {b})")
        elif op in _COND_JUMPS and ins.target is not None and ins.target > ins.index:
            # the generated code's checks (a graph that asked to run the frame as Python): the
            # block up to the jump's target runs when the jump is not taken
            out(f"    if {_COND_JUMPS[op].format(pop()[0])}:")
            ends.append(ins.target)
        elif op == "SWAP":
            stack[-1], stack[-arg] = stack[-arg], stack[-1]
        elif op == "COPY":
            stack[-arg] = _Copied(stack[-arg])  # (one object for both: a store names both)
            stack.append(stack[-arg])
        elif op in ("STORE_FAST", "STORE_DEREF", "STORE_NAME"):
            value = pop()[0]
            out(f"    {av} = {value}")
            if isinstance(value, _Copied):  # the copy left below reads the stored name
                stack[:] = [av if v is value else v for v in stack]
        elif op == "STORE_GLOBAL":
            out(f"    global {av}; {av} = {pop()[0]}")
        elif op == "STORE_ATTR":
            obj, value = pop(1)[0], pop(1)[0]
            out(f"    {obj}.{av} = {value}")
        elif op == "STORE_SUBSCR":
            key, obj, value = pop(1)[0], pop(1)[0], pop(1)[0]
            out(f"    {obj}[{key}] = {value}")
        elif op == "UNPACK_SEQUENCE":
            src = pop()[0]
            tmps = [f"_u{len(lines)}_{i}" for i in range(arg)]
            out(f"    {', '.join(tmps)} = {src}")
            stack.extend(reversed(tmps))
        elif op == "POP_TOP":
            value = pop()[0]
            if value is not _NULL:
                out(f"    {value}")
        elif op == "RETURN_VALUE":
            out(f"    return {pop()[0]}")
        elif op == "RETURN_CONST":
            out(f"    return {_const(av, names)}")
        else:
            out(f"    # {op} {ins.argrepr}".rstrip())
            effect = dis.stack_effect(ins.opcode, arg) if ins.opcode >= dis.HAVE_ARGUMENT else \
                dis.stack_effect(ins.opcode)
            if effect < 0:
                pop(-effect)
            stack.extend(["<?>"] * max(effect, 0))
    return "\n".join(lines)
