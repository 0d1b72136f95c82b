"""Retention: attempts older than `[store] keep_attempts_days` leave the database for monthly
Parquet archives under `data/archive/`, which the store still reads where it needs attempts
that old (the traffic profile the what-if is built from). Rollups, incidents and failure
classes stay in the database, and are never recomputed over archived days (`refresh_floor`).

    data/archive/2026-10/2026-10-03-1.parquet   the attempts that started on 3 Oct 2026 (UTC)
    data/archive/2026-10/2026-10-03-2.parquet   attempts of that day that arrived after it moved

A day at a time, the oldest first, never more in one statement:

  1. the part is entered in the `archive_parts` ledger (migration 14) as not complete, and
     committed: from here on, whatever a crash leaves of it is known to be ours;
  2. in one transaction: COPY the day's attempts to `.<part>.tmp`, fsync it, rename it into
     place and fsync the folder; DELETE the day's rows; mark the part complete; COMMIT.

Readers read only complete parts, so an attempt is in the table or in a complete part, never
both and never neither. A crash before the COMMIT leaves the rows in the table and a part
marked not complete: the next run deletes its file and its entry, then moves the day again. A
crash after it leaves the rows in the part alone. A part is never rewritten: late attempts of a
day already moved get a part of their own. Files the ledger does not name (the archives of a
database since deleted) are never touched, nor overwritten.

Scheduler-only (it writes the store). An archive holds the attempt record's columns and nothing
else (engine.telemetry.columns: no key, no prompt), and `batch_id`, the ingest's own, stays behind.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from engine.core.files import leftovers, written_aside
from engine.core.sql import sql_string
from engine.telemetry.columns import COLUMN_NAMES

log = logging.getLogger("switchover.scheduler")

DAY = timedelta(days=1)
# How far back of a bucket recomputing it reads attempts: a minute's requests 5 minutes
# (engine.store.rollups), an hour's cache-hit baseline the 24 hours before it, an incident's
# impact 5 minutes before its window. A day past the archived ones, everything it reads is in
# the table, so a recomputed bucket is the one computed before.
RECOMPUTE_REACH = DAY
# A backlog (retention turned on for a store that holds a year) moves this many days a run: the
# scheduler's day-rollup job runs every 15 minutes and holds the one worker the cycles need.
DAYS_PER_RUN = 1
# The name of the view `stored_attempts` opens: the table and the archive parts it needs.
STORED = "stored_attempts"

_COLUMNS = ", ".join(COLUMN_NAMES)
_PART = re.compile(r"(\d{4}-\d{2}-\d{2})-(\d+)\.parquet")
_OLDEST = "SELECT min(started_at) FROM attempts WHERE started_at < $cutoff"
_COPY = """
COPY (SELECT {columns} FROM attempts WHERE started_at >= $lo AND started_at < $hi)
TO {path} (FORMAT parquet, COMPRESSION zstd)
"""
_DELETE = "DELETE FROM attempts WHERE started_at >= $lo AND started_at < $hi"
_BEGUN = """
INSERT INTO archive_parts (file_name, day, row_count, complete, archived_at)
VALUES ($file, $day, NULL, false, $now)
"""
_COMPLETE = "UPDATE archive_parts SET row_count = $rows, complete = true WHERE file_name = $file"
_FORGET = "DELETE FROM archive_parts WHERE file_name = $file"
_UNFINISHED = "SELECT file_name FROM archive_parts WHERE NOT complete ORDER BY file_name"
_PARTS_OF_DAY = "SELECT file_name FROM archive_parts WHERE day = $day"
_KEPT_SINCE = "SELECT max(day) + INTERVAL 1 DAY FROM archive_parts WHERE complete"
# The complete parts that hold a moment of any span (lo, hi): a part holds one UTC day.
_OVERLAPPING = """
SELECT DISTINCT p.file_name FROM archive_parts p, (SELECT unnest($lo) AS lo, unnest($hi) AS hi) s
WHERE p.complete AND p.day < s.hi AND p.day + INTERVAL 1 DAY > s.lo
ORDER BY p.file_name
"""


@dataclass(frozen=True, slots=True)
class ArchiveResult:
    days: int = 0  # days whose attempts moved
    rows: int = 0
    parts: tuple[str, ...] = ()  # the parts written, relative to the archive folder
    removed: int = 0  # parts of an earlier run that crashed before its commit, deleted
    more: bool = False  # days older than the cutoff are left for the next run
    kept_since: datetime | None = None  # every attempt from this time on is in the table


def archive_old_attempts(
    con: duckdb.DuckDBPyConnection,
    archive_dir: Path,
    keep_days: int,
    now: datetime,
    *,
    max_days: int = DAYS_PER_RUN,
) -> ArchiveResult:
    """Move the attempts of every UTC day wholly older than `keep_days` days at `now` into the
    archive, at most `max_days` days, the oldest first."""
    if keep_days < 1:
        raise ValueError(f"keep_days must be at least 1 (got {keep_days})")
    archive_dir = Path(archive_dir)
    removed = _remove_unfinished(con, archive_dir)
    cutoff = _midnight((now - timedelta(days=keep_days)).astimezone(UTC))
    days = rows = 0
    parts: list[str] = []
    while True:
        (oldest,) = con.execute(_OLDEST, {"cutoff": cutoff}).fetchone()
        if oldest is None or days == max_days:
            break
        day = _midnight(oldest)
        part, moved = _archive_day(con, archive_dir, day, now)
        days, rows = days + 1, rows + moved
        parts.append(part)
    if rows:
        log.info("archived %d attempts of %d day(s) to %s", rows, days, archive_dir)
    return ArchiveResult(days, rows, tuple(parts), removed, oldest is not None, kept_since(con))


def kept_since(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The end of the archived days: every attempt from then on is in the table (and any older
    one that arrived since waits for the next run). None: nothing was ever archived."""
    (since,) = con.execute(_KEPT_SINCE).fetchone()
    return since


def refresh_floor(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The earliest time a rollup, failure class or incident may be recomputed from: what it
    reads is then all in the table. Earlier ones are final; attempts from before it that
    arrive late are archived with their day but counted nowhere. None: no floor."""
    since = kept_since(con)
    return None if since is None else since + RECOMPUTE_REACH


def archive_parts(
    con: duckdb.DuckDBPyConnection,
    archive_dir: Path | None,
    spans: Iterable[tuple[datetime, datetime]],
) -> list[Path]:
    """The complete parts that hold attempts of any of the `spans` [lo, hi). A store that has
    such parts and no `archive_dir` to find them in is an error, never read as empty."""
    spans = list(spans)
    if not spans:
        return []
    lo, hi = [s[0] for s in spans], [s[1] for s in spans]
    names = [n for (n,) in con.execute(_OVERLAPPING, {"lo": lo, "hi": hi}).fetchall()]
    if names and archive_dir is None:
        raise RuntimeError(
            f"{len(names)} archive parts hold attempts of this range ({names[0]}, ...), and "
            "no archive folder was given to read them from"
        )
    return [Path(archive_dir) / name for name in names] if archive_dir is not None else []


@contextlib.contextmanager
def stored_attempts(
    con: duckdb.DuckDBPyConnection,
    archive_dir: Path | None,
    spans: Iterable[tuple[datetime, datetime]],
) -> Iterator[str]:
    """A temporary view `STORED` of every attempt of the `spans`, wherever it is kept: the
    table and the complete archive parts that hold any of them (each attempt is in exactly one
    of them). Queries filter it by time as they would the table: DuckDB prunes both by
    `started_at`. Its name is yielded; it is dropped on exit."""
    files = archive_parts(con, archive_dir, spans)
    sql = f"SELECT {_COLUMNS} FROM attempts"
    if files:
        # A part from before a migration lacks the columns added since: NULL there, as in the
        # table. DuckDB takes no parameter in a view's definition; the paths are ours.
        listed = ", ".join(sql_string(str(f)) for f in files)
        sql += f" UNION ALL BY NAME SELECT * FROM read_parquet([{listed}], union_by_name = true)"
    con.execute(f"CREATE OR REPLACE TEMP VIEW {STORED} AS {sql}")
    try:
        yield STORED
    finally:
        con.execute(f"DROP VIEW IF EXISTS {STORED}")


def _archive_day(
    con: duckdb.DuckDBPyConnection, archive_dir: Path, day: datetime, now: datetime
) -> tuple[str, int]:
    """One day's attempts into a new part, and out of the table: (the part, its rows)."""
    name = _new_part(con, archive_dir, day)
    final = archive_dir / name
    final.parent.mkdir(parents=True, exist_ok=True)
    con.execute(_BEGUN, {"file": name, "day": day, "now": now})  # its own, committed, first
    span = {"lo": day, "hi": day + DAY}
    con.begin()
    try:
        # Durable: a renamed file whose data or entry a crash lost would leave the ledger
        # naming nothing.
        with written_aside(final, durable=True) as temp:
            copy = _COPY.format(columns=_COLUMNS, path=sql_string(str(temp)))
            (copied,) = con.execute(copy, span).fetchone()
        (deleted,) = con.execute(_DELETE, span).fetchone()
        if deleted != copied:
            raise RuntimeError(f"{day:%Y-%m-%d}: {copied} attempts archived, {deleted} deleted")
        con.execute(_COMPLETE, {"file": name, "rows": copied})
        con.commit()
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has rolled back already
            con.rollback()
        # What is left is marked not complete in the ledger: removed now if it can be, else by
        # the next run.
        with contextlib.suppress(Exception):
            _remove_unfinished(con, archive_dir)
        raise
    return name, copied


def _new_part(con: duckdb.DuckDBPyConnection, archive_dir: Path, day: datetime) -> str:
    """The next part of `day`, after those the ledger lists and any file already there."""
    folder = archive_dir / f"{day:%Y-%m}"
    taken = [n for (n,) in con.execute(_PARTS_OF_DAY, {"day": day}).fetchall()]
    with contextlib.suppress(FileNotFoundError):
        taken += [p.name for p in folder.iterdir()]
    numbers = [
        int(found.group(2))
        for found in (_PART.fullmatch(Path(n).name) for n in taken)
        if found and found.group(1) == f"{day:%Y-%m-%d}"
    ]
    return f"{day:%Y-%m}/{day:%Y-%m-%d}-{max(numbers, default=0) + 1}.parquet"


def _remove_unfinished(con: duckdb.DuckDBPyConnection, archive_dir: Path) -> int:
    """Delete what runs that failed before their commit left (the part and its temporary file,
    then its ledger entry: the rows are still in the table); how many."""
    unfinished = [n for (n,) in con.execute(_UNFINISHED).fetchall()]
    for name in unfinished:
        final = archive_dir / name
        for path in (final, *leftovers(final)):
            path.unlink(missing_ok=True)
        con.execute(_FORGET, {"file": name})
        log.warning(
            "removed archive part %s of a run that did not commit; its attempts are "
            "still in the store and move again",
            name,
        )
    return len(unfinished)


def _midnight(at: datetime) -> datetime:
    return at.replace(hour=0, minute=0, second=0, microsecond=0)
