"""Grade a course on a Dask distributed cluster (``make course-grade CLUSTER=tcp://host:8786``).

``torchlight_grader/course/grade.py`` hands :func:`pool` its students when ``--cluster`` is given (this
module is in the installed grader package so that the workers can import the tasks); the
rest (the gradebook snapshot and integrity check before and after, the sqlite-lock retry, the
logs, the exports, the failure report) stays the local tool's. Here each student becomes one
Dask task, ``nbgrader autograde --student=ID`` then ``generate_feedback --student=ID`` (the
local pool's job, the same commands and options), run on a Dask worker by a
``torchlight_grader/course/batch.py`` process that the worker keeps for the next student (one nbgrader
start-up per worker slot, as in the local pool). Student code runs in the worker machine's
bubblewrap sandbox, exactly as it does locally.

What ``CLUSTER`` may be:

- ``tcp://host:8786`` / ``tls://host:8786``: a running scheduler (``dask scheduler``, or the
  address of a dask-jobqueue, SSH or Kubernetes cluster);
- a path ending in ``.json``: a scheduler file (``dask scheduler --scheduler-file F``, the usual
  way on Slurm/PBS, where the workers are batch jobs ``dask worker --scheduler-file F``);
- ``local`` or ``local:N``: a ``LocalCluster`` of N worker processes (default: ``--jobs``) on
  this machine, one thread each, started and stopped by this run.

What the workers must share with this machine (checked on every worker before the first task,
with a message naming the worker when it fails):

- **the course directory at the same path** (shared storage: NFS, Lustre, a Kubernetes volume):
  a worker reads ``submitted/<student>/`` and writes ``autograded/<student>/`` and
  ``feedback/<student>/`` there, only its own students' folders, as the local pool's workers do;
- **the gradebook**: PostgreSQL (``DB_URL``), which every worker reaches over the network, is
  what a real cluster needs. The sqlite file works only for workers on this machine (a
  ``LocalCluster``, or ``dask worker`` processes started here): sqlite's locking is not safe
  on network file systems, so a worker that does not see the very same file (same device and
  inode) is refused;
- **the project's checkout at the same path**: the grading process is ``torchlight_grader/course/batch.py``;
- **the same grader**: the worker's ``torchlight``, ``torchlight_grader`` and nbgrader must be
  this machine's, file for file (a digest of their sources is compared), so that the grades
  cannot depend on which worker ran them.

Why a killed worker loses nothing: Dask reschedules the tasks of a worker that died (its
connection to the scheduler broke) on another worker, and a task is a whole student (``--force``
regrades from the submission, overwriting what a killed run wrote). The grading process of a
worker watches its parent and ends itself, and with it its sandboxes, as soon as the worker is
gone, so a dead worker's half-done student is never written concurrently with the retry. A
student whose task failed on ``distributed.scheduler.allowed-failures`` (3) workers in a row is
reported as failed, like any other failure.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torchlight_grader.course import batch

Jobs = dict[str, tuple[list[list[str]], int]]  # student -> (nbgrader commands, notebooks)
RunTuple = tuple[tuple[str, ...], int, str, float]  # batch.Run's fields

# ------------------------------------------------------------------------------ on the worker
_SLOTS: dict[tuple[str, str, str], list[Any]] = {}
_SLOTS_LOCK = threading.Lock()


def _worker_class(tools: str) -> Any:
    """:class:`~torchlight_grader.course.batch.Worker`, started through :func:`_child_main`: a
    Dask worker killed mid-student leaves no grader running."""
    import subprocess

    worker: Any = batch.Worker

    class ChildWorker(worker):
        def _start(self) -> subprocess.Popen[str]:
            proc: Any = getattr(self, "proc")  # noqa: B009 - typed by batch
            if proc is None or proc.poll() is not None:
                self.proc = proc = subprocess.Popen(
                    [sys.executable, "-m", "torchlight_grader.course.dask", "--child",
                     str(os.getpid()), self.marker, tools],
                    cwd=self.course, env=self.env, stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                )  # fmt: skip
            return proc

    return ChildWorker


def _child_main(parent: int, marker: str, tools: str) -> int:
    """``batch.serve`` with a watchdog: exit at once when ``parent`` is no longer this
    process's parent (it died; the kernel reparented us). Its sandboxes die with it (bwrap
    ``--die-with-parent``); an open gradebook transaction is rolled back by the database."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.05)
        os._exit(75)

    if os.getppid() != parent:
        return 75
    threading.Thread(target=watch, daemon=True).start()
    return batch.serve(marker)


@contextmanager
def _slot(course: str, db_url: str, tools: str) -> Iterator[Any]:
    """A free grading process for ``course`` in this Dask worker (one per task running at once)."""
    key = (course, db_url, tools)
    with _SLOTS_LOCK:
        free = _SLOTS.setdefault(key, [])
        worker = free.pop() if free else None
    if worker is None:
        bin_dir = str(Path(sys.executable).parent)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        env["COURSE_DB_URL"] = db_url
        worker = _worker_class(tools)(Path(course), env)
    try:
        yield worker
    finally:
        with _SLOTS_LOCK:
            _SLOTS[key].append(worker)


def grade_student(
    course: str, commands: list[list[str]], notebooks: int, db_url: str, tools: str
) -> dict[str, Any]:
    """The Dask task: one student's commands in this worker's grading process."""
    with _slot(course, db_url, tools) as worker:
        runs = worker.do(commands, notebooks)
    return {"pid": os.getpid(), "runs": [(r.args, r.returncode, r.output, r.seconds) for r in runs]}


#: What renders and sanitizes a page besides the hashed packages: their versions are in the key.
RENDERERS = ("nbconvert", "nbformat", "nh3", "mistune", "jinja2", "markupsafe", "bleach",
             "django-static-mathjax", "jupyter-server-mathjax", "pygments")  # fmt: skip


def grader_files() -> list[tuple[Path, Path]]:
    """``(package folder, file)`` for every file of torchlight, torchlight_grader and nbgrader
    (byte code left out: it follows from the sources)."""
    import importlib.util

    files = []
    for name in ("torchlight", "torchlight_grader", "nbgrader"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"expected the package {name} to be installed, found none")
        root = Path(list(spec.submodule_search_locations)[0]).resolve()
        files += [
            (root, path)
            for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
        ]
    return files


def checks_modules() -> dict[str, str]:
    """Each assignment's own hidden-checks module, as a path inside torchlight_grader
    (``a1_functions -> checks/a1_functions.py``), from the registry."""
    from torchlight_grader.checks import registry

    return {a: "/".join(m.split(".")[1:]) + ".py" for a, m in registry._MODULES.items()}


def grader_digests(
    assignments: Sequence[str], files: Sequence[tuple[Path, Path]] | None = None
) -> dict[str, str]:
    """The digest of what grades each assignment (issue 40 item 3): :func:`grader_digest`
    without the other assignments' own checks modules, so that a fix to one assignment's
    hidden checks regrades that assignment's notebooks only. Everything else (the sandbox, the
    shared checks, the nbgrader plugins, the pages, torchlight, nbgrader) is in every digest.
    ``files``: ``(package folder, file)`` pairs (default :func:`grader_files`)."""
    own = checks_modules()
    hashed = []
    for root, path in files if files is not None else grader_files():
        name = str(path.relative_to(root))
        hashed.append((root.name, name, hashlib.sha256(path.read_bytes()).digest()))
    tail = _environment_digest()
    out = {}
    for assignment in assignments:
        others = {m for a, m in own.items() if a != assignment}
        h = hashlib.sha256()
        for package, name, content in hashed:
            if package == "torchlight_grader" and name in others:
                continue
            h.update(f"{package}/{name}".encode() + b"\0" + content)
        h.update(tail)
        out[assignment] = h.hexdigest()
    return out


def grader_digest() -> str:
    """A digest of everything that produces a grade or a page (issue 39 item 2): every file of
    torchlight, torchlight_grader (its templates and the typesetter's script included) and
    nbgrader, found without importing them (importing nbgrader costs seconds); the versions of
    the packages that render and sanitize pages; and the Node.js that typesets their math."""
    h = hashlib.sha256()
    for root, path in grader_files():
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    h.update(_environment_digest())
    return h.hexdigest()


def _environment_digest() -> bytes:
    """The renderers' versions and the Node.js that typesets math, for the digests."""
    import importlib.metadata
    import shutil
    import subprocess

    h = hashlib.sha256()
    for name in RENDERERS:
        try:
            h.update(f"{name}=={importlib.metadata.version(name)}\0".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{name} absent\0".encode())
    node = shutil.which("node")
    version = "absent"
    if node:
        try:
            version = subprocess.run([node, "--version"], capture_output=True, text=True,
                                     timeout=30, check=False).stdout.strip()  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            version = f"does not run: {exc}"
    h.update(f"node {node} {version}".encode())
    return h.digest()


def worker_check(
    course: str, sqlite: tuple[int, int] | None, digest: str, tools: str
) -> str | None:
    """Run on every worker before grading: ``None``, or why this worker cannot grade."""
    config = Path(course) / "nbgrader_config.py"
    if not config.is_file() or not (Path(course) / "submitted").is_dir():
        return (f"expected the course directory {course} (with nbgrader_config.py and "
                "submitted/) on the worker at the same path, found none: put the course on "
                "storage the workers share")  # fmt: skip
    if not (Path(tools) / "batch.py").is_file():
        return (
            f"expected the project's torchlight_grader/course/batch.py at {tools} on the worker, found "
            "none: run the workers from the same checkout path (or image) as this machine"
        )
    if sqlite is not None:
        db = Path(course) / "gradebook.db"
        seen = (db.stat().st_dev, db.stat().st_ino) if db.exists() else None
        if seen != sqlite:
            return ("the sqlite gradebook is not this machine's file on the worker (sqlite is "
                    "only safe for workers on the same machine): pass DB_URL=postgresql+psycopg2:"
                    "//... for a cluster")  # fmt: skip
    mine = grader_digest()
    if mine != digest:
        return (f"expected the grader of the machine that submits (digest {digest[:12]}), found "
                f"{mine[:12]}: install the same torchlight/torchlight_grader/nbgrader on the "
                "workers")  # fmt: skip
    from torchlight_grader import sandbox

    try:
        sandbox.ensure_available()
    except Exception as exc:  # noqa: BLE001 - reported as this worker's reason
        return f"the sandbox cannot be built on the worker: {exc}"
    return None


# ------------------------------------------------------------------------------ on the client
class Workers:
    """The Dask workers a run saw (``seen``) and lost (``lost``), for its summary."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.lost: list[str] = []

    def update(self, now: set[str]) -> list[str]:
        """Record the scheduler's current workers; returns those gone since the last call."""
        gone = sorted(w for w in self.seen - now if w not in self.lost)
        self.lost += gone
        self.seen |= now
        return gone

    def watch(self, client: Any, stop: threading.Event) -> None:
        """Poll the scheduler's worker list until ``stop``; report each lost worker at once
        (Dask itself says nothing: it reschedules the worker's tasks on another)."""
        while not stop.wait(0.5):
            try:
                now = set(client.scheduler_info()["workers"])
            except Exception:  # noqa: BLE001 - the client is closing: the run is over
                return
            for address in self.update(now):
                print(f"Dask worker {address} lost (died or disconnected): its students are "
                      "graded again on another worker", file=sys.stderr, flush=True)  # fmt: skip

    def summary(self) -> str:
        lost = f", {len(self.lost)} lost: {', '.join(self.lost)}" if self.lost else ""
        return f"on {len(self.seen)} Dask worker(s){lost}"


def connect(cluster: str, jobs: int) -> tuple[Any, Any]:
    """``(client, local cluster or None)`` for ``cluster`` (see the module docstring)."""
    from distributed import Client, LocalCluster

    if cluster == "local" or cluster.startswith("local:"):
        n = int(cluster.split(":", 1)[1]) if ":" in cluster else jobs
        local = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                             dashboard_address=None)  # fmt: skip
        return Client(local), local
    try:
        if cluster.endswith(".json"):
            return Client(scheduler_file=cluster, timeout=30), None
        return Client(cluster, timeout=30), None
    except OSError as exc:
        raise SystemExit(
            f"expected a Dask scheduler at CLUSTER={cluster} (tcp://host:8786, a scheduler "
            f"file, or local:N), could not connect: {exc}"
        ) from None


def pool(
    cluster: str,
    course: Path,
    jobs: Jobs,
    db_url: str | None,
    tools: Path,
    n_local: int,
    on_done: Callable[[str, list[RunTuple]], None] | None = None,
    seen: Workers | None = None,
) -> dict[str, list[RunTuple]]:
    """Every student of ``jobs`` one Dask task on ``cluster``; each student's runs, as
    ``batch.Run`` fields (``tools``: the folder of ``torchlight_grader/course/batch.py``; ``n_local``: the
    workers of ``CLUSTER=local``; ``on_done(student, runs)``: called as each student ends, for
    the progress lines and the incremental state; ``seen``: filled with the workers that took
    part and those lost, each loss reported on stderr the moment the scheduler drops it)."""
    from distributed import as_completed

    client, local = connect(cluster, n_local)
    seen = seen if seen is not None else Workers()
    stop = threading.Event()
    try:
        print(f"waiting for Dask workers at {client.scheduler.address} ...", file=sys.stderr)
        client.wait_for_workers(1, timeout=600)
        sqlite = None
        url = db_url
        if not db_url:
            db = course / "gradebook.db"
            sqlite = (db.stat().st_dev, db.stat().st_ino)
            url = f"sqlite:///{db}?timeout=600"
        problems = {
            w: why
            for w, why in client.run(
                worker_check, str(course), sqlite, grader_digest(), str(tools)
            ).items()
            if why
        }
        if problems:
            raise SystemExit(
                "refusing to grade on the cluster:\n"
                + "\n".join(f"  worker {w}: {why}" for w, why in sorted(problems.items()))
            )
        watcher = threading.Thread(target=seen.watch, args=(client, stop), daemon=True)
        watcher.start()
        run_id = f"{os.getpid()}-{time.time_ns()}"
        futures = {
            client.submit(
                grade_student, str(course), commands, notebooks, url, str(tools),
                key=f"grade-{student}-{run_id}", pure=False,
            ): student
            for student, (commands, notebooks) in jobs.items()
        }  # fmt: skip
        done: dict[str, list[RunTuple]] = {}
        for future in as_completed(futures):
            student = futures[future]
            try:
                done[student] = [tuple(r) for r in future.result()["runs"]]
            except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: this student failed
                first = tuple(jobs[student][0][0]) if jobs[student][0] else ("autograde",)
                done[student] = [
                    (first, 1, f"the Dask task failed: {type(exc).__name__}: {exc}\n", 0.0)
                ]
            if on_done is not None:
                on_done(student, done[student])
        return done
    finally:
        stop.set()
        client.close()
        if local is not None:
            local.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"] and len(sys.argv) == 5:
        sys.exit(_child_main(int(sys.argv[2]), sys.argv[3], sys.argv[4]))
    raise SystemExit(
        "usage: torchlight_grader/course/grade.py --cluster ADDRESS (this is its helper)"
    )
