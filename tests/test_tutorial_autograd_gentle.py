"""PyTorch's "A Gentle Introduction to torch.autograd", ported with ``torch`` -> ``tl``.

Each section's code is the tutorial's, line for line, except where it needs what cannot ship
here: the tutorial fine-tunes a pretrained ``torchvision`` ResNet-18, so the last two sections
use a small CNN of the same shape (convolutions, then a ``fc`` head) built in the test. The
checks are the tutorial's own (``9*a**2 == a.grad``) or values computed by hand.
"""

from __future__ import annotations

import numpy as np

import torchlight as tl
from torchlight import nn, optim


def test_differentiation_in_autograd():
    a = tl.tensor([2.0, 3.0], requires_grad=True)
    b = tl.tensor([6.0, 4.0], requires_grad=True)
    Q = 3 * a**3 - b**2
    external_grad = tl.tensor([1.0, 1.0])
    Q.backward(gradient=external_grad)
    # the tutorial prints these two checks: tensor([True, True]) each
    assert (9 * a**2 == a.grad).all().item()
    assert (-2 * b == b.grad).all().item()
    np.testing.assert_array_equal(a.grad.numpy(), [36.0, 81.0])  # 9 a^2 by hand
    np.testing.assert_array_equal(b.grad.numpy(), [-12.0, -8.0])  # -2 b by hand


def test_vector_jacobian_product_with_a_non_uniform_gradient():
    """``Q.backward(gradient=v)`` computes v^T J: here J is diagonal, so it is v * dQ/da."""
    a = tl.tensor([2.0, 3.0], requires_grad=True)
    Q = 3 * a**3
    Q.backward(gradient=tl.tensor([0.5, -1.0]))
    np.testing.assert_array_equal(a.grad.numpy(), [0.5 * 36.0, -81.0])


def test_exclusion_from_the_dag():
    x = tl.rand(5, 5)
    y = tl.rand(5, 5)
    z = tl.rand((5, 5), requires_grad=True)
    a = x + y
    print(f"Does `a` require gradients?: {a.requires_grad}")
    b = x + z
    print(f"Does `b` require gradients?: {b.requires_grad}")
    assert a.requires_grad is False and b.requires_grad is True


class SmallNet(nn.Module):
    """Stands in for ``resnet18``: a convolutional body, then a ``fc`` head to replace."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 1000)

    def forward(self, x):
        return self.fc(self.pool(self.conv(x).relu()).flatten(1))


def test_frozen_parameters_are_not_trained_and_the_new_head_is():
    tl.manual_seed(0)
    model = SmallNet()
    # Freeze all the parameters in the network
    for param in model.parameters():
        param.requires_grad = False
    model.fc = nn.Linear(4, 10)  # the new classifier, unfrozen by default
    # Optimize only the classifier
    optimizer = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)

    frozen = model.conv.weight.numpy().copy()
    head = model.fc.weight.detach().numpy().copy()
    data = tl.rand(1, 3, 8, 8)
    labels = tl.rand(1, 10)
    prediction = model(data)
    loss = (prediction - labels).sum()
    loss.backward()
    optimizer.step()

    assert model.conv.weight.grad is None, "a frozen parameter got a gradient"
    np.testing.assert_array_equal(model.conv.weight.numpy(), frozen)
    # d loss / d fc.weight = 1 (one per output) times the pooled features: one SGD step moves
    # every head weight by -lr * feature, exactly
    features = model.pool(model.conv(data).relu()).flatten(1).numpy()[0]
    np.testing.assert_allclose(
        model.fc.weight.detach().numpy(),
        head - 1e-2 * np.ones((10, 1)) * features[None, :],
        rtol=1e-12,
    )
