r"""The kinds of hidden check: a Function's forward/backward, a graph of Functions, a plain value.

Each ``run`` executes in the sandbox and returns raw outputs only; each ``expected``/``judge``
runs in the grader. Messages name the input, the index, the expected and the received value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchlight_grader.checks.adversarial import huge
from torchlight_grader.checks.check import (
    LOOSE,
    Case,
    Check,
    GraderError,
    central_vjp,
    mismatch,
)

Forward = Callable[..., np.ndarray]
VJP = Callable[..., tuple[np.ndarray | None, ...]]


@dataclass
class FunctionCheck(Check):
    r"""Checks a student's ``Function`` subclass (``call="function"``: ``forward``/``backward``
    called directly, so the raw gradients are seen before the engine could fix them up), or a
    plain function built from Functions (``call="graph"``: run through ``.backward()``).

    ``forward_ref(*args)`` is the reference output, ``vjp_ref(G, *args)`` the reference
    $G^\top J$ for each differentiable argument, in order.
    """

    forward_ref: Forward | None = None
    vjp_ref: VJP | None = None
    call: str = "function"

    def __post_init__(self) -> None:
        # Most items are linear, or scale-free, in at least one argument: huge inputs make every
        # finite-difference step there invisible. Items that saturate name their own trials.
        if self.adversarial is None:
            self.adversarial = huge(self.sample)

    def spec(self) -> dict[str, Any]:
        return {"runner": self.call, "entry": self.entry}

    # -- grader -------------------------------------------------------------------------
    def expected(self, case: Case) -> dict[str, Any]:
        assert self.forward_ref is not None and self.vjp_ref is not None, "incomplete check"
        forward = np.asarray(self.forward_ref(*case.args), dtype=np.float64)
        grads = list(self.vjp_ref(case.grad_output, *case.args))
        central: dict[int, np.ndarray] = {}
        if "adversarial" in case.hidden:  # central differences fail there by design
            return {"forward": forward, "grads": grads, "central": central}
        for k, i in enumerate(case.differentiable):
            central[i] = central_vjp(self.forward_ref, case, i)
            if mismatch(central[i], grads[k], atol=LOOSE, rtol=LOOSE) is not None:
                raise GraderError(
                    f"reference gradient of {self.entry} for {case.names[i]} disagrees with "
                    f"central differences on {case.describe()}"
                )
        return {"forward": forward, "grads": grads, "central": central}

    def _slots(self, case: Case) -> list[int]:
        """Which argument each returned gradient belongs to."""
        return list(case.differentiable) if self.call == "graph" else case.tensor_args

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        name, trial = self.entry, f"on inputs ({case.describe()})"
        fwd = received.get("forward")
        if received.get("forward_type") != "Tensor":
            how = "return" if self.call == "graph" else f"{name}.forward must return"
            return f"{how} a Tensor, got {received.get('forward_type')} {trial}"
        why = case.hidden.get("adversarial")
        problem = self.compare(
            f"the output of {name}",
            expected["forward"],
            fwd,
            trial,
            atol=self.tolerance(case, "forward", expected["forward"]),
        )
        if problem:
            return problem
        slots = self._slots(case)
        grads = received.get("grads") or []
        if self.call == "function" and len(grads) != len(slots):
            names = ", ".join(case.names[i] for i in slots)
            return (
                f"{name}.backward returned {len(grads)} gradient(s), but forward takes "
                f"{len(slots)} tensor input(s) ({names}): return one gradient per tensor input, "
                "in the order forward receives them"
            )
        for k, i in enumerate(slots):
            if i not in case.differentiable:
                continue
            what = (
                f"{case.names[i]}.grad"
                if self.call == "graph"
                else f"the gradient {name}.backward returned for input {case.names[i]}"
            )
            got = grads[k] if k < len(grads) else None
            if got is None:
                hint = " (did the output depend on it through your Functions?)"
                return f"{what} is None{hint if self.call == 'graph' else ''} {trial}"
            kind = received["grad_types"][k] if k < len(received.get("grad_types", [])) else "?"
            if kind != "Tensor" and not isinstance(got, np.ndarray):
                return f"{what} must be a Tensor, got {kind} {trial}"
            exp = expected["grads"][k]
            problem = self.compare(
                what,
                exp,
                got,
                trial,
                central=expected["central"].get(i),
                atol=self.tolerance(case, i, exp),
                why=why,
            )
            if problem:
                if (
                    isinstance(got, np.ndarray)
                    and got.shape == expected["forward"].shape != exp.shape
                ):
                    problem += (
                        f"; the input was broadcast to the output's shape {exp.shape} -> "
                        f"{got.shape}: sum the gradient over the broadcast dimensions"
                    )
                return problem
        return None


@dataclass
class ValueCheck(Check):
    """Checks a plain function's return value(s) against ``reference(*args)``.

    ``tensors=True`` passes array arguments as tensors (else as numpy arrays).
    """

    reference: Callable[..., Any] | None = None
    tensors: bool = True

    def spec(self) -> dict[str, Any]:
        return {"runner": "value", "entry": self.entry, "tensors": self.tensors}

    def expected(self, case: Case) -> dict[str, Any]:
        assert self.reference is not None, "incomplete check"
        return {"value": self.reference(*case.args)}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        exp, got = expected["value"], received.get("value")
        trial = f"on inputs ({case.describe()})"
        if isinstance(exp, tuple):
            if not isinstance(got, tuple) or len(got) != len(exp):
                n = len(got) if isinstance(got, tuple) else 1
                return f"{self.entry} must return {len(exp)} values, got {n} {trial}"
            for k, (e, g) in enumerate(zip(exp, got, strict=True)):
                problem = self.compare(f"value {k} of {self.entry}", e, g, trial)
                if problem:
                    return problem
            return None
        return self.compare(f"the result of {self.entry}", exp, got, trial)


@dataclass
class TrainingCheck(Check):
    """Trains the student's classifier and measures its accuracy on held-out data.

    The student defines ``train_classifier(X, y, num_classes) -> model`` (``entry``) and
    ``predict(model, X) -> labels``. The sandbox gets the training inputs and labels and the test
    *inputs*; the test labels stay in the grader (``case.hidden["y_test"]``), which computes the
    accuracy itself.
    """

    predict: str = "predict"
    threshold: float = 0.9
    dataset: str = "the held-out test set"

    def spec(self) -> dict[str, Any]:
        return {"runner": "training", "entry": self.entry, "predict": self.predict}

    def expected(self, case: Case) -> dict[str, Any]:
        return {"labels": case.hidden["y_test"]}

    def judge(self, case: Case, received: dict[str, Any], expected: dict[str, Any]) -> str | None:
        labels = expected["labels"]
        got = received.get("predictions")
        if not isinstance(got, np.ndarray) or got.shape != labels.shape:
            shape = got.shape if isinstance(got, np.ndarray) else type(got).__name__
            return f"{self.predict}(model, X) must return {labels.shape[0]} labels, got {shape}"
        accuracy = float(np.mean(np.rint(got.astype(np.float64)) == labels))
        if accuracy < self.threshold:
            return (
                f"your classifier's accuracy on {self.dataset} ({labels.shape[0]} examples) is "
                f"{accuracy:.3f}; at least {self.threshold:.2f} is needed"
            )
        return None

    def passed(self, cases: Any) -> str:
        return f"{self.what}: accuracy at least {self.threshold:.2f} on {self.dataset}."
