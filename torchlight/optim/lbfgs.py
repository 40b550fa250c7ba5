r"""L-BFGS, PyTorch's algorithm (``torch.optim.LBFGS``), without the strong-Wolfe line search.

A quasi-Newton method: it keeps the last ``history_size`` pairs of parameter steps $s$ and
gradient changes $y$ and turns the gradient into a step direction with the two-loop recursion
(an approximation of $H^{-1}\nabla L$), then moves ``lr`` along it. It needs the loss several
times per ``step``, so ``step(closure)`` takes a closure that zeroes the gradients, computes the
loss, calls ``backward()`` and returns the loss. All parameters are treated as one flat vector
(on the host, in float64).

Example:
    >>> import torchlight as tl
    >>> from torchlight import nn, optim
    >>> w = nn.Parameter(tl.tensor([3.0, -1.0]))
    >>> opt = optim.LBFGS([w])
    >>> def closure():
    ...     opt.zero_grad(); loss = ((w - 1.0) ** 2).sum(); loss.backward(); return loss
    >>> _ = opt.step(closure); [round(v, 6) for v in w.tolist()]
    [1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from torchlight.autograd import enable_grad, no_grad
from torchlight.creation import tensor
from torchlight.optim.optimizer import Optimizer
from torchlight.tensor import Tensor

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's settings and stopping rules (one parameter group).

    Args:
        lr: the step length along each direction (default 1).
        max_iter: iterations per ``step``.
        max_eval: closure calls per ``step`` (default ``max_iter * 1.25``).
        tolerance_grad: stop when the largest gradient entry is at most this.
        tolerance_change: stop when the loss or the step changes less than this.
        history_size: how many $(s, y)$ pairs to keep.
        line_search_fn: ``None`` (fixed steps); ``"strong_wolfe"`` is not implemented and raises.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if line_search_fn is not None:
            raise NotImplementedError(
                f"LBFGS(line_search_fn={line_search_fn!r}): torchlight's L-BFGS has no line search "
                "yet; use line_search_fn=None (fixed steps of lr, PyTorch's default)"
            )
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr, "max_iter": max_iter, "max_eval": max_eval, "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change, "history_size": history_size,
            "line_search_fn": line_search_fn,
        }  # fmt: skip
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params: list[Tensor] = self.param_groups[0]["params"]

    def _flat_grad(self) -> np.ndarray:
        parts = [
            np.zeros(p.numel()) if p.grad is None else p.grad.numpy().astype(np.float64).reshape(-1)
            for p in self._params
        ]
        return np.concatenate(parts)

    def _add(self, t: float, direction: np.ndarray) -> None:
        offset = 0
        with no_grad():
            for p in self._params:
                n = p.numel()
                chunk = direction[offset : offset + n].reshape(p.shape) * t
                p.add_(tensor(chunk, dtype=p.dtype, backend=p.backend))
                offset += n

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Up to ``max_iter`` L-BFGS iterations; returns the loss the first closure call gave."""
        if closure is None:
            raise RuntimeError(
                "LBFGS.step needs a closure that recomputes the loss (step(closure))"
            )
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss

        d: Any = state.get("d")
        t: Any = state.get("t")
        old_dirs: Any = state.get("old_dirs")
        old_stps: Any = state.get("old_stps")
        ro: Any = state.get("ro")
        h_diag: Any = state.get("H_diag")
        prev_flat_grad: Any = state.get("prev_flat_grad")
        prev_loss: Any = state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y @ s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y), old_stps.append(s), ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i] @ q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i] @ r) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r
            prev_flat_grad, prev_loss = flat_grad.copy(), loss
            t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            self._add(t, d)
            if n_iter != max_iter:
                with enable_grad():
                    loss = float(closure())
                flat_grad = self._flat_grad()
                ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval:
                break
            if np.abs(flat_grad).max() <= tolerance_grad:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break
        state.update(
            d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
            prev_flat_grad=prev_flat_grad, prev_loss=prev_loss,
        )  # fmt: skip
        return orig_loss
