"""Breaker transitions as telemetry: when a target's breaker opened, probed and closed.

The scheduler alone sees every process's attempts, but a skipped target makes no attempt, so
"the breaker has been open for 12 minutes" cannot be read from attempts. Each breaker change
therefore becomes one small record:

    store on_change (event loop, O(1)) ──► Recorder buffer ──► flusher thread
        spool/events/.<name>.tmp ──fsync, os.replace──► spool/events/<name>.jsonl

and the scheduler moves the files into the `breaker_events` table (`ingest_events`), each event
once: its id (host, pid, process start, sequence) is the table's primary key, so a file read
twice (a crash between the commit and the delete) inserts nothing new. Changes are rare (a few
per incident), so JSON lines are plenty; no secret or prompt is ever in one.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from engine.state.breaker import BreakerState
from engine.telemetry.columns import HOST

log = logging.getLogger("switchover.breaker_events")

EVENTS_DIR = "events"
_START_MS = time.time_ns() // 1_000_000
_SEQ = itertools.count()


@dataclass(frozen=True, slots=True)
class BreakerEvent:
    event_id: str
    seq: int  # orders one process's events that share a timestamp
    at: datetime  # UTC wall time of the change
    target: str
    from_status: str
    to_status: str
    reason: str | None  # why it opened: failures, failure_rate, account, probe
    open_until: datetime | None  # when the next probe may run

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "event_id": self.event_id,
            "occurred_at": self.at.isoformat(),
            "target": self.target,
            "host": HOST,
            "process_id": os.getpid(),
            "seq": self.seq,
            "from_status": self.from_status,
            "to_status": self.to_status,
            "reason": self.reason,
            "open_until": self.open_until.isoformat() if self.open_until else None,
        }
        return json.dumps(body)


def event_for_change(
    target: str, old: BreakerState, new: BreakerState, *, wall: datetime, now: float
) -> BreakerEvent:
    """The record of a store's `on_change(target, old, new)`, seen at monotonic `now` and UTC
    `wall`: the breaker's own times are monotonic, the record's are wall-clock."""
    open_until = None
    if new.status == "open" and new.open_until is not None:
        open_until = wall + timedelta(seconds=max(0.0, new.open_until - now))
    seq = next(_SEQ)
    return BreakerEvent(
        event_id=f"{HOST}-{os.getpid()}-{_START_MS}-{seq}",
        seq=seq,
        at=wall,
        target=target,
        from_status=old.status,
        to_status=new.status,
        reason=new.open_reason if new.status == "open" else None,
        open_until=open_until,
    )


def recording_changes(recorder: object, clock: object) -> object:
    """A breaker store's `on_change` that hands each transition to `recorder.breaker_changed`
    with `clock`'s times (the library facade and the simulator wire their stores so)."""

    def on_change(target: str, old: BreakerState, new: BreakerState) -> None:
        event = event_for_change(target, old, new, wall=clock.wall(), now=clock.now())  # type: ignore[attr-defined]
        recorder.breaker_changed(event)  # type: ignore[attr-defined]

    return on_change


def write_events(events_dir: Path, events: list[BreakerEvent], *, fsync: bool = True) -> None:
    """One complete `.jsonl` file, or none (raises; the caller keeps the events for later)."""
    if not events:
        return
    events_dir.mkdir(parents=True, exist_ok=True)
    name = f"{HOST}-{os.getpid()}-{_START_MS}-{next(_SEQ):08d}"
    tmp = events_dir / f".{name}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as file:
            file.write("".join(e.to_json() + "\n" for e in events))
            if fsync:
                file.flush()
                os.fsync(file.fileno())
        os.replace(tmp, events_dir / f"{name}.jsonl")
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


_INSERT = """
    INSERT OR IGNORE INTO breaker_events
    SELECT event_id, occurred_at::TIMESTAMPTZ, target, host, process_id::INTEGER, seq,
        from_status, to_status, reason, open_until::TIMESTAMPTZ
    FROM read_json($files, format = 'newline_delimited', columns = {
        event_id: 'VARCHAR', occurred_at: 'VARCHAR', target: 'VARCHAR', host: 'VARCHAR',
        process_id: 'BIGINT', seq: 'BIGINT', from_status: 'VARCHAR', to_status: 'VARCHAR',
        reason: 'VARCHAR', open_until: 'VARCHAR'})
"""


def ingest_events(con: duckdb.DuckDBPyConnection, events_dir: Path) -> int:
    """Move every complete events file into `breaker_events`; the number of files read. A file
    DuckDB cannot read is renamed `*.bad` and logged, never retried forever."""
    files = sorted(
        p for p in _listing(events_dir) if p.suffix == ".jsonl" and not p.name.startswith(".")
    )
    if not files:
        return 0
    good = []
    for path in files:
        try:
            con.execute("BEGIN TRANSACTION")
            con.execute(_INSERT, {"files": [str(path)]})
            con.execute("COMMIT")
            good.append(path)
        except duckdb.Error as error:
            con.execute("ROLLBACK")
            if _well_formed(path):
                raise  # the file is fine: the store is failing, keep everything for later
            log.error("breaker events file %s is unreadable, set aside: %s", path.name, error)
            with contextlib.suppress(OSError):
                path.rename(path.with_suffix(".bad"))
    _delete(good)
    return len(good)


def _well_formed(path: Path) -> bool:
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                json.loads(line)["event_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _listing(events_dir: Path) -> Iterable[Path]:
    try:
        return list(events_dir.iterdir())
    except FileNotFoundError:
        return []


def _delete(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
