"""Mechanisms that HuggingFace-style models rely on, with plain torch and small classes.

Each test compares the compiled result with eager and checks what was captured.
"""
import torch

import tracer


def _explain(fn, *args, **kwargs):
    tracer.reset()
    return tracer.explain(fn, *args, **kwargs)


# ---- zero-argument super() after a graph break ---------------------------------------------

class _Base:
    def get(self, key, default=None):
        return {"a": 1}.get(key, default)


class _Child(_Base):
    def get(self, key, default=None):
        print("break", end="")  # a graph break before super()
        return super().get(key, default)


def test_zero_arg_super_in_resume_function(capsys):
    obj = _Child()

    def f(x):
        return x + obj.get("a", 5) + obj.get("b", 7)

    x = torch.ones(3)
    tracer.reset()
    out = tracer.compile(f)(x)
    assert torch.equal(out, f(x))
    assert torch.equal(tracer.compile(f)(x), f(x))


def test_zero_arg_super_resume_when_self_is_not_otherwise_live():
    class A:
        def val(self):
            return 3

    class B(A):
        def val(self):
            y = len([1, 2])
            print("", end="")   # break; only super() needs `self` afterwards
            return super().val() + y

    def f(x):
        return x * B().val()

    x = torch.ones(2)
    tracer.reset()
    assert torch.equal(tracer.compile(f)(x), f(x))
