"""The last 24 hours of attempts, published as append-only Parquet parts.

A cycle writes only what it ingested: the rows of the ingest batches after the last one
published (`batch_id`, which every ingest transaction takes from one sequence), as one part
file written aside and renamed, never touched again. So a cycle costs what is new, not what the
day holds (rewriting the whole 24 h every 5 s reached 1 s at about 1 M attempts a day).

    published/recent_attempts/<first batch>-<last batch>-t<tier>.parquet

The manifest's `recent_attempts` entry lists the parts that make up the snapshot, with the last
batch it holds; the manifest is replaced atomically, so a reader that takes the list from one
version of it reads one consistent set of parts: never a part twice, never a gap.

Off the cycle (`compact`, its own job in the scheduler), parts are merged in tiers: twelve
cycles' parts into one (about a minute), ten of those into one (about ten minutes), six into
one (about an hour), four into one (about four hours). The set a reader opens stays at a few
dozen files. A part whose newest attempt left the window is dropped. A part that left the
manifest is deleted only after RETIRED_GRACE, by when every reader that listed it has opened it
(an open descriptor keeps the file's data); a reader that still misses one lists again.

The scheduler is the only writer: parts are appended on its cycle thread and merged on its
compaction thread, the manifest entry changed under one lock in engine.published.publish.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from engine.core.files import written_aside
from engine.core.sql import sql_string
from engine.published.catalogue import RECENT_ATTEMPTS
from engine.published.publish import Part, Snapshot, change_entry, read_manifest
from engine.telemetry.columns import COLUMN_NAMES

FOLDER = RECENT_ATTEMPTS  # under the published directory
# Parts of a tier merged into one of the next once this many wait; the last tier's stay.
FANOUT = (12, 10, 6, 4)
RETIRED_GRACE = timedelta(seconds=60)
STRAY_AFTER = timedelta(hours=1)  # a temporary file this old was left by a crash mid-write
SCHEMA = hashlib.sha256(",".join(COLUMN_NAMES).encode()).hexdigest()[:12]
_COLUMNS = ", ".join(COLUMN_NAMES)

# A cycle's part is sorted by time (a few thousand rows); a whole window, or a merge, is left
# in ingest order, which is nearly time order already: sorting 20 M rows took most of a fresh
# start's time and spilled past the store's memory limit.
_NEW_ROWS = f"""
    SELECT {_COLUMNS} FROM attempts
    WHERE batch_id > $after AND batch_id <= $through AND started_at >= $since
"""
# The last batch an ingest took, from its sequence: max(batch_id) would read the column of
# every attempt stored (a rolled-back batch only leaves a number no row has).
_LAST_BATCH = (
    "SELECT max(last_value) FROM duckdb_sequences() WHERE sequence_name = 'ingest_batch_seq'"
)
_compacting = threading.Lock()  # one merge at a time; appends go on meanwhile


@dataclass(frozen=True, slots=True)
class Compaction:
    merged: int = 0  # parts merged into others
    expired: int = 0  # parts whose attempts all left the window
    deleted: int = 0  # retired files deleted after their grace


def append(
    con: duckdb.DuckDBPyConnection, published_dir: Path, now: datetime, hours: float = 24
) -> Snapshot:
    """Publish the attempts ingested since the last call as one new part (none when nothing is
    new), and say the snapshot is complete as of `now`. With no usable parts (a fresh install,
    another store, a new attempt schema) the whole window is written as the first part."""
    published_dir = Path(published_dir)
    started = time.perf_counter()
    since = now - timedelta(hours=hours)
    (through,) = con.execute(_LAST_BATCH).fetchone()
    through = through or 0
    current = read_manifest(published_dir).get(RECENT_ATTEMPTS)
    fresh = not _continues(current, through)
    after = -1 if fresh else current.through_batch  # type: ignore[union-attr]
    part = None
    if through > after:
        tier = len(FANOUT) if fresh else 0
        part = _write_part(con, published_dir, after, through, since, tier)

    def change(entry: Snapshot | None) -> Snapshot:
        kept = () if fresh or entry is None else entry.parts
        retired = _retire(entry, () if entry is None or not fresh else entry.parts, now)
        if fresh:
            retired += ((f"{RECENT_ATTEMPTS}.parquet", now),)  # the old single-file snapshot
        parts = kept + ((part,) if part is not None and part.rows else ())
        if part is not None and not part.rows:
            (published_dir / part.file).unlink(missing_ok=True)
        seconds = round(time.perf_counter() - started, 3)
        rows = sum(p.rows for p in parts)
        return Snapshot(
            RECENT_ATTEMPTS,
            f"{FOLDER}/",
            rows,
            now,
            seconds,
            parts=parts,
            through_batch=through,
            retired=retired,
            schema=SCHEMA,
        )

    return change_entry(published_dir, RECENT_ATTEMPTS, change)


def compact(published_dir: Path, now: datetime, hours: float = 24) -> Compaction:
    """Merge the tiers that are full, drop the parts that left the window, and delete the files
    retired long enough ago. Reads and writes Parquet only: never the store."""
    published_dir = Path(published_dir)
    since = now - timedelta(hours=hours)
    with _compacting:
        merged = expired = 0
        while (group := _full_tier(_parts(published_dir))) is not None:
            tier, parts = group
            new = _merge(published_dir, parts, tier + 1, since)
            _swap(published_dir, parts, new, now)
            merged += len(parts)
        old = [p for p in _parts(published_dir) if p.newest < since]
        if old:
            _swap(published_dir, tuple(old), None, now)
            expired = len(old)
        deleted = _delete_retired(published_dir, now)
    return Compaction(merged, expired, deleted)


def _continues(entry: Snapshot | None, through: int) -> bool:
    """Whether the published parts go on from this store: written by this code's schema, and
    up to a batch the store has (a replaced store starts its batches again)."""
    return (
        entry is not None
        and entry.through_batch is not None
        and entry.schema == SCHEMA
        and entry.through_batch <= through
    )


def _write_part(
    con: duckdb.DuckDBPyConnection,
    published_dir: Path,
    after: int,
    through: int,
    since: datetime,
    tier: int,
) -> Part:
    first = max(after + 1, 0)
    query = _NEW_ROWS + ("" if tier else " ORDER BY started_at")
    params = {"after": after, "through": through, "since": since}
    file, rows = _copy_part(
        con, published_dir, f"{first:012d}-{through:012d}-t{tier}", query, params
    )
    (newest,) = con.execute(
        "SELECT max(started_at) FROM read_parquet($f)", {"f": str(published_dir / file)}
    ).fetchone()
    return Part(file, rows, first, through, newest or since, tier)


def _copy_part(
    con: duckdb.DuckDBPyConnection,
    published_dir: Path,
    name: str,
    query: str,
    params: dict[str, object],
) -> tuple[str, int]:
    """`query`'s rows as the part `name`, written aside and renamed into place: (its file,
    relative to the published directory, and its rows)."""
    final = published_dir / FOLDER / f"{name}.parquet"
    with written_aside(final, durable=False) as temp:  # derived data: no fsync
        copy = f"COPY ({query}) TO {sql_string(str(temp))} (FORMAT parquet, COMPRESSION zstd)"
        (rows,) = con.execute(copy, params).fetchone()
    return f"{FOLDER}/{final.name}", rows


def _parts(published_dir: Path) -> tuple[Part, ...]:
    entry = read_manifest(published_dir).get(RECENT_ATTEMPTS)
    return entry.parts if entry is not None else ()


def _full_tier(parts: tuple[Part, ...]) -> tuple[int, tuple[Part, ...]] | None:
    """The lowest tier with FANOUT parts waiting, and its oldest FANOUT parts (consecutive
    batches: a tier's parts are always older than the next lower tier's)."""
    for tier, fanout in enumerate(FANOUT):
        waiting = sorted((p for p in parts if p.tier == tier), key=lambda p: p.first_batch)
        if len(waiting) >= fanout:
            return tier, tuple(waiting[:fanout])
    return None


def _merge(published_dir: Path, parts: tuple[Part, ...], tier: int, since: datetime) -> Part:
    """One part from `parts` (the rows still in the window, in batch order), on a connection
    of its own: the store's belongs to the cycle."""
    first, last = parts[0].first_batch, parts[-1].last_batch
    files = [str(published_dir / p.file) for p in parts]
    con = duckdb.connect(config={"threads": 1})  # beside the cycle, on a 2-core machine
    try:
        con.execute("SET TimeZone = 'UTC'")
        select = "SELECT * FROM read_parquet($files) WHERE started_at >= $since"
        file, rows = _copy_part(con, published_dir, f"{first:012d}-{last:012d}-t{tier}",
                                select, {"files": files, "since": since})  # fmt: skip
    finally:
        con.close()
    newest = max(p.newest for p in parts)
    return Part(file, rows, first, last, newest, tier)


def _swap(published_dir: Path, old: tuple[Part, ...], new: Part | None, now: datetime) -> None:
    """In one manifest change: `old` out (retired), `new` in where they were."""
    gone = {p.file for p in old}

    def change(entry: Snapshot | None) -> Snapshot:
        assert entry is not None, "compaction runs on published parts"
        kept = tuple(p for p in entry.parts if p.file not in gone)
        parts = tuple(
            sorted(
                kept + ((new,) if new is not None and new.rows else ()), key=lambda p: p.first_batch
            )
        )
        return replace(
            entry, parts=parts, rows=sum(p.rows for p in parts), retired=_retire(entry, old, now)
        )

    change_entry(published_dir, RECENT_ATTEMPTS, change)
    if new is not None and not new.rows:
        (published_dir / new.file).unlink(missing_ok=True)


def _retire(
    entry: Snapshot | None, parts: tuple[Part, ...], now: datetime
) -> tuple[tuple[str, datetime], ...]:
    already = entry.retired if entry is not None else ()
    return already + tuple((p.file, now) for p in parts)


def _delete_retired(published_dir: Path, now: datetime) -> int:
    """Delete the retired files past their grace, and stray temporary files of a crash."""
    due: list[str] = []

    def change(entry: Snapshot | None) -> Snapshot:
        assert entry is not None
        due.extend(file for file, at in entry.retired if now - at >= RETIRED_GRACE)
        return replace(entry, retired=tuple(r for r in entry.retired if r[0] not in due))

    if RECENT_ATTEMPTS not in read_manifest(published_dir):
        return 0
    change_entry(published_dir, RECENT_ATTEMPTS, change)
    for file in due:
        (published_dir / file).unlink(missing_ok=True)
    cutoff = time.time() - STRAY_AFTER.total_seconds()
    for temp in (published_dir / FOLDER).glob(".*.tmp"):  # a crash mid-write left them
        with contextlib.suppress(OSError):
            if temp.stat().st_mtime < cutoff:
                temp.unlink()
    return len(due)
