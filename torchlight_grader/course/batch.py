"""Several nbgrader commands in one Python process: one start-up instead of one per command.

Each ``nbgrader`` command costs about a second before it does any work (importing nbgrader,
nbconvert, SQLAlchemy and the grader, loading ``nbgrader_config.py``, checking the sandbox), so
``make course-grade`` runs a worker's autograde, generate_feedback and exports in one process,
one after the other, the way nbgrader's own test suite runs its commands in-process
(``NbGraderApp.instance()``, ``initialize``, ``start``, ``reset``). Every command still runs
in full, in order, with its own configuration and its own exit status; a failing command does
not stop the next one (one broken submission costs only that student).

Usage (each argument is one command's nbgrader arguments, as a JSON list)::

    .venv/bin/python torchlight_grader/course/batch.py '["autograde", "*", "--force"]' \\
        '["generate_feedback", "*", "--force"]'

Prints ``$ nbgrader ARGS  # exit N, S s`` after each command and exits with the first nonzero
exit status (0 when every command succeeded). ``--serve MARKER`` instead takes jobs (lists of
commands) from stdin, one per line, until stdin ends: :class:`Worker` is the other end, used by
``torchlight_grader/course/grade.py`` (one worker per JOBS, each grading one student after another) and
``torchlight_grader/course/manage.py grade``.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def run(args: Sequence[str]) -> int:
    """``nbgrader ARGS`` in this process; its exit status (never raises)."""
    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp

    app = NbGraderApp.instance()
    try:
        app.initialize(list(args))
        app.start()
    except NoStart:
        return 0
    except SystemExit as exc:  # nbgrader's own way to fail (app.fail, a config error)
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except Exception:  # noqa: BLE001 - reported as this command's failure, the next one runs
        traceback.print_exc()
        return 1
    finally:
        app.reset()
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def run_all(commands: Sequence[Sequence[str]], marker: str = "") -> int:
    """Run ``commands`` in order, all of them; print one line per command when it ends:
    ``$ nbgrader ARGS  # exit N, S s``, prefixed by ``marker`` (when given) and ``exit``."""
    status = 0
    for command in commands:
        start = time.perf_counter()
        code = run(command)
        seconds = time.perf_counter() - start
        prefix = f"{marker} exit {code} " if marker else ""
        print(f"{prefix}$ nbgrader {' '.join(command)}  # exit {code}, {seconds:.1f} s", flush=True)
        status = status or code
    return status


def _commands(text: str) -> list[list[str]]:
    commands = json.loads(text)
    if not isinstance(commands, list) or not all(
        isinstance(c, list) and all(isinstance(a, str) for a in c) for c in commands
    ):
        raise SystemExit(f"expected a JSON list of lists of strings, got {text[:200]!r}")
    return commands


def serve(marker: str) -> int:
    """Jobs from stdin, one per line, until stdin ends: ``{"commands": [[ARGS], ...],
    "notebooks": N}``, where ``N`` (or null) is how many notebooks this process will grade
    before the next job could come, for the grader's sandboxes started ahead
    (:func:`torchlight_grader.sandbox.plan`).

    After each job a line ``MARKER done STATUS`` (``marker`` is a secret of the process that
    started this one, so nothing nbgrader logs can end a job early)."""
    for line in sys.stdin:
        job = json.loads(line)
        if not isinstance(job, dict) or not isinstance(job.get("notebooks", 0), int | None):
            raise SystemExit(f"expected a job object, got {line[:200]!r}")
        if job.get("notebooks") is not None:
            from torchlight_grader import sandbox

            sandbox.plan(job["notebooks"])
        status = run_all(_commands(json.dumps(job.get("commands"))), marker)
        print(f"{marker} done {status}", flush=True)
    return 0


@dataclass
class Run:
    """One nbgrader command's outcome."""

    args: tuple[str, ...]
    returncode: int
    output: str
    seconds: float


class Worker:
    """A ``course_batch.py --serve`` process in the course directory: jobs in, one
    :class:`Run` per command out. Its output (stdout and stderr together) is split per command."""

    def __init__(self, course: Path, env: dict[str, str]) -> None:
        self.course, self.env = course, env
        self.marker = f"@@course-batch-{secrets.token_hex(8)}"
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "torchlight_grader.course.batch", "--serve", self.marker],
                cwd=self.course,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                # Its own process group: a terminal's Ctrl-C reaches only the tool, which kills
                # the whole group (nbgrader, kernels, sandboxes) at once and says what was kept.
                start_new_session=True,
            )
        return self.proc

    def start(self) -> Worker:
        """Start the process now (it imports nbgrader while the caller does other work)."""
        self._start()
        return self

    def do(self, commands: Sequence[Sequence[str]], notebooks: int | None = None) -> list[Run]:
        """Run ``commands`` in the worker, all of them, in order; one :class:`Run` each.

        ``notebooks``: how many notebooks the worker will grade before its next job could come
        (so it starts no sandbox ahead for a notebook that will not come). A worker that dies
        mid-job (killed, out of memory) fails the commands it did not finish; the next job
        starts a new worker."""
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None, "started with pipes"
        start = time.perf_counter()
        runs: list[Run] = []
        lines: list[str] = []
        try:
            job = {"commands": [list(c) for c in commands], "notebooks": notebooks}
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
        except OSError:
            pass
        exit_line = f"{self.marker} exit "
        for line in proc.stdout:
            if line.startswith(f"{self.marker} done "):
                break
            if line.startswith(exit_line):
                code = int(line[len(exit_line) :].split(" ", 1)[0])
                runs.append(
                    Run(
                        tuple(commands[len(runs)]),
                        code,
                        "".join(lines),
                        time.perf_counter() - start,
                    )
                )
                lines, start = [], time.perf_counter()
                continue
            lines.append(line)
        else:  # the worker ended before the job did
            proc.wait()
            why = (
                f"the grading process ended with exit status {proc.returncode} before this command"
            )
            for command in commands[len(runs) :]:
                runs.append(Run(tuple(command), 1, "".join(lines) + why + "\n", 0.0))
                lines = []
        return runs

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            if self.proc.stdout is not None:
                self.proc.stdout.read()
                self.proc.stdout.close()
            self.proc.wait()
            self.proc = None


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["--serve"] and len(argv) == 2:
        return serve(argv[1])
    return run_all([_commands(f"[{text}]")[0] for text in argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
