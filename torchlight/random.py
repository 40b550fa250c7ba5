"""PyTorch's random API: ``tl.Generator``, ``multinomial``, ``normal``, ``randperm``, and the one
``randint`` (``randint(high, size)`` or ``randint(low, high, size)``).

A :class:`Generator` is a seeded source of random numbers of its own (a numpy ``Generator``
inside), passed as ``generator=`` to these functions, to ``torchlight.utils.data``'s samplers,
``DataLoader`` and ``random_split``; without one they draw from the process-wide generator
that :func:`torchlight.manual_seed` seeds. The draws are torchlight's own (numpy's PCG64): the
same seed gives the same numbers every run, but not the numbers PyTorch draws.

Example:
    >>> import torchlight as tl
    >>> g = tl.Generator().manual_seed(0)
    >>> tl.randperm(5, generator=g).shape
    (5,)
    >>> tl.randint(10, (2, 3)).dtype
    torchlight.int64
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from torchlight import creation
from torchlight.tensor import Tensor

__all__ = ["Generator", "multinomial", "normal", "randint", "randperm"]


class Generator:
    """A random number generator of its own, as ``torch.Generator`` (``device`` must be CPU).

    Example:
        >>> from torchlight import Generator
        >>> g = Generator().manual_seed(42)
        >>> g.initial_seed()
        42
    """

    def __init__(self, device: Any = "cpu") -> None:
        if str(device) not in ("cpu", "numpy"):
            raise ValueError(
                f"Generator(device={device!r}): torchlight's generators are CPU ones ('cpu')"
            )
        self.device = "cpu"
        self._seed = 67280421310721  # PyTorch's default seed of a fresh generator
        self.rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> Generator:
        """Reseed; returns the generator itself, as PyTorch's does."""
        self._seed = int(seed)
        self.rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy and return the new seed."""
        self.manual_seed(int(np.random.SeedSequence().entropy) % 2**63)  # type: ignore[arg-type]
        return self._seed

    def initial_seed(self) -> int:
        """The seed it was last seeded with."""
        return self._seed

    def get_state(self) -> dict[str, Any]:
        """The generator's state (a dict, not PyTorch's byte tensor); :meth:`set_state` takes it."""
        return {"seed": self._seed, "bit_generator": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> Generator:
        """Restore what :meth:`get_state` returned."""
        self._seed = state["seed"]
        self.rng.bit_generator.state = state["bit_generator"]
        return self


def rng_of(generator: Any) -> np.random.Generator:
    """The numpy generator behind ``generator=`` (a :class:`Generator`, a numpy one, or None)."""
    if generator is None:
        return creation.generator()
    if isinstance(generator, Generator):
        return generator.rng
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(
        f"generator= must be a torchlight.Generator (torch.Generator) or a numpy Generator, "
        f"got {type(generator).__name__}"
    )


def randint(
    *args: Any,
    size: Any = None,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    backend: Any = None,
    **unsupported: Any,
) -> Tensor:
    """Integers uniform in ``[low, high)``: ``randint(high, size)`` or ``randint(low, high, size)``.

    As PyTorch's: ``low`` defaults to 0, ``size`` is a tuple (also as ``size=``), the result is int64.

    Example:
        >>> from torchlight import randint
        >>> randint(3, 5, (4,)).tolist()[0] in (3, 4)
        True
    """
    _refuse(unsupported, "randint")
    if size is None:
        if not args or not isinstance(args[-1], (tuple, list)):
            raise TypeError(
                "randint() needs a size tuple: randint(high, size) or randint(low, high, size)"
            )
        size, args = args[-1], args[:-1]
    if len(args) == 1:
        low, high = 0, args[0]
    elif len(args) == 2:
        low, high = args
    else:
        raise TypeError(
            f"randint() takes (high, size) or (low, high, size); got {len(args)} bounds"
        )
    low, high = int(low), int(high)
    if low >= high:
        raise RuntimeError(f"randint: expected low < high, got low={low}, high={high}")
    if requires_grad:
        raise RuntimeError(
            "randint: only floating point tensors can require gradients (int64 here)"
        )
    values = rng_of(generator).integers(low, high, tuple(int(s) for s in size))
    return creation._make(values, dtype, False, backend, device)


def normal(
    mean: Any = 0.0,
    std: Any = 1.0,
    size: Sequence[int] | None = None,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    backend: Any = None,
    **unsupported: Any,
) -> Tensor:
    r"""Samples $x \sim \mathcal{N}(\mu, \sigma^2)$, as ``torch.normal``: $x = \mu + \sigma z$ with
    $z$ standard normal.

    ``normal(mean_tensor, std_tensor_or_float)`` and ``normal(mean_float, std_tensor)`` draw one
    sample per element (shapes broadcast; the tensor's dtype); ``normal(mean, std, size)`` with
    two numbers draws ``size`` samples (the default dtype). No gradient flows back to ``mean``
    or ``std`` (PyTorch's gradient for them is zero).

    Example:
        >>> import torchlight as tl
        >>> tl.normal(2.0, 0.5, size=(2, 3)).shape, tl.normal(tl.zeros(4), 1.0).shape
        ((2, 3), (4,))

    Raises:
        RuntimeError: for a negative ``std``; TypeError for two numbers without ``size``.
    """
    _refuse(unsupported, "normal")
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors and size is None:
        raise TypeError(
            "normal(mean, std) with two numbers needs a size: normal(mean, std, size=(2, 3)), "
            "or give mean or std as a tensor (one sample per element)"
        )
    if tensors and size is not None:
        raise TypeError("normal: size= goes with two numbers; with a tensor its shape is the size")
    mu, sigma = (
        t.detach().numpy() if isinstance(t, Tensor) else np.asarray(t) for t in (mean, std)
    )
    if (sigma < 0).any():
        raise RuntimeError(f"normal expects std >= 0.0, but found std {sigma.min()}")
    shape = (
        tuple(int(s) for s in size)
        if size is not None
        else np.broadcast_shapes(mu.shape, sigma.shape)
    )
    values = mu + sigma * rng_of(generator).standard_normal(shape)
    dtype = dtype if dtype is not None else (tensors[0].dtype if tensors else None)
    return creation._make(values, dtype, requires_grad, backend, device)


def randperm(
    n: int,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    backend: Any = None,
    **unsupported: Any,
) -> Tensor:
    """A random permutation of the integers from 0 to ``n - 1`` (int64).

    Example:
        >>> from torchlight import randperm
        >>> sorted(randperm(4).tolist())
        [0, 1, 2, 3]
    """
    _refuse(unsupported, "randperm")
    if requires_grad:
        raise RuntimeError(
            "randperm: only floating point tensors can require gradients (int64 here)"
        )
    return creation._make(rng_of(generator).permutation(int(n)), dtype, False, backend, device)


def multinomial(
    input: Tensor,
    num_samples: int,
    replacement: bool = False,
    *,
    generator: Any = None,
    **unsupported: Any,
) -> Tensor:
    """Draw ``num_samples`` category indices per row, with probability proportional to ``input``.

    As ``torch.multinomial``: ``input`` is 1-d (one distribution) or 2-d (one per row) of
    non-negative weights (they need not sum to 1); without ``replacement`` no index repeats in a
    row, so ``num_samples`` may not exceed the number of categories (zero weights are drawn
    last, as PyTorch does). The result is int64,
    shape ``(num_samples,)`` or ``(rows, num_samples)``.

    Example:
        >>> import torchlight as tl
        >>> from torchlight import multinomial
        >>> multinomial(tl.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist()
        [1, 1]
    """
    _refuse(unsupported, "multinomial")
    probs = np.asarray(input.detach().numpy(), dtype=np.float64)
    if probs.ndim not in (1, 2):
        raise RuntimeError(
            f"multinomial: prob_dist must be 1 or 2 dim, got shape {tuple(probs.shape)}"
        )
    rows = probs.reshape(-1, probs.shape[-1])
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise RuntimeError(
            "multinomial: probability tensor contains either `inf`, `nan` or element < 0"
        )
    sums = rows.sum(axis=1)
    if np.any(sums <= 0):
        raise RuntimeError(
            "multinomial: invalid multinomial distribution (sum of probabilities <= 0)"
        )
    k = int(num_samples)
    if k <= 0:
        raise RuntimeError(f"multinomial: cannot sample {k} <= 0 samples")
    if not replacement and k > rows.shape[1]:
        raise RuntimeError(
            f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
            f"(asked for {k} of {rows.shape[1]} categories)"
        )
    rng = rng_of(generator)
    out = np.empty((rows.shape[0], k), dtype=np.int64)
    for r, (row, total) in enumerate(zip(rows, sums, strict=True)):
        if replacement:
            out[r] = rng.choice(row.size, size=k, replace=True, p=row / total)
        else:  # PyTorch's way: the k largest weight / Exponential(1) keys (zero weights come last)
            keys = row / rng.exponential(size=row.size)
            out[r] = np.argsort(-keys, kind="stable")[:k]
    result = out[0] if probs.ndim == 1 else out
    return creation._make(result, None, False, input.backend, None)


def _refuse(unsupported: dict[str, Any], where: str) -> None:
    if unsupported:
        raise TypeError(
            f"{where}() got keyword argument(s) torchlight does not support: {', '.join(sorted(unsupported))}"
        )
