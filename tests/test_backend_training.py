"""Training the digits MLP gives the same loss on every backend.

The CPU backends train one epoch and must agree with numpy to 1e-9 (the numba backend on the
whole training set; the pure-Python strided backend on its first 192 images, three batches).
The CUDA simulator runs one Python thread per GPU thread, so it trains one batch of 4 images
through a narrower MLP (hidden size 8); in float64 it must still agree to 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest

import torchlight as tl
from tests.test_backend_conformance import backend
from torchlight import nn, optim
from torchlight.data import DataLoader, TensorDataset, digits
from torchlight.train.cli import train_epoch


def train_one_epoch(
    name: str, samples: int, hidden: int, batch_size: int
) -> tuple[float, list[np.ndarray]]:
    """Mean loss of one epoch of Adam on the first ``samples`` digits, and the trained weights."""
    on = backend(name)  # (for cuda: loads the simulator first)
    tl.manual_seed(0)
    x, y = digits(train=True).tensors
    x, y = x[:samples].to(on.name), y[:samples].to(on.name)
    model = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10)).to(on.name)
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True, seed=0)
    loss, _, steps = train_epoch(model, optimizer, loader, 0)
    assert steps == len(loader)
    for p in model.parameters():
        assert p.backend is on, f"a parameter left the {on.name} backend"
    return loss, [p.detach().to("numpy").numpy() for p in model.parameters()]


@pytest.mark.parametrize(
    ("name", "samples", "hidden", "batch_size"),
    [("numba", 1437, 128, 64), ("strided", 192, 128, 64), ("cuda", 4, 8, 4)],
)
def test_one_epoch_gives_the_same_loss_as_numpy(name, samples, hidden, batch_size) -> None:
    loss, weights = train_one_epoch(name, samples, hidden, batch_size)
    expected_loss, expected_weights = train_one_epoch("numpy", samples, hidden, batch_size)
    assert np.isfinite(loss)
    assert loss == pytest.approx(expected_loss, rel=1e-9, abs=1e-9)
    for w, e in zip(weights, expected_weights, strict=True):
        np.testing.assert_allclose(w, e, rtol=1e-9, atol=1e-9)
