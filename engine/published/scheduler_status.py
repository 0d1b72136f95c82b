"""`published/scheduler.json`: what the scheduler is doing, for the dashboard's sidebar.

    {"state": "running" | "waiting_for_database" | "stopped", "database": "data/switchover.duckdb",
     "error": null | "…", "since": ISO time, "updated_at": ISO time, "host": "…", "pid": 123}

The scheduler rewrites it (aside, then renamed) at the end of every cycle (`running`), on every
retry of `open_when_free` while another process holds the database (`waiting_for_database`,
with the error), and when it stops. The dashboard never opens the database, so this file is how
it learns that the scheduler cannot: `banner` turns it into the one line it shows, and an
`updated_at` older than STALE_AFTER into a warning that the scheduler is gone. Holds no secret:
a path, a state, and the text of DuckDB's error.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, TypeVar

import duckdb

from engine.core.paths import DataPaths
from engine.store.db import StoreLockedError
from engine.telemetry.status import atomic_write, redact

log = logging.getLogger("switchover.scheduler")

T = TypeVar("T")

State = Literal["running", "waiting_for_database", "stopped"]
# A cycle runs every 5 s and a retry every few: this long without news means no scheduler (as
# the sidebar's "data is over 2 minutes old").
STALE_AFTER = timedelta(minutes=2)
# While another process holds the database: how often to try again.
DATABASE_RETRY_S = 5.0
# What `open_when_free` waits out: the lock (another scheduler, or a tool holding the file) and
# the file's I/O errors. A schema newer than this code, or a bug, is raised: retrying changes
# nothing there.
_CANNOT_OPEN = (StoreLockedError, duckdb.IOException, OSError)


@dataclass(frozen=True, slots=True)
class SchedulerStatus:
    state: State
    database: str
    since: datetime  # when this state began
    updated_at: datetime
    error: str | None = None
    host: str = ""
    pid: int = 0


def write_status(
    path: Path,
    state: State,
    database: Path,
    since: datetime,
    now: datetime,
    error: str | None = None,
) -> None:
    status = SchedulerStatus(state, str(database), since, now, error and redact(error),
                             socket.gethostname(), os.getpid())  # fmt: skip
    body = {**asdict(status), "since": since.isoformat(), "updated_at": now.isoformat()}
    atomic_write(path, (json.dumps(body, indent=1) + "\n").encode())


def open_when_free(
    make: Callable[[], T],
    paths: DataPaths,
    *,
    stop: threading.Event,
    retry_s: float = DATABASE_RETRY_S,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> T | None:
    """`make()`, retried every `retry_s` while the database cannot be opened (another process
    holds its lock, or the file cannot be read); None when `stop` is set first. Each retry
    rewrites `published/scheduler.json` (waiting_for_database, with the error) for the
    dashboard; the log says it once per change of error, not once per retry."""
    since: datetime | None = None
    said: str | None = None
    while not stop.is_set():
        try:
            pipeline = make()
        except _CANNOT_OPEN as error:
            text = str(error) or type(error).__name__
        else:
            if since is not None:
                log.info("opened %s, waited since %s", paths.database, f"{since:%H:%M:%S} UTC")
            return pipeline
        if text != said:
            log.error("cannot open the database, retrying every %g s: %s", retry_s, text)
            said = text
        since = since or now()
        try:
            write_status(paths.scheduler_status, "waiting_for_database", paths.database, since,
                         now(), text)  # fmt: skip
        except OSError as error:
            log.debug("cannot write %s: %s", paths.scheduler_status, error)
        stop.wait(retry_s)
    return None


def read_status(path: Path) -> SchedulerStatus | None:
    """The scheduler's last word, or None when there is none (or it cannot be read)."""
    try:
        body = json.loads(path.read_text())
        return SchedulerStatus(
            state=body["state"],
            database=str(body["database"]),
            since=datetime.fromisoformat(body["since"]),
            updated_at=datetime.fromisoformat(body["updated_at"]),
            error=body.get("error"),
            host=str(body.get("host", "")),
            pid=int(body.get("pid", 0)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def banner(
    status: SchedulerStatus | None, now: datetime, at: Callable[[datetime], str]
) -> tuple[Literal["error", "warning"], str] | None:
    """What the dashboard says about the scheduler, as (level, text); None when all is well.
    `at` shows a time the way the dashboard does (its timezone)."""
    if status is None:
        return "warning", (
            "No scheduler has reported here: start `switchover scheduler` (it alone turns the "
            "gateways' attempts into what this dashboard shows)."
        )
    age = now - status.updated_at
    if age > STALE_AFTER:
        return "warning", (
            f"The scheduler has not reported since {at(status.updated_at)} "
            f"({age.total_seconds() / 60:.0f} min ago): is `switchover scheduler` running?"
        )
    if status.state == "waiting_for_database":
        # The error names the file already, as a rule: say it once.
        error = status.error or "no reason given"
        where = "" if status.database in error else f" {status.database}"
        return "error", (
            f"The scheduler cannot open its database{where}: {error}; retrying since "
            f"{at(status.since)}. The data shown here is not updated meanwhile."
        )
    if status.state == "stopped":
        cause = f": {status.error}" if status.error else ""
        return "warning", f"The scheduler stopped at {at(status.updated_at)}{cause}."
    return None
