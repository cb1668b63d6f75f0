"""Program shapes for fuzz_gen.Gen from issue 10 (Python semantics, the long tail).

* `generators_and_containers`: generators consumed while the containers they read change
  (list.extend of a generator over the list itself, a loop that appends to the list a
  generator reads), generators dropped half-way inside try/finally, send/close.
* `exception_chains`: exceptions raised in except and finally blocks, bare `raise` after a
  nested handled exception, `raise ... from`, the chain printed (`__context__`/`__cause__`),
  sometimes with a graph break inside the handler.
* `user_context_managers`: `with` over a class-based manager, a @contextlib.contextmanager one
  and an exception-suppressing one, nested, sometimes with a graph break inside the block.
* `tensor_attributes`: Python attributes set on tensors and read back (hasattr/getattr), also
  across a helper that breaks (so it is traced as its own frame, with the attribute's presence
  guarded).
* `structseq_results`: torch.max/min(dim), sort, topk results read by field and unpacked.
* `library_objects` (issue 35's wrong values, as shapes): functools.partial objects called and
  asked for attributes they do not have (`__name__`), deques with a maxlen grown at both ends
  and rotated, an attribute set on a NamedTuple subclass instance (its methods and `_replace`
  called), a data descriptor with only
  `__set__` read back, `dict.fromkeys` with one shared value, a class whose own `__new__`
  sometimes returns another object (then `__init__` does not run), builtin methods called
  through their class (`list.append(xs, v)`, `dict.get(d, k)`, `str.join(sep, parts)`).
* `numpy_arrays` (issue 35, NumPy traced as tensors): NumPy code on a tensor's values, in-place
  writes through an array sharing a tensor's memory, NumPy scalars, constant calls.
* `object_keys` (issue 35): sets of tensors made in the frame, a defaultdict keyed by a tensor
  read and written on every call, objects with `__slots__`.

`statement(g, env, ind, depth)` picks one; each emits lines with `g.emit`. What they need at
module level (manager classes, `import contextlib`) is added once per program to
`g.helpers`. Output goes to `SINK` and `COUNTER` (made and compared by the harness).
"""

_MODULE_LINES = [
    "import contextlib",
    "",
    "class RecCM:",
    "    def __init__(self, tag):",
    "        self.tag = tag",
    "    def __enter__(self):",
    "        print('enter', self.tag, file=SINK)",
    "        return self",
    "    def __exit__(self, typ, value, tb):",
    "        print('exit', self.tag, typ.__name__ if typ else None, file=SINK)",
    "        return False",
    "",
    "class SuppressCM:",
    "    def __enter__(self):",
    "        return self",
    "    def __exit__(self, typ, value, tb):",
    "        if typ is not None:",
    "            print('suppressed', typ.__name__, file=SINK)",
    "        return typ is not None and issubclass(typ, (KeyError, IndexError))",
    "",
    "@contextlib.contextmanager",
    "def gen_cm(tag):",
    "    print('setup', tag, file=SINK)",
    "    try:",
    "        yield tag * 2",
    "    finally:",
    "        print('teardown', tag, file=SINK)",
    "",
    "def tag_of(a):",
    "    print('tag_of', file=SINK)",
    "    return getattr(a, 'tag', -1) + (10 if hasattr(a, 'tag') else 0)",
    "",
    "import collections, functools, typing",
    "",
    "class Pair(typing.NamedTuple):",
    "    a: int",
    "    b: int",
    "",
    "class PairX(Pair):",
    "    def tot(self):",
    "        return self.a * 2 + self.b",
    "",
    "class SetOnly:",
    "    def __set__(self, obj, v):",
    "        obj.__dict__['_v'] = v",
    "",
    "class HasSetOnly:",
    "    d = SetOnly()",
    "",
    "def add3(a, b, c=1):",
    "    return a + b * c",
    "",
    "class SlotPair:",
    "    __slots__ = ('a', '__b')",
    "    def __init__(self, a, b):",
    "        self.a = a",
    "        self.__b = b",
    "    def both(self):",
    "        return self.a + self.__b",
    "",
    "class CountTo:",
    "    def __init__(self, n):",
    "        self.n, self.i = n, 0",
    "    def __iter__(self):",
    "        return self",
    "    def __next__(self):",
    "        if self.i >= self.n:",
    "            raise StopIteration",
    "        self.i += 1",
    "        return self.i",
    "",
    "W_KEY = torch.ones(2)",
    "KEYED_STATE = collections.defaultdict(dict)",
    "KEYED_STATE[W_KEY].update(n=torch.zeros(()), w=torch.ones(()))  # keyed from the first call",
    "",
    "class NewV:",
    "    def __new__(cls, v, w=0):",
    "        o = super().__new__(cls)",
    "        o.v = v",
    "        return o if v % 3 else v + w",
    "    def __init__(self, v, w=0):",
    "        self.w = w",
]


def _module_helpers(g):
    if not g.__dict__.get("_semantics_module"):
        g._semantics_module = True
        g.helpers.insert(0, list(_MODULE_LINES))


def _break_line(g, env):
    """A statement that is a graph break (print, .item() steering a value, numpy)."""
    i = g.pick(env["I"])
    return g.pick([f"print('b', {i}, file=SINK)",
                   f"{i} = int({g.pick(env['T'])}.sum().item() > 0) + {i}",
                   f"{i} = int(np.int64({i}) + 1)"])


def generators_and_containers(g, env, ind, depth):
    lst = g.pick(env["L"])
    i = g.pick(env["I"])
    k = g.r(0, 4)
    if k == 0:
        g.emit(ind, f"if {lst}:")
        g.emit(ind + 1, f"{lst}.extend({lst}[-1] + z for z in range({g.r(1, 3)}))")
    elif k == 1:
        gen = g.tmp("gen")
        g.emit(ind, f"def {gen}(src):")
        g.emit(ind + 1, "for v in src:")
        g.emit(ind + 2, "yield v * 2")
        v = g.tmp("v")
        g.emit(ind, f"for {v} in {gen}({lst}):")
        g.emit(ind + 1, f"COUNTER.append({v})")
        g.emit(ind + 1, f"if len({lst}) < 6:")
        g.emit(ind + 2, f"{lst}.append({v} % 5)")
    elif k == 2:
        gen = g.tmp("gen")
        g.emit(ind, f"def {gen}(m):")
        g.emit(ind + 1, "try:")
        g.emit(ind + 2, "for v in range(m):")
        g.emit(ind + 3, "yield v")
        g.emit(ind + 1, "finally:")
        g.emit(ind + 2, "print('gen finally', m, file=SINK)")
        it = g.tmp("it")
        g.emit(ind, f"{it} = {gen}({g.r(1, 4)})")
        g.emit(ind, f"{i} = next({it}) + {i}")
        if g.p(0.4):
            g.emit(ind, _break_line(g, env))
        g.emit(ind, g.pick([f"{it} = None", f"{it}.close()", f"{i} = sum({it}) + {i}"]))
        g.emit(ind, "print('after gen', file=SINK)")
    elif k == 3:
        gen = g.tmp("gen")
        g.emit(ind, f"def {gen}():")
        g.emit(ind + 1, "total = 0")
        g.emit(ind + 1, "while True:")
        g.emit(ind + 2, "got = yield total")
        g.emit(ind + 2, "if got is None:")
        g.emit(ind + 3, "return total")
        g.emit(ind + 2, "total += got")
        it = g.tmp("it")
        g.emit(ind, f"{it} = {gen}()")
        g.emit(ind, f"next({it})")
        g.emit(ind, f"{i} = {it}.send({g.int_expr(env, 1)}) + {it}.send(2)")
        g.emit(ind, "try:")
        g.emit(ind + 1, f"next({it})")
        g.emit(ind, "except StopIteration as e:")
        g.emit(ind + 1, f"{i} = e.value % 1000")
    else:
        g.emit(ind, f"{i} = len([w for w in (u * 2 for u in {lst}) if w > {g.int_expr(env, 1)}]) + {i}")


def exception_chains(g, env, ind, depth):
    i = g.pick(env["I"])
    k = g.r(0, 3)
    first = g.pick(["raise ValueError('a')", f"{g.pick(env['D'])}['nope']", f"[][{i}]"])
    g.emit(ind, "try:")
    if k == 0:  # raised in a finally block: its __context__ is the first exception
        g.emit(ind + 1, "try:")
        g.emit(ind + 2, first)
        g.emit(ind + 1, "finally:")
        g.emit(ind + 2, f"COUNTER.append({i})")
        if g.p(0.4):
            g.emit(ind + 2, _break_line(g, env))
        g.emit(ind + 2, "raise RuntimeError('fin')")
    elif k == 1:  # bare raise after a nested handled exception
        g.emit(ind + 1, "try:")
        g.emit(ind + 2, first)
        g.emit(ind + 1, "except (ValueError, KeyError, IndexError):")
        g.emit(ind + 2, "try:")
        g.emit(ind + 3, "raise TypeError('inner')")
        g.emit(ind + 2, "except TypeError:")
        g.emit(ind + 3, f"{i} = {i} + 1")
        if g.p(0.4):
            g.emit(ind + 2, _break_line(g, env))
        g.emit(ind + 2, "raise")
    elif k == 2:  # raise ... from
        g.emit(ind + 1, "try:")
        g.emit(ind + 2, first)
        g.emit(ind + 1, "except Exception as inner:")
        g.emit(ind + 2, g.pick(["raise RuntimeError('wrapped') from inner",
                                "raise RuntimeError('wrapped') from None"]))
    else:  # raised in an except block: implicit chaining
        g.emit(ind + 1, "try:")
        g.emit(ind + 2, first)
        g.emit(ind + 1, "except Exception:")
        if g.p(0.4):
            g.emit(ind + 2, _break_line(g, env))
        g.emit(ind + 2, "raise RuntimeError('during')")
    g.emit(ind, "except Exception as e:")
    g.emit(ind + 1, "print('chain', type(e).__name__, type(e.__context__).__name__, "
                    "type(e.__cause__).__name__, e.__suppress_context__, file=SINK)")
    g.emit(ind + 1, f"{i} = len(str(e)) + {i}")


def user_context_managers(g, env, ind, depth):
    _module_helpers(g)
    t, i = g.pick(env["T"]), g.pick(env["I"])
    k = g.r(0, 3)
    if k == 0:
        g.emit(ind, f"with RecCM({g.r(0, 9)}) as cm:")
    elif k == 1:
        v = g.tmp("cmv")
        g.emit(ind, f"with gen_cm({g.r(0, 9)}) as {v}:")
        g.emit(ind + 1, f"{i} = {v} + {i}")
    elif k == 2:
        g.emit(ind, "with SuppressCM():")
    else:
        g.emit(ind, f"with RecCM('outer'), gen_cm({g.r(0, 9)}):")
    g.emit(ind + 1, f"{t} = {g.tensor_expr(env, 1)}")
    if g.p(0.5):
        g.emit(ind + 1, _break_line(g, env))
        g.emit(ind + 1, f"{t} = {t} * 2")
    if k == 2 or g.p(0.2):
        g.emit(ind + 1, f"if {g.cond_expr(env)}:")
        g.emit(ind + 2, g.pick(["raise KeyError('k')", f"{i} = [][{i}]"]))
    if k != 2 and g.p(0.2):
        # an exception that escapes the managers: caught here
        g.emit(ind, "try:")
        g.emit(ind + 1, f"with RecCM('raising'):")
        g.emit(ind + 2, "raise ValueError('through')")
        g.emit(ind, "except ValueError:")
        g.emit(ind + 1, f"{i} = {i} - 1")


def tensor_attributes(g, env, ind, depth):
    _module_helpers(g)
    t, i = g.pick(env["T"]), g.pick(env["I"])
    k = g.r(0, 2)
    if k == 0:
        g.emit(ind, f"if {g.cond_expr(env)}:")
        g.emit(ind + 1, f"{t}.tag = {g.int_expr(env, 1)}")
        g.emit(ind, f"{i} = (getattr({t}, 'tag', 0) + {i}) % 1000")
    elif k == 1:
        g.emit(ind, f"{i} = tag_of({t}) + {i}")  # a helper that breaks: traced as its own frame
    else:
        g.emit(ind, f"if hasattr({t}, 'tag'):")
        g.emit(ind + 1, f"{t} = {t} + {t}.tag")
        g.emit(ind, "else:")
        g.emit(ind + 1, f"{t} = {t} - 1")


def structseq_results(g, env, ind, depth):
    t = g.pick(env["T"])
    k = g.r(0, 3)
    src = g.tensor_expr(env, 1)
    if k == 0:
        r = g.tmp("r")
        g.emit(ind, f"{r} = torch.{g.pick(['max', 'min'])}({src}, {g.pick(['-1', 'dim=-1'])})")
        g.emit(ind, f"{t} = {t} + {r}.values.unsqueeze(-1) - {r}.indices.unsqueeze(-1).float()")
    elif k == 1:
        vals, idx = g.tmp("vals"), g.tmp("idx")
        g.emit(ind, f"{vals}, {idx} = torch.sort({src}, descending={g.pick(['True', 'False'])})")
        g.emit(ind, f"{t} = {vals} * 0.5 + {idx}.float()")
    elif k == 2:
        r = g.tmp("r")
        g.emit(ind, f"{r} = torch.topk({src}, 1, dim=-1)")
        g.emit(ind, f"{t} = {t} * {r}[0] + {r}.indices")
    else:
        r = g.tmp("r")
        g.emit(ind, f"{r} = {src}.{g.pick(['max', 'min', 'median'])}(dim=-1, keepdim=True)")
        g.emit(ind, f"{t} = {t} - {r}.values")


def library_objects(g, env, ind, depth):
    _module_helpers(g)
    i, t = g.pick(env["I"]), g.pick(env["T"])
    k = g.r(0, 6)
    if k == 6:  # builtin methods read off their class: list.append(xs, v), dict.get(d, k)...
        xs, d = g.tmp("xs"), g.tmp("d")
        g.emit(ind, f"{xs} = [{i}, 1]")
        g.emit(ind, f"list.append({xs}, {g.int_expr(env)})")
        g.emit(ind, f"{d} = {{'a': {i}}}")
        g.emit(ind, f"dict.__setitem__({d}, 'b', {t} * 2)")
        g.emit(ind, f"{i} = (sum({xs}) + dict.get({d}, 'a', 0) + dict.get({d}, 'z', 3)"
                    f" + len(str.join(',', ['a', 'b']))) % 1000")
        g.emit(ind, f"{t} = {t} + dict.get({d}, 'b', {t})")
    elif k == 5:
        o = g.tmp("nv")
        g.emit(ind, f"{o} = NewV({i}, {g.int_expr(env)})")
        g.emit(ind, f"{i} = ({o} if isinstance({o}, int) else {o}.v + {o}.w) % 1000")
    elif k == 0:
        p = g.tmp("p")
        g.emit(ind, f"{p} = functools.partial(add3, {g.int_expr(env)}{g.pick(['', ', c=2'])})")
        g.emit(ind, f"{i} = ({p}({g.int_expr(env)}) + hasattr({p}, '__name__') + 2 * hasattr({p}, '__qualname__')"
                    f" + 4 * hasattr({p}, 'func') + len({p}.args) + len({p}.keywords)) % 1000")
    elif k == 1:
        dq = g.tmp("dq")
        g.emit(ind, f"{dq} = collections.deque([{i}, 2], maxlen={g.r(2, 4)})")
        g.emit(ind, f"{dq}.{g.pick(['extendleft', 'extend'])}([{g.int_expr(env)}, 3])")
        g.emit(ind, f"{dq}.appendleft({g.r(0, 9)})")
        g.emit(ind, f"{dq}.rotate({g.r(-1, 1)})")
        g.emit(ind, f"{i} = (sum({dq}) + {dq}[0] * 3 + len({dq})) % 1000")
    elif k == 2:
        n = g.tmp("nt")
        g.emit(ind, f"{n} = PairX({i}, 2)")
        g.emit(ind, f"if {g.cond_expr(env)}:")
        g.emit(ind + 1, f"{n}.extra = {g.int_expr(env)}")
        g.emit(ind, f"{i} = ({n}.a + getattr({n}, 'extra', 7) + len({n}) + {n}.tot()"
                    f" + {n}._replace(b={g.r(0, 3)}).tot()) % 1000")
    elif k == 3:
        h = g.tmp("h")
        g.emit(ind, f"{h} = HasSetOnly()")
        g.emit(ind, f"if {g.cond_expr(env)}:")
        g.emit(ind + 1, f"{h}.d = {i}")
        g.emit(ind, f"{i} = ({i} + (type({h}.d).__name__ == 'SetOnly') + len(vars({h}))) % 1000")
    else:
        fk = g.tmp("fk")
        keys = g.pick(["['a', 'b']", "'ab'", "('a',)"])
        g.emit(ind, f"{fk} = dict.fromkeys({keys}, {g.int_expr(env)})")
        g.emit(ind, f"{fk}['a'] += 1")
        g.emit(ind, f"{i} = ({i} + sum({fk}.values()) + len({fk})) % 1000")
        g.emit(ind, f"{t} = {t} * len({fk})")


def object_keys(g, env, ind, depth):
    """Objects compared by identity as keys and members (issue 35): a set made in the frame
    holding tensors (add, discard, `in`, len; never iterated), a module-level defaultdict
    keyed by a module-level tensor read and written on every call (so warm calls read it
    keyed: guards.sources.KeyedItemSource), an object with __slots__ made in the frame, an
    object that is its own iterator."""
    _module_helpers(g)
    i, t = g.pick(env["I"]), g.pick(env["T"])
    t2 = g.pick(env["T"])
    k = g.r(0, 3)
    if k == 3:  # an object that is its own iterator, drained and looped over
        c = g.tmp("ct")
        g.emit(ind, f"{c} = CountTo({i} % 4)")
        g.emit(ind, f"{i} = (sum(list({c})) + sum(v for v in CountTo(2)) + {c}.i + {i}) % 1000")
    elif k == 0:
        s = g.tmp("s")
        g.emit(ind, f"{s} = {{{t}}}")
        g.emit(ind, f"{s}.add({t2})")
        g.emit(ind, f"if {t2} in {s}:")
        g.emit(ind + 1, f"{i} = ({i} + len({s})) % 1000")
        g.emit(ind, f"{s}.discard({g.pick([t, t2])})")
        g.emit(ind, f"{i} = ({i} + 3 * len({s}) + 5 * ({t} in {s})) % 1000")
    elif k == 1:
        st = g.tmp("st")
        # (a tensor count: an int changed on every call would be specialised, one trace per value)
        # (the counter changes on every call, so it feeds nothing: the same inputs must give
        # the same values, which the harness checks; 'w' is rewritten with its own value)
        g.emit(ind, f"{st} = KEYED_STATE[W_KEY]")
        g.emit(ind, f"{st}['n'] = {st}.get('n', torch.zeros(())) + 1")
        g.emit(ind, f"{st}['w'] = {st}.get('w', torch.ones(())) * 1")
        g.emit(ind, f"if W_KEY in KEYED_STATE and {g.cond_expr(env)}:")
        g.emit(ind + 1, f"{t} = {t} + KEYED_STATE[W_KEY]['w'] * {g.r(1, 3)}")
        g.emit(ind, f"{i} = ({i} + len(KEYED_STATE)) % 1000")
    else:
        o = g.tmp("sp")
        g.emit(ind, f"{o} = SlotPair({t}, {g.int_expr(env)})")
        g.emit(ind, f"if {g.cond_expr(env)}:")
        g.emit(ind + 1, f"del {o}.a")
        g.emit(ind + 1, f"{o}.a = {t} * 2")
        g.emit(ind, f"{t} = {o}.both() + hasattr({o}, 'z')")


def numpy_arrays(g, env, ind, depth):
    """NumPy on a tensor's values (traced through torch._numpy): ufuncs, reductions with
    axes, indexing, dtype casts, NumPy scalars in promotion, in-place writes through an array
    that shares a tensor's memory, constant calls folded, data-dependent reads (breaks)."""
    t, i = g.pick(env["T"]), g.pick(env["I"])
    a = g.tmp("a")
    g.emit(ind, f"{a} = ({g.tensor_expr(env, 1)}).detach().numpy()")
    k = g.r(0, 7)
    if k == 0:
        g.emit(ind, f"{a} = np.{g.pick(['sin', 'tanh', 'abs', 'cos'])}({a}) * {g.float_expr(env)}"
                    f" + np.{g.pick(['float32', 'float64'])}({g.r(0, 3)})")
    elif k == 1:
        red = g.pick(["sum", "mean", "max", "min", "std"])
        g.emit(ind, f"{a} = {a} - np.{red}({a}, axis=-1, keepdims=True)")
    elif k == 2:  # the array is the tensor's memory: the write changes the tensor
        v = g.tmp("v")
        g.emit(ind, f"{t} = {t}.detach().clone()")
        g.emit(ind, f"{v} = {t}.numpy()")
        g.emit(ind, f"{v}[..., {g.pick(['0', '-1', '::2'])}] {g.pick(['+=', '*=', '='])} {g.float_expr(env)}")
    elif k == 3:  # a data-dependent read: a graph break
        g.emit(ind, f"{i} = (int(np.argmax({a}.reshape(-1))) + {i}) % 1000")
    elif k == 4:  # constants: NumPy's own value at trace time
        g.emit(ind, f"{i} = int(np.float64({i}) * 2 + np.sqrt(4.0) + np.int64(3) // 2) % 1000")
    elif k == 5:
        g.emit(ind, f"{a} = np.where({a} > 0, {a}, 0.5 * {a})[..., ::-1].copy()")
    elif k == 6:
        g.emit(ind, f"{a} = (({a} * 4).astype(np.int64) // 3 + np.int32(1)).astype(np.float32)")
    else:  # a NumPy scalar beside a tensor
        g.emit(ind, f"{t} = {t} * np.{g.pick(['mean', 'max', 'sum'])}(np.abs({a}) + 1) / {a}.size")
    g.emit(ind, f"{t} = {t} + torch.from_numpy(np.ascontiguousarray({a})).to({t}.dtype)")


KINDS = (generators_and_containers, exception_chains, user_context_managers, tensor_attributes,
         structseq_results, library_objects)
# Shapes made only when asked for (`long_run.py --focus numpy_arrays`, or `--enable all`): the
# CI suite's 40 programs stay the ones its capture thresholds were measured on.
OPTIONAL = (numpy_arrays, object_keys)
USE_OPTIONAL = False


FOCUS = None  # one shape made about a third of all statements (long_run.py --focus)


def focus(name):
    global FOCUS
    FOCUS = {k.__name__: k for k in KINDS + OPTIONAL}[name]


def statement(g, env, ind, depth):
    g.pick(KINDS + OPTIONAL if USE_OPTIONAL else KINDS)(g, env, ind, depth)
