r"""Reverse-mode automatic differentiation, in PyTorch's layout (``torch/autograd/``).

- :mod:`~torchlight.autograd.grad_mode`: :class:`no_grad`, :class:`enable_grad`,
  :func:`is_grad_enabled`.
- :mod:`~torchlight.autograd.function`: :class:`Context`, :class:`History`, :class:`Function`
  (``apply``, and ``History.chain_rule``: one step of the walk), :func:`once_differentiable`.
- :mod:`~torchlight.autograd.engine`: :func:`topological_sort`, :func:`backpropagate`,
  :func:`grad` (the walk), :func:`seed` (the root's gradient).
- :mod:`~torchlight.autograd.gradcheck`: :func:`central_difference`, :func:`gradcheck`,
  :func:`gradgradcheck`.

``from torchlight.autograd import Context, History, Function, backpropagate, topological_sort,
central_difference`` is the contract of the Tutorial 2 page.
"""

from torchlight.autograd import functional
from torchlight.autograd.anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from torchlight.autograd.engine import backpropagate, backward_steps, grad, seed, topological_sort
from torchlight.autograd.function import Context, Function, History, Variable, once_differentiable
from torchlight.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from torchlight.autograd.gradcheck import (
    GradcheckError,
    central_difference,
    gradcheck,
    gradgradcheck,
)

__all__ = [
    "Context",
    "Function",
    "GradcheckError",
    "History",
    "Variable",
    "backpropagate",
    "backward_steps",
    "central_difference",
    "detect_anomaly",
    "functional",
    "is_anomaly_enabled",
    "set_detect_anomaly",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "is_grad_enabled",
    "no_grad",
    "once_differentiable",
    "seed",
    "topological_sort",
]
