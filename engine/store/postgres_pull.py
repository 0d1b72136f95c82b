"""The scheduler's pull of the attempts gateways on several hosts wrote to PostgreSQL.

    each host:  Recorder ──► PostgresSink (engine.telemetry.postgres_sink) ──► switchover_attempts
    scheduler:  PostgresSource.pull ──► DuckDB `attempts` + `postgres_pulls` watermark, one commit

Pulling exactly once. `id` is taken from a sequence at INSERT, but transactions COMMIT in any
order: id 7 may become visible after the puller has read id 9, and "id > last seen" would skip
it forever. So every row also stores the id of the transaction that wrote it (`xact_id`, an
`xid8`, by default `pg_current_xact_id()`), and the puller reads only rows whose transaction is
below `pg_snapshot_xmin(pg_current_snapshot())`, the oldest transaction still running. Every
transaction below it has ended: its rows are final, none will appear and none will vanish. They
are read in (xact_id, id) order, resuming after the last (xact_id, id) read. A transaction that
ends later has an id at or above every earlier horizon (xids are handed out in increasing order,
and a snapshot's xmin never moves back), so its rows sort after everything pulled already:
nothing is skipped and nothing is read twice, however commits interleave.

The watermark (last xact_id, last id) lives in DuckDB's `postgres_pulls`, written in the same
transaction as the pulled rows: a crash before that commit reads the same rows again, a crash
after it goes on from the watermark. It is keyed by the random id in `switchover_source`, made
with the tables, so a new PostgreSQL database starts from zero instead of far beyond its rows.

The price: any transaction left open on the server (an `idle in transaction` session of any
client) holds the horizon back. That delays pulls, it never loses rows; the lag shows in the
dashboard's freshness and the telemetry-lag alert.

Never stores or logs the URL's password (only `describe(url)`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import duckdb
import psycopg
import pyarrow as pa

from engine.store.ingest import IngestResult
from engine.telemetry.columns import ARROW_SCHEMA, COLUMN_NAMES
from engine.telemetry.postgres_sink import CONNECT_TIMEOUT_S, TABLE, Connection

__all__ = ["PostgresSource", "PostgresUnavailable"]

PULL_ROWS = 50_000  # rows a DuckDB transaction; a cycle pulls batches until none is full

_COLUMNS = ", ".join(COLUMN_NAMES)
_SOURCE_ID = "SELECT id::text FROM switchover_source"
# One statement, one snapshot: the horizon and the rows agree.
_PULL = f"""
    SELECT xact_id::text::bigint, id, {_COLUMNS} FROM {TABLE}
    WHERE (xact_id, id) > (%(xact_id)s::text::xid8, %(id)s)
      AND xact_id < pg_snapshot_xmin(pg_current_snapshot())
    -- The table's columns, not the output's bigint of the same name: sorting by that took
    -- the whole backlog every call (4-7 s at 2 M rows); by these, an index scan.
    ORDER BY {TABLE}.xact_id, {TABLE}.id
    LIMIT %(limit)s
"""
_PRUNE = f"""
    DELETE FROM {TABLE}
    WHERE (xact_id, id) <= (%(xact_id)s::text::xid8, %(id)s) AND started_at < %(before)s
"""

_WATERMARK = "SELECT last_xact_id, last_id FROM postgres_pulls WHERE source_id = $source"
_INSERT_PULLED = f"""
    INSERT INTO attempts ({_COLUMNS}, batch_id) SELECT {_COLUMNS}, $batch FROM pg_pulled
"""
_SAVE_WATERMARK = """
    INSERT INTO postgres_pulls (source_id, last_xact_id, last_id, pulled_rows, pulled_at)
    VALUES ($source, $xact_id, $id, $rows, $now)
    ON CONFLICT (source_id) DO UPDATE SET last_xact_id = excluded.last_xact_id,
        last_id = excluded.last_id, pulled_rows = postgres_pulls.pulled_rows + excluded.pulled_rows,
        pulled_at = excluded.pulled_at
"""
_SPAN = "SELECT min(started_at), max(started_at) FROM pg_pulled"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL could not be reached or refused the query; the pull runs again next cycle."""


class PostgresSource(Connection):
    """The scheduler's side: pulls the rows PostgreSQL holds into DuckDB, exactly once."""

    def __init__(self, url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        super().__init__(url, connect_timeout_s)

    def pull(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        limit: int = PULL_ROWS,
        now: datetime | None = None,
    ) -> IngestResult:
        """Up to `limit` final rows beyond the watermark into `attempts`, with the watermark, in
        one DuckDB transaction; `more` when the limit cut the pull short."""
        source, xact_id, last_id = self._watermark(con)
        rows = self._query(_PULL, {"xact_id": xact_id, "id": last_id, "limit": limit}).fetchall()
        if not rows:
            return IngestResult()
        pulled = _arrow(rows)
        last_xact_id, last_id = rows[-1][0], rows[-1][1]
        con.register("pg_pulled", pulled)
        con.begin()
        try:
            (batch,) = con.execute("SELECT nextval('ingest_batch_seq')").fetchone()
            con.execute(_INSERT_PULLED, {"batch": batch})
            con.execute(
                _SAVE_WATERMARK,
                {
                    "source": source,
                    "xact_id": last_xact_id,
                    "id": last_id,
                    "rows": len(rows),
                    "now": now or datetime.now(UTC),
                },
            )
            oldest, newest = con.execute(_SPAN).fetchone()
            con.commit()
        except BaseException:
            con.rollback()
            raise
        finally:
            con.unregister("pg_pulled")
        return IngestResult(rows=len(rows), more=len(rows) >= limit, oldest=oldest, newest=newest)

    def prune(self, con: duckdb.DuckDBPyConnection, *, before: datetime) -> int:
        """Delete from PostgreSQL the rows pulled already that started before `before`. Kept
        until then so that a late retry of a batch still meets its rows' unique key."""
        _, xact_id, last_id = self._watermark(con)
        cur = self._query(_PRUNE, {"xact_id": xact_id, "id": last_id, "before": before})
        return cur.rowcount

    def _watermark(self, con: duckdb.DuckDBPyConnection) -> tuple[str, int, int]:
        # Asked every time: the URL may come to name another database.
        (source,) = self._query(_SOURCE_ID).fetchone()
        found = con.execute(_WATERMARK, {"source": source}).fetchall()
        return (source, *(found[0] if found else (0, 0)))

    def _query(self, sql: str, params: dict[str, Any] | None = None) -> psycopg.Cursor[Any]:
        try:
            return self._connection().execute(sql, params)
        except psycopg.Error as error:
            self._discard()
            raise PostgresUnavailable(f"{self.target}: {error}") from error


def _arrow(rows: list[tuple[Any, ...]]) -> pa.Table:
    """The pulled rows (xact_id and id first) as a table of the records schema."""
    columns = list(zip(*rows, strict=True))[2:]
    arrays = [pa.array(v, type=f.type) for v, f in zip(columns, ARROW_SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)
