"""`published/scheduler.json`: what the scheduler is doing, for the dashboard's sidebar.

    {"state": "running" | "waiting_for_database" | "stopped", "database": "data/switchover.duckdb",
     "error": null | "…", "since": ISO time, "updated_at": ISO time, "host": "…", "pid": 123}

The scheduler rewrites it (aside, then renamed) at the end of every cycle (`running`), on every
retry while another process holds the database (`waiting_for_database`, with the error;
engine.scheduler.process.open_when_free), and when it stops. The dashboard never opens the
database, so this file is how it learns that the scheduler cannot: `banner` turns it into the
one line it shows, and an `updated_at` older than STALE_AFTER into a warning that the scheduler
is gone. Holds no secret: a path, a state, and the text of DuckDB's error. Imports nothing of
the store: the dashboard reads it.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from engine.core.files import atomic_write
from engine.telemetry.status import redact

State = Literal["running", "waiting_for_database", "stopped"]
# A cycle runs every 5 s and a retry every few: this long without news means no scheduler (as
# the sidebar's "data is over 2 minutes old").
STALE_AFTER = timedelta(minutes=2)


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
    status = SchedulerStatus(
        state, str(database), since, now, error and redact(error), socket.gethostname(), os.getpid()
    )
    body = {**asdict(status), "since": since.isoformat(), "updated_at": now.isoformat()}
    atomic_write(path, (json.dumps(body, indent=1) + "\n").encode(), durable=False)


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
