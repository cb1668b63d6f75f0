"""The main job, end to end: trace a model and a function, print what was captured.

    make demo        (or: .venv/bin/python examples/demo.py)

For each compiled frame it prints the FX graph (code and a table), the guards that protect
the cache entry, why a frame fell back to Python if it did, and the original vs rewritten
bytecode.
"""
import dis
import io

import torch

import tracer


class Block(torch.nn.Module):
    """A small pre-norm transformer-style block in plain PyTorch."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
        self.register_buffer("mask", torch.tril(torch.ones(8, 8)).bool())

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(x)


def scaled_sum(xs, scale=2.0):
    total = xs[0]
    for x in xs[1:]:
        total = total + x * scale
    return {"total": total, "n": len(xs)}


def noisy(x):
    print("side effect")  # I/O is not traceable: a graph break, whose reason the entry keeps
    return x + 1


def header(title):
    print("=" * 78)
    print(title)
    print("=" * 78)


def show(compiled):
    for i, entry in enumerate(compiled.entries):
        print(f"-- cache entry {i}: {'captured' if entry.code is not None else 'runs as Python'}")
        if entry.reason:
            print(f"   reason: {entry.reason}")
        for b in entry.breaks:
            print(f"   graph break at line {b.lineno}: {b.reason}")
        if entry.graph is not None:
            print(f"   graph: {entry.ops} ops\n")
            print(entry.graph.code.strip())
            print()
            print(f"   {'opcode':<14}{'name':<22}{'target':<34}args")
            for n in entry.graph.graph.nodes:
                target = getattr(n.target, "__name__", str(n.target))
                print(f"   {n.op:<14}{n.name:<22}{target[:33]:<34}{n.args}")
        print("\n   guards:")
        for line in entry.guards.describe().splitlines():
            print("   " + line)
        if entry.code is not None:
            buf = io.StringIO()
            dis.dis(entry.code, file=buf)
            print("\n   rewritten bytecode:")
            print("   " + buf.getvalue().strip().replace("\n", "\n   "))
        print()


def main():
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 8, 16)
    header("GPT-style block (nn.Module): one graph, parameters and buffers as graph inputs read "
           "from the module on each call")
    compiled_model = tracer.compile(model)
    out = compiled_model(x)
    assert torch.allclose(out, model(x), atol=1e-6)
    show(compiled_model._compiled_forward)

    header("scaled_sum(xs): loop over a list unrolled, dict rebuilt after the graph")
    f = tracer.compile(scaled_sum)
    xs = [torch.randn(4) for _ in range(3)]
    res = f(xs)
    assert torch.allclose(res["total"], scaled_sum(xs)["total"]) and res["n"] == 3
    print("original bytecode of scaled_sum:")
    dis.dis(scaled_sum)
    print()
    show(f)

    header("noisy(x): print() is I/O, a graph break; the call prints 'side effect' as Python does:")
    g = tracer.compile(noisy)
    assert torch.equal(g(x), x + 1)
    print()
    show(g)


if __name__ == "__main__":
    main()
