"""The catalogue of published snapshots is what the scheduler writes: every snapshot, each with
exactly its catalogued columns and types, so a reader's stand-in is the snapshot as published."""

from __future__ import annotations

from datetime import timedelta

import duckdb
import pytest
from helpers.spool import T0, make_attempt, write_spool

from engine.published.catalogue import CATALOGUE, select
from engine.published.publish import read_manifest
from engine.scheduler import snapshots
from engine.store import ingest_spool, traffic_profile


@pytest.fixture
def published_everything(store, spool, published):
    """Every snapshot, published from a freshly migrated store that holds one attempt."""
    write_spool(spool, "one", [make_attempt(started_at=T0)])
    ingest_spool(store, spool)
    now = T0 + timedelta(minutes=5)
    snapshots.publish(store, published, now)
    traffic_profile.publish(store, published, now)
    return published


def _published_file(published, name: str) -> str:
    entry = read_manifest(published)[name]
    if CATALOGUE[name].partitioned:
        return str(published / entry.parts[0].file)
    return str(published / entry.file)


def test_the_scheduler_publishes_every_snapshot_of_the_catalogue_and_no_other(
    published_everything,
):
    assert set(read_manifest(published_everything)) == set(CATALOGUE)


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_a_snapshot_is_published_with_exactly_its_catalogued_columns_and_types(
    published_everything, name
):
    con = duckdb.connect()
    con.execute(f"CREATE TABLE stand_in ({CATALOGUE[name].ddl})")
    file = _published_file(published_everything, name)
    written = con.execute("DESCRIBE SELECT * FROM read_parquet($file)", {"file": file})
    assert written.fetchall() == con.execute("DESCRIBE stand_in").fetchall()


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_a_snapshot_grain_is_among_its_columns_and_its_columns_are_distinct(name):
    shape = CATALOGUE[name]
    assert len(set(shape.names)) == len(shape.names)
    assert shape.grain and set(shape.grain) <= set(shape.names)


def test_a_writer_selects_the_catalogued_columns_only():
    """A column the catalogue leaves out (the notification's body) never leaves the store."""
    shape = CATALOGUE["alert_notifications"]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE alert_notifications (payload VARCHAR, {shape.ddl})")
    sql = select("alert_notifications", "SELECT * FROM alert_notifications")
    assert [column[0] for column in con.execute(sql).description] == list(shape.names)
    assert "payload" not in shape.names
