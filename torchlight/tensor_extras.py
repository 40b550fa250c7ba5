r"""The rest of PyTorch's everyday Tensor methods, as one-line calls into the ops modules.

``Tensor`` inherits these next to :class:`~torchlight.tensor_methods.TensorOps`: elementwise math
(:mod:`~torchlight.ops.elementwise`), reductions (:mod:`~torchlight.ops.reductions`), layout
(:mod:`~torchlight.ops.layout`), indexing and sorting (:mod:`~torchlight.ops.indexing`), in-place
variants, ``new_*`` factories and ``.cpu()``. Every name, argument and default is PyTorch's.

The in-place variants (``clamp_``, ``exp_``, ``masked_fill_``...) compute the out-of-place
result and write it with ``copy_``, so they follow exactly the rules ``copy_`` follows (under
``tl.no_grad()`` on parameters; recorded on a non-leaf in the graph; refused on a leaf that
requires grad).

Example:
    >>> import torchlight as tl
    >>> x = tl.tensor([[1.0, -2.0], [3.0, 0.5]])
    >>> x.sort(dim=1).values
    tensor([[-2.0000,  1.0000],
            [ 0.5000,  3.0000]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from torchlight.autograd import is_grad_enabled
from torchlight.ops import elementwise as ops_math
from torchlight.ops import indexing as ops_index
from torchlight.ops import layout as ops_shape
from torchlight.ops import reductions as ops_reduce
from torchlight.return_types import Sort, TopK

if TYPE_CHECKING:
    from torchlight.tensor import Tensor

Dims = int | Sequence[int] | None


class TensorExtras:
    """Mixin: the methods of :class:`~torchlight.tensor.Tensor` beyond the core ones."""

    __slots__ = ()

    # ---------------------------------------------------------------- elementwise math
    def sin(self: Tensor) -> Tensor:
        r"""$\sin x$ elementwise."""
        return ops_math.Sin.apply(self)

    def cos(self: Tensor) -> Tensor:
        r"""$\cos x$ elementwise."""
        return ops_math.Cos.apply(self)

    def log1p(self: Tensor) -> Tensor:
        r"""$\ln(1 + x)$, accurate for tiny $x$."""
        return ops_math.Log1p.apply(self)

    def expm1(self: Tensor) -> Tensor:
        r"""$e^x - 1$, accurate for tiny $x$."""
        return ops_math.Expm1.apply(self)

    def erf(self: Tensor) -> Tensor:
        r"""The error function $\frac{2}{\sqrt\pi}\int_0^x e^{-t^2}\,dt$."""
        return ops_math.Erf.apply(self)

    def floor(self: Tensor) -> Tensor:
        r"""$\lfloor x \rfloor$ (gradient 0)."""
        return ops_math.Floor.apply(self)

    def round(self: Tensor, decimals: int = 0) -> Tensor:
        """To the nearest integer (or multiple of ``10**-decimals``), halves to even; gradient 0."""
        if decimals == 0:
            return ops_math.Round.apply(self)
        scale = 10.0**decimals
        return ops_math.Round.apply(self * scale) / scale

    def rsqrt(self: Tensor) -> Tensor:
        r"""$1 / \sqrt{x}$."""
        return 1 / self.sqrt()

    def reciprocal(self: Tensor) -> Tensor:
        r"""$1 / x$."""
        return 1 / self

    def square(self: Tensor) -> Tensor:
        r"""$x^2$."""
        return self * self

    def add(self: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
        r"""$x + \alpha \cdot \mathrm{other}$."""
        return self + (other if alpha == 1 else other * alpha)

    def sub(self: Tensor, other: Any, *, alpha: float = 1) -> Tensor:
        r"""$x - \alpha \cdot \mathrm{other}$."""
        return self - (other if alpha == 1 else other * alpha)

    def softmax(self: Tensor, dim: int) -> Tensor:
        """:func:`torchlight.nn.functional.softmax` along ``dim``."""
        from torchlight.nn.functional import softmax

        return softmax(self, dim)

    def log_softmax(self: Tensor, dim: int) -> Tensor:
        """:func:`torchlight.nn.functional.log_softmax` along ``dim``."""
        from torchlight.nn.functional import log_softmax

        return log_softmax(self, dim)

    # ---------------------------------------------------------------- in place (through copy_)
    def clamp_(self: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
        """:meth:`clamp` in place; returns ``self``."""
        return _in_place(self, lambda x: x.clamp(min, max))

    clip_ = clamp_

    def pow_(self: Tensor, exponent: Any) -> Tensor:
        r"""$x \leftarrow x^{\mathrm{exponent}}$ in place."""
        return _in_place(self, lambda x: x**exponent)

    def neg_(self: Tensor) -> Tensor:
        r"""$x \leftarrow -x$ in place."""
        return _in_place(self, lambda x: -x)

    def exp_(self: Tensor) -> Tensor:
        r"""$x \leftarrow e^x$ in place."""
        return _in_place(self, lambda x: x.exp())

    def masked_fill_(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        """:meth:`masked_fill` in place."""
        return _in_place(self, lambda x: ops_index.masked_fill(x, mask, value))

    def scatter_(self: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
        """:meth:`scatter` in place."""
        return _in_place(self, lambda x: ops_index.scatter(x, dim, index, src))

    def scatter_add_(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """:meth:`scatter_add` in place."""
        return _in_place(self, lambda x: ops_index.scatter_add(x, dim, index, src))

    # ---------------------------------------------------------------- reductions
    def prod(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
        r"""$\prod_i x_i$ along ``dim`` (all elements when None)."""
        return ops_reduce.prod(self, dim, keepdim)

    def logsumexp(self: Tensor, dim: Dims, keepdim: bool = False) -> Tensor:
        r"""$\log\sum_i e^{x_i}$ along ``dim``, without overflow."""
        return ops_reduce.logsumexp(self, dim, keepdim)

    def norm(
        self: Tensor, p: float | str = "fro", dim: Dims = None, keepdim: bool = False
    ) -> Tensor:
        r"""The $p$-norm over ``dim`` (all elements when None); 2 by default."""
        return ops_reduce.norm(self, p, dim, keepdim)

    def cumsum(self: Tensor, dim: int) -> Tensor:
        r"""Running sums $y_i = \sum_{j \le i} x_j$ along ``dim``."""
        return ops_reduce.cumsum(self, dim)

    def amax(self: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
        """The largest values along ``dim`` (a tensor, never ``(values, indices)``)."""
        return ops_reduce.amax(self, dim, keepdim)

    def amin(self: Tensor, dim: Dims = (), keepdim: bool = False) -> Tensor:
        """The smallest values along ``dim``."""
        return ops_reduce.amin(self, dim, keepdim)

    def median(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median; with ``dim``, ``(values, indices)`` along it."""
        return ops_index.median(self, dim, keepdim)

    # ---------------------------------------------------------------- layout
    def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most ``chunks`` equal pieces along ``dim`` (views)."""
        return ops_shape.chunk(self, chunks, dim)

    def split(self: Tensor, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces of ``split_size`` (or of the listed sizes) along ``dim``."""
        return ops_shape.split(self, split_size, dim)

    def unbind(self: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
        """Every slice along ``dim``, that dimension removed."""
        return ops_shape.unbind(self, dim)

    def narrow(self: Tensor, dim: int, start: int, length: int) -> Tensor:
        """``length`` elements of ``dim`` from ``start`` on (a view)."""
        return ops_shape.narrow(self, dim, start, length)

    def repeat(self: Tensor, *sizes: Any) -> Tensor:
        """Tile the tensor ``sizes[i]`` times along dimension ``i``."""
        flat = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], Sequence) else sizes
        return ops_shape.repeat(self, tuple(int(s) for s in flat))

    def flip(self: Tensor, *dims: Any) -> Tensor:
        """Reverse the order of elements along ``dims``."""
        flat = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], Sequence) else dims
        return ops_shape.flip(self, flat)

    def roll(self: Tensor, shifts: int | Sequence[int], dims: Dims = None) -> Tensor:
        """Shift elements along ``dims``, wrapping around."""
        return ops_shape.roll(self, shifts, dims)

    def movedim(
        self: Tensor, source: int | Sequence[int], destination: int | Sequence[int]
    ) -> Tensor:
        """Move dimension(s) ``source`` to ``destination``."""
        return ops_shape.movedim(self, source, destination)

    moveaxis = movedim

    def tril(self: Tensor, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two dimensions; zeros above."""
        return ops_shape.tril(self, diagonal)

    def triu(self: Tensor, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two dimensions; zeros below."""
        return ops_shape.triu(self, diagonal)

    @property
    def mT(self: Tensor) -> Tensor:  # noqa: N802 - PyTorch's name
        """The last two dimensions swapped (a batch of matrices transposed)."""
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got shape {self.shape}")
        return self.transpose(-2, -1)

    def t(self: Tensor) -> Tensor:
        """The transpose of a matrix (a 0-d or 1-d tensor is returned as it is)."""
        if self.ndim > 2:
            raise ValueError(
                f"t() expects a tensor of at most 2 dimensions, got shape {self.shape}; use "
                ".transpose(dim0, dim1) or .mT"
            )
        return self if self.ndim < 2 else self.transpose(0, 1)

    def view_as(self: Tensor, other: Tensor) -> Tensor:
        return self.view(other.shape)

    def reshape_as(self: Tensor, other: Tensor) -> Tensor:
        return self.reshape(other.shape)

    def expand_as(self: Tensor, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    # ---------------------------------------------------------------- indexing and sorting
    def gather(self: Tensor, dim: int, index: Tensor) -> Tensor:
        """The elements at ``index`` along ``dim`` (see :func:`torchlight.ops.indexing.gather`)."""
        return ops_index.gather(self, dim, index)

    def scatter(self: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
        """A copy with ``src`` written at ``index`` along ``dim``."""
        return ops_index.scatter(self, dim, index, src)

    def scatter_add(self: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """A copy with ``src`` added at ``index`` along ``dim`` (repeats add up)."""
        return ops_index.scatter_add(self, dim, index, src)

    def index_select(self: Tensor, dim: int, index: Tensor) -> Tensor:
        """The slices along ``dim`` at the positions in the 1-D ``index``."""
        return ops_index.index_select(self, dim, index)

    def masked_fill(self: Tensor, mask: Tensor, value: Any) -> Tensor:
        """A copy with ``value`` where ``mask`` is true."""
        return ops_index.masked_fill(self, mask, value)

    def sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Sort:
        """``(values, indices)`` sorted along ``dim`` (always stable here)."""
        return ops_index.sort(self, dim, descending)

    def argsort(
        self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False
    ) -> Tensor:
        """The indices that sort along ``dim`` (always stable here)."""
        return ops_index.argsort(self, dim, descending)

    def topk(
        self: Tensor,
        k: int,
        dim: int = -1,
        largest: bool = True,
        sorted: bool = True,  # noqa: A002
    ) -> TopK:
        """``(values, indices)`` of the ``k`` largest along ``dim`` (always sorted here)."""
        return ops_index.topk(self, k, dim, largest)

    # ---------------------------------------------------------------- factories and devices
    def new_tensor(
        self: Tensor, data: Any, dtype: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """A new leaf from ``data`` with this tensor's dtype (unless given) and backend."""
        from torchlight.creation import tensor

        return tensor(
            data, dtype=dtype or self.dtype, requires_grad=requires_grad, backend=self.backend
        )

    def new_zeros(
        self: Tensor, *size: Any, dtype: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """Zeros of ``size`` with this tensor's dtype (unless given) and backend."""
        return self.new_full(_size(size), 0, dtype=dtype, requires_grad=requires_grad)

    def new_ones(
        self: Tensor, *size: Any, dtype: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """Ones of ``size`` with this tensor's dtype (unless given) and backend."""
        return self.new_full(_size(size), 1, dtype=dtype, requires_grad=requires_grad)

    def new_full(
        self: Tensor,
        size: Sequence[int],
        fill_value: Any,
        dtype: Any = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """``fill_value`` everywhere in ``size``, with this tensor's dtype and backend."""
        from torchlight.creation import full

        return full(
            tuple(size), fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad,
            backend=self.backend,
        )  # fmt: skip

    def cpu(self: Tensor) -> Tensor:
        """On the CPU backend (``self`` if already there): ``.to("cpu")``."""
        return self.to("cpu")

    def cuda(self: Tensor) -> Tensor:
        """On the CUDA backend: ``.to("cuda")`` (an error naming the fix when there is no GPU)."""
        return self.to("cuda")


def _in_place(self: Tensor, compute: Callable[[Tensor], Tensor]) -> Tensor:
    """Write ``compute(self)`` into ``self`` with ``copy_``.

    In the graph, ``compute`` runs on a copy of ``self``: its Function may save its input for
    backward (``clamp`` does), and the write must not change what was saved (PyTorch keeps the
    original values of an in-place op's input the same way). Under ``no_grad`` nothing is saved,
    so nothing is copied.
    """
    source = self.clone() if self.requires_grad and is_grad_enabled() else self
    return self.copy_(compute(source))


def _size(size: tuple[Any, ...]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], Sequence):
        return tuple(size[0])
    return tuple(size)
