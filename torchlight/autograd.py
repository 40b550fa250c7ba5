r"""Reverse-mode automatic differentiation over a dynamic graph.

Every tensor made by a :class:`Function` carries a :class:`History`: which Function made it, the
:class:`Context` that Function stashed values in, and the input tensors. ``backward()`` orders
that graph with :func:`topological_sort` and walks it from the root to the leaves
(:func:`backpropagate`), applying the chain rule at each node:

$$\frac{\partial L}{\partial x_i} = \sum_{\text{uses of } x_i}
  \frac{\partial L}{\partial f} \cdot \frac{\partial f}{\partial x_i}$$

:func:`grad` returns gradients instead of accumulating them into ``.grad``. The backward
formulas are tensor math, so with ``create_graph=True`` the engine records them like any other
ops, and the gradients can be differentiated again (higher-order gradients, checked by
:func:`gradgradcheck`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from torchlight.shape import broadcasts_to, unbroadcast

__all__ = [
    "Context",
    "Function",
    "GradcheckError",
    "History",
    "Variable",
    "backpropagate",
    "backward_steps",
    "central_difference",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "is_grad_enabled",
    "no_grad",
    "topological_sort",
]

F = TypeVar("F", bound=Callable[..., Any])


# --------------------------------------------------------------------------- grad mode
class _GradModeOfThisThread(threading.local):
    """Whether recording is on, for each thread on its own (as in PyTorch): a ``no_grad()``
    in one thread must not turn recording off in another."""

    enabled = True  # what a new thread starts with


_GradMode = _GradModeOfThisThread()


def is_grad_enabled() -> bool:
    """Whether new operations are being recorded in the graph."""
    return _GradMode.enabled


class no_grad:  # noqa: N801 - named as PyTorch names it
    """Context manager (and decorator) that stops recording operations in the graph.

    Example:
        >>> import torchlight as tl
        >>> w = tl.ones(2, requires_grad=True)
        >>> with tl.no_grad():
        ...     w.sub_(0.5)  # an optimizer step: in place, not recorded
        tensor([0.5000, 0.5000], requires_grad=True)
    """

    _value = False

    def __enter__(self) -> None:
        self._previous = _GradMode.enabled
        _GradMode.enabled = self._value

    def __exit__(self, *exc: object) -> None:
        _GradMode.enabled = self._previous

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class enable_grad(no_grad):  # noqa: N801
    """Turn recording back on inside a :class:`no_grad` block."""

    _value = True


# --------------------------------------------------------------------------- graph nodes
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


# --------------------------------------------------------------------------- the engine
def topological_sort(root: Variable, *more_roots: Variable) -> list[Variable]:
    """All tensors that lead to ``root`` (and ``more_roots``) and require grad, ordered from the
    leaves to the roots.

    Depth-first search, iterative (a deep graph must not hit Python's recursion limit): the
    stack holds each node being visited with an iterator over its inputs, and a node joins the
    order once every input that requires grad already has. A leaf joins as soon as it is met.
    """
    order: list[Variable] = []
    seen: set[int] = set()
    for start in (root, *more_roots):
        if not start.requires_grad or id(start) in seen:
            continue
        seen.add(id(start))
        if start.history is None:
            order.append(start)
            continue
        stack: list[tuple[Variable, Iterator[Variable]]] = [
            (start, iter(start.history.recorded_inputs()))
        ]
        while stack:
            node, inputs = stack[-1]
            for parent in inputs:
                if parent.requires_grad and id(parent) not in seen:
                    seen.add(id(parent))
                    if parent.history is None:
                        order.append(parent)  # a leaf: nothing comes before it
                    else:
                        stack.append((parent, iter(parent.history.recorded_inputs())))
                        break  # visit parent's inputs first; node's iterator resumes afterwards
            else:  # all of node's inputs are in the order
                stack.pop()
                order.append(node)
    return order


def backward_steps(
    root: Variable, grad: Any, more: Sequence[tuple[Variable, Any]] = ()
) -> Iterator[tuple[Any, Any, list[tuple[Any, Any]]]]:
    """Walk the graph from ``root`` (whose gradient is ``grad``) back to the leaves, yielding
    ``(node, grad, sends)`` for each node: its complete gradient, and the ``(input, share)``
    pairs its chain rule passes on (none for a leaf, where the gradient stops). ``more`` adds
    further ``(root, grad)`` pairs (``autograd.grad`` of several outputs).

    In reverse topological order a node's gradient is complete when its turn comes: every node
    that uses it came earlier and has already sent its share. So one pass suffices: take the
    node's summed gradient, apply its chain rule, and add each share to its input's gradient.
    This is the one backward loop: ``backpropagate`` and the graph viewer's replay consume it.
    With recording on (``create_graph``) its sums and chain rules are recorded too.
    """
    grads: dict[int, Any] = {id(root): grad}  # summed so far, by node
    for other, other_grad in more:
        key = id(other)
        grads[key] = grads[key] + other_grad if key in grads else other_grad
    for node in reversed(topological_sort(root, *[other for other, _ in more])):
        grad = grads.pop(id(node), None)
        if grad is None:  # no gradient reaches it (a backward returned None for it)
            continue
        for hook in node._hooks:  # Tensor.register_hook: may replace the gradient
            changed = hook(grad)
            grad = grad if changed is None else node._lift(changed)
        sends = [] if node.history is None else node.history.chain_rule(grad, node)
        yield node, grad, sends
        for parent, share in sends:
            key = id(parent)
            grads[key] = grads[key] + share if key in grads else share


def backpropagate(
    root: Variable, deriv: Any, retain_graph: bool = False, create_graph: bool = False
) -> None:
    """Compute the gradients from ``root`` back: leaves accumulate them into ``.grad``.

    Saved values are released as each node is done, unless ``retain_graph``. With
    ``create_graph`` the backward formulas are recorded (they are tensor math), so the
    gradients have a history of their own and can be differentiated again.
    """
    with enable_grad() if create_graph else no_grad():  # backward's ops recorded or not
        for node, grad, _ in backward_steps(root, deriv):
            if node.history is None or node._retains_grad:
                node._accumulate_grad(grad)
            if node.history is not None and not retain_graph:
                node.history.ctx.release()


def _as_tuple(value: Any, what: str) -> tuple[Any, ...]:
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for i, t in enumerate(items):
        if t is not None and not hasattr(t, "requires_grad"):
            raise TypeError(
                f"autograd.grad: {what} must be tensors (or a list/tuple of them), "
                f"got a {type(t).__name__} at position {i}"
            )
    return items


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[Any, ...]:
    r"""The gradients $\sum_k v_k \cdot \partial\,\mathrm{outputs}_k / \partial\,\mathrm{inputs}_i$,
    returned as a tuple (one per input) instead of accumulated into ``.grad`` (PyTorch's
    ``torch.autograd.grad``).

    Args:
        outputs: a tensor, or a list/tuple of tensors, to differentiate.
        inputs: a tensor, or a list/tuple of tensors (leaves or not), to differentiate by.
        grad_outputs: $v_k$, one per output (``None`` entries, or ``None`` for all: ones of
            the output's shape, as ``backward()`` seeds them).
        retain_graph: keep the saved values for another backward; defaults to ``create_graph``.
        create_graph: record the backward formulas, so the returned gradients can be
            differentiated again (second derivatives, Hessian-vector products).
        allow_unused: return ``None`` for an input the outputs do not depend on, instead of
            raising.

    Returns:
        One gradient per input, of the input's shape (``None`` for an unused input).

    Example:
        >>> import torchlight as tl
        >>> x = tl.tensor([1.0, 2.0], requires_grad=True)
        >>> (g,) = tl.autograd.grad((x**3).sum(), x, create_graph=True); g
        tensor([ 3., 12.], grad_fn=<Mul>)
        >>> tl.autograd.grad(g.sum(), x)  # d2/dx2 x**3 = 6x
        (tensor([ 6., 12.]),)
    """
    outs = _as_tuple(outputs, "outputs")
    ins = _as_tuple(inputs, "inputs")
    if not outs or not ins:
        raise ValueError("autograd.grad: outputs and inputs must each hold at least one tensor")
    if grad_outputs is None:
        seeds: tuple[Any, ...] = (None,) * len(outs)
    else:
        seeds = tuple(grad_outputs) if isinstance(grad_outputs, (list, tuple)) else (grad_outputs,)
    if len(seeds) != len(outs):
        raise ValueError(
            f"autograd.grad: got {len(seeds)} grad_outputs for {len(outs)} outputs; "
            "give one per output (None for ones)"
        )
    for i, t in enumerate(ins):
        if t is None or not t.requires_grad:
            raise RuntimeError(
                f"autograd.grad: input {i} does not require grad, so no gradient is computed "
                "for it; create it with requires_grad=True"
            )
    roots = []
    for k, (out, seed) in enumerate(zip(outs, seeds, strict=True)):
        if out is None or not out.requires_grad:
            raise RuntimeError(
                f"autograd.grad: output {k} does not require grad and has no history: it does "
                "not depend on any tensor with requires_grad=True"
            )
        roots.append((out, _seed(out, seed, f"grad_outputs[{k}]")))
    keep = create_graph if retain_graph is None else retain_graph
    wanted: dict[int, list[int]] = {}  # input positions by tensor (one may be asked twice)
    for i, t in enumerate(ins):
        wanted.setdefault(id(t), []).append(i)
    found: list[Any] = [None] * len(ins)
    with enable_grad() if create_graph else no_grad():
        (root, first), *more = roots
        for node, g, _ in backward_steps(root, first, more):
            for i in wanted.get(id(node), ()):
                found[i] = g
            if node.history is not None and not keep:
                node.history.ctx.release()
    for i, g in enumerate(found):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"autograd.grad: input {i} (shape {tuple(ins[i].shape)}) was not used to compute "
                "the outputs, so it has no gradient; pass allow_unused=True to get None for it"
            )
    return tuple(found)


def _seed(out: Any, seed: Any, what: str) -> Any:
    """The gradient a backward starts from: ``seed`` as a tensor of ``out``'s shape, or ones."""
    if seed is None:
        return out._lift(1.0).expand(out.shape).detach().contiguous()
    seed = out._lift(seed)
    if seed.shape != out.shape:
        raise ValueError(
            f"{what} has shape {tuple(seed.shape)} but the output has shape {tuple(out.shape)}; "
            "they must match"
        )
    return seed


# --------------------------------------------------------------------------- checking
def central_difference(
    f: Callable[..., Any], *vals: float, arg: int = 0, epsilon: float = 1e-6
) -> float:
    r"""Estimate $\partial f / \partial \mathrm{vals}_{arg}$ by a central difference.

    $$\frac{f(\ldots, x + \epsilon, \ldots) - f(\ldots, x - \epsilon, \ldots)}{2\epsilon}$$

    The error is $O(\epsilon^2)$ from truncation plus $O(\text{machine eps}/\epsilon)$ from rounding.

    Example:
        >>> from torchlight.autograd import central_difference
        >>> round(central_difference(lambda x, y: x * y, 3.0, 4.0, arg=0), 6)
        4.0
    """
    if not 0 <= arg < len(vals):
        raise IndexError(f"arg={arg} but f was given {len(vals)} value(s)")
    up = [float(v) for v in vals]
    down = list(up)
    up[arg] += epsilon
    down[arg] -= epsilon
    return (float(f(*up)) - float(f(*down))) / (2.0 * epsilon)


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` when backward disagrees with central differences."""


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    r"""Compare the full Jacobian from backward with central differences, entry by entry.

    For every output element $k$ and every element $j$ of every input that requires grad,
    checks $|J^{\text{backward}}_{kj} - J^{\text{numerical}}_{kj}| \le$ atol + rtol $\cdot |J^{\text{numerical}}_{kj}|$.
    Inputs must be float64: float32 rounding swamps a central difference.

    Raises:
        GradcheckError: naming the output, the input, the index, and both values.
    """
    from torchlight.checking import jacobian_mismatch

    report = jacobian_mismatch(fn, inputs, eps=eps, atol=atol, rtol=rtol)
    if report and raise_exception:
        raise GradcheckError(report)
    return not report


def gradgradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    grad_outputs: Any = None,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    r"""Check second derivatives: :func:`gradcheck` of the first derivative's backward.

    The first derivative is $g(x, v) = v^T \partial\,\mathrm{fn}(x) / \partial x$, computed by
    ``grad(..., create_graph=True)``; its own backward (the double backward) is compared with
    central differences of $g$. ``grad_outputs`` is $v$ (random float64, fixed seed, when
    omitted). Inputs must be float64.

    Example:
        >>> import torchlight as tl
        >>> x = tl.tensor([0.5, -1.0], dtype=tl.float64, requires_grad=True)
        >>> tl.autograd.gradgradcheck(lambda t: t.tanh() * t, x)
        True

    Raises:
        GradcheckError: naming the entry of the first derivative's Jacobian that differs.
    """
    import numpy as np

    from torchlight.creation import cat

    checked = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    if not checked:
        raise ValueError(
            "gradgradcheck: no input requires grad; pass tensors made with requires_grad=True"
        )
    with no_grad():
        out = fn(*inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = out._lift(rng.standard_normal(out.shape)).requires_grad_()
    n = len(inputs)

    def first_derivative(*args: Any) -> Any:
        xs, v = list(args[:n]), args[n]
        for i in checked:  # (central differences pass plain tensors: make them leaves again)
            if not xs[i].requires_grad:
                xs[i] = xs[i].detach().requires_grad_()
        y = fn(*xs)
        if not y.requires_grad:
            raise GradcheckError("gradgradcheck: the function's output does not require grad")
        grads = grad(y, [xs[i] for i in checked], v, create_graph=True, allow_unused=True)
        flat = [
            (g if g is not None else xs[i]._lift(0.0).expand(xs[i].shape)).reshape(-1)
            for i, g in zip(checked, grads, strict=True)
        ]
        return cat(flat)

    first_derivative.__qualname__ = f"first derivative of {getattr(fn, '__qualname__', fn)}"
    return gradcheck(
        first_derivative,
        *inputs,
        grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )
