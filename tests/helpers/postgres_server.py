"""A real PostgreSQL for the tests: one server per session, in a temporary folder, on a free
port; a fresh database per test. Outside CI, a machine without PostgreSQL skips these tests
(saying why); in CI (env CI set) that is a failure.

The server binaries are found on PATH or in /usr/lib/postgresql/*/bin (Debian's `postgresql`
package). initdb refuses to run as root, so as root the server runs as the `postgres` user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

START_TIMEOUT_S = 30


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required in CI: {reason}")
    pytest.skip(f"PostgreSQL is not available: {reason}")


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    found_all = glob.glob(f"/usr/lib/postgresql/*/bin/{name}")
    newest = sorted(found_all, key=lambda p: [int(n) for n in re.findall(r"\d+", p)])
    return newest[-1] if newest else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A throwaway PostgreSQL cluster; `stop()` and `start()` take it down and bring it back."""

    def __init__(self, postgres: str, data: Path, port: int, user: str | None) -> None:
        self.postgres, self.data, self.port, self.user = postgres, data, port, user
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [self.postgres, "-D", str(self.data), "-p", str(self.port), "-k", str(self.data),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
             "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
            stdout=subprocess.DEVNULL, stderr=open(self.data / "server.log", "ab"),  # noqa: SIM115
            user=self.user, group=self.user,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                psycopg.connect(self.url(), connect_timeout=1).close()
                return
            except psycopg.OperationalError as error:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = (self.data / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"postgres did not start: {error}\n{log}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(2)  # SIGINT: fast shutdown, clients disconnected
            self.process.wait(timeout=30)
        self.process = None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    initdb, postgres = _binary("initdb"), _binary("postgres")
    if not initdb or not postgres:
        _unavailable("no initdb/postgres binaries on PATH or in /usr/lib/postgresql/*/bin")
    user = None
    data = Path(tempfile.mkdtemp(prefix="switchover-pg-"))
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no `postgres` user to run the server")
        user = "postgres"
        os.chown(data, pw.pw_uid, pw.pw_gid)
    result = subprocess.run(
        [initdb, "-D", str(data / "cluster"), "-A", "trust", "-U", "postgres", "--no-sync",
         "-E", "UTF8", "--locale", "C"],
        capture_output=True, text=True, user=user, group=user,
    )  # fmt: skip
    if result.returncode != 0:
        shutil.rmtree(data, ignore_errors=True)
        _unavailable(f"initdb failed: {result.stderr.strip()[-500:]}")
    server = Server(postgres, data / "cluster", _free_port(), user)
    try:
        server.start()
    except (RuntimeError, OSError) as error:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
        _unavailable(str(error))
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: Server) -> Iterator[str]:
    """A new, empty database on the session's server."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    if postgres_server.process is None:  # a test that stopped the server failed midway
        postgres_server.start()
    with psycopg.connect(postgres_server.url(), autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    yield postgres_server.url(name)
    if postgres_server.process is None:
        postgres_server.start()
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(postgres_server.url(), autocommit=True) as con,
    ):
        con.execute(f"DROP DATABASE {name} WITH (FORCE)")
