"""A scheduler whose database another process holds stays up, says so in
`published/scheduler.json` (which the dashboard shows), and starts working once the lock goes."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.core.paths import DataPaths
from engine.published.publish import MANIFEST
from engine.published.scheduler_status import SchedulerStatus, read_status
from engine.scheduler.pipeline import Pipeline
from engine.scheduler.process import open_when_free

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 60.0  # a loaded 2-core machine: generous, and only the failure path waits it out

HOLD = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""
SCHEDULER = """
import logging, sys
from pathlib import Path
from engine.core.paths import DataPaths
from engine.scheduler.process import run_scheduler
logging.basicConfig(level=logging.INFO)
run_scheduler(DataPaths(Path(sys.argv[1])), cycle_s=0.2, retry_s=0.1)
"""


def wait_for(what: Callable[[], object], description: str) -> object:
    deadline = time.monotonic() + DEADLINE_S
    while not (found := what()):
        if time.monotonic() > deadline:
            raise AssertionError(f"no {description} within {DEADLINE_S:g} s")
        time.sleep(0.02)
    return found


@pytest.fixture
def paths(tmp_path: Path) -> DataPaths:
    paths = DataPaths(tmp_path / "data")
    paths.root.mkdir()
    return paths


@pytest.fixture
def lock_holder(paths: DataPaths) -> Iterator[subprocess.Popen[str]]:
    """Another process with the database open (as `duckdb` on the command line would)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(paths.database)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield holder
    if holder.poll() is None:
        holder.kill()
    holder.wait()


def release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=DEADLINE_S)


def status_in(paths: DataPaths, state: str) -> Callable[[], SchedulerStatus | None]:
    def check() -> SchedulerStatus | None:
        status = read_status(paths.scheduler_status)
        return status if status is not None and status.state == state else None

    return check


def test_a_locked_database_is_waited_for_said_once_and_used_once_free(
    paths: DataPaths, lock_holder: subprocess.Popen[str], caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="switchover.scheduler")
    stop = threading.Event()
    opened: list[Pipeline | None] = []
    waiter = threading.Thread(
        target=lambda: opened.append(
            open_when_free(lambda: Pipeline(paths), paths, stop=stop, retry_s=0.02)
        )
    )
    waiter.start()
    try:
        waiting = wait_for(status_in(paths, "waiting_for_database"), "waiting status")
        assert isinstance(waiting, SchedulerStatus)
        assert f"PID {lock_holder.pid}" in (waiting.error or "")
        assert waiting.database == str(paths.database) and waiting.pid == os.getpid()
        # Retries go on (each rewrites the file) while the log has said it once.
        wait_for(lambda: (s := read_status(paths.scheduler_status)) and s.updated_at >
                 waiting.updated_at, "retry")  # fmt: skip
        assert not opened, "opened a database another process holds"
        release(lock_holder)
        waiter.join(DEADLINE_S)
    finally:
        stop.set()
        waiter.join(DEADLINE_S)
    [pipeline] = opened
    assert pipeline is not None
    try:
        pipeline.cycle()
    finally:
        pipeline.close()
    running = read_status(paths.scheduler_status)
    assert running is not None and running.state == "running" and running.error is None
    said = [r.getMessage() for r in caplog.records if r.name == "switchover.scheduler"]
    assert len([m for m in said if "cannot open the database" in m]) == 1, said
    assert len([m for m in said if m.startswith("opened ")]) == 1, said


def test_stopping_while_waiting_returns_without_a_pipeline(
    paths: DataPaths, lock_holder: subprocess.Popen[str]
):
    stop = threading.Event()
    stop.set()
    assert open_when_free(lambda: Pipeline(paths), paths, stop=stop, retry_s=0.02) is None


def test_the_scheduler_process_waits_runs_and_says_it_stopped(
    paths: DataPaths, lock_holder: subprocess.Popen[str]
):
    """`run_scheduler` for real: it outlives the lock, cycles once the database is free, and a
    SIGTERM (while running) leaves the status `stopped`."""
    scheduler = subprocess.Popen(
        [sys.executable, "-c", SCHEDULER, str(paths.root)], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(status_in(paths, "waiting_for_database"), "waiting status")
        assert scheduler.poll() is None, "the scheduler exited instead of waiting"
        release(lock_holder)
        wait_for(status_in(paths, "running"), "running status")
        wait_for(paths.published.joinpath(MANIFEST).exists, "published snapshots")
        scheduler.send_signal(signal.SIGTERM)
        _, errors = scheduler.communicate(timeout=DEADLINE_S)
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
            scheduler.wait()
    assert scheduler.returncode == 0, errors
    stopped = read_status(paths.scheduler_status)
    assert stopped is not None and stopped.state == "stopped"
    assert errors.count("cannot open the database") == 1, errors
