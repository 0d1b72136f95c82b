"""Retention over sixteen days of the demo's traffic, made by the real chain, recorder and
scheduler pass (simulations.demo.history) and archived two days back, then taken in by a restarted
scheduler and met by a late spool file: the weekly report of the week that moved, its rollups,
incidents and failure classes, and the What-if's scenarios of its days are what they were
before the move (engine.store.retention)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from engine.config import Config
from engine.core.clock import VirtualClock
from engine.core.errors import ChainError
from engine.core.paths import DataPaths
from engine.published.read import PublishedData
from engine.reports import render
from engine.reports.week import build_week
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from engine.store.retention import ArchiveResult, archive_old_attempts, stored_attempts
from simulations.demo.history import seed_history
from simulations.demo.up import DEMO_KEY_ENV, demo_config
from simulations.fakes import FakeTransport
from simulations.whatif.from_store import (
    Outage,
    replayable_incidents,
    scenario_from_incident,
    scenario_from_traffic,
)
from simulations.whatif.scenario_toml import to_toml

END = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # a Wednesday noon
HISTORY_DAYS = 16  # from Monday 16 Nov noon: W47 in part, W48 whole, W49 to date
WEEK = "2026-W48"
KEEP = 2  # at END the days up to 29 Nov move: all of W48
MOVED_UNTIL = datetime(2026, 11, 30, tzinfo=UTC)
RESTART = END + timedelta(minutes=20)
LATE_AT = datetime(2026, 11, 25, 10, 0, 30, tzinfo=UTC)
SONNET, MINI = "claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"
ROLLUPS = ("rollup_minute", "rollup_hour", "rollup_day")


@dataclass(frozen=True)
class Seen:
    """What a person and the What-if get from the store, and what the store holds of the days
    that moved."""

    markdown: str
    csv: dict[str, str]
    scenarios: dict[str, str]  # a window of 27 Nov and every archived incident replayed, as TOML
    rollups: dict[str, list[tuple]]  # the moved days' rows
    failure_hours: list[tuple]
    incidents: list[tuple]


@dataclass(frozen=True)
class History:
    before: Seen
    moved: ArchiveResult
    archived: Seen  # by the scheduler restarted after the move
    late: Seen  # after a late spool file with an attempt of a moved day
    profiled: tuple[bool, bool]  # the traffic profile republished after the move, after the file
    again: ArchiveResult  # the next move after the late file
    attempts: int  # before the move
    everywhere: tuple[int, int]  # at the end, table and archive together


def _seen(paths: DataPaths, con: duckdb.DuckDBPyConnection, config: Config) -> Seen:
    data = PublishedData(paths.published)
    try:
        report = build_week(data, WEEK)
        csv = {stem: f"{title}\n{frame.to_csv(index=False)}"
               for stem, (title, frame) in render.csv_tables(report).items()}  # fmt: skip
        scenarios = _scenarios(data, config)
        markdown = render.markdown(report, generated_at=END)
    finally:
        data.close()
    return Seen(
        markdown=markdown,
        csv=csv,
        scenarios=scenarios,
        rollups={table: _rows(con, table, "bucket") for table in ROLLUPS},
        failure_hours=_rows(con, "failure_hours", "hour"),
        incidents=con.execute("SELECT * FROM incidents ORDER BY incident_id").fetchall(),
    )


def _rows(con: duckdb.DuckDBPyConnection, table: str, time: str) -> list[tuple]:
    """The rows of the days that moved, in order."""
    sql = f"SELECT * FROM {table} WHERE {time} < $until ORDER BY ALL"
    return con.execute(sql, {"until": MOVED_UNTIL}).fetchall()


def _scenarios(data: PublishedData, config: Config) -> dict[str, str]:
    afternoon = datetime(2026, 11, 27, 12, tzinfo=UTC)
    outage = Outage(SONNET, start_s=3600, length_s=1800, kind="overloaded")
    window = scenario_from_traffic(data, config, afternoon, afternoon + timedelta(hours=6),
                                   outage=outage, backups=[MINI])  # fmt: skip
    incidents = replayable_incidents(data)
    moved = incidents[incidents["started_at"] < MOVED_UNTIL]["incident_id"]
    assert len(moved) >= 3, "the history's incidents of W48"
    replays = {i: to_toml(scenario_from_incident(data, config, i, backups=[MINI])) for i in moved}
    return {"27 Nov 12:00-18:00": to_toml(window), **replays}


def _late_file(paths: DataPaths, config: Config) -> None:
    """A request the caller got wrong, sent on 25 Nov through a gateway that was offline since:
    its spool file arrives now."""
    clock = VirtualClock(wall_start=LATE_AT)
    transport = FakeTransport(clock=clock)
    refused = {"start_s": 0, "end_s": 60, "fault": "invalid_request"}
    transport.schedule("claude-sonnet-4-5", windows=[refused])
    offline = DataPaths(paths.root.parent / "offline")
    sw = Switchover(config, clock=clock, transport=transport, record_to=offline,
                    environ={DEMO_KEY_ENV: "k"})  # fmt: skip

    async def ask() -> None:
        with contextlib.suppress(ChainError):
            await sw.complete("support", "Cancel order #-1 of yesterday")
        await sw.aclose()

    clock.run(ask())
    files = list(offline.spool.glob("*.parquet"))
    assert files, "the offline gateway recorded its attempt"
    for file in files:
        os.replace(file, paths.spool / file.name)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> History:
    paths = DataPaths(tmp_path_factory.mktemp("history") / "data")
    config = demo_config(8700)
    seed_history(paths, config, days=HISTORY_DAYS, end=END, peak_per_minute=0.5,
                 environ={DEMO_KEY_ENV: "k"}, say=lambda _: None)  # fmt: skip
    pipeline = Pipeline(paths, now=lambda: END)
    try:
        pipeline.cycle()
        pipeline.day_rollups()
        pipeline.traffic_profile()
        before = _seen(paths, pipeline.con, config)
        (attempts,) = pipeline.con.execute("SELECT count(*) FROM attempts").fetchone()
        moved = archive_old_attempts(pipeline.con, paths.archive, KEEP, END, max_days=30)
    finally:
        pipeline.close()
    now = [RESTART]  # a scheduler started again, on the store as the move left it
    pipeline = Pipeline(paths, now=lambda: now[0])
    try:
        pipeline.cycle()
        pipeline.day_rollups()
        profiled = pipeline.traffic_profile()
        archived = _seen(paths, pipeline.con, config)
        _late_file(paths, config)
        now[0] += timedelta(minutes=1)
        pipeline.cycle()
        pipeline.day_rollups()
        late_profiled = pipeline.traffic_profile()
        late = _seen(paths, pipeline.con, config)
        again = archive_old_attempts(pipeline.con, paths.archive, KEEP, now[0], max_days=30)
        with stored_attempts(pipeline.con, paths.archive, [(END - timedelta(days=99), END)]) as v:
            everywhere = pipeline.con.execute(
                f"SELECT count(*), count(DISTINCT (request_id, attempt_number)) FROM {v}"
            ).fetchone()
    finally:
        pipeline.close()
    return History(before, moved, archived, late, (profiled, late_profiled), again, attempts,
                   everywhere)  # fmt: skip


def test_the_history_moves_whole_and_the_late_attempt_joins_its_day(history):
    assert history.moved.days == 14 and history.moved.kept_since == MOVED_UNTIL
    assert history.again.parts == ("2026-11/2026-11-25-2.parquet",) and history.again.rows == 1
    assert history.everywhere == (history.attempts + 1, history.attempts + 1)


def test_a_report_over_an_archived_week_equals_the_report_before_archiving(history):
    assert history.archived.markdown == history.before.markdown
    assert history.archived.csv == history.before.csv
    assert "Incidents" in history.before.markdown and "## Cost" in history.before.markdown


def test_the_moved_days_rollups_failure_classes_and_incidents_stay(history):
    assert history.archived.rollups == history.before.rollups
    assert all(history.before.rollups.values())
    assert history.archived.failure_hours == history.before.failure_hours
    assert history.archived.incidents == history.before.incidents


# The next three wait on the scheduler's clamp to retention.refresh_floor (the rollup,
# failure-class and baseline refreshes, and incidents: a late file recomputes every one).
def test_a_late_file_after_the_move_leaves_the_moved_days_rollups_as_they_were(history):
    assert history.late.rollups == history.before.rollups
    assert history.late.failure_hours == history.before.failure_hours


def test_a_late_file_after_the_move_leaves_the_incidents_as_they_were(history):
    assert history.late.incidents == history.before.incidents


def test_a_report_over_an_archived_week_is_unchanged_by_a_late_file(history):
    assert history.late.markdown == history.before.markdown
    assert history.late.csv == history.before.csv


def test_a_what_if_over_moved_days_reads_them_from_the_archive(history):
    """The traffic profile is republished after the move, and again after the late file made
    it recompute the moved hours: the scenarios of a window and of each incident of those days
    are the ones built before they moved (waits on TrafficProfile(paths.archive) in the
    scheduler)."""
    assert history.profiled == (True, True)
    assert history.archived.scenarios == history.before.scenarios
    assert history.late.scenarios == history.before.scenarios
