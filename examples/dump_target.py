"""Targets for `tracer-dump` (see docs/usage.md, `make demo`).

    tracer-dump examples/dump_target.py:encoder        # nn.TransformerEncoder, one graph
    tracer-dump examples/dump_target.py:pipeline       # graph breaks in the frame and in its callee
    tracer-dump examples/dump_target.py:pipeline --inputs "randn(4, 8)"

Example inputs follow tracer-dump's convention: `example_inputs_<function>()` (or a module-level
`example_inputs()`) returns the positional args, or `(args, kwargs)`.
"""
import numpy as np
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


class ThreeBreaks(torch.nn.Module):
    """A model with three graph breaks: a print, a branch on a tensor value, a numpy call."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        print("hidden norm computed")                   # break 1: I/O
        if h.sum() > 0:                                 # break 2: data-dependent branch
            h = h * 2
        noise = float(np.random.default_rng(0).random())  # break 3: numpy
        return self.fc2(h + noise)


three_breaks = ThreeBreaks().eval()


def example_inputs_three_breaks():
    return (torch.randn(2, 8),)


def numpy_features(x, bins):
    """NumPy code on a tensor's values, traced as tensor operations (torch._numpy): one graph."""
    a = x.detach().numpy()
    z = (a - a.mean(axis=0)) / (a.std(axis=0) + 1e-6)
    scores = np.clip(z, -3, 3) @ bins
    return torch.from_numpy(scores).float(), np.abs(z).max()


def example_inputs_numpy_features():
    return (torch.randn(6, 4), np.linspace(0.0, 1.0, 4))
