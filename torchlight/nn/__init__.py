"""Neural networks, in PyTorch's names: Module, Parameter, layers, ``functional`` and ``init``.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn
    >>> model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    >>> sum(p.numel() for p in model.parameters())
    9610
"""

from torchlight.nn import functional, init
from torchlight.nn.conv import AvgPool2d, Conv1d, Conv2d, MaxPool2d
from torchlight.nn.layers import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    Linear,
    LogSoftmax,
    MSELoss,
    NLLLoss,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from torchlight.nn.module import Module, Parameter

__all__ = [
    "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "Conv1d", "Conv2d", "CrossEntropyLoss", "Dropout",
    "Embedding", "Flatten", "Identity", "Linear", "LogSoftmax", "MSELoss", "MaxPool2d", "Module",
    "NLLLoss", "Parameter", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh", "functional", "init",
]  # fmt: skip
