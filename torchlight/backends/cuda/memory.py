r"""The CUDA backend's GPU memory: a caching allocator, and index tables uploaded once.

Both are backend speed tricks (nothing above the backend knows of them):

- :class:`CachingAllocator`, like PyTorch's CUDA caching allocator. Asking the driver for GPU
  memory (``cuMemAlloc``) is slow, and giving it back (``cuMemFree``) waits for the whole GPU
  to finish. A training step makes and drops the same few dozen buffers every step, so the
  allocator keeps each dropped buffer in a free list of its (rounded) size and hands it out
  again: after the first step, a step asks the driver for nothing.
  :func:`torchlight.cuda.memory_allocated`, :func:`~torchlight.cuda.memory_reserved` and
  :func:`~torchlight.cuda.empty_cache` report on it and empty it, with PyTorch's meanings.
- :class:`TableCache`: the position tables that integer-array indexing needs (which elements
  ``logits[rows, labels]`` reads, where ``one_hot`` adds its ones) are computed on the host;
  copying the same table to the GPU again is a transfer (and a wait for the GPU) for nothing.
  The cache keeps the device copies of recent tables, keyed by their bytes, so cross-entropy's
  forward gather and its backward scatter share one upload of the batch's labels.

Why not numba's External Memory Management (EMM) plugin interface
(``numba.cuda.set_memory_manager``)? It would serve numba's own allocations too, but it must be
chosen before the process creates its CUDA context, for every library in the process, and
numba's CUDA simulator has no memory manager at all, so the allocator could only be tested on a
GPU. Here the same code runs in the simulator and on the device.

Example:
    >>> import torchlight as tl                               # doctest: +SKIP
    >>> x = tl.ones(1000, device="cuda")                      # doctest: +SKIP
    >>> tl.cuda.memory_allocated(), tl.cuda.memory_reserved() # doctest: +SKIP
    (8192, 8192)
    >>> del x; tl.cuda.memory_allocated(), tl.cuda.memory_reserved()  # doctest: +SKIP
    (0, 8192)
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from torchlight.backends.cuda.kernels import cuda

#: Buffers are handed out in multiples of this many bytes (PyTorch rounds small ones to 512).
ROUND = 512
#: From this size on, sizes are rounded to 1, 1.25, 1.5 or 1.75 times a power of two instead
#: (less than 25% waste), so that a few free lists serve all large sizes.
LARGE = 1 << 20


def rounded_size(nbytes: int) -> int:
    """The size of the buffer that holds ``nbytes``: a multiple of 512 bytes below 1 MiB, above
    it the next $2^k (1 + j/4)$.

    Example: ``rounded_size(1)`` is 512, ``rounded_size(1000)`` 1024, ``rounded_size(1_100_000)``
    1310720 (1.25 MiB).
    """
    if nbytes <= LARGE:
        return max(ROUND, -(-nbytes // ROUND) * ROUND)
    quarter = 1 << (nbytes.bit_length() - 3)  # a quarter of the power of two below nbytes
    return -(-nbytes // quarter) * quarter


class CachingAllocator:
    """Device buffers from free lists of dropped ones; the driver is asked only when none fits.

    ``take(count, dtype)`` returns a 1-D device array of ``count`` elements that lives inside a
    *block* of :func:`rounded_size` bytes. When the array is garbage (no tensor, view or kernel
    argument holds it), its block goes back to the free list of its size. Kernels run in order
    on one stream, so a block reused at once is only written after every kernel queued before
    has finished reading it.

    Attributes:
        reserved: bytes of all blocks (in use or free), PyTorch's ``memory_reserved``.
        device_allocations: how many blocks were asked of the driver (``cuda.device_array``).
    """

    def __init__(self, simulator: bool) -> None:
        self.simulator = simulator
        self.free: dict[int, list[Any]] = {}
        self.reserved = 0
        self.device_allocations = 0

    def take(self, count: int, dtype: np.dtype) -> Any:
        """A device array of ``count`` (at least 1) elements of ``dtype``, uninitialized."""
        assert count >= 1, f"a device buffer holds at least one element, not {count}"
        size = rounded_size(count * dtype.itemsize)
        free = self.free.setdefault(size, [])
        block = free.pop() if free else self._new_block(size)
        array = self._typed_view(block, count, dtype)
        # When ``array`` dies, its block goes back to the free list (``free`` lives on in the
        # dict; list.append is atomic, so a collection that runs this meanwhile is safe).
        weakref.finalize(array, free.append, block).atexit = False
        return array

    def allocated(self) -> int:
        """Bytes of the blocks in use, PyTorch's ``memory_allocated`` (rounded sizes)."""
        return self.reserved - sum(size * len(blocks) for size, blocks in self.free.items())

    def empty_cache(self) -> None:
        """Give every free block back to the driver (blocks in use stay)."""
        for size, blocks in self.free.items():
            while blocks:
                blocks.pop()
                self.reserved -= size
        if not self.simulator:
            # numba queues the frees of dropped device memory and frees them in batches (in
            # its memory manager's queue, or the context's with an older numba): now, here
            context = cuda.current_context()
            manager = getattr(context, "memory_manager", context)
            pending = getattr(manager, "deallocations", None)
            if pending is not None:
                pending.clear()

    def _new_block(self, size: int) -> Any:
        try:
            block = cuda.device_array(size, dtype=np.uint8)
        except Exception:  # out of memory, most likely: free the cache and try once more
            if self.reserved == self.allocated():
                raise
            self.empty_cache()
            block = cuda.device_array(size, dtype=np.uint8)
        self.reserved += size
        self.device_allocations += 1
        return block

    def _typed_view(self, block: Any, count: int, dtype: np.dtype) -> Any:
        """The first ``count`` elements of ``dtype`` in ``block``, as a device array of its own."""
        if self.simulator:
            return block.view(dtype)[:count]
        # one plain DeviceNDArray on the block's memory (a slice would build three objects)
        array_type = type(block)
        return array_type(
            shape=(count,), strides=(dtype.itemsize,), dtype=dtype, gpu_data=block.gpu_data
        )


class TableCache:
    """Device copies of recently used host tables (int64 positions), keyed by their bytes.

    A table is never written on the device, so one copy may serve every call that needs the
    same table. Only tables of at most ``max_elements`` are kept, the ``size`` most recent: a
    training step uses a few (its batch's labels, each convolution's window offsets), and a new
    batch's labels take the place, and the block, of the oldest.
    """

    def __init__(self, allocator: CachingAllocator, size: int = 16, max_elements: int = 1 << 16):
        self.allocator, self.size, self.max_elements = allocator, size, max_elements
        self.tables: OrderedDict[tuple[str, bytes], Any] = OrderedDict()

    def to_device(self, table: np.ndarray) -> Any:
        """``table`` (flattened) on the device: a copy made now, or the one made last time."""
        flat = np.ascontiguousarray(table).reshape(-1)
        if flat.size > self.max_elements:
            return self._upload(flat)
        key = (flat.dtype.str, flat.tobytes())
        device = self.tables.get(key)
        if device is None:
            if len(self.tables) >= self.size:  # drop the oldest first: its block can serve
                self.tables.popitem(last=False)
            device = self.tables[key] = self._upload(flat)
        else:
            self.tables.move_to_end(key)
        return device

    def clear(self) -> None:
        self.tables.clear()

    def _upload(self, flat: np.ndarray) -> Any:
        device = self.allocator.take(max(flat.size, 1), flat.dtype)
        if flat.size:
            device.copy_to_device(flat)
        return device


def uniform_value(flat: np.ndarray) -> Any:
    """The one value every element of the 1-D ``flat`` holds, bit for bit (so ``-0.0`` is not
    ``0.0``), as a numpy scalar; None when they differ (or ``flat`` is empty)."""
    if flat.size == 0 or flat.dtype.itemsize not in (1, 2, 4, 8):
        return None
    bits = flat.view(f"u{flat.dtype.itemsize}")
    if bits[0] != bits[-1] or (flat.size > 2 and not (bits == bits[0]).all()):
        return None
    return flat[0]


def integer_progression(flat: np.ndarray) -> tuple[int, int] | None:
    """``(start, step)`` when the 1-D signed-integer ``flat`` is ``start + step * arange(n)``
    (an ``arange``, the window offsets of a pooling layer's backward), else None.

    Example: ``integer_progression(np.array([3, 5, 7]))`` is ``(3, 2)``.
    """
    if flat.dtype.kind != "i" or flat.size < 2:
        return None
    start, step = int(flat[0]), int(flat[1]) - int(flat[0])
    if int(flat[-1]) != start + step * (flat.size - 1):  # most tables end here
        return None
    expected = np.arange(flat.size, dtype=np.int64) * step + start
    return (start, step) if np.array_equal(flat, expected) else None
