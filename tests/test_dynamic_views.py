"""Inputs that are views of one another's storage, with sizes that change between calls."""
import pytest
import torch

import tracer


def _inputs_and_targets(batch):
    """As a language model's training step slices one token tensor: two views of it."""
    return batch[:, :-1], batch[:, 1:]


def lm_step(ids, labels):
    return torch.nn.functional.cross_entropy(ids.float().unsqueeze(-1).expand(-1, -1, 5).transpose(1, 2),
                                             labels % 5)


def write_then_read(x, y):
    x.add_(1)  # y is a view of x: it sees the write
    return y * 2 + x.shape[1]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_views_of_one_input_become_dynamic_and_equal_eager(backend):
    """`input_ids=batch[:, :-1], labels=batch[:, 1:]` with a new length each step: before,
    a view of an earlier input's storage kept static sizes on every backend, so each length
    was traced again up to the recompile limit (Qwen2 training: 8 traces, then Python; a
    torch.compile workaround for AOTAutograd). The eager backend now makes them dynamic:
    two traces, as torch.compile. aot_eager keeps them static (AOTAutograd's merged views
    lose their symbols) and stays equal to eager."""
    tracer.reset()
    tracer.reset_stats()
    compiled = tracer.compile(lm_step, backend=backend)
    for n in range(6, 12):
        batch = torch.randint(0, 50, (2, n + 1))
        torch.testing.assert_close(compiled(*_inputs_and_targets(batch)), lm_step(*_inputs_and_targets(batch)))
    s = tracer.stats()
    assert s.internal_errors == 0 and s.fallbacks == 0 and s.graph_breaks == 0, s
    if backend == "eager":
        assert s.frames_traced == 2 and s.recompile_limits == 0, s


def test_a_write_through_one_view_is_seen_through_the_other():
    """The graph writes x in place and reads y, a view of x, with dynamic sizes: eager's
    answers and eager's final x on every call."""
    tracer.reset()
    tracer.reset_stats()
    compiled = tracer.compile(write_then_read)
    for n in (5, 7, 9, 11):
        base, ref = torch.randn(3, n), None
        ref = base.clone()
        got = compiled(base, base[:, 1:])
        want = write_then_read(ref, ref[:, 1:])
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(base, ref)
    s = tracer.stats()
    assert s.frames_traced == 2 and s.internal_errors == 0 and s.fallbacks == 0, s
