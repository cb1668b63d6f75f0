"""A compiled module with hooks: its own __call__ runs the hooks as in eager and the forward
in between is the compiled one (FSDP2 and DDP register hooks; they must not turn a compiled
model into a silent plain-Python one)."""
import torch
import torch.nn as nn

import tracer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu() + 1


def test_forward_hooks_run_around_the_compiled_forward():
    tracer.reset()
    m = Net()
    seen = []
    m.register_forward_pre_hook(lambda mod, args: seen.append("pre") or (args[0] * 2,))
    m.register_forward_hook(lambda mod, args, out: seen.append("post") or out - 1)
    c = tracer.compile(m)
    x = torch.randn(3, 4)
    s0 = tracer.stats()
    out = c(x)
    torch.testing.assert_close(out, m(x))
    assert seen == ["pre", "post", "pre", "post"]
    s1 = tracer.stats()
    assert s1.graphs - s0.graphs == 1 and s1.ops - s0.ops >= 3, s1
    assert "forward" not in m.__dict__, "the module is left as it was"
    c(torch.randn(3, 4))
    assert tracer.stats().frames_traced == s1.frames_traced, "warm: nothing traced"
    tracer.reset()
