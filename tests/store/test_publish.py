"""Publishing: snapshots appear whole or not at all, with a manifest that says how fresh."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import duckdb
import pytest
from helpers.spool import T0, fill_spool

from engine.published.catalogue import RECENT_ATTEMPTS
from engine.published.partitions import append as publish_recent_attempts
from engine.published.publish import MANIFEST, publish, read_manifest
from engine.published.read import PublishedData
from engine.store import ingest_spool


@pytest.fixture
def filled(store, spool):
    fill_spool(spool, files=20, rows=1000, step=timedelta(seconds=1))  # 20,000 s from T0
    ingest_spool(store, spool)
    return store


def test_the_manifest_lists_each_snapshot_with_rows_and_time(filled, published):
    end = T0 + timedelta(seconds=20_000)
    publish_recent_attempts(filled, published, end, hours=1)
    publish(filled, published, "totals", "SELECT count(*) AS n FROM attempts", now=T0)
    manifest = read_manifest(published)
    assert {n: (s.rows, s.written_at) for n, s in manifest.items()} == {
        "recent_attempts": (3600, end),
        "totals": (1, T0),
    }
    raw = json.loads((published / MANIFEST).read_text())
    assert raw["snapshots"]["totals"]["file"] == "totals.parquet"
    assert sorted(p.name for p in published.iterdir()) == [
        MANIFEST, "recent_attempts", "totals.parquet"
    ]  # fmt: skip


def test_parameters_are_bound_not_formatted(filled, published):
    sql = "SELECT count(*) AS n FROM attempts WHERE route = $route"
    assert publish(filled, published, "odd", sql, {"route": "it's"}).rows == 1


def test_a_failed_publish_keeps_the_previous_snapshot_and_leaves_no_temp_file(filled, published):
    publish(filled, published, "totals", "SELECT 1 AS n")
    with pytest.raises(duckdb.Error):
        publish(filled, published, "totals", "SELECT no_such_column FROM attempts")
    assert sorted(p.name for p in published.iterdir()) == [MANIFEST, "totals.parquet"]
    assert read_manifest(published)["totals"].rows == 1


@pytest.mark.parametrize("name", ["../escape", "Upper", "with space", "x;drop", ""])
def test_a_snapshot_name_is_a_plain_identifier(filled, published, name):
    with pytest.raises(ValueError):
        publish(filled, published, name, "SELECT 1")


def test_a_reader_never_sees_a_partial_snapshot_while_it_is_replaced(filled, published):
    """A reader querying every few ms while the snapshot is rewritten, alternately small and
    large, sees one whole snapshot or the other, and never an error."""
    sizes = {"small": 10, "large": 20_000}
    sql = "SELECT * EXCLUDE (batch_id) FROM attempts ORDER BY started_at LIMIT $n"
    publish(filled, published, RECENT_ATTEMPTS, sql, {"n": sizes["small"]})
    data = PublishedData(published)
    seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        since = T0 - timedelta(days=1)
        while not stop.is_set():
            try:
                counts = data.query("attempt_counts_by_minute", since=since)
                seen.append(int(counts["attempts"].sum()))
                assert len(data.query("recent_attempts", since=since, limit=5)) == 5
            except BaseException as error:
                errors.append(error)
            time.sleep(0.002)

    reader = threading.Thread(target=read)
    reader.start()
    publishes = 0
    # Enough overlap to mean something, counted rather than timed (a loaded machine is slow).
    deadline = time.monotonic() + 30
    try:
        while (publishes < 20 or len(seen) < 50) and time.monotonic() < deadline:
            n = sizes["large" if publishes % 2 else "small"]
            publish(filled, published, RECENT_ATTEMPTS, sql, {"n": n})
            publishes += 1
    finally:
        stop.set()
        reader.join()
    assert errors == []
    assert set(seen) == set(sizes.values())
    assert publishes >= 20 and len(seen) >= 50
