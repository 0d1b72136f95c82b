"""Publish read-only Parquet snapshots of the store for the dashboard and reports.

Each snapshot is `COPY (sql) TO` a dot-named temporary beside `<dir>/<name>.parquet`, renamed
onto it (engine.core.files.written_aside): whoever opens the path gets the old file or the new
one, never a half-written one (rename is atomic on one filesystem, and an open file keeps its
old inode).
A reader must open the file once per query and read through that descriptor, because DuckDB
opens a path several times in one query (`engine.published.read` does this). Then
`<dir>/_manifest.json` is rewritten the same way with each snapshot's rows and time, so that
readers can show how fresh the data is. The 24 h of attempts are the exception: a set of
append-only parts that the manifest lists (engine.published.partitions), since rewriting them
whole every cycle cost what the day held.

Called by the scheduler only, with its store connection. Never writes a snapshot in place, never
fsyncs (a snapshot is derived data, rebuilt on the next run), and never lets a reader see a
manifest entry for a file that is not yet in place: the file is renamed first.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from engine.core.files import atomic_write, written_aside
from engine.core.sql import sql_string

MANIFEST = "_manifest.json"

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_manifest_lock = threading.Lock()  # scheduler jobs may publish from several threads


@dataclass(frozen=True, slots=True)
class Part:
    """One append-only file of a partitioned snapshot (engine.published.partitions)."""

    file: str  # relative to the published directory
    rows: int
    first_batch: int  # the ingest batches whose attempts it holds, first to last
    last_batch: int
    newest: datetime  # its latest started_at: the part leaves the window after it
    tier: int  # 0: one cycle's; each tier up merges several of the one below


@dataclass(frozen=True, slots=True)
class Snapshot:
    name: str
    file: str  # relative to the published directory (a folder, for a partitioned one)
    rows: int
    written_at: datetime  # complete as of this time
    seconds: float  # how long writing it took
    # A partitioned snapshot only: its parts, the last ingest batch they hold, the files that
    # left it and when (deleted after a grace), and the attempt schema they were written in.
    parts: tuple[Part, ...] = ()
    through_batch: int | None = None
    retired: tuple[tuple[str, datetime], ...] = ()
    schema: str = ""


def publish(
    con: duckdb.DuckDBPyConnection,
    published_dir: Path,
    name: str,
    sql: str,
    params: dict[str, Any] | list[Any] | None = None,
    **options: Any,
) -> Snapshot:
    """Write the result of `sql` (with bound `params`) as the snapshot `name`, atomically, and
    enter it in the manifest; `options` as `write` takes them (`now`, `compression`)."""
    snapshot = write(con, published_dir, name, sql, params, **options)
    record(published_dir, [snapshot])
    return snapshot


def write(
    con: duckdb.DuckDBPyConnection,
    published_dir: Path,
    name: str,
    sql: str,
    params: dict[str, Any] | list[Any] | None = None,
    *,
    now: datetime | None = None,
    compression: str = "zstd",
) -> Snapshot:
    """Put the file of snapshot `name` in place, not yet in the manifest (`record` adds it):
    a cycle writes its snapshots, then changes the manifest once for all of them."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"a snapshot name is lower-case letters, digits and _: {name!r}")
    published_dir = Path(published_dir)
    final = published_dir / f"{name}.parquet"
    started = time.perf_counter()
    query = sql.strip().rstrip(";")
    with written_aside(final, durable=False) as temp:
        target = sql_string(str(temp))
        copy = f"COPY ({query}) TO {target} (FORMAT parquet, COMPRESSION {compression})"
        (rows,) = con.execute(copy, params).fetchone()
    seconds = round(time.perf_counter() - started, 3)
    return Snapshot(name, final.name, rows, now or datetime.now(UTC), seconds)


def record(published_dir: Path, snapshots: list[Snapshot]) -> None:
    """The manifest's entries for `snapshots`, whose files are in place, in one rewrite."""
    with _manifest_lock:
        entries = read_manifest(published_dir)
        entries.update({s.name: s for s in snapshots})
        _write_manifest(published_dir, entries)


def read_manifest(published_dir: Path) -> dict[str, Snapshot]:
    """The published snapshots by name; empty on a fresh install or an unreadable manifest."""
    try:
        raw = json.loads((Path(published_dir) / MANIFEST).read_text())
        return {name: _snapshot(name, entry) for name, entry in raw["snapshots"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def change_entry(
    published_dir: Path, name: str, change: Callable[[Snapshot | None], Snapshot]
) -> Snapshot:
    """Replace the manifest's entry `name` by `change(entry)`, read and written under one lock:
    the cycle appends parts while the compaction merges them."""
    with _manifest_lock:
        snapshots = read_manifest(published_dir)
        snapshots[name] = change(snapshots.get(name))
        _write_manifest(published_dir, snapshots)
        return snapshots[name]


def _snapshot(name: str, entry: dict[str, Any]) -> Snapshot:
    parts = tuple(
        Part(
            p["file"],
            int(p["rows"]),
            int(p["first_batch"]),
            int(p["last_batch"]),
            datetime.fromisoformat(p["newest"]),
            int(p["tier"]),
        )
        for p in entry.get("parts", ())
    )
    through = entry.get("through_batch")
    return Snapshot(
        name=name,
        file=entry["file"],
        rows=int(entry["rows"]),
        written_at=datetime.fromisoformat(entry["written_at"]),
        seconds=float(entry.get("seconds", 0.0)),
        parts=parts,
        through_batch=None if through is None else int(through),
        retired=tuple((f, datetime.fromisoformat(at)) for f, at in entry.get("retired", ())),
        schema=str(entry.get("schema", "")),
    )


def _entry(snapshot: Snapshot) -> dict[str, Any]:
    body: dict[str, Any] = {
        "file": snapshot.file,
        "rows": snapshot.rows,
        "written_at": snapshot.written_at.isoformat(),
        "seconds": snapshot.seconds,
    }
    if snapshot.through_batch is not None:
        body |= {
            "parts": [{**asdict(p), "newest": p.newest.isoformat()} for p in snapshot.parts],
            "through_batch": snapshot.through_batch,
            "retired": [[f, at.isoformat()] for f, at in snapshot.retired],
            "schema": snapshot.schema,
        }
    return body


def _write_manifest(published_dir: Path, snapshots: dict[str, Snapshot]) -> None:
    body = {"version": 1, "snapshots": {n: _entry(s) for n, s in sorted(snapshots.items())}}
    # Compact: json's C encoder only writes without indent, and the manifest is rewritten
    # every cycle (indented, it was half of a small cycle's publishing).
    text = json.dumps(body, separators=(",", ":")) + "\n"
    atomic_write(published_dir / MANIFEST, text, durable=False)
