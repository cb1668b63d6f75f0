"""Targets for `tracer-dump` (see README, `make demo`).

    tracer-dump examples/dump_target.py:encoder        # nn.TransformerEncoder, one graph
    tracer-dump examples/dump_target.py:pipeline       # graph breaks in the frame and in its callee
    tracer-dump examples/dump_target.py:pipeline --inputs "randn(4, 8)"

Example inputs follow tracer-dump's convention: `example_inputs_<function>()` (or a module-level
`example_inputs()`) returns the positional args, or `(args, kwargs)`.
"""
import torch

torch.manual_seed(0)
_layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
model = torch.nn.TransformerEncoder(_layer, num_layers=2, enable_nested_tensor=False).eval()


def encoder(x):
    return model(x)


def example_inputs_encoder():
    return (torch.randn(2, 8, 32),)


history = []


def log_step(y):
    print(f"step: mean={y.mean().item():.3f}")  # .item() and print(): graph breaks
    return y * 2


def pipeline(x, scale=0.5):
    y = torch.relu(x @ x.T) * scale
    history.append(y.shape[0])  # mutation of a global list: replayed after the graph
    return log_step(y) + 1


def example_inputs():
    return (torch.randn(4, 8),), {"scale": 0.25}
