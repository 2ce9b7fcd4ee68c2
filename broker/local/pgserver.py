"""A PostgreSQL server on loopback for the tests and benchmarks, from the machine's PostgreSQL
binaries (Debian's package ``postgresql-15``), as :mod:`broker.local.devcluster` does for Kafka.

It ``initdb``'s a fresh data directory in a temporary folder, starts ``postgres`` on a free
127.0.0.1 port (no Unix socket, trust authentication for the one database user ``onyx``,
durability off: a scratch server), waits until it accepts connections, and stops it (fast
shutdown), removing the folder. PostgreSQL refuses to run as root: then the data directory is
handed to an unprivileged user (``ONYX_POSTGRES_OS_USER``, ``postgres`` by default) and both
programs run as that user. The server dies with the Python process that started it
(``PR_SET_PDEATHSIG``).

>>> with PostgresDevServer() as pg:                     # doctest: +SKIP
...     url = pg.create_database("catalog")
>>> url                                                 # doctest: +SKIP
'postgresql+psycopg://onyx@127.0.0.1:41235/catalog'
"""

from __future__ import annotations

import atexit
import ctypes
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker import config
from broker.errors import SetupError
from broker.local.devcluster import free_port

DB_USER = "onyx"
INSTALL_HINT = "install Debian's package postgresql-15 (apt-get install postgresql-15)"


def find_binaries() -> Path:
    """The folder holding ``initdb`` and ``postgres``; :class:`SetupError` saying how to install
    them if there is none."""
    candidates = [Path(config.POSTGRES_BIN_DIR)] if config.POSTGRES_BIN_DIR else []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    raise SetupError(f"PostgreSQL's initdb and postgres were not found: {INSTALL_HINT}")


def _die_with_parent() -> None:
    # Runs in the child after it took the unprivileged user's ids (which would clear it).
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class PostgresDevServer:
    """One PostgreSQL server on 127.0.0.1; :meth:`start` / :meth:`stop` or a ``with`` block."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._ids: dict = {}

    def _as_user(self) -> dict:
        """``subprocess`` arguments that drop root to the unprivileged user."""
        if os.geteuid() != 0:
            return {}
        try:
            entry = pwd.getpwnam(config.POSTGRES_OS_USER)
        except KeyError:
            entry = pwd.getpwnam("nobody")
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    @property
    def log_file(self) -> Path:
        return self.dir / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of ``database`` on this server (driver psycopg 3)."""
        return f"postgresql+psycopg://{DB_USER}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float | None = None) -> "PostgresDevServer":
        """initdb a fresh data directory, start the server and wait until it accepts connections."""
        if self.proc is not None:
            return self
        binaries = find_binaries()
        self._ids = self._as_user()
        self.port = self.port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="onyx-postgres-"))
        data = self.dir / "data"
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        if self._ids:
            os.chown(self.dir, self._ids["user"], self._ids["group"])
        init = subprocess.run([str(binaries / "initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust",
                               "--encoding=UTF8", "--no-locale", "--no-sync"],
                              capture_output=True, text=True, env=env, cwd=self.dir, **self._ids)
        if init.returncode != 0:
            self._cleanup()
            raise SetupError(f"initdb failed: {(init.stderr or init.stdout).strip()[-800:]}")
        log = open(self.log_file, "wb")
        if self._ids:
            os.chown(self.log_file, self._ids["user"], self._ids["group"])
        self.proc = subprocess.Popen(
            [str(binaries / "postgres"), "-D", str(data), "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
             "-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=50"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=self.dir,
            preexec_fn=_die_with_parent, start_new_session=True, **self._ids)
        log.close()
        atexit.register(self.stop)
        self._wait_ready(timeout if timeout is not None else config.POSTGRES_START_TIMEOUT_S)
        return self

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                tail = self.log_file.read_text(errors="replace")[-1500:]
                self._cleanup()
                raise SetupError(f"postgres exited with code {code} while starting; its log:\n{tail}")
            try:
                with psycopg.connect(host="127.0.0.1", port=self.port, user=DB_USER, dbname="postgres",
                                     connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.2)
        self.stop()
        raise SetupError(f"postgres did not accept connections within {timeout:.0f}s ({last})")

    def create_database(self, name: str) -> str:
        """Create an empty database ``name`` (dropped first if it exists); returns its URL."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user=DB_USER, dbname="postgres",
                             autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self, timeout: float = 30.0) -> None:
        """Fast shutdown (SIGINT: sessions are cut, no checkpoint wait), SIGKILL after
        ``timeout`` seconds; the data directory is removed."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._cleanup()

    def _cleanup(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "PostgresDevServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
