"""``tl.save`` / ``tl.load``: tensors and containers of them (a ``state_dict``) to one file.

The file is numpy's ``.npz`` with a JSON header describing the structure (dicts, lists,
tuples, numbers, strings, ``None``), written atomically like a checkpoint
(:mod:`torchlight.train.checkpoint`) and read with ``allow_pickle=False``: loading such a file can
never run code. Other objects (a whole ``nn.Module``) are pickled, as ``torch.save`` does, and
load only with ``load(f, weights_only=False)`` (PyTorch >= 2.6's rule too): unpickling a file
from someone else can run their code. ``f`` is a path or a binary file object.

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


_PICKLE_MAGIC = b"torchlight-pickle\n"  # a file that holds a pickled object (a whole module)


def save(
    obj: Any, f: Any, pickle_module: Any = None, pickle_protocol: int = 2, **unsupported: Any
) -> None:
    """Write ``obj`` (a tensor, a numpy array, or dicts/lists/tuples of them and plain values) to
    ``f``, a path or a binary file object (``open(path, "wb")``, ``io.BytesIO()``).

    Anything else (a whole ``nn.Module``, an object of your own) is pickled, as ``torch.save``
    does; loading that file then needs ``load(f, weights_only=False)``, because unpickling can
    run code (PyTorch >= 2.6 refuses it by default too).

    Raises:
        TypeError: for a keyword torchlight does not support (``_use_new_zipfile_serialization``...).
    """
    import json  # (here, not at the top: `import torchlight` stays fast)

    if unsupported:
        raise TypeError(
            f"tl.save got keyword argument(s) torchlight does not support: {', '.join(sorted(unsupported))}"
        )
    arrays: dict[str, np.ndarray] = {}
    try:
        structure = _encode(obj, arrays, "obj")
    except TypeError:
        import pickle

        module = pickle_module or pickle

        def write(out: Any) -> None:
            out.write(_PICKLE_MAGIC)
            module.dump(obj, out, protocol=pickle_protocol)

        if hasattr(f, "write"):
            write(f)
        else:
            with open(os.fspath(f) + ".tmp", "wb") as out:
                write(out)
            os.replace(os.fspath(f) + ".tmp", os.fspath(f))
        return
    header = json.dumps({"format": FORMAT, "version": 1, "structure": structure})
    arrays[_HEADER] = np.frombuffer(header.encode("utf-8"), dtype=np.uint8)
    if hasattr(f, "write"):  # a file object: written in place (atomic writes need a path)
        np.savez(f, allow_pickle=False, **arrays)
        return
    atomic_write(os.fspath(f), lambda out: np.savez(out, allow_pickle=False, **arrays))


def load(
    f: Any, map_location: Any = None, pickle_module: Any = None, *, weights_only: bool | None = None,
    mmap: bool | None = None, **unsupported: Any,
) -> Any:  # fmt: skip
    """Read what :func:`save` wrote (from a path or a binary file object); tensors go to
    ``map_location`` (a device or backend name, the default backend when None).

    ``weights_only`` (default True, as PyTorch >= 2.6): tensors, arrays, numbers, strings and
    containers only. A file holding a pickled object (a whole module) loads only with
    ``weights_only=False``, which runs the pickle's code: do that for files you trust.

    Raises:
        ValueError: when ``f`` is not a file :func:`save` wrote (or is damaged).
        pickle.UnpicklingError: for a pickled object with ``weights_only`` True.
    """

    if unsupported or mmap:
        names = sorted(unsupported) + (["mmap"] if mmap else [])
        raise TypeError(
            f"tl.load got keyword argument(s) torchlight does not support: {', '.join(names)}"
        )
    name = getattr(f, "name", "<file object>") if hasattr(f, "read") else os.fspath(f)
    source = f if hasattr(f, "read") else open(os.fspath(f), "rb")  # noqa: SIM115 - closed below
    try:
        start = source.tell()
        if source.read(len(_PICKLE_MAGIC)) == _PICKLE_MAGIC:
            import pickle

            if weights_only is not False:
                raise pickle.UnpicklingError(
                    f"{name} holds a pickled Python object (e.g. a whole nn.Module saved with "
                    "tl.save(model)), and weights_only=True (the default) loads only tensors and "
                    "plain containers. Unpickling can run arbitrary code: if you trust this file, "
                    "load it with tl.load(f, weights_only=False)"
                )
            return (pickle_module or pickle).load(source)
        source.seek(start)
        return _load_npz(source, name, map_location)
    finally:
        if source is not f:
            source.close()


def _load_npz(f: Any, name: str, map_location: Any) -> Any:
    import json
    import zipfile

    try:
        with np.load(f, allow_pickle=False) as npz:
            header = json.loads(npz[_HEADER].tobytes().decode("utf-8"))
            if header.get("format") != FORMAT:
                raise ValueError("unknown header")
            arrays = {key: npz[key] for key in npz.files if key != _HEADER}
    except FileNotFoundError:
        raise
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as error:
        raise ValueError(
            f"{name} is not a file written by tl.save (or it is damaged): {error}"
        ) from None
    return _decode(header["structure"], arrays, map_location)


def _encode(obj: Any, arrays: dict[str, np.ndarray], where: str) -> Any:
    from torchlight.tensor import Tensor

    if isinstance(obj, Tensor):
        key = f"t{len(arrays)}"
        arrays[key] = np.ascontiguousarray(obj.detach().numpy())
        return {"tensor": key, "requires_grad": obj.requires_grad}
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":  # PyTorch saves arrays too
        key = f"t{len(arrays)}"
        arrays[key] = np.ascontiguousarray(obj)
        return {"ndarray": key}
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
    if "ndarray" in node:
        return arrays[node["ndarray"]]
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
