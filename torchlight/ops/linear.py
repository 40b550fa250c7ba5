r"""The linear layer's Function: $y = x W^T + b$, and its functional form ``linear``.

``nn.Linear``, ``F.linear`` and the recurrent layers' input projections call it; as one
Function it is one node in the graph, and its backward is the one derived on paper.

Example:
    >>> import torchlight as tl
    >>> from torchlight.nn.functional import linear
    >>> linear(tl.ones(2, 3), tl.ones(4, 3), tl.zeros(4)).shape
    (2, 4)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlight.autograd import Context, Function

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

__all__ = ["LinearFunction", "linear"]


class LinearFunction(Function):
    r"""$y = x W^T + b$.

    Backward: $\partial L/\partial x = G W$, $\partial L/\partial W = G^T x$,
    $\partial L/\partial b = \sum_{\text{rows}} G$ (rows: every dimension but the last).
    Called as ``LinearFunction.apply(x, weight, bias)`` (``bias`` may be None). The callers,
    ``nn.Linear`` and ``F.linear``, check shapes.
    """

    @staticmethod
    def forward(ctx: Context, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        # only what backward will use (PyTorch's rule): x for W's gradient, W for x's
        needs_x, needs_w = (ctx.needs_input_grad or (True, True))[:2]
        ctx.save_for_backward(x if needs_w else None, weight if needs_x else None)
        ctx.features = weight.shape
        # x @ weight.T + bias, as one fused backend kernel (backend.linear): same result, fewer calls
        return x._linear(weight, bias)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        out_features, in_features = ctx.features
        g = grad_output.reshape(-1, out_features)  # (rows, out): a batch of any shape is rows
        grad_x = grad_output @ weight if weight is not None else None  # (not for the input)
        grad_w = g.T @ x.reshape(-1, in_features) if x is not None else None  # (a frozen layer)
        grad_b = g.sum(0) if ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    r"""$y = x W^T + b$.

    Shape: input $(*, \text{in})$, weight $(\text{out}, \text{in})$, bias $(\text{out})$,
    output $(*, \text{out})$.
    """
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise ValueError(
            f"linear: the weight has shape {weight.shape}, so the input's last dimension must be "
            f"{weight.shape[-1]}; got an input of shape {input.shape}"
        )
    return LinearFunction.apply(input, weight, bias)
