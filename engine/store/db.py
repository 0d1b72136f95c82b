"""Open the scheduler's DuckDB file: data/switchover.duckdb.

Only the scheduler process calls `open_store`; nothing else ever opens the .duckdb file. DuckDB
lets one process write a database file or many processes read it, never both at once, so gateway
workers write spool files, the scheduler alone owns the database, and the dashboard reads the
Parquet snapshots the scheduler publishes (`engine.published.read`).

The file is attached to an in-memory DuckDB instance instead of being opened directly, for one
reason: `ATTACH` takes a row-group size and `duckdb.connect` does not. Half the default
(61,440 rows instead of 122,880) lets a 100,000-row ingest batch be compressed and written while
it is inserted instead of all at commit: the INSERT of 100 files × 1,000 rows went from ~330 k
to ~430 k rows/s on the 2-core dev machine (~520 k with ingest.py appending on both cores; see
bench/store.py), with no loss on scans. The in-memory catalog is detached afterwards so that
`con.cursor()` lands in the store too, never in a scratch database.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from engine.core.sql import sql_string
from engine.store import migrations

ROW_GROUP_SIZE = 61_440
CATALOG = "store"
# DuckDB's own cap on the memory it holds (its buffer pool, and the operators that can spill
# to the temporary folder beside the file); its default is 80 % of the machine's, which a store
# of 100 M attempts would fill with cached pages. Bounded, the scheduler stays under 2 GB
# (bench.growth), and a refresh larger than this spills instead of taking the machine.
MEMORY_LIMIT = "1GB"


class StoreLockedError(RuntimeError):
    """Another process (or another connection in this one) already has the database open."""


def open_store(path: Path) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the store at `path`, migrated to the latest schema.

    Raises StoreLockedError when another process holds the file: only one scheduler may run.
    The connection works in UTC: date_trunc and time_bucket cut minutes, hours and days in UTC.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        con.execute(
            f"ATTACH {sql_string(str(path))} AS {CATALOG} (ROW_GROUP_SIZE {ROW_GROUP_SIZE})"
        )
    except duckdb.Error as error:
        con.close()
        locked = _lock_message(path, str(error))
        if locked is None:
            raise
        raise StoreLockedError(locked) from None
    try:
        con.execute(f"USE {CATALOG}")
        con.execute("DETACH memory")
        con.execute("SET GLOBAL TimeZone = 'UTC'")
        con.execute(f"SET GLOBAL memory_limit = '{MEMORY_LIMIT}'")
        con.execute(f"SET GLOBAL temp_directory = {sql_string(str(path) + '.tmp')}")
        migrations.apply(con)
    except BaseException:
        con.close()
        raise
    return con


def _lock_message(path: Path, error: str) -> str | None:
    if "Could not set lock" in error:
        pid = re.search(r"\(PID (\d+)\)", error)
        holder = f" (PID {pid.group(1)})" if pid else ""
        return (
            f"{path} is locked by another process{holder}: only one Switchover scheduler may "
            "run, and nothing else may open the database file"
        )
    if "already attached" in error or "Unique file handle conflict" in error:
        return (
            f"{path} is already open in this process: only one Switchover scheduler may run, "
            "and it opens the database once"
        )
    return None
