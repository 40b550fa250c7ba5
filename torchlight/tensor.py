"""Tensor: backend storage + autograd history + gradient, with Python's operator sugar.

A Tensor is a thin handle. Its elements live in ``storage``, a storage object of its
``backend`` (a numpy array by default); ``data`` is, as in PyTorch, a tensor on the same storage
cut out of the graph; ``history`` says which :class:`~torchlight.autograd.Function` made it
(``None`` for leaves); ``grad`` accumulates the gradient of leaves that ``requires_grad``.
This file has what a tensor *is* (storage, shape and dtype, history and gradient, conversion);
every operation on it (operators, math, reductions, layout, indexing, in place) is in
``tensor_methods.py``, the ``TensorOps`` it inherits, one section per family, each method a
one-line call into :mod:`torchlight.ops`.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np

from torchlight import dtypes
from torchlight.autograd import History, backpropagate
from torchlight.backends import Backend, get_backend
from torchlight.backends.fused import FusedKernels
from torchlight.device import device as _device
from torchlight.ops import arithmetic as fn
from torchlight.shape import broadcast_shape, normalize_dim, strides_from_shape
from torchlight.tensor_methods import TensorOps

Number = int | float | bool


class _Version:
    """How many in-place changes a storage has seen; shared by all views of that storage."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


_NON_LEAF_GRAD = (
    "the .grad of a non-leaf tensor (made by {fn}) is not kept: only leaf tensors (created by "
    "you, with requires_grad=True) accumulate gradients. Call .retain_grad() on it before "
    "backward() to keep it, or make it a leaf with .detach().requires_grad_()."
)


def _legacy_storage(*args: Any) -> tuple[Any, Backend]:
    """``Tensor([1.0, 2.0])`` (a copy of the data) and ``Tensor(2, 3)`` (uninitialized, of that
    shape), both in the default dtype: PyTorch's legacy constructor, which real programs still
    call. The factories (``tl.tensor``, ``tl.empty``) are the way to write it."""
    from torchlight.creation import empty, tensor

    given = [a for a in args if a is not None and a is not False]
    if all(type(a) is int for a in given):  # sizes (none: an empty tensor)
        made = empty(*given) if given else tensor([], dtype=dtypes.get_default_dtype())
    elif len(given) == 1:
        made = tensor(given[0], dtype=dtypes.get_default_dtype())
    else:
        raise TypeError(
            f"Tensor(...) takes data (Tensor([1.0, 2.0])) or sizes (Tensor(2, 3)), got {args!r}; "
            "make tensors with tl.tensor(data) or tl.empty(*sizes)"
        )
    return made.storage, made.backend


class Tensor(TensorOps):
    """An n-dimensional array that can record the operations applied to it.

    Create tensors with the factories (``tl.tensor``, ``tl.zeros``, ``tl.randn``...).

    Example:
        >>> import torchlight as tl
        >>> x = tl.tensor([2.0, 3.0], requires_grad=True)
        >>> y = (x ** 2).sum(); y.backward(); x.grad
        tensor([4., 6.])
    """

    # What every tensor has; the rest (below) is set on the few that need it, such as leaves
    # with a gradient, and until then read from the class (a step makes dozens of tensors).
    __slots__ = (
        "__dict__", "__weakref__", "_version_counter", "backend", "history", "requires_grad", "shape",
        "storage",
    )  # fmt: skip
    __array_priority__ = 1000  # numpy scalars defer to Tensor's operators
    history: History | None
    requires_grad: bool
    name: str | None = None
    _grad: Tensor | None = None
    retains_grad = False  # a non-leaf that keeps its .grad (retain_grad), PyTorch's name
    hooks: tuple[Any, ...] = ()  # functions of this tensor's gradient (register_hook)

    def __init__(
        self,
        storage: Any = None,
        backend: Backend | None = None,
        requires_grad: bool = False,
        history: History | None = None,
        version: _Version | None = None,
    ) -> None:
        if backend is None or type(backend) is int:  # PyTorch's legacy Tensor(data), Tensor(2, 3)
            storage, backend = _legacy_storage(storage, backend, requires_grad, history, version)
            requires_grad, history, version = False, None, None
        self.storage = storage  # the backend's object holding the elements
        self.shape: tuple[int, ...] = storage.shape  # (every backend's storage has one)
        self.backend = backend
        self.history = history
        self.requires_grad = requires_grad
        # How many in-place changes this storage has seen, shared by every view of it: made by
        # the first view or change (``_counter``); most tensors never need one.
        self._version_counter = version

    # ------------------------------------------------------------------ properties
    @property
    def _counter(self) -> _Version:
        """The storage's in-place counter, shared with its views, made when first asked for."""
        if self._version_counter is None:
            self._version_counter = _Version()
        return self._version_counter

    @property
    def _version(self) -> int:
        """How many in-place changes the storage has seen (PyTorch's ``x._version``)."""
        return 0 if self._version_counter is None else self._version_counter.value

    @property
    def data(self) -> Tensor:
        """This tensor's elements as a tensor cut out of the graph, on the same storage (as in
        PyTorch): ``with tl.no_grad(): p.data -= lr * p.grad`` or ``p.data.sub_(...)`` update
        ``p``. Assigning a tensor (``p.data = other``) makes ``p`` use ``other``'s storage."""
        return Tensor(self.storage, self.backend, version=self._counter)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(
                f"x.data = ... needs a Tensor, got {type(value).__name__}; wrap it with "
                "tl.tensor(...)"
            )
        if value.storage is not self.storage:  # (``p.data -= g`` assigns p's own storage back)
            self._version_counter = None
        self.storage, self.shape, self.backend = value.storage, value.shape, value.backend

    def size(self, dim: int | None = None) -> Any:
        """The shape, or the size of one dimension (PyTorch's spelling)."""
        return self.shape if dim is None else self.shape[normalize_dim(dim, self.ndim)]

    @property
    def dtype(self) -> dtypes.DType:
        storage_dtype = self.storage.dtype
        # (the table lookup first: asked on every backward step and more; from_any for the rest)
        return dtypes._BY_CLASS.get(type(storage_dtype)) or dtypes.from_any(storage_dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)

    def nelement(self) -> int:
        """:meth:`numel` (PyTorch's older name)."""
        return self.numel()

    @property
    def device(self) -> str:
        """The name of the backend holding the elements (``"numpy"``, ``"cuda"``...), as a
        :class:`~torchlight.device.device` (``.type`` is ``"cpu"`` or ``"cuda"``)."""
        return _device(self.backend.name)

    @property
    def is_cuda(self) -> bool:
        """Whether the elements are on the GPU (the ``cuda`` backend)."""
        return _device(self.backend.name).type == "cuda"

    @property
    def is_xpu(self) -> bool:
        """Never true here (torchlight has no Intel XPU backend)."""
        return False

    def stride(self, dim: int | None = None) -> Any:
        """Steps, in elements, between neighbours along each dimension."""
        strides = self.backend.strides(self.storage)
        return strides if dim is None else strides[normalize_dim(dim, self.ndim)]

    def is_contiguous(self) -> bool:
        """Whether the elements are laid out row-major with no gaps (see ``shape.py``)."""
        expected = strides_from_shape(self.shape)
        return all(
            s == e for s, e, n in zip(self.stride(), expected, self.shape, strict=True) if n > 1
        )

    def is_floating_point(self) -> bool:
        """Whether the dtype is float32 or float64."""
        return self.dtype.is_floating_point

    def element_size(self) -> int:
        """Bytes per element (8 for float64, 4 for float32)."""
        return int(self.dtype.numpy.itemsize)

    def storage_offset(self) -> int:
        """How many elements into its storage this tensor starts (a view's offset)."""
        storage = self.storage
        if not isinstance(storage, np.ndarray):  # the strided and CUDA storages keep it
            return int(storage.offset)
        start = storage
        while isinstance(start.base, np.ndarray):  # the array the views were cut from
            start = start.base
        return int((storage.ctypes.data - start.ctypes.data) // storage.itemsize)

    @property
    def is_leaf(self) -> bool:
        return self.history is None

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient of a leaf (``None`` until a backward reaches it)."""
        if self.history is not None and not self.retains_grad:
            raise AttributeError(_NON_LEAF_GRAD.format(fn=self.history.last_fn.__name__))
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and tuple(value.shape) != self.shape:
            raise ValueError(
                f"grad must have the tensor's shape {self.shape}, got {tuple(value.shape)}"
            )
        self._grad = value

    @property
    def grad_fn(self) -> Any:
        """The Function that made this tensor (``None`` for a leaf), as in PyTorch."""
        return None if self.history is None else self.history.last_fn

    @property
    def T(self) -> Tensor:  # noqa: N802 - PyTorch's name
        """The dimensions reversed (the transpose of a matrix)."""
        return fn.Permute.apply(self, tuple(reversed(range(self.ndim))))  # (always a valid order)

    # ------------------------------------------------------------------ autograd
    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Start (or stop) recording operations on this leaf; returns ``self``.

        On a non-leaf (which always requires grad) ``requires_grad_(True)`` changes nothing.
        """
        if self.history is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "requires_grad can only be turned off on leaf tensors; this one was made by "
                f"{self.history.last_fn.__name__}: use .detach() to get a tensor without history"
            )
        if requires_grad and not self.dtype.is_floating_point:
            raise TypeError(
                f"only floating point tensors can require gradients, got {self.dtype}; "
                "create it with dtype=tl.float64 (or tl.float32)"
            )
        self.requires_grad = requires_grad
        return self

    def register_hook(self, hook: Any) -> _RemovableHook:
        """Call ``hook(grad)`` when backward has this tensor's complete gradient, before it is
        passed on (or stored in ``.grad``); if the hook returns a tensor, that is used instead
        (PyTorch's ``register_hook``). Returns a handle whose ``remove()`` unregisters it.

        Example:
            >>> import torchlight as tl
            >>> x = tl.tensor([1.0, 2.0], requires_grad=True)
            >>> handle = x.register_hook(lambda g: g * 10)
            >>> (x * x).sum().backward(); x.grad
            tensor([20., 40.])
        """
        if not self.requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that does not require grad: its gradient "
                "is never computed; create it with requires_grad=True"
            )
        self.hooks = (*self.hooks, hook)
        return _RemovableHook(self, hook)

    def retain_grad(self) -> Tensor:
        """Keep ``.grad`` on this non-leaf tensor during the next backward."""
        self.retains_grad = True
        return self

    def backward(
        self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        r"""Compute $\partial\,\mathrm{self} / \partial\,\mathrm{leaf}$ into every leaf's ``.grad``
        from ``gradient`` (ones when omitted; :func:`~torchlight.autograd.backpropagate`).
        ``retain_graph`` keeps the saved tensors for another backward (default: ``create_graph``);
        ``create_graph`` records the backward math, so ``.grad`` can be differentiated again."""
        if not self.requires_grad:
            raise RuntimeError(
                "backward() called on a tensor that does not require grad and has no history: "
                "create the inputs with requires_grad=True (outside tl.no_grad())"
            )
        keep = create_graph if retain_graph is None else retain_graph
        backpropagate(self, gradient, retain_graph=keep, create_graph=create_graph)

    def accumulate_grad(self, grad: Tensor) -> None:
        """Add ``grad`` into ``.grad``; the first is a copy of its own (``grad`` may be a
        read-only broadcast view, or the very tensor another input receives)."""
        self._grad = grad.clone() if self._grad is None else self._grad + grad

    def detach(self) -> Tensor:
        """A new tensor on the same storage, cut out of the graph (no history, no grad)."""
        return Tensor(self.storage, self.backend, version=self._counter)

    def clone(self) -> Tensor:
        """A copy into fresh storage that stays in the graph (gradients flow back through it)."""
        return fn.Copy.apply(self)

    def contiguous(self) -> Tensor:
        """``self`` if already contiguous, else a contiguous copy (in the graph)."""
        return self if self.is_contiguous() else fn.Copy.apply(self)

    def zero_grad_(self) -> Tensor:
        """Set ``.grad`` to zeros in place (as ``optimizer.zero_grad()`` does); returns ``self``."""
        if self._grad is not None:
            self._grad.zero_()
        return self

    # ------------------------------------------------------------------ primitives (no autograd)
    # The backend's primitives on tensors, for writing a Function's ``forward`` (where nothing
    # is recorded): ``x._map("exp")``, ``a._zip("mul", b)``, ``x._reduce("sum", (0,))``. They
    # skip autograd, so they are private; everywhere else use the operators and methods.
    def _new(self, data: Any) -> Tensor:
        return Tensor(data, self.backend)

    def _lift(self, value: Any) -> Tensor:
        """A Python number/list/array as a tensor on this backend (numbers keep self's dtype)."""
        if isinstance(value, Tensor):
            return value
        if isinstance(value, (int, float)):  # bool is an int too
            own: np.dtype = self.storage.dtype
            # A Python number takes a float tensor's dtype: float32 * 2.5 stays float32; a float
            # with an integer tensor is the default dtype (PyTorch's: int64 * 2.5 is float32
            # there); an int or a bool with one, numpy's for the number (None)
            dtype = own if own.kind == "f" else None
            if dtype is None and type(value) is float:
                dtype = dtypes.get_default_dtype().numpy
            return Tensor(self.backend.scalar(value, dtype), self.backend)
        return Tensor(self.backend.from_numpy(np.asarray(value)), self.backend)

    def _to_backend(self, backend: Backend) -> Tensor:
        """Backend primitive: a copy of the elements on ``backend``, through host memory."""
        return Tensor(backend.from_numpy(self.backend.to_numpy(self.storage)), backend)

    def _check_backend(self, other: Tensor, what: str) -> None:
        if other.backend is not self.backend:
            raise RuntimeError(
                f"{what}: expected both tensors on the same backend, got {self.backend.name!r} "
                f"and {other.backend.name!r}; move one with .to({self.backend.name!r})"
            )

    def _map(self, op: str) -> Tensor:
        """Backend primitive: apply the named one-argument op to every element (no autograd)."""
        return Tensor(self.backend.map(op, self.storage), self.backend)

    def _zip(self, op: str, other: Tensor) -> Tensor:
        """Backend primitive: the named two-argument op, elementwise with broadcasting."""
        backend = self.backend
        if other.backend is not backend:
            self._check_backend(other, op)
        a, b = self.storage, other.storage
        da, db = a.dtype, b.dtype
        if da != db:
            common = _promote(da, db, self.shape == (), other.shape == ())
            a = a if da == common else backend.astype(a, common)
            b = b if db == common else backend.astype(b, common)
        try:
            return Tensor(backend.zip(op, a, b), backend)
        except ValueError:
            broadcast_shape(self.shape, other.shape)  # raises the clearer error, naming both shapes
            raise

    def _reduce(self, op: str, dims: tuple[int, ...], keepdim: bool = False) -> Tensor:
        """Backend primitive: fold elements along ``dims`` with ``sum``, ``max`` or ``min``."""
        return Tensor(self.backend.reduce(op, self.storage, dims, keepdim), self.backend)

    def _matmul(self, other: Tensor) -> Tensor:
        self._check_backend(other, "matmul")
        if self.dtype is not other.dtype:  # PyTorch's rule: no promotion in products (issue 25)
            dtypes.check_same_dtype("matmul", self, other)
        _check_matmul(self.shape, other.shape)
        return Tensor(self.backend.matmul(self.storage, other.storage), self.backend)

    def _linear(self, weight: Tensor, bias: Tensor | None) -> Tensor:
        """Fused backend kernel: ``self @ weight.T + bias`` in one call (``backend.linear``).

        Tensors of mixed dtypes take the composition of primitives, which promotes them.
        """
        backend = self.backend
        dtype = self.storage.dtype
        same = [weight.storage.dtype == dtype, weight.backend is backend]
        if bias is not None:
            same += [bias.storage.dtype == dtype, bias.backend is backend]
        if not all(same):
            out = self._matmul(weight._permute((1, 0)))
            return out if bias is None else out._zip("add", bias)
        _check_matmul(self.shape, weight.shape[::-1])
        b = None if bias is None else bias.storage
        fused = cast(FusedKernels, backend)  # (every backend has the fused kernels)
        return Tensor(fused.linear(self.storage, weight.storage, b), backend)

    def _log_softmax(self, dim: int) -> Tensor:
        """Fused backend kernel: ``log(softmax(self))`` along ``dim`` in one call
        (``backend.log_softmax``); see :mod:`torchlight.backends.fused`."""
        a = self.storage
        if not self.dtype.is_floating_point:  # integers: in float64, as exp() would compute
            a = self.backend.astype(a, np.dtype(np.float64))
        fused = cast(FusedKernels, self.backend)  # (every backend has the fused kernels)
        return Tensor(fused.log_softmax(a, dim), self.backend)

    def _fused(self, kernel: str, *others: Tensor | object) -> tuple[Tensor, ...]:
        """Fused backend kernel ``backend.<kernel>(self, *others)`` (``lstm_forward``,
        ``lstm_backward``; see :mod:`torchlight.backends.fused`), its results as
        tensors. Every tensor must be on this backend with this dtype; anything else (None, a
        host array of indices, a string) passes through as it is."""
        backend, dtype = self.backend, self.dtype
        for other in others:
            if isinstance(other, Tensor) and other.backend is not backend:
                self._check_backend(other, kernel)
            if isinstance(other, Tensor) and other.dtype != dtype:
                raise TypeError(
                    f"{kernel}: expected every tensor with dtype {dtype}, got one with "
                    f"{other.dtype}; convert it with .to({dtype})"
                )
        storages = (t.storage if isinstance(t, Tensor) else t for t in others)
        results = getattr(backend, kernel)(self.storage, *storages)
        return tuple(Tensor(result, backend) for result in results)

    def _view(self, shape: tuple[int, ...], *, copy_ok: bool) -> Tensor:
        out = self.backend.view(self.storage, shape)
        if out is not None:
            return Tensor(out, self.backend, version=self._counter)
        if not copy_ok:
            raise RuntimeError(
                f"view{shape}: the strides {self.stride()} of this {self.shape} tensor do not "
                "allow a view; use .reshape(...) (which copies) or .contiguous().view(...)"
            )
        return self._new(self.backend.view(self.backend.contiguous(self.storage), shape))

    def _permute(self, dims: tuple[int, ...]) -> Tensor:
        return Tensor(self.backend.permute(self.storage, dims), self.backend, version=self._counter)

    def _expand(self, shape: tuple[int, ...]) -> Tensor:
        return Tensor(self.backend.expand(self.storage, shape), self.backend, version=self._counter)

    def _getitem(self, index: tuple[Any, ...]) -> Tensor:
        basic = all(
            isinstance(i, (int, np.integer, slice, type(None), type(Ellipsis))) for i in index
        )
        data = self.backend.getitem(self.storage, index)
        # basic indexing is a view of the same storage, as in PyTorch
        return Tensor(data, self.backend, version=self._counter if basic else None)

    def _index_add(self, shape: tuple[int, ...], index: tuple[Any, ...]) -> Tensor:
        return self._new(self.backend.index_add(shape, index, self.storage))

    def _cat(self, parts: Sequence[Tensor], dim: int) -> Tensor:
        for p in parts:
            self._check_backend(p, "cat")
        return self._new(self.backend.cat([p.storage for p in parts], dim))

    def _where(self, condition: Tensor, other: Tensor) -> Tensor:
        self._check_backend(other, "where")
        return self._new(self.backend.where(condition.storage, self.storage, other.storage))

    # ------------------------------------------------------------------ conversion
    def to(
        self, *args: Any, device: Any = None, dtype: Any = None, non_blocking: bool = False
    ) -> Tensor:
        """A copy with another dtype (``tl.float32``) and/or on another backend or device
        (``"numba"``, ``"cpu"``, ``"cuda"``); ``self`` when nothing changes.

        PyTorch's forms all work: ``x.to(dtype)``, ``x.to(device)``, ``x.to(device, dtype)``,
        ``x.to(other)`` (``other``'s dtype and backend), ``x.to(device=..., dtype=...)``;
        ``non_blocking`` is accepted and changes nothing (every copy here is synchronous).
        """
        for arg in args:
            if isinstance(arg, Tensor):
                device, dtype = arg.backend, arg.dtype
            elif isinstance(arg, str) and arg not in dtypes._ALL:
                device = arg  # a backend or device name
            else:
                dtype = arg
        out = self
        if device is not None:
            backend = get_backend(device)
            if backend is not self.backend:
                out = fn.ToBackend.apply(out, backend)
        if dtype is not None:
            wanted = dtypes.from_any(dtype)
            if wanted is not out.dtype:
                out = fn.Cast.apply(out, wanted)
        return out

    def float(self) -> Tensor:
        return self.to(dtypes.float32)

    def double(self) -> Tensor:
        return self.to(dtypes.float64)

    def long(self) -> Tensor:
        return self.to(dtypes.int64)

    def half(self) -> Tensor:
        """float16: torchlight has no half-precision storage yet, so this raises, naming it."""
        raise TypeError(
            "half(): torchlight has no float16 storage yet; use .float() (float32) instead"
        )

    def cpu(self) -> Tensor:
        """On the CPU backend (``self`` if already there): ``.to("cpu")``."""
        return self.to("cpu")

    def cuda(self) -> Tensor:
        """On the CUDA backend: ``.to("cuda")`` (an error naming the fix when there is no GPU)."""
        return self.to("cuda")

    def numpy(self) -> np.ndarray:
        """The elements as a numpy array (shares memory on the numpy backend, as in PyTorch)."""
        if self.requires_grad:
            raise RuntimeError(
                "can't call numpy() on a tensor that requires grad; use .detach().numpy()"
            )
        return self.backend.to_numpy(self.storage)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = np.asarray(self.backend.to_numpy(self.storage))
        return array.astype(dtype) if dtype is not None else array

    def item(self) -> Any:
        """The single element as a Python number."""
        if self.numel() != 1:
            raise ValueError(
                f"item() needs a tensor with one element, this one has shape {self.shape}"
            )
        return np.asarray(self.backend.to_numpy(self.storage)).reshape(()).item()

    def tolist(self) -> Any:
        return np.asarray(self.backend.to_numpy(self.storage)).tolist()

    def __float__(self) -> builtins.float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                f"the truth value of a tensor with {self.numel()} elements is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of one element can be converted to an index")
        return int(self.item())

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        from torchlight.printing import tensor_repr

        return tensor_repr(self)

    def _repr_html_(self) -> str:
        from torchlight.printing import tensor_html

        return tensor_html(self)

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"``: a 0-d tensor formats as its number, as in PyTorch."""
        if self.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(
                f"unsupported format string {spec!r} passed to Tensor.__format__: only a 0-d "
                f"tensor takes a format spec (this one has shape {tuple(self.shape)}; format "
                "x.item() or x.tolist())"
            )
        return str(self)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # pickle and copy.deepcopy: the elements, the backend by name (backends are one per
        # process, so a copy must not make a second one) and requires_grad, as PyTorch keeps them
        grad = self.grad if self.is_leaf else None
        elements = self.detach().numpy().copy()
        return _rebuild, (type(self), elements, self.backend.name, self.requires_grad, grad)

    def type_as(self, other: Tensor) -> Tensor:
        """This tensor with ``other``'s dtype (``self`` when it has it already)."""
        return self.to(other.dtype) if self.dtype is not other.dtype else self

    # (type, int and bool last: after them, these names in this class body are the methods)
    def type(self, dtype: Any = None, non_blocking: bool = False) -> Any:
        """Without ``dtype``, PyTorch's legacy type name (``"torch.DoubleTensor"``); with one
        (a dtype or such a name), this tensor as that dtype."""
        if dtype is None:
            return _TYPE_NAMES.get(self.dtype.name, f"torchlight.{self.dtype.name}")
        if isinstance(dtype, str) and dtype in _BY_TYPE_NAME:
            dtype = _BY_TYPE_NAME[dtype]
        dtype = getattr(dtype, "dtype", dtype)  # the legacy constructors: x.type(tl.FloatTensor)
        target = dtypes.from_any(dtype)
        return self.to(target) if target is not self.dtype else self

    def int(self) -> Tensor:
        """A copy as int32 (``.long()`` is int64)."""
        return self.to(dtypes.int32)

    def bool(self) -> Tensor:
        """A copy as bool: True where nonzero."""
        return self.to(dtypes.bool_)


# PyTorch's legacy type names, as Tensor.type() prints them
_TYPE_NAMES = {
    "float64": "torch.DoubleTensor",
    "float32": "torch.FloatTensor",
    "float16": "torch.HalfTensor",
    "bfloat16": "torch.BFloat16Tensor",
    "int64": "torch.LongTensor",
    "int32": "torch.IntTensor",
    "uint8": "torch.ByteTensor",
    "bool": "torch.BoolTensor",
}
_BY_TYPE_NAME = {v: k for k, v in _TYPE_NAMES.items()}


def _rebuild(cls: type, array: Any, backend: str, requires_grad: bool, grad: Any) -> Tensor:
    """A pickled tensor again (``Tensor.__reduce_ex__``): on the backend of that name."""
    chosen = get_backend(backend)
    out = Tensor(chosen.from_numpy(array), chosen)
    if cls is not Tensor:  # nn.Parameter
        return cls(out, requires_grad=requires_grad)
    if requires_grad:
        out.requires_grad_(True)
    if grad is not None:
        out.grad = grad
    return out


class _RemovableHook:
    """What ``register_hook`` returns: ``remove()`` takes the hook off the tensor again."""

    def __init__(self, tensor: Tensor, hook: Any) -> None:
        self._tensor, self._hook = tensor, hook

    def remove(self) -> None:
        self._tensor.hooks = tuple(h for h in self._tensor.hooks if h is not self._hook)


#: PyTorch's categories of dtypes, lowest first: bool, integers, floating point.
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2}


def _promote(a: np.dtype, b: np.dtype, a_is_0d: bool = False, b_is_0d: bool = False) -> np.dtype:
    """PyTorch's promotion: a float operand decides the type (int64 * float32 is float32), and a
    0-d tensor only decides it when it is of a higher category than a dimensioned one
    (``ones(2, float32) * tensor(2.0, float64)`` is float32; an int tensor times
    ``tensor(2.5)`` is float64).
    """
    if a_is_0d != b_is_0d:
        dimensioned, zero_d = (b, a) if a_is_0d else (a, b)
        if _CATEGORY.get(zero_d.kind, 3) > _CATEGORY.get(dimensioned.kind, 3):
            return zero_d
        return dimensioned
    if a.kind == "f" and b.kind != "f":
        return a
    if b.kind == "f" and a.kind != "f":
        return b
    return np.result_type(a, b)


def _check_matmul(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    if len(a) == 0 or len(b) == 0:
        raise RuntimeError(f"matmul needs tensors of at least 1 dimension, got shapes {a} and {b}")
    inner_a = a[-1]
    inner_b = b[0] if len(b) == 1 else b[-2]
    if inner_a != inner_b:
        raise ValueError(
            f"matmul: shapes {a} and {b} are not aligned: the first's last dimension ({inner_a}) "
            f"must equal the second's {'only' if len(b) == 1 else 'second-to-last'} dimension ({inner_b})"
        )
    if len(a) > 2 and len(b) > 2:
        try:
            broadcast_shape(a[:-2], b[:-2])
        except ValueError:
            raise ValueError(
                f"matmul: the batch dimensions of shapes {a} and {b} ({a[:-2]} and {b[:-2]}) "
                "cannot be broadcast together"
            ) from None
