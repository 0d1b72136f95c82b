"""The fixture week of the weekly-report tests: real chain traffic (tests/helpers/alert_harness.py)
across the Sunday-to-Monday boundary of 2026-W46/W47, through the real recorder, scheduler
pass and alerting, with eval runs and drills written straight into the store.

Sunday 2026-11-15 23:30 to Monday 00:31, five requests a minute on `support` (claude → gpt):

- W46: a 3-minute primary outage at 23:38 (an incident, a breaker opening and an alert that
  all belong to the week before);
- 23:59:48: the primary hangs (read timeout) and the request's backup answers after midnight;
  then, until 00:06, it answers 529: one incident across the boundary;
- 00:19: both providers down for 2 minutes (unavailable and all-skipped requests);
- 00:26: a minute of malformed-request rejections (request faults).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from engine.core.paths import DataPaths
from engine.published.read import PublishedData
from engine.reports.content import WeekReport
from engine.reports.week import build_week
from helpers.alert_harness import PRIMARY, World, config

WEEK = "2026-W47"
START = datetime(2026, 11, 16, tzinfo=UTC)  # Monday 00:00
END = START + timedelta(days=7)
BEFORE = START - timedelta(days=7)
# When the scheduler writes the week's report: the Monday after, 06:00.
MONDAY_AFTER = END + timedelta(hours=6)
BACKUP = "gpt-4.1-mini"
PRIMARY_TARGET = f"claude/{PRIMARY}"
GPT = f"gpt/{BACKUP}"

# Eval runs and drills, written straight into the store: one of each in the week before (the
# drill begun there ends after midnight, in this week) and one of each in this week.
# run_id, started_at, cases, min_pass_rate
EVAL_RUNS = [
    ("w46", datetime(2026, 11, 15, 23, 40, tzinfo=UTC), 2, 0.9),
    ("w47", datetime(2026, 11, 16, 0, 10, tzinfo=UTC), 3, 0.9),
]
# run_id, target, case, passed, reason, latency_ms, cost_usd
EVAL_RESULTS = [
    ("w46", PRIMARY_TARGET, "refund", True, None, 900.0, "0.0020"),
    ("w46", PRIMARY_TARGET, "order", True, None, 950.0, "0.0020"),
    ("w46", GPT, "refund", False, "contains: no 'refund'", 400.0, "0.0003"),
    ("w46", GPT, "order", False, "contains: no 'order'", 420.0, "0.0003"),
    ("w47", PRIMARY_TARGET, "refund", True, None, 1000.0, "0.0021"),
    ("w47", PRIMARY_TARGET, "order", True, None, 1200.0, "0.0023"),
    ("w47", PRIMARY_TARGET, "json", True, None, 1100.0, "0.0022"),
    ("w47", GPT, "refund", True, None, 500.0, "0.0004"),
    ("w47", GPT, "order", True, None, 550.0, "0.0004"),
    ("w47", GPT, "json", False, "output_schema: 'order_id' is a required property", 650.0,
     "0.0005"),
]  # fmt: skip
DRILL_REPORT = {
    "requests": 25, "served_by": {GPT: 24, PRIMARY_TARGET: 0}, "served_by_backups": 24,
    "failed": 1, "drill_faults": 6, "breaker_opened_after_s": 0.4, "cost_usd": "0.0123",
    "primary_estimate_usd": "0.0101", "cost_difference_usd": "0.0022", "restored": True,
    "restored_after_s": 1.2, "verdict": "passed",
    "summary": f"24 of 25 requests served by {GPT}; 1 failed before the breaker opened",
}  # fmt: skip
# drill_id, started_at, ended_at, report
DRILLS = [
    ("w46", datetime(2026, 11, 15, 23, 57, tzinfo=UTC), datetime(2026, 11, 16, 0, 2, tzinfo=UTC),
     {**DRILL_REPORT, "verdict": "failed", "summary": "the breaker never opened"}),
    ("w47", datetime(2026, 11, 16, 0, 12, tzinfo=UTC), datetime(2026, 11, 16, 0, 17, tzinfo=UTC),
     DRILL_REPORT),
]  # fmt: skip


@dataclass(frozen=True)
class FixtureWeek:
    paths: DataPaths
    report: WeekReport  # as the scheduler writes it, the Monday after
    to_date: WeekReport  # as the data stood when the traffic ended: a week to date
    attempts: pd.DataFrame  # every attempt of both weeks, cost_usd as Decimal
    incidents: pd.DataFrame  # the store's tables, money as Decimal
    alerts: pd.DataFrame
    breaker_events: pd.DataFrame


def table(con: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    """Through Arrow, so that DECIMAL columns stay Decimals (`.df()` makes them floats)."""
    return con.sql(sql).to_arrow_table().to_pandas()


def fixture_week(folder: Path) -> FixtureWeek:
    world = World(folder, config([], rules=None),
                  start=datetime(2026, 11, 15, 23, 30, tzinfo=UTC), per_minute=5)  # fmt: skip
    try:
        _readiness_rows(world.pipeline.con)  # published by the cycles that follow
        world.minutes(8)
        world.primary_fails("overloaded", minutes=3)
        world.minutes(21)
        assert world.now == datetime(2026, 11, 15, 23, 59, tzinfo=UTC)
        world.transport.schedule(PRIMARY, windows=[
            {"start_s": 45, "end_s": 75, "fault": "read_timeout"},
            {"start_s": 75, "end_s": 435, "fault": "overloaded"},
        ])  # fmt: skip
        world.minutes(8)
        world.transport.app.cache.clear()  # the 5-minute cache TTL lapsed during the outage
        world.minutes(12)
        world.primary_fails("overloaded", minutes=2)
        world.transport.schedule(BACKUP, windows=[{"start_s": 0, "end_s": 120, "fault": "529"}])
        world.minutes(7)
        world.primary_fails("invalid_request", minutes=1)
        world.minutes(5)
        world.pipeline.day_rollups()  # publishes the failure classes
        world.cycle()
        con = world.pipeline.con
        published = PublishedData(world.paths.published)
        try:
            report = build_week(published, WEEK, as_of=MONDAY_AFTER)
            to_date = build_week(published, WEEK)
        finally:
            published.close()
        return FixtureWeek(
            paths=world.paths,
            report=report,
            to_date=to_date,
            attempts=table(con, "SELECT * FROM attempts"),
            incidents=table(con, "SELECT * FROM incidents"),
            alerts=table(con, "SELECT * FROM alerts"),
            breaker_events=table(con, "SELECT * FROM breaker_events"),
        )
    finally:
        world.close()


def _readiness_rows(con: duckdb.DuckDBPyConnection) -> None:
    for run_id, started_at, cases, minimum in EVAL_RUNS:
        _insert(con, "eval_runs", run_id=run_id, route="support", cases_file="cases.toml",
                started_at=started_at, finished_at=started_at + timedelta(minutes=2),
                cases=cases, min_pass_rate=minimum)  # fmt: skip
    for run_id, target, case, passed, reason, latency, cost in EVAL_RESULTS:
        _insert(con, "eval_results", run_id=run_id, route="support", target=target,
                case_name=case, passed=passed, reason=reason, latency_ms=latency, cost_usd=cost,
                input_tokens=400, output_tokens=80, error=None)  # fmt: skip
    for drill_id, started_at, ended_at, report in DRILLS:
        _insert(con, "drills", drill_id=drill_id, route="support", target=PRIMARY_TARGET,
                started_at=started_at, ends_at=ended_at, ended_at=ended_at,
                requested_by="ops@example.com", status="reported",
                report=json.dumps(report))  # fmt: skip


def _insert(con: duckdb.DuckDBPyConnection, table: str, **row: Any) -> None:
    names, values = ", ".join(row), ", ".join(f"${k}" for k in row)
    con.execute(f"INSERT INTO {table} ({names}) VALUES ({values})", row)
