"""The schema: numbered migrations applied once, in one transaction, matching the records."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from engine.records import COLUMN_NAMES, DUCKDB_COLUMNS
from engine.store import migrations, open_store
from engine.store.migrations import MIGRATIONS, Migration, SchemaTooNewError


def describe(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str, str]]:
    rows = con.execute(f"DESCRIBE {table}").fetchall()
    return [(name, kind, null) for name, kind, null, *_ in rows]


def test_migrations_are_numbered_from_one_without_gaps():
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


def test_the_attempts_table_matches_the_records_schema(store):
    """A column added to engine/records.py needs a new migration; this fails until it has one.
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
