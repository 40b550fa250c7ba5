"""Backends: where a tensor's elements live and which kernels compute on them.

Pick one per tensor (``backend=`` on every factory, ``tensor.to(name)``), per process
(:func:`set_default_backend`) or from the environment (``TORCHLIGHT_BACKEND=numba``).
"""

from __future__ import annotations

import importlib
import os

from torchlight.backends.base import COMPARISON_OPS, MAP_OPS, REDUCE_OPS, ZIP_OPS, Backend

__all__ = [
    "COMPARISON_OPS",
    "MAP_OPS",
    "REDUCE_OPS",
    "ZIP_OPS",
    "Backend",
    "available_backends",
    "device_backend",
    "get_backend",
    "get_default_backend",
    "set_default_backend",
]

# name -> (module, class, what to install if the import fails)
_REGISTRY: dict[str, tuple[str, str, str]] = {
    "numpy": ("torchlight.backends.numpy.backend", "NumpyBackend", ""),
    "strided": ("torchlight.backends.strided.backend", "StridedBackend", ""),
    "numba": (
        "torchlight.backends.numba.backend",
        "NumbaBackend",
        "Install it with: pip install 'torchlight-edu[numba]'",
    ),
    "cuda": (
        "torchlight.backends.cuda.backend",
        "CudaBackend",
        "Install it with: pip install 'torchlight-edu[cuda]' (no GPU? set NUMBA_ENABLE_CUDASIM=1 "
        "before importing torchlight to run the CUDA kernels in numba's simulator)",
    ),
}
_loaded: dict[str, Backend] = {}
_default_name: str | None = None


def available_backends() -> tuple[str, ...]:
    """The names :func:`get_backend` knows (some may still need an optional package)."""
    return tuple(_REGISTRY)


def get_backend(name: str | Backend | None = None) -> Backend:
    """The backend called ``name`` (the process default when ``None``), loaded on first use.

    Raises:
        ValueError: for an unknown name, listing the known ones.
        ImportError: when the backend needs a package that is not installed, saying which.
    """
    if name is None:
        return get_default_backend()
    if not isinstance(name, str):
        return name
    if name in _loaded:
        return _loaded[name]
    if name not in _REGISTRY and name.partition(":")[0] in _DEVICES:
        return get_backend(device_backend(name))
    if name not in _REGISTRY:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(_REGISTRY)}")
    module_name, class_name, install_hint = _REGISTRY[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(
            f"the {name!r} backend needs a package that is not installed ({error}). {install_hint}"
        ) from error
    backend = getattr(module, class_name)()
    _loaded[name] = backend
    return backend


# PyTorch's device names, for code written as `device = "cuda" if ... else "cpu"`.
_DEVICES = ("cpu", "cuda")
_CPU_BACKENDS = ("numpy", "strided", "numba")


def device_backend(device: str) -> str:
    """The backend a PyTorch device name means: ``"cpu"`` is the default backend when that
    runs on the CPU (else numpy), ``"cuda"`` / ``"cuda:0"`` the CUDA backend.

    Raises:
        ValueError: for another device type, or an index other than 0 (one GPU is supported).
    """
    kind, _, index = device.partition(":")
    if kind not in _DEVICES or index not in ("", "0"):
        raise ValueError(
            f"unknown device {device!r}: torchlight knows 'cpu', 'cuda' and 'cuda:0' (one GPU), "
            f"and the backends {', '.join(_REGISTRY)}"
        )
    if kind == "cuda":
        return "cuda"
    default = _default_name or os.environ.get("TORCHLIGHT_BACKEND", "numpy") or "numpy"
    return default if default in _CPU_BACKENDS else "numpy"


def get_default_backend() -> Backend:
    """The process default: set by :func:`set_default_backend`, else ``$TORCHLIGHT_BACKEND``,
    else numpy."""
    global _default_name
    if _default_name is None:
        _default_name = os.environ.get("TORCHLIGHT_BACKEND", "numpy") or "numpy"
    return get_backend(_default_name)


def set_default_backend(name: str) -> None:
    """Make ``name`` the backend of tensors created without ``backend=``."""
    global _default_name
    get_backend(name)  # fail now, with the install hint, rather than at the next factory
    _default_name = name


# ---- PyTorch compatibility (issue 25): torch.backends.cudnn / torch.backends.mps (stubs)
def __getattr__(name: str) -> object:
    if name in ("cudnn", "mps"):
        return importlib.import_module(f"torchlight.backends.{name}")
    raise AttributeError(f"module 'torchlight.backends' has no attribute {name!r}")
