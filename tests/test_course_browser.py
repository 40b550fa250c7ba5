"""The instructor's and the student's pages of the course, in Debian's chromium (playwright).

One module-scoped fixture builds a temporary course with the real nbgrader CLI
(``submissions/pipeline.py``): assignment 1 released, one submission (the catalog's
``sign-error``: one item fails its hidden checks) autograded, its feedback generated. Then:

- ``make course-lab`` (the very target, on a free port, with a token) serves the course; in
  JupyterLab the instructor opens the Formgrader (nbgrader's menu command): every assignment of
  the course is listed, no "exchange directory ... does not exist" banner is shown, and the
  graded submission shows with its score;
- the feedback page, alone in an empty folder (nbgrader's ``release_feedback`` /
  ``fetch_feedback`` hand the student the ``.html`` file and nothing beside it), opened from
  ``file://`` in a 600-pixel-wide window, with every request that is not a local file refused
  (a CDN fails): the failed item's verdict is shown whole (wrapped, nothing cut off or scrolled
  away), the table of contents names every test cell with its score, the math is typeset by
  MathJax (no raw TeX left) and MathJax's safe mode is on.

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it); never ``playwright install``.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

pytestmark = [pytest.mark.browser, pytest.mark.nbgrader, pytest.mark.slow, pytest.mark.timeout(300)]

A = "a1_functions"
STUDENT = "bob"
SUBMISSION = next(s for s in a1_functions.CATALOG if s.name == "sign-error")
FLAGS = ("--Execute.timeout=10", "--SandboxedExecute.total_timeout=120",
         "--IsolatedGrader.seed=20260115", "--IsolatedGrader.cell_timeout=10")  # fmt: skip
NARROW = {"width": 600, "height": 900}


@dataclass
class Course:
    path: Path
    points: dict[str, float]  # grade_id -> max points (assignment 1)
    scores: dict[str, float]  # grade_id -> the submission's expected points
    verdicts: dict[str, str]  # grade_id -> the failing items' verdict (the autograded output)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Course:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium` (.ci/run does it)")
    path = make_course(tmp_path_factory.mktemp("course_browser"))
    nbgrader(path, "generate_assignment", A, "--force")
    source, release = notebooks(path, A)
    submit(path, STUDENT, A, build(SUBMISSION, source, release))
    nbgrader(path, "autograde", A, "--force", *FLAGS)
    nbgrader(path, "generate_feedback", A, "--force")
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
    return Course(path, points, scores, verdicts)


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
def course_lab(course: Course) -> Iterator[tuple[str, str]]:
    """``make course-lab`` on the course; yields ``(base url, token)``."""
    port, token = free_port(), secrets.token_hex(16)
    home = course.path.parent / "jupyter"
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
    }
    lab_args = (f"--no-browser --port={port} --ServerApp.port_retries=0 --ServerApp.ip=127.0.0.1 "
                f"--IdentityProvider.token={token} --LabApp.expose_app_in_browser=True")  # fmt: skip
    log_path = course.path.parent / "course-lab.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            ["make", "-s", "-C", str(ROOT), "course-lab", f"COURSE={course.path}",
             f"LAB_ARGS={lab_args}"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for_server(base, token, server, log, log_path, "make course-lab", seconds=90)
            yield base, token
        finally:
            stop_group(server, timeout=20)


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
    submissions = row.locator("a", has_text=re.compile(r"^1$"))  # its "# Submissions" link
    expect(submissions).to_have_count(1)
    body = frame.locator("body")
    expect(body).not_to_contain_text("does not exist")  # the exchange banner
    page.screenshot(path=str(tmp_path / "formgrader.png"))

    # The submission list of assignment 1: the graded student with the score.
    submissions.click()
    student = frame.locator("tr", has=frame.locator("td", has_text=re.compile(f"^{STUDENT}$")))
    score = f"{sum(course.scores.values()):g} / {sum(course.points.values()):g}"
    expect(student).to_contain_text("graded", timeout=30_000)
    expect(student).to_contain_text(score)
    expect(body).not_to_contain_text("does not exist")
    page.screenshot(path=str(tmp_path / "submissions.png"))
    context.close()
    assert not refused, f"the Formgrader asked for outside addresses: {refused}"


def test_feedback_page_offline_and_narrow(course: Course, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    # The student gets the .html file alone (release_feedback/fetch_feedback copy nothing else).
    page_path = tmp_path / "inbox" / f"{A}.html"
    page_path.parent.mkdir()
    shutil.copy(course.path / "feedback" / STUDENT / A / f"{A}.html", page_path)
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
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("() => MathJax.startup.promise")
    raw = page.evaluate(RAW_TEX)
    assert raw == [], f"TeX not typeset: {raw[:5]}"
    # The safe extension is on: TeX cannot make a javascript: link.
    link = page.evaluate("() => MathJax.tex2svg('\\\\href{javascript:alert(1)}{x}').outerHTML")
    assert "<svg" in link and "javascript" not in link, link
    # TeX cannot ask for more packages (\require would load a file, or fetch one).
    required = "async () => (await MathJax.tex2svgPromise('\\\\require{torchlight} x')).outerHTML"
    assert "<svg" in page.evaluate(required)
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


def test_formgrader_opens_a_submission_for_manual_grading(
    course: Course, course_lab: tuple[str, str], browser: Any, tmp_path: Path
) -> None:
    """The Formgrader's grading page of a submission opens (it used to fail with
    ``TemplateNotFound: torchlight.html.j2``: the feedback template was forced on every HTML
    exporter), with a score input for every graded cell, and Next / Previous load.

    Not yet covered: entering points and comments. Offline, nbgrader's grading page stops at
    "MathJax is not defined" (it loads MathJax 2 from a CDN) before any score loads."""
    from playwright.sync_api import expect

    base, token = course_lab
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    api = f"{base}/formgrader/api/submitted_notebooks/{A}/{A}?token={token}"
    (listed,) = page.request.get(api).json()
    assert listed["student"] == STUDENT, listed
    body = page.locator("body")
    for suffix in ("", "next", "prev"):
        page.goto(f"{base}/formgrader/submissions/{listed['id']}/{suffix}?token={token}")
        expect(body).not_to_contain_text("Sorry, the formgrader encountered an error")
    page.goto(f"{base}/formgrader/submissions/{listed['id']}/?token={token}")
    for grade_id in course.points:
        expect(page.locator(f"input.score#{grade_id}")).to_have_count(1, timeout=30_000)
    page.screenshot(path=str(tmp_path / "formgrade.png"), full_page=True)
    context.close()
