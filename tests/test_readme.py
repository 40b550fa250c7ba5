"""Every shell block of README.md, pasted into a fresh shell (issue 26): each command runs as
written, from a copy of the repository root (links to its files, so what a command writes lands
in a temporary folder), in a shell started without the project's environment.

A block is pasted line by line into one shell: ``source``, ``cd`` and ``export`` lines carry on
to the block's next commands. A command that runs for minutes by design (the lab, the whole
test suite, a training run) is stopped with Ctrl-C (SIGINT to its process group) once it has
printed that it started, and must then stop cleanly; every other command must finish, with
exit status 0, within its time cap.

A command the prose shows in an inline code span (`make docs-serve`, `python -m torchlight.train
--dataset digits --model cnn`) and no block pastes is validated instead of run (several build
for minutes or serve until stopped): a ``make`` line must dry-run (``make -n``, so the target and
its variables exist), a ``python`` line must answer ``--help`` with every ``--flag`` it shows
listed (flags after a script it runs, as in ``torchlight.compat your_script.py --its``, belong to
that script).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)
CARRIED = ("source ", "cd ", "export ")

# Long by design: (how the command starts, what it prints once it really runs, the signal that
# stops it, what it must print then). Jupyter takes Ctrl-C only from a terminal (it asks to
# confirm there); without one it stops on SIGTERM, as under a process manager.
LONG = [
    (
        r"make (lab|homework)$",
        r"^\s+http://127\.0\.0\.1:\d+/lab\?token=",
        signal.SIGTERM,
        r"Shutting down",
    ),
    # (mypy and pytest print their own KeyboardInterrupt traceback, depending on where Ctrl-C
    # lands; the claim here is only that `make test` starts, so any stop is fine)
    (r"make test$", r"ruff check", signal.SIGINT, r"|Traceback"),
    (
        r"python -m torchlight\.train ",
        r"epoch 1/\d+:",
        signal.SIGINT,
        r"interrupted after epoch 0/",
    ),
]
# `make` as pasted, except that it never reinstalls .venv here (the suite runs in it; CI's fresh
# machine runs the install itself): the stamps of `make venv`, `lab`, `homework` and `docs` count as done.
NO_INSTALL = " ".join(
    f"-o .venv/.torchlight-{stamp}" for stamp in ("installed", "lab", "homework", "docs")
)
CAP_S = 600  # a command that neither finishes nor starts within this fails


def shell_blocks(text: str) -> list[tuple[str, list[str]]]:
    """``(language, lines)`` of every fenced block; a fence must name its language."""
    blocks = []
    for match in FENCE.finditer(text):
        indent, language, body = match.groups()
        lines = [
            line[len(indent) :] if line.startswith(indent) else line for line in body.splitlines()
        ]
        blocks.append((language, lines))
    return blocks


def commands(lines: list[str]) -> list[str]:
    """The block's commands, a trailing backslash joining lines as the shell does."""
    out, current = [], ""
    for line in lines:
        current += line
        if current.endswith("\\"):
            current = current[:-1]
            continue
        if current.strip() and not current.lstrip().startswith("#"):
            out.append(current.strip())
        current = ""
    return out


@dataclass
class Pasted:
    """One README command as it ran: exit status (0 for a long one stopped as planned), output,
    seconds, and for a JupyterLab what it served (its page config, whether /formgrader exists)."""

    rc: int
    text: str
    seconds: float
    lab: dict[str, Any] = field(default_factory=dict)


def probe_lab(url: str) -> dict[str, Any]:
    """The page config a running JupyterLab serves at ``url`` (/lab?token=...), and whether
    nbgrader's Formgrader answers beside it."""
    with urllib.request.urlopen(url, timeout=30) as r:
        page = r.read().decode()
    found = re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S)
    assert found, page[:2000]
    config: dict[str, Any] = json.loads(found[1])
    try:
        urllib.request.urlopen(url.replace("/lab?", "/formgrader?"), timeout=30)
        config["formgrader"] = True
    except OSError:
        config["formgrader"] = False
    if config.get("serverRoot", "").endswith("homework"):  # what the Validate button asks
        base, token = url.split("/lab?token=")
        request = urllib.request.Request(
            f"{base}/assignments/validate", data=b"path=a1_functions/a1_functions.ipynb",
            headers={"Authorization": f"token {token}"}, method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=240) as r:
            config["validate"] = json.loads(r.read().decode())
    return config


def run_pasted(workdir: Path, setup: list[str], command: str) -> Pasted:
    """Run ``command`` in a fresh bash after the block's ``setup`` lines; stop a long one with
    its signal once it has started."""
    bare = re.sub(r"\s+#.*$", "", command)  # without its trailing comment
    long = next((entry for entry in LONG if re.match(entry[0], bare)), None)
    pasted = re.sub(r"^make ", f"make {NO_INSTALL} ", command)
    script = "\n".join([*setup, pasted]) + "\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(ROOT))
        and Path(sys.executable).parent != Path(p)
    )  # fmt: skip
    env["BROWSER"] = "true"  # JupyterLab opens no browser window
    start = time.perf_counter()
    # (Ctrl-C reaches it even where pytest runs in the background: tests/conftest.py)
    proc = subprocess.Popen(
        ["bash", "-c", script], cwd=workdir, env=env, text=True, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    out: list[str] = []
    started: list[str] = []
    event = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if long and not event.is_set() and re.search(long[1], line):
                started.append(line.strip())
                event.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    lab: dict[str, Any] = {}
    if long:
        if event.wait(CAP_S):
            time.sleep(1)  # past its last start-up line
            if "token=" in started[0]:
                try:
                    lab = probe_lab(started[0])
                except (OSError, AssertionError) as error:
                    lab = {"error": repr(error)}
                # jupyter_server logs from its SIGTERM handler: a signal that lands while it
                # writes a log line (the probe's 404, written after the reply) raises a
                # reentrant-write RuntimeError there, and the stop is lost (seen: 2 in 16)
                time.sleep(1)
            os.killpg(proc.pid, long[2])
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    else:
        try:
            proc.wait(CAP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(20)  # until every process of the group has closed the output
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group outlived its shell
    seconds = time.perf_counter() - start
    text = "".join(out)
    if long:  # 0 when it started, and stopped as it should; else why not, in the text
        if not event.is_set():
            return Pasted(124, f"did not start within {CAP_S} s:\n{text}", seconds)
        if not re.search(long[3], text) or ("Traceback" in text and "Traceback" not in long[3]):
            return Pasted(1, f"after {long[2]!r}, no {long[3]!r} or a Traceback:\n{text}", seconds)
        return Pasted(0, text, seconds, lab)
    return Pasted(proc.returncode, text, seconds)


# Both fixtures run once per session although tests/test_homework.py imports them (an imported
# fixture is instantiated again per module): the second asks here.
_ONCE: dict[str, Any] = {}


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if "workdir" not in _ONCE:
        _ONCE["workdir"] = _make_workdir(tmp_path_factory)
    return _ONCE["workdir"]


def _make_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository root as links (so a command's files land here), with a checkpoint where
    the README's ``generate`` line expects the one its training line writes (minutes of
    training: here a tiny GPT on a short text, saved by the same command line)."""
    where = tmp_path_factory.mktemp("readme")
    for entry in ROOT.iterdir():
        if entry.name not in (".git", "homework"):  # make homework writes a fresh one here
            (where / entry.name).symlink_to(entry)
    code = (
        "import sys; from torchlight.train import cli, text; "
        "text.load_text = lambda name: open(sys.argv[1]).read()[:6000]; "
        "text.MODEL_CONFIGS['gpt'] = {'block_size': 16, 'd_model': 16, 'nhead': 2, 'num_layers': 1}; "
        "sys.exit(cli.main(['--dataset', 'shakespeare', '--model', 'gpt', '--epochs', '1', "
        "'--save', 'gpt.ckpt']))"
    )  # fmt: skip
    sample = where / "sample.txt"
    sample.write_text(Path(ROOT / "README.md").read_text() * 2)
    subprocess.run([sys.executable, "-c", code, str(sample)], cwd=where, check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    return where


README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = [(lang, lines) for lang, lines in shell_blocks(README) if lang in ("bash", "sh", "shell")]


@pytest.fixture(scope="session")
def pasted(workdir: Path) -> dict[str, Pasted]:
    """Every command of every shell block, run once in README order (tests/test_homework.py
    reads the homework commands' results too): command -> what happened."""
    if "pasted" not in _ONCE:
        _ONCE["pasted"] = _paste_all(workdir)
    return _ONCE["pasted"]


def _paste_all(workdir: Path) -> dict[str, Pasted]:
    results: dict[str, Pasted] = {}
    for _, lines in BLOCKS:
        setup: list[str] = []
        for command in commands(lines):
            if command.startswith(CARRIED):
                setup.append(command)
                continue
            bare = re.sub(r"\s+#.*$", "", command)
            same = next((r for c, r in results.items() if re.sub(r"\s+#.*$", "", c) == bare), None)
            results[command] = same or run_pasted(workdir, setup, command)  # shown twice: once
    print("\n".join(f"{r.seconds:5.1f} s  rc {r.rc}  {c}" for c, r in results.items()))
    return results


def test_every_fence_names_its_language() -> None:
    """So no shell block can hide from the test below (```text for trees and samples)."""
    unnamed = [lines[:1] for lang, lines in shell_blocks(README) if not lang]
    assert not unnamed, f"README.md fences without a language: {unnamed}"
    assert len(BLOCKS) >= 4


PROGRAMS = re.compile(r"(make|python|\.venv/bin/python|bash|git)( |$)")


def inline_commands(text: str) -> list[str]:
    """The commands of the prose's inline code spans (outside fenced blocks), in order, once
    each: spans that start with make, python, .venv/bin/python, bash or git."""
    prose = FENCE.sub("", text)
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", prose)
    return list(dict.fromkeys(span.strip() for span in spans if PROGRAMS.match(span.strip())))


def check_inline(workdir: Path, command: str) -> str:
    """Why ``command`` (an inline span) would not work pasted after ``make lab``; "" if fine."""
    words = command.split()
    if len(words) == 1:  # the program's name in a sentence ("write `.venv/bin/python`")
        found = (workdir / words[0]).exists() if "/" in words[0] else shutil.which(words[0])
        return "" if found else f"{words[0]} is not installed"
    env = {**os.environ, "PATH": f"{workdir / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    if words[0] == "make":
        run = subprocess.run(["make", "-n", *words[1:]], cwd=workdir, env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        return "" if run.returncode == 0 else f"make -n {' '.join(words[1:])}:\n{run.stderr}"
    if words[0] in ("python", ".venv/bin/python"):
        script = words[1:3] if words[1] == "-m" else words[1:2]
        own, rest = [], words[1 + len(script) :]
        for word in rest:
            if not word.startswith("-") and word.endswith(".py"):
                break  # the arguments of the script it runs
            own.append(word)
        run = subprocess.run([str(workdir / ".venv/bin/python"), *script, "--help"], cwd=workdir,
                             env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
        if run.returncode != 0:
            return f"{' '.join(script)} --help exited {run.returncode}:\n{run.stderr[-2000:]}"
        flags = [w.split("=")[0] for w in own if w.startswith("--")]
        unknown = [
            f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", run.stdout)
        ]
        return f"{' '.join(script)} --help lists no {unknown}" if unknown else ""
    return f"no check for {command!r}: add one to tests/test_readme.py"


def test_every_inline_command_of_the_prose_is_valid(workdir: Path) -> None:
    """Each command the prose shows in an inline span, unless a block runs it as pasted: the
    make target dry-runs, the python module or script parses its flags."""
    pasted = {re.sub(r"\s+#.*$", "", c) for _, lines in BLOCKS for c in commands(lines)}
    shown = [c for c in inline_commands(README) if c not in pasted]
    assert any(c.startswith("make ") for c in shown) and any("python -m" in c for c in shown)
    problems = {c: why for c in shown if (why := check_inline(workdir, c))}
    assert not problems, "\n".join(f"`{c}`: {why}" for c, why in problems.items())


@pytest.mark.parametrize("block", range(len(BLOCKS)))
def test_readme_shell_block_runs_as_pasted(pasted: dict[str, Pasted], block: int) -> None:
    _, lines = BLOCKS[block]
    for command in commands(lines):
        if not command.startswith(CARRIED):
            run = pasted[command]
            assert run.rc == 0, f"{command!r} exited {run.rc}:\n{run.text[-3000:]}"


def test_the_tutorials_lab_shows_no_nbgrader_and_the_homework_lab_only_validate(
    pasted: dict[str, Pasted],
) -> None:
    """`make lab` and `make homework` as pasted, even with nbgrader in .venv (make test
    installs it): the lab disables every nbgrader plugin and the Formgrader; the homework's
    lab only keeps Validate."""
    lab = next(r.lab for c, r in pasted.items() if c.startswith("make lab"))
    homework = next(r.lab for c, r in pasted.items() if re.match(r"make homework\s", c + " "))
    assert "disabledExtensions" in lab and "disabledExtensions" in homework, (lab, homework)
    plugins = ["assignment-list", "course-list", "create-assignment", "formgrader", "menu"]
    for plugin in [*plugins, "validate-assignment"]:
        assert f"@jupyter/nbgrader:{plugin}" in lab["disabledExtensions"], lab["disabledExtensions"]
    for plugin in plugins:
        assert f"@jupyter/nbgrader:{plugin}" in homework["disabledExtensions"]
    assert "@jupyter/nbgrader:validate-assignment" not in homework["disabledExtensions"]
    for config in (lab, homework):  # no first-run toast asking about Jupyter's news feed
        assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
    assert lab["formgrader"] is False and homework["formgrader"] is False
    # Validate runs the learner's a1 (as released: every answer still raises) in its kernel
    validate = homework["validate"]
    assert validate["success"] and "NotImplementedError" in json.dumps(validate), validate
