r"""Whole derivatives of a function, as ``torch.autograd.functional``: :func:`jacobian` and
:func:`hessian`, built from :func:`~torchlight.autograd.grad` (one backward pass per output element).

$J_{ij} = \partial f_i / \partial x_j$, returned with shape ``output.shape + input.shape``;
the Hessian of a scalar function is the Jacobian of its gradient, ``input.shape * 2``.

Example:
    >>> import torchlight as tl
    >>> from torchlight.autograd.functional import jacobian, hessian
    >>> jacobian(lambda x: x ** 2, tl.tensor([1.0, 3.0]))
    tensor([[2., 0.],
            [0., 6.]])
    >>> hessian(lambda x: (x ** 3).sum(), tl.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torchlight.autograd.engine import grad
from torchlight.autograd.grad_mode import enable_grad

__all__ = ["hessian", "jacobian"]


def jacobian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """$\\partial\\,\\mathrm{func}(x) / \\partial x$ for one tensor input (a tensor of shape
    ``output.shape + input.shape``) or a tuple of inputs (a tuple, one block per input; for a
    function returning a tuple, a tuple of those). ``vectorize`` and ``strategy`` change only
    how PyTorch computes it, so they are accepted and ignored; an output that does not depend on
    an input gives zeros, or raises with ``strict=True``, as in PyTorch."""
    if strategy != "reverse-mode":
        raise NotImplementedError(
            f"jacobian(strategy={strategy!r}): torchlight has reverse mode only"
        )
    single_input = not isinstance(inputs, tuple)
    xs = (inputs,) if single_input else inputs
    with enable_grad():
        leaves = tuple([x.detach().requires_grad_() for x in xs])
        outputs = func(*leaves)
        single_output = not isinstance(outputs, tuple)
        blocks = [
            _blocks(out, leaves, create_graph, strict)
            for out in ((outputs,) if single_output else outputs)
        ]
    per_output = [block[0] if single_input else tuple(block) for block in blocks]
    return per_output[0] if single_output else tuple(per_output)


def _blocks(out: Any, leaves: tuple[Any, ...], create_graph: bool, strict: bool) -> list[Any]:
    """The Jacobian of one output with respect to each leaf: one backward pass per element."""
    rows: list[list[Any]] = [[] for _ in leaves]
    flat = out.reshape(-1)
    for k in range(flat.numel()):
        grads = (
            grad(
                flat[k],
                list(leaves),
                retain_graph=True,
                create_graph=create_graph,
                allow_unused=True,
            )
            if out.requires_grad
            else (None,) * len(leaves)
        )
        for i, (leaf, g) in enumerate(zip(leaves, grads, strict=True)):
            if g is None:
                if strict:
                    raise RuntimeError(
                        f"jacobian(strict=True): output element {k} does not depend on input {i}"
                    )
                g = leaf.new_zeros(leaf.shape)
            rows[i].append(g)
    from torchlight.creation import stack

    return [
        stack(r, 0).reshape(*out.shape, *leaf.shape)
        if r
        else leaf.new_zeros(*out.shape, *leaf.shape)
        for r, leaf in zip(rows, leaves, strict=True)
    ]


def hessian(
    func: Callable[..., Any],
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The matrix of second derivatives of a scalar ``func``: the Jacobian of its gradient
    (shape ``input.shape + input.shape``; for a tuple of inputs, a tuple of tuples of blocks)."""
    single_input = not isinstance(inputs, tuple)

    def gradient(*xs: Any) -> Any:
        out = func(*xs)
        if out.numel() != 1:
            raise RuntimeError(
                f"hessian: the function must return one number, got shape {out.shape}"
            )
        grads = grad(out.reshape(()), list(xs), create_graph=True, allow_unused=True)
        filled = tuple(
            [g if g is not None else x.new_zeros(x.shape) for g, x in zip(grads, xs, strict=True)]
        )
        return filled[0] if single_input else filled

    return jacobian(gradient, inputs, create_graph=create_graph, strict=strict)
