"""Random but valid Python programs over tensors and Python values, as source text.

`generate(rnd)` takes anything with `randint(a, b)`, `random()` and `choice(seq)` (a
`random.Random`, or the one hypothesis gives with `st.randoms()`, which it can shrink) and
returns the source of a module defining helpers and `f(x, y, n, s, lst, d)`:

    x, y   float tensors of one shape (every tensor value the program makes keeps that shape,
           or is a 0-d reduction mixed in by broadcasting, so ops never fail on shapes)
    n      an int, s a float
    lst    a list of ints (mutated: append/pop/setitem/extend)
    d      a dict str -> tensor or int (mutated: setitem/pop/update)

Statements: arithmetic and torch ops, locals reassigned, if/for/while over Python values,
calls to generated helpers (inlined by the tracer), closures and lambdas, list/dict/tuple
building and unpacking (starred too), in-place tensor ops (also on inputs), print to a
sink, numpy round trips, `.item()` and data-dependent branches (graph breaks),
try/except, and now and then an operation that raises in eager Python as well; exceptions
from builtin-typed values inside try, and global/container writes in loops whose body
breaks (fuzz_gen_effects.py). fuzz_shapes.py adds more shapes (user classes, decorators,
context managers, generators, exception chains, breaks inside try, views, cat/stack,
bool/int tensors, return_types, attributes on tensors, size reads, returned inputs);
fuzz_gen_semantics.py: generators consumed while containers change, exceptions chained
through finally, user context managers with breaks inside, attributes on tensors and
struct-sequence results.
"""
import fuzz_gen_effects
import fuzz_gen_semantics
import fuzz_shapes as shapes

TENSOR_UNARY = [
    "torch.sin({})", "torch.cos({})", "{}.relu()", "torch.tanh({})", "{}.abs()", "-{}",
    "torch.sigmoid({})", "{}.clamp(-2.0, 2.0)", "torch.exp({}.clamp(-3, 3))", "{}.neg()",
    "({} * 0.5)", "{}.clone()", "{}.contiguous()", "torch.nn.functional.gelu({})",
    "{}.t().t()" , "{}.float()", "torch.where({0} > 0, {0}, {0} * 0.1)",
]
TENSOR_BINARY = ["{} + {}", "{} - {}", "{} * {}", "torch.maximum({}, {})", "torch.add({}, {}, alpha=2)",
                 "torch.minimum({}, {})"]
REDUCE = ["{}.sum()", "{}.mean()", "{}.amax()", "{}.norm()", "{}.sum(dim=-1, keepdim=True)"]
INPLACE = ["{}.add_({})", "{}.mul_({})", "{}.sub_({})", "{}.clamp_(-5.0, 5.0)", "{}.relu_()", "{}.sin_()"]


class Gen:
    def __init__(self, rnd, max_depth=2):
        self.rnd = rnd
        self.max_depth = max_depth
        self.lines = []
        self.helpers = []       # (name, source lines)
        self.n_tmp = 0
        self.defined = set()    # module-level definitions made by fuzz_shapes

    # ---- small helpers -----------------------------------------------------------------
    def r(self, a, b):
        return self.rnd.randint(a, b)

    def p(self, prob):
        return self.rnd.random() < prob

    def pick(self, seq):
        return self.rnd.choice(list(seq))

    def tmp(self, prefix):
        self.n_tmp += 1
        return f"{prefix}{self.n_tmp}"

    # ---- expressions -------------------------------------------------------------------
    def int_expr(self, env, depth=0):
        if depth < 2 and env.get("T") and self.p(0.08):
            e = shapes.int_expr(self, env)
            if e:
                return e
        ints = env["I"] + env.get("R", [])
        c = self.r(0, 9 if depth < 2 else 2)
        if c <= 2 or not ints:
            return self.pick(ints) if ints and self.p(0.7) else str(self.r(-3, 9))
        a, b = self.int_expr(env, depth + 1), self.int_expr(env, depth + 1)
        if c == 3:
            return f"({a} + {b})"
        if c == 4:
            return f"(({a} * {b}) % 97)"
        if c == 5:
            return f"({a} // {self.r(1, 4)})"
        if c == 6:
            return f"{self.pick(['min', 'max'])}({a}, {b})"
        if c == 7:
            return f"len({self.pick(env['L'])})" if env["L"] else f"abs({a})"
        if c == 8:
            return f"({a} if {a} > {b} else {b} - 1)"
        return f"({a} - {b})"

    def float_expr(self, env):
        c = self.r(0, 3)
        fl = env["F"]
        if c == 0 or not fl:
            return f"{self.r(-4, 4) / 2}"
        if c == 1:
            return f"({self.pick(fl)} * 0.5 + {self.int_expr(env, 1)})"
        if c == 2:
            return f"float({self.int_expr(env, 1)})"
        return self.pick(fl)

    def scalar_expr(self, env):
        return self.int_expr(env, 1) if self.p(0.5) else self.float_expr(env)

    def tensor_expr(self, env, depth=0):
        if depth < 2 and self.p(0.12):
            e = shapes.tensor_expr(self, env, depth)
            if e:
                return e
        ts = env["T"]
        c = self.r(0, 9 if depth < 2 else 1)
        if c <= 1:
            return self.pick(ts)
        if c <= 4:
            return self.pick(TENSOR_UNARY).format(self.tensor_expr(env, depth + 1))
        if c <= 6:
            return self.pick(TENSOR_BINARY).format(self.tensor_expr(env, depth + 1),
                                                   self.tensor_expr(env, depth + 1))
        if c == 7:
            return f"({self.tensor_expr(env, depth + 1)} {self.pick('+-*')} {self.scalar_expr(env)})"
        if c == 8:
            red = self.pick(REDUCE).format(self.tensor_expr(env, depth + 1))
            return f"({self.tensor_expr(env, depth + 1)} + {red})"
        if env["H"]:
            name, kind = self.pick(env["H"])
            if kind == "TI":
                return f"{name}({self.tensor_expr(env, depth + 1)}, {self.int_expr(env, 1)})"
            return f"{name}({self.tensor_expr(env, depth + 1)})"
        return self.pick(ts)

    def cond_expr(self, env):
        c = self.r(0, 5)
        if c <= 2:
            return f"{self.int_expr(env, 1)} {self.pick(['<', '>', '==', '!=', '<=', '>='])} {self.int_expr(env, 1)}"
        if c == 3 and env["L"]:
            return f"{self.int_expr(env, 1)} in {self.pick(env['L'])}"
        if c == 4 and env["D"]:
            return f"{self.pick(['a', 'b', 'k'])!r} in {self.pick(env['D'])}"
        return f"isinstance({self.pick(env['I'] or ['1'])}, int) and {self.float_expr(env)} < 1.0"

    # ---- statements ----------------------------------------------------------------------
    def emit(self, ind, line):
        self.lines.append("    " * ind + line)

    def assign_existing(self, env, ind):
        kind = self.pick("TTTIIF")
        names = env[kind]
        if not names:
            kind, names = "T", env["T"]
        target = self.pick(names)
        expr = {"T": self.tensor_expr, "I": self.int_expr, "F": self.float_expr}[kind](env)
        if kind == "I":
            expr = f"({expr}) % 1000"
        self.emit(ind, f"{target} = {expr}")

    def stmt(self, env, ind, depth, top):
        """One statement; `top` statements may create new locals (visible afterwards)."""
        if shapes.extra_stmt(self, env, ind, depth, top):
            return
        if fuzz_gen_semantics.FOCUS is not None and self.p(0.3):
            return fuzz_gen_semantics.FOCUS(self, env, ind, depth)
        c = self.r(0, 29)
        if c <= 5:
            if top and self.p(0.5):
                kind = self.pick("TTI")
                name = self.tmp("t" if kind == "T" else "i")
                expr = self.tensor_expr(env) if kind == "T" else f"({self.int_expr(env)}) % 1000"
                self.emit(ind, f"{name} = {expr}")
                env[kind].append(name)
            else:
                self.assign_existing(env, ind)
        elif c == 6 and depth < self.max_depth:
            self.emit(ind, f"if {self.cond_expr(env)}:")
            self.block(env, ind + 1, depth + 1)
            if self.p(0.6):
                self.emit(ind, "else:")
                self.block(env, ind + 1, depth + 1)
        elif c == 7 and depth < self.max_depth:
            var = self.tmp("k")
            src = self.pick(["range", "list", "enum", "dict", "zip"])
            if src == "range" or not env["L"]:
                self.emit(ind, f"for {var} in range(({self.int_expr(env, 1)}) % 4):")
            elif src == "list":
                self.emit(ind, f"for {var} in {self.pick(env['L'])}[:{self.r(1, 5)}]:")
            elif src == "enum":
                j = self.tmp("j")
                self.emit(ind, f"for {j}, {var} in enumerate({self.pick(env['L'])}[:3]):")
            elif src == "zip":
                j = self.tmp("j")
                self.emit(ind, f"for {j}, {var} in zip(range(3), {self.pick(env['L'])}):")
            else:
                dname = self.pick(env["D"])
                kk = self.tmp("kk")
                self.emit(ind, f"for {kk} in list({dname}):")
                self.emit(ind + 1, f"{var} = len({kk})")
            inner = dict(env, I=env["I"] + [var])
            self.block(inner, ind + 1, depth + 1)
        elif c == 8 and depth < self.max_depth:
            w = self.tmp("w")
            self.emit(ind, f"{w} = 0")
            self.emit(ind, f"while {w} < {self.r(1, 3)}:")
            self.emit(ind + 1, f"{w} += 1")
            inner = dict(env, R=env.get("R", []) + [w])  # read-only: the loop must end
            self.block(inner, ind + 1, depth + 1, allow_break=True)
        elif c == 9 and top:
            # a closure over locals, called (maybe twice), or a lambda
            fn = self.tmp("inner")
            t, i = self.pick(env["T"]), self.pick(env["I"])
            if self.p(0.5):
                self.emit(ind, f"def {fn}(a):")
                self.emit(ind + 1, f"return a * {i} + {t}")
            else:
                self.emit(ind, f"{fn} = lambda a, b=2: a * b - {t}")
            target = self.pick(env["T"])
            self.emit(ind, f"{target} = {fn}({self.tensor_expr(env, 1)})")
        elif c == 10 and top:
            # build and unpack
            kind = self.r(0, 3)
            a, b = self.pick(env["T"]), self.pick(env["I"])
            if kind == 0:
                tup = self.tmp("tup")
                self.emit(ind, f"{tup} = ({a}, {b}, [{b}, {self.int_expr(env, 1)}])")
                ta, ib, lc = self.tmp("t"), self.tmp("i"), self.tmp("l")
                self.emit(ind, f"{ta}, {ib}, {lc} = {tup}")
                env["T"].append(ta), env["I"].append(ib), env["L"].append(lc)
            elif kind == 1 and env["L"]:
                first, rest = self.tmp("i"), self.tmp("l")
                src = self.pick(env["L"])
                self.emit(ind, f"{first}, *{rest} = {src} + [{b}]")
                env["I"].append(first), env["L"].append(rest)
            elif kind == 2:
                dd = self.tmp("dd")
                self.emit(ind, f"{dd} = {{'a': {a}, 'b': {b}, 'k': {self.tensor_expr(env, 1)}}}")
                env["D"].append(dd)
                tt = self.tmp("t")
                self.emit(ind, f"{tt} = {dd}['a'] + {dd}['k']")
                env["T"].append(tt)
            else:
                ll = self.tmp("l")
                self.emit(ind, f"{ll} = [{self.int_expr(env, 1)} for _ in range(3)] + sorted({self.pick(env['L'] or ['[]'])})")
                env["L"].append(ll)
        elif c == 11:
            # mutate a list
            lname = self.pick(env["L"])
            op = self.r(0, 4)
            if op == 0:
                self.emit(ind, f"{lname}.append({self.int_expr(env, 1)})")
            elif op == 1:
                self.emit(ind, f"if {lname}:")
                self.emit(ind + 1, f"{self.pick(env['I'])} = {lname}.pop()")
            elif op == 2:
                self.emit(ind, f"if {lname}:")
                self.emit(ind + 1, f"{lname}[0] = {self.int_expr(env, 1)}")
            elif op == 3:
                self.emit(ind, f"{lname}.extend([{self.int_expr(env, 1)}, 1])")
            else:
                self.emit(ind, f"{lname}.insert(0, {self.int_expr(env, 1)})")
        elif c == 12:
            dname = self.pick(env["D"])
            op = self.r(0, 3)
            key = self.pick(["a", "b", "k", "z"])
            if op == 0:
                self.emit(ind, f"{dname}[{key!r}] = {self.tensor_expr(env, 1)}")
            elif op == 1:
                self.emit(ind, f"{dname}.pop({key!r}, None)")
            elif op == 2:
                self.emit(ind, f"{dname}.update({key}={self.int_expr(env, 1)})")
            else:
                self.emit(ind, f"{self.pick(env['I'])} = len({dname}) + int({key!r} in {dname})")
        elif c == 13:
            tname = self.pick(env["T"])
            op = self.pick(INPLACE)
            arg = self.pick([self.float_expr(env), self.pick(env["T"])]) if op.count("{}") == 2 else ""
            self.emit(ind, op.format(tname, arg) if arg else op.format(tname))
        elif c == 14:
            # graph breaks: print, numpy, item, data-dependent branch
            k = self.r(0, 4)
            if k == 0:
                self.emit(ind, f"print('v', {self.int_expr(env, 1)}, file=SINK)")
            elif k == 1:
                t = self.pick(env["T"])
                self.emit(ind, f"{t} = torch.from_numpy(np.asarray({t}.detach().numpy() * 2.0))")
            elif k == 2:
                self.emit(ind, f"{self.pick(env['I'])} = int(np.int64({self.int_expr(env, 1)}) + 1)")
            elif k == 3 and depth < self.max_depth:
                self.emit(ind, f"if {self.pick(env['T'])}.sum() > 0:")
                self.block(env, ind + 1, depth + 1)
                self.emit(ind, "else:")
                self.block(env, ind + 1, depth + 1)
            else:
                target = self.pick(env['F'] or env['I'])
                self.emit(ind, f"{target} = {'round' if env['F'] else 'int'}({self.pick(env['T'])}.sum().item())")
        elif c == 15:
            k = self.r(0, 3)
            i = self.pick(env["I"])
            self.emit(ind, "try:")
            if k == 0 and env["L"]:
                self.emit(ind + 1, f"{i} = {self.pick(env['L'])}[{self.int_expr(env, 1)} % 6]")
                self.emit(ind, "except IndexError:")
            elif k == 1:
                self.emit(ind + 1, f"{i} = {self.int_expr(env, 1)} // ({i} - {i})")
                self.emit(ind, "except ZeroDivisionError as e:")
                self.emit(ind + 1, "print('zd', type(e).__name__, file=SINK)")
            elif k == 2:
                self.emit(ind + 1, f"{self.pick(env['T'])} = {self.pick(env['D'])}['missing']")
                self.emit(ind, "except KeyError:")
            else:
                self.emit(ind + 1, f"{self.pick(env['T'])} = {self.tensor_expr(env, 1)}")
                self.emit(ind + 1, f"if {self.cond_expr(env)}:")
                self.emit(ind + 2, "raise ValueError('boom')")
                self.emit(ind, "except ValueError:")
            self.emit(ind + 1, f"{i} = {self.int_expr(env, 1)} % 1000")
        elif c == 16 and self.p(0.15):
            # an operation that may raise in eager Python too (the exception must match)
            k = self.r(0, 2)
            if k == 0 and env["L"]:
                self.emit(ind, f"{self.pick(env['I'])} = {self.pick(env['L'])}[{self.r(2, 5)}]")
            elif k == 1:
                self.emit(ind, f"{self.pick(env['T'])} = {self.pick(env['D'])}['b'] + {self.pick(env['T'])}")
            else:
                self.emit(ind, f"if {self.cond_expr(env)}:")
                self.emit(ind + 1, "raise RuntimeError('user error')")
        elif c == 17:
            # global read/write
            self.emit(ind, f"{self.pick(env['I'])} = COUNTER[0] + {self.int_expr(env, 1)}")
            if self.p(0.3):
                self.emit(ind, "COUNTER[0] += 1")
        elif c == 18:
            self.emit(ind, f"with torch.no_grad():")
            self.emit(ind + 1, f"{self.pick(env['T'])} = {self.tensor_expr(env, 1)}")
        elif c == 19:
            fuzz_gen_effects.exceptions_from_builtins(self, env, ind, depth)
        elif c == 20 and depth == 0:  # (nested in another loop: too many traces per program)
            fuzz_gen_effects.writes_in_breaking_loop(self, env, ind, depth)
        elif c == 21:
            fuzz_gen_semantics.statement(self, env, ind, depth)
        else:
            self.assign_existing(env, ind)

    def block(self, env, ind, depth, allow_break=False):
        inner = {k: list(v) for k, v in env.items()}  # names made inside are not used after
        for _ in range(self.r(1, 3)):
            self.stmt(inner, ind, depth, top=False)
        if allow_break and self.p(0.2):
            self.emit(ind, f"if {self.cond_expr(inner)}:")
            self.emit(ind + 1, self.pick(["break", "continue"]))

    def helper(self, idx, env_h):
        name = f"helper{idx}"
        saved = self.lines
        self.lines = []
        kind = self.pick(["TI", "T"])
        params = "a, m" if kind == "TI" else "a, m=3"
        self.emit(0, f"def {name}({params}):")
        self.emit(1, "hl = [m, 1]")
        self.emit(1, "hd = {'a': a, 'b': m}")
        env = {"T": ["a"], "I": ["m"], "F": [], "L": ["hl"], "D": ["hd"], "H": list(env_h)}
        for _ in range(self.r(1, 4)):
            self.stmt(env, 1, 1, top=True)
        self.emit(1, f"return {self.tensor_expr(env, 1)}")
        lines, self.lines = self.lines, saved
        self.helpers.append(lines)
        return name, kind

    def program(self):
        hs = []
        for i in range(self.r(0, 3)):
            hs.append(self.helper(i, hs))
        self.lines = []
        self.emit(0, "def f(x, y, n, s, lst, d):")
        env = {"T": ["x", "y"], "I": ["n"], "F": ["s"], "L": ["lst"], "D": ["d"], "H": hs}
        for _ in range(self.r(2, 10)):
            self.stmt(env, 1, 0, top=True)
        outs = [self.pick(env["T"])] + [self.pick(env[k]) for k in self.rnd.choice(["", "I", "TI", "TLF", "DI"])]
        outs += shapes.returned_extras(self, env)
        if self.p(0.2):
            self.emit(1, f"return {{'out': {outs[0]}, 'rest': [{', '.join(outs[1:])}]}}")
        else:
            self.emit(1, f"return ({', '.join(outs)},)")
        body = []
        for h in self.helpers:
            body += h + [""]
        return "\n".join(["import contextlib", "import functools", "import torch", "import numpy as np",
                          "", *body, *self.lines, ""])


def generate(rnd, max_depth=2):
    return Gen(rnd, max_depth).program()


if __name__ == "__main__":
    import random
    import sys
    print(generate(random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)))
