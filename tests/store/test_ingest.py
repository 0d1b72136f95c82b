"""Spool ingest: every file exactly once, oldest first, and no bad file blocks the others."""

from __future__ import annotations

import logging
import os
import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from helpers.spool import T0, fill_spool, make_attempt, table, write_spool, write_table

from engine.store import ingest_spool, prune_ledger
from engine.store.ingest import QUARANTINE


def count(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(rows, distinct (request_id, attempt_number))"""
    return con.execute(
        "SELECT count(*), count(DISTINCT (request_id, attempt_number)) FROM attempts"
    ).fetchone()


def test_every_row_of_every_file_is_ingested_once_and_the_files_are_deleted(store, spool):
    fill_spool(spool, files=20, rows=50)
    result = ingest_spool(store, spool)
    assert (result.files, result.rows, result.skipped, result.quarantined) == (20, 1000, 0, 0)
    assert count(store) == (1000, 1000)
    assert list(spool.iterdir()) == []
    assert ingest_spool(store, spool).rows == 0
    assert count(store) == (1000, 1000)


def test_one_batch_is_one_transaction_with_its_ledger(store, spool):
    fill_spool(spool, files=5, rows=10)
    ingest_spool(store, spool)
    assert store.execute("SELECT count(DISTINCT batch_id) FROM attempts").fetchone() == (1,)
    ledger = store.execute("SELECT file_name, row_count FROM ingested_files ORDER BY 1").fetchall()
    assert ledger == [(f"f{i:05d}.parquet", 10) for i in range(5)]


def test_files_restored_after_the_commit_are_deleted_not_ingested_again(store, spool, tmp_path):
    """The scheduler died between COMMIT and deleting the files: they are still in the spool."""
    files = fill_spool(spool, files=10, rows=30)
    saved = tmp_path / "saved"
    shutil.copytree(spool, saved)
    ingest_spool(store, spool)
    for path in files:
        shutil.copy2(saved / path.name, path)
    fill_spool(spool, files=2, rows=30, prefix="new")  # and new files arrived meanwhile

    result = ingest_spool(store, spool)

    assert (result.files, result.rows, result.skipped) == (2, 60, 10)
    assert count(store) == (360, 360)
    assert list(spool.iterdir()) == []


def test_a_corrupt_file_is_quarantined_and_the_rest_ingested(store, spool, caplog):
    fill_spool(spool, files=4, rows=25)
    (spool / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    os.utime(spool / "broken.parquet", ns=(0, 0))  # the oldest: first in the batch
    with caplog.at_level(logging.ERROR, logger="engine.store.ingest"):
        result = ingest_spool(store, spool)
    assert (result.files, result.rows, result.quarantined) == (4, 100, 1)
    assert count(store) == (100, 100)
    assert [p.name for p in (spool / QUARANTINE).iterdir()] == ["broken.parquet"]
    assert [p.name for p in spool.iterdir()] == [QUARANTINE]
    assert "broken.parquet" in caplog.text
    assert ingest_spool(store, spool).quarantined == 0  # the quarantine is never listed


def test_a_file_breaking_a_not_null_column_is_quarantined(store, spool):
    good = write_spool(spool, "good", [make_attempt(request_id="ok")])
    data = table([make_attempt(request_id="bad")]).drop_columns(["route"])
    write_table(spool, "no-route", data)
    result = ingest_spool(store, spool)
    assert (result.files, result.quarantined) == (1, 1)
    assert store.execute("SELECT request_id FROM attempts").fetchall() == [("ok",)]
    assert not good.exists()


def test_a_file_from_an_older_recorder_without_a_nullable_column_is_ingested(store, spool):
    data = table([make_attempt(fault_kind="provider")]).drop_columns(["fault_kind"])
    write_table(spool, "old", data)
    write_spool(spool, "new", [make_attempt(request_id="req-2", fault_kind="provider")])
    assert ingest_spool(store, spool).files == 2
    rows = store.execute("SELECT request_id, fault_kind FROM attempts ORDER BY 1").fetchall()
    assert rows == [("req-1", None), ("req-2", "provider")]


@pytest.mark.parametrize("older_first", [True, False])
def test_files_of_two_recorder_versions_are_ingested_in_one_batch(store, spool, older_first):
    """Around an upgrade a batch holds files with and without a column added since: read by
    name in one transaction, whichever comes first, with NULL where a file lacks it."""
    old = write_table(spool, "old", table([make_attempt()]).drop_columns(["fault_kind"]))
    new = write_spool(spool, "new", [make_attempt(request_id="req-2", fault_kind="provider")])
    first, second = (old, new) if older_first else (new, old)
    os.utime(first, ns=(10**9, 10**9))
    os.utime(second, ns=(2 * 10**9, 2 * 10**9))

    result = ingest_spool(store, spool)

    assert (result.files, result.rows, result.quarantined) == (2, 2, 0)
    rows = store.execute("SELECT request_id, fault_kind FROM attempts ORDER BY 1").fetchall()
    assert rows == [("req-1", None), ("req-2", "provider")]
    assert store.execute("SELECT count(DISTINCT batch_id) FROM attempts").fetchone() == (1,)
    assert list(spool.iterdir()) == []


def test_a_failure_of_the_store_keeps_every_file_and_quarantines_none(store, spool):
    fill_spool(spool, files=3, rows=5)
    store.execute("ALTER TABLE attempts ADD COLUMN required_now INT NOT NULL DEFAULT 1")
    store.execute("ALTER TABLE attempts ALTER COLUMN required_now DROP DEFAULT")
    with pytest.raises(duckdb.Error):
        ingest_spool(store, spool)
    assert len(list(spool.glob("*.parquet"))) == 3
    assert not (spool / QUARANTINE).exists()


def test_unfinished_and_hidden_files_are_left_alone(store, spool):
    write_spool(spool, "done", [make_attempt()])
    pq.write_table(table([make_attempt(request_id="x")]), spool / ".writing.tmp")
    pq.write_table(table([make_attempt(request_id="y")]), spool / ".hidden.parquet")
    assert ingest_spool(store, spool).files == 1
    assert sorted(p.name for p in spool.iterdir()) == [".hidden.parquet", ".writing.tmp"]


def test_the_oldest_files_go_first_and_more_says_there_is_more(store, spool):
    paths = fill_spool(spool, files=5, rows=1)
    for age, path in enumerate(reversed(paths)):  # f00004 is the oldest
        os.utime(path, ns=(age * 10**9, age * 10**9))
    first = ingest_spool(store, spool, max_files=2)
    assert (first.files, first.more) == (2, True)
    assert sorted(p.name for p in spool.iterdir()) == ["f00000.parquet", "f00001.parquet",
                                                       "f00002.parquet"]  # fmt: skip
    last = ingest_spool(store, spool, max_files=3)
    assert (last.files, last.more) == (3, False)


def test_the_result_spans_the_times_of_the_rows_ingested(store, spool):
    write_spool(spool, "late", [make_attempt(started_at=T0 - timedelta(hours=3))])
    write_spool(spool, "now", [make_attempt(request_id="r2", started_at=T0)])
    result = ingest_spool(store, spool)
    assert (result.oldest, result.newest) == (T0 - timedelta(hours=3), T0)
    assert ingest_spool(store, spool).oldest is None


def test_a_missing_spool_directory_is_an_empty_spool(store, tmp_path):
    assert ingest_spool(store, tmp_path / "nowhere").files == 0


def test_the_ledger_forgets_old_entries_but_not_files_still_in_the_spool(store, spool: Path):
    fill_spool(spool, files=3, rows=1)
    ingest_spool(store, spool, now=T0)
    write_spool(spool, "f00001", [make_attempt()])  # its delete failed, say: still there
    assert prune_ledger(store, spool, now=T0 + timedelta(days=6)) == 0
    assert prune_ledger(store, spool, now=T0 + timedelta(days=8)) == 2
    assert store.execute("SELECT file_name FROM ingested_files").fetchall() == [("f00001.parquet",)]
    assert ingest_spool(store, spool).skipped == 1
