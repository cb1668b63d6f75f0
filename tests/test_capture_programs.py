"""capture() around whole programs: frames with no tensor work are given up on
(tracer/runtime/give_up.py), the model's frames are still captured, results are eager's."""
import random
import warnings

import pytest
import torch

import tracer
from tracer.runtime.frame_hook import is_given_up

from helpers import traced

pytestmark = pytest.mark.usefixtures("fresh_tracer")


def leaf(a):
    return a + 1


def helper(a, b):
    return leaf(a) * 2 - leaf(b) % 7


def scale(x, k):
    return x * k + 1


class Metrics:
    def __init__(self):
        self.total = 0.0
        self.n = 0

    def update(self, value, n):
        self.total += value * n
        self.n += n


def collate(batch):
    longest = max(len(ids) for ids, _ in batch)
    rows = [ids + [0] * (longest - len(ids)) for ids, _ in batch]
    return torch.tensor(rows), torch.tensor([label for _, label in batch])


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, ids):
        return self.head(self.embed(ids).mean(1))


def _calls(n):
    s = 0
    for i in range(n):
        s = (s + helper(i, s)) % 10_007
    return s


def test_pure_python_helper_is_given_up_once_and_stays_correct():
    expected = _calls(300)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tracer.RecompileLimitWarning)
        with traced() as t:
            with tracer.capture():
                got = _calls(300)
                again = _calls(300)
    assert got == expected and again == expected
    s = tracer.stats()
    assert "helper" in s.given_up and "_calls" in s.given_up, str(s)
    assert list(s.given_up).count("helper") == 1
    assert [e.frame for e in s.of("given_up")].count("helper") == 1  # named once
    assert t.recompile_limits == 0 and t.graphs == 0
    assert is_given_up(helper.__code__)
    # warm: nothing is traced any more, and no guard runs for these frames
    with traced() as warm:
        with tracer.capture():
            assert _calls(300) == expected
    assert warm.frames_traced == 0 and warm.cache_hits == 0, str(warm)


def test_scalar_only_graph_is_not_run():
    """leaf(1), leaf(2): the second trace would be a graph of SymInt ops; the frame runs as
    Python instead (given up after its first, complete, tensor-free trace)."""
    out = []
    with tracer.capture():
        for i in range(50):  # (this frame started before capture(): each call reaches the hook)
            out.append(leaf(i))
    assert out == [i + 1 for i in range(50)]
    s = tracer.stats()
    assert "leaf" in s.given_up and s.graphs == 0 and s.recompiles == 0, str(s)


def test_ints_then_tensors_is_captured_when_tensors_arrive():
    x = torch.randn(4)
    with tracer.capture():
        assert scale(3, 2) == 7
        assert scale(4, 2) == 9
        assert is_given_up(scale.__code__)
        with traced() as t:
            out = scale(x, 2)
            out2 = scale(x, 2)
    torch.testing.assert_close(out, x * 2 + 1)
    torch.testing.assert_close(out2, x * 2 + 1)
    assert t.graphs == 1 and t.ops >= 2 and t.fallbacks == 0, str(t)  # the tensor call lifted the mark
    assert not is_given_up(scale.__code__)
    with tracer.capture():  # and once it had tensor work, ints do not give it up again
        assert scale(5, 2) == 11 and scale(6, 2) == 13
        torch.testing.assert_close(scale(x, 3), x * 3 + 1)
    assert not is_given_up(scale.__code__)


def test_tensor_inside_a_list_after_give_up_runs_as_python_correctly():
    def total(xs):
        s = 0
        for v in xs:
            s = s + v
        return s

    with tracer.capture():
        assert total([1, 2, 3]) == 6
        got = total([torch.ones(2), torch.ones(2)])  # no tensor argument: stays given up
    torch.testing.assert_close(got, torch.full((2,), 2.0))
    assert "test_tensor_inside_a_list_after_give_up_runs_as_python_correctly.<locals>.total" in tracer.stats().given_up


def _pipeline(model, steps, seed):
    rng = random.Random(seed)
    metrics = Metrics()
    losses = []
    for _ in range(steps):
        batch = [([rng.randint(1, 31) for _ in range(rng.randint(2, 9))], rng.randint(0, 1)) for _ in range(6)]
        ids, labels = collate(batch)
        logits = model(ids)
        loss = torch.nn.functional.cross_entropy(logits, labels)
        metrics.update(loss.item(), len(batch))
        losses.append(loss)
    return losses, metrics.total, metrics.n


def test_data_pipeline_with_changing_values_has_no_recompile_limit():
    torch.manual_seed(0)
    model = Net()
    ref_losses, ref_total, ref_n = _pipeline(model, 20, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tracer.RecompileLimitWarning)
        with traced() as t:
            with tracer.capture():
                losses, total, n = _pipeline(model, 20, seed=3)
    for a, b in zip(losses, ref_losses):
        torch.testing.assert_close(a, b)
    assert total == ref_total and n == ref_n
    s = tracer.stats()
    assert t.recompile_limits == 0, str(t)
    assert "collate" in s.given_up and "Metrics.update" in s.given_up, str(s)
    assert [e.frame for e in s.of("frame")].count("collate") == 2, str(s)  # traced, changed, given up
    # the model is still captured
    assert any(e.frame == "Net.forward" for e in s.of("graph")), str(s)
    assert "Net.forward" not in s.given_up


def test_module_built_under_capture():
    """A model built inside capture(): its __init__ runs before Module.__init__ made its
    state, and is not traced then (no internal error); its forward is captured."""
    with tracer.capture():
        torch.manual_seed(0)
        m = Net()
        ids = torch.randint(0, 32, (2, 5))
        out = m(ids)
    torch.testing.assert_close(out, m(ids))
    s = tracer.stats()
    assert s.internal_errors == 0 and any(e.frame == "Net.forward" for e in s.of("graph")), str(s)


def test_reset_lifts_marks():
    with tracer.capture():
        leaf(1)
    assert is_given_up(leaf.__code__)
    tracer.reset()
    assert not is_given_up(leaf.__code__)
    assert tracer.stats().given_up  # (stats are kept until reset_stats)


def test_stats_text_names_given_up_frames():
    with tracer.capture():
        leaf(1)
    text = str(tracer.stats())
    assert "given up on" in text and "leaf" in text
