"""The traffic profile the what-if scenarios are built from: published by a job of its own, off
the scheduler's cycle, refreshed for what changed, and adding up with the rollups."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
import pandas as pd
import pytest
from helpers.spool import make_attempt, write_spool

from engine.core.fault_families import BY_NAME
from engine.core.paths import DataPaths
from engine.published.catalogue import LEVELS, REPLAY_MARGIN, SNAPSHOT_COLUMNS
from engine.published.read import PublishedData
from engine.scheduler.pipeline import Pipeline
from engine.store.traffic_profile import PROFILE_EVERY
from simulations.demo.history import seed_history
from simulations.demo.up import DEMO_KEY_ENV, demo_config

END = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PROFILE = ("traffic_minute", "traffic_sizes", "target_latency", "incident_minutes")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Three days of the demo at a third of its rate (its day-2 Sonnet outage included),
    ingested by one cycle; the clock is the test's."""
    paths = DataPaths(tmp_path_factory.mktemp("profile") / "data")
    seed_history(paths, demo_config(8700), days=3, end=END, peak_per_minute=1.5,
                 environ={DEMO_KEY_ENV: "k"}, say=lambda _: None)  # fmt: skip
    now = [END]
    pipeline = Pipeline(paths, now=lambda: now[0])
    pipeline.cycle()
    published_by_cycle = set(PROFILE) & set(PublishedData(paths.published).snapshots())
    ran = pipeline.traffic_profile()
    yield paths, pipeline, now, published_by_cycle, ran
    pipeline.close()


@pytest.fixture(scope="module")
def data(history):
    reader = PublishedData(history[0].published)
    yield reader
    reader.close()


def test_the_profile_is_published_by_its_own_job_never_by_the_cycle(history, data):
    _, _, _, published_by_cycle, ran = history
    assert published_by_cycle == set(), "a cycle never pays for the profile"
    assert ran and set(PROFILE) <= set(data.snapshots())


def test_the_profile_is_refreshed_only_when_due(history):
    _, pipeline, now, _, _ = history
    assert pipeline.traffic_profile() is False, "published a moment ago, nothing new"
    now[0] = END + PROFILE_EVERY
    try:
        assert pipeline.traffic_profile() is True
        assert pipeline.traffic_profile() is False
    finally:
        now[0] = END


def test_late_attempts_have_their_old_hours_recomputed(history):
    paths, pipeline, _, _, _ = history
    at = END - timedelta(days=2, hours=5, minutes=10)
    write_spool(paths.spool, "late", [
        make_attempt(request_id=f"late-{i}", route="late-route", started_at=at, input_tokens=700,
                     cache_read_tokens=300, output_tokens=42) for i in range(5)
    ])  # fmt: skip
    pipeline.cycle()
    assert pipeline.traffic_profile() is True, "late data makes it due at once"
    data = PublishedData(paths.published)
    try:
        sizes = data.query("traffic_sizes", since=at, until=at + timedelta(minutes=1))
        minute = data.query("traffic_minute", since=at, until=at + timedelta(minutes=1))
    finally:
        data.close()
    late = sizes[sizes["route"] == "late-route"].iloc[0]
    assert late["answers"] == 5 and list(late["prompt_tokens"]) == [1000.0] * len(LEVELS)
    assert list(late["output_tokens"]) == [42.0] * len(LEVELS)
    row = minute[minute["route"] == "late-route"].iloc[0]
    assert (row["requests"], row["answers"], row["prompt_tokens"]) == (5, 5, 5000)


def test_the_minutes_add_up_to_the_hourly_rollups_and_the_hours_of_sizes(data):
    minutes = data.query("traffic_minute", since=END - timedelta(days=3), until=END)
    hours = data.query("hour_rollups", since=END - timedelta(days=3), until=END)
    sizes = data.query("traffic_sizes", since=END - timedelta(days=3), until=END)
    for route in ("support", "classify", "summarize"):
        mine = minutes[minutes["route"] == route]
        assert mine["requests"].sum() == hours[hours["route"] == route]["requests"].sum()
        assert mine["answers"].sum() == sizes[sizes["route"] == route]["answers"].sum()
        assert mine["answers"].sum() > 0


def test_sizes_and_latency_are_quantiles_in_order(data):
    sizes = data.query("traffic_sizes")
    latency = data.query("target_latency")
    for column, frame in (("prompt_tokens", sizes), ("output_tokens", sizes),
                          ("latency_ms", latency)):  # fmt: skip
        for values in frame[column]:
            # Ascending, up to DuckDB's interpolation noise (399.99999999999994 beside 400).
            assert len(values) == len(LEVELS) and min(np.diff(values)) > -1e-9, column
    support = sizes[sizes["route"] == "support"]
    # The demo's support prompt is cached by its primary: most of it is read from the cache.
    share = support["warm_cache_read_tokens"].sum() / support["warm_prompt_tokens"].sum()
    assert 0.9 < share < 1
    assert set(latency["target"]) >= {"claude/claude-sonnet-4-5", "claude/claude-haiku-4-5"}


def test_an_incidents_minutes_hold_its_faults_and_reach_beyond_it(data):
    incidents = data.query("replayable_incidents")
    outage = incidents[incidents["target"] == "claude/claude-sonnet-4-5"].iloc[0]
    minutes = data.query("incident_minutes", incident_ids=[outage["incident_id"]])
    assert set(minutes["target"]) == {outage["target"]}
    start = outage["started_at"].floor("min")
    assert minutes["bucket"].min() == start - pd.Timedelta(REPLAY_MARGIN)
    assert minutes["bucket"].max() == outage["ended_at"].floor("min") + pd.Timedelta(REPLAY_MARGIN)
    inside = minutes[(minutes["bucket"] >= start) & (minutes["bucket"] < outage["ended_at"])]
    family = inside[inside["fault_kind"].isin(BY_NAME[outage["family"]].fault_kinds)]
    assert family["failures"].sum() == outage["fault_attempts"] > 0
    assert (minutes.groupby("bucket")["failures"].sum() <= minutes.groupby("bucket")["failed"]
            .first()).all(), "a minute's faults are among its failed calls"  # fmt: skip
    assert set(family["error_class"]) == {"overloaded"}


@pytest.mark.parametrize("name", PROFILE)
def test_an_unpublished_profile_snapshot_has_the_published_ones_columns_and_types(history, name):
    """The stand-in a fresh install reads (engine.published.read) is the snapshot as published."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE stand_in ({SNAPSHOT_COLUMNS[name]})")
    file = history[0].published / f"{name}.parquet"
    published = con.execute("DESCRIBE SELECT * FROM read_parquet($file)", {"file": str(file)})
    assert published.fetchall() == con.execute("DESCRIBE stand_in").fetchall()
