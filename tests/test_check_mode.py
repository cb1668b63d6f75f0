"""tracer.compile(..., check=True): the first call of each new entry is compared with eager
on copies of the inputs (outputs, mutated inputs, gradients); a wrong graph is caught."""
import pytest
import torch
import torch.nn as nn

import tracer
from tests.test_models import CNN, GPTBlock


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    torch.manual_seed(0)
    yield
    tracer.reset()


def test_correct_models_pass_and_the_checker_leaves_the_hot_path():
    m = GPTBlock().train()  # dropout: the eager run draws the same masks
    c = tracer.compile(m, check=True)
    x = torch.randn(2, 8, 16, requires_grad=True)
    out = c(x)
    out.sum().backward()  # the user's graph is intact after the check's autograd.grad
    assert x.grad is not None and all(p.grad is not None for p in m.parameters())
    runs = [r for _c, r in c._compiled_forward._hits]
    assert len(runs) == 1 and runs[0].__name__ != "run_checked", "checked once, then dropped"
    assert tracer.stats().frames_traced >= 1


def test_batchnorm_running_stats_are_compared():
    m = CNN().train()
    c = tracer.compile(m, check=True)
    c(torch.randn(2, 3, 8, 8))  # mutates running_mean/var in both runs: they agree


def _wrong_backend(gm, example_inputs):
    def run(*args):
        out = gm.forward(*args)
        return tuple(o + 1e-2 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)
    return run


def test_an_injected_wrong_graph_is_caught():
    def f(x, y):
        return (x.sin() + y).relu() * 2

    c = tracer.compile(f, backend=_wrong_backend, check=True)
    with pytest.raises(tracer.CheckError) as ei:
        c(torch.randn(3, 4), torch.randn(3, 4))
    msg = str(ei.value)
    assert "output" in msg and "max abs diff" in msg and "f" in msg
    assert "def forward" in msg, "the message shows the graph"


def test_wrong_gradients_are_caught():
    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3  # wrong on purpose

    def wrong_grad_backend(gm, example_inputs):
        def run(*args):
            return tuple(Bad.apply(o) / 2 if isinstance(o, torch.Tensor) and o.requires_grad else o
                         for o in gm.forward(*args))
        return run

    def f(x):
        return x.sin() * 3

    c = tracer.compile(f, backend=wrong_grad_backend, check=True)
    with pytest.raises(tracer.CheckError, match="gradient"):
        c(torch.randn(4, requires_grad=True))


def test_a_mutated_input_is_compared():
    def f(x, acc):
        acc.append(x.sum())
        return x * 2

    c = tracer.compile(f, check=True)
    acc = []
    c(torch.ones(2), acc)
    assert len(acc) == 1, "the eager run used a copy: the user's list got exactly one item"
    assert c.entries[0].ops >= 2

    from tracer.runtime.cache import Entry
    from tracer.check import checked

    def wrong_run(x, acc):  # a rewritten frame that replays the append twice
        acc.extend([x.sum(), x.sum()])
        return x * 2

    stub = Entry(guards=None, code=object(), graph=None, ops=2)
    run = checked(wrong_run, stub, lambda x, acc: f(x, acc), 1, 1e-4, 1e-5, lambda r: None, "f")
    with pytest.raises(tracer.CheckError, match=r"input\[1\]: list of 2 != list of 1"):
        run(torch.ones(2), [])


def test_each_new_entry_is_checked():
    def f(x):
        return x * 2

    c = tracer.compile(f, backend=_wrong_backend, check=2)
    with pytest.raises(tracer.CheckError):
        c(torch.ones(3))
    with pytest.raises(tracer.CheckError):  # second call of the same entry: still checked
        c(torch.ones(3))
    c(torch.ones(3))  # third: no longer checked (the wrong backend's result is returned)
    with pytest.raises(tracer.CheckError):  # a new shape: a new entry, checked again
        c(torch.ones(5))


def test_a_frame_writing_its_own_kwargs_dict_passes_the_check():
    """The `**kwargs` dict (and `*args` tuple) is made for the frame by each call: the frame
    may change it as a local (HF's `merge_with_config_defaults` writes `use_cache` into it).
    Before, check=True compared it with the eager run's fresh one and raised a CheckError on
    a right answer (BertModel with check=True); a wrong write to a real input is still caught
    (test_a_mutated_input_is_compared)."""
    def f(x, *args, **kwargs):
        kwargs["use_cache"] = True
        args += (1,)
        return x + len(kwargs) + len(args)

    c = tracer.compile(f, check=True)
    for _ in range(3):
        assert torch.equal(c(torch.ones(2), 5, a=1), f(torch.ones(2), 5, a=1))
    assert c.entries[0].ops >= 1
