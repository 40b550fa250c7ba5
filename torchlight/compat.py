"""Run a PyTorch script unchanged: ``import torch`` (and ``torch.nn``, ``torch.utils.data``...) resolves to torchlight.

Two ways, neither edits the script:

- ``python -m torchlight.compat train.py --its --args`` runs ``train.py`` as ``__main__`` with the
  shim installed;
- ``import torchlight.compat`` (or ``torchlight.compat.install()``) first, in the same process,
  then any later ``import torch`` gets torchlight.

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

import importlib
import importlib.abc
import importlib.machinery
import runpy
import sys
from types import ModuleType
from typing import Any

__all__ = ["ALIASES", "install", "installed", "main", "uninstall"]

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


def installed() -> bool:
    """Whether ``import torch`` gives torchlight now."""
    return _FINDER in sys.meta_path


def install() -> None:
    """Make ``import torch`` and ``import torch.<anything>`` resolve to torchlight.

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


def uninstall() -> None:
    """Undo :func:`install`: forget the ``torch`` names (a later ``import torch`` is PyTorch)."""
    if installed():
        sys.meta_path.remove(_FINDER)
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
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
elif "torch" in sys.modules and not sys.modules["torch"].__name__.startswith("torchlight"):
    import warnings

    warnings.warn(
        "import torchlight.compat: the real PyTorch is already imported, so `import torch` stays "
        "PyTorch; import torchlight.compat before anything imports torch",
        stacklevel=2,
    )
else:
    install()
