"""More program shapes for the fuzzer (issue 16: the fuzzer's blind spots).

Each shape is a function `shape(g, env, ind, depth, top) -> bool` that emits one statement (or
a small block) through the generator `g` (fuzz_gen.Gen) and returns False when it does not
apply here. Definitions a shape needs (classes, decorators, generators, context managers)
are emitted once per program at module level through `define`. Expression-level additions
(`tensor_expr`, `int_expr`) keep fuzz_gen's rule: every tensor kept in a local has the input
shape (or broadcasts to it), so ops never fail on shapes by accident.

SHAPES names every statement shape and FEATURES says which are on: a shape that finds a
tracer bug too large to fix here is switched off with the reason (see the report of issue 16),
and switched back on once fixed. The env keys beyond fuzz_gen's: M bool tensors, J int
tensors, S torch.return_types results, O objects of the program's class.
"""

TENSOR_VIEWS = [
    "{0}[:1]", "{0}[..., :1]", "{0}.view(-1).view({0}.shape)", "{0}.reshape(-1).reshape({0}.shape)",
    "{0}.unsqueeze(0).squeeze(0)", "{0}.flip(-1)", "{0}.transpose(0, -1).transpose(0, -1)",
    "{0}.narrow(-1, 0, 1)", "{0}[:1].expand_as({0})", "{0}[-1:]", "{0}.select(-1, 0).unsqueeze(-1)",
    "{0}.movedim(0, -1).movedim(-1, 0)",
]
CAT_STACK = [
    "torch.stack([{0}, {1}]).sum(0)", "torch.stack([{0}, {1}], -1).amax(-1)",
    "torch.cat([{0}, {1}], 0)[{0}.shape[0]:]", "torch.cat([{0}[:1], {1}], 0)[1:]",
    "torch.cat([{0}, {1}], -1).chunk(2, -1)[1]", "torch.stack(({0}, {1}, {0})).mean(0)",
    "torch.cat(({0}.unsqueeze(0), {1}.unsqueeze(0))).prod(0)", "torch.split({0}, 1, -1)[0]",
]
INT_BOOL = [
    "({0} > 0).to({0}.dtype)", "{0} * ({1} > 0)", "torch.where({0} > {1}, {0}, {1})",
    "{0}.masked_fill({1} < 0, 0.5)", "({0} * 3).long().to({0}.dtype)",
    "(({0} > 0) & ({1} < 0.5)).to({0}.dtype)", "(~({0} > 0)).to({0}.dtype) + {1}",
    "({0} + ({1} > 0).sum())", "({0}.long() % 3).to({0}.dtype)", "({0} >= {1}).float().to({0}.dtype)",
]
RETURN_TYPES = [
    "torch.max({0}, dim=-1, keepdim=True)", "{0}.min(-1, keepdim=True)", "torch.sort({0}, dim=-1)",
    "torch.topk({0}, 1, dim=-1)", "torch.median({0}, dim=-1, keepdim=True)", "{0}.cummax(-1)",
    "torch.aminmax({0}, dim=-1, keepdim=True)", "{0}.kthvalue(1, -1, keepdim=True)",
]
SHAPE_READS = ["{0}.shape[0]", "{0}.size(-1)", "len({0})", "{0}.dim()", "({0}.numel() % 7)",
               "{0}.ndim", "{0}.shape[-1]", "len({0}.shape)"]


def define(g, key, lines):
    """Emit `lines` once per program at module level (before f)."""
    if key not in g.defined:
        g.defined.add(key)
        g.helpers.append(lines)


# ---- expressions -------------------------------------------------------------------------------
def tensor_expr(g, env, depth):
    """A view/indexing, cat/stack, int/bool or return_types expression, or None."""
    ts = env["T"]
    a, b = g.pick(ts), g.pick(ts)
    c = g.r(0, 3)
    if c == 0 and FEATURES["views"]:
        return g.pick(TENSOR_VIEWS).format(a)
    if c == 1 and FEATURES["cat_stack"]:
        return g.pick(CAT_STACK).format(a, b)
    if c == 2 and FEATURES["int_bool"]:
        return g.pick(INT_BOOL).format(a, b)
    if c == 3 and FEATURES["return_types"]:
        r = g.pick(RETURN_TYPES).format(a)
        field = g.pick(["[0]", ".values"]) if "aminmax" not in r else g.pick(["[0]", ".min", ".max"])
        return f"({r}{field} + {b})" if "sort" not in r and "cummax" not in r else f"{r}{field}"
    return None


def int_expr(g, env):
    if not FEATURES["shape_reads"]:
        return None
    return g.pick(SHAPE_READS).format(g.pick(env["T"]))


# ---- statements --------------------------------------------------------------------------------
def _helper_env():
    return {"T": ["a"], "I": ["m"], "F": [], "L": ["hl"], "D": ["hd"], "H": []}


def _body(g, env, ind, n=(1, 3)):
    """A few statements in a fresh scope (a helper or method body)."""
    for _ in range(g.r(*n)):
        g.stmt(env, ind, g.max_depth, top=True)


def user_class(g, env, ind, depth, top):
    """A class with __init__, a method, a property, a classmethod and a staticmethod."""
    if not env.get("O") and not top:
        return False
    if "Acc" not in g.defined:
        saved, g.lines = g.lines, []
        g.emit(0, "class Acc:")
        g.emit(1, f"scale = {g.r(1, 4)}")
        g.emit(1, "def __init__(self, t, k):")
        g.emit(2, "self.t = t")
        g.emit(2, "self.k = k")
        g.emit(1, "def step(self, a):")
        menv = dict(_helper_env(), T=["a", "self.t"], I=["self.k"], L=[], D=[])
        g.emit(2, f"self.t = {g.tensor_expr(menv, 1)}")
        g.emit(2, "self.k = (self.k + 1) % 7")
        g.emit(2, "return self.t")
        g.emit(1, "@property")
        g.emit(1, "def doubled(self):")
        g.emit(2, f"return self.t * {g.r(1, 3)}")
        g.emit(1, "@classmethod")
        g.emit(1, "def make(cls, t):")
        g.emit(2, "return cls(t, cls.scale)")
        g.emit(1, "@staticmethod")
        g.emit(1, "def combine(a, b):")
        g.emit(2, f"return {g.tensor_expr(dict(_helper_env(), T=['a', 'b'], I=[], L=[], D=[]), 1)}")
        lines, g.lines = g.lines, saved
        define(g, "Acc", lines)
    objs = env.setdefault("O", [])
    if top and (not objs or g.p(0.3)):
        o = g.tmp("o")
        if g.p(0.5):
            g.emit(ind, f"{o} = Acc({g.pick(env['T'])}, {g.int_expr(env, 1)} % 5)")
        else:
            g.emit(ind, f"{o} = Acc.make({g.tensor_expr(env, 1)})")
        objs.append(o)
        return True
    if not objs:
        return False
    o, t = g.pick(objs), g.pick(env["T"])
    k = g.r(0, 4)
    if k == 0:
        g.emit(ind, f"{t} = {o}.step({g.tensor_expr(env, 1)})")
    elif k == 1:
        g.emit(ind, f"{t} = {o}.doubled + {t}")
    elif k == 2:
        g.emit(ind, f"{g.pick(env['I'])} = {o}.k + Acc.scale + int(isinstance({o}, Acc))")
    elif k == 3:
        g.emit(ind, f"{o}.k = {g.int_expr(env, 1)} % 5")
    else:
        g.emit(ind, f"{t} = Acc.combine({t}, {o}.t)")
    return True


DECORATORS = {
    "scaled": ["def scaled(k):", "    def deco(fn):", "        @functools.wraps(fn)",
               "        def wrapper(*args, **kwargs):", "            return fn(*args, **kwargs) * k",
               "        return wrapper", "    return deco"],
    "counted": ["def counted(fn):", "    @functools.wraps(fn)", "    def wrapper(a, m=2):",
                "        wrapper.calls += 1", "        return fn(a, m) + wrapper.calls",
                "    wrapper.calls = 0", "    return wrapper"],
    "Twice": ["class Twice:", "    def __init__(self, fn):", "        self.fn = fn",
              "    def __call__(self, a, m=1):", "        return self.fn(self.fn(a, m), m)"],
}


def decorated_helper(g, env, ind, depth, top):
    """A helper under a decorator (functools.wraps wrapper, decorator factory, class), called."""
    name = g.tmp("dhelper")
    deco = g.pick(list(DECORATORS))
    define(g, deco, DECORATORS[deco])
    saved, g.lines = g.lines, []
    g.emit(0, "@scaled(2)" if deco == "scaled" else f"@{deco}")
    g.emit(0, f"def {name}(a, m=3):")
    g.emit(1, "hl = [m, 1]")
    g.emit(1, "hd = {'a': a, 'b': m}")
    henv = _helper_env()
    _body(g, henv, 1, (0, 2))
    g.emit(1, f"return {g.tensor_expr(henv, 1)}")
    lines, g.lines = g.lines, saved
    define(g, name, lines)
    g.emit(ind, f"{g.pick(env['T'])} = {name}({g.tensor_expr(env, 1)}, {g.int_expr(env, 1)} % 4)")
    return True


CONTEXTS = {
    "Track": ["class Track:", "    def __init__(self, log, quiet=False):", "        self.log = log",
              "        self.quiet = quiet", "    def __enter__(self):", "        self.log.append(1)",
              "        return self", "    def __exit__(self, et, ev, tb):",
              "        self.log.append(2 if et is None else 3)",
              "        return self.quiet and et is KeyError"],
    "scope": ["@contextlib.contextmanager", "def scope(log, v):", "    log.append(v)", "    try:",
              "        yield v * 2", "    finally:", "        log.append(-v)"],
}


def context_manager(g, env, ind, depth, top):
    """`with` a user context manager (a class, or a contextlib.contextmanager generator)."""
    if depth >= g.max_depth or not env["L"]:
        return False
    kind = g.pick(list(CONTEXTS))
    define(g, kind, CONTEXTS[kind])
    lst = g.pick(env["L"])
    cm = g.tmp("cm")
    if kind == "Track":
        g.emit(ind, f"with Track({lst}, quiet={g.pick(['True', 'False'])}) as {cm}:")
    else:
        g.emit(ind, f"with scope({lst}, {g.int_expr(env, 1)} % 9) as {cm}:")
    inner = dict(env, I=env["I"] + ([cm] if kind == "scope" else []))
    g.block(inner, ind + 1, depth + 1)
    if g.p(0.15):
        g.emit(ind + 1, f"{g.pick(env['T'])} = {g.pick(env['D'])}['missing'] + 1")
    return True


GENERATORS = {
    "ramp": ["def ramp(t, k):", "    for j in range(k):", "        yield t * j",
             "    print('ramp done', k, file=SINK)"],
    "guarded": ["def guarded(t):", "    try:", "        yield t", "    except ValueError as e:",
                "        print('thrown', e, file=SINK)", "        yield t * 2",
                "    finally:", "        print('closed', file=SINK)", "    yield t + 1"],
    "chain": ["def chain(t, k):", "    yield from ramp(t, k)", "    r = yield t.sum()",
              "    yield t if r is None else r"],
}


def generator(g, env, ind, depth, top):
    """Generators: consumed by for/sum/list, stepped with next(), closed, and thrown into."""
    define(g, "ramp", GENERATORS["ramp"])
    t = g.pick(env["T"])
    k = g.r(0, 5)
    if k == 0 and depth < g.max_depth:
        v = g.tmp("v")
        g.emit(ind, f"for {v} in ramp({g.tensor_expr(env, 1)}, {g.int_expr(env, 1)} % 4):")
        g.emit(ind + 1, f"{t} = {t} + {v}")
    elif k == 1:
        g.emit(ind, f"{t} = sum(ramp({t}, {g.r(0, 3)}), {g.tensor_expr(env, 1)})")
    elif k == 2:
        define(g, "chain", GENERATORS["chain"])
        gg = g.tmp("gen")
        g.emit(ind, f"{gg} = list(chain({t}, {g.r(0, 3)}))")
        g.emit(ind, f"{t} = {gg}[-1] + {gg}[0]")
    elif k == 3 and FEATURES["generator_close_throw"]:
        define(g, "guarded", GENERATORS["guarded"])
        gg = g.tmp("gen")
        g.emit(ind, f"{gg} = guarded({t})")
        g.emit(ind, f"{t} = next({gg})")
        if g.p(0.5):
            g.emit(ind, f"{t} = {gg}.throw(ValueError('in'))")
        g.emit(ind, f"{gg}.close()")
    elif k == 4 or k == 3:
        gg = g.tmp("gen")
        g.emit(ind, f"{gg} = ramp({t}, 3)")
        g.emit(ind, f"{t} = next({gg}) + next({gg}, {t})")
    else:
        g.emit(ind, f"{g.pick(env['I'])} = len([v for v in ramp({t}, {g.int_expr(env, 1)} % 3)])")
    return True


RAISERS = [
    ("KeyError", "{t} = {d}['missing']"),
    ("IndexError", "{i} = {l}[{big}]"),
    ("ValueError", "{i} = int('not a number')"),
    ("ZeroDivisionError", "{i} = {i} // 0"),
    ("FuzzError", "raise FuzzError({i})"),
    ("TypeError", "{i} = len({i})"),
]


def _raiser(g, env):
    exc, line = g.pick(RAISERS)
    if exc == "FuzzError":
        define(g, "FuzzError", ["class FuzzError(Exception):", "    pass"])
    if "{l}" in line and not env["L"]:
        exc, line = RAISERS[0]
    return exc, line.format(t=g.pick(env["T"]), d=g.pick(env["D"]), i=g.pick(env["I"]),
                            l=(env["L"] or ["lst"])[0], big=g.r(7, 12))


def exceptions(g, env, ind, depth, top):
    """Nested try with except/else/finally around statements that may raise (builtin errors
    and the program's own exception class), caught by type or by a base class."""
    if depth >= g.max_depth:
        return False
    exc, line = _raiser(g, env)
    i = g.pick(env["I"])
    g.emit(ind, "try:")
    g.emit(ind + 1, "try:")
    g.stmt(env, ind + 2, depth + 2, top=False)
    if g.p(0.6):
        g.emit(ind + 2, f"if {g.cond_expr(env)}:")
        g.emit(ind + 3, line)
    g.emit(ind + 1, f"except {g.pick([exc, 'Exception', '(KeyError, IndexError)', 'ArithmeticError'])}:")
    g.emit(ind + 2, f"{i} = ({i} + 1) % 1000")
    if g.p(0.5):
        g.emit(ind + 1, "else:")
        g.emit(ind + 2, f"{i} = ({g.int_expr(env, 1)}) % 1000")
    g.emit(ind + 1, "finally:")
    g.emit(ind + 2, f"print('finally', {i}, file=SINK)")
    g.emit(ind, "except Exception as e2:")
    g.emit(ind + 1, "print('outer', type(e2).__name__, e2, file=SINK)")
    return True


def exception_chains(g, env, ind, depth, top):
    """`raise ... from`, `from None`, bare re-raises, exceptions raised while handling
    another (their __cause__/__context__ read, or compared by the harness when they escape f)."""
    if depth >= g.max_depth:
        return False
    exc, line = _raiser(g, env)
    k = g.r(0, 3)
    i = g.pick(env["I"])
    g.emit(ind, "try:")
    g.emit(ind + 1, "try:")
    g.stmt(env, ind + 2, depth + 2, top=False)
    if g.p(0.6):
        g.emit(ind + 2, f"if {g.cond_expr(env)}:")
        g.emit(ind + 3, line)
    g.emit(ind + 1, f"except {exc} as e:")
    if k == 0:
        g.emit(ind + 2, "raise RuntimeError('wrapped ' + type(e).__name__) from e")
    elif k == 1:
        g.emit(ind + 2, "raise RuntimeError('replaced') from None")
    elif k == 2:
        g.emit(ind + 2, f"{i} = ({i} + 1) % 1000")
        g.emit(ind + 2, "raise")
    else:
        g.emit(ind + 2, "raise RuntimeError('during handling')")
    g.emit(ind + 1, "finally:")
    g.emit(ind + 2, f"print('finally', {i}, file=SINK)")
    if g.p(0.85):  # else the exception escapes f: its chain is compared
        caught = "RuntimeError" if k != 2 else exc
        g.emit(ind, f"except {caught} as e2:")
        g.emit(ind + 1, "print('caught', type(e2).__name__, type(e2.__cause__).__name__, "
                        "type(e2.__context__).__name__, e2.__suppress_context__, file=SINK)")
        g.emit(ind + 1, f"{i} = len(str(e2)) % 1000")
    else:
        g.emit(ind, "except ArithmeticError:")
        g.emit(ind + 1, f"{i} = 0")
    return True


BREAKS = ["print('in try', {i}, file=SINK)", "{t} = torch.from_numpy(np.asarray({t}.detach().numpy() * 1.5))",
          "{i} = int({t}.sum().item()) % 1000", "{i} = int(np.int64({i}) + 1)"]


def break_in_try(g, env, ind, depth, top):
    """A graph break inside a try body, with except / finally around it."""
    if depth >= g.max_depth:
        return False
    exc, line = _raiser(g, env)
    g.emit(ind, "try:")
    g.emit(ind + 1, g.pick(BREAKS).format(i=g.pick(env["I"]), t=g.pick(env["T"])))
    g.emit(ind + 1, f"{g.pick(env['T'])} = {g.tensor_expr(env, 1)}")
    if g.p(0.5):
        g.emit(ind + 1, f"if {g.cond_expr(env)}:")
        g.emit(ind + 2, line)
    g.emit(ind, f"except {exc}:")
    g.emit(ind + 1, f"print('handled', file=SINK)")
    if g.p(0.5):
        g.emit(ind, "finally:")
        g.emit(ind + 1, f"{g.pick(env['I'])} = ({g.int_expr(env, 1)}) % 1000")
    return True


def view_mutation(g, env, ind, depth, top):
    """Writes through views and indexing (they mutate the base, inputs included)."""
    t = g.pick(env["T"])
    k = g.r(0, 3)
    if k == 0:
        g.emit(ind, f"{t}.view(-1).mul_({g.float_expr(env)})")
    elif k == 1:
        g.emit(ind, f"{t}[..., 0] = {g.scalar_expr(env)}")
    elif k == 2:
        g.emit(ind, f"{t}[:1] = {g.tensor_expr(env, 1)}[:1]")
    else:
        v = g.tmp("v")
        g.emit(ind, f"{v} = {t}.transpose(0, -1)")
        g.emit(ind, f"{v}.add_(1.0)")
    return True


def masks_and_ints(g, env, ind, depth, top):
    """Bool and int tensors kept in locals (env M and J), combined and returned."""
    ms, js = env.setdefault("M", []), env.setdefault("J", [])
    t = g.pick(env["T"])
    k = g.r(0, 4)
    if top and (k == 0 or not ms and not js):
        if g.p(0.5):
            m = g.tmp("m")
            g.emit(ind, f"{m} = {t} > {g.float_expr(env)}")
            ms.append(m)
        else:
            j = g.tmp("j")
            g.emit(ind, f"{j} = ({t} * 4).long() % 5")
            js.append(j)
    elif k == 1 and ms:
        m = g.pick(ms)
        g.emit(ind, f"{m} = {m} {g.pick('|&^')} ({t} < {g.float_expr(env)})")
    elif k == 2 and js:
        j = g.pick(js)
        g.emit(ind, f"{j} = {j} * 2 + ({t} > 0).long()")
    elif k == 3 and (ms or js):
        g.emit(ind, f"{t} = {t} + {g.pick(ms + js)}")
    elif ms:
        g.emit(ind, f"{t} = {t}.masked_fill({g.pick(ms)}, {g.float_expr(env)})")
    else:
        return False
    return True


def return_types(g, env, ind, depth, top):
    """torch.return_types results kept in locals, unpacked, read by field and index."""
    ss = env.setdefault("S", [])
    t = g.pick(env["T"])
    if top and (not ss or g.p(0.4)):
        s = g.tmp("r")
        g.emit(ind, f"{s} = {g.pick(RETURN_TYPES[:2] + RETURN_TYPES[4:5])}".format(t))
        ss.append(s)
        return True
    if not ss:
        return False
    s = g.pick(ss)
    k = g.r(0, 2)
    if k == 0:
        a, b = g.tmp("t"), g.tmp("ix")
        g.emit(ind, f"{a}, {b} = {s}")
        g.emit(ind, f"{t} = {t} - {a} + {b}.to({t}.dtype)")
    elif k == 1:
        g.emit(ind, f"{t} = {t} * {s}.values + {s}[1]")
    else:
        g.emit(ind, f"{g.pick(env['I'])} = len({s}) + int(type({s}).__name__ == 'max')")
    return True


def tensor_attributes(g, env, ind, depth, top):
    """Attributes set on tensors (inputs too: the caller sees them) and read back."""
    t = g.pick(env["T"])
    k = g.r(0, 2)
    if k == 0:
        g.emit(ind, f"{t}.tag = {g.int_expr(env, 1)}")
    elif k == 1:
        g.emit(ind, f"{g.pick(env['I'])} = getattr({t}, 'tag', 0) + int(hasattr({t}, 'tag'))")
    else:
        g.emit(ind, f"{t}.note = {g.pick(env['L'] or ['[1]'])}")
    return True


def shape_reads(g, env, ind, depth, top):
    """Sizes read in Python and used for control flow and arithmetic."""
    t = g.pick(env["T"])
    if depth < g.max_depth and g.p(0.5):
        g.emit(ind, f"if {t}.shape[0] {g.pick(['>', '<', '=='])} {g.r(1, 4)}:")
        g.block(env, ind + 1, depth + 1)
        return True
    g.emit(ind, f"{g.pick(env['I'])} = ({g.pick(SHAPE_READS).format(t)} + {g.int_expr(env, 1)}) % 1000")
    return True


def dict_items(g, env, ind, depth, top):
    """Reads and writes of the dict argument, which is a plain dict or a subclass (one that
    mirrors its items as attributes, or one that overrides nothing: fuzz_harness.DICT_CLASSES)."""
    if not env.get("D"):
        return False
    d, t, i = g.pick(env["D"]), g.pick(env["T"]), g.pick(env["I"])
    k = g.r(0, 6)
    if k == 0:
        g.emit(ind, f"{d}[{g.pick(['a', 'b', 'c'])!r}] = {g.tensor_expr(env, depth + 1)}")
    elif k == 1:
        g.emit(ind, f"{d}[{g.pick(['k', 'z'])!r}] = {g.int_expr(env, 1)}")
    elif k == 2:
        g.emit(ind, f"{i} = (len({d}) + int({g.pick(['a', 'k', 'z'])!r} in {d})) % 1000")
    elif k == 3:
        g.emit(ind, f"{t} = {t} + ({d}['a'] if torch.is_tensor({d}.get('a')) else {d}.get('k', 1))")
    elif k == 4:
        g.emit(ind, f"{d}.setdefault({g.pick(['k', 'z'])!r}, {g.int_expr(env, 1)})")
    elif k == 5:
        g.emit(ind, f"{d}.pop({g.pick(['b', 'k', 'z'])!r}, None)")
    else:
        key = g.pick(["b", "k", "z"])
        g.emit(ind, f"if {key!r} in {d}:")
        g.emit(ind + 1, f"del {d}[{key!r}]")
    return True


SHAPES = {
    "user_class": user_class, "decorators": decorated_helper, "context_managers": context_manager,
    "generators": generator, "exceptions": exceptions, "exception_chains": exception_chains,
    "break_in_try": break_in_try,
    "view_mutation": view_mutation, "int_bool": masks_and_ints, "return_types": return_types,
    "tensor_attributes": tensor_attributes, "shape_reads": shape_reads, "dict_items": dict_items,
}

# Which shapes are generated. Expression-level kinds: views, cat_stack, int_bool,
# return_types, shape_reads; generator_close_throw is a part of `generators`.
# Switched off (DISABLED_WHY): shapes that find tracer bugs listed in issue 10 (Python
# semantics, the long tail), being fixed there; switch them on when that work lands.
FEATURES = {name: True for name in SHAPES}
FEATURES.update(views=True, cat_stack=True, generator_close_throw=True)
# Shapes switched off until the tracer handles what they find, each with its reason (none
# now: exception chains, return_types and tensor attributes were fixed by issue 10).
DISABLED_WHY = {}
for _name in DISABLED_WHY:
    FEATURES[_name] = False


def extra_stmt(g, env, ind, depth, top):
    """With some probability, one of the enabled shapes instead of fuzz_gen's own statements."""
    if not g.p(0.35):
        return False
    on = [name for name in SHAPES if FEATURES.get(name)]
    if not on:
        return False
    return SHAPES[g.pick(on)](g, env, ind, depth, top)


def returned_extras(g, env):
    """Extra things f may return: bool/int tensors, return_types, objects, the inputs."""
    pool = env.get("M", []) + env.get("J", []) + env.get("S", []) + env.get("O", [])
    out = []
    if pool and g.p(0.5):
        out.append(g.pick(pool))
    if g.p(0.15):
        out.append(g.pick(["lst", "d", "x"]))
    return out
