"""The fake providers as a separate process, so their CPU never shares the client's event loop.

`python -m simulations.fakes --port P` is started on a free port, awaited on `/_fake/health`
and stopped with SIGINT (its `serve_forever` exits cleanly on KeyboardInterrupt). On a machine
with two or more CPUs the server is pinned to one CPU and the client to another, so the two never
take turns on one core and the scheduler does not move them about between runs; the client's
own placement is restored on exit, so what runs after the chain's cases has every CPU again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]


def stop(process: subprocess.Popen[bytes], signum: int, wait_s: float) -> None:
    """Ask `process` to stop with `signum`; kill it if it has not within `wait_s`."""
    if process.poll() is not None:
        return
    process.send_signal(signum)
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeServerProcess:
    """`with FakeServerProcess() as fake:` serves the fakes at `fake.url` until the block ends."""

    def __init__(self, *, pin: bool = True) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.pinned: str | None = None
        self._pin = pin
        self._proc: subprocess.Popen[bytes] | None = None
        self._client_cpus: set[int] | None = None  # the placement to restore on exit
        # A file, not a pipe: a pipe nobody reads would block the server once it filled up.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in __exit__)

    def __enter__(self) -> FakeServerProcess:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "simulations.fakes", "--port", str(self.port)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )
        try:
            self._wait_healthy(timeout_s=15.0)
            if self._pin:
                self._pin_cpus(self._proc.pid)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop(proc, signal.SIGINT, 5)
        self._stderr.close()
        if self._client_cpus is not None:  # what runs next (the telemetry) gets every CPU back
            os.sched_setaffinity(0, self._client_cpus)
            self._client_cpus = None

    def _wait_healthy(self, timeout_s: float) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the fake server exited at start-up:\n{self._stderr_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/_fake/health", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the fake server was not healthy within {timeout_s:g} s")

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()[-2000:].decode(errors="replace")

    def _pin_cpus(self, server_pid: int) -> None:
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cpus) < 2:
            return
        os.sched_setaffinity(server_pid, {cpus[-1]})
        self._client_cpus = set(cpus)
        os.sched_setaffinity(0, {cpus[0]})
        self.pinned = f"client on CPU {cpus[0]}, fake server on CPU {cpus[-1]}"

    def cpu_s(self) -> float | None:
        """The server's CPU time so far (Linux only), to show whether it limited a phase."""
        if self._proc is None:
            return None
        try:
            stat = Path(f"/proc/{self._proc.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    # --- the fake's control endpoints --------------------------------------------------

    async def reset(self, client: httpx.AsyncClient) -> None:
        (await client.post(self.url + "/_fake/reset")).raise_for_status()

    async def calls(self, client: httpx.AsyncClient) -> list[dict[str, Any]]:
        response = await client.get(self.url + "/_fake/log")
        response.raise_for_status()
        return response.json()
