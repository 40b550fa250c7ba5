r"""The built-in differentiable Functions.

Each is the same small shape: ``forward`` computes with the backend primitives
(``x._map``/``_zip``/``_reduce``/``_matmul``/layout: private, since they record nothing) and
saves only what ``backward`` needs; ``backward`` is one to three lines of tensor math returning
one gradient per tensor input. The engine sums broadcast gradients back to each input's shape,
so none of them does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchlight.autograd import Context, Function
from torchlight.shape import reduced_shape

if TYPE_CHECKING:
    from torchlight.backends import Backend
    from torchlight.dtypes import DType
    from torchlight.tensor import Tensor

#: ``ctx.needs_input_grad`` of a Context that ``apply`` did not make (a direct ``forward`` call).
#: Mul, Div and MatMul save only what backward will use, given which inputs need a gradient
#: (PyTorch's rule): ``d * 2`` keeps ``2``, not ``d``, so a later ``d += 1`` is no error.
_BOTH = (True, True)

# --------------------------------------------------------------------------- elementwise, one input


class Neg(Function):
    r"""$f(x) = -x$, $f'(x) = -1$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        return a._map("neg")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return -grad_output


class Abs(Function):
    r"""$f(x) = |x|$, $f'(x) = \mathrm{sign}(x)$ (0 at the kink, as in PyTorch)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return a._map("abs")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        return grad_output * a._map("sign")


class Exp(Function):
    r"""$f(x) = e^x$, $f'(x) = e^x$: save the output, not the input."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        out = a._map("exp")
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad_output * out


class Log(Function):
    r"""$f(x) = \ln x$, $f'(x) = 1/x$ (log 0 is -inf, as in PyTorch)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return a._map("log")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        return grad_output / a


class Sqrt(Function):
    r"""$f(x) = \sqrt{x}$, $f'(x) = 1 / (2\sqrt{x})$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        out = a._map("sqrt")
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad_output / (2 * out)


class Sigmoid(Function):
    r"""$\sigma(x) = 1/(1+e^{-x})$, $\sigma'(x) = \sigma(x)(1-\sigma(x))$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        out = a._map("sigmoid")  # the backend computes it stably for large |x|
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad_output * out * (1 - out)


class ReLU(Function):
    r"""$f(x) = \max(x, 0)$, $f'(x) = [x > 0]$ (0 at the kink, as in PyTorch)."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        ctx.save_for_backward(a)
        return a._map("relu")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        return grad_output * (a > 0)  # G * [a > 0]


class Tanh(Function):
    r"""$f(x) = \tanh x$, $f'(x) = 1 - \tanh^2 x$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        out = a._map("tanh")
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad_output * (1 - out * out)


class Clamp(Function):
    r"""$f(x) = \min(\max(x, lo), hi)$, $f'(x) = [lo \le x \le hi]$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, lo: float | None, hi: float | None) -> Tensor:
        ctx.save_for_backward(a)
        ctx.lo, ctx.hi = lo, hi
        out = a
        if lo is not None:
            out = out._zip("maximum", a._lift(lo))
        if hi is not None:
            out = out._zip("minimum", a._lift(hi))
        return out if out is not a else a._map("copy")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        (a,) = ctx.saved_tensors
        inside = grad_output
        if ctx.lo is not None:
            inside = inside * (a >= ctx.lo)
        if ctx.hi is not None:
            inside = inside * (a <= ctx.hi)
        return inside


class Copy(Function):
    r"""$f(x) = x$ into fresh contiguous storage (``clone``, ``contiguous``); $f'(x) = 1$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor) -> Tensor:
        return a._map("copy")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output


# --------------------------------------------------------------------------- elementwise, two inputs


class Add(Function):
    r"""$f(a, b) = a + b$: both gradients are ``grad_output``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        return a._zip("add", b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor]:
        return grad_output, grad_output


class Sub(Function):
    r"""$f(a, b) = a - b$: the gradients are ``grad_output`` and ``-grad_output``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        return a._zip("sub", b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor | None]:
        return grad_output, -grad_output if ctx.needs_input_grad[1] else None


class Mul(Function):
    r"""$f(a, b) = a b$, $\partial f/\partial a = b$, $\partial f/\partial b = a$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        needs_a, needs_b = ctx.needs_input_grad or _BOTH  # (_BOTH: a direct forward call)
        ctx.save_for_backward(a if needs_b else None, b if needs_a else None)  # d * 2 keeps 2 only
        return a._zip("mul", b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = grad_output * b if ctx.needs_input_grad[0] else None  # (none for a constant)
        grad_b = grad_output * a if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Div(Function):
    r"""$f(a, b) = a / b$, $\partial f/\partial a = 1/b$, $\partial f/\partial b = -a/b^2$.

    Saves $a$ only if $b$ needs a gradient (``d / 2`` does not keep ``d``).
    """

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        needs_b = (ctx.needs_input_grad or _BOTH)[1]
        ctx.save_for_backward(a if needs_b else None, b)
        return a._zip("div", b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = grad_output / b if ctx.needs_input_grad[0] else None  # (none for a constant)
        grad_b = -grad_output * a / (b * b) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Pow(Function):
    r"""$f(a, b) = a^b$, $\partial f/\partial a = b a^{b-1}$, $\partial f/\partial b = a^b \ln a$."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        out = a._zip("pow", b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor | None]:
        a, b, out = ctx.saved_tensors
        one = a._lift(1.0)
        # b a^(b-1) at b = 0 is 0 * 0^-1 = nan at a = 0, but a^0 = 1 is flat: a^1 there gives 0
        grad_a = grad_output * b * a ** Where.apply(b == 0, one, b - 1)
        if not ctx.needs_input_grad[1]:  # ln a is nan for a < 0: only when the exponent is learned
            return grad_a, None
        # a^b ln a at a = 0 is 0 * -inf, but 0^b is flat for b >= 0: ln 1 there gives 0 (PyTorch)
        grad_b = grad_output * out * Where.apply((a == 0) & (b >= 0), one, a).log()
        return grad_a, grad_b


class Maximum(Function):
    r"""$f(a, b) = \max(a, b)$: the gradient goes to the larger input, split evenly at ties."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a._zip("maximum", b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        share_a = (a > b) + 0.5 * (a == b)
        return grad_output * share_a, grad_output * (1 - share_a)


class Minimum(Function):
    r"""$f(a, b) = \min(a, b)$: the gradient goes to the smaller input, split evenly at ties."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return a._zip("minimum", b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        share_a = (a < b) + 0.5 * (a == b)
        return grad_output * share_a, grad_output * (1 - share_a)


class Where(Function):
    r"""$f(c, a, b) = a$ where $c$ else $b$: the gradient flows to whichever was picked."""

    @staticmethod
    def forward(ctx: Context, condition: Tensor, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(condition)
        return a._where(condition, b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[None, Tensor, Tensor]:
        (condition,) = ctx.saved_tensors
        zero = grad_output._lift(0.0)
        return (
            None,
            Where.apply(condition, grad_output, zero),
            Where.apply(condition, zero, grad_output),
        )


class MatMul(Function):
    r"""$C = AB$: $\partial L/\partial A = G B^T$, $\partial L/\partial B = A^T G$.

    1-D operands are treated as a row (left) or a column (right) vector and the extra
    dimension is dropped again; batch dimensions broadcast and the engine sums them back.
    Saves $B$ only if $A$ needs a gradient and $A$ only if $B$ does (PyTorch's rule).
    """

    @staticmethod
    def forward(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
        needs_a, needs_b = ctx.needs_input_grad or _BOTH  # (a direct call: save both)
        ctx.save_for_backward(a if needs_b else None, b if needs_a else None)
        ctx.ndims = a.ndim, b.ndim
        return a._matmul(b)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        a_ndim, b_ndim = ctx.ndims
        g = grad_output.unsqueeze(-1) if b_ndim == 1 else grad_output
        g = g.unsqueeze(-2) if a_ndim == 1 else g
        grad_a = grad_b = None
        if b is not None:  # a needs its gradient: G B^T
            grad_a = g @ (b.unsqueeze(1) if b_ndim == 1 else b).transpose(-1, -2)
            grad_a = grad_a.squeeze(-2) if a_ndim == 1 else grad_a
        if a is not None:  # b needs its gradient: A^T G
            grad_b = (a.unsqueeze(0) if a_ndim == 1 else a).transpose(-1, -2) @ g
            grad_b = grad_b.squeeze(-1) if b_ndim == 1 else grad_b
        return grad_a, grad_b


# --------------------------------------------------------------------------- reductions


class Sum(Function):
    r"""$f(x) = \sum_{i \in \text{dims}} x_i$: every summed element gets ``grad_output``."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
        ctx.shape, ctx.dims = a.shape, dims
        return a._reduce("sum", dims, keepdim)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        kept = reduced_shape(ctx.shape, ctx.dims, keepdim=True)  # the summed dims as size 1
        return grad_output.reshape(kept).expand(ctx.shape)


class Max(Function):
    r"""$f(x) = \max_{i \in \text{dims}} x_i$: the gradient goes to the maximum, split at ties."""

    @staticmethod
    def forward(
        ctx: Context, a: Tensor, dims: tuple[int, ...], keepdim: bool, op: str = "max"
    ) -> Tensor:
        out = a._reduce(op, dims, True)
        ctx.save_for_backward(a, out)
        ctx.dims, ctx.kept = dims, out.shape
        return out if keepdim else out.reshape(reduced_shape(a.shape, dims, keepdim=False))

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        a, out = ctx.saved_tensors
        winners = a == out
        count = winners.sum(ctx.dims, keepdim=True)
        return grad_output.reshape(ctx.kept) * winners / count


# --------------------------------------------------------------------------- layout


class View(Function):
    r"""The same elements in a new shape; the gradient is reshaped back."""

    makes_view = True  # the result shares the input's storage

    @staticmethod
    def forward(ctx: Context, a: Tensor, shape: tuple[int, ...], copy_ok: bool) -> Tensor:
        ctx.shape = a.shape
        return a._view(shape, copy_ok=copy_ok)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output.reshape(ctx.shape)


class Permute(Function):
    r"""Reorder dimensions (a view); the gradient is permuted by the inverse order."""

    makes_view = True

    @staticmethod
    def forward(ctx: Context, a: Tensor, dims: tuple[int, ...]) -> Tensor:
        ctx.dims = dims
        return a._permute(dims)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        inverse = sorted(range(len(ctx.dims)), key=lambda d: ctx.dims[d])  # where each dim went
        return grad_output.permute(*inverse)


class Expand(Function):
    r"""Repeat size-1 dimensions without copying (stride 0); the engine sums the gradient back."""

    makes_view = True

    @staticmethod
    def forward(ctx: Context, a: Tensor, shape: tuple[int, ...]) -> Tensor:
        return a._expand(shape)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output  # the engine reduces it to the input's shape


class GetItem(Function):
    r"""``a[index]``: the gradient is scattered back (repeated indices add up)."""

    makes_view = True  # (for basic indexing; a list or tensor index copies)

    @staticmethod
    def forward(ctx: Context, a: Tensor, index: tuple[Any, ...]) -> Tensor:
        ctx.shape, ctx.index = a.shape, index
        return a._getitem(index)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return GetItemBackward.apply(grad_output, ctx.shape, ctx.index)


class GetItemBackward(Function):
    r"""GetItem's backward as an op: zeros of ``shape`` with ``g`` added at ``index``; its own
    gradient is ``grad_output[index]`` (so ``a[index]`` can be differentiated twice)."""

    @staticmethod
    def forward(ctx: Context, g: Tensor, shape: tuple[int, ...], index: tuple[Any, ...]) -> Tensor:
        ctx.index = index
        return g._index_add(shape, index)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output[ctx.index]


class SetItem(Function):
    r"""``a[index] = value`` as a new tensor: $f(a, v) = a$ with the indexed elements replaced by $v$.

    The replaced elements no longer depend on $a$: $\partial L/\partial a$ is ``grad_output``
    with them zeroed, and $v$ gets their gradient (the engine sums it to $v$'s shape).
    In-place writes in the graph (``y[0] = 0``, ``y.fill_(1)``) are recorded as this.
    """

    @staticmethod
    def forward(ctx: Context, a: Tensor, value: Tensor, index: tuple[Any, ...]) -> Tensor:
        ctx.index = index
        out = a.clone()
        out[index] = value
        return out

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, Tensor, None]:
        grad_a = grad_output.clone()
        grad_a[ctx.index] = 0
        return grad_a, grad_output[ctx.index], None  # the index is not a tensor: None


class Cat(Function):
    r"""Join tensors along ``dim``; each input gets its slice of the gradient."""

    @staticmethod
    def forward(ctx: Context, *parts_and_dim: Any) -> Tensor:
        *parts, dim = parts_and_dim
        ctx.dim, ctx.sizes = dim, [p.shape[dim] for p in parts]
        return parts[0]._cat(parts, dim)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> tuple[Tensor, ...]:
        grads, start = [], 0
        for size in ctx.sizes:
            index = (slice(None),) * ctx.dim + (slice(start, start + size),)
            grads.append(grad_output[index])
            start += size
        return tuple(grads)


class Min(Function):
    r"""$f(x) = \min_{i \in \text{dims}} x_i$: the gradient goes to the minimum, split at ties.

    The same rule as :class:`Max`, so it hands both steps to it (composition, not inheritance).
    """

    @staticmethod
    def forward(ctx: Context, a: Tensor, dims: tuple[int, ...], keepdim: bool) -> Tensor:
        return Max.forward(ctx, a, dims, keepdim, op="min")

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return Max.backward(ctx, grad_output)


class Cast(Function):
    r"""Convert to another floating dtype; the gradient is converted back."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, dtype: DType) -> Tensor:
        ctx.dtype = a.dtype
        return a._new(a.backend.astype(a.storage, dtype.numpy))

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output.to(ctx.dtype)


class ToBackend(Function):
    r"""Move the elements to another backend (e.g. host to GPU); the gradient moves back."""

    @staticmethod
    def forward(ctx: Context, a: Tensor, backend: Backend) -> Tensor:
        ctx.backend = a.backend
        return a._to_backend(backend)

    @staticmethod
    def backward(ctx: Context, grad_output: Tensor) -> Tensor:
        return grad_output.to(ctx.backend.name)
