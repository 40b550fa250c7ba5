r"""Trials no finite-difference gradient can pass: one or two per Function item.

A backward pass estimated by central differences, of any order and with Richardson
extrapolation, evaluates the student's forward at $x + kh$ for steps $h$ (here: any absolute
step from $10^{-5}$ to $10^{-2}$) and divides differences of those values by $h$. At ordinary
inputs that can come within $10^{-12}$ of the true gradient. Each trial below puts at least one
differentiable argument where such an estimate carries no information, while an analytic
gradient is as accurate as anywhere:

- **Invisible steps** (:func:`huge`): $|x| \in [2^{50}, 2^{51})$, where the spacing of doubles
  is $0.25$, so $x + h$ and $x - h$ round back to $x$ for every $h < 0.125$: the estimate is
  exactly 0 (every difference is of equal values), the true gradient is not. For the linear and
  bilinear ops, normalization (scale-invariant) and the LSTM cell's cell state.
- **Overflow** (:func:`exp_edge`): $x$ within $10^{-5}$ below $\ln(\mathrm{DBL\_MAX})$, so
  $e^{x+h} = \infty$ for every $h \ge 10^{-5}$ while $e^x$ is finite.
- **Below one unit in the last place** (:func:`saturated`): $\sigma(x)$ for $x \in [33.1, 34.4]$
  and $\tanh(x)$ for $|x| \in [17.35, 17.95]$ are within a few units of 1, and
  $f(x+h) - f(x-h) = 2hf'(x)$ is less than one unit in the last place: the estimate is a
  multiple of $\mathrm{ulp}/2h \ge 5.5\times10^{-15}$, never within $4\epsilon|G|$ of
  $f'(x)\,G \in [1.1, 4.4]\times10^{-15}|G|$, where an analytic $s(1-s)$ or $1-t^2$ is within
  $1.5\epsilon|G|$. Richardson combinations of such quotients land on the same coarse grid.
- **Large values, small gradients** (:func:`confident_mistake`, :func:`offset_gradient`): the
  loss of a confidently wrong prediction is about 700, so each value the estimate subtracts is
  rounded by up to $\mathrm{ulp}(700)/2 = 5.7\times10^{-14}$, and the quotient by
  $\ge 5.7\times10^{-12}$: a thousand times the analytic gradient's error. For softmax the same
  is done by adding a common $2^{20}$ to the incoming gradient (the vector-Jacobian product is
  unchanged, every value the estimate subtracts is not).
- **A tiny query** (:func:`tiny_queries`): queries of size $2^{-50}$ against keys and values of
  size $2^{50}$ give ordinary attention scores; a step of $h$ in a query moves a score by
  $2^{50}h$; a step in a key or value is invisible.

What these trials cannot stop, and ``assignments/README.md`` says: a step that grows with
$|x|$ (relative steps), complex-step or automatic differentiation written by the student (which
is analytic), or an answer that calls the library's own Function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from torchlight_grader.checks.check import Case

Sampler = Callable[[np.random.Generator, int], Case]

HUGE = 2.0**50
"""Magnitudes in ``[HUGE, 2 * HUGE)`` have ulp 0.25: any step below 0.125 rounds away."""

EPS = float(np.finfo(np.float64).eps)
LOG_MAX = float(np.log(np.finfo(np.float64).max))

INVISIBLE = "x + h and x - h round back to x for every step h up to 1e-2"
OVERFLOW = "exp(x + h) overflows for every step h from 1e-5"
BELOW_ULP = "f(x + h) - f(x - h) is below one unit in the last place of f"
ROUNDING = "every value a difference quotient subtracts is rounded by more than the gradient"


def huge_like(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    """Random values with ``a``'s shape and signs (a logarithm's input stays positive) and
    magnitudes in ``[2**50, 2**51)``."""
    return np.where(a < 0, -HUGE, HUGE) * rng.uniform(1.0, 2.0, size=a.shape)


def below_overflow(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values within 1e-5 below ``ln(DBL_MAX)``: ``exp`` is finite there, at ``x + 1e-5`` not."""
    return LOG_MAX - rng.uniform(1e-6, 9e-6, size=shape)


def mark(case: Case, why: str, atol: dict | None = None) -> Case:
    """``case`` flagged as an anti-finite-difference trial (the flag stays in the grader)."""
    hidden = {**case.hidden, "adversarial": why}
    if atol is not None:
        hidden["atol"] = atol
    return replace(case, hidden=hidden)


def huge(sample: Sampler, args: Sequence[int] | None = None) -> Sampler:
    """``sample``'s trial with the differentiable arguments (or ``args``) made huge, signs kept."""

    def adversarial(rng: np.random.Generator, trial: int) -> Case:
        case = sample(rng, trial)
        values = list(case.args)
        for i in case.differentiable if args is None else args:
            values[i] = huge_like(rng, values[i])
        return mark(replace(case, args=values), INVISIBLE)

    return adversarial


def exp_edge(rng: np.random.Generator, trial: int) -> Case:
    """Inputs just below the overflow threshold of ``exp``; ``|G| <= 1`` keeps ``G e^x`` finite."""
    x = below_overflow(rng, (4, 6))
    return mark(Case([x], rng.uniform(-1, 1, size=x.shape), (0,), ("x",)), OVERFLOW)


def saturated(low: float, high: float, signed: bool) -> Sampler:
    """``|x|`` in ``[low, high]``, where the function is within a few ulp of +-1; per-entry
    tolerance ``4 eps |G|`` (an analytic gradient is within ``1.5 eps |G|``)."""

    def adversarial(rng: np.random.Generator, trial: int) -> Case:
        shape = (8, 8)
        x = rng.uniform(low, high, size=shape)
        if signed:
            x = x * rng.choice([-1.0, 1.0], size=shape)
        g = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        return mark(Case([x], g, (0,), ("x",)), BELOW_ULP, {0: 4 * EPS * np.abs(g)})

    return adversarial


def pow_edge(rng: np.random.Generator, trial: int) -> Case:
    """``a = 1 + O(2**-50)``, ``|b|`` in ``[2**50, 2**51)``: ``a**b`` is ordinary, a step in ``b``
    is invisible and a step in ``a`` overflows or underflows ``a**b``."""
    shape = (4, 5)
    a = 1.0 + rng.uniform(1.0, 8.0, size=shape) * 2.0**-50
    b = huge_like(rng, rng.uniform(-1, 1, size=shape))
    return mark(Case([a, b], rng.standard_normal(shape), (0, 1), ("a", "b")), INVISIBLE)


def expression_edges(c: float = 1.0) -> Sampler:
    r"""Two kinds of trial for $\log(e^x + e^y)\,\sigma(cxy)$ built from the student's Functions
    (``c``: the student's variant, a1's section 5).

    Trial 0: $x$ just below exp's overflow, $cy \in [0.005, 0.02]$: a numerical Exp overflows, a
    numerical Log sees $e^x \pm h = e^x$. Trial 1: $x \approx 1$, $cxy \in [33.1, 34.4]$: a
    numerical Sigmoid is below one ulp (tolerance on $x$'s gradient
    $4\epsilon|G|(1 + |\mathrm{lse}\cdot cy|)$), and $e^y \pm h = e^y$ for a numerical Log.
    """

    def sample(rng: np.random.Generator, trial: int) -> Case:
        shape = (8, 8)
        g = rng.uniform(0.5, 1.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
        if trial % 2 == 0:
            x = below_overflow(rng, shape)
            y = rng.uniform(0.005, 0.02, size=shape) / c  # cxy in [3.5, 14]: sigma not saturated
            return mark(Case([x, y], g, (0, 1), ("x", "y")), OVERFLOW)
        x = rng.uniform(0.9, 1.1, size=shape)
        y = rng.uniform(33.1, 34.4, size=shape) / (c * x)
        lse = np.logaddexp(x, y)
        atol = {0: 4 * EPS * np.abs(g) * (1 + np.abs(lse * c * y)), 1: None}
        return mark(Case([x, y], g, (0, 1), ("x", "y")), BELOW_ULP, atol)

    return sample


def offset_gradient(sample: Sampler, offset: float = 2.0**20) -> Sampler:
    r"""Softmax: $G + c$ has the same vector-Jacobian product as $G$, but every
    $\langle G + c, \mathrm{softmax}(x \pm h e_j)\rangle$ is about $c$; tolerance
    $2\epsilon c (n + 2)\, s_j$ per entry (the analytic $s \odot (G - \langle G, s\rangle)$
    rounds $\langle G, s\rangle$ by at most $\epsilon c (n + 1)$)."""

    def adversarial(rng: np.random.Generator, trial: int) -> Case:
        case = sample(rng, trial)
        (x,) = case.args
        e = np.exp(x - x.max(-1, keepdims=True))
        s = e / e.sum(-1, keepdims=True)
        atol = {0: 2 * EPS * offset * (x.shape[-1] + 2) * s}
        assert case.grad_output is not None, "sample() always gives a grad_output"
        return mark(replace(case, grad_output=case.grad_output + offset), ROUNDING, atol)

    return adversarial


def confident_mistake(rng: np.random.Generator, trial: int) -> Case:
    """Cross-entropy with every target's logit at -700: the loss is about 700 (ulp 1.1e-13), its
    gradient ordinary; tolerance ``16 eps |G| / N`` (the analytic ``(p - y) G / N`` is within a
    few eps)."""
    n, classes = 6, 5
    z = rng.uniform(-3, 3, size=(n, classes))
    targets = rng.integers(0, classes, size=n)
    z[np.arange(n), targets] = -700.0 + rng.uniform(-1, 1, size=n)
    g = rng.uniform(0.5, 2.0) * rng.choice([-1.0, 1.0])
    atol = {0: np.full(z.shape, 16 * EPS * abs(g) / n)}
    return mark(Case([z, targets], np.array(g), (0,), ("logits", "targets")), ROUNDING, atol)


def tiny_queries(sample: Sampler) -> Sampler:
    """Attention with queries scaled by ``2**-50`` and keys by ``2**50`` (the same scores, exactly),
    keys of magnitude at least ``2**50`` and huge values."""

    def adversarial(rng: np.random.Generator, trial: int) -> Case:
        case = sample(rng, trial)
        q, k, v, *rest = case.args
        args = [q / HUGE, huge_like(rng, k), huge_like(rng, v), *rest]
        return mark(replace(case, args=args), INVISIBLE)

    return adversarial
