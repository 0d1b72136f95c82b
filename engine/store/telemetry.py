"""Telemetry health, taken in by the scheduler every cycle before the alerts: is the spool
writable, and what do the recorders' status files (engine.telemetry.status) say?

    recorder-status/*.json ──► recorder_status   (the latest figures of each recording process)
                           └─► telemetry_losses  (one row each time a process's `dropped` grew)
    probe file in spool/   ──► spool_checks      (why the spool cannot be written, and since when)

The alerts read these tables (engine.alerts.conditions): `telemetry_loss` from the losses,
`telemetry_lag` from the spool check and from recorders whose writes keep failing. Every time
here is the scheduler's own (`now`), so rules compare like with like whatever the writers'
clocks say; a status file's `updated_at` only tells that it changed.

Scheduler-only (it writes the store). Never raises for a writer's bad file: an unreadable one is
set aside by `read_statuses`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from engine.core.paths import DataPaths
from engine.telemetry.status import RecorderStatus, read_statuses, redact

log = logging.getLogger("switchover.scheduler")

# Frozen by migration 8: a change needs a migration of its own.
TABLES = """
    CREATE TABLE recorder_status (
        process VARCHAR PRIMARY KEY,  -- the status file's name: host-pid-start ms-n
        host VARCHAR NOT NULL,
        process_id INTEGER NOT NULL,
        destination VARCHAR NOT NULL,
        buffered BIGINT NOT NULL,
        written BIGINT NOT NULL,
        dropped BIGINT NOT NULL,
        lost_at_exit BIGINT NOT NULL,
        failed_flushes BIGINT NOT NULL,
        failing BOOLEAN NOT NULL,
        closed BOOLEAN NOT NULL,
        last_error VARCHAR,
        drop_reason VARCHAR,
        last_flush_at TIMESTAMPTZ,
        updated_at TIMESTAMPTZ,  -- the writer's clock: only to tell that the file changed
        failing_since TIMESTAMPTZ,  -- the first cycle that saw it failing (scheduler's clock)
        seen_at TIMESTAMPTZ NOT NULL  -- the cycle that took in its latest change
    );
    CREATE TABLE telemetry_losses (
        process VARCHAR NOT NULL,
        host VARCHAR NOT NULL,
        process_id INTEGER NOT NULL,
        observed_at TIMESTAMPTZ NOT NULL,  -- the cycle that saw the count grow
        dropped BIGINT NOT NULL,  -- by this much
        reason VARCHAR
    );
    CREATE TABLE spool_checks (
        spool VARCHAR PRIMARY KEY,
        problem VARCHAR NOT NULL,  -- why it cannot be written; no row while it can
        since TIMESTAMPTZ NOT NULL
    )
"""

# Below this much free space the spool counts as failing: a flush of 10,000 rows is ~1 MB,
# and a disk this full fails the scheduler's own writes soon after.
MIN_FREE_BYTES = 64 * 1024 * 1024
CLOSED_KEEP = timedelta(hours=1)  # a closed recorder's file, once taken in
STATUS_KEEP = timedelta(days=35)  # rows (and files) of processes silent this long; losses


@dataclass(frozen=True, slots=True)
class TelemetryReport:
    changed: int  # status files taken in with news
    lost: int  # attempts newly reported lost
    spool_problem: str | None


def check_spool(spool: Path, min_free: int = MIN_FREE_BYTES) -> str | None:
    """Why a recorder cannot write to `spool` now (a probe file cannot be created and removed,
    or the disk is nearly full), or None."""
    probe = spool / f".probe-{os.getpid()}.tmp"  # dot-named: never ingested
    try:
        spool.mkdir(parents=True, exist_ok=True)  # as a recorder would
        with open(probe, "wb") as file:
            file.write(b"probe")
        probe.unlink()
        free = shutil.disk_usage(spool).free
    except OSError as error:
        with contextlib.suppress(OSError):
            probe.unlink()
        return redact(f"{type(error).__name__}: {error}")
    if free < min_free:
        return f"only {free / 1e6:.0f} MB free on its disk (below {min_free / 1e6:.0f} MB)"
    return None


_KNOWN = "SELECT process, dropped, failing_since, updated_at FROM recorder_status"
_UPSERT = """
    INSERT OR REPLACE INTO recorder_status VALUES ($process, $host, $pid, $destination,
        $buffered, $written, $dropped, $lost_at_exit, $failed_flushes, $failing, $closed,
        $last_error, $drop_reason, $last_flush_at, $updated_at, $failing_since, $now)
"""
_LOSS = """
    INSERT INTO telemetry_losses VALUES ($process, $host, $pid, $now, $dropped, $reason)
"""


def take_in(con: duckdb.DuckDBPyConnection, paths: DataPaths, now: datetime) -> TelemetryReport:
    """Check the spool and take in the recorders' status files, in one transaction."""
    problem = check_spool(paths.spool)
    statuses = read_statuses((paths.recorder_status, paths.recorder_status_fallback))
    known = {row[0]: row[1:] for row in con.execute(_KNOWN).fetchall()}
    changed = lost = 0
    con.begin()
    try:
        for process, (status, _) in statuses.items():
            before = known.get(process)
            if before is not None and before[2] == status.updated_at:
                continue  # nothing new since the last cycle
            changed += 1
            lost += _take(con, status, before, now)
        _check(con, str(paths.spool), problem, now)
        stale = _prune(con, statuses, now)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    for path in stale:  # after the commit: a file deleted first could come back as news
        with contextlib.suppress(OSError):
            path.unlink()
    return TelemetryReport(changed, lost, problem)


def _take(
    con: duckdb.DuckDBPyConnection, status: RecorderStatus, before: tuple | None, now: datetime
) -> int:
    """One changed status into the table; the attempts it newly lost (recorded as a loss)."""
    dropped_before, failing_since, _ = before if before is not None else (0, None, None)
    gone = status.dropped - dropped_before
    ids = {"process": status.process, "host": status.host, "pid": status.pid, "now": now}
    if gone > 0:
        con.execute(_LOSS, {**ids, "dropped": gone, "reason": status.drop_reason})
    failing_since = (failing_since or now) if status.failing and not status.closed else None
    con.execute(
        _UPSERT,
        {
            **ids,
            "destination": status.destination,
            "buffered": status.buffered,
            "written": status.written,
            "dropped": status.dropped,
            "lost_at_exit": status.lost_at_exit,
            "failed_flushes": status.failed_flushes,
            "failing": status.failing,
            "closed": status.closed,
            "last_error": status.last_error,
            "drop_reason": status.drop_reason,
            "last_flush_at": status.last_flush_at,
            "updated_at": status.updated_at,
            "failing_since": failing_since,
        },
    )
    return max(gone, 0)


def _check(con: duckdb.DuckDBPyConnection, spool: str, problem: str | None, now: datetime) -> None:
    row = con.execute("SELECT problem, since FROM spool_checks WHERE spool = $s", {"s": spool})
    found = row.fetchone()
    if problem is None:
        if found is not None:
            con.execute("DELETE FROM spool_checks WHERE spool = $s", {"s": spool})
            log.info("the spool %s can be written again", spool)
        return
    if found is None:
        log.error("the spool %s cannot be written: %s", spool, problem)
    if found is None or found[0] != problem:
        since = found[1] if found is not None else now
        con.execute(
            "INSERT OR REPLACE INTO spool_checks VALUES ($s, $problem, $since)",
            {"s": spool, "problem": problem, "since": since},
        )


def _prune(
    con: duckdb.DuckDBPyConnection, statuses: dict[str, tuple[RecorderStatus, Path]], now: datetime
) -> list[Path]:
    """Forget closed recorders an hour after their last word, silent ones after STATUS_KEEP;
    the status files to delete once committed. A row goes with its file or after it: a file
    without its row would be read as a new process and its old losses alerted again."""
    rows = con.execute("SELECT process, closed, seen_at FROM recorder_status").fetchall()
    stale = []
    for process, closed, seen_at in rows:
        if process in statuses and seen_at < now - (CLOSED_KEEP if closed else STATUS_KEEP):
            stale.append(statuses[process][1])
    cutoff = {"cutoff": now - STATUS_KEEP}
    con.execute("DELETE FROM recorder_status WHERE seen_at < $cutoff", cutoff)
    con.execute("DELETE FROM telemetry_losses WHERE observed_at < $cutoff", cutoff)
    return stale
