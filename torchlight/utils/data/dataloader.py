"""``torch.utils.data.DataLoader``: batches from a data set, in the main process or in workers.

With ``num_workers=0`` the batches are made in the calling process. With ``num_workers=N``
there are ``N`` worker processes (``fork``ed on Linux, as PyTorch's; ``multiprocessing_context=``
chooses another start method): the main process sends each worker the indices of a batch, the
worker fetches and collates the samples and sends the batch back through a queue, and the
loader hands the batches out in order (``in_order=False``: as they come). Each worker seeds
torchlight's and Python's generators with ``base_seed + worker_id``, as PyTorch does, with
``base_seed`` new every epoch: read from a copy of the loader's ``generator`` (the generator
itself draws only the shuffle order, so an order is the same with or without workers, and
``seed=s`` gives the orders ``numpy.random.default_rng(s).permutation`` gives, epoch after
epoch); :func:`get_worker_info` tells a data set's code which worker it runs in. An error in a
worker is raised in the main process with the worker's traceback.
"""

from __future__ import annotations

import copy
import math
import multiprocessing
import queue
import random
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight.random import rng_of
from torchlight.utils.data.dataset import TensorDataset, default_collate
from torchlight.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "IterableDataset", "get_worker_info"]


class IterableDataset:
    """A data set that is a stream: subclass it and write ``__iter__`` (no ``[i]``).

    With workers, every worker runs its own copy of ``__iter__``; split the stream between them
    with :func:`get_worker_info`, as in PyTorch.
    """

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


@dataclass
class WorkerInfo:
    """What :func:`get_worker_info` returns inside a worker."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_WORKER_INFO: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker: its ``id``, ``num_workers``, ``seed`` and ``dataset``; else None."""
    return _WORKER_INFO


class _Failure:
    def __init__(self, worker_id: int, error: BaseException) -> None:
        self.text = (
            f"Caught {type(error).__name__} in DataLoader worker process {worker_id}.\n"
            f"Original {''.join(traceback.format_exception(error))}"
        )
        self.kind = type(error)

    def reraise(self) -> None:
        try:
            error = self.kind(self.text)
        except Exception:
            error = RuntimeError(self.text)
        raise error


_DONE = "__torchlight_worker_done__"


def _worker_loop(loader: DataLoader, worker_id: int, seed: int, tasks: Any, results: Any) -> None:
    global _WORKER_INFO
    import torchlight

    random.seed(seed)
    torchlight.manual_seed(seed)
    _WORKER_INFO = WorkerInfo(worker_id, loader.num_workers, seed, loader.dataset)
    try:
        if loader.worker_init_fn is not None:
            loader.worker_init_fn(worker_id)
        if loader._iterable:
            stream = iter(loader.dataset)
            for batch in _iterable_batches(loader, stream):
                results.put((worker_id, batch))
            results.put((worker_id, _DONE))
            tasks.get()
            return
        while True:
            task = tasks.get()
            if task is None:
                return
            number, indices = task
            try:
                results.put((number, loader._fetch(indices)))
            except Exception as error:
                results.put((number, _Failure(worker_id, error)))
    except Exception as error:
        results.put((-1, _Failure(worker_id, error)))
    except KeyboardInterrupt:
        pass


def _iterable_batches(loader: DataLoader, stream: Iterator[Any]) -> Iterator[Any]:
    if loader.batch_size is None:
        for sample in stream:
            yield loader.collate_fn(sample) if loader._user_collate else sample
        return
    batch: list[Any] = []
    for sample in stream:
        batch.append(sample)
        if len(batch) == loader.batch_size:
            yield loader.collate_fn(batch)
            batch = []
    if batch and not loader.drop_last:
        yield loader.collate_fn(batch)


class DataLoader:
    """Iterate over ``dataset`` in batches, as ``torch.utils.data.DataLoader`` (same signature).

    Args:
        dataset: a map-style data set (``len`` and ``[i]``), or an :class:`IterableDataset`.
        batch_size: samples per batch (``None``: hand out the samples one by one, uncollated).
        shuffle: a new random order every epoch (a :class:`RandomSampler` over ``generator``).
        sampler: the order of indices (excludes ``shuffle``).
        batch_sampler: yields whole lists of indices (excludes ``batch_size``, ``shuffle``,
            ``sampler``, ``drop_last``).
        num_workers: worker processes (0: in this process).
        collate_fn: a list of samples -> a batch (default :func:`default_collate`).
        pin_memory: accepted; page-locked memory needs a GPU, so on the CPU it does nothing and
            warns, as PyTorch without an accelerator does.
        drop_last: skip the last, smaller batch.
        timeout: seconds to wait for a worker's batch (0: forever).
        worker_init_fn: called with the worker id in each worker, after seeding.
        multiprocessing_context: a start method name or context (default ``fork`` on Linux).
        generator: a :class:`torchlight.Generator` (or a ``numpy.random.Generator``, whose state
            can be saved to resume a run) for the shuffle order and the workers' seeds.
        prefetch_factor: batches in flight per worker (default 2).
        persistent_workers: accepted; the workers are started again every epoch either way (the
            batches are the same; state a data set keeps inside a worker does not carry over).
        in_order: hand batches out in index order (False: as the workers finish them).
        seed: torchlight's own keyword (the course's notebooks use it): this loader's own
            generator, ``numpy.random.default_rng(seed)``, so its order is reproducible and
            independent of other draws; PyTorch programs pass ``generator=`` instead.

    Example:
        >>> import torchlight as tl
        >>> from torchlight.utils.data import DataLoader, TensorDataset
        >>> data = TensorDataset(tl.arange(6.0))
        >>> [b[0].tolist() for b in DataLoader(data, batch_size=4, shuffle=True, seed=0)]
        [[3.0, 2.0, 5.0, 4.0], [0.0, 1.0]]
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        seed: int | None = None,
    ) -> None:
        if seed is not None:
            if generator is not None:
                raise ValueError("DataLoader: give seed= or generator=, not both")
            generator = np.random.default_rng(seed)
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                f"num_workers option should be non-negative; "
                f"use num_workers=0 to disable multiprocessing (got {num_workers!r})"
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing. "
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValueError(
                f"batch_size should be a positive integer value or None, but got batch_size={batch_size!r}"
            )
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError(
                "DataLoader with IterableDataset: expected unspecified shuffle, sampler and batch_sampler options"
            )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (
            batch_size != 1 or shuffle or sampler is not None or drop_last
        ):
            raise ValueError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
            )
        if pin_memory:
            warnings.warn(
                "'pin_memory' argument is set as true but no accelerator is found, "
                "then device pinned memory won't be used.",
                stacklevel=2,
            )
        self.dataset, self.num_workers, self.generator = dataset, num_workers, generator
        self.pin_memory, self.pin_memory_device, self.timeout = (
            pin_memory,
            pin_memory_device,
            timeout,
        )
        self.worker_init_fn, self.multiprocessing_context = worker_init_fn, multiprocessing_context
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers > 0 else prefetch_factor
        self.persistent_workers, self.in_order, self.drop_last = (
            persistent_workers,
            in_order,
            drop_last,
        )
        self._user_collate = collate_fn is not None
        self.collate_fn = collate_fn if collate_fn is not None else default_collate
        if batch_sampler is not None:
            batch_size, drop_last = None, False
        elif batch_size is not None and not self._iterable:
            if sampler is None:
                sampler = (
                    RandomSampler(dataset, generator=generator)
                    if shuffle
                    else SequentialSampler(dataset)
                )
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        elif sampler is None and not self._iterable:
            sampler = (
                RandomSampler(dataset, generator=generator)
                if shuffle
                else SequentialSampler(dataset)
            )
        self.batch_size, self.sampler, self.batch_sampler = batch_size, sampler, batch_sampler

    def __len__(self) -> int:
        """Batches per epoch (for an IterableDataset: from its ``len()``, if it has one)."""
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def _index_batches(self) -> Iterator[Any]:
        return iter(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def _fetch(self, indices: Any) -> Any:
        if self.batch_size is None and self.batch_sampler is None:
            sample = self.dataset[indices]  # one index: no batching
            return self.collate_fn(sample) if self._user_collate else sample
        if isinstance(self.dataset, TensorDataset) and not self._user_collate:
            first = int(indices[0]) if len(indices) else 0
            if list(indices) == list(range(first, first + len(indices))):  # in order: views
                return tuple(t[first : first + len(indices)] for t in self.dataset.tensors)
            return self.dataset[np.asarray(indices, dtype=np.int64)]
        if hasattr(self.dataset, "__getitems__") and not self._user_collate:
            return self.dataset.__getitems__(indices)
        return self.collate_fn([self.dataset[i] for i in indices])

    def __iter__(self) -> Iterator[Any]:
        # the workers' base seed, read from a copy of the generator: the generator draws only the
        # order, so the order is the same with or without workers (and epoch after epoch, what
        # the generator alone gives)
        base_seed = int(copy.deepcopy(rng_of(self.generator)).integers(0, 2**62))
        if self.num_workers == 0:
            if self._iterable:
                return _iterable_batches(self, iter(self.dataset))
            return (self._fetch(indices) for indices in self._index_batches())
        return self._multiprocess(base_seed)

    def _context(self) -> Any:
        if self.multiprocessing_context is None:
            method = "fork" if sys.platform.startswith("linux") else None
            return multiprocessing.get_context(method)
        if isinstance(self.multiprocessing_context, str):
            return multiprocessing.get_context(self.multiprocessing_context)
        return self.multiprocessing_context

    def _multiprocess(self, base_seed: int) -> Iterator[Any]:
        context = self._context()
        results = context.Queue()
        tasks = [context.Queue() for _ in range(self.num_workers)]
        workers = [
            context.Process(
                target=_worker_loop, args=(self, w, base_seed + w, tasks[w], results), daemon=True
            )
            for w in range(self.num_workers)
        ]
        for worker in workers:
            worker.start()
        try:
            if self._iterable:
                yield from self._gather_streams(results, workers)
            else:
                yield from self._gather_batches(tasks, results, workers)
        finally:
            for task_queue in tasks:
                task_queue.put(None)
            for worker in workers:
                worker.join(timeout=5)
                if worker.is_alive():
                    worker.terminate()
            for q in (*tasks, results):
                q.cancel_join_thread()
                q.close()

    def _get(self, results: Any, workers: list[Any]) -> tuple[int, Any]:
        waited = 0.0
        while True:
            try:
                return results.get(timeout=1.0)
            except queue.Empty:
                waited += 1.0
                dead = [w for w in workers if w.exitcode is not None and w.exitcode != 0]
                if dead:
                    raise RuntimeError(
                        f"DataLoader worker (pid {dead[0].pid}) exited unexpectedly with exit code {dead[0].exitcode}"
                    ) from None
                if self.timeout and waited >= self.timeout:
                    raise RuntimeError(
                        f"DataLoader timed out after {self.timeout} seconds"
                    ) from None

    def _gather_batches(self, tasks: list[Any], results: Any, workers: list[Any]) -> Iterator[Any]:
        index_batches = enumerate(self._index_batches())
        sent, handed_out, exhausted = 0, 0, False
        ready: dict[int, Any] = {}
        assert self.prefetch_factor is not None
        in_flight_limit = self.num_workers * self.prefetch_factor
        while True:
            while not exhausted and sent - handed_out < in_flight_limit:
                try:
                    number, indices = next(index_batches)
                except StopIteration:
                    exhausted = True
                    break
                tasks[number % self.num_workers].put((number, list(indices)))
                sent += 1
            if handed_out == sent:
                return
            if self.in_order:
                while handed_out not in ready:
                    number, data = self._get(results, workers)
                    ready[number] = data
                data = ready.pop(handed_out)
            else:
                _, data = self._get(results, workers)
            if isinstance(data, _Failure):
                data.reraise()
            handed_out += 1
            yield data

    def _gather_streams(self, results: Any, workers: list[Any]) -> Iterator[Any]:
        running = len(workers)
        while running:
            _, data = self._get(results, workers)
            if isinstance(data, _Failure):
                data.reraise()
            if isinstance(data, str) and data == _DONE:
                running -= 1
                continue
            yield data

    def __repr__(self) -> str:
        return f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, num_workers={self.num_workers})"
