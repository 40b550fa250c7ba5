"""A throw-away PostgreSQL server for the gradebook tests and the course benchmark (no mocks).

It runs Debian's own ``postgresql`` binaries (``/usr/lib/postgresql/<version>/bin``): ``initdb``
makes a cluster in a fresh temporary directory, ``pg_ctl`` starts it listening only on a Unix
socket inside that directory (no TCP port at all), and the server is stopped and the directory
removed when the ``with`` block ends, also when the block raised.

PostgreSQL refuses to run as root, so when the caller is root the cluster belongs to an
unprivileged OS user: ``nobody`` (present on every Debian system), which owns only the temporary
directory. Authentication is ``trust`` over the socket, which only local processes can reach.

Usage::

    with PostgresServer() as pg:
        url = pg.create_database("gradebook")   # postgresql+psycopg2://grader@/gradebook?host=...

or, to keep one running for a manual ``make course-grade DB_URL=...``::

    .venv/bin/python tests/pg_server.py     # prints the URL, stops on Ctrl-C
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

SUPERUSER = "grader"


def postgres_bin() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has ``initdb`` and ``pg_ctl``."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if not found:
        raise RuntimeError(
            "expected PostgreSQL's server binaries in /usr/lib/postgresql/<version>/bin, found "
            "none: install Debian's package (`apt-get install postgresql`)"
        )
    return Path(found[-1]).parent


class PostgresServer:
    """A PostgreSQL cluster in a temporary directory, on a Unix socket, for one ``with`` block."""

    def __init__(self, os_user: str = "nobody") -> None:
        self.bin = postgres_bin()
        self.as_root = os.geteuid() == 0
        self.user = pwd.getpwnam(os_user) if self.as_root else None
        self.base = Path(tempfile.mkdtemp(prefix="tlpg-", dir="/tmp"))  # short: sockets <108 chars
        self.data = self.base / "data"
        self.socket_dir = self.base
        self.running = False

    # -- running the server's binaries as its owner ---------------------------------------------
    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        proc = subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.base,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(self.base)},
            check=False,
            **kwargs,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{args[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
            )
        return proc

    def start(self) -> PostgresServer:
        if self.user is not None:
            os.chown(self.base, self.user.pw_uid, self.user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
                  "--encoding=UTF8", "--no-locale", "--no-sync")  # fmt: skip
        options = f"-c listen_addresses='' -k {self.socket_dir} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.base / "log"),
                  "-w", "-t", "60", "start")  # fmt: skip
        self.running = True
        return self

    def halt(self) -> None:
        """Stop the server as an administrator would (``pg_ctl stop -m fast``: open connections
        are terminated), keeping its data for :meth:`resume`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self.running = False

    def resume(self) -> None:
        """Start the server :meth:`halt` stopped, with its data."""
        options = f"-c listen_addresses='' -k {self.socket_dir} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.base / "log"),
                  "-w", "-t", "60", "start")  # fmt: skip
        self.running = True

    def stop(self) -> None:
        try:
            if self.running:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
                self.running = False
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- databases ------------------------------------------------------------------------------
    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` (psycopg2 over the Unix socket)."""
        return f"postgresql+psycopg2://{SUPERUSER}@/{database}?host={self.socket_dir}"

    def create_database(self, name: str) -> str:
        """``CREATE DATABASE name``; returns its URL."""
        self.psql("postgres", f'CREATE DATABASE "{name}"')
        return self.url(name)

    def psql(self, database: str, sql: str) -> str:
        """Run ``sql`` with ``psql`` (as the cluster's superuser); returns its unaligned output."""
        proc = subprocess.run(
            [str(self.bin / "psql"), "-h", str(self.socket_dir), "-U", SUPERUSER, "-d", database,
             "-v", "ON_ERROR_STOP=1", "-A", "-t", "-c", sql],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"psql {sql!r} failed:\n{proc.stderr}")
        return proc.stdout


def main() -> int:
    with PostgresServer() as pg:
        print(pg.create_database("gradebook"), flush=True)
        print("PostgreSQL is running; Ctrl-C stops it and deletes its data.", file=sys.stderr)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
