"""The capstone's leaderboard (issue 36 item 4), through `make course-leaderboard` as pasted.

Ten honest recipes and five cheating ones are handed in as notebooks in a real course's
``submitted/`` folder; the board re-runs every recipe in the sandbox and is built twice (a
regrade). Each cheat is mounted for real: a loss printed and not reached, the validation text
read, the CPU budget overrun (the sandbox program's own limits switched off from a cell, three
worker processes), trained weights
shipped inside the notebook, and a run that leaves weights where another student's run looks.
"""

from __future__ import annotations

import base64
import csv
import io
import math
import subprocess
from pathlib import Path

import nbformat
import numpy as np
import pytest

from tests.submissions.pipeline import released_course
from torchlight_grader.checks import a9_capstone as capstone
from torchlight_grader.checks.check import Case

pytestmark = [pytest.mark.nbgrader]

ROOT = Path(__file__).resolve().parents[1]

HONEST = """
CONFIG = {{"d_model": {d}, "nhead": {h}, "num_layers": {layers}, "block_size": {block}}}


def train(model, tokens, rng):
    opt = tl.optim.AdamW(model.parameters(), lr={lr}, weight_decay=0.01)
    offsets = tl.arange(CONFIG["block_size"])[None, :]
    for step in range({steps}):
        starts = tl.tensor(rng.integers(0, len(tokens) - CONFIG["block_size"] - 1, {batch}))[:, None]
        x, y = tokens[starts + offsets], tokens[starts + offsets + 1]
        logits = model(x)
        loss = tl.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
SETTINGS = [  # d, h, layers, block, lr, steps, batch: ten honest students
    (16, 2, 1, 16, 1e-2, 40, 16), (24, 4, 1, 16, 1e-2, 40, 16), (32, 4, 1, 32, 1e-2, 40, 16),
    (32, 4, 1, 16, 2e-2, 60, 8), (16, 4, 2, 16, 1e-2, 50, 16), (48, 4, 1, 16, 5e-3, 30, 16),
    (32, 2, 1, 24, 1e-2, 50, 12), (24, 2, 1, 32, 1e-2, 30, 16), (16, 1, 1, 16, 3e-2, 60, 16),
    (32, 8, 1, 16, 1e-2, 45, 16),
]  # fmt: skip
HONEST_IDS = [f"honest{i:02d}" for i in range(len(SETTINGS))]

PRINTS = (
    HONEST.format(d=16, h=2, layers=1, block=16, lr=1e-2, steps=3, batch=8)
    + """
    print("validation loss 0.0123: a new record")
"""
)
READS_VALIDATION = (
    HONEST.format(d=32, h=4, layers=1, block=32, lr=1e-2, steps=40, batch=16)
    + """
_honest = train


def train(model, tokens, rng):
    from torchlight.data.text import load_text
    text = load_text("shakespeare")  # the whole corpus, validation text included
    _honest(model, tokens, rng)
"""
)
OVERRUNS = """
CONFIG = {"d_model": 32, "nhead": 4, "num_layers": 1, "block_size": 16}
import sys

_frame = sys._getframe()  # the sandbox program that runs this cell: switch its limits off
while _frame is not None and "_run_item" not in _frame.f_globals:
    _frame = _frame.f_back
_frame.f_globals["_limit"] = lambda *args, **kwargs: None


def train(model, tokens, rng):
    import os
    workers = []
    for _ in range(3):  # three workers, to train three times as much in the same wall time
        pid = os.fork()
        if pid == 0:
            x = 0
            for i in range(100_000_000):
                x += i
            os._exit(0)
        workers.append(pid)
    for pid in workers:
        os.waitpid(pid, 0)
"""
SPY = (
    HONEST.format(d=16, h=2, layers=1, block=16, lr=1e-2, steps=2, batch=8)
    + """
_own = train


def train(model, tokens, rng):
    import glob, os
    import numpy as np
    found = [p for d in ("/tmp", "/dev/shm", "/var/tmp", os.getcwd(), os.path.expanduser("~"))
             for p in glob.glob(os.path.join(d, "**", "leaked-*.npz"), recursive=True)]
    if found:  # another student's trained weights: load them
        with np.load(found[0]) as saved:
            model.load_state_dict({k: tl.tensor(saved[k]) for k in saved.files})
    else:
        _own(model, tokens, rng)
"""
)
LEAKER = (
    HONEST.format(d=16, h=2, layers=1, block=16, lr=1e-2, steps=60, batch=16)
    + """
_train = train


def train(model, tokens, rng):
    import os
    import numpy as np
    _train(model, tokens, rng)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    for d in ("/tmp", "/dev/shm", "/var/tmp", os.getcwd()):
        try:
            np.savez(os.path.join(d, "leaked-weights.npz"), **state)
        except OSError:
            pass
"""
)
SHIPS = """
CONFIG = {{"d_model": 16, "nhead": 2, "num_layers": 1, "block_size": 16}}
SHIPPED = "{blob}"


def train(model, tokens, rng):
    import base64, io
    import numpy as np
    with np.load(io.BytesIO(base64.b64decode(SHIPPED))) as saved:
        model.load_state_dict({{k: tl.tensor(saved[k].astype(np.float32)) for k in saved.files}})
"""


def pretrained_blob() -> tuple[str, dict[str, np.ndarray]]:
    """A model trained at length, here, on the corpus with its own labels: what a cheater
    would ship (float16, base64: it fits the 24 KiB code limit)."""
    import torchlight as tl

    ids, vocab = capstone.corpus()
    tokens = ids[: capstone.TRAIN_CHARS].astype(np.int64)
    tl.set_default_dtype(tl.float32)
    try:
        tl.manual_seed(0)
        model = tl.nn.GPT(vocab, block_size=16, d_model=16, nhead=2, num_layers=1)
        opt = tl.optim.AdamW(model.parameters(), lr=1e-2)
        rng = np.random.default_rng(0)
        offsets = np.arange(16)[None, :]
        for _ in range(500):
            starts = rng.integers(0, len(tokens) - 17, 32)[:, None]
            x, y = tl.tensor(tokens[starts + offsets]), tl.tensor(tokens[starts + offsets + 1])
            loss = tl.nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        tl.set_default_dtype(tl.float64)
    state = {k: v.detach().numpy().astype(np.float16) for k, v in model.state_dict().items()}
    buffer = io.BytesIO()
    np.savez(buffer, **state)
    return base64.b64encode(buffer.getvalue()).decode(), state


def hand_in(course: Path, student: str, recipe: str) -> None:
    nb = nbformat.read(course / "release" / "a9_capstone" / "a9_capstone.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "recipe")
    cell.source = recipe
    folder = course / "submitted" / student / "a9_capstone"
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / "a9_capstone.ipynb")


def board(course: Path) -> dict[str, dict[str, str]]:
    done = subprocess.run(
        ["make", "-s", "-C", str(ROOT), "course-leaderboard", f"COURSE={course}", "JOBS=2"],
        capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "recipes ranked" in done.stdout, done.stdout
    with open(course / "leaderboard" / "board.csv", newline="", encoding="utf-8") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, dict[str, np.ndarray]]:
    course = released_course(tmp_path_factory.mktemp("capstone"), "a9_capstone")
    for student, setting in zip(HONEST_IDS, SETTINGS, strict=True):
        d, h, layers, block, lr, steps, batch = setting
        hand_in(course, student, HONEST.format(d=d, h=h, layers=layers, block=block, lr=lr,
                                               steps=steps, batch=batch))  # fmt: skip
    blob, shipped = pretrained_blob()
    cheats = {
        "cheat_prints": PRINTS, "cheat_reads_validation": READS_VALIDATION,
        "cheat_overruns": OVERRUNS, "cheat_ships_weights": SHIPS.format(blob=blob),
        "cheat_leaker": LEAKER, "cheat_spy": SPY,
    }  # fmt: skip
    for student, recipe in cheats.items():
        hand_in(course, student, recipe)
    return course, [board(course), board(course)], shipped


def test_honest_recipes_are_ranked_and_the_regraded_board_is_the_same(boards) -> None:
    course, (first, second), _ = boards
    assert first == second  # the same seed, the same runs: the same board
    honest = [first[s] for s in HONEST_IDS]
    assert all(row["status"] == "ranked" for row in honest), honest
    losses = [float(row["loss"]) for row in honest]
    assert all(2.0 < loss < 4.0 for loss in losses), losses
    ranks = sorted(
        (int(first[s]["rank"]), float(first[s]["loss"])) for s in first if first[s]["rank"]
    )
    assert [loss for _, loss in ranks] == sorted(loss for _, loss in ranks)
    top = sorted(first.values(), key=lambda r: int(r["rank"] or 999))[:3]
    assert all(r["runs"] == "2" for r in top), top  # the top entries ran twice
    page = (course / "leaderboard" / "board.html").read_text()
    assert "<script" not in page and "honest00" in page


def test_cheating_recipes_gain_nothing(boards) -> None:
    course, (first, _), shipped = boards
    best_honest = min(float(first[s]["loss"]) for s in HONEST_IDS)
    worst_honest = max(float(first[s]["loss"]) for s in HONEST_IDS)
    # printed 0.0123; the grader's own measurement of 3 steps of training
    assert float(first["cheat_prints"]["loss"]) > worst_honest
    # the corpus is not in the sandbox: the recipe fails, nothing ranked
    reads = first["cheat_reads_validation"]
    assert reads["status"] == "failed" and not reads["rank"], reads
    assert "FileNotFoundError" in reads["note"], reads
    # limits switched off, three workers: over the budget, counted by the broker over every process
    over = first["cheat_overruns"]
    assert over["status"] == "over budget" and not over["rank"], over
    # shipped weights: excellent on the corpus's own labels, useless under the secret labels
    ships = first["cheat_ships_weights"]
    assert float(ships["loss"]) > worst_honest + 0.3, ships
    check = capstone.CHECKS["test_recipe"]
    ids, vocab = capstone.corpus()
    own_labels = Case([None, 0, vocab], hidden={"perm": np.arange(vocab, dtype=np.uint8),
                                                "eval_seed": 0})  # fmt: skip
    config = {"d_model": 16, "nhead": 2, "num_layers": 1, "block_size": 16}
    state = {k: v.astype(np.float32) for k, v in shipped.items()}
    unpermuted = check.loss(own_labels, {"config": config, "state": state})
    assert unpermuted < best_honest, (unpermuted, best_honest)  # the attack is real
    # the leaker's weights never reach the spy: its own two steps of training is all it has
    assert first["cheat_leaker"]["status"] == "ranked"
    spy = float(first["cheat_spy"]["loss"])
    assert spy > worst_honest and spy > float(first["cheat_leaker"]["loss"]) + 0.3
    assert math.isfinite(spy)


def test_the_class_report_shows_the_board(boards) -> None:
    course, _, _ = boards
    from torchlight_grader.course.report import leaderboard_section

    section = leaderboard_section(course)
    assert "Capstone leaderboard" in section and "honest" in section
    assert "cheat_overruns" in section and "over budget" in section


def test_judges_in_threads_score_as_one_judge_alone() -> None:
    """The leaderboard judges recipes in threads (``--jobs``): rebuilding a model in float32 in one
    judge must not change what another, at the same time, builds or computes (it did: the model
    came out partly float64 and the judge raised, on a busy machine)."""
    from concurrent.futures import ThreadPoolExecutor

    import torchlight as tl
    from torchlight_grader.sandbox.inside.recipe import build

    check = capstone.CHECKS["test_recipe"]
    config = {"block_size": 8, "d_model": 16, "nhead": 2, "num_layers": 1}
    cases = [capstone.sample(np.random.default_rng(n), 0) for n in range(4)]
    received = []
    for case in cases:
        model = build(config, case.args[2], case.args[1])
        state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        received.append({"config": config, "state": state})
    alone = [check.loss(c, r) for c, r in zip(cases, received, strict=True)]
    before = tl.get_default_dtype()
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda n: check.loss(cases[n % 4], received[n % 4]), range(48)))
    assert together == [alone[n % 4] for n in range(48)]
    assert tl.get_default_dtype() is before
