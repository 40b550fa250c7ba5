"""Which submissions of an assignment look alike: a pointer for a person, never a penalty.

``make course-similarity ASSIGNMENT=a1_functions`` writes ``assignments/similarity/<a>.html``
(and ``<a>.csv``): every pair of students ranked by how much of their code matches, the top
pairs with their code side by side and the matching spans marked. The matching is copydetect's
(a maintained implementation of winnowing, the fingerprinting MOSS uses): each student's code is
tokenized by pygments with names and literals made generic, so renamed variables still match,
and fingerprinted by k-grams of tokens, so reordered lines and functions still match piece by
piece.

What is compared: the code cells a student wrote or changed (a cell whose source is exactly a
released cell's, a test cell for instance, is left out), joined in notebook order. **Starter
code is excluded**: the released notebook's code (the templates of the answer cells, the helpers
every student gets) is fingerprinted too, and those fingerprints are removed from every
student's before comparing, so two students who kept the same template do not match on it.

Student content is hostile input: notebooks are read as JSON within collect's limits (8 MB per
file, ``torchlight_grader.nbgrader.collect``), at most :data:`MAX_CODE` characters of code per
student are compared, and every piece of student text on the page is HTML-escaped (the page has
no script, no link, nothing fetched); the CSV goes through the course's one formula-safe writer.

A high similarity is a reason to look, not a verdict: short exercises have few ways to be
right, and the page says so. Nothing here touches a grade.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

NOISE = 25  # tokens: a match shorter than this is never reported (copydetect's default)
GUARANTEE = 30  # tokens: a match this long is always found
MAX_CODE = 200_000  # characters of one student's code compared
MAX_NOTEBOOK = 8 * 1024**2  # bytes (collect's limit per file)
SHOWN = 20  # pairs shown side by side


@dataclass
class Pair:
    a: str
    b: str
    similarity: tuple[float, float]  # the share of each one's code that matches the other's
    tokens: int  # matching tokens
    slices: tuple[Any, Any]

    @property
    def score(self) -> float:
        return (self.similarity[0] + self.similarity[1]) / 2


def _cells(path: Path) -> list[str]:
    """The code cells' sources of a notebook (empty when it is no readable notebook)."""
    try:
        if path.stat().st_size > MAX_NOTEBOOK:
            return []
        nb = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return []
    cells = nb.get("cells") if isinstance(nb, dict) else None
    out = []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        out.append("".join(source) if isinstance(source, list) else str(source))
    return out


def student_code(notebooks: list[Path], released: set[str]) -> str:
    """What a student wrote: code cells that are not exactly a released cell, in order."""
    parts = [c for nb in notebooks for c in _cells(nb) if c.strip() and c.strip() not in released]
    return "\n\n".join(parts)[:MAX_CODE]


def compare(course: Path, assignment: str) -> tuple[list[Pair], dict[str, str]]:
    """Every pair of students with a submission of ``assignment``, most alike first, and each
    student's compared code."""
    import numpy as np
    from copydetect import CodeFingerprint, compare_files
    from copydetect.utils import filter_code, hashed_kgrams

    release = sorted((course / "release" / assignment).glob("*.ipynb"))
    starter_cells = [c for nb in release for c in _cells(nb)]
    released = {c.strip() for c in starter_cells}
    starter, _ = filter_code("\n\n".join(starter_cells), "starter.py", "python")
    # every k-gram of the starter code, each once (copydetect's own boilerplate: its removal
    # indexes go wrong on a repeated hash)
    boilerplate: Any = np.unique(hashed_kgrams(starter, NOISE)) if starter else []
    codes: dict[str, str] = {}
    for folder in sorted((course / "submitted").glob(f"*/{assignment}")):
        code = student_code(sorted(folder.glob("*.ipynb")), released)
        if code.strip():
            codes[folder.parent.name] = code
    prints = {
        s: CodeFingerprint(
            f"{s}.py",
            NOISE,
            GUARANTEE - NOISE + 1,
            boilerplate=boilerplate,
            language="python",
            fp=StringIO(code),
        )  # fmt: skip
        for s, code in codes.items()
    }
    names = sorted(prints)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            tokens, similarity, slices = compare_files(prints[a], prints[b])
            pairs.append(Pair(a, b, (float(similarity[0]), float(similarity[1])), int(tokens),
                              slices))  # fmt: skip
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    return pairs, codes


def _marked(code: str, slices: Any) -> str:
    from copydetect.utils import highlight_overlap

    if len(slices[0]) == 0:
        return html.escape(code)
    text, _ = highlight_overlap(code, slices, "<mark>", "</mark>", escape_html=True)
    return str(text)


def render(assignment: str, pairs: list[Pair], codes: dict[str, str]) -> str:
    """The page (deterministic; every student byte escaped)."""
    e = html.escape
    rows = "".join(
        f'<tr class="pair" data-a="{e(p.a)}" data-b="{e(p.b)}"><td>{i + 1}</td><td>{e(p.a)}</td>'
        f"<td>{e(p.b)}</td><td>{100 * p.score:.0f}%</td><td>{100 * p.similarity[0]:.0f}% / "
        f"{100 * p.similarity[1]:.0f}%</td><td>{p.tokens}</td></tr>"
        for i, p in enumerate(pairs)
    )
    shown = []
    for i, p in enumerate(pairs[:SHOWN]):
        if p.tokens == 0:
            break
        shown.append(
            f'<h3 id="pair-{i + 1}">{i + 1}. {e(p.a)} and {e(p.b)}: {100 * p.score:.0f}%</h3>'
            f'<div class="side"><pre>{_marked(codes[p.a], p.slices[0])}</pre>'
            f"<pre>{_marked(codes[p.b], p.slices[1])}</pre></div>"
        )
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:.2em .6em}.side{display:flex;gap:1em}"
             ".side pre{flex:1;min-width:0;overflow-x:auto;white-space:pre-wrap;"
             "overflow-wrap:anywhere;background:#f6f6f6;padding:.5em;font-size:12px}"
             "mark{background:#ffd27f}")  # fmt: skip
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Similarity: {e(assignment)}</title><style>{style}</style></head><body>\n"
        f"<h1>Similarity of the submissions of {e(assignment)}</h1>\n"
        "<p><b>A pointer for a person, never a penalty.</b> Pairs whose code matches (copydetect's "
        "winnowing: names and literals made generic, the starter code removed). Short exercises "
        "have few ways to be right: read the code before you conclude anything.</p>\n"
        "<table><tr><th>rank</th><th>student</th><th>student</th><th>similarity</th>"
        f"<th>each side</th><th>matching tokens</th></tr>{rows}</table>\n"
        + "\n".join(shown)
        + "\n</body></html>\n"
    )


def report(course: Path, assignment: str) -> tuple[Path, list[Pair]]:
    """Write ``similarity/<assignment>.html`` and ``.csv``; returns the page and the pairs."""
    from torchlight_grader.nbgrader.spreadsheet import write_rows

    pairs, codes = compare(course, assignment)
    folder = course / "similarity"
    folder.mkdir(exist_ok=True)
    page = folder / f"{assignment}.html"
    page.write_text(render(assignment, pairs, codes), encoding="utf-8")
    write_rows(folder / f"{assignment}.csv",
               [["student_a", "student_b", "similarity", "similarity_a", "similarity_b", "tokens"],
                *([p.a, p.b, f"{p.score:.4f}", f"{p.similarity[0]:.4f}", f"{p.similarity[1]:.4f}",
                   p.tokens] for p in pairs)])  # fmt: skip
    return page, pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--course", type=Path, default=Path("assignments"))
    parser.add_argument("--assignment", required=True)
    args = parser.parse_args(argv)
    course = args.course.resolve()
    if not (course / "release" / args.assignment).is_dir():
        print(f"expected the released assignment {course / 'release' / args.assignment} (the "
              "starter code to leave out), found none: run `make course-release` first",
              file=sys.stderr)  # fmt: skip
        return 1
    page, pairs = report(course, args.assignment)
    print(f"{len(pairs)} pairs compared: {page} (a pointer for a person, never a penalty)")
    for p in pairs[:5]:
        print(f"  {100 * p.score:3.0f}%  {p.a} and {p.b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
