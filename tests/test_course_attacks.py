"""Attacks on the grader (issue 11), through the real nbgrader CLI, in both deployments.

One batch per deployment: an honest student graded before the attackers, the attackers of
``tests/submissions/attacks.py``, an honest student after them. Grading runs as root, and at the
same time as an unprivileged user this test creates (its sandboxes then come from user
namespaces). The
attackers get nothing, the honest grades are exact, and the course, the library, the grader and
the Python environment are unchanged apart from nbgrader's own outputs. As root, the batch
leaves out what the course suite already grades as root (``COURSE_SUITE_AS_ROOT``).
"""

from __future__ import annotations

import hashlib
import html.parser
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
from submissions import a1b_engine, a2b_strided, a2c_kernels, a8_inference
from submissions.attacks import ATTACKS, DAEMON_MARK, HONEST, HOST_MARK, MARKERS, TEX_MARK
from submissions.attacks_lm import LM_ATTACKS, LM_FLAGGED, LM_HONEST
from submissions.catalog import Submission, build
from submissions.pipeline import (
    max_points,
    notebooks,
    read_items,
    released_course,
    secret_lines,
    submit,
)

pytestmark = [pytest.mark.nbgrader, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)
A = "a1_functions"
BATCH = [HONEST[0], *ATTACKS, HONEST[1]]
#: Answers that hand what a1b, a2b and a8 grade back to the library (a1b's engine by name and by
#: a name built at run time; a2b's to_index, and its contiguous() through the library's map; a8's
#: sampler and checkpoint), graded in the same run: nothing for those items, flagged, in both
#: deployments.
LIBRARY_USE = [
    *(s for s in a1b_engine.CATALOG if s.name in ("library-backward", "library-by-another-name")),
    *(s for s in a2b_strided.CATALOG if s.name in ("library-to-index", "library-contiguous")),
    *(s for s in a8_inference.CATALOG if s.name in ("library-sampler", "library-checkpoint")),
]
MODULES = {a1b_engine.A: a1b_engine, a2b_strided.A: a2b_strided, a8_inference.A: a8_inference}
#: a2c (fast kernels) in the same run: an honest notebook, a slow kernel that rewrites the clocks
#: and numpy's comparisons, a release that reads the hidden checks and prints a full score. Few
#: students: each compiles ~20 kernels and times two of them (the budget below is a2c's only).
KERNELS = a2c_kernels.ATTACKS
#: What the root deployment leaves to the course suite (``tests/test_course.py``), which grades
#: the whole catalog as root with the same checks: the honest a2c notebook (its ``solution``),
#: the slow kernel behind forged clocks (its ``faked-clocks``: the broker times and compares
#: outside the student's process, whoever the grading user is) and the library answers (each
#: graded and flagged there). An a2c notebook costs about 50 s of CPU to grade. The
#: unprivileged deployment, whose sandboxes come from user namespaces, grades every one.
COURSE_SUITE_AS_ROOT = {"honest", "attack-fake-clocks", *(s.name for s in LIBRARY_USE)}
OUTPUTS = {
    "autograded",
    "feedback",
    "gradebook.db",
    "grades.csv",
    "items.csv",
    "integrity.csv",
    ".nbgrader.log",
}
USER = "torchlight-grader-test"
_CREATED: list[str] = []  # the user, if this run created it (removed again at the end)
FLAGS = (
    "--Execute.timeout=10",
    "--SandboxedExecute.total_timeout=60",
    "--IsolatedGrader.seed=20260115",
    "--IsolatedGrader.cell_timeout=10",
    "--IsolatedGrader.notebook_timeout=60",
    "--IsolatedGrader.notebook_timeouts=a2c_kernels=300",  # numba compiles and times kernels
)


def carried(deployment: str, subs: list[Submission]) -> list[Submission]:
    """``subs`` less what the course suite already grades as root, in the root deployment."""
    if deployment == "root":
        return [s for s in subs if s.name not in COURSE_SUITE_AS_ROOT]
    return subs


@dataclass
class Batch:
    deployment: str
    course: Path
    items: dict[tuple[str, str], dict[str, float]]
    points: dict[str, float]
    source: Any
    before: dict[str, str]
    after: dict[str, str]
    returncode: int
    output: str


# ------------------------------------------------------------------------------ fingerprint
def fingerprint(course: Path) -> dict[str, str]:
    """What must not change: the course (but nbgrader's outputs), the library, the grader (by
    content: every file's bytes, every folder's mode) and the whole Python environment (by
    size, mtime and mode of every entry)."""
    entries: dict[str, str] = {}

    def walk(base: Path, label: str, content: bool, skip: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        for dirpath, dirnames, filenames in os.walk(base):
            top = dirpath == str(base)
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and not (top and d in skip)]
            for name in dirnames + filenames:
                if top and name in skip:
                    continue
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                key = f"{label}/{os.path.relpath(path, base)}"
                if stat.S_ISREG(st.st_mode) and content:
                    entries[key] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                elif stat.S_ISDIR(st.st_mode) and content:
                    # (by mode: an entry added or removed is a key of its own, and a folder's
                    # mtime also moves when the other pytest process first imports a module of
                    # it and Python makes its __pycache__)
                    entries[key] = f"folder {st.st_mode:o}"
                elif stat.S_ISLNK(st.st_mode):
                    entries[key] = "link " + os.readlink(path)
                else:
                    entries[key] = f"{st.st_mode:o} {st.st_size} {st.st_mtime_ns}"

    walk(course, "course", True, OUTPUTS)
    walk(ROOT / "torchlight", "torchlight", True)
    walk(ROOT / "torchlight_grader", "torchlight_grader", True)
    walk(VENV, "venv", False)
    return entries


# ------------------------------------------------------------------------------ deployments
def _user() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam(USER)
    except KeyError:
        _CREATED.append(USER)
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
            check=True,
            capture_output=True,
        )
        entry = pwd.getpwnam(USER)
    return entry.pw_uid, entry.pw_gid


def _as_user(uid: int, gid: int) -> list[str]:
    """A command prefix: a private mount namespace in which the Python installation is
    reachable (here it lives under root's home, mode 0700: a real deployment installs Python
    where the grading user can read it), then drop to ``uid``/``gid`` for good."""
    base = Path(os.path.realpath(sys.base_prefix))
    closed = next(
        (p for p in reversed(base.parents) if not os.stat(p).st_mode & stat.S_IXOTH), None
    )
    script = "set -e\n"
    if closed is not None:
        inner = base.parents[len(base.parents) - len(closed.parts) - 1]  # one below `closed`
        script += (
            f'view=$(mktemp -d)\nmount --bind "{inner}" "$view"\n'
            f'mount -t tmpfs -o mode=0755,size=1m tmpfs "{closed}"\nmkdir -p "{inner}"\n'
            f'mount --move "$view" "{inner}"\nrmdir "$view"\n'
        )
    script += (
        f"exec setpriv --reuid={uid} --regid={gid} --clear-groups --inh-caps=-all "
        f'--bounding-set=-all -- "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"]


def _run(prefix: list[str], args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{VENV / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [*prefix, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


DEPLOYMENTS = ("root", "unprivileged")


@dataclass
class Prepared:
    """A deployment's course with the batch handed in, before grading."""

    where: Path
    course: Path
    prefix: list[str]
    source: Any


def _prepare(deployment: str, where: Path) -> Prepared:
    prefix: list[str] = []
    course = released_course(where, "*")  # a copy of the session's release (root made it)
    if deployment == "unprivileged":
        uid, gid = _user()
        for path in [where, *where.rglob("*")]:
            os.lchown(path, uid, gid)
        prefix = _as_user(uid, gid)
    source, released = notebooks(course, A)
    paths = {"COURSE": str(course), "REPO": str(ROOT), "VENV": str(VENV)}
    for sub in BATCH:
        submit(course, sub.student, A, build(sub, source, released, paths))
        folder = course / "submitted" / sub.student / A
        for change in sub.files:
            change(folder, course)
        if prefix:
            for path in [folder, *folder.rglob("*")]:
                os.lchown(path, uid, gid)
    for sub in [*carried(deployment, KERNELS), *LM_ATTACKS, *LM_HONEST]:  # a2c; a6-a8
        sub_source, sub_release = notebooks(course, sub.assignment)
        submit(course, sub.student, sub.assignment, build(sub, sub_source, sub_release, paths))
        if prefix:
            folder = course / "submitted" / sub.student
            for path in [folder, *folder.rglob("*")]:
                os.lchown(path, uid, gid)
    for sub in carried(deployment, LIBRARY_USE):
        sub_source, sub_release = notebooks(course, sub.assignment)
        submit(course, sub.student, sub.assignment, build(sub, sub_source, sub_release))
        if prefix:
            folder = course / "submitted" / sub.student
            for path in [folder, *folder.rglob("*")]:
                os.lchown(path, uid, gid)
    return Prepared(where, course, prefix, source)


def _grade(ready: Prepared) -> subprocess.CompletedProcess:
    return _run(
        ready.prefix,
        [sys.executable, "-m", "torchlight_grader.course.manage", "grade", str(ready.course),
         "--assignment", "*", "--", *FLAGS],
        ready.course,
        ready.where,
    )  # fmt: skip


@pytest.fixture(scope="module")
def batches() -> Iterator[dict[str, Batch]]:
    """Both deployments graded at the same time (two grading processes, as two courses on one
    host would be; on 2 cores that takes ~40% off, a batch waits much for its sandboxes). Every
    fingerprint "before" is taken before either batch starts and every "after" once both have
    ended, so whatever either batch's attackers change is seen by both."""
    if os.geteuid() != 0:
        pytest.fail("these tests start as root: they create the unprivileged grading user")
    wheres = {d: Path(tempfile.mkdtemp(prefix=f"torchlight-attacks-{d}-")) for d in DEPLOYMENTS}
    try:
        ready = {d: _prepare(d, wheres[d]) for d in DEPLOYMENTS}
        before = {d: fingerprint(ready[d].course) for d in DEPLOYMENTS}
        with ThreadPoolExecutor(len(DEPLOYMENTS)) as pool:
            runs = {d: pool.submit(_grade, ready[d]) for d in DEPLOYMENTS}
            graded = {d: run.result() for d, run in runs.items()}
        after = {d: fingerprint(ready[d].course) for d in DEPLOYMENTS}
        out = {}
        for d in DEPLOYMENTS:
            r, g = ready[d], graded[d]
            print(d, g.stdout[-3000:], g.stderr[-3000:])
            out[d] = Batch(d, r.course, read_items(r.course), max_points(r.source), r.source,
                           before[d], after[d], g.returncode, g.stdout + g.stderr)  # fmt: skip
        yield out
    finally:
        for where in wheres.values():
            shutil.rmtree(where, ignore_errors=True)
        if _CREATED:
            subprocess.run(["userdel", "--force", USER], check=False, capture_output=True)
            _CREATED.clear()


@pytest.fixture(params=DEPLOYMENTS)
def batch(request: pytest.FixtureRequest, batches: dict[str, Batch]) -> Batch:
    return batches[request.param]


# ------------------------------------------------------------------------------ the tests
def test_attackers_gain_nothing_and_honest_grades_are_exact(batch: Batch) -> None:
    wrong = {}
    for sub in BATCH:
        got = batch.items.get((sub.student, A))
        expected = sub.expected(batch.points)
        if got != expected:
            wrong[sub.student] = (got, expected)
    assert not wrong, f"{batch.deployment}: {wrong}\n{batch.output[-4000:]}"


def test_answers_calling_the_librarys_own_code_score_nothing_for_it_and_are_flagged(
    batches: dict[str, Batch],
) -> None:
    """a1b, a2b and a8, graded as the unprivileged user (the course suite grades them as root:
    ``test_course.py``'s ``test_grades_item_by_item`` and
    ``test_answers_that_reach_for_the_librarys_own_code_are_flagged``): what the notebook grades
    is not in the hidden checks' library: the items that use the library's engine or index
    arithmetic score zero, the others keep their points, and the integrity report names each (a
    name built at run time by its effect)."""
    import csv

    batch = batches["unprivileged"]
    with open(batch.course / "integrity.csv", newline="", encoding="utf-8") as f:
        rows = [(r["student"], r["finding"]) for r in csv.DictReader(f)]
    for sub in LIBRARY_USE:
        points = max_points(notebooks(batch.course, sub.assignment)[0])
        got = batch.items.get((sub.student, sub.assignment))
        assert got == sub.expected(points), (batch.deployment, sub.student, got)
        found = " ".join(finding for student, finding in rows if student == sub.student)
        flagged = MODULES[sub.assignment].FLAGGED[sub.name]
        assert flagged in found, (batch.deployment, sub.student, found)


def test_language_model_attackers_gain_nothing_and_honest_grades_are_exact(batch: Batch) -> None:
    """a6, a7 and a8 (issue 36): attackers on the release that read the hidden checks, the
    solutions, the library's sources or a7's validation text, print a fake score and loss,
    rewrite the sandbox's runner and clocks, or call the library's tokenizer and attention,
    score zero on every item; honest a6 and a8 notebooks graded after them score full marks;
    nothing the attackers tried to read or write got through (in the grading sandbox and in
    the feedback kernel), and the library answers are flagged."""
    import csv

    wrong = {}
    for sub in [*LM_ATTACKS, *LM_HONEST]:
        points = max_points(notebooks(batch.course, sub.assignment)[0])
        got = batch.items.get((sub.student, sub.assignment))
        if got != sub.expected(points):
            wrong[f"{sub.student}/{sub.assignment}"] = got
    assert not wrong, f"{batch.deployment}: {wrong}\n{batch.output[-3000:]}"
    for sub in LM_ATTACKS:
        path = (
            batch.course / "autograded" / sub.student / sub.assignment / f"{sub.assignment}.ipynb"
        )
        printed = _printed(path)
        assert "ESCAPED" not in printed, (sub.student, printed[:2000])
        if "forge" in sub.name:
            assert printed.count("blocked:") == 4, (sub.student, printed[:2000])
    with open(batch.course / "integrity.csv", newline="", encoding="utf-8") as f:
        rows = [(r["student"], r["finding"]) for r in csv.DictReader(f)]
    for name, flagged in LM_FLAGGED.items():
        student = next(s.student for s in LM_ATTACKS if s.name == name)
        found = " ".join(finding for who, finding in rows if who == student)
        assert flagged in found, (batch.deployment, student, found)


def test_kernel_attackers_gain_nothing_and_the_honest_kernels_keep_every_point(
    batch: Batch,
) -> None:
    """a2c: reading the hidden checks and printing a score earns nothing, in both deployments;
    as the unprivileged user, rewriting the clocks and numpy's comparisons earns a slow kernel no
    speed credit and the honest notebook gets full marks, its speed items included (as root, the
    course suite grades both: ``COURSE_SUITE_AS_ROOT``)."""
    points = max_points(notebooks(batch.course, a2c_kernels.A)[0])
    kernels = carried(batch.deployment, KERNELS)
    got = {sub.name: batch.items.get((sub.student, a2c_kernels.A)) for sub in kernels}
    expected = {sub.name: sub.expected(points) for sub in kernels}
    assert got == expected, (batch.deployment, batch.output[-3000:])
    if batch.deployment == "unprivileged":
        assert sum(expected["honest"].values()) == 13
    for sub in kernels:  # what the attacks tried in the feedback kernel: all blocked
        name = a2c_kernels.A
        printed = _printed(batch.course / "autograded" / sub.student / name / f"{name}.ipynb")
        assert "ESCAPED" not in printed, (batch.deployment, sub.student, printed[:2000])
        if sub.name == "attack-read-checks-and-boast":
            assert printed.count("blocked:") == 4, printed[:2000]


def test_course_library_and_environment_are_unchanged(batch: Batch) -> None:
    changed = sorted(
        k
        for k in batch.before.keys() | batch.after.keys()
        if batch.before.get(k) != batch.after.get(k)
    )
    assert not changed, f"{batch.deployment}: changed {changed[:20]}"
    assert not os.path.exists(HOST_MARK), "an attacker wrote to the host's /tmp"
    daemons = [
        p.info
        for p in psutil.process_iter(["pid", "cmdline"])
        if DAEMON_MARK in " ".join(p.info["cmdline"] or [])
    ]
    assert not daemons, f"a daemon outlived its sandbox: {daemons}"


def test_every_attempt_was_blocked_in_the_feedback_kernel_too(batch: Batch) -> None:
    """The attackers' cells ran in the feedback kernel: each attempt printed that it was blocked."""
    for sub in ATTACKS:
        path = batch.course / "autograded" / sub.student / A / f"{A}.ipynb"
        if not path.exists():
            continue
        printed = _printed(path)
        where = printed.find("ESCAPED")
        assert where < 0, f"{sub.student}: {printed[max(0, where - 300) : where + 300]}"
    tamper = _printed(
        batch.course / "autograded" / "a1_functions--attack-tamper" / A / f"{A}.ipynb"
    )
    assert tamper.count("blocked:") == 13, tamper[:2000]  # every attempt ran, none got through


def test_no_secret_reaches_an_attackers_feedback(batch: Batch) -> None:
    hidden, answers = secret_lines(batch.source)
    for sub in ATTACKS:
        if sub.base == "solution":
            continue
        page = batch.course / "feedback" / sub.student / A / f"{A}.html"
        if not page.exists():
            continue
        text = page.read_text()
        for line in hidden + answers:
            assert line not in text, f"{sub.student}: {line!r} in its feedback"


def test_feedback_and_autograded_notebooks_are_inert(batch: Batch) -> None:
    student = "a1_functions--attack-hostile-html"
    page = (batch.course / "feedback" / student / A / f"{A}.html").read_text()
    honest = (batch.course / "feedback" / HONEST[0].student / A / f"{A}.html").read_text()
    scripts, attributes = _active_parts(page)
    for marker in MARKERS:
        assert not any(marker in s for s in scripts), f"{marker} in a <script>"
        assert not any(marker in a for a in attributes), f"{marker} in an attribute"
    assert len(scripts) == len(_active_parts(honest)[0]), "the page gained scripts"
    assert len(attributes) == len(_active_parts(honest)[1]), attributes
    nb = nbformat.read(batch.course / "autograded" / student / A / f"{A}.ipynb", as_version=4)
    mimes = {
        m for c in nb.cells if c.cell_type == "code" for o in c.outputs for m in o.get("data", {})
    }
    assert mimes <= {"text/plain", "text/html", "image/png"}, mimes
    assert "widgets" not in nb.metadata
    assert all(not c.metadata for c in nb.cells if c.cell_type == "raw")


def test_what_cannot_be_rendered_is_shown_as_text_and_costs_nothing(batch: Batch) -> None:
    """Issue 24 items 1-2: a pasted image (a markdown attachment) and 4 MB of markdown beside
    correct answers keep full marks (checked with the batch) and are shown as escaped text."""
    pasted = (
        batch.course / "feedback" / "a1_functions--hazard-pasted-image" / A / f"{A}.html"
    ).read_text()
    assert "could not be rendered" in pasted and "attachment:image.png" in pasted
    huge = batch.course / "feedback" / "a1_functions--hazard-huge-markdown" / A / f"{A}.html"
    text = huge.read_text()
    assert "too large to render" in text and "more characters not shown" in text
    honest = batch.course / "feedback" / HONEST[0].student / A / f"{A}.html"
    # what is shown of over-budget content is bounded, not the 4 MB handed in
    assert huge.stat().st_size < honest.stat().st_size + 4 * 1024**2 // 4, huge.stat().st_size


def test_one_students_tex_reaches_no_classmates_page_and_stays_in_its_budget(batch: Batch) -> None:
    """Issue 39 items 1 and 5: a student's ``\\renewcommand``/``\\def``/``\\gdef`` stayed
    defined in the grading process's one MathJax, and the SVG cache was shared: classmates graded
    after them saw the attacker's text. Each page now gets a typesetter of its own, in a sandbox
    with the page's budgets: the classmate graded next (same process) has every formula as the
    first honest student has it, and the attacker's 16 huge integrals give a bounded page."""
    feedback = batch.course / "feedback"
    first = (feedback / HONEST[0].student / A / f"{A}.html").read_text()
    last = (feedback / HONEST[1].student / A / f"{A}.html").read_text()
    attacker = feedback / "a1_functions--attack-tex-macros" / A / f"{A}.html"
    assert TEX_MARK not in first and TEX_MARK not in last, "a classmate's page shows the attack"
    count = first.count("<mjx-container")
    assert count > 20 and last.count("<mjx-container") == count, last.count("<mjx-container")
    svg = re.findall(r"<mjx-container.*?</mjx-container>", last, re.DOTALL)
    assert svg == re.findall(r"<mjx-container.*?</mjx-container>", first, re.DOTALL)
    assert attacker.stat().st_size < 12 * 1024**2, attacker.stat().st_size


def test_refused_files_are_never_followed_or_copied(batch: Batch) -> None:
    student = "a1_functions--attack-symlinks-beside"
    for folder in ("autograded", "feedback"):
        names = {p.name for p in (batch.course / folder / student / A).iterdir()}
        assert not names & {"gradebook.db", "answers.txt", "zero", "pipe"}, (folder, names)
    page = (batch.course / "feedback" / student / A / f"{A}.html").read_text()
    assert "Refused files" in page and "answers.txt" in page
    linked = (
        batch.course / "feedback" / "a1_functions--attack-symlink-notebook" / A / f"{A}.html"
    ).read_text()
    assert "Refused files" in linked


def test_integrity_report_names_what_was_undone_and_honest_students_are_clean(batch: Batch) -> None:
    import csv

    with open(batch.course / "integrity.csv", newline="", encoding="utf-8") as f:
        rows = [(r["student"], r["finding"]) for r in csv.DictReader(f)]
    findings = {s: [f for t, f in rows if t == s] for s in {t for t, _ in rows}}
    for sub in HONEST:
        assert sub.student not in findings, findings.get(sub.student)
    beside = " ".join(findings["a1_functions--attack-symlinks-beside"])
    assert "answers.txt is not a regular file" in beside and "gradebook.db" in beside, beside
    bogus = findings["a1_functions--attack-bogus-metadata"]
    assert "cell test_tanh was deleted (restored)" in bogus, bogus
    built_in = " ".join(findings["a1_functions--attack-built-in"])
    assert "mul uses torchlight's built-in Functions" in built_in, built_in
    autograd = " ".join(findings["a1_functions--attack-library-autograd"])
    assert "Tanh.backward drives torchlight's own autograd" in autograd, autograd
    assert "Mul.backward drives" in autograd and "Exp.backward drives" in autograd, autograd
    numeric = " ".join(findings["a1_functions--attack-relative-step"])
    for op in ("Mul", "Div", "Log", "ReLU"):  # issue 24 item 5: flagged, whatever they score
        assert f"{op}.backward computes a numerical derivative" in numeric, numeric
    # no honest student gets nbgrader's checksum warning any more: a warning now means an edit
    assert "Attribute 'checksum'" not in batch.output
    assert "gradebook changed outside the grader" not in batch.output


def test_graded_ops_own_backward_is_unreachable_from_graded_code(batch: Batch) -> None:
    """Issue 24 item 4: the hidden checks ran against the grader-built library: the backwards
    that handed the derivative to the library (or to PyTorch) were told to write it."""
    page = (
        batch.course / "feedback" / "a1_functions--attack-library-autograd" / A / f"{A}.html"
    ).read_text()
    for op in ("Tanh", "Mul"):
        assert f"write it yourself: {op}&#x27;s backward" in page or (
            f"write it yourself: {op}'s backward" in page
        ), page[-3000:]


def test_a_change_to_the_gradebook_is_reported_naming_the_student() -> None:

    from torchlight_grader.course import manage as tool

    key = ("manual score", "alice", A, A, "test_mul")
    before = {key: 0.0, ("points", A, A, "test_mul"): 1.0}
    assert tool.gradebook_changes(before, dict(before)) == []
    changed = tool.gradebook_changes(before, {**before, key: 1.0})
    assert changed and "alice" in changed[0], changed
    assert tool.gradebook_changes(before, {**before, ("points", A, A, "test_mul"): 5.0})
    assert tool.gradebook_changes({}, {key: 3.0}), "a manual score that appeared"


def test_a_broken_notebook_costs_only_its_student(batch: Batch) -> None:
    assert batch.returncode == 1, batch.output[-3000:]
    assert (
        "FAILED autograde: a1_functions of student a1_functions--attack-truncated-json"
        in batch.output
    )
    for sub in BATCH:
        if sub.name == "attack-truncated-json":
            continue
        assert (batch.course / "feedback" / sub.student / A / f"{A}.html").exists(), sub.student


# ------------------------------------------------------------------------------ helpers
def _printed(path: Path) -> str:
    """Everything the notebook's code cells printed in the feedback kernel run."""
    nb = nbformat.read(path, as_version=4)
    return "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )


class _Active(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.attributes: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")
        # what can run script: event handlers and script-capable URLs (an id that merely
        # contains the text of a heading is inert)
        for k, v in attrs:
            value = (v or "").strip().lower()
            if k.startswith("on") or value.startswith(("javascript:", "vbscript:", "data:text")):
                self.attributes.append(f"{k}={v}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def _active_parts(page: str) -> tuple[list[str], list[str]]:
    parser = _Active()
    parser.feed(page)
    return parser.scripts, parser.attributes


def _config_with(course: Path, line: str) -> None:
    """Put ``line`` first inside the config's guarded block."""
    config = course / "nbgrader_config.py"
    text = config.read_text()
    config.write_text(text.replace("\ntry:\n", f"\ntry:\n    {line}\n", 1))


@pytest.mark.parametrize("breakage", ["missing package", "syntax error"])
def test_a_course_config_that_fails_to_load_fails_closed(tmp_path: Path, breakage: str) -> None:
    """nbgrader goes on with its defaults when the config raises: its stock Execute would run the
    student's notebook in an ordinary kernel, as the grader. A submission that writes outside its
    sandbox proves whether that happened."""
    from torchlight_grader.nbgrader.preflight import CourseConfigError, check_config

    course = released_course(tmp_path, "a1_functions")
    source, release = notebooks(course, "a1_functions")
    escaped = tmp_path / "escaped"
    nb = nbformat.from_dict(release)
    cell = nbformat.v4.new_code_cell(f"open({str(escaped)!r}, 'w').write('ran as the grader')")
    cell.pop("id", None)  # the course's notebooks are nbformat 4.4
    nb.cells.insert(1, cell)
    submit(course, "mallory", "a1_functions", nb)
    if breakage == "missing package":
        _config_with(course, "import a_package_that_is_not_installed")
    else:
        config = course / "nbgrader_config.py"
        config.write_text(config.read_text() + "\nthis is not python\n")
    with pytest.raises(CourseConfigError, match="(refuses to grade|would grade with its defaults)"):
        check_config(course)  # what the make targets run first
    if breakage == "syntax error":
        return  # nothing of the config runs, so only check_config stands in front of nbgrader
    # The instructor runs nbgrader directly (or the formgrader's button): the config's own guard
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "nbgrader"), "autograde", "a1_functions", "--force"],
        cwd=course, capture_output=True, text=True, check=False,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )  # fmt: skip
    assert proc.returncode != 0
    assert "refusing to run student code" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert not escaped.exists(), "the student's code ran outside the sandbox"
