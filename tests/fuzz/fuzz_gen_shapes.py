"""Dynamic-shapes fuzz profile: programs that compute with sizes, and call sequences whose
sizes change (issue 12).

`generate_shapes(rnd)` returns the source of a module defining `f(x, y, n)`: `x` a float
tensor (B, C), `y` a tensor meant to broadcast against it (but not always able to), `n` an
int. The body reads sizes (`x.shape[0]`, `x.size(1)`, `len(x)`, `x.numel()`), computes with
them (`//`, `%`, `*`, `-`, `** 0.5`, `max`, `min`, `abs`), branches on them, and uses them
in torch calls (`view`, `reshape`, `arange`, `zeros`, `new_zeros(x.shape)`, slicing by a
size, `cat`, `expand`), in `range()` and `int()` (specialisation), in Python values that are
returned, and across graph breaks (`print`, `.item()`, rows picked by value, whose number
comes from the data, and a callee that breaks and returns: the sizes handed on across breaks,
tracer/rewrite/handoff.py).

`sequences(rnd)` gives the calls to make, each a list of (x, y, n): sizes 0, 1, 2 and large;
growing and shrinking; two inputs whose sizes are equal then differ; broadcasting that holds
for one size only; a changing int. Every call is compared with eager (fuzz_shapes_check.py).
"""
import torch

# ---- program text -----------------------------------------------------------------------

_INT_LEAVES = ["b", "c", "k", "m", "n"]


class ShapeGen:
    def __init__(self, rnd):
        self.rnd = rnd
        self.lines = []
        self.ints = list(_INT_LEAVES)
        self.n_tmp = 0

    def r(self, a, b):
        return self.rnd.randint(a, b)

    def p(self, prob):
        return self.rnd.random() < prob

    def pick(self, seq):
        return self.rnd.choice(list(seq))

    def tmp(self):
        self.n_tmp += 1
        return f"i{self.n_tmp}"

    def int_expr(self, depth=0):
        c = self.r(0, 10 if depth < 2 else 1)
        if c <= 1:
            return self.pick(self.ints) if self.p(0.8) else str(self.r(0, 5))
        a, b = self.int_expr(depth + 1), self.int_expr(depth + 1)
        return {
            2: f"({a} + {b})", 3: f"({a} * {b})", 4: f"({a} // {self.r(1, 4)})",
            5: f"({a} % {self.r(2, 5)})", 6: f"max({a}, {b})", 7: f"min({a}, {b})",
            8: f"abs({a} - {b})", 9: f"(-{a})", 10: f"({a} - {b})",
        }[c]

    def small(self):
        """An int expression that is >= 1 (for sizes and slice ends)."""
        return f"max({self.int_expr()}, 1)"

    def cond(self):
        a, b = self.int_expr(1), self.int_expr(1)
        return self.pick([f"{a} > {b}", f"{a} == {b}", f"{a} <= {self.r(0, 6)}", f"{a} % 2 == 0",
                          f"{a} != {b}", f"b > {self.r(1, 8)}", f"m >= {self.r(0, 40)}"])

    def stmt(self, ind, depth=0):
        pad = "    " * ind
        c = self.r(0, 27)
        if c == 0:
            name = self.tmp()
            self.lines.append(f"{pad}{name} = {self.int_expr()}")
            self.ints.append(name)
        elif c == 1:
            self.lines.append(f"{pad}out = out + {self.int_expr()}")
        elif c == 2:
            self.lines.append(f"{pad}out = out * (abs({self.int_expr()}) ** 0.5)")
        elif c == 3:
            self.lines.append(f"{pad}out = out + torch.arange(b).unsqueeze(1).to(out.dtype)")
        elif c == 4:
            self.lines.append(f"{pad}out = out + {self.pick(['torch.zeros(b, c)', 'torch.ones(b, 1)', 'x.new_zeros(x.shape)', 'out.new_ones(b, c)', 'torch.full((1, c), float(n))'])}")
        elif c == 5:
            self.lines.append(f"{pad}out = out.{self.pick(['view(b, -1)', 'reshape(-1, c)', 'view(b * c).view(b, c)', 'reshape(b, c)'])}")
        elif c == 6:
            self.lines.append(f"{pad}out = torch.cat([out, out * 2], 0)[: b]")
        elif c == 7:
            self.lines.append(f"{pad}out = out[:, : {self.small()}].sum(1, keepdim=True) + out")
        elif c == 8:
            self.lines.append(f"{pad}out = out[: {self.small()}].mean(0, keepdim=True) + out")
        elif c == 9:
            self.lines.append(f"{pad}out = out + y")  # may fail to broadcast: eager raises too
        elif c == 10 and depth < 2:
            self.lines.append(f"{pad}if {self.cond()}:")
            self.stmt(ind + 1, depth + 1)
            self.lines.append(f"{pad}else:")
            self.stmt(ind + 1, depth + 1)
        elif c == 11 and depth < 2:
            self.lines.append(f"{pad}for j in range(min({self.int_expr(1)}, 3)):")
            self.lines.append(f"{pad}    out = out + j")
        elif c == 12:
            self.lines.append(f"{pad}out = out * {self.pick(['int(b)', 'float(n)', 'int(c) % 3', 'len(x)'])}")
        elif c == 13:
            self.lines.append(f"{pad}acc.append({self.int_expr()})")
        elif c == 14:
            self.lines.append(f"{pad}acc.append(out.flatten()[: {self.small()}].sum())")
        elif c == 15:
            self.lines.append(f"{pad}out = out.transpose(0, 1).contiguous().transpose(0, 1)")
        elif c == 16:
            self.lines.append(f"{pad}out = torch.nn.functional.pad(out, (0, 1))[:, : c]")
        elif c == 17:
            self.lines.append(f"{pad}out = out.softmax(-1) * c")
        elif c == 18:
            self.lines.append(f"{pad}out = out.unsqueeze(0).expand(2, b, c).sum(0)")
        elif c == 19:
            self.lines.append(f"{pad}print('sizes', b, c, {self.int_expr()}, file=SINK)")  # graph break
        elif c == 20:
            self.lines.append(f"{pad}if out.sum().item() > 0:")  # data-dependent: graph break
            self.lines.append(f"{pad}    out = out - b")
        elif c == 21:
            self.lines.append(f"{pad}shape = out.shape")
            self.lines.append(f"{pad}out = out.reshape(shape[0], shape[1]) + shape[-1]")
        elif c == 22:
            self.lines.append(f"{pad}out = out + y.sum() * {self.int_expr()}")
        elif c == 23:
            self.lines.append(f"{pad}out = out[{self.pick(['1:', ':-1', '::2', ':b - 1', 'b // 2:'])}].sum(0) + out")
        elif c == 24:
            self.lines.append(f"{pad}out = helper(out, {self.int_expr()})")  # inlined, sizes inside
        elif c == 25:  # rows picked by value: a size from the data (a break), used after it
            self.lines.append(f"{pad}sel = out[out[:, 0] > {self.pick(['0', '0.5', '-1'])}]")
            self.lines.append(f"{pad}out = out + sel.sum(0, keepdim=True) * len(sel) + sel.shape[0] % 3")
        elif c == 26:  # a callee that breaks: a frame of its own, whose return value comes back
            self.lines.append(f"{pad}out = noisy(out, {self.int_expr()})")
        else:
            self.lines.append(f"{pad}out = out.new_zeros(out.shape[0], {self.small()})[:, :1] + out")

    def program(self):
        head = ["import torch", "", "", "def helper(t, j):", "    rows, cols = t.shape",
                "    return t.reshape(cols, rows).t() + (rows * cols) % 7 + j", "", "",
                "def noisy(t, j):", "    rows = t.shape[0]", "    print('noisy', rows, j, file=SINK)",
                "    return t * 2 + rows", "", "",
                "def f(x, y, n):", "    b = x.shape[0]", "    c = x.size(1)",
                "    k = len(x)", "    m = x.numel()", "    acc = []", "    out = x"]
        for _ in range(self.r(2, 7)):
            self.stmt(1)
        ret = self.pick(["out", "(out, acc)", "(out, b * 2, x.shape)", f"(out.sum(), {self.int_expr()})",
                         "(out, acc, len(acc))"])
        return "\n".join(head + self.lines + [f"    return {ret}", ""])


def generate_shapes(rnd):
    return ShapeGen(rnd).program()


# ---- call sequences ---------------------------------------------------------------------

def _t(g, *shape):
    return torch.randn(*shape, generator=g)


def sequences(rnd, seed=0):
    """One call sequence (a list of (x, y, n)) of a kind picked by `rnd`."""
    g = torch.Generator().manual_seed(seed)
    kind = rnd.choice(["grow", "shrink", "edges", "both", "equal_then_differ", "broadcast_once", "int"])
    c0 = rnd.randint(2, 5)
    if kind == "grow":
        dims = [(b, c0) for b in range(2, 8)]
    elif kind == "shrink":
        dims = [(b, c0) for b in range(9, 2, -1)]
    elif kind == "edges":
        dims = [(b, c0) for b in (3, 0, 1, 2, 100, 2, 1, 4)]
    elif kind == "both":
        dims = [(b, c) for b, c in ((2, 3), (3, 4), (4, 5), (5, 2), (6, 6), (2, 7))]
    else:
        dims = [(b, c0) for b in (3, 4, 5, 6)]
    calls = []
    for i, (b, c) in enumerate(dims):
        if kind == "equal_then_differ":
            y = _t(g, b, c) if i < 2 else _t(g, b + (i % 2) + 1, c)  # broadcast fails once they differ
        elif kind == "broadcast_once":
            y = _t(g, *((1, c) if i % 2 else (b, 1)))
        else:
            y = _t(g, *rnd.choice([(b, c), (1, c), (c,), (b, 1)]))
        n = (i + 2) if kind == "int" else 3
        calls.append((_t(g, b, c), y, n))
    return calls
