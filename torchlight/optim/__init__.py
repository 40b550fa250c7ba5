r"""Optimizers, in PyTorch's names and update rules: SGD, Adam, AdamW, Adamax, NAdam, RAdam,
RMSprop, Adagrad, Adadelta, LBFGS, and the
learning-rate schedules of ``torchlight.optim.lr_scheduler``.

Each optimizer is one short ``_update`` of plain tensor math (read ``sgd.py`` first); the base
class (``optimizer.py``) keeps the parameter groups, the per-parameter state and saving/loading.

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([1.0, -2.0]))
    >>> opt = optim.SGD([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w
    Parameter containing:
    tensor([ 0.8000, -1.6000], requires_grad=True)
"""

from torchlight.optim import lr_scheduler

# PyTorch compatibility (issue 25)
from torchlight.optim.adadelta import Adadelta
from torchlight.optim.adagrad import Adagrad
from torchlight.optim.adam import Adam, AdamW
from torchlight.optim.adamax import Adamax, NAdam, RAdam
from torchlight.optim.lbfgs import LBFGS
from torchlight.optim.optimizer import Optimizer
from torchlight.optim.rmsprop import RMSprop
from torchlight.optim.sgd import SGD

__all__ = [
    "LBFGS",
    "SGD",
    "Adadelta",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "NAdam",
    "RAdam",
    "Optimizer",
    "RMSprop",
    "lr_scheduler",
]
