"""Run a PyTorch script unchanged: ``import torch`` (and ``torch.nn``, ``torch.utils.data``...) resolves to torchlight.

Two ways, neither edits the script:

- ``python -m torchlight.compat train.py --its --args`` runs ``train.py`` as ``__main__`` with the
  shim installed;
- ``import torchlight.compat`` (or ``torchlight.compat.install()``) first, in the same process,
  then any later ``import torch`` gets torchlight.

Either way the program sees **PyTorch's defaults**, not the course's: the default dtype is
float32 (``import torchlight`` alone keeps float64, for clean gradient checks). A process that
also has the real PyTorch imported (a test comparing the two side by side) enters the same
defaults with ``with torchlight.compat.pytorch_defaults(): ...``, without the import shim.
The script's own folder is ``sys.path[0]``, as ``python script.py`` makes it, so a script
imports its sibling modules from any working directory.

Every ``torch.X`` module is looked up as ``torchlight.X`` (``torch.nn.functional`` ->
``torchlight.nn.functional``), except the few that live elsewhere in torchlight (the table
``ALIASES``: ``torch.cuda.amp`` -> ``torchlight.amp``). A ``torch`` module torchlight does not
have fails to import with an error naming it, as a missing package would. The shim refuses to
install over a real PyTorch that is already imported (the two would mix tensors).

Example (in a fresh process; here the test suite has the real PyTorch imported):
    >>> from torchlight.compat import ALIASES, _target
    >>> _target("torch.nn.functional"), ALIASES["torch.cuda.amp"]
    ('torchlight.nn.functional', 'torchlight.amp')
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from torchlight import dtypes

__all__ = [
    "ALIASES",
    "PYTORCH_DEFAULTS",
    "install",
    "installed",
    "main",
    "pytorch_defaults",
    "uninstall",
]

#: What differs between PyTorch's world and ``import torchlight``'s: the default dtype of
#: Python floats, factories (``tl.zeros``, ``tl.randn``...) and layer parameters.
PYTORCH_DEFAULTS = {"dtype": dtypes.float32}

# torch module -> torchlight module, where the name is not simply torch -> torchlight.
ALIASES = {
    "torch.cuda.amp": "torchlight.amp",
    "torch.cpu.amp": "torchlight.amp",
}


def _target(fullname: str) -> str:
    if fullname in ALIASES:
        return ALIASES[fullname]
    return "torchlight" + fullname[len("torch") :]


class _Loader(importlib.abc.Loader):
    """Hands out the already imported torchlight module under its ``torch`` name."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set __spec__ to the torch name's spec; torchlight keeps its own
        module.__spec__ = self.spec


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        name = _target(fullname)
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is not None and name.startswith(error.name):
                raise ModuleNotFoundError(
                    f"No module named {fullname!r}: torchlight.compat maps it to {name!r}, "
                    "which torchlight does not have",
                    name=fullname,
                ) from None
            raise
        return importlib.machinery.ModuleSpec(fullname, _Loader(module))


_FINDER = _Finder()


class _Entered:
    """The defaults :func:`install` replaced, restored by :func:`uninstall` (None: not installed)."""

    dtype: dtypes.DType | None = None


@contextlib.contextmanager
def pytorch_defaults() -> Iterator[None]:
    """Inside the ``with`` block, torchlight has PyTorch's defaults (:data:`PYTORCH_DEFAULTS`:
    the default dtype is float32); on leaving, the defaults from before come back.

    What :func:`install` does for a whole program, for one block of a process that may also
    have the real PyTorch imported (where the import shim cannot install).

    Example:
        >>> import torchlight as tl
        >>> from torchlight.compat import pytorch_defaults
        >>> with pytorch_defaults():
        ...     tl.nn.Linear(2, 3).weight.dtype, tl.tensor([1.0]).dtype
        (torchlight.float32, torchlight.float32)
    """
    before = dtypes.get_default_dtype()
    dtypes.set_default_dtype(PYTORCH_DEFAULTS["dtype"])
    try:
        yield
    finally:
        dtypes.set_default_dtype(before)


def installed() -> bool:
    """Whether ``import torch`` gives torchlight now."""
    return _FINDER in sys.meta_path


def install() -> None:
    """Make ``import torch`` and ``import torch.<anything>`` resolve to torchlight, and enter
    PyTorch's defaults (:data:`PYTORCH_DEFAULTS`: float32) until :func:`uninstall`.

    Raises:
        RuntimeError: when the real PyTorch is already imported in this process.
    """
    real = sys.modules.get("torch")
    if real is not None and not real.__name__.startswith("torchlight"):
        raise RuntimeError(
            "torchlight.compat.install(): the real PyTorch is already imported in this process; "
            "install the shim before anything imports torch"
        )
    if not installed():
        sys.meta_path.insert(0, _FINDER)
        _Entered.dtype = dtypes.get_default_dtype()
        dtypes.set_default_dtype(PYTORCH_DEFAULTS["dtype"])


def uninstall() -> None:
    """Undo :func:`install`: forget the ``torch`` names (a later ``import torch`` is PyTorch)
    and restore the defaults from before."""
    if installed():
        sys.meta_path.remove(_FINDER)
    if _Entered.dtype is not None:
        dtypes.set_default_dtype(_Entered.dtype)
        _Entered.dtype = None
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        if sys.modules[name].__name__.startswith("torchlight"):
            del sys.modules[name]


def main(argv: list[str] | None = None) -> None:
    """``python -m torchlight.compat script.py args...``: run a PyTorch script on torchlight."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m torchlight.compat script.py [args...]  (or -m module [args...])")
        raise SystemExit(0 if args else 2)
    install()
    if args[0] == "-m" and len(args) > 1:
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        # `python script.py` puts the script's folder first on sys.path (its sibling modules
        # import); `python -m torchlight.compat` put the working directory there instead
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
elif "torch" in sys.modules and not sys.modules["torch"].__name__.startswith("torchlight"):
    import warnings

    warnings.warn(
        "import torchlight.compat: the real PyTorch is already imported, so `import torch` stays "
        "PyTorch; import torchlight.compat before anything imports torch (or, to compare the two "
        "side by side, use `with torchlight.compat.pytorch_defaults():` for PyTorch's defaults)",
        stacklevel=2,
    )
else:
    install()
