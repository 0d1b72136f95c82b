"""Breaker transitions as telemetry: when a target's breaker opened, probed and closed.

The scheduler alone sees every process's attempts, but a skipped target makes no attempt, so
"the breaker has been open for 12 minutes" cannot be read from attempts. Each breaker change
therefore becomes one small record:

    store on_change (event loop, O(1)) ──► Recorder buffer ──► flusher thread
        spool/events/.<name>…tmp ──fsync, rename──► spool/events/<name>.jsonl

and the scheduler moves the files into the `breaker_events` table
(engine.store.breaker_events.ingest_events), each event once: its id (host, pid, process start,
sequence) is the table's primary key, so a file read twice (a crash between the commit and the
delete) inserts nothing new. Changes are rare (a few per incident), so JSON lines are plenty; no
secret or prompt is ever in one. This side, on the request path's processes, never imports DuckDB.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.files import atomic_write
from engine.state.breaker import BreakerState
from engine.telemetry.columns import HOST
from engine.telemetry.spool import file_name, process_name

EVENTS_DIR = "events"
_SEQ = itertools.count()  # orders this process's events


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
        event_id=f"{process_name()}-{seq}",
        seq=seq,
        at=wall,
        target=target,
        from_status=old.status,
        to_status=new.status,
        reason=new.open_reason if new.status == "open" else None,
        open_until=open_until,
    )


def write_events(events_dir: Path, events: list[BreakerEvent], *, fsync: bool = True) -> None:
    """One complete `.jsonl` file, or none (raises; the caller keeps the events for later)."""
    if not events:
        return
    text = "".join(e.to_json() + "\n" for e in events)
    atomic_write(events_dir / f"{file_name()}.jsonl", text, durable=fsync)
