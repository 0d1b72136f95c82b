"""The schema: numbered migrations applied once, in one transaction, matching the records."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from helpers.spool import make_attempt, table, write_spool, write_table

from engine.store import ingest_spool, migrations, open_store
from engine.store.migrations import MIGRATIONS, Migration, SchemaTooNewError
from engine.telemetry.columns import COLUMN_NAMES, DUCKDB_COLUMNS


def describe(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str, str]]:
    rows = con.execute(f"DESCRIBE {table}").fetchall()
    return [(name, kind, null) for name, kind, null, *_ in rows]


def test_migrations_are_numbered_from_one_without_gaps():
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


def test_the_attempts_table_matches_the_records_schema(store):
    """A column added to engine/telemetry/columns.py needs a new migration; this fails until it has
    one.
    Columns added later come after batch_id: every insert names its columns, so order is free."""
    expected = duckdb.connect()
    expected.execute(f"CREATE TABLE attempts ({DUCKDB_COLUMNS}, batch_id BIGINT NOT NULL)")
    assert sorted(describe(store, "attempts")) == sorted(describe(expected, "attempts"))
    assert {name for name, *_ in describe(store, "attempts")} == {*COLUMN_NAMES, "batch_id"}


def test_a_fresh_store_is_at_the_latest_version_and_reopening_applies_nothing(db_path):
    con = open_store(db_path)
    assert migrations.schema_version(con) == migrations.LATEST
    assert migrations.apply(con) == []
    con.close()
    con = open_store(db_path)
    (applied,) = con.execute("SELECT count(*) FROM schema_version").fetchone()
    assert applied == len(MIGRATIONS)
    con.close()


def test_a_failing_migration_leaves_the_database_as_it_was(db_path: Path, monkeypatch):
    open_store(db_path).close()
    broken = (
        Migration(migrations.LATEST + 1, "half done", "CREATE TABLE half (x INT); SELECT nope"),
    )
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS + broken)
    monkeypatch.setattr(migrations, "LATEST", migrations.LATEST + 1)
    with pytest.raises(duckdb.Error):
        open_store(db_path)
    monkeypatch.undo()
    con = open_store(db_path)
    assert migrations.schema_version(con) == migrations.LATEST
    assert (
        con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'half'").fetchone()[0]
        == 0
    )
    con.close()


def test_an_appended_migration_runs_once_on_an_existing_store(db_path: Path, monkeypatch):
    open_store(db_path).close()
    added = (Migration(migrations.LATEST + 1, "a rollup", "CREATE TABLE rollup_x (bucket INT)"),)
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS + added)
    monkeypatch.setattr(migrations, "LATEST", migrations.LATEST + 1)
    con = open_store(db_path)
    assert migrations.schema_version(con) == migrations.LATEST
    assert migrations.apply(con) == []
    con.close()


def test_a_store_migrated_by_newer_code_is_refused(db_path: Path):
    con = open_store(db_path)
    con.execute("INSERT INTO schema_version VALUES (999, 'from the future', now())")
    con.close()
    with pytest.raises(SchemaTooNewError, match="999"):
        open_store(db_path)


# The attempt columns migration 7 and those after it added (7: unreadable_events; 11: the
# continuation's marker; 15: the gateway key's label; 18: the targets passed over): a store from
# before 7 has none of them.
ADDED_SINCE_7 = ["unreadable_events", "continues_attempt", "continued_chars", "key_label", "skips"]


def _before_7(monkeypatch: pytest.MonkeyPatch) -> None:
    older = tuple(m for m in MIGRATIONS if m.version < 7)
    monkeypatch.setattr(migrations, "MIGRATIONS", older)
    monkeypatch.setattr(migrations, "LATEST", older[-1].version)


def test_migration_7_gives_earlier_attempts_no_unreadable_events_count(db_path, spool, monkeypatch):
    """Rows from before the column existed hold NULL there: nobody counted, which is not 0."""
    _before_7(monkeypatch)
    con = open_store(db_path)
    old = table([make_attempt(request_id="old")]).drop_columns(ADDED_SINCE_7)
    path = write_table(spool, "old", old)
    # As the ingest of the time did it (today's names the new column)
    con.execute(
        "INSERT INTO attempts BY NAME SELECT *, 0 AS batch_id FROM read_parquet($f)",
        {"f": str(path)},
    )
    path.unlink()
    con.close()
    monkeypatch.undo()
    con = open_store(db_path)
    write_spool(spool, "new", [make_attempt(request_id="new", unreadable_events=2)])
    assert ingest_spool(con, spool).files == 1
    rows = con.execute("SELECT request_id, unreadable_events FROM attempts ORDER BY 1").fetchall()
    assert rows == [("new", 2), ("old", None)]
    con.close()


def test_spool_files_from_before_migration_7_are_ingested_even_with_no_newer_file(store, spool):
    """A batch in which no file has the column cannot name it: NULL takes its place, and no
    file is quarantined for being old."""
    for name in ("a", "b"):
        old = table([make_attempt(request_id=name)]).drop_columns(["unreadable_events"])
        write_table(spool, name, old)
    result = ingest_spool(store, spool)
    assert (result.files, result.quarantined) == (2, 0)
    rows = store.execute("SELECT request_id, unreadable_events FROM attempts ORDER BY 1").fetchall()
    assert rows == [("a", None), ("b", None)]


def test_spool_files_from_before_migration_11_are_ingested_as_no_continuation(store, spool):
    old = table([make_attempt(request_id="old")]).drop_columns(
        ["continues_attempt", "continued_chars"]
    )
    write_table(spool, "old", old)
    write_spool(spool, "new", [make_attempt(request_id="new", attempt_number=2,
                                            continues_attempt=1, continued_chars=412)])  # fmt: skip
    result = ingest_spool(store, spool)
    assert (result.files, result.quarantined) == (2, 0)
    rows = store.execute(
        "SELECT request_id, continues_attempt, continued_chars FROM attempts ORDER BY 1"
    ).fetchall()
    assert rows == [("new", 1, 412), ("old", None, None)]
