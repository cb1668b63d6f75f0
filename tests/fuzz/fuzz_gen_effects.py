"""Program shapes for fuzz_gen.Gen that found issue 15's bugs, and their relatives.

* `exceptions_from_builtins`: an exception raised by a builtin-typed value (an attribute miss
  on a dict/list/str/int, a missing key, an index out of range, a failing int()/list.index())
  inside `try`, sometimes behind a graph break in the same try body, sometimes from a call
  that is itself a break (numpy), with except/else/finally blocks that record what ran.
* `writes_in_breaking_loop`: global, container and input writes inside a loop (for over a
  list / enumerate / range / dict keys, or a while) whose body contains a graph break, with
  the iterated list sometimes grown inside the loop (bounded).

Each takes the generator (`g`, a fuzz_gen.Gen), the environment of names by kind, the
indent and the nesting depth, and emits lines with `g.emit`. The module-level names they use
(`SINK`, `COUNTER`, `ACC`) are made by the harness (fuzz_harness._namespace), which compares
them between eager and compiled runs.
"""

GLOBAL_NAME = "ACC"


def _declare_global(g, ind):
    """`global ACC` once per generated function (before its first use, as Python requires)."""
    declared = g.__dict__.setdefault("_globals_declared", set())
    key = id(g.lines)  # one list of lines per function being generated
    if key not in declared:
        declared.add(key)
        g.emit(ind, f"global {GLOBAL_NAME}")


def _raising_expr(g, env):
    """(expression, exception class) of an operation on a builtin-typed value that raises
    for some inputs (or always)."""
    lst, dct, i = g.pick(env["L"]), g.pick(env["D"]), g.pick(env["I"])
    return g.pick([
        (f"len({dct}.nope())", "AttributeError"),
        (f"{dct}.nope", "AttributeError"),
        (f"{lst}.nope({i})", "AttributeError"),
        (f"getattr({lst}, 'nope')", "AttributeError"),
        (f"str({i}).nope()", "AttributeError"),
        (f"{i}.nope", "AttributeError"),
        (f"({i}, {lst}).count2({i})", "AttributeError"),
        (f"{dct}['nope'] if {i} > 0 else {dct}['zz']", "KeyError"),
        (f"{dct}.pop('zz')", "KeyError"),
        (f"{lst}[{g.int_expr(env, 1)} % 7]", "IndexError"),
        (f"{lst}.index({g.int_expr(env, 1)})", "ValueError"),
        (f"int('x{i}')", "ValueError"),
        (f"int(np.zeros(3)[{i} % 5])", "IndexError"),           # raises natively at a break
        (f"next(iter({lst}[{g.r(2, 6)}:]))", "StopIteration"),
    ])


def exceptions_from_builtins(g, env, ind, depth):
    expr, exc = _raising_expr(g, env)
    target = g.pick(env["I"])
    caught = g.pick([exc, exc, "Exception", f"({exc}, TypeError)"])
    g.emit(ind, "try:")
    if g.p(0.4):  # a graph break in the same try body, before the raise
        g.emit(ind + 1, g.pick([f"print('t', {target}, file=SINK)",
                                f"{target} = int({g.pick(env['T'])}.sum().item() > 0) + {target}",
                                f"{target} = int(np.int64({target}) + 1)"]))
    if g.p(0.3):
        g.emit(ind + 1, f"COUNTER.append({target})")
    g.emit(ind + 1, f"{target} = len(str({expr})) % 1000")
    g.emit(ind, f"except {caught} as e:")
    g.emit(ind + 1, g.pick(["print('exc', type(e).__name__, file=SINK)",
                            "print('exc', str(e), file=SINK)", "COUNTER.append(-1)"]))
    g.emit(ind + 1, f"{target} = -1")
    if g.p(0.3):
        g.emit(ind, "else:")
        g.emit(ind + 1, f"COUNTER.append({target})")
    if g.p(0.4):
        g.emit(ind, "finally:")
        g.emit(ind + 1, g.pick(["COUNTER[0] += 1", "print('fin', file=SINK)"]))


def _break_stmt(g, env, var):
    return g.pick([
        f"print('it', {var}, file=SINK)",
        f"{g.pick(env['I'])} = int({g.pick(env['T'])}.sum().item() > 0) + {var}",
        f"{g.pick(env['I'])} = int(np.int64({var}) + 1)",
        f"if bool(({g.pick(env['T'])} > 0).any()):",
    ])


def writes_in_breaking_loop(g, env, ind, depth):
    _declare_global(g, ind)
    var = g.tmp("e")
    lst = g.pick(env["L"])
    kind = g.pick(["list", "list", "enum", "range", "dict", "while"])
    if kind == "list":
        g.emit(ind, f"for {var} in {lst}:")
    elif kind == "enum":
        j = g.tmp("j")
        g.emit(ind, f"for {j}, {var} in enumerate({lst}):")
    elif kind == "range":
        g.emit(ind, f"for {var} in range(len({lst}) % 4 + 1):")
    elif kind == "dict":
        kk = g.tmp("kk")
        g.emit(ind, f"for {kk} in list({g.pick(env['D'])}):")
        g.emit(ind + 1, f"{var} = len({kk})")
    else:
        w = g.tmp("w")
        g.emit(ind, f"{w} = 0")
        g.emit(ind, f"while {w} < len({lst}) % 3 + 1:")
        g.emit(ind + 1, f"{w} += 1")
        g.emit(ind + 1, f"{var} = {w}")
    body = ind + 1
    inner = dict(env, I=env["I"] + [var])
    writes = [
        f"{GLOBAL_NAME} = ({GLOBAL_NAME} * 3 + {var}) % 1009",
        f"COUNTER.append({var})",
        f"COUNTER[0] += {var}",
        f"{g.pick(env['D'])}[{g.pick(['a', 'b', 'z'])!r}] = {var}",
        f"{lst}.append({var}) if len({lst}) < 7 else None",
        f"{g.pick(env['T'])}.add_({var})",
        f"{g.pick(env['I'])} = ({g.pick(env['I'])} + {var}) % 1000",
    ]
    for _ in range(g.r(1, 2)):
        g.emit(body, g.pick(writes))
    brk = _break_stmt(g, inner, var)
    g.emit(body, brk)
    if brk.endswith(":"):
        g.emit(body + 1, g.pick(writes))
        if g.p(0.5):
            g.emit(body, "else:")
            g.emit(body + 1, g.pick(writes))
    for _ in range(g.r(1, 2)):
        g.emit(body, g.pick(writes))
    if g.p(0.25):
        g.emit(body, f"if {var} {g.pick(['>', '<', '=='])} {g.r(0, 4)}:")
        g.emit(body + 1, g.pick(["break", "continue"]))
