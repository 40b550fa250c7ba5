"""How a class did: one self-contained HTML page from the course's exported CSVs.

``make course-report`` (after ``make course-grade``) writes ``assignments/report.html``: per
assignment the number of submissions, mean, median, lowest and highest final score; a grade
histogram (an inline SVG picture, drawn here in plain Python: no plotting library, nothing
fetched from the internet); and per test cell the pass rate (full points) and mean points among
the students who handed the assignment in. Inputs are nbgrader's ``grades.csv`` (one row per
student and assignment, late penalties applied) and the course's ``items.csv`` (one row per
test cell). Beside them in the course folder it reads, when they exist, ``extensions.csv`` (the
per-student extensions) and ``collect/<assignment>-report.csv`` (what collect refused), and the
page names the students behind each count: who is missing, late (with their extension), had a
submission refused, has an extension, or awaits a TA (a written answer not graded yet, shown as
"awaiting grading", never as a failed cell), and the regrade requests, open or answered
(``regrade/queue.csv``, ``torchlight_grader.nbgrader.regrade``), and who unlocked which
progressive hints (``hints/<assignment>.json``, what collect took from the submissions:
``torchlight_grader.nbgrader.hints``)::

    .venv/bin/python torchlight_grader/course/report.py assignments/grades.csv assignments/items.csv \
        -o assignments/report.html
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchlight_grader.nbgrader import hints

ROOT = Path(__file__).resolve().parents[2]
BINS = 10
#: Who the page names under each assignment, in this order.
WHO = (
    ("missing", "missing (no submission)"),
    ("late", "late (penalty applied)"),
    ("extension", "extension"),
    ("refused", "a submission refused at collect"),
    ("awaiting", "awaiting a TA (written answers not graded yet)"),
    ("regrade", "regrade requests, open (answer in the Formgrader)"),
    ("regrade answered", "regrade requests answered"),
    ("hints", "hints unlocked (item: hints seen of those written; never a grade)"),
)


@dataclass
class Assignment:
    name: str
    max_score: float = 0.0
    scores: list[float] = field(default_factory=list)  # final scores of submitted students
    missing: int = 0
    late: int = 0
    items: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # (score, max)
    awaiting: dict[str, int] = field(default_factory=dict)  # item -> answers not graded yet
    who: dict[str, list[str]] = field(default_factory=dict)  # "missing"/"late"/... -> students


def read(grades_csv: Path, items_csv: Path) -> dict[str, Assignment]:
    """Assignments by name, from the two exports (an unreadable file raises with its name)."""
    out: dict[str, Assignment] = {}
    submitted: set[tuple[str, str]] = set()
    with open(grades_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    need = {"assignment", "student_id", "timestamp", "score", "max_score"}
    if rows and not need <= set(rows[0]):
        raise ValueError(f"{grades_csv}: expected nbgrader's grades.csv columns {sorted(need)}, "
                         f"got {sorted(rows[0])}")  # fmt: skip
    for r in rows:
        a = out.setdefault(r["assignment"], Assignment(r["assignment"]))
        a.max_score = float(r["max_score"])
        if r["timestamp"]:
            submitted.add((r["student_id"], r["assignment"]))
            a.scores.append(float(r["score"]))
            late = float(r.get("late_submission_penalty") or 0) > 0
            a.late += late
            if late:
                a.who.setdefault("late", []).append(r["student_id"])
        else:
            a.missing += 1
            a.who.setdefault("missing", []).append(r["student_id"])
    course = grades_csv.parent
    extensions = course / "extensions.csv"
    if extensions.is_file():
        with open(extensions, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if r.get("assignment") in out:
                    out[r["assignment"]].who.setdefault("extension", []).append(
                        f"{r.get('student_id')} (+{r.get('extension')})"
                    )
    for a in out.values():
        refused = course / "collect" / f"{a.name}-report.csv"
        if refused.is_file():
            with open(refused, newline="", encoding="utf-8") as f:
                names = {r["student"] for r in csv.DictReader(f) if r.get("verdict") == "refused"}
            if names:
                a.who["refused"] = sorted(names)
    requests = course / "regrade" / "queue.csv"  # make course-regrades (and course-report)
    if requests.is_file():
        with open(requests, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if r.get("assignment") in out:
                    kind = "regrade" if r.get("status") == "open" else "regrade answered"
                    first = (r.get("reason") or "").splitlines()[:1]
                    out[r["assignment"]].who.setdefault(kind, []).append(
                        f"{r.get('student')} ({first[0][:80] if first else 'no reason given'})"
                    )
    for a in out.values():  # hint use, as collect took it from the submissions
        written = hints_written(course / "release" / a.name)
        for student, used in sorted(hints.recorded(course, a.name).items()):
            seen = [f"{k}: {min(n, len(written[k]))} of {len(written[k])}"
                    for k, n in sorted(used.items()) if n and written.get(k)]  # fmt: skip
            if seen:
                a.who.setdefault("hints", []).append(f"{student} ({', '.join(seen)})")
    with open(items_csv, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if (r["student_id"], r["assignment"]) not in submitted:
                continue
            a = out.setdefault(r["assignment"], Assignment(r["assignment"]))
            if r.get("needs_manual_grade"):  # no verdict yet: not a fail
                a.awaiting[r["grade_id"]] = a.awaiting.get(r["grade_id"], 0) + 1
                a.items.setdefault(r["grade_id"], [])
                waiting = a.who.setdefault("awaiting", [])
                if r["student_id"] not in waiting:
                    waiting.append(r["student_id"])
                continue
            a.items.setdefault(r["grade_id"], []).append((float(r["score"]), float(r["max_score"])))
    return out


def hints_written(release: Path) -> dict[str, list[str]]:
    """``grade_id -> hints`` of the released notebooks of one assignment ({} for none)."""
    out: dict[str, list[str]] = {}
    for path in sorted(release.glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            grade_id, written = hints.grade_id_of(cell), hints.hints_of(cell)
            if grade_id and written:
                out[grade_id] = written
    return out


def histogram_svg(scores: Sequence[float], max_score: float, title: str) -> str:
    """Bars of how many students scored in each tenth of ``max_score`` (the top bin holds 100%)."""
    counts = [0] * BINS
    for s in scores:
        frac = s / max_score if max_score else 0.0
        counts[min(BINS - 1, max(0, int(frac * BINS)))] += 1
    width, height, left, bottom, top = 420, 200, 36, 34, 22
    plot_w, plot_h = width - left - 10, height - bottom - top
    tallest = max(counts) or 1
    bar = plot_w / BINS
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{width / 2}" y="15" text-anchor="middle" font-size="13">{html.escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end" font-size="10">{tallest}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end" font-size="10">0</text>',
    ]
    for i, n in enumerate(counts):
        h = plot_h * n / tallest
        x = left + i * bar
        parts.append(f'<rect class="bar" x="{x + 1:.1f}" y="{top + plot_h - h:.1f}" '
                     f'width="{bar - 2:.1f}" height="{h:.1f}" fill="#4477aa"><title>'
                     f"{10 * i}-{10 * (i + 1)}%: {n}</title></rect>")  # fmt: skip
        if n:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{top + plot_h - h - 3:.1f}" '
                         f'text-anchor="middle" font-size="10">{n}</text>')  # fmt: skip
    for i in range(0, BINS + 1, 2):
        parts.append(f'<text x="{left + i * bar:.1f}" y="{top + plot_h + 14}" '
                     f'text-anchor="middle" font-size="10">{10 * i}%</text>')  # fmt: skip
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle" '
                 f'font-size="11">score (% of {max_score:g} points)</text></svg>')  # fmt: skip
    return "\n".join(parts)


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def render(assignments: dict[str, Assignment], course: str = "torchlight-autograd") -> str:
    """The report page (deterministic: the same CSVs give the same bytes)."""
    e = html.escape
    body = [f"<h1>Course report: {e(course)}</h1>"]
    body.append("<table><tr><th>assignment</th><th>submitted</th><th>missing</th><th>late</th>"
                "<th>mean</th><th>median</th><th>min</th><th>max</th><th>out of</th></tr>")  # fmt: skip
    for a in assignments.values():
        stats = (
            [statistics.fmean(a.scores), statistics.median(a.scores), min(a.scores), max(a.scores)]
            if a.scores
            else None
        )
        cells = "".join(f"<td>{_fmt(x)}</td>" for x in stats) if stats else '<td colspan="4">-</td>'
        body.append(f'<tr class="assignment" data-name="{e(a.name)}"><td>{e(a.name)}</td>'
                    f"<td>{len(a.scores)}</td><td>{a.missing}</td><td>{a.late}</td>{cells}"
                    f"<td>{_fmt(a.max_score)}</td></tr>")  # fmt: skip
    body.append("</table>")
    for a in assignments.values():
        body.append(f"<h2>{e(a.name)}</h2>")
        for key, label in WHO:
            if a.who.get(key):
                body.append(f'<p class="who" data-kind="{key}"><b>{label}</b>: '
                            f"{e(', '.join(sorted(a.who[key])))}</p>")  # fmt: skip
        body.append(histogram_svg(a.scores, a.max_score, f"{a.name}: {len(a.scores)} submissions"))
        body.append("<table><tr><th>test cell</th><th>pass rate</th><th>mean points</th>"
                    "<th>out of</th></tr>")  # fmt: skip
        for grade_id, results in sorted(a.items.items()):
            waiting = a.awaiting.get(grade_id, 0)
            rate, mean, out_of = "", "-", "-"
            if results:
                passed = sum(score >= most for score, most in results)
                rate = f"{100 * passed / len(results):.0f}% ({passed}/{len(results)})"
                mean = _fmt(statistics.fmean(score for score, _ in results))
                out_of = _fmt(results[0][1])
            if waiting:  # a written answer not graded yet has no verdict: never a 0% pass rate
                rate = ", ".join(x for x in (rate, f"{waiting} awaiting grading") if x)
            body.append(f'<tr class="item" data-name="{e(grade_id)}"><td>{e(grade_id)}</td>'
                        f"<td>{rate}</td><td>{mean}</td><td>{out_of}</td></tr>")  # fmt: skip
        body.append("</table>")
    style = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
             "padding:.2em .6em;text-align:right}td:first-child,th:first-child{text-align:left}")  # fmt: skip
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Course report: {e(course)}</title><style>{style}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")  # fmt: skip


def leaderboard_section(course: Path) -> str:
    """The capstone's board (``make course-leaderboard``), as a section of the report, or
    nothing where the course has none."""
    board = course / "leaderboard" / "board.csv"
    if not board.is_file():
        return ""
    with open(board, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    e = html.escape
    lines = ["<h2>Capstone leaderboard</h2>", "<table>"]
    for n, row in enumerate(rows[:1000]):
        tag = "th" if n == 0 else "td"
        lines.append("<tr>" + "".join(f"<{tag}>{e(v)}</{tag}>" for v in row) + "</tr>")
    return "\n".join([*lines, "</table>"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("grades", type=Path, nargs="?", default=ROOT / "assignments" / "grades.csv")
    parser.add_argument("items", type=Path, nargs="?", default=ROOT / "assignments" / "items.csv")
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "assignments" / "report.html")
    args = parser.parse_args(argv)
    for path in (args.grades, args.items):
        if not path.is_file():
            print(
                f"expected {path} (run `make course-grade` first), found nothing", file=sys.stderr
            )
            return 1
    page = render(read(args.grades, args.items))
    page = page.replace("\n</body>", "\n" + leaderboard_section(args.grades.parent) + "\n</body>")
    args.output.write_text(page, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
