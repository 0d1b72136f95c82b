"""PostgreSQL as the shared attempt sink of gateways on several hosts, and the scheduler's pull.

    each host:  Recorder ──► PostgresSink ──COPY──► switchover_attempts (id, xact_id, records)
    scheduler:  PostgresSource.pull ──► DuckDB `attempts` + `postgres_pulls` watermark, one commit

DuckDB takes writes from one process only; PostgreSQL takes them from every host. The recorder's
flusher thread hands each batch to `PostgresSink.write`: a COPY into a temporary staging table,
then `INSERT ... ON CONFLICT (request_id, attempt_number) DO NOTHING`, in one transaction. A batch
whose COMMIT went through but whose acknowledgement was lost raises, the recorder sends it again
(perhaps merged with newer attempts), and the conflict clause keeps its rows single. The tables
are created when missing, and columns added to `records.COLUMNS` since are added (nullable), so
the first host or the scheduler to connect sets the database up (a migration-lite).

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

Never stores or logs the URL's password (only `describe(url)`), and never raises into a request:
the recorder catches a failed write and keeps the batch for the next cycle.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg.conninfo import conninfo_to_dict

from engine.store.ingest import IngestResult
from engine.telemetry.columns import ARROW_SCHEMA, COLUMN_NAMES, COLUMNS

__all__ = ["PostgresSink", "PostgresSource", "PostgresUnavailable", "describe"]

log = logging.getLogger(__name__)

TABLE = "switchover_attempts"
PULL_ROWS = 50_000  # rows a DuckDB transaction; a cycle pulls batches until none is full
CONNECT_TIMEOUT_S = 3  # the last flush at exit waits this long at most for a dead server

_COLUMNS = ", ".join(COLUMN_NAMES)


def _pg_type(duckdb_type: str) -> str:
    return duckdb_type.replace("DOUBLE", "DOUBLE PRECISION")


_SCHEMA: tuple[str, ...] = (
    # Two hosts starting at once must not both create the tables.
    "SELECT pg_advisory_xact_lock(hashtext('switchover schema'))",
    """CREATE TABLE IF NOT EXISTS switchover_source (
        id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
        created_at TIMESTAMPTZ NOT NULL DEFAULT now())""",
    "INSERT INTO switchover_source (created_at)"
    " SELECT now() WHERE NOT EXISTS (SELECT FROM switchover_source)",
    # No index on id alone: the pull reads (xact_id, id), the conflict clause the unique key.
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        id BIGINT GENERATED ALWAYS AS IDENTITY,
        xact_id XID8 NOT NULL DEFAULT pg_current_xact_id(),
        {", ".join(f"{c.name} {_pg_type(c.duckdb)}" for c in COLUMNS)},
        UNIQUE (request_id, attempt_number))""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_pull ON {TABLE} (xact_id, id)",
)
# Checked first, without a lock: DDL on the table, even one that changes nothing, waits for
# every open write transaction and blocks the next ones.
_SCHEMA_PRESENT = f"""
    SELECT to_regclass('switchover_source') IS NOT NULL
        AND to_regclass('{TABLE}_pull') IS NOT NULL,
        array(SELECT column_name::text FROM information_schema.columns
              WHERE table_schema = current_schema() AND table_name = '{TABLE}')
"""
# A column added to the records since the table was made; older rows hold NULL there.
_ADD_COLUMN = {
    c.name: f"ALTER TABLE {TABLE} ADD COLUMN {c.name} {_pg_type(c.duckdb).replace(' NOT NULL', '')}"
    for c in COLUMNS
}
_STAGE = (
    "CREATE TEMP TABLE IF NOT EXISTS switchover_stage ("
    + ", ".join(f"{c.name} {_pg_type(c.duckdb).replace(' NOT NULL', '')}" for c in COLUMNS)
    + ") ON COMMIT DELETE ROWS"
)
_COPY = f"COPY switchover_stage ({_COLUMNS}) FROM STDIN"
_MOVE = f"""
    INSERT INTO {TABLE} ({_COLUMNS}) SELECT {_COLUMNS} FROM switchover_stage
    ON CONFLICT (request_id, attempt_number) DO NOTHING
"""
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
_STRINGS = [i for i, c in enumerate(COLUMNS) if pa.types.is_string(c.arrow)]


class PostgresUnavailable(RuntimeError):
    """PostgreSQL could not be reached or refused the query; the pull runs again next cycle."""


def describe(url: str) -> str:
    """The URL without its password, for logs and messages."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparsable URL)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


def connect(url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> psycopg.Connection:
    """An autocommit connection with the tables in place (created when missing)."""
    con = psycopg.connect(
        url,
        autocommit=True,
        connect_timeout=max(1, round(connect_timeout_s)),
        # A server that vanishes mid-COPY must fail the write, not hang the flusher.
        keepalives=1,
        keepalives_idle=10,
        keepalives_interval=5,
        keepalives_count=3,
    )
    try:
        if not _schema_present(con):
            with con.transaction():
                for statement in _SCHEMA:
                    con.execute(statement)
                _schema_present(con, add_columns=True)
        con.execute(_STAGE)
    except BaseException:
        con.close()
        raise
    return con


def _schema_present(con: psycopg.Connection, *, add_columns: bool = False) -> bool:
    tables, present = con.execute(_SCHEMA_PRESENT).fetchone()
    missing = [name for name in COLUMN_NAMES if name not in present]
    if add_columns:
        for name in missing:
            con.execute(_ADD_COLUMN[name])
    return tables and not missing


def copy_rows(con: psycopg.Connection, table: pa.Table) -> int:
    """COPY the rows into the staging table and move the new ones into the attempts table, in
    the caller's transaction; how many were new."""
    table = _without_nul(table)
    with con.cursor() as cur:
        with cur.copy(_COPY) as copy:
            for row in zip(*(column.to_pylist() for column in table.columns), strict=True):
                copy.write_row(row)
        cur.execute(_MOVE)
        return cur.rowcount


def _without_nul(table: pa.Table) -> pa.Table:
    """PostgreSQL text cannot hold NUL: one in a provider's error message would fail its batch
    on every retry, for ever."""
    for i in _STRINGS:
        column = table.column(i)
        if pc.any(pc.match_substring(column, "\x00")).as_py():
            table = table.set_column(i, table.field(i), pc.replace_substring(column, "\x00", "�"))
    return table


class _Connection:
    """One lazily opened connection, dropped on any failure and reopened on next use."""

    def __init__(self, url: str, connect_timeout_s: float) -> None:
        self._url = url  # in memory only, for reconnecting
        self._timeout = connect_timeout_s
        self._con: psycopg.Connection | None = None
        self.target = describe(url)

    def __str__(self) -> str:
        return self.target

    def _connection(self) -> psycopg.Connection:
        if self._con is None or self._con.closed:
            self._con = connect(self._url, connect_timeout_s=self._timeout)
        return self._con

    def _discard(self) -> None:
        if self._con is not None:
            # Closing a broken connection may fail too; it is gone either way.
            with contextlib.suppress(Exception):
                self._con.close()
            self._con = None

    def close(self) -> None:
        self._discard()


class PostgresSink(_Connection):
    """The recorder's sink for gateways on several hosts: `Recorder(spool, sink=PostgresSink(url))`.
    `write` raises when the batch is not in PostgreSQL; the recorder then keeps it and retries."""

    def __init__(self, url: str, *, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        super().__init__(url, connect_timeout_s)

    def write(self, table: pa.Table) -> int:
        try:
            con = self._connection()
            with con.transaction():
                return copy_rows(con, table)
        except BaseException:
            self._discard()
            raise


class PostgresSource(_Connection):
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
            con.execute(_SAVE_WATERMARK, {
                "source": source, "xact_id": last_xact_id, "id": last_id, "rows": len(rows),
                "now": now or datetime.now(UTC),
            })  # fmt: skip
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
