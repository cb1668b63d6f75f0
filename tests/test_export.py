"""tracer.export -> torch.export.ExportedProgram (issue 14): captured whole, saved with
torch.export.save, loaded and run in a process that never imports the tracer, equal to eager;
breaks are clear errors; assumptions export cannot check are reported."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

import tracer
from tests.test_models import CNN, GPTBlock, encoder


@pytest.fixture(autouse=True)
def _fresh():
    tracer.reset()
    tracer.reset_stats()
    torch.manual_seed(0)
    yield
    tracer.reset()


def run_elsewhere(path, args, tmp_path, kwargs=None, imports=()):
    """Load the .pt2 in a fresh interpreter (no tracer import) and run it on `args`
    (`imports`: modules whose pytree types the output uses, e.g. transformers' ModelOutput)."""
    torch.save((args, kwargs or {}), tmp_path / "args.pt")
    script = textwrap.dedent(f"""
        import sys, torch
        {"; ".join(f"import {m}" for m in imports)}
        ep = torch.export.load({str(path)!r})
        args, kwargs = torch.load({str(tmp_path / 'args.pt')!r})
        out = ep.module()(*args, **kwargs)
        out = dict(out) if hasattr(out, "keys") else out  # (a ModelOutput: plain dict to save)
        assert not any(m == "tracer" or m.startswith("tracer.") for m in sys.modules), "tracer imported"
        torch.save(out, {str(tmp_path / 'out.pt')!r})
    """)
    env = dict(os.environ, PYTHONPATH="")  # the repo root is not importable from there
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path, env=env, timeout=300)
    return torch.load(tmp_path / "out.pt")


def count_graph_ops(ep):
    return sum(1 for n in ep.graph.nodes if n.op == "call_function")


@pytest.mark.one_version  # loading a saved ExportedProgram in a fresh process
@pytest.mark.parametrize("make, shape", [(GPTBlock, (2, 8, 16)), (CNN, (2, 3, 8, 8)), (encoder, (2, 6, 16))],
                         ids=["gpt_block", "cnn", "transformer_encoder"])
def test_models_round_trip_in_a_fresh_process(make, shape, tmp_path):
    model = make().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        ep = tracer.export(model, (x,))
        expected = model(x)
    assert isinstance(ep, torch.export.ExportedProgram)
    assert count_graph_ops(ep) >= 3  # (the encoder's fast path: one fused op per layer)
    assert tracer.stats().graphs >= 1 and tracer.stats().graph_breaks == 0
    path = tmp_path / "model.pt2"
    torch.export.save(ep, path)
    fresh = torch.randn(*shape)
    out = run_elsewhere(path, (fresh,), tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(out, model(fresh), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(ep.module()(x), expected, rtol=1e-4, atol=1e-5)
    n_params = len(list(model.parameters()))
    assert len([k for k in ep.state_dict if k in dict(ep.named_parameters())]) <= n_params, "weights once"


def test_user_signature_and_output_structure_are_kept(tmp_path):
    def f(x, d, *, scale=2.0):
        return {"y": x.sin() * scale + d["b"], "n": x.shape[0]}

    x, d = torch.randn(3, 4), {"b": torch.ones(4)}
    ep = tracer.export(f, (x, d), {"scale": 2.0})
    out = ep.module()(x, d, scale=2.0)
    assert set(out) == {"y", "n"} and out["n"] == 3
    torch.testing.assert_close(out["y"], f(x, d)["y"])


def test_a_graph_break_is_an_error_naming_the_line():
    def f(x):
        y = x + 1
        print("side effect")  # the break
        return y * 2

    with pytest.raises(tracer.ExportError, match=r"print\(\) is I/O.*test_export.py:\d+"):
        tracer.export(f, (torch.ones(2),))


def test_a_specialised_python_argument_is_reported():
    def f(x, n):
        return x * n

    with pytest.warns(tracer.ExportAssumptionWarning, match="n == 3"):
        ep = tracer.export(f, (torch.ones(2), 3))
    assert "n == 3 (int)" in ep.tracer_assumptions


def test_dynamic_shapes_pass_through_to_torch_export():
    def f(x):
        return (x.sin() * 2).relu()

    batch = torch.export.Dim("batch")
    ep = tracer.export(f, (torch.randn(4, 3),), dynamic_shapes={"x": {0: batch}})
    other = torch.randn(7, 3)
    torch.testing.assert_close(ep.module()(other), f(other))


def test_tiny_hf_gpt2_exports(tmp_path):
    tf = pytest.importorskip("transformers")
    cfg = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64)
    model = tf.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():  # (a DynamicCache output is no pytree torch.export knows: no cache)
        ep = tracer.export(model, (ids,), {"use_cache": False})
        expected = model(ids, use_cache=False).logits
    path = tmp_path / "gpt2.pt2"
    torch.export.save(ep, path)
    out = run_elsewhere(path, (ids,), tmp_path, {"use_cache": False}, imports=("transformers.modeling_outputs",))
    logits = out["logits"] if isinstance(out, dict) else out.logits
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-5)


def test_each_export_reports_its_own_specialisation():
    """Two exports with another int: the second traced `k` symbolic from the first's history,
    and torch.export fixed it to 3 with no warning and no `k == 3` in the assumptions. Each
    export is traced as if it were the process's first."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, k: int = 2):
            return self.lin(x) * k
    m, x = M().eval(), torch.randn(3, 4)
    m(x, k=7)
    for k in (2, 3):
        with pytest.warns(tracer.ExportAssumptionWarning, match=f"k == {k}"):
            ep = tracer.export(m, (x,), {"k": k})
        assert f"k == {k} (int)" in ep.tracer_assumptions
        torch.testing.assert_close(ep.module()(x, k=k), m(x, k=k))
