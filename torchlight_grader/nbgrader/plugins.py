"""nbgrader preprocessors that make the autograder's grades trustworthy.

Listed in ``assignments/nbgrader_config.py``:

- :class:`RestoreGradedCells` (sanitize step, before nbgrader's ``OverwriteCells``): rebuilds
  every graded cell's nbgrader metadata from the gradebook, drops metadata the gradebook does
  not know, and puts back test cells (and locked cells) the student deleted; it also starts
  the notebook's two sandboxes (no student code in them yet), which import meanwhile;
- :class:`SandboxedExecute` (replaces nbgrader's ``Execute``): runs the notebook in a kernel in
  a resource-limited sandbox process, only for the outputs shown in the feedback;
- :class:`IsolatedGrader` (just before ``SaveAutoGrades``): re-runs every registered hidden
  check outside the kernel (:mod:`torchlight_grader.checks.grader`) and writes the verdict as the
  test cell's only output, so nbgrader's own grade bookkeeping records the trusted result.
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output
from nbgrader.api import Gradebook
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from nbgrader.utils import determine_grade
from traitlets import Bool, Dict, Float, Integer, Unicode

from torchlight_grader import sandbox
from torchlight_grader.checks import graded_library, registry, variants
from torchlight_grader.checks.grader import Cell, grade, prepare
from torchlight_grader.checks.structure import library_autograd
from torchlight_grader.nbgrader import hostile, releases
from torchlight_grader.nbgrader.releases import HIDDEN_TESTS, released
from torchlight_grader.sandbox.inside import wire

registry.load_all()  # every check is in memory before any student code runs
sandbox.ensure_available()  # fail closed: no sandbox, no grading
hostile.install_file_guard()  # nbgrader copies regular files only out of a submission


@dataclass
class Layout:
    """The instructor's notebook as recorded in the gradebook at ``generate_assignment`` time."""

    order: list[str]
    source: dict[str, dict[str, Any]]
    points: dict[str, float]
    solutions: set[str]
    tasks: set[str]

    @classmethod
    def load(cls, resources: dict[str, Any]) -> Layout:
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            nb = gb.find_notebook(info["notebook"], info["assignment"])
            source = {
                c.name: {"cell_type": c.cell_type, "locked": bool(c.locked), "source": c.source}
                for c in nb.source_cells
            }
            return cls(
                order=[c.name for c in nb.source_cells],
                source=source,
                points={c.name: float(c.max_score) for c in nb.grade_cells},
                solutions={c.name for c in nb.solution_cells},
                tasks={c.name for c in nb.task_cells},
            )

    def role(self, grade_id: str | None) -> str:
        if grade_id is None or grade_id not in self.source:
            return "student"
        if grade_id in self.solutions:
            return "answer"
        if grade_id in self.points:
            return "test"
        return "locked"

    def metadata(self, grade_id: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "grade": grade_id in self.points,
            "grade_id": grade_id,
            "locked": self.source[grade_id]["locked"],
            "schema_version": 3,
            "solution": grade_id in self.solutions,
        }
        if grade_id in self.points:
            meta["points"] = self.points[grade_id]
        if grade_id in self.tasks:
            meta["task"] = True
        return meta


def grade_id_of(cell: Any) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


class RestoreGradedCells(NbGraderPreprocessor):
    """Make the submitted notebook's structure the instructor's again, from the gradebook."""

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        layout = Layout.load(resources)
        # This notebook's two sandboxes start now, while nbgrader sanitizes it, so that they
        # have imported (the kernel is up) when SandboxedExecute and IsolatedGrader hand them
        # the notebook; neither sees student code before that.
        SandboxedExecute(config=self.config).prepare(resources)
        IsolatedGrader(config=self.config).prepare(resources)
        findings = nb.metadata.setdefault("torchlight", {}).setdefault("findings", [])
        # What the instructor changed since the release this notebook was made from: reported
        # once per change for the class (integrity.csv's "instructor" section), not as tampering.
        history = releases.load(Path(os.getcwd()))
        earlier: list[str] = []
        where = f"{resources['nbgrader']['assignment']}/{resources['nbgrader']['notebook']}"
        present = set()
        for cell in nb.cells:
            grade_id = grade_id_of(cell)
            if "nbgrader" not in cell.get("metadata", {}):
                continue
            if grade_id not in layout.source or grade_id in present:
                findings.append(f"unknown nbgrader metadata {str(grade_id)[:60]!r} dropped")
                del cell.metadata["nbgrader"]
                continue
            present.add(grade_id)
            wanted = layout.metadata(grade_id)
            handed = cell.metadata["nbgrader"]
            differs = {k for k, v in wanted.items() if handed.get(k) != v}
            now = wanted.get("points")
            if differs == {"points"} and releases.earlier_release(
                history, f"{where}/{grade_id}", None, handed.get("points")
            ):
                earlier.append(f"points of {grade_id}: {float(handed['points']):g} in the "
                               f"release handed out, {float(now or 0):g} now")  # fmt: skip
            elif differs:
                findings.append(f"nbgrader metadata of cell {grade_id} changed (restored)")
            cell.metadata["nbgrader"] = wanted
            info = layout.source[grade_id]
            if cell.cell_type != info["cell_type"]:
                findings.append(f"cell {grade_id} changed to {cell.cell_type} (restored)")
                self._set_type(cell, info["cell_type"])
            if info["locked"]:
                # The release shows test cells without their hidden tests: that is no edit.
                handed_in = cell.source.strip()
                if handed_in in (info["source"].strip(), released(info["source"]).strip()):
                    pass
                elif releases.earlier_release(
                    history, f"{where}/{grade_id}", handed_in,
                    handed.get("points") if "points" in handed else layout.points.get(grade_id),
                ):  # fmt: skip
                    earlier.append(f"source of {grade_id} changed since the release handed out")
                else:
                    findings.append(f"locked cell {grade_id} was edited (restored)")
                    self.log.warning("locked cell %s was edited by the student; restored", grade_id)
                cell.source = info["source"]  # so nbgrader's checksum check agrees
        for n, grade_id in enumerate(layout.order):
            if grade_id in present or layout.role(grade_id) not in ("test", "locked"):
                continue
            findings.append(f"cell {grade_id} was deleted (restored)")
            self.log.warning("restoring deleted cell %r", grade_id)
            before = [g for g in layout.order[:n] if g in present]
            index = 0
            if before:
                index = 1 + next(i for i, c in enumerate(nb.cells) if grade_id_of(c) == before[-1])
            info = layout.source[grade_id]
            make = new_code_cell if info["cell_type"] == "code" else new_markdown_cell
            cell = make(source=info["source"])
            cell.metadata["nbgrader"] = layout.metadata(grade_id)
            cell.metadata.update(editable=False, deletable=False)
            nb.cells.insert(index, cell)
            present.add(grade_id)
        if earlier:
            nb.metadata["torchlight"]["release"] = earlier
        return nb, resources

    @staticmethod
    def _set_type(cell: Any, cell_type: str) -> None:
        cell.cell_type = cell_type
        if cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        else:
            cell.pop("outputs", None)
            cell.pop("execution_count", None)


#: How much of an in-kernel test's error a test cell's audit mark keeps (``kernel_error``).
KERNEL_ERROR = 300

#: An answer that reaches for the library's own Functions (flagged for review, never zeroed).
BUILT_IN = re.compile(
    r"\bfunctions\s*\.\s*[A-Z]|from\s+torchlight\.(functions|ops)\b[\w.]*\s+import"
    r"|import\s+torchlight\.(functions|ops)\b"
    # a5: the library's normalization, softmax, attention and LSTM Functions and functional forms
    r"|\b(?:LayerNormFunction|SoftmaxFunction|LogSoftmaxFunction|LSTMCellFunction)\b"
    r"|\.\s*(?:scaled_dot_product_attention|attention_weights|layer_norm|batch_norm|softmax"
    r"|lstm_cell)\s*\("
)

#: Notebooks whose answers build on the library's ops by design (a7 writes a transformer from
#: softmax and layer_norm, differentiated by the library; a8's KV cache runs the library's GPT
#: layers, softmax included; the capstone's recipe trains the library's GPT): BUILT_IN flags
#: nothing there.
BUILDS_ON_THE_LIBRARY = frozenset({"a7_gpt", "a8_inference", "a9_capstone"})


def course_paths(resources: dict[str, Any]) -> list[str]:
    """What the sandbox must never see: the course directory and the gradebook's folder."""
    paths = [os.getcwd()]
    db_url = str(resources.get("nbgrader", {}).get("db_url", ""))
    if db_url.startswith("sqlite:///"):
        paths.append(os.path.dirname(os.path.abspath(db_url[len("sqlite:///") :])))
    return paths


class SandboxedExecute(Execute):
    """nbgrader's ``Execute``, but the kernel runs in a bubblewrap sandbox with resource limits.

    ``Execute.timeout`` (per cell) and ``Execute.extra_arguments`` keep their meaning;
    ``total_timeout`` is one wall-clock budget for the whole notebook, however many cells it
    has. A cell that times out, a kernel that exits, or a run that exceeds ``total_timeout``
    stops the run; the outputs so far are kept and the stopped cell says why. The hidden tests
    are removed from the test cells of the copy that runs (the grader is not in the sandbox).
    Grades never depend on these outputs (see :class:`IsolatedGrader`).

    With ``background = True`` the run only starts here and :class:`IsolatedGrader` collects
    it after running the hidden checks, so the two sandboxes use both cores at once. With
    ``start_ahead`` (the default) the sandbox for the next notebook, its kernel already up, is
    started as this one's run begins (for the first notebook of a grading process,
    :class:`RestoreGradedCells` starts it while nbgrader sanitizes the notebook); it sees no
    student code until it is handed that notebook.
    """

    total_timeout = Float(300.0, help="Wall-clock seconds for the whole notebook run.").tag(
        config=True
    )
    memory_limit = Integer(4 * 1024**3, help="Address-space limit of the kernel, bytes.").tag(
        config=True
    )
    background = Bool(False, help="Leave the run for IsolatedGrader to collect.").tag(config=True)
    start_ahead = Bool(
        True, help="Start the next notebook's sandbox (and kernel) while this one runs."
    ).tag(config=True)

    def _sandbox(self, resources: dict[str, Any]) -> dict[str, Any]:
        """What the kernel run's sandbox is built from (the same for every notebook)."""
        settings = {
            "memory": self.memory_limit,
            "cpu_seconds": int(self.total_timeout) + 5,
            "processes": 256,
            "timeout": int(self.timeout or 30),
            "extra_arguments": list(self.extra_arguments),
        }
        return {
            "script": "run_notebook.py",
            "limits": sandbox.Limits(),
            "forbidden": course_paths(resources),
            "settings": settings,
            "overlays": graded_library.whole(),  # the library with its byte code: a faster start
        }

    def prepare(self, resources: dict[str, Any]) -> None:
        """Start the kernel sandbox this notebook will get, unless one is waiting (the spare
        the last notebook started): for the first notebook of a grading process."""
        if self.start_ahead:
            sandbox.prepare(**self._sandbox(resources))

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        runnable = copy.deepcopy(nb)
        for cell in runnable.cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                cell.source = HIDDEN_TESTS.sub("", cell.source)
        student = resources.get("nbgrader", {}).get("student")
        first = next((c for c in runnable.cells if c.cell_type == "code"), None)
        if first is not None and isinstance(student, str):  # the owner's variant, shown in feedback
            first.source = variants.student_line(student) + first.source
        start = time.monotonic()
        deadline = start + self.total_timeout
        # A sandbox whose kernel is already up (started while the last notebook ran, or by
        # prepare() while this one was sanitized), and the next notebook's, started now.
        box = sandbox.open_sandbox(**self._sandbox(resources), ahead=self.start_ahead)
        box.loads = _json_frame
        run = NotebookRun(box, deadline, self.log)
        box.send({"notebook": nbformat.writes(runnable)}, deadline)
        if self.background:
            resources[NotebookRun.KEY] = run
        else:
            run.finish(nb)
        return nb, resources


def _json_frame(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise wire.WireError(str(exc)) from exc


class NotebookRun:
    """A notebook run in progress: a thread collects its frames; :meth:`finish` waits for the
    end (or the deadline), ends the sandbox and copies the outputs in."""

    KEY = "torchlight_notebook_run"

    def __init__(self, box: sandbox.Sandbox, deadline: float, log: Any) -> None:
        self.box, self.deadline, self.log = box, deadline, log
        self.started = time.monotonic()
        self.entries: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._collect, daemon=True)
        self.thread.start()

    def _collect(self) -> None:
        while True:
            entry = self.box.receive(self.deadline)
            if entry is None:
                return
            self.entries.append(entry)
            if "done" in entry or "stopped" in entry:
                return  # the last frame: the kernel's shut-down is not waited for

    def finish(self, nb: Any) -> None:
        self.thread.join(max(0.0, self.deadline - time.monotonic()))
        timed_out = self.thread.is_alive()
        self.box.close()
        self.thread.join()
        ran = _apply_outputs(nb, self.entries, timed_out)
        self.log.info("notebook run: %d cells in %.1f s", ran, time.monotonic() - self.started)


def _apply_outputs(nb: Any, entries: list[dict[str, Any]], timed_out: bool) -> int:
    """Copy each finished cell's outputs into ``nb``; explain where the run stopped."""
    started, finished, stopped = None, set(), None
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("start"), int):
            started = entry["start"]
        elif isinstance(entry.get("index"), int) and 0 <= entry["index"] < len(nb.cells):
            cell = nb.cells[entry["index"]]
            if cell.cell_type == "code":
                cell.outputs = [_safe_output(o) for o in entry.get("outputs", [])]
                count = entry.get("count")
                cell.execution_count = count if isinstance(count, int) else None
                finished.add(entry["index"])
        elif "stopped" in entry:
            stopped = str(entry["stopped"])
    if started is not None and started not in finished and 0 <= started < len(nb.cells):
        why = "the notebook run took too long" if timed_out else f"the kernel stopped ({stopped})"
        nb.cells[started].outputs = [
            new_output(
                "error",
                ename="NotebookRunStopped",
                evalue=why,
                traceback=[
                    f"NotebookRunStopped: {why} while running this cell; later cells were not run"
                ],
            )
        ]
    return len(finished)


def _safe_output(output: Any) -> Any:
    """An nbformat-valid output built only from the expected fields, or a short note."""
    try:
        kind = output["output_type"]
        if kind == "stream":
            return new_output("stream", name=str(output["name"]), text=str(output["text"]))
        if kind == "error":
            return new_output(
                "error",
                ename=str(output["ename"]),
                evalue=str(output["evalue"]),
                traceback=[str(line) for line in output["traceback"]],
            )
        fields = {"data": dict(output["data"]), "metadata": {}}
        if kind == "execute_result":
            fields["execution_count"] = output.get("execution_count")
        return new_output(kind, **fields)
    except Exception:  # noqa: BLE001 - anything malformed becomes a note
        return new_output("stream", name="stdout", text="[an output could not be kept]\n")


class IsolatedGrader(NbGraderPreprocessor):
    """Decide every registered test cell's grade outside the student's kernel.

    The verdict replaces the cell's outputs: a stdout line when the hidden checks pass (full
    points), an error with the teaching message when they fail (zero points). Test cells with
    no registered check fail closed.
    """

    seed = Integer(None, allow_none=True, help="Seed of the hidden inputs (None: fresh).").tag(
        config=True
    )
    memory_limit = Integer(2 * 1024**3, help="Address-space limit per item, bytes.").tag(
        config=True
    )
    output_limit = Integer(1024**2, help="Output/file-size limit per item, bytes.").tag(config=True)
    timeout_cap = Float(None, allow_none=True, help="Cap on every item's timeout, s.").tag(
        config=True
    )
    cell_timeout = Float(
        30.0, help="Seconds one cell may run in the sandbox before it is skipped."
    ).tag(config=True)
    notebook_timeout = Float(
        300.0, help="Wall-clock seconds for all hidden checks of one notebook, however many cells."
    ).tag(config=True)
    notebook_timeouts = Dict(
        key_trait=Unicode(),
        value_trait=Float(),
        help="notebook_timeout for the notebooks named here (e.g. a2c_kernels=300: numba "
        "compiles and times kernels there); the others keep notebook_timeout.",
    ).tag(config=True)
    start_ahead = Bool(
        True,
        help="Start the notebook's hidden-check sandbox (its imports done) while nbgrader "
        "sanitizes the notebook (RestoreGradedCells), before it is needed.",
    ).tag(config=True)

    def limits(self, notebook: str = "") -> sandbox.Limits:
        """The sandbox limits this preprocessor is configured with (for ``notebook``)."""
        return sandbox.Limits(
            memory=self.memory_limit,
            output=self.output_limit,
            cell_timeout=self.cell_timeout,
            budget=self.notebook_timeouts.get(notebook, self.notebook_timeout),
        )

    def prepare(self, resources: dict[str, Any]) -> None:
        """Start the sandbox the hidden checks of this notebook will get (``start_ahead``).

        Not a spare started while the previous notebook ran: each notebook's checks see a
        library built for that notebook, and which notebook comes next is not known then."""
        if self.start_ahead:
            notebook = resources["nbgrader"]["notebook"]
            prepare(notebook, self.limits(notebook), course_paths(resources))

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        start = time.perf_counter()
        layout = Layout.load(resources)
        notebook = resources["nbgrader"]["notebook"]
        report = nb.metadata.get("torchlight")  # CheckSubmission's and RestoreGradedCells'
        if isinstance(report, dict):  # kept for SanitizeNotebook: ClearMetadata drops it
            resources["torchlight"] = report
        cells: list[Cell] = []
        tests: dict[str, Any] = {}
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            grade_id = grade_id_of(cell)
            role = layout.role(grade_id)
            if role == "test" and grade_id is not None:
                tests[grade_id] = cell
            cells.append(Cell(role, grade_id if role != "student" else None, cell.source))
            if (
                role in ("answer", "student")
                and notebook not in BUILDS_ON_THE_LIBRARY
                and BUILT_IN.search(cell.source)
            ):
                name = grade_id if role == "answer" else "a cell the student added"
                resources.setdefault("torchlight", {}).setdefault("findings", []).append(
                    f"{name} uses torchlight's built-in Functions (torchlight.ops): "
                    "review by hand whether it implements the op itself"
                )
        written = [c.source for c in cells if c.role in ("answer", "student")]
        # from the code's structure, outside the sandbox (a8's Checkpoint recomputes by design)
        for line in library_autograd(written, registry.autograd_backwards(notebook)):
            resources.setdefault("torchlight", {}).setdefault("findings", []).append(line)
        for line in registry.findings(notebook, written):  # the notebook's own (a1b: the engine)
            resources.setdefault("torchlight", {}).setdefault("findings", []).append(line)
        seed = self.seed if self.seed is not None else secrets.randbits(31)
        verdicts = grade(
            notebook,
            cells,
            list(tests),
            seed=seed,
            limits=self.limits(notebook),
            timeout_cap=self.timeout_cap,
            forbidden=course_paths(resources),
            student=resources["nbgrader"].get("student"),  # the owner's variant (variants.py)
        )  # its sandbox was started by prepare(), while nbgrader sanitized the notebook
        for grade_id, verdict in verdicts.items():  # a name built at run time, seen by its effect
            if not verdict.passed and graded_library.LEFT_OUT in verdict.message:
                resources.setdefault("torchlight", {}).setdefault("findings", []).append(
                    f"{grade_id}: the answer called a part of torchlight that this notebook "
                    "grades (the grader's library leaves it out): review by hand"
                )
        pending = resources.pop(NotebookRun.KEY, None)
        if pending is not None:  # the notebook ran in parallel with the checks
            pending.finish(nb)
        self._record(nb, tests, verdicts, seed)
        passed = sum(v.passed for v in verdicts.values())
        self.log.info(
            "hidden checks of %s: %d of %d passed (%.1f s)",
            notebook,
            passed,
            len(verdicts),
            time.perf_counter() - start,
        )
        return nb, resources

    def _record(self, nb: Any, tests: dict[str, Any], verdicts: dict[str, Any], seed: int) -> None:
        """Each test cell's only output becomes its verdict (what nbgrader then scores)."""
        for grade_id, cell in tests.items():
            verdict = verdicts[grade_id]
            # What a plain in-kernel test would have scored, kept for the instructor's audit,
            # with why it scored nothing there: the output that made nbgrader say 0 (an error,
            # or text on stderr), cut short (the student's code wrote it).
            kernel_score, _ = determine_grade(cell, self.log)
            mark = {"kernel_score": kernel_score, "passed": verdict.passed}
            for out in cell.outputs:  # (in determine_grade's order: it stops at the first)
                kind = out.get("output_type")
                if kind == "error":
                    mark["kernel_error"] = f"{out.get('ename')}: {out.get('evalue')}"[:KERNEL_ERROR]
                elif kind == "stream" and out.get("name") == "stderr":
                    mark["kernel_error"] = f"stderr: {out.get('text')}"[:KERNEL_ERROR]
                elif kind != "execute_result":  # (a result scores it, as partial credit)
                    continue
                break
            cell.metadata["torchlight"] = mark
            if verdict.passed:
                cell.outputs = [new_output("stream", name="stdout", text=f"{verdict.message}\n")]
            else:
                message = f"{verdict.message}\n(hidden inputs drawn with seed {seed})"
                cell.outputs = [
                    new_output(
                        "error",
                        ename="HiddenCheckFailed",
                        evalue=message,
                        traceback=[f"HiddenCheckFailed: {message}"],
                    )
                ]
