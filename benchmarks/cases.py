"""The benchmark's cases: small functions (pointwise, control flow, containers, graph
breaks), small models, and the functions that measure per-call overhead by argument count.

`make_cases()` -> [(name, kind, factory)], factory() -> (callable, args), kind "fn" or
"module"; OVERHEAD_CASES -> [(name, function, number of 4x4 tensor arguments)].
"""
import io
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def pw_sin_add_relu(x, y):
    return (x.sin() + y).relu()


def pw_gelu_chain(x):
    a = torch.tanh(x) * 0.5 + x.sigmoid()
    b = F.gelu(a) - a.abs().sqrt()
    return (a * b).exp().clamp(max=10.0)


def pw_scaled_sum(x, y, z):
    return (x * 2.0 + y / 3.0 - z).pow(2).mean(dim=-1)


def _helper(t, k):
    return t * k + 1


def control_flow(x, n):
    acc = x
    for i in range(n):
        if i % 2 == 0:
            acc = _helper(acc, i + 1)
        else:
            acc = acc.relu() - 0.5
    if x.shape[0] > 2:
        acc = acc.sum(0)
    return acc


def list_dict(x, y):
    parts = [x, y, x * y]
    d = {"a": parts[0] + 1, "b": parts[1] * 2}
    d["c"] = sum(parts)
    out = [v.cos() for v in d.values()]
    return {"sum": out[0] + out[1] + out[2], "n": len(out)}


_SINK = io.StringIO()


def brk_print(x, y):
    """A print in the middle: one graph on each side of the break."""
    a = torch.sin(x) + y
    print("checkpoint", file=_SINK)
    return torch.relu(a * 2).sum(0)


def brk_branch(x):
    """A branch on a tensor's value: the graph before it, then one per taken side."""
    y = x * 3 + 1
    if y.sum() > 0:
        return y.exp().mean(0)
    return y.neg().mean(0)


def brk_numpy(x):
    """A numpy call in the middle of tensor work (a random draw: neither tool traces it).

    torch.compile translates numpy *math* (np.linalg.norm, ...) into torch ops, which the
    tracer does not: on such calls it captures fewer ops (see docs/semantics.md, "Graph breaks")."""
    y = x.cos() * 2
    n = float(np.random.default_rng(0).random())
    return (y + n).tanh()


def args1(a):
    return a + 1


def args4(a, b, c, d):
    return a + b + c + d


def args16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    return (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
            + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15)


class MLP(nn.Module):
    def __init__(self, d=64, h=128, n_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, h)
        self.fc3 = nn.Linear(h, n_out)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.drop(F.relu(self.fc2(x)))
        return self.fc3(x)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.pool(x).flatten(1)
        return self.fc(x)


class GPTBlock(nn.Module):
    """A GPT-2 style pre-norm block written in plain PyTorch (no nn.MultiheadAttention)."""

    def __init__(self, d=64, n_head=4):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.ones(T, T).tril().view(1, 1, T, T)
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.fc_out(F.gelu(self.fc(self.ln2(x))))
        return x


def _t(*shape):
    return torch.randn(*shape)


def make_cases():
    """(name, kind, factory) -- factory() -> (callable, args); kind 'fn' or 'module'."""
    torch.manual_seed(0)

    def transformer():
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                           dropout=0.1, batch_first=True)
        m = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
        return m, (_t(2, 16, 64),)

    return [
        ("pointwise: sin+add+relu", "fn", lambda: (pw_sin_add_relu, (_t(8, 8), _t(8, 8)))),
        ("pointwise: gelu chain", "fn", lambda: (pw_gelu_chain, (_t(8, 8),))),
        ("pointwise: scaled sum/mean", "fn", lambda: (pw_scaled_sum, (_t(8, 8), _t(8, 8), _t(8, 8)))),
        ("control flow + helper", "fn", lambda: (control_flow, (_t(4, 8), 5))),
        ("list/dict building", "fn", lambda: (list_dict, (_t(8, 8), _t(8, 8)))),
        ("MLP (eval)", "module", lambda: (MLP().eval(), (_t(4, 64),))),
        ("small CNN (eval)", "module", lambda: (SmallCNN().eval(), (_t(2, 3, 16, 16),))),
        ("TransformerEncoder x2 (eval)", "module", transformer),
        ("GPT block (eval)", "module", lambda: (GPTBlock().eval(), (_t(2, 16, 64),))),
        ("break: print in the middle", "fn", lambda: (brk_print, (_t(8, 8), _t(8, 8)))),
        ("break: data-dependent branch", "fn", lambda: (brk_branch, (_t(8, 8).abs(),))),
        ("break: numpy call", "fn", lambda: (brk_numpy, (_t(8, 8),))),
    ]


OVERHEAD_CASES = [
    ("1 tensor arg", args1, 1),
    ("4 tensor args", args4, 4),
    ("16 tensor args", args16, 16),
]
