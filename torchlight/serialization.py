"""``tl.save`` / ``tl.load``: tensors and containers of them (a ``state_dict``) to one file.

The file is numpy's ``.npz`` with a JSON header describing the structure (dicts, lists,
tuples, numbers, strings, ``None``), written atomically like a checkpoint
(:mod:`torchlight.train.checkpoint`) and read with ``allow_pickle=False``: unlike ``torch.load`` of
a pickle, loading a file from someone else can never run code. Arbitrary Python objects
(a whole ``nn.Module``) cannot be saved: save ``model.state_dict()`` instead.

Example:
    >>> import os, tempfile
    >>> import torchlight as tl
    >>> path = os.path.join(tempfile.mkdtemp(), "weights.tl")
    >>> tl.save({"w": tl.ones(2), "step": 3}, path)
    >>> tl.load(path)
    {'w': tensor([1., 1.]), 'step': 3}
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np

__all__ = ["load", "save"]

FORMAT = "torchlight-save"
_HEADER = "__structure__"


def save(obj: Any, f: str | os.PathLike[str]) -> None:
    """Write ``obj`` (a tensor, or dicts/lists/tuples of tensors and plain values) to ``f``.

    Raises:
        TypeError: for an object that cannot be saved, naming where it is in ``obj``.
    """
    import json  # (here, not at the top: `import torchlight` stays fast)

    arrays: dict[str, np.ndarray] = {}
    structure = _encode(obj, arrays, "obj")
    header = json.dumps({"format": FORMAT, "version": 1, "structure": structure})
    arrays[_HEADER] = np.frombuffer(header.encode("utf-8"), dtype=np.uint8)
    atomic_write(os.fspath(f), lambda out: np.savez(out, allow_pickle=False, **arrays))


def load(f: str | os.PathLike[str], map_location: Any = None) -> Any:
    """Read what :func:`save` wrote; tensors go to ``map_location`` (a device or backend name,
    the default backend when None).

    Raises:
        ValueError: when ``f`` is not a file :func:`save` wrote (or is damaged).
    """
    import json
    import zipfile

    try:
        with np.load(os.fspath(f), allow_pickle=False) as npz:
            header = json.loads(npz[_HEADER].tobytes().decode("utf-8"))
            if header.get("format") != FORMAT:
                raise ValueError("unknown header")
            arrays = {key: npz[key] for key in npz.files if key != _HEADER}
    except FileNotFoundError:
        raise
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as error:
        raise ValueError(
            f"{os.fspath(f)} is not a file written by tl.save (or it is damaged): {error}"
        ) from None
    return _decode(header["structure"], arrays, map_location)


def _encode(obj: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    from torchlight.tensor import Tensor

    if isinstance(obj, Tensor):
        key = f"t{len(arrays)}"
        arrays[key] = np.ascontiguousarray(obj.detach().numpy())
        return {"tensor": key, "requires_grad": obj.requires_grad}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)):
                raise TypeError(f"tl.save: dict keys must be str or int, got {k!r} in {where}")
        items = [[k, _encode(v, arrays, f"{where}[{k!r}]")] for k, v in obj.items()]
        return {"dict": items}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {"tuple" if isinstance(obj, tuple) else "list": items}
    raise TypeError(
        f"tl.save cannot save {type(obj).__name__} (at {where}): save tensors, numbers, strings "
        "and dicts/lists/tuples of them; for a model, save model.state_dict()"
    )


def _decode(node: dict[str, Any], arrays: dict[str, np.ndarray], map_location: Any) -> Any:
    from torchlight.creation import tensor

    if "tensor" in node:
        array = arrays[node["tensor"]]
        return tensor(
            array,
            dtype=array.dtype,  # as saved (tensor() alone would turn int32 into int64)
            requires_grad=node["requires_grad"],
            device=None if map_location is None else str(map_location),
        )
    if "value" in node:
        return node["value"]
    if "dict" in node:
        return {k: _decode(v, arrays, map_location) for k, v in node["dict"]}
    items = [_decode(v, arrays, map_location) for v in node.get("list", node.get("tuple", []))]
    return tuple(items) if "tuple" in node else items


def atomic_write(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Write via a temporary file in the same directory, fsync, then rename over ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the rename makes it visible
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable (not on every OS)
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
