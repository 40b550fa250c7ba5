r"""The graph's nodes: :class:`Context`, :class:`History` and :class:`Function` (with ``apply``).

Every tensor made by a :class:`Function` carries a :class:`History`: which Function made it
(``last_fn``), the :class:`Context` that Function stashed values in, and the input tensors
(``inputs``, the page's ``parents``). :meth:`History.chain_rule` is one step of the backward walk
(:mod:`torchlight.autograd.engine`):

$$\frac{\partial L}{\partial x_i} = \sum_{\text{uses of } x_i}
  \frac{\partial L}{\partial f} \cdot \frac{\partial f}{\partial x_i}$$
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from torchlight.autograd.grad_mode import _GradMode, no_grad
from torchlight.shape import broadcasts_to, unbroadcast

__all__ = ["Context", "Function", "History", "Variable"]


class Variable(Protocol):
    """What the engine needs of a tensor: its history, whether it wants a gradient, its shape."""

    history: History | None
    requires_grad: bool
    _retains_grad: bool
    _hooks: tuple[Any, ...]

    @property
    def shape(self) -> tuple[int, ...]: ...

    def _accumulate_grad(self, grad: Any) -> None: ...

    def _lift(self, value: Any) -> Any: ...


_FREED = (
    "Trying to backward through the graph a second time: the values saved for backward by "
    "{fn} were freed by the first backward(). Call backward(retain_graph=True) the first time "
    "if you need to backward through this graph again."
)


class Context:
    """Scratchpad a :class:`Function` uses to stash values for ``backward()``.

    ``save_for_backward(*tensors)`` keeps tensors and their version numbers; reading
    ``saved_tensors`` after any of them was changed in place raises, because the gradient
    would silently be wrong. Plain attributes (``ctx.dim = 1``) work too.
    """

    # Class-level defaults: most contexts save nothing, and a Context is made for every op.
    _saved: tuple[Any, ...] = ()
    _versions: list[tuple[Any, int] | None] = []
    _freed = False
    _result: Any = None  # what forward returned (it may be among the saved tensors)
    _output: Any = None  # that result as the graph node, while a create_graph backward runs
    _non_differentiable: tuple[Any, ...] = ()
    forward_args: tuple[Any, ...] = ()  # what ``apply`` passed to ``forward``, tensors or not
    #: One flag per ``forward`` argument: whether it is a tensor that requires grad (PyTorch's
    #: name), so ``backward`` can skip a gradient nobody asked for.
    needs_input_grad: tuple[bool, ...] = ()

    def __init__(self, fn_name: str = "Function") -> None:
        self._fn_name = fn_name

    if TYPE_CHECKING:  # Functions stash arbitrary attributes (ctx.dim = 1); tell the type checker

        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` for ``backward()``; they are released once backward has run."""
        self._saved = tensors
        self._versions = []  # each tensor's version counter, with its value now
        for t in tensors:
            counter = getattr(t, "_version", None)  # None: not a tensor
            self._versions.append(None if counter is None else (counter, counter.value))

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """Say that forward's output is not differentiable (an index, a mask, a count): it is
        returned without history and does not require grad, as in PyTorch."""
        self._non_differentiable = (*self._non_differentiable, *tensors)

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to :meth:`save_for_backward`, checked against in-place changes."""
        if self._freed:
            raise RuntimeError(_FREED.format(fn=self._fn_name))
        for i, saved in enumerate(self._versions):
            if saved is not None and saved[0].value != saved[1]:
                counter, v = saved
                t = self._saved[i]
                raise RuntimeError(
                    f"one of the tensors saved for {self._fn_name}.backward (saved tensor {i}, "
                    f"shape {tuple(t.shape)}) was modified by an in-place operation: it was at "
                    f"version {v} when saved and is now at version {counter.value}. The "
                    "gradient would be wrong; use an out-of-place op (x = x + 1, not x.add_(1)) "
                    "or .clone() the tensor before changing it."
                )
        if self._output is not None:  # create_graph: forward's saved result is the graph node
            return tuple(self._output if t is self._result else t for t in self._saved)
        return self._saved

    def release(self) -> None:
        """Drop the saved values (called by the engine after backward).

        A Function that saved no tensor (``Add``, ``Sum``) keeps working: only reading
        ``saved_tensors`` after the release raises.
        """
        if self._saved:
            self._saved = ()
            self._freed = True
            self._result = None


class _UnrecordedContext(Context):
    """The context of an op that no graph will record: saving for backward is pointless."""

    def save_for_backward(self, *tensors: Any) -> None:
        pass


class History:
    """Records which Function built a tensor, with its context and the input tensors.

    ``history.inputs`` are the tensors the Function was applied to (the graph's edges);
    ``parents`` is the docs page's word for the same tuple.
    """

    __slots__ = ("ctx", "input_histories", "inputs", "last_fn")

    def __init__(self, last_fn: type[Function], ctx: Context, inputs: tuple[Any, ...]) -> None:
        self.last_fn = last_fn
        self.ctx = ctx
        self.inputs = inputs
        # Each input's own History now: an in-place op may give an input a new one later.
        self.input_histories = tuple([t.history for t in inputs])

    @property
    def parents(self) -> tuple[Any, ...]:
        return self.inputs

    def recorded_inputs(self) -> list[Any]:
        """The inputs as they were when this node was recorded.

        An in-place op (``y.add_(1)``) gives ``y`` a new History whose first input is ``y``
        as it was before; a node that used ``y`` earlier must send its gradient to that
        earlier ``y``, as in PyTorch. So follow each changed input back to its recorded History.
        """
        recorded = []
        for t, h in zip(self.inputs, self.input_histories, strict=True):
            while t.history is not h:  # t was changed in place after this node used it
                if getattr(self.last_fn, "makes_view", False):
                    raise RuntimeError(
                        f"a view ({self.last_fn.__name__}) was taken of a tensor that was then "
                        f"changed in place by {t.history.last_fn.__name__}: the view's gradient "
                        "would be wrong. Take the view after the in-place change, or change a "
                        ".clone() of the tensor instead."
                    )
                t = t.history.inputs[0]  # the tensor before that in-place op
            recorded.append(t)
        return recorded

    def chain_rule(self, grad_output: Any, output: Any = None) -> list[tuple[Any, Any]]:
        r"""One step of the chain rule: ``(input, dL/dinput)`` for each input that needs it.

        Calls ``last_fn.backward(ctx, grad_output)``, checks it returned one gradient per input,
        and sums broadcast gradients back to each input's shape (``unbroadcast``), so a
        Function only writes math.

        ``output`` is the tensor this History made. When recording is on (``create_graph``), a
        result that forward saved for backward (``Exp`` saves $e^x$) is read as ``output``, so
        the gradient depends on the inputs through it and can be differentiated again.
        """
        fn = self.last_fn
        ctx = self.ctx
        if fn.once_differentiable and _GradMode.enabled:
            return self._once_differentiable_chain_rule(grad_output)
        if ctx._saved and output is not None and _GradMode.enabled:
            ctx._output = output  # (only for this call: the context must not keep its output)
            try:
                grads = fn.backward(ctx, grad_output)
            finally:
                ctx._output = None
        else:
            grads = fn.backward(ctx, grad_output)
        if not isinstance(grads, tuple):
            grads = (grads,)
        inputs = self.recorded_inputs()
        if len(grads) != len(inputs):
            grads = _one_per_tensor(fn, self.ctx, grads, len(inputs))
        pairs = []
        for i, (inp, grad) in enumerate(zip(inputs, grads, strict=True)):
            if grad is None or not inp.requires_grad:
                continue
            grad = _check_gradient(fn, i, inp, grad)
            if grad.shape != inp.shape:  # the input was broadcast: sum the copies' gradients
                grad = unbroadcast(grad, inp.shape)
            if grad.dtype != inp.dtype:
                grad = grad.to(inp.dtype)
            pairs.append((inp, grad))
        return pairs

    def _once_differentiable_chain_rule(self, grad_output: Any) -> list[tuple[Any, Any]]:
        """``create_graph`` through a Function whose backward is not recorded tensor math: the
        first derivatives are right, and differentiating them again raises a clear error."""
        with no_grad():
            pairs = self.chain_rule(grad_output)
        sources = [t for t in (grad_output, *self.inputs) if t.requires_grad]
        return [(inp, _NotTwiceDifferentiable.apply(g, self.last_fn, *sources)) for inp, g in pairs]

    def __repr__(self) -> str:
        return f"History(last_fn={self.last_fn.__name__}, parents={self.inputs!r})"


def _check_gradient(fn: type[Function], i: int, inp: Any, grad: Any) -> Any:
    """``grad`` as a tensor on ``inp``'s backend, of ``inp``'s shape or one it broadcasts to."""
    grad = inp._lift(grad)  # a number or an array becomes a tensor
    if grad.backend is not inp.backend:
        raise RuntimeError(
            f"{fn.__name__}.backward returned input {i}'s gradient on backend "
            f"{grad.backend.name!r}, but the input is on {inp.backend.name!r}"
        )
    if grad.shape != inp.shape and not broadcasts_to(inp.shape, grad.shape):
        raise RuntimeError(
            f"{fn.__name__}.backward returned a gradient of shape {grad.shape} for input {i}, "
            f"which has shape {inp.shape}: the gradient must have the input's shape (or a "
            "shape the input broadcasts to)"
        )
    return grad


def _one_per_tensor(
    fn: type[Function], ctx: Context, grads: tuple[Any, ...], n_tensors: int
) -> tuple[Any, ...]:
    """PyTorch's convention: backward returned one value per ``forward`` argument, ``None``
    for each argument that is not a tensor. Keep the tensors' gradients."""
    args = ctx.forward_args
    if len(grads) != len(args):
        raise RuntimeError(
            f"{fn.__name__}.backward returned {len(grads)} gradient(s), but "
            f"{fn.__name__}.forward took {n_tensors} tensor input(s) ({len(args)} argument(s)): "
            "return one gradient per tensor input, or one value per forward argument, in order "
            "(None for an input that needs none and for each argument that is not a tensor)"
        )
    for i, (arg, grad) in enumerate(zip(args, grads, strict=True)):
        if grad is not None and not hasattr(arg, "requires_grad"):
            raise RuntimeError(
                f"{fn.__name__}.backward returned a gradient for forward's argument {i}, "
                f"which is not a tensor (it is a {type(arg).__name__}): return None for it"
            )
    return tuple(g for arg, g in zip(args, grads, strict=True) if hasattr(arg, "requires_grad"))


class Function:
    r"""A differentiable operation: a ``forward``/``backward`` pair of static methods.

    Subclass it, then call ``YourFunction.apply(*inputs)``. ``forward(ctx, *inputs)`` computes
    the result with grad recording off; ``backward(ctx, grad_output)`` returns
    $\partial L / \partial \text{input}_i = $ ``grad_output`` $\cdot\ \partial f / \partial \text{input}_i$,
    one per tensor input. The engine reduces broadcast gradients to each input's shape.

    Example:
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

    #: True for a Function whose ``backward`` uses unrecorded backend primitives (a fused
    #: kernel): ``create_graph`` still gives its first derivatives, but differentiating them
    #: again raises (PyTorch's ``@once_differentiable``).
    once_differentiable = False

    @staticmethod
    def forward(ctx: Context, *inputs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define forward(ctx, *inputs)")

    @staticmethod
    def backward(ctx: Context, grad_output: Any) -> Any:
        raise NotImplementedError("a Function subclass must define backward(ctx, grad_output)")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` and, if any tensor input requires grad, record a History node."""
        if not _GradMode.enabled:  # inside no_grad, or inside another forward/backward
            return _checked(cls, cls.forward(_UnrecordedContext(cls.__name__), *args, **kwargs))
        tensors, needs = [], []
        for a in args:
            is_tensor = hasattr(a, "requires_grad")
            if is_tensor:  # an input of the graph
                tensors.append(a)
            needs.append(is_tensor and a.requires_grad)
        record = any(needs)
        ctx = Context(cls.__name__) if record else _UnrecordedContext(cls.__name__)
        ctx.forward_args, ctx.needs_input_grad = args, tuple(needs)
        _GradMode.enabled = False  # forward's own ops are not recorded
        try:
            result = _checked(cls, cls.forward(ctx, *args, **kwargs))
        finally:
            _GradMode.enabled = True
        if ctx._non_differentiable:
            _check_marked(cls, ctx._non_differentiable, result)
            return result  # no history: it does not require grad
        if not record:
            return result
        if ctx._saved:  # (a saved result is read as the graph node by create_graph)
            ctx._result = result
        # The graph node: a new tensor on the result's storage, which remembers how it was made.
        return result._with_history(History(cls, ctx, tuple(tensors)))


def _check_marked(cls: type[Function], marked: tuple[Any, ...], result: Any) -> None:
    for t in marked:
        if t is not result:
            raise ValueError(
                f"{cls.__name__}.forward: ctx.mark_non_differentiable got a "
                f"{type(t).__name__} that forward does not return; mark the returned tensor"
            )


def _checked(cls: type[Function], result: Any) -> Any:
    if not hasattr(result, "requires_grad"):
        raise TypeError(f"{cls.__name__}.forward must return a Tensor, got {type(result).__name__}")
    return result


class _NotTwiceDifferentiable(Function):
    """A gradient computed by a ``once_differentiable`` Function: the same values, and a
    backward that says why it cannot be differentiated again."""

    @staticmethod
    def forward(ctx: Context, grad: Any, fn: type[Function], *sources: Any) -> Any:
        ctx.fn_name = fn.__name__
        return grad

    @staticmethod
    def backward(ctx: Context, grad_output: Any) -> Any:
        raise RuntimeError(
            f"double backward through {ctx.fn_name} is not supported: its backward uses "
            "unrecorded backend primitives (it is marked once_differentiable), so its gradient "
            "cannot be differentiated again. Build that part of the model from differentiable "
            "tensor ops, or use create_graph only where second derivatives are needed."
        )
