"""Read-only access to the published Parquet snapshots, for the dashboard, reports and the CLI:
the named queries of engine.published.queries, run on an in-memory DuckDB.

`PublishedData` never opens the scheduler's .duckdb file (that would take or collide with its
lock) and never formats a value into SQL: every query is a module-level constant with `$name`
parameters bound by DuckDB.

Correct while the scheduler replaces snapshots. DuckDB opens a Parquet path more than once in
one query (to bind it, and again to fetch the other columns of an ORDER BY ... LIMIT), so a
query by path can read the footer of one version and the pages of the next: measured, about one
query in twenty failed ("Invalid data", "bytes outside file") while a snapshot was republished
in a loop. So each query first opens every snapshot it reads, once, and reads it through
`/dev/fd/<n>`: the descriptor pins that version's inode for the whole query, whatever
`os.replace` does meanwhile (Linux and macOS). These per-query views are TEMP views on the
query's own cursor, which also makes concurrent Streamlit threads independent. The 24 h of
attempts are a set of parts (engine.published.partitions): a query takes the set from one version
of the manifest and opens every part before it runs, so it reads one consistent set; a part
compacted away in between makes it list them again. A snapshot that does not exist yet
reads as an empty table with its catalogued columns (engine.published.catalogue), so a fresh
install shows empty DataFrames, not errors. The parts of one manifest entry share one attempt
schema (a new schema starts the snapshot again), so they are read as one table without
`union_by_name`, which read every part's schema to bind the view and doubled a query's time.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pandas as pd

from engine.core.sql import sql_string
from engine.published.catalogue import CATALOGUE, RECENT_ATTEMPTS
from engine.published.publish import Snapshot, read_manifest
from engine.published.queries import QUERIES
from engine.published.query import Query

FD_DIR = "/dev/fd"
PARTITIONED = {name for name, shape in CATALOGUE.items() if shape.partitioned}
_LIST_TRIES = 5
T = TypeVar("T")
# The aggregates of the attempts that `query_attempts` answers from one read of a window, and
# the columns they use (what that read keeps in memory).
ONE_SCAN = ("latency_between", "latency_by_bucket", "ttft_by_bucket", "failures_by_bucket",
            "failures_by_target", "served_between", "failed_attempts")  # fmt: skip
ONE_SCAN_COLUMNS = ("started_at", "outcome", "latency_ms", "ttft_ms", "streamed", "served",
                    "route", "target", "fault_kind", "error_class", "http_status", "decision",
                    "error_message", "request_id", "attempt_number")  # fmt: skip


class _PartGone(Exception):
    """A part the manifest listed was deleted before this reader opened it."""


def _listing_again(run: Callable[[], T]) -> T:
    """`run()`, again with the parts listed anew while one was compacted away since the
    manifest was read (_LIST_TRIES in all)."""
    for _ in range(_LIST_TRIES - 1):
        try:
            return run()
        except _PartGone:
            continue
    return run()


class PublishedData:
    """Read-only access to `published_dir`; one per process (Streamlit: st.cache_resource)."""

    def __init__(self, published_dir: Path) -> None:
        self.published_dir = Path(published_dir)
        # No cache keyed by path: /dev/fd/<n> names a different file from one query to the next.
        self._con = duckdb.connect(config={"enable_external_file_cache": False})
        self._con.execute("SET GLOBAL parquet_metadata_cache = false")
        self._con.execute("SET GLOBAL TimeZone = 'UTC'")
        for name, shape in CATALOGUE.items():
            self._con.execute(f"CREATE TABLE _empty_{name} ({shape.ddl})")
            self._con.execute(f"CREATE VIEW {name} AS SELECT * FROM _empty_{name}")

    def names(self) -> list[str]:
        return sorted(QUERIES)

    def snapshots(self) -> dict[str, Snapshot]:
        """What is published, with row counts and write times (for freshness)."""
        return read_manifest(self.published_dir)

    def query(self, name: str, **params: Any) -> pd.DataFrame:
        try:
            query = QUERIES[name]
        except KeyError:
            raise KeyError(f"no query named {name!r}; known: {self.names()}") from None
        bound = query.bind(params)
        return _listing_again(lambda: self._run(query, bound))

    def _run(self, query: Query, bound: dict[str, Any]) -> pd.DataFrame:
        with self._views(query.reads) as cursor:
            return cursor.execute(query.sql, bound).df()

    def query_attempts(
        self,
        since: datetime,
        until: datetime | None,
        requests: Sequence[tuple[str, Mapping[str, Any]]],
    ) -> list[pd.DataFrame]:
        """Several ONE_SCAN queries of the attempts, each as `query` would answer it, from one
        read of the parts: the rows of [since, until) are read once, in the ONE_SCAN_COLUMNS,
        into a table of this call's cursor, which every query then reads. Each request's own
        [since, until) must lie inside that window (else it would silently miss rows)."""
        bound = [(self._one_scan(name), QUERIES[name].bind(params)) for name, params in requests]
        for query, params in bound:
            inside = params["since"] >= since and (
                until is None or (params.get("until") is not None and params["until"] <= until)
            )
            if not inside:
                raise ValueError(f"{query!r} asks for rows outside [{since}, {until})")
        window = {"since": since, "until": until}
        return _listing_again(lambda: self._run_attempts(window, bound))

    @staticmethod
    def _one_scan(name: str) -> Query:
        if name not in ONE_SCAN:
            raise KeyError(f"{name!r} is not one of the queries read from one scan: {ONE_SCAN}")
        return QUERIES[name]

    def _run_attempts(
        self, window: dict[str, Any], bound: list[tuple[Query, dict[str, Any]]]
    ) -> list[pd.DataFrame]:
        with self._views((RECENT_ATTEMPTS,)) as cursor:
            cursor.execute(
                f"CREATE TEMP TABLE _window AS SELECT {', '.join(ONE_SCAN_COLUMNS)} "
                f"FROM {RECENT_ATTEMPTS} WHERE started_at >= $since "
                "AND ($until IS NULL OR started_at < $until)",
                window,
            )
            cursor.execute(f"CREATE OR REPLACE TEMP VIEW {RECENT_ATTEMPTS} AS FROM _window")
            return [cursor.execute(query.sql, params).df() for query, params in bound]

    @contextlib.contextmanager
    def _views(self, reads: Sequence[str]) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on which each snapshot of `reads` is a view of its files, pinned open for
        as long as the cursor is used."""
        manifest = read_manifest(self.published_dir) if PARTITIONED & set(reads) else {}
        cursor = self._con.cursor()
        pinned: list[int] = []
        try:
            for snapshot in reads:
                fds = self._pin(snapshot, manifest.get(snapshot))
                pinned.extend(fds)
                if not fds:
                    continue  # not published yet: the empty stand-in answers
                sources = ", ".join(sql_string(f"{FD_DIR}/{fd}") for fd in fds)
                cursor.execute(
                    f"CREATE TEMP VIEW {snapshot} AS SELECT * FROM read_parquet([{sources}])"
                )
            yield cursor
        finally:
            cursor.close()
            for fd in pinned:
                os.close(fd)

    def _pin(self, snapshot: str, entry: Snapshot | None) -> list[int]:
        """A descriptor for each file of `snapshot`: its parts as the manifest lists them, or
        its one file. Raises _PartGone when a listed part is no longer there."""
        if entry is None or entry.through_batch is None:
            try:
                return [os.open(self.published_dir / f"{snapshot}.parquet", os.O_RDONLY)]
            except FileNotFoundError:
                return []
        fds: list[int] = []
        try:
            for part in entry.parts:
                fds.append(os.open(self.published_dir / part.file, os.O_RDONLY))
        except FileNotFoundError:
            for fd in fds:
                os.close(fd)
            raise _PartGone(snapshot) from None
        return fds

    def close(self) -> None:
        self._con.close()
