"""How the sandbox calls a student's answer: a few generic runners, no references, no checks.

This file runs *inside* the sandbox (next to student code), so it knows nothing a student could
use: the grader sends a *spec* (which runner, which name to call) and the trial inputs, and gets
back the raw outputs. The reference values and the comparisons stay in the grader's process
(:mod:`torchlight_grader.checks.kinds`).

Runners:

- ``function``: ``Entry.forward(ctx, *args)`` then ``Entry.backward(ctx, G)``, called directly,
  so the raw gradients are seen before the engine could fix them up;
- ``graph``: ``entry(*args).backward(G)``, the gradients read from the inputs' ``.grad``;
- ``layer``: ``Entry(in, out)`` with the trial's weight and bias loaded, then as ``graph``;
- ``value``: ``entry(*args)``, the return value;
- ``training``: ``predict(train(X, y, classes), X_test)``, the predicted labels;
- ``topological_sort``, ``backpropagate``, ``central_difference``: the engine's items, on
  graphs and functions built from the grader's description (:mod:`graphs`);
- the strided tensor's items: index arithmetic and kernels over described storages
  (:mod:`strided`);
- the fast kernels' items: compiled kernels on described storages and matrices, and the speed
  items' paired timings (:mod:`kernels`);
- the language models' items: tokenizers, graphs with the grader's stand-ins for other
  answers, batches of scalar calls, lists of gradients, a GPT's training (:mod:`language`);
- inference and efficiency (a8): a KV cache on the library's GPT, seeded draws, typed arrays,
  a mixed-precision step, a checkpointing Function (:mod:`inference`);
- ``recipe``: the capstone's training recipe on a tiny GPT, its weights returned (:mod:`recipe`).
"""

from __future__ import annotations

import builtins
import importlib.util
import math
import os
import time
import traceback
import types
from typing import Any

import numpy as np

_abs = abs


def _agree(student: Any, reference: Any) -> bool:
    """Whether a kernel's output equals the reference's to 1e-9 (NaN, unwritten, never does),
    with ndarray operators only: no module function a cell could rebind."""
    if not isinstance(student, np.ndarray) or student.shape != reference.shape:
        return False
    return bool((_abs(student - reference) <= 1e-9 * (1.0 + _abs(reference))).all())


def _package_dirs(names: tuple[str, ...]) -> tuple[str, ...]:
    """The folders the installed packages ``names`` live in (found, not imported)."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        found += [os.path.realpath(d) + os.sep for d in (spec and spec.submodule_search_locations
                                                          or ())]  # fmt: skip
    return tuple(found)


#: Bound when this file is imported, before any cell of the notebook runs: a cell that rebinds
#: ``time.perf_counter``, ``exec``, a builtin such as ``isinstance`` or a numpy function later,
#: or puts another module in ``sys.modules``, does not reach these (the in-process speed
#: protocol's clocks and comparison, how its source is run; what the CUDA kernel's rule needs
#: to know about Python: the builtins' names and the few it calls, the ``math`` module, the
#: types of code and modules, the folders numpy and numba are installed in). A cell that
#: reaches into this dict can still replace them, and is flagged for it; in the grading sandbox
#: the speed items are timed by the broker, outside this process, and the CUDA rule's reading
#: of the kernel's bytecode is done in the grader, on the bytes this process sends.
PROTECTED: dict[str, Any] = {
    "wall": time.perf_counter,
    "cpu": time.process_time,
    "agree": _agree,
    "exec": exec,
    "compile": compile,
    "builtin_names": frozenset(vars(builtins)),
    "isinstance": isinstance,
    "hasattr": hasattr,
    "getattr": getattr,
    "issubclass": issubclass,
    "realpath": os.path.realpath,
    "math": math,
    "code_type": types.CodeType,
    "module_type": types.ModuleType,
    "packages": _package_dirs(("numpy", "numba", "numba_cuda")),
}


def lookup(namespace: dict[str, Any], name: str) -> Any:
    """The student's object called ``name``."""
    if name not in namespace:
        raise NameError(
            f"your notebook does not define `{name}`: write it in the answer cell (and run that cell)"
        )
    return namespace[name]


def to_tensors(case: dict[str, Any]) -> list[Any]:
    """The case's arguments as the student's code receives them."""
    import torchlight as tl

    out = []
    for i, a in enumerate(case["args"]):
        if isinstance(a, np.ndarray):
            out.append(tl.tensor(a.copy(), requires_grad=i in case["differentiable"]))
        else:
            out.append(a)
    return out


def raw(value: Any) -> Any:
    """A student's return value as plain data: tensors and arrays become float/int arrays."""
    if value is None:
        return None
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return np.array(value.detach().numpy())
    if isinstance(value, np.ndarray | np.generic | float | int):
        return np.asarray(value)
    if isinstance(value, tuple | list):
        return tuple(raw(v) for v in value)
    return f"<{type(value).__name__}>"


def type_name(value: Any) -> str:
    return type(value).__name__


def describe_exception(exc: BaseException) -> str:
    """``Type: message (in fn, line N of <cell>: `code`)``, naming only the student's frames."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell")]
    where = ""
    if frames:
        f = frames[-1]
        where = f" (in {f.name}, line {f.lineno} of your {f.filename[1:-1]}: `{(f.line or '').strip()}`)"
    message = str(exc)
    if len(message) > 400:
        message = message[:400] + "..."
    return f"{type(exc).__name__}: {message}{where}"


def _gradients(out: Any, grads: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "forward": raw(out),
        "forward_type": type_name(out),
        "grads": [raw(g) for g in grads],
        "grad_types": [type_name(g) for g in grads],
    }


def run(spec: dict[str, Any], namespace: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """Call the student's answer named in ``spec`` on one trial; return its raw outputs."""
    import torchlight as tl
    from torchlight.autograd import Context

    runner, entry = spec["runner"], spec["entry"]
    obj = lookup(namespace, entry)
    if runner == "function":
        args = to_tensors(case)
        g = tl.tensor(np.array(case["grad_output"]))
        ctx = Context(entry)
        with tl.no_grad():
            out = obj.forward(ctx, *args)
            grads = obj.backward(ctx, g)
        return _gradients(out, grads if isinstance(grads, tuple) else (grads,))
    if runner == "graph":
        args = to_tensors(case)
        out = obj(*args)
        out.backward(tl.tensor(np.array(case["grad_output"])))
        return _gradients(out, tuple(args[i].grad for i in case["differentiable"]))
    if runner == "layer":
        x, w, b = case["args"]
        layer = obj(w.shape[1], w.shape[0])
        with tl.no_grad():
            layer.weight.copy_(tl.tensor(w))
            layer.bias.copy_(tl.tensor(b))
        inputs = tl.tensor(x, requires_grad=True)
        out = layer(inputs)
        out.backward(tl.tensor(np.array(case["grad_output"])))
        return _gradients(out, (inputs.grad, layer.weight.grad, layer.bias.grad))
    if runner == "value":
        args = (
            to_tensors(case) if spec.get("tensors", True) else [np.array(a) for a in case["args"]]
        )
        out = obj(*args)
        return {"value": raw(out), "type": type_name(out)}
    if runner == "training":
        predict = lookup(namespace, spec["predict"])
        x_train, y_train, x_test, num_classes = case["args"]
        model = obj(tl.tensor(x_train), tl.tensor(y_train), num_classes)
        return {"predictions": raw(predict(model, tl.tensor(x_test)))}
    if runner in ("index_to_position", "to_index", "shape_broadcast", "broadcast_index",
                  "strided_map", "strided_zip", "strided_reduce"):  # fmt: skip
        import importlib  # the sandbox runs this file as `runners`, the grader as a submodule

        strided = importlib.import_module(f"{__package__}.strided" if __package__ else "strided")
        return strided.run(runner, obj, namespace, case)
    if runner in ("fast_map", "fast_zip", "fast_reduce", "tiled_matmul", "speed", "cuda_results",
                  "cuda_ptx"):  # fmt: skip
        import importlib  # the sandbox runs this file as `runners`, the grader as a submodule

        kernels = importlib.import_module(f"{__package__}.kernels" if __package__ else "kernels")
        return kernels.run(runner, obj, namespace, case, PROTECTED)
    if runner in ("tokens", "graph_with", "calls", "list_value", "lm_training", "bpe_speed"):
        import importlib  # the sandbox runs this file as `runners`, the grader as a submodule

        language = importlib.import_module(f"{__package__}.language" if __package__ else "language")
        return language.run(spec, obj, namespace, case)
    if runner in ("kv_cache", "draws", "arrays", "mixed_precision", "checkpoint"):
        import importlib  # the sandbox runs this file as `runners`, the grader as a submodule

        inference = importlib.import_module(
            f"{__package__}.inference" if __package__ else "inference"
        )
        return inference.run(spec, obj, namespace, case)
    if runner in ("topological_sort", "backpropagate", "central_difference"):
        import importlib  # the sandbox runs this file as `runners`, the grader as a submodule

        graphs = importlib.import_module(f"{__package__}.graphs" if __package__ else "graphs")
        return graphs.run(runner, obj, namespace, case)
    if runner == "recipe":
        import importlib  # the sandbox runs this file as `runners`, the grader as a submodule

        recipe = importlib.import_module(f"{__package__}.recipe" if __package__ else "recipe")
        return recipe.run(obj, lookup(namespace, "CONFIG"), case)
    raise ValueError(f"unknown runner {runner!r}")
