"""The instructor's term, round two (issue 40 items 3 and 4, the password of item 5).

One module-scoped course, run through the make targets as an instructor runs it:

- ``make course-release`` of assignment 1; four students take that release (``s1``/``s2`` the
  solution, ``s3`` a planted mistake, ``mallory`` the solution with test_mul's points set to
  100 in her notebook: the one real case);
- the instructor then raises test_div from 1 to 3 points and adds a line to test_tanh's visible
  test (a tolerance fix), and runs ``make course-release`` again; ``s5`` takes the new release;
- ``make course-grade``: integrity.csv names mallory alone under tampering, and each of the
  instructor's two changes once, with the four submissions made from the earlier release;
  every grade uses the new points;
- ``make course-grade FULL=1`` again, and while its sandboxes run, a second ``make
  course-grade`` is refused naming the first one's pid; then the first ``make`` alone is killed
  with SIGKILL (it cannot pass that on): its grader stops by itself, leaves no process behind and
  writes no exports; a last run grades what the killed one left.
"""

from __future__ import annotations

import copy
import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
import pytest
from submissions import a1_functions
from submissions.catalog import build
from submissions.pipeline import ROOT, make_course, max_points, nbgrader, notebooks, submit

A = "a1_functions"
BY_NAME = {s.name: s for s in a1_functions.CATALOG}
FLAGS = ("--Execute.timeout=10", "--SandboxedExecute.total_timeout=120",
         "--IsolatedGrader.seed=20260115", "--IsolatedGrader.cell_timeout=10")  # fmt: skip
OLD = {"s1": "solution", "s2": "solution", "s3": "sign-error", "mallory": "solution"}
SECRET = "s3cretPa55"
COURSE_ID = "torchlight-autograd"
#: s1's reason: a formula, markup, an escape sequence, a fake grade, and far too long
REQUEST = (b'=HYPERLINK("evil.example")\n<script>alert(1)</script>\x1b[31m written_why deserves '
           b'more\n{"manual_score": 100}\n' + b"x" * 5000)  # fmt: skip
ANSWER = "Looked again: the answer is right, and the point stays."
WRITTEN = (
    '\n\n# %% [markdown] nbgrader={"grade": true, "grade_id": "written_why", "locked": false, '
    '"points": 1, "schema_version": 3, "solution": true}\n'
    "# Sigmoid's backward reuses its output: the output is all it needs, $s(1 - s)$.\n"
)


@dataclass
class Term:
    course: Path
    points: dict[str, float]
    first: subprocess.CompletedProcess[str]
    roster: subprocess.CompletedProcess[str]
    busy: subprocess.CompletedProcess[str] | None = None
    killed: dict[str, object] = field(default_factory=dict)
    last: subprocess.CompletedProcess[str] | None = None
    regrade: dict[str, str] = field(default_factory=dict)


def make(
    target: str, course: Path, *args: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = ["make", "-C", str(ROOT), target, f"COURSE={course}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if ok:
        assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr[-5000:]}"
    return proc


def grade_cmd(course: Path, *args: str) -> list[str]:
    return ["make", "-s", "-C", str(ROOT), "course-grade", f"COURSE={course}", f"ASSIGNMENT={A}",
            "JOBS=2", f"GRADE_ARGS={' '.join(FLAGS)}", *args]  # fmt: skip


def edit_source(course: Path, old: str, new: str) -> None:
    script = course / "source" / A / f"{A}.py"
    text = script.read_text()
    assert old in text, old
    script.write_text(text.replace(old, new, 1))


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:  # (a short-lived child that ended meanwhile)
        return []


def kill_make_alone(course: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """``make course-grade FULL=1``; once a sandbox runs, a second run (refused), then SIGKILL to
    the first make alone; what became of its grader."""
    exports = course / "grades.csv"
    before = exports.stat().st_mtime_ns
    proc = subprocess.Popen(grade_cmd(course, "FULL=1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 300
    tool, tree = None, []
    while time.monotonic() < deadline and proc.poll() is None:
        tool = next((p for p in psutil.Process(proc.pid).children(recursive=True)
                     if _cmdline(p)[1:3] == ["-m", "torchlight_grader.course.grade"]), None)  # fmt: skip
        if tool is not None:
            try:
                tree = tool.children(recursive=True)
                if any(p.name() == "bwrap" for p in tree):
                    break
            except psutil.Error:  # (a child that ended between the two calls)
                pass
        time.sleep(0.1)
    assert tool is not None and proc.poll() is None, "the first run never started a sandbox"
    busy = subprocess.run(grade_cmd(course), capture_output=True, text=True, timeout=120)
    tree = tool.children(recursive=True)
    start = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)  # make alone: its grader is not told
    proc.wait(timeout=10)
    try:
        tool.wait(timeout=60)
        ended = True
    except psutil.TimeoutExpired:
        ended = False
    latency = time.monotonic() - start
    _, alive = psutil.wait_procs(tree, timeout=5)
    orphans = [p.pid for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for p in alive:  # (only when the grader failed to stop them: the test then fails)
        p.kill()
    if not ended:
        tool.kill()
    time.sleep(2)  # a grader left running would write the exports now
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    return busy, {"pid": tool.pid, "ended": ended, "latency": latency, "orphans": orphans,
                  "exports_rewritten": exports.stat().st_mtime_ns != before, "stderr": stderr}  # fmt: skip


@pytest.fixture(scope="module")
def term(tmp_path_factory: pytest.TempPathFactory) -> Term:
    course = make_course(tmp_path_factory.mktemp("term2"))
    # mallory is on the roster without a Canvas ID; s5 is not on it at all
    (course / "roster.csv").write_text("id,first_name,lms_user_id\ns1,Sam,1001\ns2,Sue,1002\n"
                                       "s3,Sid,1003\nmallory,Mallory,\n")  # fmt: skip
    roster = make("course-roster", course, f"ROSTER={course / 'roster.csv'}")
    with open(course / "source" / A / f"{A}.py", "a", encoding="utf-8") as f:
        f.write(WRITTEN)  # a written answer, graded by a TA
    make("course-release", course, f"ASSIGNMENT={A}")
    source, release = notebooks(course, A)
    handed = {s: build(BY_NAME[name], source, release) for s, name in OLD.items()}
    for cell in handed["mallory"].cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_mul":
            cell.metadata["nbgrader"]["points"] = 100  # the one real case
    # The instructor's mid-term change: test_div worth 3 points, a line more in test_tanh.
    edit_source(
        course,
        '"grade_id": "test_div", "locked": true, "points": 1',
        '"grade_id": "test_div", "locked": true, "points": 3',
    )
    edit_source(course, "out = Tanh.apply(x)\n", "out = Tanh.apply(x)  # (tolerance fixed)\n")
    make("course-release", course, f"ASSIGNMENT={A}")
    source, release = notebooks(course, A)
    handed["s5"] = build(BY_NAME["solution"], source, release)
    for student, nb in handed.items():
        submit(course, student, A, nb)
    first = subprocess.run(grade_cmd(course), capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr[-5000:]
    t = Term(course, max_points(source), first, roster)
    t.busy, t.killed = kill_make_alone(course)
    t.last = subprocess.run(grade_cmd(course), capture_output=True, text=True, timeout=600)
    t.regrade = regrade_request(course, tmp_path_factory.mktemp("exchange"))
    make("course-report", course)
    return t


def set_manual(course: Path, student: str, score: float | None, comment: str | None) -> None:
    """What the Formgrader writes for the TA (tests/test_course_browser.py drives the page)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        if score is not None:
            gb.find_grade("written_why", A, A, student).manual_score = score
        if comment is not None:
            gb.find_comment("written_why", A, A, student).manual_comment = comment
        gb.db.commit()


def regrade_request(course: Path, exchange: Path) -> dict[str, str]:
    """A TA grades s1's written answer; s1 asks for a regrade through the exchange with a hostile
    reason and the same notebook; collect, the queue, a grading run, the TA's answer (a comment),
    the queue again, the feedback release: what each said."""
    out: dict[str, str] = {}
    ex = f"EXCHANGE={exchange}"
    set_manual(course, "s1", 1.0, None)
    make("course-export", course)
    out["before"] = (course / "grades.csv").read_text()
    make("course-release-exchange", course, f"ASSIGNMENT={A}", ex)
    home = exchange.parent / "home-s1"
    (home / A).mkdir(parents=True)
    shutil.copy(course / "submitted" / "s1" / A / f"{A}.ipynb", home / A)
    (home / A / "regrade-request.txt").write_bytes(REQUEST)
    nbgrader(home, "submit", A, "--student=s1", f"--course={COURSE_ID}",
             f"--Exchange.root={exchange}", f"--Exchange.cache={home / '.cache'}")  # fmt: skip
    out["collect"] = make("course-collect", course, f"ASSIGNMENT={A}", ex).stdout
    out["queue"] = make("course-regrades", course).stdout
    out["grade"] = subprocess.run(grade_cmd(course), capture_output=True, text=True,
                                  timeout=600).stdout  # fmt: skip
    set_manual(course, "s1", None, ANSWER)  # the TA answers in the Formgrader
    out["answered"] = make("course-regrades", course).stdout
    make("course-feedback-release", course, f"ASSIGNMENT={A}", ex)
    out["page"] = (course / "feedback" / "s1" / A / f"{A}.html").read_text()
    out["after"] = (course / "grades.csv").read_text()
    return out


def table(course: Path, name: str) -> list[dict[str, str]]:
    with open(course / name, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.nbgrader
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_instructors_points_change_is_reported_once_and_the_real_case_stays(
    term: Term,
) -> None:
    """Issue 40 item 3: 24 tampering findings for one points change buried the one real case."""
    rows = table(term.course, "integrity.csv")
    tampering = [(r["student"], r["finding"]) for r in rows if r["section"] == "tampering"]
    assert tampering == [("mallory", "nbgrader metadata of cell test_mul changed (restored)")], (
        tampering
    )
    instructor = sorted(r["finding"].split(":")[0] for r in rows if r["section"] == "instructor")
    assert instructor == ["points of test_div", "source of test_tanh changed since the release "
                          "handed out"], instructor  # fmt: skip
    assert {r["student"] for r in rows if r["section"] == "instructor"} == {"(4 submissions)"}
    assert "points of test_div: 1 in the release handed out, 3 now" in " ".join(
        r["finding"] for r in rows
    )
    assert "2 changes of the instructor's since a release" in term.first.stdout, term.first.stdout
    # graded with the current points: the solution gets them all, whichever release it came from
    total = sum(term.points.values())
    assert term.points["test_div"] == 3
    grades = {r["student_id"]: float(r["score"]) for r in table(term.course, "grades.csv")}
    assert grades["s2"] == grades["s5"] == grades["mallory"] == total, grades
    assert grades["s3"] == total - term.points["test_div"], grades


@pytest.mark.nbgrader
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_killing_make_alone_stops_the_grader_and_a_second_run_is_refused(term: Term) -> None:
    """Issue 40 item 4: the grader went on after make was killed and wrote the exports minutes
    later; a second run in that window shared the gradebook with it."""
    killed = term.killed
    assert term.busy is not None and term.busy.returncode != 0, term.busy
    assert f"another run holds the gradebook of {term.course}: pid {killed['pid']}" in (
        term.busy.stderr
    ), term.busy.stderr
    assert f"kill {killed['pid']}" in term.busy.stderr
    print(f"the grader stopped {killed['latency']:.2f} s after make was killed")
    assert killed["ended"], killed
    assert killed["orphans"] == [], killed
    assert not killed["exports_rewritten"], "the killed run wrote its exports"
    assert float(str(killed["latency"])) < 30, killed
    assert "parent process" in str(killed["stderr"]) and "Traceback" not in str(killed["stderr"])
    # the lock went with the killed run: the next run grades what it left
    assert term.last is not None and term.last.returncode == 0, term.last.stderr[-3000:]
    assert "5 submissions:" in term.last.stdout.splitlines()[0], term.last.stdout


@pytest.mark.nbgrader
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_make_never_echoes_the_database_password(term: Term) -> None:
    """Issue 40 item 5: every run's console showed DB_URL with its password."""
    url = f"postgresql+psycopg2://grader:{SECRET}@127.0.0.1:9/gradebook"
    for target in ("course-grade", "course-export", "course-release", "course-collect",
                   "course-feedback-release", "course-lab"):  # fmt: skip
        dry = make(target, term.course, f"DB_URL={url}", f"ASSIGNMENT={A}", "-n")
        assert SECRET not in dry.stdout + dry.stderr, (target, dry.stdout)
    run = make("course-grade", term.course, f"DB_URL={url}", f"ASSIGNMENT={A}", ok=False)
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "grader:***@127.0.0.1:9" in said, said[-3000:]
    assert SECRET not in said, said[-3000:]


def test_a_fix_to_one_assignments_checks_changes_that_assignments_key_only(
    tmp_path: Path,
) -> None:
    """Issue 40 item 3: the grader's digest covered the whole grader, so a fix to a2's hidden
    checks regraded the whole class. Each assignment's digest now leaves out the other
    assignments' own checks modules; a shared floor (checks/check.py) is in every one."""
    from torchlight_grader.course import dask

    names = ["a1_functions", "a2_broadcasting"]
    copy = Path(shutil.copytree(ROOT / "torchlight_grader", tmp_path / "torchlight_grader",
                                ignore=shutil.ignore_patterns("__pycache__")))  # fmt: skip

    def digests() -> dict[str, str]:
        files = [(copy, p) for p in sorted(copy.rglob("*")) if p.is_file()]
        return dask.grader_digests(names, files)

    before = digests()
    assert before["a1_functions"] != before["a2_broadcasting"]
    with open(copy / "checks" / "a2_broadcasting.py", "a", encoding="utf-8") as f:
        f.write("\n# a fix to a2's hidden checks\n")
    fixed = digests()
    assert fixed["a1_functions"] == before["a1_functions"]
    assert fixed["a2_broadcasting"] != before["a2_broadcasting"]
    with open(copy / "checks" / "check.py", "a", encoding="utf-8") as f:
        f.write("\n# a fix to the shared checks\n")
    shared = digests()
    assert all(shared[a] != fixed[a] for a in names), "a shared floor must be in every digest"
    assert set(dask.checks_modules()) >= set(names)
    assert all(len(d) == 64 for d in shared.values())  # SHA-256, hex


@pytest.mark.nbgrader
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_canvas_warning_comes_at_the_roster_and_says_what_is_wrong(term: Term) -> None:
    """Issue 40 item 5: the warning came only at export and said "not on the roster" of students
    who were on it. Now ``make course-roster`` says at once who has an empty Canvas ID, and the
    export names s5 (never on the roster) apart from mallory (on it, without a Canvas ID)."""
    said = term.roster.stdout + term.roster.stderr
    assert "1 student(s) on the roster with an empty lms_user_id" in said, said
    assert said.rstrip().endswith("SIS User ID: mallory"), said
    export = (term.course / "logs" / "export.log").read_text()
    assert "1 student(s) not on the roster" in export and "User ID: s5" in export, export[-3000:]
    assert (
        "on the roster with an empty lms_user_id (the Canvas user ID), so Canvas can only "
        "match them by SIS User ID: mallory" in export
    ), export[-3000:]


def test_the_canvas_roster_check_names_each_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The three causes a real gradebook can hold: a roster without the lms_user_id column, a
    roster row with an empty one, a student known only from a submission (or, at collect, not in
    the gradebook yet)."""
    from nbgrader.api import Gradebook

    from torchlight_grader.nbgrader.canvas import check_roster

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db) as gb:
        gb.add_student("ann", first_name="Ann")
        gb.add_student("ben")
    (column,) = check_roster(db)
    assert column.startswith("no student has a Canvas ID: the roster imported"), column
    with Gradebook(db) as gb:
        gb.add_student("cat", first_name="Cat", lms_user_id="1003")
    absent, empty = sorted(check_roster(db))
    assert empty.startswith("1 student(s) on the roster with an empty") and empty.endswith(": ann")
    assert absent.startswith("1 student(s) not on the roster") and absent.endswith(": ben")
    (late,) = check_roster(db, {"cat", "dan"})  # collect took in cat and dan (not in the gradebook)
    assert late.startswith("1 student(s) not on the roster") and late.endswith(": dan"), late
    assert check_roster(db, {"cat"}) == []


@pytest.mark.nbgrader
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_report_names_who_awaits_a_ta_and_shows_no_pass_rate_for_it(term: Term) -> None:
    """Issue 40 item 5: an ungraded written answer showed as a 4% pass rate, and no one was
    named. The report says "awaiting grading" for it and names the students awaiting a TA."""
    page = (term.course / "report.html").read_text()
    assert "<b>awaiting a TA (written answers not graded yet)</b>: mallory, s1, s2, s3, s5" in page
    row = page[page.index('data-name="written_why"') :].split("</tr>")[0]
    assert "5 awaiting grading" in row and "%" not in row, row
    items = table(term.course, "items.csv")
    waiting = {r["student_id"] for r in items if r["needs_manual_grade"] == "yes"}
    assert waiting == {"s1", "s2", "s3", "s5", "mallory"}, waiting
    assert {r["grade_id"] for r in items if r["needs_manual_grade"]} == {"written_why"}


@pytest.mark.nbgrader
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_regrade_request_reaches_the_queue_and_the_answer_reaches_the_student(
    term: Term,
) -> None:
    """Issue 40's regrade requests, end to end: asked through the exchange with the same notebook
    (not a resubmission: no regrade, the TA's grade stays), queued for the instructor, answered
    by a comment, shown on the student's next page; the reason is hostile input and changes no
    grade."""
    r = term.regrade
    assert "REGRADE REQUEST from s1" in r["collect"], r["collect"]
    assert (
        "unchanged s1" in r["collect"] and "(a regrade request, the same notebook)" in r["collect"]
    )
    assert "regrade requests: 1 open, 0 answered" in r["queue"], r["queue"]
    assert "open     s1 a1_functions" in r["queue"]
    assert "5 unchanged (skipped)" in r["grade"].splitlines()[0], r["grade"]
    assert "regrade requests: 0 open, 1 answered" in r["answered"], r["answered"]
    assert ANSWER in r["page"], "the student's next page shows the answer"
    assert r["after"] == r["before"], "a request changed a grade"
    grades = {row["student_id"]: float(row["score"]) for row in table(term.course, "grades.csv")}
    assert grades["s1"] == sum(term.points.values()) + 1  # the TA's point on the written answer
    queue = table(term.course, "regrade/queue.csv")
    (row,) = queue
    assert row["reason"].startswith("'=HYPERLINK"), row  # quoted: no formula
    assert "\x1b" not in row["reason"] and row["reason"].endswith("(cut at 2000 bytes / 20 lines)")
    page = (term.course / "report.html").read_text()
    assert "<script>" not in page  # (the reason's first line, as the CSV holds it: quoted)
    assert "regrade requests answered</b>: s1 (&#x27;=HYPERLINK(&quot;evil" in page, page[-3000:]


#: Six honest students' own code (real, unrelated modules) and two near-copies of two of them.
HONEST = {"ada": "torchlight/shape.py", "ben": "torchlight/nn/init.py",
          "cy": "torchlight/viz/ticker.py", "dee": "torchlight/viz/replay.py",
          "eli": "torchlight/nn/sparse.py", "fay": "torchlight/optim/lbfgs.py"}  # fmt: skip


def renamed(code: str) -> str:
    """Every identifier but keywords, builtins and attributes given another name."""
    import builtins
    import io
    import keyword
    import tokenize

    names: dict[str, str] = {}
    out = []
    previous = ""
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        text = tok.string
        if (tok.type == tokenize.NAME and not keyword.iskeyword(text)
                and not hasattr(builtins, text) and previous != "."):  # fmt: skip
            text = names.setdefault(text, f"q{len(names)}_{text[::-1]}")
        out.append((tok.type, text))
        previous = tok.string
    return tokenize.untokenize(out)


def reordered(code: str) -> str:
    """The top-level blocks (imports, functions, classes) in the reverse order."""
    blocks: list[list[str]] = []
    for line in code.splitlines():
        if not blocks or (line[:1].strip() and not line.startswith((")", "]", "}"))):
            blocks.append([])
        blocks[-1].append(line)
    return "\n".join(line for block in reversed(blocks) for line in block) + "\n"


@pytest.mark.nbgrader
@pytest.mark.slow
def test_the_similarity_report_puts_the_near_copies_on_top(tmp_path: Path) -> None:
    """Issue 40: a cohort of six honest students (each their own code, all keeping the release's
    starter code) and two near-copies: ``gus`` renamed every variable of ada's code, ``hal``
    reordered ben's functions and renamed them. ``make course-similarity`` ranks the two copies
    first, no honest pair above them, the starter code matches no one, and the page is inert."""
    from submissions.pipeline import released_course

    course = released_course(tmp_path, A)
    _, release = notebooks(course, A)
    code = {s: (ROOT / path).read_text() for s, path in HONEST.items()}
    code["gus"] = renamed(code["ada"])
    code["hal"] = renamed(reordered(code["ben"]))
    code["eli"] += "\n# </pre><script>alert(1)</script>\n"  # a student's markup: shown as text
    for student, text in code.items():
        nb = copy.deepcopy(release)
        for cell in nb.cells:  # every answer cell touched: its template is still starter code
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source += f"\n# checked by {student}"
        nb.cells.append(nbformat.v4.new_code_cell(text))
        submit(course, student, A, nb)
    out = make("course-similarity", course, f"ASSIGNMENT={A}").stdout
    rows = table(course, f"similarity/{A}.csv")
    top = [{r["student_a"], r["student_b"]} for r in rows]
    print(out, [(r["student_a"], r["student_b"], r["similarity"]) for r in rows[:4]])
    assert top[:2] == [{"ada", "gus"}, {"ben", "hal"}] or top[:2] == [
        {"ben", "hal"},
        {"ada", "gus"},
    ]
    copies = min(float(r["similarity"]) for r in rows[:2])
    honest = [
        float(r["similarity"]) for r in rows[2:] if {r["student_a"], r["student_b"]} <= set(HONEST)
    ]
    assert max(honest) < copies, (max(honest), copies)
    assert max(honest) < 0.2, "the starter code (kept by all) must match no one"
    page = (course / "similarity" / f"{A}.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "a pointer for a person, never a penalty" in page.lower()
    assert page.count("<mark>") > 10  # the matching spans, side by side
