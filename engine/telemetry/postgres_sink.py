"""PostgreSQL as the shared attempt sink of gateways on several hosts: the request path's side.

    each host:  Recorder ──► PostgresSink ──COPY──► switchover_attempts (id, xact_id, records)
    scheduler:  PostgresSource.pull (engine.store.postgres_pull) ──► DuckDB `attempts`

DuckDB takes writes from one process only; PostgreSQL takes them from every host. The recorder's
flusher thread hands each batch to `PostgresSink.write`: a COPY into a temporary staging table,
then `INSERT ... ON CONFLICT (request_id, attempt_number) DO NOTHING`, in one transaction. A batch
whose COMMIT went through but whose acknowledgement was lost raises, the recorder sends it again
(perhaps merged with newer attempts), and the conflict clause keeps its rows single. The tables
are created when missing, and columns added to `columns.COLUMNS` since are added (nullable), so
the first host or the scheduler to connect (`connect`, which both use) sets the database up (a
migration-lite). Every row also stores the id of the transaction that wrote it (`xact_id`, an
`xid8`, by default `pg_current_xact_id()`), by which the scheduler pulls each row exactly once.

Never stores or logs the URL's password (only `describe(url)`), and never raises into a request:
the recorder catches a failed write and keeps the batch for the next cycle. Never imports DuckDB.
"""

from __future__ import annotations

import contextlib

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg.conninfo import conninfo_to_dict

from engine.telemetry.columns import COLUMN_NAMES, COLUMNS

__all__ = ["PostgresSink", "connect", "copy_rows", "describe"]

TABLE = "switchover_attempts"
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
_STRINGS = [i for i, c in enumerate(COLUMNS) if pa.types.is_string(c.arrow)]


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


class Connection:
    """One lazily opened connection, dropped on any failure and reopened on next use: the sink's
    here, the scheduler's pull's in engine.store.postgres_pull."""

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


class PostgresSink(Connection):
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
