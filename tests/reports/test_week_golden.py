"""Golden tests of the weekly report's content: a week made by real chain traffic
(tests/alerts/harness.py) across the Sunday-to-Monday boundary, and every figure of
`build_week` checked against a computation by hand from the attempts table and the store's
event tables, with the definitions of docs/metrics.md."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import pandas as pd
import pytest
from alerts.harness import PRIMARY, World, config

from engine.alerts.families import describe
from engine.paths import DataPaths
from engine.pricing import Pricer
from engine.reports import render
from engine.reports.week import AVAILABILITY_TARGET, CostLine, RouteWeek, WeekReport, build_week
from engine.store.db import open_store
from engine.store.publish import publish
from engine.store.read import PublishedData

WEEK = "2026-W47"
START = datetime(2026, 11, 16, tzinfo=UTC)  # Monday 00:00
END = START + timedelta(days=7)
BEFORE = START - timedelta(days=7)
BACKUP = "gpt-4.1-mini"
PRIMARY_TARGET = f"claude/{PRIMARY}"
NANO = Decimal("1e-9")  # the scale of every DECIMAL(18,9) money column
# The premium and cache loss multiply by the DOUBLE hit ratio and are rounded to nine decimals
# once a minute row: a few nano-dollars apart from exact arithmetic over the week (~2e-9 here).
ROUNDING = Decimal("1e-8")
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
    report: WeekReport
    attempts: pd.DataFrame  # every attempt of both weeks, cost_usd as Decimal
    requests: pd.DataFrame  # one row a request, from the attempts (_requests)
    incidents: pd.DataFrame  # the store's tables, money as Decimal
    alerts: pd.DataFrame
    breaker_events: pd.DataFrame


def _table(con: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    """Through Arrow, so that DECIMAL columns stay Decimals (`.df()` makes them floats)."""
    return con.sql(sql).to_arrow_table().to_pandas()


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> FixtureWeek:
    """Sunday 2026-11-15 23:30 to Monday 00:31, five requests a minute on `support`
    (claude → gpt):

    - W46: a 3-minute primary outage at 23:38 (an incident, a breaker opening and an alert
      that all belong to the week before);
    - 23:59:48: the primary hangs (read timeout) and the request's backup answers after
      midnight; then, until 00:06, it answers 529: one incident across the boundary;
    - 00:19: both providers down for 2 minutes (unavailable and all-skipped requests);
    - 00:26: a minute of malformed-request rejections (request faults).
    """
    world = World(tmp_path_factory.mktemp("week"), config([], rules=None),
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
            report = build_week(published, WEEK)
        finally:
            published.close()
        attempts = _table(con, "SELECT * FROM attempts")
        return FixtureWeek(
            report=report,
            attempts=attempts,
            requests=_requests(attempts),
            incidents=_table(con, "SELECT * FROM incidents"),
            alerts=_table(con, "SELECT * FROM alerts"),
            breaker_events=_table(con, "SELECT * FROM breaker_events"),
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


# --- the hand computation ------------------------------------------------------------------


def _within(frame: pd.DataFrame, column: str, lo: datetime, hi: datetime) -> pd.DataFrame:
    return frame[(frame[column] >= lo) & (frame[column] < hi)]


def _requests(attempts: pd.DataFrame) -> pd.DataFrame:
    """One row a request: when its first attempt started, and its outcome as decided by the
    attempt that served it or, when none did, its last one."""
    rows = []
    for request_id, group in attempts.groupby("request_id"):
        group = group.sort_values("attempt_number")
        served = group[group["served"]]
        deciding = served.iloc[-1] if len(served) else group.iloc[-1]
        answered = bool((served["outcome"] == "success").any())
        fault = bool((group["decision"] == "fail_fast").any())
        broken = bool((served["outcome"] == "error").any()) and not answered
        abandoned = bool((group["outcome"] == "cancelled").any()) and not (answered or broken)
        rows.append(
            {
                "request_id": request_id,
                "first_at": group["started_at"].min(),
                "route": deciding["route"],
                "answered": answered,
                "by_fallback": answered and deciding["fallback_depth"] > 0,
                "request_fault": fault,
                "abandoned": abandoned,
                "unavailable": not (answered or fault or broken or abandoned),
            }
        )
    return pd.DataFrame(rows)


def _cost(attempts: pd.DataFrame) -> Decimal:
    """Exact, in Decimal; an unpriced attempt (NULL) adds nothing."""
    return sum((c for c in attempts["cost_usd"] if c is not None), Decimal(0))


def _served(attempts: pd.DataFrame) -> pd.DataFrame:
    return attempts[attempts["served"] & (attempts["outcome"] == "success")]


def _hit_ratio(attempts: pd.DataFrame, hour: datetime) -> Decimal:
    """The primary's cache-hit ratio for `hour`: its successes in the 24 hours before."""
    ok = attempts[(attempts["outcome"] == "success") & (attempts["fallback_depth"] == 0)]
    ok = _within(ok[ok["target"] == PRIMARY_TARGET], "started_at", hour - timedelta(days=1), hour)
    tokens = ok[["input_tokens", "cache_read_tokens", "cache_write_tokens"]].sum()
    total = tokens.sum()
    return Decimal(float(tokens["cache_read_tokens"] / total)) if total else Decimal(0)


def _overlapping(incidents: pd.DataFrame) -> pd.DataFrame:
    """The incidents with a minute in the week: [started_at, ended_at) meets [START, END)."""
    ongoing = incidents["ended_at"].isna()
    overlap = (ongoing | (incidents["ended_at"] > START)) & (incidents["started_at"] < END)
    return incidents[overlap].sort_values("started_at")


def _primary_prices():
    return Pricer().unit_prices("anthropic", PRIMARY, START)


def _money(value: float) -> Decimal:
    """A money value from a DataFrame (DuckDB hands DECIMAL(18,9) over as float64)."""
    return Decimal(value).quantize(NANO)


# --- requests -------------------------------------------------------------------------------


def test_route_figures_count_requests_by_their_first_attempt_and_deciding_attempt(week):
    requests = _within(week.requests, "first_at", START, END)
    in_week = _within(week.attempts, "started_at", START, END)
    expected = []
    for route, rows in requests.groupby("route"):
        answered, faults = int(rows["answered"].sum()), int(rows["request_fault"].sum())
        counted = len(rows) - faults - int(rows["abandoned"].sum())
        availability = answered / counted
        expected.append(
            RouteWeek(
                route=route,
                requests=len(rows),
                answered=answered,
                by_fallback=int(rows["by_fallback"].sum()),
                request_faults=faults,
                unavailable=int(rows["unavailable"].sum()),
                availability=availability,
                budget_burned=(1 - availability) / (1 - AVAILABILITY_TARGET),
                fallback_rate=int(rows["by_fallback"].sum()) / len(rows),
                cost_usd=_cost(in_week[in_week["route"] == route]),
            )
        )
    assert week.report.routes == expected
    [support] = expected
    assert support.by_fallback > 25 and support.request_faults == 5 and support.unavailable > 5
    assert week.report.unavailable == support.unavailable


def test_a_request_skipped_by_every_target_counts_as_one_unavailable_request(week):
    skipped = _within(week.attempts, "started_at", START, END)
    skipped = skipped[skipped["outcome"] == "skipped"]
    assert len(skipped) >= 1, "both breakers were open at once"
    assert skipped["request_id"].is_unique
    requests = week.requests.set_index("request_id")
    assert requests.loc[skipped["request_id"], "unavailable"].all()


def test_a_request_spanning_midnight_counts_in_the_week_of_its_first_attempt(week):
    """Its primary hung from 23:59:48 until the reserve line, 20 s on; its backup answered
    after midnight (the budget's reserve kept for it). Its request figures go to the week
    before; the answer it got after midnight is spent in this week."""
    first = week.attempts.groupby("request_id")["started_at"].agg(["min", "max"])
    [spanning] = first[(first["min"] < START) & (first["max"] >= START)].index
    request = week.requests.set_index("request_id").loc[spanning]
    assert request["answered"] and request["by_fallback"]
    this = _within(week.requests, "first_at", START, END)
    assert spanning not in set(this["request_id"])
    assert week.report.unavailable == this["unavailable"].sum()
    mine = week.attempts[week.attempts["request_id"] == spanning]
    late = mine[mine["started_at"] >= START]
    assert list(late["outcome"]) == ["success"] and list(late["target"]) == [GPT]
    assert _cost(late) > 0
    early = mine[mine["started_at"] < START]
    assert list(early["error_class"]) == ["read_timeout"], "no retry: it did not fit"


# --- money ----------------------------------------------------------------------------------


def test_spend_is_the_cost_of_each_weeks_attempts_exactly(week):
    this = _within(week.attempts, "started_at", START, END)
    before = _within(week.attempts, "started_at", BEFORE, START)
    assert week.report.total_cost == _cost(this)
    assert week.report.previous_cost == _cost(before)
    assert week.report.total_cost > 0 and week.report.previous_cost > 0


@pytest.mark.parametrize("dimension", ["route", "provider", "model"])
def test_cost_lines_hold_this_week_and_the_week_before_costliest_first(week, dimension):
    this = _within(week.attempts, "started_at", START, END)
    before = _within(week.attempts, "started_at", BEFORE, START)
    names = set(this[dimension]) | set(before[dimension])
    expected = [
        CostLine(
            name,
            _cost(this[this[dimension] == name]),
            _cost(before[before[dimension] == name]),
        )
        for name in names
    ]
    expected.sort(key=lambda line: (-line.cost_usd, line.name))
    assert week.report.cost_by[dimension] == expected
    for line in week.report.cost_by[dimension]:
        assert line.change == float((line.cost_usd - line.previous_usd) / line.previous_usd)


def test_wasted_spend_is_the_cost_of_attempts_that_did_not_succeed(week):
    this = _within(week.attempts, "started_at", START, END)
    assert week.report.wasted == _cost(this[this["outcome"] != "success"])
    assert week.report.wasted > 0


def test_fallback_premium_and_cache_loss_match_a_hand_computation(week):
    primary = _primary_prices()
    backup = _served(_within(week.attempts, "started_at", START, END))
    backup = backup[backup["fallback_depth"] > 0]
    # Every fallback of the week falls in its first hour: the totals are that hour's figures.
    assert set(backup["started_at"].dt.floor("h")) == {START}
    assert len(backup) > 25
    h = _hit_ratio(week.attempts, START)
    assert h > Decimal("0.5"), "the system prompt is cached on the primary"
    premium = cache_loss = Decimal(0)
    for row in backup.itertuples():
        total_in = row.input_tokens + row.cache_read_tokens + row.cache_write_tokens
        on_primary = (
            total_in * (1 - h) * primary.input
            + total_in * h * primary.cache_read
            + row.output_tokens * primary.output
        )
        premium += row.cost_usd - on_primary
        cache_loss += total_in * h * (primary.input - primary.cache_read)
    assert abs(week.report.fallback_premium - premium) < ROUNDING
    assert abs(week.report.cache_loss - cache_loss) < ROUNDING
    assert week.report.price_difference == week.report.fallback_premium - week.report.cache_loss


def test_rewarm_matches_a_hand_computation(week):
    """Primary successes in a minute whose route was served more by backups than by the
    primary over the five minutes before pay cache writes at the write premium."""
    primary = _primary_prices()
    served = _served(week.attempts)
    minute = served["started_at"].dt.floor("min")
    rewarm = Decimal(0)
    after = _within(served[served["fallback_depth"] == 0], "started_at", START, END)
    for row in after.itertuples():
        m = row.started_at.floor("min")
        recent = served[(minute >= m - timedelta(minutes=5)) & (minute < m)]
        if (recent["fallback_depth"] > 0).sum() > (recent["fallback_depth"] == 0).sum():
            rewarm += row.cache_write_tokens * (primary.cache_write - primary.input)
    assert rewarm > 0, "the primary wrote its cache again after recovering"
    assert week.report.rewarm == rewarm


def test_no_model_is_unpriced(week):
    this = _within(week.attempts, "started_at", START, END)
    tokens = this[["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]]
    assert not (this["cost_usd"].isna() & (tokens.sum(axis=1) > 0)).any()
    assert week.report.unpriced.empty


def test_daily_rows_count_requests_by_day_of_first_attempt_and_attempt_cost_by_day(week):
    requests = _within(week.requests, "first_at", START, END)
    attempts = _within(week.attempts, "started_at", START, END)
    expected = []
    for (day, route), rows in requests.groupby([requests["first_at"].dt.floor("D"), "route"]):
        costs = attempts[
            (attempts["started_at"].dt.floor("D") == day) & (attempts["route"] == route)
        ]
        expected.append(
            (
                day,
                route,
                len(rows),
                int(rows["answered"].sum()),
                len(rows) - int(rows["request_fault"].sum()) - int(rows["abandoned"].sum()),
                pytest.approx(float(_cost(costs))),
            )
        )
    daily = week.report.daily
    assert list(daily.itertuples(index=False, name=None)) == expected


# --- what happened --------------------------------------------------------------------------


def test_failure_classes_count_the_weeks_error_attempts_per_provider(week):
    errors = _within(week.attempts, "started_at", START, END)
    errors = errors[errors["outcome"] == "error"]
    keys = ["provider", "error_class", "fault_kind", "http_status"]
    counts = Counter(
        tuple(None if pd.isna(v) else v for v in row)
        for row in errors[keys].itertuples(index=False, name=None)
    )
    expected = sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1]))
    got = [
        (tuple(None if pd.isna(v) else v for v in row[:4]), row[4])
        for row in week.report.failures.itertuples(index=False, name=None)
    ]
    assert got == expected  # fewer than five classes per provider: none is cut
    assert {provider for (provider, *_), _ in got} == {"claude", "gpt"}


def test_breaker_openings_count_closed_to_open_transitions_in_the_week(week):
    opened = week.breaker_events[
        (week.breaker_events["from_status"] == "closed")
        & (week.breaker_events["to_status"] == "open")
    ]
    assert (opened["occurred_at"] < START).any(), "the week before had an opening of its own"
    counts = Counter(_within(opened, "occurred_at", START, END)["target"])
    expected = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))  # most first
    got = week.report.breaker_openings
    assert list(zip(got["target"], got["openings"], strict=True)) == expected
    assert set(counts) == {PRIMARY_TARGET, f"gpt/{BACKUP}"}


def test_alerts_count_those_fired_in_the_week(week):
    assert (week.alerts["fired_at"] < START).any(), "an alert fired the week before"
    fired = _within(week.alerts, "fired_at", START, END)
    counts = Counter(zip(fired["rule"], fired["severity"], strict=True))
    expected = sorted(((*key, n) for key, n in counts.items()), key=lambda r: (-r[2], r[0]))
    got = week.report.alerts[["rule", "severity", "fired"]]
    assert list(got.itertuples(index=False, name=None)) == expected
    assert ("fallback-rate-5m", "warning") in counts


def test_incidents_are_those_overlapping_the_week(week):
    """The one across midnight is in, the one that ended on Sunday is not."""
    store = week.incidents
    overlapping = _overlapping(store)
    assert (store["ended_at"] < START).any()
    assert ((overlapping["started_at"] < START) & (overlapping["ended_at"] > START)).any()
    got = week.report.incidents
    assert got["incident_id"].tolist() == overlapping["incident_id"].tolist()
    assert got["requests_affected"].tolist() == overlapping["requests_affected"].tolist()
    assert [_money(v) for v in got["extra_cost_usd"]] == overlapping["extra_cost_usd"].tolist()


def test_an_incident_that_ended_as_the_week_began_belongs_to_the_week_before_only(tmp_path):
    """An incident covers [started_at, ended_at): one whose last bad minute was Sunday 23:59
    ends at Monday 00:00 and has no minute in the new week."""
    paths = DataPaths(tmp_path / "data")
    con = open_store(paths.database)
    try:
        for name, started_at, ended_at in [
            ("ended-at-midnight", START - timedelta(minutes=10), START),
            ("across-midnight", START - timedelta(minutes=5), START + timedelta(minutes=5)),
            ("ongoing", START + timedelta(days=2), None),
        ]:
            con.execute(_INSERT_INCIDENT, {"id": name, "lo": started_at, "hi": ended_at})
        publish(con, paths.published, "incidents", "SELECT * FROM incidents")
    finally:
        con.close()
    data = PublishedData(paths.published)
    try:
        this, before = build_week(data, WEEK), build_week(data, "2026-W46")
    finally:
        data.close()
    assert this.incidents["incident_id"].tolist() == ["across-midnight", "ongoing"]
    assert before.incidents["incident_id"].tolist() == ["ended-at-midnight", "across-midnight"]


_INSERT_INCIDENT = """
    INSERT INTO incidents BY NAME SELECT $id AS incident_id, 'provider' AS scope,
        'claude' AS subject, $lo::TIMESTAMPTZ AS started_at, $hi::TIMESTAMPTZ AS ended_at,
        1.0 AS peak_fault_rate, 9 AS fault_attempts, 'overloaded (529)' AS top_error,
        'support' AS routes, 9 AS requests, 9 AS requests_affected, 9 AS answered_by_fallback,
        0 AS failed, 0 AS fallback_premium_usd, 0 AS cache_loss_usd, 0 AS price_difference_usd,
        0 AS rewarm_usd, 0 AS wasted_usd, 0 AS extra_cost_usd
"""


def test_the_summary_mentions_the_weeks_spend_and_its_largest_incident(week):
    text = " ".join(week.report.summary)
    spend = _cost(_within(week.attempts, "started_at", START, END))
    previous = _cost(_within(week.attempts, "started_at", BEFORE, START))
    assert f"Spend was ${spend:,.2f}" in text
    assert f"the week before (${previous:,.2f})" in text
    incidents = _overlapping(week.incidents)
    largest = incidents.sort_values("requests_affected", ascending=False).iloc[0]
    assert (
        f"{len(incidents)} incident(s); the largest, "
        f"{describe(largest['subject'], largest['family'])} from "
        f"{largest['started_at']:%a %H:%M} UTC, affected {largest['requests_affected']:,} "
        "requests"
    ) in text


# --- drills and evals -----------------------------------------------------------------------


def test_the_drills_are_those_started_in_the_week_with_their_reports_figures(week):
    """The drill begun on Sunday 23:57 ended in this week, but belongs to the week before."""
    drills = week.report.drills
    assert drills["drill_id"].tolist() == ["w47"]
    [drill] = drills.itertuples()
    assert (drill.started_at, drill.ended_at) == (DRILLS[1][1], DRILLS[1][2])
    assert (drill.verdict, drill.summary) == ("passed", DRILL_REPORT["summary"])
    assert (drill.requests, drill.served_by_backups, drill.failed) == (25, 24, 1)
    assert drill.breaker_opened_after_s == 0.4
    assert (drill.restored, drill.restored_after_s) == (True, 1.2)
    assert _money(drill.cost_difference_usd) == Decimal("0.0022")
    assert _money(drill.cost_usd) - _money(drill.primary_estimate_usd) == Decimal("0.0022")


def test_each_target_has_the_pass_rate_of_its_latest_eval_run_in_the_week(week):
    expected = []
    for target in (PRIMARY_TARGET, GPT):  # sorted by target
        cases = [r for r in EVAL_RESULTS if r[0] == "w47" and r[1] == target]
        passed = sum(1 for r in cases if r[3])
        expected.append(
            ("w47", "support", target, len(cases), passed, passed / len(cases),
             passed / len(cases) < 0.9, statistics.median(r[5] for r in cases),
             sum(Decimal(r[6]) for r in cases))
        )  # fmt: skip
    got = [
        (e.run_id, e.route, e.target, e.cases, e.passed, e.pass_rate, e.below_minimum,
         e.latency_p50_ms, _money(e.cost_usd))
        for e in week.report.evals.itertuples()
    ]  # fmt: skip
    assert got == expected
    assert [row[4:7] for row in got] == [(3, 1.0, False), (2, 2 / 3, True)]
    assert [row[8] for row in got] == [Decimal("0.0066"), Decimal("0.0013")]


def test_the_drills_and_evals_tables_show_and_export_the_exact_figures(week):
    shown, raw = render.tables(week.report), render.tables(week.report, raw=True)
    assert shown["drills"][1].to_dict("records") == [{
        "start (UTC)": "Mon 2026-11-16 00:12", "route": "support", "target": PRIMARY_TARGET,
        "duration": "5 min", "status": "reported", "verdict": "passed", "requests": 25,
        "served by backups": 24, "failed": 1, "breaker opened after": "0.4 s",
        "cost difference": "$0.0022", "restored": "yes", "restored after": "1.2 s",
        "summary": DRILL_REPORT["summary"],
    }]  # fmt: skip
    [drill] = raw["drills"][1].to_dict("records")
    assert (drill["breaker opened after"], drill["cost difference"], drill["restored"],
            drill["restored after"]) == (0.4, "0.002200000", True, 1.2)  # fmt: skip
    assert shown["evals"][1].to_dict("records") == [
        {"route": "support", "target": PRIMARY_TARGET, "run (UTC)": "Mon 2026-11-16 00:10",
         "cases file": "cases.toml", "cases": 3, "passed": 3, "pass rate": "100.0%",
         "minimum": "90%", "below minimum": "no", "p50 latency (ms)": 1100, "cost": "$0.0066"},
        {"route": "support", "target": GPT, "run (UTC)": "Mon 2026-11-16 00:10",
         "cases file": "cases.toml", "cases": 3, "passed": 2, "pass rate": "66.7%",
         "minimum": "90%", "below minimum": "yes", "p50 latency (ms)": 550, "cost": "$0.0013"},
    ]  # fmt: skip
    gpt = raw["evals"][1].set_index("target").loc[GPT]
    assert (gpt["pass rate"], gpt["below minimum"], gpt["cost"]) == (2 / 3, True, "0.001300000")


def test_the_summary_names_the_drills_and_the_target_below_its_minimum(week):
    summary = week.report.summary
    assert "1 drill(s), 1 passed." in summary
    assert (
        f"{GPT} passed 67% of support's eval cases (2/3), below the route's 90% minimum." in summary
    )


def test_markdown_and_html_put_drills_and_evals_under_one_heading(week):
    text = render.markdown(week.report)
    assert text.count("## Drills and evals") == 1
    section = text.split("## Drills and evals", 1)[1]
    assert (
        section.index("### Drills started in the week")
        < section.index("### Eval pass rates")
        < section.index("\n## ")
    )
    assert (
        f"| Mon 2026-11-16 00:12 | support | {PRIMARY_TARGET} | 5 min | reported | passed | 25 "
        "| 24 | 1 | 0.4 s | $0.0022 | yes | 1.2 s |"
    ) in section
    page = render.html(week.report)
    assert page.count("<h2>Drills and evals</h2>") == 1
    assert "<h3>Drills started in the week</h3>" in page
