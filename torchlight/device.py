"""``tl.device``: PyTorch's device names, mapped onto torchlight's backends.

A device is a string (so it works wherever a backend name does: ``backend=``, ``device=``,
``.to(...)``) with PyTorch's ``type`` and ``index``. ``"cpu"`` means the default backend when
that runs on the CPU (numpy unless you chose strided or numba), ``"cuda"`` the CUDA backend.
``tensor.device`` is a device too, named after its backend: it equals ``"numpy"`` and prints
as ``device(type='cpu', backend='numpy')``.

Example:
    >>> import torchlight as tl
    >>> device = "cuda" if tl.cuda.is_available() else "cpu"
    >>> tl.zeros(2, device=device).device.type in ("cpu", "cuda")
    True
    >>> tl.device("cuda:0").type, tl.device("cuda:0").index
    ('cuda', 0)
"""

from __future__ import annotations

from typing import Any

from torchlight.backends import available_backends, device_backend

__all__ = ["device"]


class device(str):  # noqa: N801 - PyTorch's name
    """A device name (``"cpu"``, ``"cuda"``, ``"cuda:0"``) or a backend name (``"numba"``).

    Raises:
        ValueError: for a name that is neither, listing what is known.
    """

    __slots__ = ()

    def __new__(cls, type: Any, index: int | None = None) -> device:  # noqa: A002 - PyTorch's name
        name = str(type) if index is None else f"{type}:{index}"
        if name not in available_backends():
            device_backend(name)  # raises for an unknown name or index
        return super().__new__(cls, name)

    @property
    def type(self) -> str:  # noqa: A003
        """``"cuda"`` for the CUDA backend, ``"cpu"`` for every other."""
        return "cuda" if self.partition(":")[0] == "cuda" else "cpu"

    # PyTorch's name; it hides str.index, which nothing asks of a device name
    @property
    def index(self) -> int | None:  # type: ignore[override]
        """The GPU's number when one was named (``"cuda:0"``), else None."""
        number = self.partition(":")[2]
        return int(number) if number else None

    def __repr__(self) -> str:
        if self.index is not None:
            return f"device(type={self.type!r}, index={self.index})"
        if self in available_backends():  # say which backend, not only which kind of device
            return f"device(type={self.type!r}, backend={str(self)!r})"
        return f"device(type={self.type!r})"
