"""Functions defined in another module, for capture() tests."""
import torch


def scale_shift(x, scale=2.0):
    return torch.tanh(x) * scale + 1


def gen(n):
    for i in range(n):
        yield i * 2
