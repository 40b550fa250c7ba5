r"""The graph's nodes: :class:`Context`, :class:`History` and :class:`Function` (with ``apply``).

A tensor made by a :class:`Function` carries a :class:`History`: the Function (``last_fn``), the
:class:`Context` it stashed values in, and the ``parents`` it was applied to (the graph's edges).
:meth:`History.chain_rule` is one step of the backward walk (:mod:`~torchlight.autograd.engine`):
$\partial L/\partial x_i = \sum_{\text{uses of } x_i} \partial L/\partial f \cdot \partial f/\partial x_i$.
``deriv`` is $\partial L / \partial\,\text{node}$ (the Tutorial 2 page's word); a Function's
``backward`` receives it as ``grad_output`` (PyTorch's parameter name). The tensor ``forward``
returns becomes the graph node (as in PyTorch; an input returned as it came gets a new tensor):
to use it in ``backward``, keep it with ``ctx.save_for_backward`` (held weakly, no reference
cycle), not as a ``ctx`` attribute (a cycle that only the garbage collector frees).

Example (a Function of your own; ``Mul`` in :mod:`torchlight.ops.arithmetic` is a built-in one):
    >>> import torchlight as tl
    >>> class Cube(tl.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x * x
    ...     @staticmethod
    ...     def backward(ctx, grad_output):
    ...         (x,) = ctx.saved_tensors
    ...         return grad_output * 3 * x * x
    >>> x = tl.tensor([1.0, 2.0], requires_grad=True)
    >>> Cube.apply(x).sum().backward(); x.grad
    tensor([ 3., 12.])
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from torchlight.autograd.grad_mode import _GradMode, no_grad
from torchlight.shape import broadcasts_to, unbroadcast

__all__ = ["Context", "Function", "History", "Variable", "once_differentiable"]


class Variable(Protocol):
    """What the engine needs of a tensor (a :class:`~torchlight.Tensor` is one).

    Called as PyTorch's deprecated ``Variable(tensor, requires_grad=False)`` (old programs still
    do), it gives a tensor on the same storage, as PyTorch's does since tensors and Variables
    merged: a leaf, requiring grad when asked.
    """

    def __new__(cls, data: Any, requires_grad: bool = False, volatile: bool = False) -> Any:
        if not hasattr(data, "requires_grad"):
            raise TypeError(
                f"Variable(data): data must be a Tensor, got {type(data).__name__}; "
                "use tl.tensor(data, requires_grad=...) (Variable is deprecated in PyTorch too)"
            )
        return data.detach().requires_grad_(requires_grad)  # (a new tensor on data's storage)

    history: History | None  # None for a leaf
    requires_grad: bool
    retains_grad: bool  # a non-leaf that keeps its .grad (Tensor.retain_grad)
    hooks: tuple[Callable[[Any], Any], ...]  # functions of its gradient (Tensor.register_hook)
    shape: tuple[int, ...]

    def accumulate_grad(self, deriv: Any) -> None: ...

    def new_tensor(self, data: Any) -> Any: ...

    def new_ones(self, *size: Any) -> Any: ...


class Context:
    """Scratchpad a :class:`Function` uses to stash values for ``backward()``: tensors through
    ``save_for_backward`` (checked for in-place changes), anything else as ``ctx.dim = 1``."""

    _saved: tuple[Any, ...] = ()  # (class defaults: a Context is made for every op)
    _freed = _holds_output = False  # _holds_output: one of _saved is forward's output, weakly
    _non_differentiable: tuple[Any, ...] = ()

    def __init__(self, fn_name: str = "Function", args: tuple = (), needs: Any = ()) -> None:
        # needs_input_grad (PyTorch's): per argument, a tensor requiring grad? None: not recorded
        self._fn_name, self.forward_args, self.needs_input_grad = fn_name, args, needs

    if TYPE_CHECKING:  # Functions stash arbitrary attributes (ctx.dim = 1)

        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors``, with their version counters, until backward has run."""
        if self.needs_input_grad is not None:  # (None: not recorded, backward never runs)
            self._saved = tensors
            self._versions = tuple([getattr(t, "_version", -1) for t in tensors])

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """These outputs of forward (an index, a mask) get no history (backward gets zeros)."""
        self._non_differentiable = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to :meth:`save_for_backward`, checked against in-place changes."""
        if self._freed:
            raise RuntimeError(
                f"Trying to backward through the graph a second time: the values saved for "
                f"backward by {self._fn_name} were freed by the first backward(). Call "
                "backward(retain_graph=True) the first time if you need to backward again."
            )
        saved = self._saved
        if self._holds_output:  # forward's result is held weakly (apply): the node itself
            saved = tuple([t() if type(t) is weakref.ref else t for t in saved])
        for i, version in enumerate(self._versions):
            if version >= 0 and (t := saved[i])._version != version:
                raise RuntimeError(
                    f"one of the tensors saved for {self._fn_name}.backward (saved tensor {i}, "
                    f"shape {tuple(t.shape)}) was modified by an in-place operation: it was at "
                    f"version {version} when saved and is now at version {t._version}. "
                    "The gradient would be wrong; use an out-of-place op (x = x + 1, not "
                    "x.add_(1)) or .clone() the tensor before changing it."
                )
        return saved

    def release(self) -> None:
        """Drop the saved tensors (the engine calls this after backward, unless retain_graph)."""
        if self._saved:
            self._saved, self._freed = (), True


_HISTORY = operator.attrgetter("history")  # (each parent's .history, without a Python call)


class History:
    """Which Function built a tensor (``last_fn``), its :class:`Context` and its ``parents``."""

    __slots__ = ("ctx", "last_fn", "outputs", "parent_histories", "parents")  # (_several_outputs)

    def __init__(self, last_fn: type[Function], ctx: Context, parents: tuple[Any, ...]) -> None:
        self.last_fn, self.ctx, self.parents, self.outputs = last_fn, ctx, parents, None
        self.parent_histories = tuple(map(_HISTORY, parents))  # an in-place op may change one

    def recorded_parents(self) -> list[Any]:
        """The parents as this node saw them: ``y.add_(1)`` gives ``y`` a new History whose first
        parent is the old ``y``, where earlier users of ``y`` send their gradient (as PyTorch)."""
        recorded = list(self.parents)
        for i, h in enumerate(self.parent_histories):
            while (changed := recorded[i].history) is not h:  # changed in place after this use
                if getattr(self.last_fn, "makes_view", False):
                    raise RuntimeError(
                        f"a view ({self.last_fn.__name__}) was taken of a tensor that was then "
                        f"changed in place by {changed.last_fn.__name__}: the view's gradient "
                        "would be wrong. Take the view after the change, or change a .clone()."
                    )
                recorded[i] = changed.parents[0]  # the tensor before that in-place op
        return recorded

    def chain_rule(self, deriv: Any) -> list[tuple[Any, Any]]:
        """One step of the chain rule: ``(parent, dL/dparent)`` for each parent that needs it.
        A broadcast parent's gradient is summed back to its shape (``unbroadcast``)."""
        derivs = (deriv,) if self.outputs is None else _per_output(self.outputs, deriv)
        grads = self.last_fn.backward(self.ctx, *derivs)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != len(self.parents):  # one per forward argument (PyTorch's way)
            grads = _one_per_parent(self, grads)
        pairs = []
        for i, parent in enumerate(self.recorded_parents()):  # (as many grads as parents)
            if (grad := grads[i]) is not None and parent.requires_grad:
                pairs.append((parent, _fitted(self.last_fn, i, parent, grad)))
        return pairs

    def __repr__(self) -> str:
        return f"History(last_fn={self.last_fn.__name__}, parents={self.parents!r})"


def _one_per_parent(history: History, grads: tuple[Any, ...]) -> tuple[Any, ...]:
    """The parents' gradients: one per tensor, or (PyTorch's way) one per forward argument."""
    fn, args, n = history.last_fn.__name__, history.ctx.forward_args, len(history.parents)
    if len(grads) != len(args):
        raise RuntimeError(
            f"{fn}.backward returned {len(grads)} gradient(s), but {fn}.forward took {n} tensor "
            f"input(s) ({len(args)} argument(s)): return one gradient per tensor input, or one "
            "value per argument (None for each argument that is not a tensor)"
        )
    for i, (arg, grad) in enumerate(zip(args, grads, strict=True)):
        if grad is not None and not hasattr(arg, "requires_grad"):
            raise RuntimeError(
                f"{fn}.backward returned a gradient for forward's argument {i}, which is not a "
                f"tensor (it is a {type(arg).__name__}): return None for it"
            )
    return tuple([g for a, g in zip(args, grads, strict=True) if hasattr(a, "requires_grad")])


def _fitted(fn: type[Function], i: int, parent: Any, grad: Any) -> Any:
    """``grad`` as a tensor of ``parent``'s shape, dtype and backend (a broadcast one summed)."""
    grad = grad if hasattr(grad, "requires_grad") else parent.new_tensor(grad)
    if grad.shape != parent.shape and not broadcasts_to(parent.shape, grad.shape):
        raise RuntimeError(
            f"{fn.__name__}.backward returned a gradient of shape {grad.shape} for input {i}, "
            f"which has shape {parent.shape}: return one of its shape (or one it broadcasts to)"
        )
    grad = grad if grad.shape == parent.shape else unbroadcast(grad, parent.shape)
    return grad if grad.dtype == parent.dtype else grad.to(parent.dtype)


class _PerNode:
    """``x.grad_fn.next_functions``: PyTorch's grad_fn is a node; torchlight's is the Function
    class every node made by it shares, so a node's inputs are found on its History."""

    def __get__(self, instance: Any, owner: type) -> Any:
        raise AttributeError(
            f"{owner.__name__}.next_functions: x.grad_fn is the Function class ({owner.__name__}), "
            "shared by every tensor it made, so it cannot list one node's inputs. A node's inputs "
            "are x.history.parents, and their Functions are [p.grad_fn for p in x.history.parents] "
            "(None for a leaf)."
        )


class Function:
    r"""A differentiable operation: a ``forward``/``backward`` pair of static methods; subclass
    it (the module's example) and call ``YourFunction.apply(*inputs)``. ``forward(ctx, *inputs)``
    computes the result with recording off; ``backward(ctx, grad_output)`` returns, for each
    tensor input, ``grad_output`` $\cdot\ \partial f / \partial \text{input}_i$."""

    forward: Callable[..., Any]  # (ctx, *inputs) -> Tensor, a staticmethod of each subclass
    backward: Callable[..., Any]  # (ctx, grad_output) -> one gradient per tensor input
    next_functions = _PerNode()  # PyTorch's grad_fn.next_functions: an error that teaches

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward``; if a tensor argument requires grad, its result is a graph node."""
        on = _GradMode.enabled  # (off inside no_grad, inside a forward, in a plain backward)
        needs, parents = [], []  # per argument: a tensor requiring grad?; the tensor arguments
        for a in args if on else ():  # (one loop: two comprehensions cost 3% of a small op)
            needs.append(getattr(a, "requires_grad", False))
            if hasattr(a, "requires_grad"):
                parents.append(a)
        ctx = Context(cls.__name__, args, tuple(needs) if on else None)
        _GradMode.enabled = False  # forward's own ops are not recorded
        try:
            result = cls.forward(ctx, *args, **kwargs)
        finally:
            _GradMode.enabled = on
        if not hasattr(result, "requires_grad"):  # several outputs: a sort's (values, indices)?
            return _several_outputs(cls, ctx, args, result)
        if not on or True not in needs or ctx._non_differentiable and _marked(ctx, result):
            return result
        if result.requires_grad or _among(result, args):  # not made by forward:
            result = result.detach()  # the node is a new tensor on its storage
        elif ctx._saved and _among(result, ctx._saved):  # a saved output, held weakly: no cycle
            ctx._saved = tuple([weakref.ref(t) if t is result else t for t in ctx._saved])
            ctx._holds_output = True
        result.history = History(cls, ctx, args if len(parents) == len(args) else tuple(parents))
        result.requires_grad = True
        return result


def _marked(ctx: Context, result: Any) -> bool:
    return _among(result, ctx._non_differentiable)  # (one not returned: ignored, as PyTorch)


def _among(t: Any, items: tuple[Any, ...]) -> bool:
    """Is ``t`` one of ``items``, the same object? (``in`` would compare tensors elementwise.)"""
    for item in items:  # noqa: SIM110 - (a loop: any() over a generator costs 3x as much)
        if item is t:
            return True
    return False


def _several_outputs(cls: type[Function], ctx: Context, args: tuple[Any, ...], outputs: Any) -> Any:
    """forward returned several tensors: the one not marked non-differentiable becomes the graph
    node (a new tensor on its storage), and its History remembers every output's shape and dtype
    so that backward gets one gradient per output (zeros for the marked ones, as in PyTorch)."""
    if type(outputs) is not tuple or not all(hasattr(t, "requires_grad") for t in outputs):
        raise TypeError(
            f"{cls.__name__}.forward must return a Tensor or a tuple of Tensors, not {outputs!r}"
        )
    live = [i for i, t in enumerate(outputs) if not _marked(ctx, t)]
    if not ctx.needs_input_grad or True not in ctx.needs_input_grad or not live:
        return outputs
    if len(live) > 1:
        raise NotImplementedError(
            f"{cls.__name__}.forward returned {len(outputs)} tensors, {len(live)} of them "
            "differentiable; torchlight's graph records one differentiable output per Function. "
            "Mark the others with ctx.mark_non_differentiable(...) (indices, masks), or write one "
            "Function per differentiable output."
        )
    node = outputs[live[0]].detach()
    node.history = History(cls, ctx, tuple([a for a in args if hasattr(a, "requires_grad")]))
    node.requires_grad = True
    node.history.outputs = (live[0], tuple([(t.shape, t.dtype) for t in outputs]))
    return tuple([node if i == live[0] else t for i, t in enumerate(outputs)])


def _per_output(outputs: tuple[int, tuple[Any, ...]], deriv: Any) -> tuple[Any, ...]:
    """backward's gradients for a several-output forward: ``deriv`` for the graph node, zeros of
    each other output's shape and dtype."""
    node, shapes = outputs
    return tuple(
        [deriv if i == node else deriv.new_zeros(s, dtype=d) for i, (s, d) in enumerate(shapes)]
    )


def once_differentiable(backward: Callable[[Context, Any], Any]) -> Callable[[Context, Any], Any]:
    """Mark a ``backward`` that is not recorded tensor math (a fused kernel), as PyTorch's
    ``@once_differentiable``: with ``create_graph`` its gradients are right, and
    differentiating them again raises an error that names the Function."""

    @functools.wraps(backward)
    def once(ctx: Context, grad_output: Any) -> Any:
        with no_grad():
            grads = backward(ctx, grad_output)
        if not _GradMode.enabled:  # an ordinary backward: nothing is recorded anyway
            return grads
        sources = [a for a in (grad_output, *ctx.forward_args) if getattr(a, "requires_grad", 0)]
        marked = [
            _NotTwiceDifferentiable.apply(g, ctx._fn_name, *sources)
            if hasattr(g, "requires_grad") else g
            for g in (grads if isinstance(grads, tuple) else (grads,))
        ]  # fmt: skip
        return tuple(marked)

    return once


class _NotTwiceDifferentiable(Function):
    """A gradient computed by a once-differentiable backward: the same values, and a backward
    that says why it cannot be differentiated again."""

    @staticmethod
    def forward(ctx: Context, grad: Any, fn_name: str, *sources: Any) -> Any:
        ctx.fn_name = fn_name
        return grad

    @staticmethod
    def backward(ctx: Context, grad_output: Any) -> Any:
        raise RuntimeError(
            f"double backward through {ctx.fn_name} is not supported: its backward uses "
            "unrecorded backend primitives (it is marked once_differentiable), so its gradient "
            "cannot be differentiated again. Build that part of the model from differentiable "
            "tensor ops, or use create_graph only where second derivatives are needed."
        )
