"""The spool: the files a recording process leaves for the scheduler, and the names they take.

    spool_dir/.<name>.parquet.<pid>-<random>.tmp ──fsync, rename──► spool_dir/<name>.parquet

A file appears under its final name only once it is complete (and, when durable, on disk):
engine.core.files.written_aside. The scheduler ingests `*.parquet` files whose name does not
start with "." and deletes them (engine.store.ingest); breaker events go to `events/` beside
them the same way (engine.telemetry.breaker_events).

`<name>` is `{host}-{pid}-{process start ms}-{seq:08d}`: unique per process, ordered within it,
and never taken twice, since the scheduler's ledger of ingested files is keyed by name.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.files import written_aside
from engine.telemetry.columns import HOST

# Process-wide, so that two recorders in one process never pick the same file name.
_START_MS = time.time_ns() // 1_000_000
_SEQ = itertools.count()


def process_name() -> str:
    """This process as its telemetry names it (host, pid, start): no other process, on any host
    or after a restart with the same pid, has the same."""
    return f"{HOST}-{os.getpid()}-{_START_MS}"


def file_name() -> str:
    """A name no other file takes, in the order this process asks for them."""
    return f"{process_name()}-{next(_SEQ):08d}"


def write_spool_file(spool_dir: Path, table: pa.Table, *, durable: bool) -> Path:
    """`table` as a new spool file. `durable`: its data is on disk before it takes its name (else
    a crash could leave a renamed but empty file); the folder's entry is the caller's to sync,
    once for every file of a cycle."""
    path = spool_dir / f"{file_name()}.parquet"
    with written_aside(path, durable=durable, sync_folder=False) as temp:
        pq.write_table(table, temp)
    return path
