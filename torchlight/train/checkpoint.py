"""Save and load a model and its optimizer to one file, safely.

*Safe to write*: the file is written to a temporary file in the same directory, flushed to disk
(``fsync``) and then renamed over the old one (``os.replace`` is atomic), so a crash or a kill
at any moment leaves either the old checkpoint or the new one, never half of one.

*Safe to read*: the format is numpy's ``.npz`` (a zip of ``.npy`` arrays, read with
``allow_pickle=False``) plus a JSON header, so loading a file from someone else can never run
code (unpickling can). The whole file is read and checked against the model and the optimizer
before anything is copied, so a corrupt or mismatched file raises :class:`CheckpointError` and
changes nothing.

Example:
    >>> import os, tempfile
    >>> from torchlight import nn, optim
    >>> from torchlight.train.checkpoint import load_checkpoint, save_checkpoint
    >>> model = nn.Linear(3, 2); opt = optim.Adam(model.parameters())
    >>> path = os.path.join(tempfile.mkdtemp(), "model.ckpt")
    >>> save_checkpoint(path, model, opt, epoch=3)
    >>> load_checkpoint(path, nn.Linear(3, 2))["epoch"]
    3
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any

import numpy as np

from torchlight.nn.module import Module
from torchlight.optim import Optimizer
from torchlight.serialization import atomic_write
from torchlight.tensor import Tensor

__all__ = ["CheckpointError", "checkpoint_extra", "load_checkpoint", "save_checkpoint"]

FORMAT = "torchlight-checkpoint"
VERSION = 1
_HEADER = "__header__"


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be loaded: unreadable, corrupt, or made for another model."""


def _host(t: Any) -> np.ndarray:
    return np.ascontiguousarray(t.detach().numpy() if isinstance(t, Tensor) else t)


def _optimizer_arrays(optimizer: Optimizer) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    saved = optimizer.state_dict()
    arrays: dict[str, np.ndarray] = {}
    state: dict[str, dict[str, Any]] = {}
    for index, entries in saved["state"].items():
        state[str(index)] = {}
        for name, value in entries.items():
            if isinstance(value, Tensor):
                key = f"optimizer/{index}/{name}"
                arrays[key] = _host(value)
                state[str(index)][name] = {"array": key}
            else:
                state[str(index)][name] = value
    header = {
        "class": type(optimizer).__name__,
        "param_groups": saved["param_groups"],
        "state": state,
    }
    return header, arrays


def save_checkpoint(
    path: str | os.PathLike[str], model: Module, optimizer: Optimizer | None = None, /, **extra: Any
) -> None:
    """Write ``model`` (and ``optimizer``) to ``path`` atomically; ``extra`` values (epoch, settings;
    any names, even ``model``) must be JSON-serializable and come back from :func:`load_checkpoint`.

    Raises:
        TypeError: when ``extra`` cannot be stored as JSON (checked before anything is written).
    """
    arrays = {f"model/{key}": _host(value) for key, value in model.state_dict().items()}
    header: dict[str, Any] = {"format": FORMAT, "version": VERSION, "model": type(model).__name__}
    header["optimizer"] = None
    if optimizer is not None:
        header["optimizer"], optimizer_arrays = _optimizer_arrays(optimizer)
        arrays.update(optimizer_arrays)
    header["arrays"] = {
        key: {"shape": list(a.shape), "dtype": a.dtype.str} for key, a in arrays.items()
    }
    header["extra"] = extra
    try:
        text = json.dumps(header, allow_nan=True)
    except TypeError as error:
        raise TypeError(
            f"save_checkpoint: extra values must be JSON-serializable ({error})"
        ) from None
    arrays[_HEADER] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    atomic_write(os.fspath(path), lambda f: np.savez(f, allow_pickle=False, **arrays))


def _starts_like_a_zip(path: str) -> bool:
    """Whether the file begins as a zip archive does (a truncated checkpoint still does)."""
    with open(path, "rb") as f:
        return f.read(4) == b"PK\x03\x04"


def _what_file(path: str) -> str:
    """A few words on what a file that is not a zip archive looks like, for the error."""
    with open(path, "rb") as f:
        start = f.read(512)
    if not start:
        return "an empty file"
    if start.startswith(b"\x93NUMPY"):
        return "a single numpy array (.npy), not a checkpoint"
    if start.startswith(b"\x80"):
        return "a Python pickle (torch.save's format?), which torchlight never loads"
    try:
        start.decode("utf-8")
    except UnicodeDecodeError:
        return "a binary file that is not a zip archive"
    return "a text file"


def _read(path: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and every array, each checked against the header (raises CheckpointError)."""
    if os.path.isfile(path) and not _starts_like_a_zip(path):
        # Checked before numpy reads it: numpy would answer a text file with advice to allow
        # pickle loading, which a checkpoint never needs.
        raise CheckpointError(
            f"{path} is not a torchlight checkpoint: expected the .npz file that --save (or "
            f"save_checkpoint) writes, got {_what_file(path)}"
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            if _HEADER not in npz.files:
                raise CheckpointError(f"{path} is not a torchlight checkpoint (no header)")
            header = json.loads(npz[_HEADER].tobytes().decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise CheckpointError(f"{path} is not a torchlight checkpoint (unknown header)")
            if header.get("version") != VERSION:
                raise CheckpointError(
                    f"{path} has checkpoint format version {header.get('version')}; "
                    f"this torchlight reads version {VERSION}"
                )
            listed = header["arrays"]
            if set(npz.files) != set(listed) | {_HEADER}:
                raise CheckpointError(
                    f"{path}: the arrays in the file do not match its header (damaged file?)"
                )
            arrays = {key: npz[key] for key in listed}  # reading checks each member's CRC
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except (
        OSError,
        ValueError,
        KeyError,
        TypeError,
        EOFError,
        zipfile.BadZipFile,
        UnicodeDecodeError,
    ) as error:
        raise CheckpointError(
            f"{path} is not a valid torchlight checkpoint (truncated or corrupted file?): "
            f"{type(error).__name__}: {error}"
        ) from None
    for key, array in arrays.items():
        if list(array.shape) != listed[key]["shape"] or array.dtype.str != listed[key]["dtype"]:
            raise CheckpointError(
                f"{path}: array {key!r} does not match its header (damaged file?)"
            )
        if array.dtype.kind not in "fiub":
            raise CheckpointError(f"{path}: array {key!r} has dtype {array.dtype}, not numbers")
    return header, arrays


def _model_errors(model: Module, values: dict[str, np.ndarray]) -> list[str]:
    own = model.state_dict()
    errors = [f'missing key "{key}"' for key in own if key not in values]
    errors += [f'unexpected key "{key}"' for key in values if key not in own]
    for key, target in own.items():
        if key in values and tuple(values[key].shape) != target.shape:
            errors.append(
                f"size mismatch for {key}: the checkpoint has shape "
                f"{tuple(values[key].shape)}, the model has {target.shape}"
            )
    return errors


def load_checkpoint(
    path: str | os.PathLike[str], model: Module, optimizer: Optimizer | None = None
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` into ``model`` (and ``optimizer``);
    returns the ``extra`` values that were saved with it.

    Raises:
        CheckpointError: for a missing, corrupt or truncated file, or one whose parameters or
            optimizer do not match; nothing has been changed then.
    """
    path = os.fspath(path)
    header, arrays = _read(path)
    values = {key[len("model/") :]: a for key, a in arrays.items() if key.startswith("model/")}
    errors = _model_errors(model, values)
    if errors:
        raise CheckpointError(
            f"{path} does not fit this {type(model).__name__} (saved from a {header.get('model')}):\n  "
            + "\n  ".join(errors)
        )
    optimizer_state = None
    if optimizer is not None:
        saved = header.get("optimizer")
        if saved is None:
            raise CheckpointError(
                f"{path} has no optimizer state, but an optimizer was given to load into"
            )
        if saved["class"] != type(optimizer).__name__:
            raise CheckpointError(
                f"{path} holds the state of a {saved['class']} optimizer, not of a {type(optimizer).__name__}"
            )
        state = {
            int(index): {
                name: arrays[v["array"]] if isinstance(v, dict) else v
                for name, v in entries.items()
            }
            for index, entries in saved["state"].items()
        }
        optimizer_state = {"state": state, "param_groups": saved["param_groups"]}
        try:
            optimizer._check_state_dict(optimizer_state)
        except (ValueError, KeyError, TypeError) as error:
            raise CheckpointError(f"{path}: the optimizer state does not fit: {error}") from None
    model.load_state_dict(values)  # checked above: cannot fail half-way
    if optimizer is not None and optimizer_state is not None:
        optimizer.load_state_dict(optimizer_state)
    return dict(header.get("extra", {}))


def checkpoint_extra(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``extra`` values saved with a checkpoint, without loading it into a model.

    ``torchlight-train --resume ckpt`` reads the data set and the model from them, to build the
    model before loading it.

    Raises:
        CheckpointError: for a missing, corrupt or truncated file.

    Example:
        >>> from torchlight.train.checkpoint import checkpoint_extra, save_checkpoint
        >>> import os, tempfile
        >>> from torchlight import nn
        >>> path = os.path.join(tempfile.mkdtemp(), "model.ckpt")
        >>> save_checkpoint(path, nn.Linear(3, 2), epoch=3, dataset="xor")
        >>> checkpoint_extra(path)
        {'epoch': 3, 'dataset': 'xor'}
    """
    header, _ = _read(os.fspath(path))
    return dict(header.get("extra", {}))
