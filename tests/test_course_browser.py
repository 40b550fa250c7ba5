"""The instructor's and the student's pages of the course, in Debian's chromium (playwright).

One module-scoped fixture builds a temporary course with the real nbgrader CLI
(``submissions/pipeline.py``): assignment 1, with a written-response cell added (graded by hand,
as an instructor may add to any assignment), released; two submissions (``bob``, the catalog's
``sign-error``: one item fails its hidden checks; ``carol``, the solution) autograded in one
batch, bob's feedback generated. Then:

- ``make course-lab`` (the very target, on a free port, with a token) serves the course; in
  JupyterLab the instructor opens the Formgrader (nbgrader's menu command): every assignment of
  the course is listed, no "exchange directory ... does not exist" banner is shown, and the
  graded submission shows with its score;
- the feedback page, alone in an empty folder (nbgrader's ``release_feedback`` /
  ``fetch_feedback`` hand the student the ``.html`` file and nothing beside it), opened from
  ``file://`` in a 600-pixel-wide window, with every request that is not a local file refused
  (a CDN fails): the failed item's verdict is shown whole (wrapped, nothing cut off or scrolled
  away), the table of contents names every test cell with its score, the math is typeset by
  MathJax (no raw TeX left) and MathJax's safe mode is on;
- manual grading in the Formgrader, offline (every request outside the server refused): bob's
  grading page typesets its math with the server's own MathJax 2, shows autograde's scores;
  the instructor gives points and a comment on the written response and overrides the failed
  item, goes Next to carol (full credit) and Previous back to bob, where all of it is still
  there; the totals read back from the Formgrader's pages and from the gradebook;
- then bob resubmits (a corrected notebook in the exchange), ``make course-collect`` takes it
  (latest wins) and reports the manual scores given to the old version, the regrade uses
  autograde's scores, never the stale ones, and carol's manual grade is untouched.

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); never ``playwright install``.
"""

from __future__ import annotations

import copy
import csv
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import nbformat
import pytest
from submissions import a1_functions
from submissions.catalog import build
from submissions.pipeline import (
    ROOT,
    make_course,
    max_points,
    nbgrader,
    notebooks,
    stop_group,
    submit,
)
from test_browser import CHROMIUM, CHROMIUM_ARGS, free_port, wait_for_server

from torchlight_grader.nbgrader.collect import COURSE_ID

# The first test's setup builds and grades the course and starts the lab: minutes on a busy machine.
pytestmark = [pytest.mark.browser, pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.timeout(600)]

A = "a1_functions"
STUDENT = "bob"
SUBMISSION = next(s for s in a1_functions.CATALOG if s.name == "sign-error")
CLASSMATE = "carol"  # the solution: Next / Previous need two submissions
SOLUTION = next(s for s in a1_functions.CATALOG if s.name == "solution")
#: The written-response cell added to the test course's assignment 1 (graded by hand).
WRITTEN = "explain_chain"
WRITTEN_POINTS = 2.0
QUESTION = r"""**Written answer (graded by hand).** In one sentence: why does `Mul.backward` return
$G \cdot y$ for $x$, with $\partial (x y) / \partial x = y$?"""
ANSWERS = {
    STUDENT: "Because of the chain rule.",
    CLASSMATE: "The chain rule: $G$ times the local derivative $y$.",
}
FLAGS = ("--Execute.timeout=10", "--SandboxedExecute.total_timeout=120",
         "--IsolatedGrader.seed=20260115", "--IsolatedGrader.cell_timeout=10")  # fmt: skip
NARROW = {"width": 600, "height": 900}


@dataclass
class Course:
    path: Path
    points: dict[str, float]  # grade_id -> max points of the test cells (assignment 1)
    scores: dict[str, float]  # grade_id -> bob's expected points
    verdicts: dict[str, str]  # grade_id -> the failing items' verdict (the autograded output)
    solution: Any  # the notebook carol hands in (and bob resubmits)
    lab: Lab | None = None  # make course-lab on it (course_lab)


def add_written_response(course: Path) -> None:
    """Assignment 1 of the test course gets a question and a written-response cell after its
    first test cell (``grade`` and ``solution``: nbgrader leaves it to the Formgrader)."""
    path = course / "source" / A / f"{A}.ipynb"
    nb = nbformat.read(path, as_version=4)
    at = 1 + next(
        i
        for i, c in enumerate(nb.cells)
        if c.metadata.get("nbgrader", {}).get("grade_id") == "test_mul"
    )
    meta = {
        "grade": False,
        "grade_id": f"{WRITTEN}_md",
        "locked": True,
        "schema_version": 3,
        "solution": False,
    }
    question = nbformat.v4.new_markdown_cell(QUESTION, metadata={"nbgrader": meta})
    meta = {"grade": True, "grade_id": WRITTEN, "locked": False, "points": WRITTEN_POINTS,
            "schema_version": 3, "solution": True}  # fmt: skip
    answer = nbformat.v4.new_markdown_cell(
        "The chain rule: $G$ times $y$.", metadata={"nbgrader": meta}
    )
    if nb.nbformat_minor < 5:  # the course's notebooks are nbformat 4.4: cells without ids
        question.pop("id"), answer.pop("id")
    nb.cells[at:at] = [question, answer]
    nbformat.write(nb, path)


def handed_in(sub: Any, student: str, source: Any, release: Any) -> Any:
    nb = build(sub, source, release)
    next(c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] == WRITTEN).source = ANSWERS[
        student
    ]
    return nb


@dataclass
class Lab:
    """``make course-lab`` on the course, started as soon as the course is released."""

    server: subprocess.Popen[bytes]
    base: str
    token: str
    log: Any
    log_path: Path


def start_course_lab(course: Path) -> Lab:
    port, token = free_port(), secrets.token_hex(16)
    home = course.parent / "jupyter"
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
    }
    lab_args = (f"--no-browser --port={port} --ServerApp.port_retries=0 --ServerApp.ip=127.0.0.1 "
                f"--IdentityProvider.token={token} --LabApp.expose_app_in_browser=True")  # fmt: skip
    log_path = course.parent / "course-lab.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed by the course fixture
    server = subprocess.Popen(
        ["make", "-s", "-C", str(ROOT), "course-lab", f"COURSE={course}", f"LAB_ARGS={lab_args}"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    return Lab(server, f"http://127.0.0.1:{port}", token, log, log_path)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Course]:
    """The course, released, two submissions autograded, bob's feedback; ``make course-lab``
    starts right after the release and comes up while the grading runs (``course_lab`` waits
    for it): the Formgrader reads the gradebook on each request."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)")
    path = make_course(tmp_path_factory.mktemp("course_browser"))
    add_written_response(path)
    nbgrader(path, "generate_assignment", A, "--force")
    lab = start_course_lab(path)
    try:
        yield _graded(path, lab)
    finally:
        stop_group(lab.server, timeout=20)
        lab.log.close()


def _graded(path: Path, lab: Lab) -> Course:
    source, release = notebooks(path, A)
    submit(path, STUDENT, A, handed_in(SUBMISSION, STUDENT, source, release))
    solution = handed_in(SOLUTION, CLASSMATE, source, release)
    carol = copy.deepcopy(solution)  # ... who also edits a locked cell (restored: no points lost)
    next(
        c for c in carol.cells if c.metadata["nbgrader"]["grade_id"] == "intro"
    ).source += "\nEdited."
    submit(path, CLASSMATE, A, carol)
    nbgrader(path, "autograde", A, "--force", *FLAGS)
    # bob's page as it is without Node.js (MathJax inlined), kept aside; then the real one.
    nbgrader(
        path, "generate_feedback", A, "--force", f"--student={STUDENT}", "--FeedbackExporter.node="
    )
    page = path / "feedback" / STUDENT / A / f"{A}.html"
    page.rename(path.parent / "feedback-mathjax-inlined.html")
    nbgrader(path, "generate_feedback", A, "--force", f"--student={STUDENT}")
    points = max_points(source)
    scores = SUBMISSION.expected(points)
    assert 0 < sum(scores.values()) < sum(points.values()), "the submission should fail an item"
    autograded = nbformat.read(path / "autograded" / STUDENT / A / f"{A}.ipynb", as_version=4)
    verdicts = {
        cell.metadata["nbgrader"]["grade_id"]: cell.outputs[0]["evalue"]
        for cell in autograded.cells
        if cell.get("outputs") and cell.outputs[0].get("output_type") == "error"
    }
    assert set(verdicts) == {g for g, s in scores.items() if s < points[g]}, verdicts
    return Course(path, points, scores, verdicts, solution, lab)


def test_integrity_report_puts_tampering_in_its_own_section(course: Course) -> None:
    """integrity.csv (torchlight_grader/course/manage.py): carol's edit in the "tampering" section; bob's wrong
    answer (it fails its visible test too) nowhere."""
    from torchlight_grader.course import manage as tool

    with open(tool.integrity_report(course.path), newline="", encoding="utf-8") as f:
        rows = [(r["section"], r["student"], r["finding"]) for r in csv.DictReader(f)]
    assert rows == [("tampering", CLASSMATE, "locked cell intro was edited (restored)")], rows


@pytest.fixture(scope="module")
def browser(course: Course) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def offline_context(
    browser: Any, allowed: tuple[str, ...], **options: Any
) -> tuple[Any, list[str]]:
    """A browser context that refuses every request outside ``allowed`` (URL prefixes), as a
    machine without internet would; returns it and the list of refused URLs."""
    context = browser.new_context(**options)
    refused: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(allowed):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return context, refused


@pytest.fixture(scope="module")
def course_lab(course: Course) -> tuple[str, str]:
    """``make course-lab`` on the course (started by ``course``), up; ``(base url, token)``."""
    lab = course.lab
    assert lab is not None
    wait_for_server(lab.base, lab.token, lab.server, lab.log, lab.log_path, "make course-lab",
                    seconds=90)  # fmt: skip
    return lab.base, lab.token


def test_formgrader_in_course_lab_shows_the_course_and_the_graded_submission(
    course: Course, course_lab: tuple[str, str], browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    base, token = course_lab
    context, refused = offline_context(browser, (base,), viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/lab?reset&token={token}")
    page.wait_for_function(
        "() => window.jupyterapp && jupyterapp.commands.hasCommand('nbgrader:open-formgrader')",
        timeout=60_000,
    )
    # What the instructor's menu entry Nbgrader > Formgrader runs.
    page.evaluate("() => window.jupyterapp.commands.execute('nbgrader:open-formgrader')")
    frame = page.frame_locator("iframe[src*='formgrader']")
    table = frame.locator("table")
    names = sorted(p.name for p in (course.path / "source").iterdir() if p.is_dir())
    assert A in names and len(names) > 1, names
    for name in names:
        expect(table.locator("td", has_text=re.compile(f"^{name}$"))).to_be_visible(timeout=60_000)
    row = table.locator("tr", has=frame.locator("td", has_text=re.compile(f"^{A}$")))
    submissions = row.locator("a", has_text=re.compile(r"^2$"))  # its "# Submissions" link
    expect(submissions).to_have_count(1)
    body = frame.locator("body")
    expect(body).not_to_contain_text("does not exist")  # the exchange banner
    page.screenshot(path=str(tmp_path / "formgrader.png"))

    # The submission list of assignment 1: the graded student with the score.
    submissions.click()
    student = frame.locator("tr", has=frame.locator("td", has_text=re.compile(f"^{STUDENT}$")))
    score = f"{sum(course.scores.values()):g} / {sum(course.points.values()) + WRITTEN_POINTS:g}"
    expect(student).to_contain_text("needs manual grading", timeout=30_000)  # the written answer
    expect(student).to_contain_text(score)
    expect(body).not_to_contain_text("does not exist")
    page.screenshot(path=str(tmp_path / "submissions.png"))
    context.close()
    assert not refused, f"the Formgrader asked for outside addresses: {refused}"


@pytest.mark.parametrize("math", ["typeset at feedback time", "MathJax inlined"])
def test_feedback_page_offline_and_narrow(
    course: Course, browser: Any, tmp_path: Path, math: str
) -> None:
    """The page as generate_feedback writes it (the math typeset into SVG by Node.js and the
    installed MathJax 3: no script in the page) and as it is without Node.js (MathJax inlined)."""
    from playwright.sync_api import expect

    # The student gets the .html file alone (release_feedback/fetch_feedback copy nothing else).
    page_path = tmp_path / "inbox" / f"{A}.html"
    page_path.parent.mkdir()
    if math == "MathJax inlined":
        shutil.copy(course.path.parent / "feedback-mathjax-inlined.html", page_path)
    else:
        shutil.copy(course.path / "feedback" / STUDENT / A / f"{A}.html", page_path)
    size = page_path.stat().st_size
    print(f"feedback page ({math}): {size / 1e6:.2f} MB")
    # Nothing but the page itself may load: no CDN, and no file beside it.
    context, refused = offline_context(browser, (page_path.as_uri(),), viewport=NARROW)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_path.as_uri())

    # Each test cell named, with its score, in the table of contents, linking to the cell.
    toc = page.locator("#toc li")
    for grade_id, points in course.points.items():
        entry = toc.filter(has=page.locator(f"a[href='#{grade_id}']"))
        expect(entry).to_have_count(1)
        expect(entry).to_contain_text(grade_id)
        expect(entry).to_contain_text(f"{course.scores[grade_id]:.1f} / {points:.1f}")
        assert page.locator(f"a[name='{grade_id}']").count() == 1, grade_id

    # Each failed item's verdict: all of it in the page, wrapped, nothing cut off.
    for grade_id, verdict in course.verdicts.items():
        cell = page.locator("div.cell", has=page.locator(f"a[name='{grade_id}']"))
        box = cell.locator(".output_error pre")
        expect(box).to_have_count(1)
        box.scroll_into_view_if_needed()
        text = " ".join(box.inner_text().split())
        assert " ".join(verdict.split()) in text, f"{grade_id}: the verdict is not all shown"
        fits = box.evaluate(FITS)
        assert fits["problems"] == [], f"{grade_id}: the verdict is cut off: {fits}"
        box.screenshot(path=str(tmp_path / f"verdict_{grade_id}.png"))

    # The math: typeset by MathJax (SVG), with no TeX left as text in the rendered markdown.
    page.wait_for_function("() => document.querySelectorAll('mjx-container svg').length > 0",
                           timeout=30_000)  # fmt: skip
    if math == "MathJax inlined":
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
        # The safe extension is on: TeX cannot make a javascript: link.
        link = page.evaluate("() => MathJax.tex2svg('\\\\href{javascript:alert(1)}{x}').outerHTML")
        assert "<svg" in link and "javascript" not in link, link
        # TeX cannot ask for more packages (\require would load a file, or fetch one).
        required = (
            "async () => (await MathJax.tex2svgPromise('\\\\require{torchlight} x')).outerHTML"
        )
        assert "<svg" in page.evaluate(required)
        assert size > 2_000_000, size  # MathJax itself is 2.3 MB
    else:
        # No script at all: the page also works where scripts do not run (JupyterLab's HTML
        # viewer of an untrusted file), and it is a seventh of the inlined page's size.
        assert page.evaluate("() => document.scripts.length") == 0
        assert size < 600_000, f"{size} bytes"
        assert page.locator("code.tex-error").count() == 0
    raw = page.evaluate(RAW_TEX)
    assert raw == [], f"TeX not typeset: {raw[:5]}"
    page.screenshot(path=str(tmp_path / "feedback.png"), full_page=True)
    context.close()
    assert not refused, f"the feedback page asked for more than itself: {refused}"
    assert not errors, f"errors in the browser console: {errors}"


#: Problems that would hide part of an element: wider than its box (scrolled), past the right
#: edge of the window, or clipped by an ancestor that hides overflow.
FITS = """
(el) => {
  const problems = [];
  const rect = el.getBoundingClientRect();
  if (el.scrollWidth > el.clientWidth) {
    problems.push(`scrollWidth ${el.scrollWidth} > clientWidth ${el.clientWidth}`);
  }
  if (rect.left < 0 || rect.right > window.innerWidth) {
    problems.push(`box ${rect.left}..${rect.right} outside 0..${window.innerWidth}`);
  }
  for (let a = el.parentElement; a; a = a.parentElement) {
    const r = a.getBoundingClientRect();
    const clips = getComputedStyle(a).overflowX !== "visible";
    if (clips && (rect.left < r.left - 0.5 || rect.right > r.right + 0.5)) problems.push(`clipped by ${a.className}`);
  }
  return {problems, width: rect.width, scrollWidth: el.scrollWidth, clientWidth: el.clientWidth};
}
"""

#: Text of the rendered markdown, outside MathJax's output, that still looks like TeX.
RAW_TEX = r"""
() => {
  const found = [];
  for (const cell of document.querySelectorAll(".text_cell_render")) {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll("mjx-container, code, pre").forEach((m) => m.remove());
    const text = copy.textContent;
    for (const m of text.matchAll(/\$[^$]+\$|\\[a-zA-Z]+/g)) found.push(m[0]);
  }
  return found;
}
"""


@dataclass
class HandGraded:
    """What the instructor entered in the Formgrader (``graded_by_hand``)."""

    ids: dict[str, str]  # student -> submission id of the notebook
    manual: dict[str, dict[str, float]]  # student -> grade_id -> manual score given
    extra: dict[str, float]  # grade_id -> extra credit given to bob
    comment: str  # the comment given on bob's written answer
    override: str  # bob's failed test cell, given partial credit by hand


def gradebook_state(course: Course) -> dict[str, dict[str, Any]]:
    """Per student: the total score and each cell's manual score and comment, from the gradebook."""
    from nbgrader.api import Gradebook

    state: dict[str, dict[str, Any]] = {}
    with Gradebook(f"sqlite:///{course.path / 'gradebook.db'}") as gb:
        for student in (STUDENT, CLASSMATE):
            nb = gb.find_submission_notebook(A, A, student)
            state[student] = {
                "score": nb.score,
                "needs_manual_grade": nb.needs_manual_grade,
                "manual": {g.name: g.manual_score for g in nb.grades if g.manual_score is not None},
                "extra": {g.name: g.extra_credit for g in nb.grades if g.extra_credit},
                "comments": {c.name: c.manual_comment for c in nb.comments if c.manual_comment},
            }
    return state


def formgrader_totals(page: Any, base: str) -> dict[str, tuple[str, bool]]:
    """Per student: the Overall Score column ("8.5 / 14") of the Formgrader's list of the
    notebook's submissions, and whether its "Needs Manual Grade?" column is ticked."""
    from playwright.sync_api import expect

    page.goto(f"{base}/formgrader/gradebook/{A}/{A}")
    rows = page.locator("tbody#main-table tr", has=page.locator("td.score"))
    expect(rows).to_have_count(2, timeout=30_000)
    page.locator("#toggle_names").click()  # "Show All Names"
    totals = {}
    for student in (STUDENT, CLASSMATE):
        name = page.locator("a.name-shown", has_text=re.compile(f"^{student}$"))
        row = rows.filter(has=name)
        expect(row).to_have_count(1)
        expect(name).to_be_visible()
        needs = row.locator("td.needs-manual-grade span.glyphicon-ok").count() == 1
        totals[student] = (row.locator("td.score").inner_text().strip(), needs)
    return totals


def grading_page(page: Any, course: Course, errors: list[str]) -> None:
    """Wait until nbgrader's grading page has loaded its scores and MathJax has typeset it."""
    from playwright.sync_api import Error, expect

    expect(page.locator(f"input.score#{WRITTEN}")).to_have_count(1, timeout=30_000)
    try:
        page.wait_for_function("() => window.MathJax && MathJax.loaded === true", timeout=60_000)
    except Error as exc:
        pytest.fail(f"the grading page's MathJax did not load ({exc.message.splitlines()[0]}); "
                    f"errors on the page: {errors}")  # fmt: skip
    for grade_id in course.points:  # autograde's score of every test cell, from the server
        expect(page.locator(f"input.score#{grade_id}")).to_have_attribute(
            "placeholder", re.compile(r"^[0-9.]+$"), timeout=30_000
        )


def enter(page: Any, selector: str, value: str, api: str) -> None:
    """Type ``value`` into a score or comment field and leave it (the Formgrader saves on
    change); wait until the server has answered the save."""
    with page.expect_response(
        lambda r: f"/formgrader/api/{api}/" in r.url and r.request.method == "PUT"
    ) as saved:
        page.fill(selector, value)
        page.locator(selector).press("Tab")
    assert saved.value.ok, f"saving {selector} failed: {saved.value.status} {saved.value.text()}"


@pytest.fixture(scope="module")
def graded_by_hand(course: Course, course_lab: tuple[str, str], browser: Any,
                   tmp_path_factory: pytest.TempPathFactory) -> HandGraded:  # fmt: skip
    """The Formgrader's whole manual-grading flow in Chromium, offline (only the server itself
    may be reached: the grading page used to need MathJax from cdnjs)."""
    from playwright.sync_api import expect

    shots = tmp_path_factory.mktemp("formgrade")
    base, token = course_lab
    context, refused = offline_context(browser, (base,), viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/formgrader/?token={token}")  # the token becomes a cookie
    listed = page.request.get(f"{base}/formgrader/api/submitted_notebooks/{A}/{A}").json()
    ids = {nb["student"]: nb["id"] for nb in listed}
    assert sorted(ids) == [STUDENT, CLASSMATE], listed
    # The Formgrader's order (the gradebook's): bob first, Next goes to carol; else Previous does.
    first = {nb["student"]: nb["index"] for nb in listed}[STUDENT] == 0
    to_carol, to_bob = ("li.next a", "li.previous a") if first else ("li.previous a", "li.next a")
    bob_at, carol_at = ("1 / 2", "2 / 2") if first else ("2 / 2", "1 / 2")
    failed = next(g for g, v in course.scores.items() if v < course.points[g])
    before = formgrader_totals(page, base)
    assert before[STUDENT] == (
        f"{sum(course.scores.values()):g} / {sum(course.points.values()) + WRITTEN_POINTS:g}",
        True,
    ), before

    # bob's notebook: the math typeset by the server's MathJax 2, autograde's scores shown.
    page.goto(f"{base}/formgrader/submissions/{ids[STUDENT]}/")
    grading_page(page, course, errors)
    heading = page.locator(".panel-heading .panel-title")
    expect(heading).to_contain_text(f"Submission {bob_at}")
    assert page.locator(".text_cell_render .MathJax").count() > 0, "no math typeset"
    for grade_id, points in course.scores.items():  # autograde's (the placeholder), no override
        score = page.locator(f"input.score#{grade_id}")
        expect(score).to_have_attribute("placeholder", f"{points:g}")
        expect(score).to_have_value("")
    expect(page.locator(f"input.score#{WRITTEN}")).to_have_value("")  # needs a grade by hand
    # Points and a comment on the written answer; partial credit on the failed test cell.
    comment = "Right idea: now say which local derivative, $y$."
    enter(page, f"input.score#{WRITTEN}", "1.5", "grade")
    enter(page, f"#{WRITTEN}-comment", comment, "comment")
    enter(page, f"input.score#{failed}", "0.5", "grade")
    enter(page, f"input#{WRITTEN}_extra_credit", "0.25", "grade")
    page.screenshot(path=str(shots / "bob.png"), full_page=True)

    # Next (or Previous): carol's notebook; her written answer gets full credit (the button).
    page.locator(to_carol).click()
    expect(heading).to_contain_text(f"Submission {carol_at}", timeout=30_000)
    assert page.url.rstrip("/").endswith(ids[CLASSMATE]), page.url
    grading_page(page, course, errors)
    panel = page.locator(".nbgrader_cell", has=page.locator(f"input.score#{WRITTEN}"))
    with page.expect_response(
        lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"
    ):
        # a DOM click on the button itself: the fixed navigation bar may lie over it after the
        # page scrolled to the field it focuses (a pointer click then never lands)
        panel.locator("button.full-credit").dispatch_event("click")
    expect(page.locator(f"input.score#{WRITTEN}")).to_have_value(f"{WRITTEN_POINTS:g}")

    # The other way: back to bob, where everything entered is still there (from the server).
    page.locator(to_bob).click()
    expect(heading).to_contain_text(f"Submission {bob_at}", timeout=30_000)
    grading_page(page, course, errors)
    expect(page.locator(f"input.score#{WRITTEN}")).to_have_value("1.5")
    expect(page.locator(f"input.score#{failed}")).to_have_value("0.5")
    expect(page.locator(f"#{WRITTEN}-comment")).to_have_value(comment)
    expect(page.locator(f"input#{WRITTEN}_extra_credit")).to_have_value("0.25")
    context.close()
    assert not refused, f"the Formgrader asked for outside addresses: {refused}"
    assert not errors, f"errors on the grading page: {errors}"
    return HandGraded(ids, {STUDENT: {WRITTEN: 1.5, failed: 0.5}, CLASSMATE: {WRITTEN: WRITTEN_POINTS}},
                      {WRITTEN: 0.25}, comment, failed)  # fmt: skip


def test_manual_grading_in_the_formgrader_offline_updates_the_totals(
    course: Course, course_lab: tuple[str, str], browser: Any, graded_by_hand: HandGraded
) -> None:
    """Manual grading offline: points, a comment and an override entered in the Formgrader
    (``graded_by_hand``) are in the gradebook and in the Formgrader's totals. It used to stop at
    "MathJax is not defined" (nbgrader's grading page loaded MathJax 2 from cdnjs)."""
    base, token = course_lab
    autograded = sum(course.scores.values())
    bob = autograded - course.scores[graded_by_hand.override] + 0.5 + 1.5 + 0.25
    carol = sum(course.points.values()) + WRITTEN_POINTS
    state = gradebook_state(course)
    assert state[STUDENT]["manual"] == graded_by_hand.manual[STUDENT], state
    assert state[STUDENT]["comments"] == {WRITTEN: graded_by_hand.comment}, state
    assert state[STUDENT]["extra"] == graded_by_hand.extra, state
    assert state[CLASSMATE]["manual"] == graded_by_hand.manual[CLASSMATE], state
    assert (state[STUDENT]["score"], state[CLASSMATE]["score"]) == (bob, carol), state
    assert not state[STUDENT]["needs_manual_grade"] and not state[CLASSMATE]["needs_manual_grade"]
    context, refused = offline_context(browser, (base,), viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.goto(f"{base}/formgrader/?token={token}")
    total = f"{sum(course.points.values()) + WRITTEN_POINTS:g}"
    assert formgrader_totals(page, base) == {
        STUDENT: (f"{bob:g} / {total}", False), CLASSMATE: (f"{carol:g} / {total}", False)
    }  # fmt: skip
    context.close()
    assert not refused, refused


def test_long_verdicts_wrap_in_the_formgrader(
    course: Course, course_lab: tuple[str, str], browser: Any, tmp_path: Path
) -> None:
    """Issue 40 item 5: the Formgrader cut a long verdict at the right edge of its cell (one
    line in a <pre>, bootstrap's overflow). On a narrow window every output of the grading page
    wraps now, the failed cell's verdict included: nothing is wider than its box."""
    base, token = course_lab
    context, refused = offline_context(browser, (base,), viewport={"width": 700, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/formgrader/?token={token}")
    listed = page.request.get(f"{base}/formgrader/api/submitted_notebooks/{A}/{A}").json()
    ids = {nb["student"]: nb["id"] for nb in listed}
    page.goto(f"{base}/formgrader/submissions/{ids[STUDENT]}/")
    grading_page(page, course, errors)
    widths = page.evaluate(
        """() => Array.from(document.querySelectorAll('div.output_area pre')).map(
            p => [p.scrollWidth, p.clientWidth, p.innerText.slice(0, 60)])"""
    )
    page.screenshot(path=str(tmp_path / "narrow-grading-page.png"), full_page=True)
    context.close()
    verdicts = [w for w in widths if "HiddenCheckFailed" in w[2] or "seed" in w[2]]
    assert verdicts, f"no failed verdict on the page: {widths}"
    cut = [w for w in widths if w[0] > w[1] + 1]
    assert cut == [], f"outputs wider than their box (scrollWidth, clientWidth, text): {cut}"
    assert not refused and not errors, (refused, errors)


def _make(target: str, course: Course, *args: str) -> str:
    run = subprocess.run(["make", "-s", "-C", str(ROOT), target, f"COURSE={course.path}", *args],
                         capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def test_a_regrade_answer_typed_in_the_formgrader_reaches_the_students_page(
    course: Course, course_lab: tuple[str, str], browser: Any, graded_by_hand: HandGraded
) -> None:
    """Issue 40, round two, item 4: carol asks for a regrade through the exchange (her notebook as
    it was, a regrade-request.txt beside it); `make course-regrades` lists it open; the instructor
    types the answer as a comment in the real Formgrader, in Chromium, offline; the queue says
    answered, and `make course-feedback-release` gives carol a page with the answer. Her grade is
    the same throughout."""
    from playwright.sync_api import expect

    exchange = course.path.parent / "exchange"
    entry = exchange / COURSE_ID / "inbound" / f"{CLASSMATE}+{A}+2026-01-15 12:00:00.000000 UTC+q"
    entry.mkdir(parents=True)  # what carol's `nbgrader submit` leaves in the exchange
    shutil.copyfile(course.path / "submitted" / CLASSMATE / A / f"{A}.ipynb", entry / f"{A}.ipynb")
    (entry / "regrade-request.txt").write_text("explain_chain: I named the local derivative.\n")
    try:
        out = _make("course-collect", course, f"EXCHANGE={exchange}", f"ASSIGNMENT={A}")
    finally:
        shutil.rmtree(entry)  # the resubmission test (last) collects bob's alone
    assert (
        f"REGRADE REQUEST from {CLASSMATE}" in out and "a regrade request, the same notebook" in out
    ), out
    assert "regrade requests: 1 open, 0 answered" in _make("course-regrades", course)
    before = gradebook_state(course)[CLASSMATE]
    answer = "Regrade: agreed, you named it; the full credit stays (answered in the Formgrader)."
    base, token = course_lab
    context, refused = offline_context(browser, (base,), viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/formgrader/?token={token}")
    page.goto(f"{base}/formgrader/submissions/{graded_by_hand.ids[CLASSMATE]}/")
    grading_page(page, course, errors)
    enter(page, f"#{WRITTEN}-comment", answer, "comment")
    expect(page.locator(f"#{WRITTEN}-comment")).to_have_value(answer)
    context.close()
    assert not refused and not errors, (refused, errors)
    assert "regrade requests: 0 open, 1 answered" in _make("course-regrades", course)
    _make("course-feedback-release", course, f"EXCHANGE={exchange}", f"ASSIGNMENT={A}")
    page_html = (course.path / "feedback" / CLASSMATE / A / f"{A}.html").read_text()
    assert answer in page_html, "the answer typed in the Formgrader is not on carol's page"
    after = gradebook_state(course)[CLASSMATE]
    assert (after["score"], after["manual"]) == (before["score"], before["manual"])
    assert after["comments"] == {**before["comments"], WRITTEN: answer}


def test_resubmission_after_a_manual_grade_reports_the_stale_scores(
    course: Course, course_lab: tuple[str, str], browser: Any, graded_by_hand: HandGraded
) -> None:
    """bob resubmits a corrected notebook after being graded by hand: ``make course-collect``
    takes it (latest wins), clears and reports the manual scores of the replaced version
    (collect/A-stale-manual.csv), and the regrade counts autograde's scores, never the stale ones;
    carol's manual grade stays. Runs last: it changes bob's submission."""
    exchange = course.path.parent / "exchange"
    entry = exchange / COURSE_ID / "inbound" / f"{STUDENT}+{A}+2026-01-16 09:00:00.000000 UTC+r"
    entry.mkdir(parents=True)  # what bob's `nbgrader submit` leaves in the exchange
    nbformat.write(course.solution, entry / f"{A}.ipynb")
    collected = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "course-collect", f"COURSE={course.path}",
         f"EXCHANGE={exchange}", f"ASSIGNMENT={A}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    out = collected.stdout + collected.stderr
    assert collected.returncode == 0, out
    assert f"collected {STUDENT} " in out, out
    stale = course.path / "collect" / f"{A}-stale-manual.csv"
    rows = {
        (r["student"], r["cell"]): (
            r["old_manual_score"]
            if r["cell"].endswith("(comment)")
            else float(r["old_manual_score"])
        )
        for r in csv.DictReader(stale.open())
    }
    assert rows == {
        **{(STUDENT, g): v for g, v in graded_by_hand.manual[STUDENT].items()},
        **{(STUDENT, f"{g} (extra credit)"): v for g, v in graded_by_hand.extra.items()},
        (STUDENT, f"{WRITTEN} (comment)"): graded_by_hand.comment,
    }, rows
    for grade_id in graded_by_hand.manual[STUDENT]:
        assert (
            f"STALE manual score {graded_by_hand.manual[STUDENT][grade_id]:g} of {STUDENT} {A}/{grade_id}"
            in out
        ), out
    nbgrader(course.path, "autograde", A, "--force", f"--student={STUDENT}", *FLAGS)

    state = gradebook_state(course)
    # The corrected version: every test cell's points by autograde, the written answer to grade again.
    assert state[STUDENT]["manual"] == {} and state[STUDENT]["extra"] == {}, state
    assert state[STUDENT]["comments"] == {}, state  # the old version's comment is not shown
    assert state[STUDENT]["score"] == sum(course.points.values()), state
    assert state[STUDENT]["needs_manual_grade"], state
    assert state[CLASSMATE]["manual"] == graded_by_hand.manual[CLASSMATE], state
    base, token = course_lab
    context, refused = offline_context(browser, (base,), viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/formgrader/?token={token}")
    totals = formgrader_totals(page, base)
    total = f"{sum(course.points.values()) + WRITTEN_POINTS:g}"
    assert totals[STUDENT] == (f"{sum(course.points.values()):g} / {total}", True), totals
    page.goto(f"{base}/formgrader/submissions/{graded_by_hand.ids[STUDENT]}/")
    grading_page(page, course, errors)
    # The overridden cell: autograde's full points now, no manual score; the written answer blank.
    override = page.locator(f"input.score#{graded_by_hand.override}")
    points = f"{course.points[graded_by_hand.override]:g}"
    assert (override.get_attribute("placeholder"), override.input_value()) == (points, "")
    assert page.locator(f"input.score#{WRITTEN}").input_value() == "", "the stale score is shown"
    context.close()
    assert not refused, refused


def test_the_feedback_templates_compile_once_per_process_and_again_once_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nbgrader makes a new exporter for each generate_feedback: the page's templates are
    compiled by the first (into feedback.COMPILED) and loaded from there by the next, which makes
    the same page; a template edited in between is compiled again, and the page shows the edit."""
    from traitlets.config import Config

    from torchlight_grader.nbgrader import feedback

    monkeypatch.setattr(feedback, "COMPILED", feedback.CompiledTemplates())
    templates = tmp_path / "templates"
    shutil.copytree(feedback.TEMPLATES, templates)
    config = Config()
    exporter = config.FeedbackExporter
    exporter.template_name, exporter.template_file, exporter.node = (
        "feedback", feedback.TEMPLATE_FILE, "")  # fmt: skip
    exporter.extra_template_basedirs = [str(templates), str(feedback.nbgrader_templates())]
    css = feedback.nbgrader_templates().parent / "static/node_modules/bootstrap/dist/css"
    exporter.extra_template_paths = [str(css)]  # (as nbgrader's GenerateFeedback sets it)
    exporter.filters = {"mathjax_script": "torchlight_grader.nbgrader.feedback.mathjax_script",
                        "points": "torchlight_grader.nbgrader.canvas.number"}  # fmt: skip
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    info = {"score": 1.0, "max_score": 2.0, "late_penalty": 0.0, "notebook": "a1", "awaiting": 0,
            "days_late": 0, "duedate": "", "extended_to": "", "state": "graded"}  # fmt: skip

    def page() -> str:
        return feedback.FeedbackExporter(config=config).from_notebook_node(
            copy.deepcopy(nb), {"nbgrader": dict(info)}
        )[0]

    compiled: list[str] = []
    compile_source = jinja2.Environment.compile

    def counting(self: jinja2.Environment, source: Any, name: Any = None, *a: Any, **k: Any) -> Any:
        compiled.append(name)
        return compile_source(self, source, name, *a, **k)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    first = page()
    assert feedback.TEMPLATE_FILE in compiled and len(feedback.COMPILED.code) == len(compiled) > 1
    compiled.clear()
    assert page() == first and compiled == [], f"compiled again: {compiled}"
    ours = templates / "feedback" / feedback.TEMPLATE_FILE
    ours.write_text(ours.read_text().replace("{% block body %}", "{% block body %}<!-- edited -->"))
    edited = page()
    assert compiled == [feedback.TEMPLATE_FILE], compiled
    assert "<!-- edited -->" in edited and "<!-- edited -->" not in first


def test_math_typeset_at_feedback_time_is_inert() -> None:
    """prerender_math (Node.js + the installed MathJax 3): formulas become SVG, the inlined
    MathJax goes, TeX that could make a link or load a file, or does not parse, is shown as
    code, and what MathJax skips (code, pre) stays as it is."""
    import shutil as sh

    from torchlight_grader.nbgrader.feedback import MATHJAX_BEGIN, MATHJAX_END, prerender_math

    node = sh.which("node")
    assert node, "Node.js is missing: `apt-get install -y nodejs` (.ci/run does it)"
    page = (f"<html><head>{MATHJAX_BEGIN}<script>MathJax</script>{MATHJAX_END}</head><body>"
            r"<p>$x^2$, $$\frac{a}{b}$$, $\href{javascript:alert(1)}{x}$, $\require{x} y$, "
            r"$\frac{a$ and a \$5 note</p><pre>$y$</pre><code>$z$</code></body></html>")  # fmt: skip
    out = prerender_math(page, node)
    assert "<script" not in out and "MathJax</script>" not in out, out
    assert out.count("<mjx-container") == 2 and 'display="true"' in out, out
    assert "javascript" not in out.replace(r"$\href{javascript:alert(1)}{x}$", ""), out
    errors = re.findall(r'<code class="tex-error">(.*?)</code>', out)
    assert errors == [r"$\href{javascript:alert(1)}{x}$", r"$\require{x} y$", r"$\frac{a$"], errors
    assert r"a \$5 note</p><pre>$y$</pre><code>$z$</code>" in out, out


def test_only_the_tex_a_student_wrote_needs_a_typesetter_of_the_pages_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instructor's formulas are typeset once, from the released notebook alone; a page
    whose formulas are all the instructor's starts no typesetter, and one with TeX of its own
    starts one for that TeX only (issue 39: isolation without a typesetter for every page)."""
    import json
    import shutil as sh

    from torchlight_grader.nbgrader import feedback
    from torchlight_grader.sandbox import program

    node = sh.which("node")
    assert node, "Node.js is missing: `apt-get install -y nodejs` (.ci/run does it)"
    release = tmp_path / "release" / "a" / "n.ipynb"
    release.parent.mkdir(parents=True)
    cells = [{"cell_type": "markdown", "metadata": {}, "source": r"$x^2$ and $$\frac{a}{b}$$"}]
    release.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                   "nbformat_minor": 5}))  # fmt: skip
    known = feedback.instructor_formulas(str(tmp_path), "a", "n", node, 60.0)
    assert sorted(known) == [(r"\frac{a}{b}", True), ("x^2", False)], known
    assert all(svg and svg.startswith("<mjx-container") for svg in known.values()), known
    started: list[object] = []

    class Counted(program.LineProgram):
        def __init__(self, *args: object, **kw: object) -> None:
            started.append(args)
            super().__init__(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(program, "LineProgram", Counted)
    head = f"<html><head>{feedback.MATHJAX_BEGIN}<script>MJ</script>{feedback.MATHJAX_END}</head>"
    honest = head + r"<body><p>$x^2$ and $$\frac{a}{b}$$</p></body></html>"
    out = feedback.prerender_math(honest, node, known=known)
    assert out.count("<mjx-container") == 2 and started == [], started
    own = head + r"<body><p>$x^2$, $y_1$ and $\renewcommand{\frac}[2]{Z}$</p></body></html>"
    out = feedback.prerender_math(own, node, known=known)
    assert len(started) == 1 and out.count("<mjx-container") == 3, out
