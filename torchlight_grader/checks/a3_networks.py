r"""Hidden checks for assignment 3, *Neural networks*.

A Linear Function and layer, softmax cross-entropy (stable for logits in the hundreds), one
SGD-with-momentum step (its dampening drawn per student: a variant, ``variants.py``) and one Adam
step (PyTorch's update rules), and two classifiers trained
by the student's own code: on a 2-D toy set and on the 8x8 digits. For the classifiers the
sandbox never sees the test labels: the grader scores the predictions itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight_grader.checks import adversarial as against
from torchlight_grader.checks.check import Case
from torchlight_grader.checks.kinds import FunctionCheck, TrainingCheck, ValueCheck
from torchlight_grader.checks.variants import VariantCheck

LINEAR_SHAPES = [(5, 3, 4), (2, 6, 3), (7, 2, 5)]  # (batch, in_features, out_features)


def linear_case(rng: np.random.Generator, trial: int) -> Case:
    n, fan_in, fan_out = LINEAR_SHAPES[trial % len(LINEAR_SHAPES)]
    x = rng.uniform(-2, 2, size=(n, fan_in))
    w, b = rng.uniform(-1, 1, size=(fan_out, fan_in)), rng.uniform(-1, 1, size=fan_out)
    return Case([x, w, b], rng.standard_normal((n, fan_out)), (0, 1, 2), ("x", "weight", "bias"))


def linear_vjp(
    g: np.ndarray, x: np.ndarray, w: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, ...]:
    return g @ w, g.T @ x, g.sum(axis=0)


@dataclass
class LayerCheck(FunctionCheck):
    """Builds the student's ``Linear(in_features, out_features)`` module, loads the trial's
    weight and bias into its parameters, and checks the output and every gradient."""

    def spec(self) -> dict[str, Any]:
        return {"runner": "layer", "entry": self.entry}


def log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def cross_entropy(z: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return -log_softmax(z)[np.arange(len(targets)), targets].mean()


def cross_entropy_vjp(g: np.ndarray, z: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, None]:
    probs = np.exp(log_softmax(z))
    probs[np.arange(len(targets)), targets] -= 1.0
    return g * probs / len(targets), None


def cross_entropy_case(rng: np.random.Generator, trial: int) -> Case:
    n, classes, offset = [(6, 4, 0.0), (3, 7, 0.0), (5, 3, 800.0)][trial % 3]
    z = rng.uniform(-3, 3, size=(n, classes)) + offset * rng.choice([-1.0, 1.0])
    targets = rng.integers(0, classes, size=n)
    return Case([z, targets], rng.standard_normal(()), (0,), ("logits", "targets"))


#: Section 4's variants: SGD's dampening $\tau$ in $v \leftarrow \mu v + (1 - \tau) g$, drawn per
#: student (variants.py).
SGD_DAMPENING = (0.1, 0.2, 0.3, 0.5)


def sgd_step(dampening: float) -> Any:
    """The reference SGD step of one variant."""

    def step(p: Any, g: Any, velocity: Any, lr: float, momentum: float, weight_decay: float) -> Any:
        g = g + weight_decay * p
        velocity = momentum * velocity + (1 - dampening) * g
        return p - lr * velocity, velocity

    return step


def sgd_check(dampening: float) -> ValueCheck:
    """The check of one variant of section 4's SGD step."""
    return ValueCheck(
        "sgd_step",
        ("sgd_step",),
        sgd_case,
        reference=sgd_step(dampening),
        what=f"sgd_step with your dampening = {dampening:g}",
    )


def sgd_case(rng: np.random.Generator, trial: int) -> Case:
    shape = [(3, 4), (5,), (2, 3, 2)][trial % 3]
    lr, momentum, decay = [(0.1, 0.9, 0.0), (0.05, 0.0, 0.01), (0.01, 0.5, 0.1)][trial % 3]
    arrays = [rng.standard_normal(shape) for _ in range(3)]
    return Case(
        [*arrays, lr, momentum, decay],
        names=("param", "grad", "velocity", "lr", "momentum", "weight_decay"),
    )


def adam_step(p: Any, g: Any, m: Any, v: Any, t: int, lr: float, betas: tuple, eps: float) -> Any:
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


def adam_case(rng: np.random.Generator, trial: int) -> Case:
    shape = [(3, 4), (6,), (2, 2, 3)][trial % 3]
    t, lr = [(1, 1e-3), (5, 0.01), (100, 0.1)][trial % 3]
    p, g, m = (rng.standard_normal(shape) for _ in range(3))
    v = rng.uniform(0.0, 1.0, size=shape)  # a second moment is never negative
    return Case(
        [p, g, m, v, t, lr, (0.9, 0.999), 1e-8],
        names=("param", "grad", "m", "v", "t", "lr", "betas", "eps"),
    )


def two_circles(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Points on two noisy concentric rings (radius 1 and 2): not linearly separable."""
    labels = rng.integers(0, 2, size=n)
    angle = rng.uniform(0, 2 * np.pi, size=n)
    radius = 1.0 + labels + rng.normal(0, 0.15, size=n)
    points = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return points, labels


def toy_case(rng: np.random.Generator, trial: int) -> Case:
    x_train, y_train = two_circles(rng, 400)
    x_test, y_test = two_circles(rng, 200)
    return Case(
        [x_train, y_train, x_test, 2],
        names=("X_train", "y_train", "X_test", "num_classes"),
        hidden={"y_test": y_test},
    )


def digits_case(rng: np.random.Generator, trial: int) -> Case:
    from torchlight.data import load_digits

    pixels, labels = load_digits()
    order = rng.permutation(len(labels))
    test, train = order[:360], order[360:]
    return Case(
        [pixels[train] / 16.0, labels[train], pixels[test] / 16.0, 10],
        names=("X_train", "y_train", "X_test", "num_classes"),
        hidden={"y_test": labels[test]},
    )


CHECKS = {
    "test_linear_function": FunctionCheck(
        "LinearFunction",
        ("linear_function",),
        linear_case,
        forward_ref=lambda x, w, b: x @ w.T + b,
        vjp_ref=linear_vjp,
        what="LinearFunction forward and backward",
    ),
    "test_linear_layer": LayerCheck(
        "Linear",
        ("linear_function", "linear_layer"),
        linear_case,
        forward_ref=lambda x, w, b: x @ w.T + b,
        vjp_ref=linear_vjp,
        call="graph",
        what="the Linear layer (output and the gradients of x, weight and bias)",
    ),
    "test_cross_entropy": FunctionCheck(
        "SoftmaxCrossEntropy",
        ("cross_entropy",),
        cross_entropy_case,
        forward_ref=cross_entropy,
        vjp_ref=cross_entropy_vjp,
        what="SoftmaxCrossEntropy forward and backward (including logits near +-800)",
        adversarial=against.confident_mistake,
    ),
    "test_sgd_step": VariantCheck("a3_networks", "sgd_step", SGD_DAMPENING, sgd_check),
    "test_adam_step": ValueCheck(
        "adam_step", ("adam_step",), adam_case, reference=adam_step, what="adam_step"
    ),
    "test_train_toy": TrainingCheck(
        "train_classifier",
        ("linear_function", "linear_layer", "cross_entropy", "adam_step", "classifier"),
        toy_case,
        trials=1,
        timeout=120.0,
        threshold=0.9,
        dataset="two held-out noisy circles",
        what="your classifier on two circles",
    ),
    "test_train_digits": TrainingCheck(
        "train_classifier",
        ("linear_function", "linear_layer", "cross_entropy", "adam_step", "classifier"),
        digits_case,
        trials=1,
        timeout=120.0,
        threshold=0.9,
        dataset="360 held-out digits",
        what="your classifier on the 8x8 digits",
    ),
}
