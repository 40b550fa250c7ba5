r"""The CUDA backend's kernel launches, with numba's argument marshalling planned once.

Speed trick (host side; nothing above the backend knows of it). ``kernel[grid, block](*args)``
costs numba-cuda 30 to 60 µs of Python on every launch, far more than a small kernel runs on a
GPU: it types every argument, looks the compiled kernel up, and converts every argument into
the kernel's parameters one by one (a device array becomes 7 numbers; an ``int`` becomes a
``ctypes.c_int64`` found by name). A training step of a small model launches about a hundred
kernels, so this is most of its time. :class:`Launcher` does numba's launch once per kernel and
*kind* of arguments (their Python types, array dtypes, tuple lengths), then keeps a
:class:`Plan`: the compiled kernel and one small packer per argument. Later launches with
arguments of the same kind run the packers and call the same launch function numba calls.

A plan is only kept when it is right: when it is made, its packers' parameters are compared
with those numba's own marshalling (``_Kernel._prepare_args``) makes of the same arguments; if
they differ (another numba-cuda version, a type the packers do not know), that kernel keeps
numba's launch, and :attr:`Launcher.rejected` says why. numba's simulator has no compiled
kernels: there, and with ``TORCHLIGHT_CUDA_FAST_LAUNCH=0``, every launch is numba's.

How the backend calls it (a sketch, not runnable alone: ``kernel``, ``out`` and ``x`` are a
compiled kernel and device arrays, which need a GPU)::

    from torchlight.backends.cuda.launch import Launcher
    launcher = Launcher(enabled=True)
    launcher(kernel, 4, 128, (out, x, 0, (1,), (512,)))
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

Packer = Callable[[Any, list], None]


def dim3(dim: int | Sequence[int]) -> tuple[int, int, int]:
    """A grid or block size as the 3-tuple numba launches with: ``4`` is ``(4, 1, 1)``."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


def signature_key(args: Sequence[Any]) -> tuple[Any, ...]:
    """What decides how numba types ``args``: each one's Python type, an array's dtype and
    number of dimensions, a tuple's element types."""
    key: list[Any] = []
    for value in args:
        kind = type(value)
        if kind is tuple:
            key.append(("tuple", *map(type, value)))
        elif kind in (int, float, bool):
            key.append(kind)
        else:
            key.append((kind, getattr(value, "dtype", None), getattr(value, "ndim", None)))
    return tuple(key)


def _pack_array(value: Any, params: list) -> None:
    # numba's parameters for an array: meminfo and parent (0 on a GPU), size, itemsize, the
    # data pointer, the shape, the strides in bytes; kept on the array after its first launch
    try:
        params.extend(value._torchlight_params)
    except AttributeError:
        pointer = value.device_ctypes_pointer.value
        found = (0, 0, value.size, value.dtype.itemsize, pointer, *value.shape, *value.strides)
        with contextlib.suppress(AttributeError):  # (an array type without attributes)
            value._torchlight_params = found
        params.extend(found)


def _pack_as_is(value: Any, params: list) -> None:
    params.append(value)


def packer(numba_type: Any) -> Packer | None:
    """How numba turns an argument of ``numba_type`` into kernel parameters, or None for a
    type this module does not plan (numba's own launch then serves it)."""
    types: Any = importlib.import_module("numba.cuda.types")

    if isinstance(numba_type, types.Array):
        return _pack_array
    if isinstance(numba_type, types.Integer):
        to_c = getattr(ctypes, f"c_{numba_type}")
        return lambda value, params: params.append(to_c(value))
    if numba_type == types.float32:
        return lambda value, params: params.append(ctypes.c_float(value))
    if numba_type == types.float64:
        return lambda value, params: params.append(ctypes.c_double(value))
    if numba_type == types.boolean:
        return _pack_as_is
    if isinstance(numba_type, types.BaseTuple):
        inner = [packer(t) for t in numba_type]
        if any(p is None or p is _pack_array for p in inner):
            return None

        def pack_tuple(value: Any, params: list) -> None:
            for pack, item in zip(inner, value, strict=True):
                pack(item, params)  # type: ignore[misc]

        return pack_tuple
    return None


def pack(packers: Sequence[Packer], args: Sequence[Any]) -> list:
    """The kernel parameters of ``args``, one packer per argument."""
    params: list = []
    for pack_one, value in zip(packers, args, strict=True):
        pack_one(value, params)
    return params


def same_parameters(ours: Sequence[Any], numbas: Sequence[Any]) -> bool:
    """Whether two parameter lists are the same: same types, same values (ctypes by value)."""
    if len(ours) != len(numbas):
        return False
    for a, b in zip(ours, numbas, strict=True):
        if type(a) is not type(b):
            return False
        if isinstance(a, ctypes._SimpleCData):
            if a.value != b.value:
                return False
        elif a != b:
            return False
    return True


def numba_parameters(compiled: Any, numba_types: Sequence[Any], args: Sequence[Any]) -> list:
    """The parameters numba's own marshalling (``_Kernel._prepare_args``) makes of ``args``."""
    params: list = []
    written_back: list = []  # copies back to host arrays: none may be needed
    for numba_type, value in zip(numba_types, args, strict=True):
        compiled._prepare_args(numba_type, value, 0, written_back, params)
    if written_back:
        raise ValueError("an argument is a host array (numba copies it): not planned")
    return params


class Plan:
    """One kernel, launched with arguments of one kind: its compiled code and packers."""

    def __init__(self, compiled: Any, packers: list[Packer], api: Any) -> None:
        self.compiled, self.packers, self.api = compiled, packers, api
        self.stream = api.driver._to_core_stream(0)  # the default stream, as numba's launch

    def launch(self, griddim: tuple[int, int, int], blockdim: tuple[int, int, int], args: Any):
        params = pack(self.packers, args)
        cufunc = self.compiled._codelibrary.get_cufunc()
        config = self.api.LaunchConfig(
            grid=griddim, block=blockdim, shmem_size=0, **self.api.not_cooperative
        )
        self.api.launch(self.stream, config, cufunc.kernel, *params)


class _NumbaLaunchAPI:
    """The parts of numba-cuda a plan uses; construction fails where they are missing."""

    def __init__(self) -> None:
        # (imported by name: mypy knows numba's deprecated built-in numba.cuda, not numba-cuda)
        dispatcher: Any = importlib.import_module("numba.cuda.dispatcher")
        driver: Any = importlib.import_module("numba.cuda.cudadrv.driver")

        self.driver = driver
        self.launch, self.LaunchConfig = dispatcher.launch, dispatcher.LaunchConfig
        new_api = dispatcher.CUDA_CORE_GE_1_0
        self.not_cooperative = {"is_cooperative" if new_api else "cooperative_launch": False}
        driver._to_core_stream  # noqa: B018 - fails early on a numba-cuda without it
        dispatcher._Kernel._prepare_args  # noqa: B018


class Launcher:
    """Launches kernels: numba's launch the first time for each kind of arguments, then a
    :class:`Plan` when one checks out (see the module docstring).

    Attributes:
        enabled: whether plans are made (False in the simulator).
        plans: ``(kernel, signature_key) -> Plan``, or None where numba's launch stays.
        rejected: why a kernel keeps numba's launch, one line each.
        fast_launches: launches through a plan (the rest went through numba).
    """

    def __init__(self, enabled: bool) -> None:
        self.api: Any = None
        self.rejected: list[str] = []
        if enabled:
            try:
                self.api = _NumbaLaunchAPI()
            except Exception as error:  # another numba-cuda: numba's launch everywhere
                self.rejected.append(f"no fast launches with this numba-cuda: {error!r}")
        self.enabled = self.api is not None
        self.plans: dict[tuple[Any, tuple[Any, ...]], Plan | None] = {}
        self.fast_launches = 0

    def __call__(
        self, kernel: Any, griddim: int | Sequence[int], blockdim: int | Sequence[int], args: Any
    ) -> None:
        """``kernel[griddim, blockdim](*args)``."""
        if not self.enabled:
            kernel[griddim, blockdim](*args)
            return
        key = (kernel, signature_key(args))
        plan = self.plans.get(key, False)
        if plan:
            try:
                plan.launch(dim3(griddim), dim3(blockdim), args)  # type: ignore[union-attr]
            except Exception as error:  # (a launch API that changed): numba's launch from now
                self.plans[key] = None
                self.rejected.append(
                    f"{getattr(kernel, '__name__', kernel)}: a plan failed ({error!r})"
                )
                kernel[griddim, blockdim](*args)
                return
            self.fast_launches += 1
            return
        with warnings.catch_warnings():
            # numba warns of grids under 128 blocks; small tensors have small grids here
            warnings.simplefilter("ignore")
            kernel[griddim, blockdim](*args)
        if plan is False:  # not tried yet: numba has now compiled it for these arguments
            self.plans[key] = self._plan(kernel, args)

    def _plan(self, kernel: Any, args: Sequence[Any]) -> Plan | None:
        name = getattr(kernel, "__name__", repr(kernel))
        try:
            numba_types = tuple(kernel.typeof_pyval(value) for value in args)
            compiled = kernel.overloads[numba_types]
            packers = [packer(t) for t in numba_types]
            if any(p is None for p in packers) or getattr(compiled, "extensions", None):
                raise ValueError(f"argument types {numba_types} are not planned")
            if getattr(compiled, "debug", False) or getattr(compiled, "cooperative", False):
                raise ValueError("a debug or cooperative kernel")
            ours = pack(packers, args)  # type: ignore[arg-type]
            if not same_parameters(ours, numba_parameters(compiled, numba_types, args)):
                raise ValueError("its parameters differ from numba's")
        except Exception as error:
            self.rejected.append(f"{name}: numba's launch ({error})")
            return None
        return Plan(compiled, packers, self.api)  # type: ignore[arg-type]
