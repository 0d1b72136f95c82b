"""Breaker events into the store: the scheduler's side of engine.telemetry.breaker_events.

Every complete `spool/events/*.jsonl` file is inserted into `breaker_events` in a transaction of
its own, then deleted. Each event goes in once: its id (host, pid, process start, sequence) is
the table's primary key and the insert ignores one already there, so a file read twice (a crash
between the commit and the delete) inserts nothing new. A file DuckDB cannot read is set aside
(`*.bad`) and logged, never retried forever; a store that fails keeps every file for later.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path

import duckdb

log = logging.getLogger("switchover.breaker_events")

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
