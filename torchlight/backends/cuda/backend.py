r"""The CUDA backend: tensors in GPU memory, map / zip / reduce / matmul as Numba CUDA kernels.

Storage is :class:`CudaStorage`: the strided reference backend's layout (``shape``,
``strides``, ``offset``) over a flat buffer that lives in GPU memory. Layout operations
(reshape, permute, expand, slicing) therefore never touch the GPU: they are the very functions
of :mod:`~torchlight.backends.strided.layout`. The kernels
(:mod:`~torchlight.backends.cuda.kernels`, which describes each) receive the flat buffer plus
the layout and do the same index arithmetic as the reference loops, in grid-stride loops over
the output's elements; a reduction gives each output element a block of threads (or one
thread, when it has few elements), and matmul stages tiles of A and B in shared memory. Before
a launch, :func:`coalesce` merges the dimensions every operand walks as one, so contiguous
tensors are walked as 1-D.

Data moves between host and GPU only where you ask: ``tensor.to("cuda")`` and
``tensor.to("numpy")`` (or printing, ``.numpy()``, ``.item()``). Indexing with integer or
boolean arrays computes *which positions* on the host (numpy indexes a table of positions),
copies that table to the GPU (once: the same table again reuses the copy) and moves the
elements there. Device buffers come from a caching allocator (``cuda/memory.py``), and kernels
are launched through :class:`~torchlight.backends.cuda.launch.Launcher`, which plans numba's
argument marshalling once per kernel and kind of arguments (``cuda/launch.py``).

Without a GPU, set ``NUMBA_ENABLE_CUDASIM=1`` before the backend is first used: numba then runs
the same kernels in its simulator (slowly, one Python thread per GPU thread).

This module holds :class:`CudaStorage` and :class:`CudaBackend`, which prepares each kernel's
arguments and launches it. The kernels' public names (``map_kernel``, ``kernel_sources``, the
launch constants ``THREADS``, ``TILE``, ``BM``...) can be imported from here too.

Example:
    >>> import torchlight as tl                       # doctest: +SKIP
    >>> x = tl.tensor([1.0, 2.0, 3.0]).to("cuda")     # doctest: +SKIP
    >>> (x * x).sum().item()                          # doctest: +SKIP
    14.0
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from torchlight.backends.base import Index
from torchlight.backends.cuda.kernels import (
    BK,
    BM,
    BN,
    MM_THREADS,
    SMALL_MATMUL,
    SMALL_REDUCE,
    THREADS,
    TILE,
    TM,
    TN,
    argfold_kernel,
    cuda,
    fold_kernel,
    grid_stride_size,
    helper_kernel,
    kernel_sources,
    map_kernel,
    matmul_kernels,
    reduce_kernel,
    zip_kernel,
)
from torchlight.backends.cuda.launch import Launcher
from torchlight.backends.cuda.memory import (
    CachingAllocator,
    TableCache,
    integer_progression,
    uniform_value,
)
from torchlight.backends.fused import FusedKernels
from torchlight.backends.scalar_ops import map_dtype, reduce_dtype, zip_dtype
from torchlight.backends.strided.layout import (
    LayoutOps,
    StridedLayout,
    basic_index,
    expand_strides,
    is_basic_index,
    position_table,
)
from torchlight.shape import broadcast_shape, reduced_shape, strides_from_shape

# The kernels live in cuda/kernels.py; their names stay importable from here.
__all__ = [
    "BK",
    "BM",
    "BN",
    "MM_THREADS",
    "SMALL_MATMUL",
    "SMALL_REDUCE",
    "THREADS",
    "TILE",
    "TM",
    "TN",
    "CudaBackend",
    "CudaStorage",
    "argfold_kernel",
    "cuda",
    "fold_kernel",
    "helper_kernel",
    "kernel_sources",
    "map_kernel",
    "matmul_kernels",
    "reduce_kernel",
    "zip_kernel",
]


class CudaStorage(StridedLayout):
    """A :class:`~torchlight.backends.strided.layout.StridedLayout` whose buffer lives on the GPU."""

    __slots__ = ()

    def __repr__(self) -> str:
        return (
            f"CudaStorage(shape={self.shape}, strides={self.strides}, offset={self.offset}, "
            f"dtype={self.dtype.name}, device buffer of {self.buffer.size})"
        )


def coalesce(
    shape: tuple[int, ...], strides: Sequence[tuple[int, ...]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """``shape`` and each operand's ``strides`` with neighbouring dimensions merged wherever
    every operand walks them as one (``stride[d] == stride[d + 1] * shape[d + 1]``), and
    dimensions of size 1 dropped; row-major order is unchanged. A contiguous tensor becomes
    1-D, so a kernel finds its elements with no division. Never 0-d: at least ``(1,)``.

    Example: ``coalesce((2, 3, 4), [(12, 4, 1), (0, 4, 1)])`` is ``((2, 12), [(12, 1), (0, 1)])``.
    """
    # Speed trick (host side): most launches walk contiguous operands and broadcast scalars,
    # which are 1-D at once; only the others go through the loop below.
    contiguous = strides_from_shape(shape)
    if all(s == contiguous or not any(s) for s in strides):
        size = math.prod(shape)
        if size != 1:
            return (size,), [(1,) if any(s) else (0,) for s in strides]
    dims = [(n, [s[d] for s in strides]) for d, n in enumerate(shape) if n != 1]
    if not dims:
        return (1,), [(0,) for _ in strides]
    merged = [dims[0]]
    for n, ss in dims[1:]:
        previous_n, previous_ss = merged[-1]
        if all(p == s * n for p, s in zip(previous_ss, ss, strict=True)):
            merged[-1] = (previous_n * n, ss)
        else:
            merged.append((n, ss))
    return tuple(n for n, _ in merged), [
        tuple(ss[k] for _, ss in merged) for k in range(len(strides))
    ]


def _strided_args(shape: tuple[int, ...], *operands: CudaStorage) -> tuple[Any, ...]:
    """The arguments a strided kernel takes to walk ``shape``: each operand's buffer, offset and
    strides (broadcast to ``shape``: stride 0), then ``shape`` itself, coalesced."""
    shape, strides = coalesce(
        shape,
        [
            o.strides if o.shape == shape else expand_strides(o.shape, o.strides, shape)
            for o in operands
        ],
    )
    args: list[Any] = []
    for o, s in zip(operands, strides, strict=True):
        args += [o.buffer, o.offset, s]
    return (*args, shape)


def _writable_in_place(out: CudaStorage, dtype: np.dtype, *operands: CudaStorage) -> bool:
    """Whether a kernel may write its ``dtype`` result straight into ``out`` (through its strides)
    while it reads ``operands``: no two elements of ``out`` share a position (no broadcast
    dimension), and each operand lives in another buffer or is the same elements in the same
    layout (each thread reads its element before it writes it)."""
    if out.dtype != dtype or any(
        s == 0 for n, s in zip(out.shape, out.strides, strict=True) if n > 1
    ):
        return False
    layout = (out.shape, out.strides, out.offset)
    return all(
        x.buffer is not out.buffer or (x.shape, x.strides, x.offset) == layout for x in operands
    )


class CudaBackend(LayoutOps, FusedKernels):
    """Tensors in GPU memory (strided layout over a flat device buffer), Numba CUDA kernels.

    Raises:
        RuntimeError: at creation when numba finds no GPU and the simulator is off.
    """

    name = "cuda"

    def __init__(self) -> None:
        if not cuda.is_available():
            raise RuntimeError(
                "the 'cuda' backend found no CUDA GPU (numba.cuda.is_available() is False). "
                "To run its kernels in numba's CUDA simulator instead, set the environment "
                "variable NUMBA_ENABLE_CUDASIM=1 before Python starts (e.g. "
                "`NUMBA_ENABLE_CUDASIM=1 jupyter lab`); or use backend='numba' on the CPU."
            )
        # (asked of numba.cuda itself: numba's config follows the environment, which may change)
        self.simulator = cuda.device_array.__module__.startswith("numba.cuda.simulator")
        # Speed tricks (cuda/memory.py): dropped buffers are reused, index tables uploaded once.
        self.memory = CachingAllocator(self.simulator)
        self.tables = TableCache(self.memory)
        # Speed trick (cuda/launch.py): numba's per-launch argument marshalling planned once.
        fast = os.environ.get("TORCHLIGHT_CUDA_FAST_LAUNCH", "1") != "0"
        self.launcher = Launcher(enabled=fast and not self.simulator)
        self.tile = 8 if self.simulator else TILE
        # Grid-stride kernels launch at most max_blocks blocks: 16 per multiprocessor fill a GPU
        # (2048 threads each); the simulator runs one Python thread per GPU thread, so fewer, and
        # smaller blocks.
        # A reduction splits into parts once each thread would fold more than reduce_work
        # elements (small in the simulator, so its tests reach that path).
        if self.simulator:
            self.threads, self.max_blocks, self.reduce_work = 32, 4, 2
        else:
            self.threads, self.max_blocks, self.reduce_work = (
                THREADS,
                16 * self.multiprocessors(),
                16,
            )

    def _launch(self, kernel: Any, n: int, *args: Any) -> None:
        """Run the grid-stride ``kernel`` over ``n`` elements (see
        :func:`~torchlight.backends.cuda.kernels.grid_stride_size`)."""
        blocks, threads = grid_stride_size(n, self.max_blocks, self.threads)
        self.launcher(kernel, blocks, threads, args)

    @staticmethod
    def multiprocessors() -> int:
        """The number of streaming multiprocessors (SMs) of the current GPU."""
        return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)

    # ------------------------------------------------------------------ conversions (explicit transfers)
    def empty(self, shape: Sequence[int], dtype: Any) -> CudaStorage:
        """Fresh contiguous device storage (uninitialized: every caller overwrites it), from the
        caching allocator (:class:`~torchlight.backends.cuda.memory.CachingAllocator`)."""
        shape = tuple(shape)
        buffer = self.memory.take(max(math.prod(shape), 1), np.dtype(dtype))
        return CudaStorage(buffer, shape, strides_from_shape(shape), 0, dtype)

    def from_numpy(self, array: np.ndarray) -> CudaStorage:
        """Copy ``array`` from the host to the GPU.

        Speed trick: an array whose elements are all one value (a Python number lifted to a
        tensor, ``zeros``, ``ones``, ``full``) is not copied: the fill kernel writes the value,
        which it receives as a kernel argument. Likewise an integer ``arange`` (start and step
        found on the host): the iota kernel writes it. A copy from host memory first waits for
        every kernel queued on the GPU; a launch does not wait.
        """
        array = np.asarray(array, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        host = array.reshape(-1) if array.size else np.zeros(1, array.dtype)
        out = self.empty(array.shape, array.dtype)
        value = uniform_value(host)
        progression = integer_progression(host) if value is None else None
        if value is not None:
            args = (out.buffer, 0, (1,), value, (host.size,))
            self._launch(helper_kernel("fill"), host.size, *args)
        elif progression is not None:
            self._launch(helper_kernel("iota"), host.size, out.buffer, *progression)
        else:
            out.buffer.copy_to_device(host)
        return out

    def scalar(self, value: int | float | bool, dtype: np.dtype | None) -> CudaStorage:
        return self.from_numpy(np.asarray(value, dtype))

    def to_numpy(self, a: CudaStorage) -> np.ndarray:
        """Copy ``a`` from the GPU to the host (made contiguous on the GPU first)."""
        if a.size == 0:
            return np.zeros(a.shape, a.dtype)
        c = self.contiguous(a)
        return c.buffer[c.offset : c.offset + c.size].copy_to_host().reshape(a.shape)

    def strides(self, a: CudaStorage) -> tuple[int, ...]:
        return a.strides

    # ------------------------------------------------------------------ the primitives
    def map(self, op: str, a: CudaStorage, dtype: Any = None) -> CudaStorage:
        out = self.empty(a.shape, dtype if dtype is not None else map_dtype(op, a.dtype))
        if out.size:
            args = _strided_args(a.shape, a)
            kernel = map_kernel(op, out.dtype == np.float32)  # float32 constants for float32
            self._launch(kernel, out.size, out.buffer, *args)
        return out

    def zip(
        self, op: str, a: CudaStorage, b: CudaStorage, out: CudaStorage | None = None
    ) -> CudaStorage:
        if out is not None and not _writable_in_place(out, zip_dtype(op, a.dtype, b.dtype), a, b):
            # the result, then a copy into ``out`` (safe when out overlaps a or b)
            self.setitem(out, (...,), self.zip(op, a, b))
            return out
        if out is None:
            out = self.empty(broadcast_shape(a.shape, b.shape), zip_dtype(op, a.dtype, b.dtype))
        if out.size:
            args = _strided_args(out.shape, out, a, b)
            kernel = zip_kernel(op, out.dtype == np.float32)
            self._launch(kernel, out.size, *args)
        return out

    def reduce(self, op: str, a: CudaStorage, dims: tuple[int, ...], keepdim: bool) -> CudaStorage:
        out_shape = reduced_shape(a.shape, dims, keepdim=keepdim)
        out_dtype = reduce_dtype(op, a.dtype)
        count = math.prod(a.shape[d] for d in dims)
        if count == 0 and op != "sum":
            raise ValueError(f"{op}() of an empty dimension has no value (shape {a.shape})")
        if count == 0 or a.size == 0:
            return self.from_numpy(np.zeros(out_shape, out_dtype))
        acc_dtype = np.dtype(np.int64) if a.dtype.kind == "b" else out_dtype
        kept_dims = [d for d in range(len(a.shape)) if d not in dims]
        outputs = math.prod(a.shape[d] for d in kept_dims)
        kept_shape, (kept_strides,) = coalesce(
            tuple(a.shape[d] for d in kept_dims), [tuple(a.strides[d] for d in kept_dims)]
        )
        red_shape, (red_strides,) = coalesce(
            tuple(a.shape[d] for d in dims), [tuple(a.strides[d] for d in dims)]
        )
        args = (a.buffer, a.offset, kept_shape, kept_strides, red_shape, red_strides)
        if count <= SMALL_REDUCE:  # one thread per output
            out = self.empty(out_shape, acc_dtype)
            kernel = fold_kernel(op, acc_dtype.name)
            self._launch(kernel, outputs, out.buffer, *args)
            return out if acc_dtype == out_dtype else self.astype(out, out_dtype)
        threads = min(THREADS, 1 << (count - 1).bit_length())  # a power of two for the tree
        # Few outputs of many elements (a full sum): split each output's elements into parts,
        # one block each, so that the whole GPU works; their results are reduced once more.
        parts = max(
            1, min(count // (threads * self.reduce_work), 1024, -(-self.max_blocks // outputs))
        )
        partial = self.empty((outputs, parts), acc_dtype)
        kernel = reduce_kernel(op, acc_dtype.name)
        self.launcher(kernel, (outputs, parts), threads, (partial.buffer, *args))
        result = self.reduce(op, partial, (1,), False) if parts > 1 else partial
        out = self._reshape(result, out_shape)
        return out if out.dtype == out_dtype else self.astype(out, out_dtype)

    def matmul(self, a: CudaStorage, b: CudaStorage) -> CudaStorage:
        dtype = np.result_type(a.dtype, b.dtype)
        compute = dtype if dtype.kind == "f" else np.dtype(np.int64)
        a = a if a.dtype == compute else self.astype(a, compute)
        b = b if b.dtype == compute else self.astype(b, compute)
        a2 = a if len(a.shape) > 1 else self._reshape(a, (1, *a.shape))
        b2 = b if len(b.shape) > 1 else self._reshape(b, (*b.shape, 1))
        batch = broadcast_shape(a2.shape[:-2], b2.shape[:-2])
        (M, K), N = a2.shape[-2:], b2.shape[-1]
        count = math.prod(batch)
        a3 = self._reshape(self.expand(a2, (*batch, M, K)), (count, M, K))
        b3 = self._reshape(self.expand(b2, (*batch, K, N)), (count, K, N))
        out = self.empty((*batch, M, N), compute)
        if out.size and K == 0:
            self.setitem(out, (...,), 0)
        elif out.size:
            small, tiled, blocked = matmul_kernels(compute.name, self.tile)
            args = (
                out.buffer,
                a3.buffer,
                a3.offset,
                a3.strides,
                b3.buffer,
                b3.offset,
                b3.strides,
                M,
                N,
                K,
            )
            if M * N * K <= SMALL_MATMUL:
                self._launch(small, out.size, *args)
            elif M >= BM and N >= BN:
                grid = (math.ceil(N / BN), math.ceil(M / BM), count)
                self.launcher(blocked, grid, MM_THREADS, args)
            else:
                tile = self.tile
                grid = (math.ceil(N / tile), math.ceil(M / tile), count)
                self.launcher(tiled, grid, (tile, tile), args)
        shape = out.shape
        if len(a.shape) == 1:
            shape = shape[:-2] + shape[-1:]
        if len(b.shape) == 1:
            shape = shape[:-1]
        out = self._reshape(out, shape)
        return out if compute == dtype else self.astype(out, dtype)

    # ------------------------------------------------------------------ layout: no kernels at all
    def _reshape(self, a: CudaStorage, shape: tuple[int, ...]) -> CudaStorage:
        out = self.view(a, shape)
        if out is None:
            out = self.view(self.contiguous(a), shape)
        assert out is not None, "a contiguous tensor can always be viewed in a shape of its size"
        return out

    def astype(self, a: CudaStorage, dtype: np.dtype) -> CudaStorage:
        return self.map("copy", a, dtype=dtype)

    # ------------------------------------------------------------------ indexing and assembly
    def getitem(self, a: CudaStorage, index: Index) -> CudaStorage:
        """Basic indices give a view; integer/boolean arrays gather on the GPU the positions
        that numpy computed on the host (by indexing a table of positions)."""
        if is_basic_index(index):
            return self.basic_view(a, index)
        table = position_table(a.shape, a.strides, a.offset)[index]
        out = self.empty(table.shape, a.dtype)
        if out.size:
            positions = self.tables.to_device(table)  # (uploaded once for the same table)
            args = (out.buffer, a.buffer, positions)
            self._launch(helper_kernel("gather"), out.size, *args)
        return out

    def index_add(self, shape: tuple[int, ...], index: Index, values: CudaStorage) -> CudaStorage:
        """Zeros of ``shape`` with ``values`` added at ``index`` (atomic adds on the GPU)."""
        out = self.empty(shape, values.dtype)
        self.setitem(out, (...,), 0)
        table = position_table(out.shape, out.strides, 0)[index]
        if table.size:
            args = _strided_args(table.shape, values)
            targets = self.tables.to_device(table)
            self._launch(helper_kernel("scatter_add"), table.size, out.buffer, targets, *args)
        return out

    def setitem(self, a: CudaStorage, index: Index, values: Any) -> None:
        """Write ``values`` (device storage or a number, broadcast) into ``a[index]`` on the GPU."""
        if any(s == 0 and n > 1 for n, s in zip(a.shape, a.strides, strict=True)):
            raise ValueError("assignment destination is read-only (an expanded view)")
        if is_basic_index(index) and np.ndim(values) == 0 and not isinstance(values, CudaStorage):
            shape, strides, offset = basic_index(a.shape, a.strides, a.offset, index)
            if math.prod(shape):  # a number: the fill kernel writes it, nothing is transferred
                shape, (strides,) = coalesce(shape, [strides])
                value = np.asarray(values, dtype=a.dtype)[()]
                args = (a.buffer, offset, strides, value, shape)
                self._launch(helper_kernel("fill"), math.prod(shape), *args)
            return
        if not isinstance(values, CudaStorage):
            values = self.from_numpy(np.asarray(values, dtype=a.dtype))
        if values.dtype != a.dtype:
            values = self.astype(values, a.dtype)
        elif values.buffer is a.buffer:
            values = self.map("copy", values)  # read everything before writing (x[1:] = x[:-1])
        if is_basic_index(index):
            shape, strides, offset = basic_index(a.shape, a.strides, a.offset, index)
            while len(values.shape) > len(shape) and values.shape[0] == 1:
                values = self._reshape(values, values.shape[1:])  # numpy drops leading 1s too
            target = CudaStorage(a.buffer, shape, strides, offset, a.dtype)
            args = _strided_args(shape, target, values)
            if math.prod(shape):
                self._launch(helper_kernel("copy"), math.prod(shape), *args)
            return
        table = position_table(a.shape, a.strides, a.offset)[index]
        if table.size:
            args = _strided_args(table.shape, values)
            targets = self.tables.to_device(table)
            self._launch(helper_kernel("scatter"), table.size, a.buffer, targets, *args)

    def cat(self, parts: Sequence[CudaStorage], dim: int) -> CudaStorage:
        shape = list(parts[0].shape)
        shape[dim] = sum(p.shape[dim] for p in parts)
        out = self.empty(shape, np.result_type(*[p.dtype for p in parts]))
        first = parts[0]
        alike = (first.shape, first.strides, out.dtype)
        if out.size and all(
            p.buffer is first.buffer and (p.shape, p.strides, p.dtype) == alike for p in parts
        ):  # views of one buffer, alike but for their offsets (im2col's windows): one launch
            split = (*first.shape[:dim], len(parts), *first.shape[dim:])
            strides = (*first.strides[:dim], 0, *first.strides[dim:])
            offsets = self.tables.to_device(np.array([p.offset for p in parts], np.int64))
            args = (out.buffer, first.buffer, offsets, strides, split, dim)
            self._launch(helper_kernel("cat_views"), out.size, *args)
            return out
        start = 0
        for part in parts:
            self.setitem(out, (slice(None),) * dim + (slice(start, start + part.shape[dim]),), part)
            start += part.shape[dim]
        return out

    def where(self, condition: CudaStorage, a: CudaStorage, b: CudaStorage) -> CudaStorage:
        shape = broadcast_shape(broadcast_shape(condition.shape, a.shape), b.shape)
        out = self.empty(shape, np.result_type(a.dtype, b.dtype))
        if out.size:
            args = _strided_args(shape, condition, a, b)
            self._launch(helper_kernel("where"), out.size, out.buffer, *args)
        return out

    def argreduce(self, op: str, a: CudaStorage, dim: int | None, keepdim: bool) -> CudaStorage:
        """Index of the first largest (``"max"``) or smallest (``"min"``) element along ``dim``
        (of all elements, flattened, when ``None``): one GPU thread per output."""
        if a.size == 0:
            raise ValueError(f"arg{op}() of an empty tensor (shape {a.shape})")
        if dim is None:
            flat = self._reshape(a, (a.size,))
            out = self.argreduce(op, flat, 0, False)
            return self._reshape(out, (1,) * len(a.shape)) if keepdim else out
        kept = tuple(1 if d == dim else n for d, n in enumerate(a.shape))
        out = self.empty(kept, np.int64)
        kept_shape, (kept_strides,) = coalesce(kept, [a.strides])
        args = (a.buffer, a.offset, kept_shape, kept_strides, a.shape[dim], a.strides[dim])
        self._launch(argfold_kernel(op), out.size, out.buffer, *args)
        if keepdim:
            return out
        return self._reshape(out, tuple(n for d, n in enumerate(a.shape) if d != dim))
