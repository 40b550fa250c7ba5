r"""The general convolutions, composed from the plain one (``Conv2dFunction``: symmetric zero
padding, stride) and differentiable layout ops, so autograd derives every backward:

- ``dilation`` $d$: the kernel with $d - 1$ zeros inserted between its taps;
- ``groups`` $g$: channels split into $g$ groups, one plain convolution each, joined;
- ``padding="same"`` / ``"valid"`` and uneven padding: :func:`~torchlight.nn.padding.pad` first;
- the transposed convolution: the input with ``stride - 1`` zeros inserted between pixels,
  padded by $d(k - 1) - p$, convolved with the flipped kernel (in and out channels swapped).

Example:
    >>> import torchlight as tl
    >>> x = tl.ones(1, 4, 5, 5)
    >>> conv2d(x, tl.ones(6, 2, 3, 3), padding="same", dilation=2, groups=2).shape
    (1, 6, 5, 5)
    >>> conv_transpose2d(tl.ones(1, 3, 4, 4), tl.ones(3, 2, 3, 3), stride=2).shape
    (1, 2, 9, 9)
"""

from __future__ import annotations

from collections.abc import Sequence

from torchlight.creation import arange, cat
from torchlight.nn.padding import dilate, pad
from torchlight.ops.convolution import Conv2dFunction, as_pair, output_size
from torchlight.tensor import Tensor

__all__ = ["conv2d", "conv_transpose2d", "padding_amounts"]

Pair = tuple[int, int]


def padding_amounts(
    padding: str | int | Sequence[int], kernel: Pair, stride: Pair, dilation: Pair
) -> tuple[Pair, Pair]:
    """``(before, after)`` zero padding for each spatial axis, from an int, a pair, or PyTorch's
    ``"valid"`` (none) and ``"same"`` (output as large as the input; stride 1; an odd total
    puts the extra row at the end, as PyTorch does)."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        if stride != (1, 1):
            raise ValueError(f"padding='same' needs stride 1, got stride={stride}")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        return (totals[0] // 2, totals[0] - totals[0] // 2), (
            totals[1] // 2,
            totals[1] - totals[1] // 2,
        )
    if isinstance(padding, str):
        raise ValueError(f"padding must be 'same', 'valid', an int or a pair, got {padding!r}")
    ph, pw = as_pair(padding, "padding")
    if min(ph, pw) < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    return (ph, ph), (pw, pw)


def conv2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    r"""$\mathrm{out}[n, o] = b_o + \sum_{c \in \text{group}(o)} W[o, c] \star_d x[n, c]$.

    Shape: input $(N, C, H, W)$, weight $(O, C / g, k_h, k_w)$, output $(N, O, H_o, W_o)$ with
    $H_o = \lfloor (H + p_{\text{top}} + p_{\text{bottom}} - d (k_h - 1) - 1) / s \rfloor + 1$.
    """
    from torchlight.dtypes import check_same_dtype  # PyTorch compatibility (issue 25)

    check_same_dtype("conv2d", input, weight, bias)
    stride_, dilation_ = as_pair(stride, "stride"), as_pair(dilation, "dilation")
    if input.ndim != 4 or weight.ndim != 4:
        raise ValueError(
            f"conv2d: expected a 4-d input (N, C, H, W) and weight (O, C/groups, kH, kW), got "
            f"input {input.shape} and weight {weight.shape}"
        )
    channels, out_channels = input.shape[1], weight.shape[0]
    if (
        groups < 1
        or channels % groups
        or out_channels % groups
        or weight.shape[1] * groups != channels
    ):
        raise ValueError(
            f"conv2d: with groups={groups}, the input's {channels} channels and the weight's "
            f"{out_channels} output channels must both divide by {groups}, and the weight must "
            f"have in_channels/groups = {channels // max(groups, 1)} input channels; got weight "
            f"{weight.shape}"
        )
    if min(stride_) < 1 or min(dilation_) < 1:
        raise ValueError(f"conv2d: stride and dilation must be >= 1, got {stride} and {dilation}")
    kernel = (weight.shape[2], weight.shape[3])
    (top, bottom), (left, right) = padding_amounts(padding, kernel, stride_, dilation_)
    if dilation_ != (1, 1):
        weight = dilate(dilate(weight, 2, dilation_[0]), 3, dilation_[1])
    for axis, (before, after) in enumerate(((top, bottom), (left, right))):
        size, k = input.shape[2 + axis], weight.shape[2 + axis]
        if output_size(size + before + after, k, stride_[axis], 0) < 1:
            raise ValueError(
                f"conv2d: the padded input size {size + before + after} is smaller than the "
                f"(dilated) kernel size {k}; pad the input or use a smaller kernel"
            )
    if top == bottom and left == right:
        padding_ = (top, left)
    else:
        input, padding_ = pad(input, (left, right, top, bottom)), (0, 0)
    if groups == 1:
        return Conv2dFunction.apply(input, weight, bias, stride_, padding_)
    c, o = channels // groups, out_channels // groups
    outs = [
        Conv2dFunction.apply(
            input[:, g * c : (g + 1) * c],
            weight[g * o : (g + 1) * o],
            None if bias is None else bias[g * o : (g + 1) * o],
            stride_,
            padding_,
        )
        for g in range(groups)
    ]
    return cat(outs, 1)


def conv_transpose2d(
    input: Tensor,  # noqa: A002
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    output_padding: int | Sequence[int] = 0,
    groups: int = 1,
    dilation: int | Sequence[int] = 1,
) -> Tensor:
    r"""The transpose (and the gradient) of ``conv2d``: every input pixel adds a copy of the
    kernel, scaled by its value, to the output at stride $s$.

    Shape: input $(N, C, H, W)$, weight $(C, O / g, k_h, k_w)$, output $(N, O, H_o, W_o)$ with
    $H_o = (H - 1) s - 2 p + d (k_h - 1) + \text{output\_padding} + 1$.
    """
    from torchlight.dtypes import check_same_dtype  # PyTorch compatibility (issue 25)

    check_same_dtype("conv_transpose2d", input, weight, bias)
    stride_, padding_ = as_pair(stride, "stride"), as_pair(padding, "padding")
    extra, dilation_ = as_pair(output_padding, "output_padding"), as_pair(dilation, "dilation")
    if input.ndim != 4 or weight.ndim != 4 or input.shape[1] != weight.shape[0]:
        raise ValueError(
            f"conv_transpose2d: expected an input (N, C, H, W) and a weight (C, O/groups, kH, kW) "
            f"with the same C; got input {input.shape} and weight {weight.shape}"
        )
    if groups < 1 or input.shape[1] % groups:
        raise ValueError(
            f"conv_transpose2d: {input.shape[1]} channels do not divide by groups={groups}"
        )
    if any(e >= max(s, d) for e, s, d in zip(extra, stride_, dilation_, strict=True)):
        raise ValueError(
            f"conv_transpose2d: output_padding {extra} must be smaller than the stride {stride_} "
            f"or the dilation {dilation_}"
        )
    x = dilate(dilate(input, 2, stride_[0]), 3, stride_[1])
    # flip the kernel (reversed index arrays: differentiable), swap in/out channels per group
    kh, kw = weight.shape[2], weight.shape[3]
    flipped = weight[:, :, arange(kh - 1, -1, -1)][:, :, :, arange(kw - 1, -1, -1)]
    c = input.shape[1] // groups
    swapped = [flipped[g * c : (g + 1) * c].transpose(0, 1) for g in range(groups)]
    w = cat(swapped, 0) if groups > 1 else swapped[0]  # (O, C / g, kh, kw)
    k_eff = [d * (k - 1) for d, k in zip(dilation_, (kh, kw), strict=True)]
    top, left = k_eff[0] - padding_[0], k_eff[1] - padding_[1]
    x = pad(x, (left, left + extra[1], top, top + extra[0]))
    return conv2d(x, w, bias, 1, 0, dilation_, groups)
