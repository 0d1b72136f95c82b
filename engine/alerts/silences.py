"""Silences: "stop telling me about this rule (for this subject) until then".

Only the scheduler opens the database, so the CLI (and the dashboard) ask for a silence by
writing a small JSON file under `data/control/silences/` (written aside, then renamed: never
read half-written); the scheduler's next pass moves it into `alert_silences` and deletes it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from engine.core.paths import DataPaths

log = logging.getLogger("switchover.alerts")


def inbox(paths: DataPaths) -> Path:
    return paths.control / "silences"


def request_silence(
    paths: DataPaths,
    rule: str,
    *,
    duration: timedelta,
    now: datetime,
    subject: str | None = None,
    reason: str = "",
) -> str:
    """Ask the scheduler to silence `rule` (for `subject` only, when given) from `now` for
    `duration`; the silence's id."""
    if duration <= timedelta(0):
        raise ValueError("a silence must last longer than zero")
    silence_id = uuid.uuid4().hex[:12]
    body = {
        "silence_id": silence_id,
        "rule": rule,
        "subject": subject,
        "starts_at": now.isoformat(),
        "ends_at": (now + duration).isoformat(),
        "reason": reason,
        "created_at": now.isoformat(),
    }
    folder = inbox(paths)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{silence_id}.tmp"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, folder / f"{silence_id}.json")
    return silence_id


_INSERT = """
    INSERT OR IGNORE INTO alert_silences
    VALUES ($silence_id, $rule, $subject, $starts_at, $ends_at, $reason, $created_at)
"""


def ingest_silences(con: duckdb.DuckDBPyConnection, paths: DataPaths) -> int:
    """Move requested silences into the store; the number taken in."""
    try:
        files = sorted(p for p in inbox(paths).iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return 0
    taken = 0
    for path in files:
        try:
            body = json.loads(path.read_text())
            row = {
                "silence_id": str(body["silence_id"]),
                "rule": str(body["rule"]),
                "subject": body.get("subject"),
                "starts_at": datetime.fromisoformat(body["starts_at"]),
                "ends_at": datetime.fromisoformat(body["ends_at"]),
                "reason": str(body.get("reason", "")),
                "created_at": datetime.fromisoformat(body["created_at"]),
            }
        except (OSError, ValueError, KeyError, TypeError) as error:
            log.error("silence request %s is unreadable, set aside: %r", path.name, error)
            with contextlib.suppress(OSError):
                path.rename(path.with_suffix(".bad"))
            continue
        con.execute(_INSERT, row)
        path.unlink(missing_ok=True)
        taken += 1
    return taken
