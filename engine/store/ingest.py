"""Move spool files into the `attempts` table, each file exactly once.

Writers (the recorder in every gateway worker or embedding application) write a dot-named
temporary and rename it to `<name>.parquet` (engine.telemetry.spool), so a listed file is always
complete. One call of `ingest_spool`:

  1. lists `*.parquet` not starting with ".", oldest first (mtime, then name), at most max_files;
  2. deletes the files already in the `ingested_files` ledger: the scheduler died after a
     COMMIT and before its deletes, so their rows are in; they are never inserted again;
  3. in ONE transaction inserts every row with `INSERT INTO attempts SELECT ... FROM
     read_parquet([...])` and every file name into the ledger, then commits (a batch whose
     files disagree on their columns, around an upgrade, is read again by name: `_INSERT_ROWS`);
  4. only then deletes the files.

A crash before the commit loses nothing (the files are still there); a crash after it duplicates
nothing (the ledger says so). The ledger's primary key on the file name makes a second insert of
the same file fail its whole transaction, a second line of defence.

Never inserts row by row (executemany runs at ~1.3 k rows/s); never deletes a spool file before
the transaction that ingested it has committed; never lets one unreadable file stop the others:
such a file goes to `<spool_dir>/quarantine/` with a logged error. A failure of the store itself
(disk full) is raised, with every file left in place for the next run.

Spool file names must be unique forever (host, pid, time, sequence): the ledger is keyed by name.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from engine.telemetry.columns import COLUMN_NAMES, DUCKDB_COLUMNS

log = logging.getLogger(__name__)

QUARANTINE = "quarantine"
LEDGER_KEEP = timedelta(days=7)
MAX_FILES = 500  # a call's batch: 500 files of 1,000 rows let DuckDB append on both cores

_COLUMNS = ", ".join(COLUMN_NAMES)
# The files are bound by the first one's columns and read by name. A batch whose files differ
# (an older recorder's lack a nullable column added since) fails that, and is read again with
# union_by_name, which puts NULL where a file lacks a column but opens every file's footer
# before it reads a row: ~0.2 ms a file on one core, 100 ms of a 500-file batch, paid only
# around an upgrade. A column that no file of the batch has cannot be named at all, so the
# select list (`_select_list`) puts NULL in its place: a batch made only of files from before
# a migration is ingested too. A missing NOT NULL column still fails the file, on its
# constraint.
_INSERT_ROWS = f"""
    INSERT INTO attempts ({_COLUMNS}, batch_id)
    SELECT {{select}}, $batch FROM read_parquet($files{{union}})
"""
_PRESENT = "SELECT DISTINCT name FROM parquet_schema($files)"
_INSERT_LEDGER = """
    INSERT INTO ingested_files (file_name, row_count, batch_id, ingested_at)
    SELECT parse_filename(file_name), num_rows, $batch, $now
    FROM parquet_file_metadata($files)
"""
_LEDGER_BATCH = "SELECT count(*), sum(row_count) FROM ingested_files WHERE batch_id = $batch"
# One placeholder a name: an IN list of parameters is answered from the primary key's index
# (500 names in a 5 M-row ledger: ~9 ms), a join with unnest($names) scans it (~66 ms).
_ALREADY_INGESTED = "SELECT file_name FROM ingested_files WHERE file_name IN ({})"
_LOOKUP_CHUNK = 1000  # below DuckDB's index_scan_max_count (2048)
_SPAN = "SELECT min(started_at), max(started_at) FROM attempts WHERE batch_id = $batch"
_PRUNE_LEDGER = """
    DELETE FROM ingested_files
    WHERE ingested_at < $cutoff AND file_name NOT IN (SELECT unnest($present))
"""


@dataclass(frozen=True, slots=True)
class IngestResult:
    files: int = 0  # spool files whose rows this call inserted
    rows: int = 0
    skipped: int = 0  # files already in the ledger (a crash after commit), deleted unread
    quarantined: int = 0  # unreadable files moved to <spool_dir>/quarantine/
    more: bool = False  # the listing was cut at max_files: call again to drain the spool
    oldest: datetime | None = None  # the earliest started_at among the rows inserted
    newest: datetime | None = None


def ingest_spool(
    con: duckdb.DuckDBPyConnection,
    spool_dir: Path,
    *,
    max_files: int = MAX_FILES,
    now: datetime | None = None,
) -> IngestResult:
    """Ingest up to `max_files` spool files, oldest first, in one transaction."""
    paths, more = pending_files(Path(spool_dir), max_files)
    if not paths:
        return IngestResult()
    done = _already_ingested(con, [p.name for p in paths])
    _delete(p for p in paths if p.name in done)
    todo = [p for p in paths if p.name not in done]
    batch = _ingest(con, todo, now or datetime.now(UTC))
    return IngestResult(
        batch.files, batch.rows, len(done), batch.quarantined, more, batch.oldest, batch.newest
    )


def pending_files(spool_dir: Path, max_files: int | None = None) -> tuple[list[Path], bool]:
    """Complete spool files, oldest first, and whether more than `max_files` were found."""
    found = []
    try:
        entries = list(os.scandir(spool_dir))
    except FileNotFoundError:
        return [], False
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.endswith(".parquet"):
            continue
        try:
            if entry.is_file():
                found.append((entry.stat().st_mtime_ns, entry.name))
        except FileNotFoundError:
            continue
    found.sort()
    cut = found if max_files is None else found[:max_files]
    return [spool_dir / name for _, name in cut], len(found) > len(cut)


def prune_ledger(
    con: duckdb.DuckDBPyConnection,
    spool_dir: Path,
    *,
    now: datetime | None = None,
    keep: timedelta = LEDGER_KEEP,
) -> int:
    """Forget ledger entries older than `keep`; return how many. A deleted spool file cannot
    come back, so its entry is only needed while the file might still exist: entries whose file
    is still in the spool (its delete failed) are kept whatever their age."""
    cutoff = (now or datetime.now(UTC)) - keep
    present, _ = pending_files(Path(spool_dir))
    (deleted,) = con.execute(
        _PRUNE_LEDGER, {"cutoff": cutoff, "present": [p.name for p in present]}
    ).fetchone()
    return deleted


@dataclass(slots=True)
class _Batch:
    rows: int = 0
    files: int = 0
    quarantined: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None

    def add(self, other: _Batch) -> None:
        self.rows += other.rows
        self.files += other.files
        self.quarantined += other.quarantined
        if other.oldest is not None:
            self.oldest = other.oldest if self.oldest is None else min(self.oldest, other.oldest)
        if other.newest is not None:
            self.newest = other.newest if self.newest is None else max(self.newest, other.newest)


def _ingest(con: duckdb.DuckDBPyConnection, paths: list[Path], now: datetime) -> _Batch:
    """The whole batch in one transaction, or, when that fails, file by file to find the
    unreadable ones."""
    if not paths:
        return _Batch()
    try:
        batch = _commit(con, paths, now)
    except duckdb.Error:
        try:  # files of two recorder versions, most likely: read them by name
            batch = _commit(con, paths, now, union=True)
        except duckdb.Error as error:
            log.warning(
                "a batch of %d spool files failed, retrying one by one: %s", len(paths), error
            )
            return _one_by_one(con, paths, now)
    _delete(paths)
    return batch


def _one_by_one(con: duckdb.DuckDBPyConnection, paths: list[Path], now: datetime) -> _Batch:
    total = _Batch()
    for path in paths:
        try:
            total.add(_commit(con, [path], now))
        except duckdb.Error as error:
            if not _unreadable(path):
                raise  # the store failed, not the file: every file stays for the next run
            _quarantine(path, error)
            total.quarantined += 1
            continue
        _delete([path])
    return total


def _insert_rows(
    con: duckdb.DuckDBPyConnection, files: list[str], batch: int, *, union: bool = False
) -> duckdb.DuckDBPyConnection:
    """INSERT the files' rows, with NULL in the columns none of them has (and, with `union`,
    in the columns a file lacks)."""
    sql = _INSERT_ROWS.format(
        select=_select_list(con, files), union=", union_by_name = true" if union else ""
    )
    return con.execute(sql, {"files": files, "batch": batch})


def _select_list(con: duckdb.DuckDBPyConnection, files: list[str]) -> str:
    """Every column, NULL for those no file has. The newest file (the last) answers for the
    batch when it has them all, which is the rule: reading its footer costs ~1.5 ms, every
    footer of a 500-file batch ~85 ms (a tenth of the ingest)."""
    for probe in ([files[-1]], files):
        present = {name for (name,) in con.execute(_PRESENT, {"files": probe}).fetchall()}
        if present.issuperset(COLUMN_NAMES):
            return _COLUMNS
    return ", ".join(n if n in present else f"NULL AS {n}" for n in COLUMN_NAMES)


def _commit(
    con: duckdb.DuckDBPyConnection, paths: list[Path], now: datetime, *, union: bool = False
) -> _Batch:
    files = [str(p) for p in paths]
    # Insertion order carries no meaning here; without it DuckDB appends on every core
    # (measured: 1,000-row files ~430 k → ~520 k rows/s). Restored for whatever runs next.
    (ordered,) = con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()
    con.execute("SET preserve_insertion_order = false")
    con.begin()
    try:
        (batch,) = con.execute("SELECT nextval('ingest_batch_seq')").fetchone()
        (rows,) = _insert_rows(con, files, batch, union=union).fetchone()
        con.execute(_INSERT_LEDGER, {"files": files, "batch": batch, "now": now})
        counted = con.execute(_LEDGER_BATCH, {"batch": batch}).fetchone()
        if counted != (len(files), rows):
            raise RuntimeError(
                f"ingest read {rows} rows from {len(files)} files, whose footers say "
                f"{counted[1]} rows in {counted[0]} files"
            )
        oldest, newest = con.execute(_SPAN, {"batch": batch}).fetchone()
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.execute(f"SET preserve_insertion_order = {'true' if ordered else 'false'}")
    return _Batch(rows, len(files), 0, oldest, newest)


def _already_ingested(con: duckdb.DuckDBPyConnection, names: list[str]) -> set[str]:
    found: set[str] = set()
    for i in range(0, len(names), _LOOKUP_CHUNK):
        chunk = names[i : i + _LOOKUP_CHUNK]
        sql = _ALREADY_INGESTED.format(", ".join("?" * len(chunk)))
        found.update(name for (name,) in con.execute(sql, chunk).fetchall())
    return found


def _unreadable(path: Path) -> bool:
    """Whether the file itself is at fault: the same insert fails on a scratch in-memory table
    with the records schema (corrupt, truncated, a NOT NULL column missing or null)."""
    probe = duckdb.connect()
    try:
        probe.execute(f"CREATE TABLE attempts ({DUCKDB_COLUMNS}, batch_id BIGINT NOT NULL)")
        _insert_rows(probe, [str(path)], 0)
        probe.execute("SELECT num_rows FROM parquet_file_metadata($f)", {"f": [str(path)]})
    except duckdb.Error:
        return True
    finally:
        probe.close()
    return False


def _quarantine(path: Path, error: Exception) -> None:
    target_dir = path.parent / QUARANTINE
    target_dir.mkdir(exist_ok=True)
    target = target_dir / path.name
    n = 1
    while target.exists():
        target = target_dir / f"{path.stem}.{n}{path.suffix}"
        n += 1
    try:
        os.replace(path, target)
    except FileNotFoundError:
        log.error("spool file %s failed and then disappeared: %s", path, error)
        return
    log.error("spool file %s is unreadable, moved to %s: %s", path.name, target, error)


def _delete(paths: Iterable[Path]) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:  # the ledger keeps it from being ingested again
            log.warning("could not delete ingested spool file %s: %s", path, error)
