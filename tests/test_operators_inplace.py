"""`n += tensor` where n is a Python number: out of place (numbers have no __iadd__), and the
FX graph must be printable (an in-place node on a literal printed as "0 += t" before)."""
import torch

import tracer


def test_augmented_assignment_of_a_number_by_a_tensor():
    def f(x):
        r = 0
        r += (x > 0).to(torch.long) * 4
        s = 1.5
        s *= x
        return r, s

    x = torch.randn(5)
    tracer.reset()
    rep = tracer.explain(f, x)
    assert rep.graph_count == 1 and rep.break_count == 0, str(rep)
    tracer.reset()
    out = tracer.compile(f)(x)
    for a, b in zip(out, f(x)):
        assert torch.equal(a, b)
