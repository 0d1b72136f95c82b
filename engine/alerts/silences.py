"""Silences: "stop telling me about this rule (for this subject) until then".

Only the scheduler opens the database, so the CLI (and the dashboard) ask for a silence by
writing a small JSON file under `data/control/silences/`, a control-plane request
(engine.state.control: written aside, then renamed, never read half-written); the scheduler's
next pass moves it into `alert_silences` and deletes it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from engine.core.paths import DataPaths
from engine.state import control


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
    created_by: str | None = None,
) -> str:
    """Ask the scheduler to silence `rule` (for `subject` only, when given) from `now` for
    `duration`, on behalf of `created_by` ("dashboard: alice@example.com"); the silence's id."""
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
        "created_by": created_by,
    }
    control.submit(inbox(paths), silence_id, body)
    return silence_id


_INSERT = """
    INSERT OR IGNORE INTO alert_silences
        (silence_id, rule, subject, starts_at, ends_at, reason, created_at, created_by)
    VALUES ($silence_id, $rule, $subject, $starts_at, $ends_at, $reason, $created_at, $created_by)
"""


def ingest_silences(con: duckdb.DuckDBPyConnection, paths: DataPaths) -> int:
    """Move requested silences into the store; the number taken in."""
    taken = 0
    for request in control.pending(inbox(paths)):
        try:
            row = _row(request.body)
        except (ValueError, KeyError, TypeError) as error:
            request.set_aside(f"not a silence: {error!r}")
            continue
        con.execute(_INSERT, row)
        request.done()
        taken += 1
    return taken


def _row(body: Any) -> dict[str, Any]:
    return {
        "silence_id": str(body["silence_id"]),
        "rule": str(body["rule"]),
        "subject": body.get("subject"),
        "starts_at": datetime.fromisoformat(body["starts_at"]),
        "ends_at": datetime.fromisoformat(body["ends_at"]),
        "reason": str(body.get("reason", "")),
        "created_at": datetime.fromisoformat(body["created_at"]),
        # Requests written before migration 16 say nobody.
        "created_by": None if body.get("created_by") is None else str(body["created_by"]),
    }
