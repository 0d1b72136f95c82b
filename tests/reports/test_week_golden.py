"""Golden tests of the weekly report's content: the fixture week (weeks.py: real chain traffic
across the Sunday-to-Monday boundary), and every figure of `build_week` checked against a
computation by hand from the attempts table and the store's event tables, with the definitions
of docs/metrics.md."""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest
from helpers.alert_harness import PRIMARY
from helpers.weeks import (
    BEFORE,
    DRILL_REPORT,
    DRILLS,
    END,
    EVAL_RESULTS,
    GPT,
    PRIMARY_TARGET,
    START,
    WEEK,
    FixtureWeek,
)

from engine.core.fault_families import describe
from engine.core.formats import MISSING
from engine.core.money import format_usd
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.published.publish import publish
from engine.published.read import PublishedData
from engine.reports import render
from engine.reports.content import CostLine, RouteWeek
from engine.reports.dates import duration, moment
from engine.reports.week import build_week
from engine.store.db import open_store

# The premium and cache loss multiply by the DOUBLE hit ratio and are rounded to nine decimals
# once a minute row: a few nano-dollars apart from exact arithmetic over the week (~2e-9 here).
ROUNDING = Decimal("1e-8")


@pytest.fixture(scope="module")
def requests(week: FixtureWeek) -> pd.DataFrame:
    """One row a request of both weeks, from the attempts (_requests)."""
    return _requests(week.attempts)


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
                "broken": broken,
                "unavailable": not (answered or fault or broken or abandoned),
            }
        )
    return pd.DataFrame(rows)


def _drill_failed(requests: pd.DataFrame) -> int:
    """The support route's requests that failed while one of its DRILLS was on."""
    failed = requests[requests["unavailable"] | requests["broken"]]
    during = [
        ((failed["first_at"] >= start) & (failed["first_at"] < end)).to_numpy()
        for _, start, end, _ in DRILLS
    ]
    return int(sum(bool(any(hits)) for hits in zip(*during, strict=True))) if len(failed) else 0


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
    return Decimal(value).quantize(Decimal("1e-9"))


# --- requests -------------------------------------------------------------------------------


def test_route_figures_count_requests_by_their_first_attempt_and_deciding_attempt(week, requests):
    """And the failures drills caused are the requests that failed (unavailable or broken)
    while one of the route's drills was on, in the week: whichever week the drill began in."""
    requests = _within(requests, "first_at", START, END)
    in_week = _within(week.attempts, "started_at", START, END)
    expected = []
    for route, rows in requests.groupby("route"):
        expected.append(
            RouteWeek(
                route=route,
                requests=len(rows),
                answered=int(rows["answered"].sum()),
                by_fallback=int(rows["by_fallback"].sum()),
                request_faults=int(rows["request_fault"].sum()),
                abandoned=int(rows["abandoned"].sum()),
                unavailable=int(rows["unavailable"].sum()),
                broken=int(rows["broken"].sum()),
                drill_failed=_drill_failed(rows),
                cost_usd=_cost(in_week[in_week["route"] == route]),
            )
        )
    assert week.report.routes == expected
    [support] = expected
    assert support.by_fallback > 25 and support.request_faults == 5 and support.unavailable > 5
    assert week.report.unavailable == support.unavailable
    counted = support.requests - support.request_faults - support.abandoned
    assert support.availability == support.answered / counted
    assert support.scored == support.answered / (counted - support.drill_failed)
    # computed in decimals (engine.core.error_budget): exact where floats are off by a bit
    assert support.burned(0.999) == pytest.approx((1 - support.scored) / (1 - 0.999), rel=1e-12)
    assert support.fallback_rate == support.by_fallback / support.requests


def test_a_request_skipped_by_every_target_counts_as_one_unavailable_request(week, requests):
    skipped = _within(week.attempts, "started_at", START, END)
    skipped = skipped[skipped["outcome"] == "skipped"]
    assert len(skipped) >= 1, "both breakers were open at once"
    assert skipped["request_id"].is_unique
    assert requests.set_index("request_id").loc[skipped["request_id"], "unavailable"].all()


def test_a_request_spanning_midnight_counts_in_the_week_of_its_first_attempt(week, requests):
    """Its primary hung from 23:59:48 until the reserve line, 20 s on; its backup answered
    after midnight (the budget's reserve kept for it). Its request figures go to the week
    before; the answer it got after midnight is spent in this week."""
    first = week.attempts.groupby("request_id")["started_at"].agg(["min", "max"])
    [spanning] = first[(first["min"] < START) & (first["max"] >= START)].index
    request = requests.set_index("request_id").loc[spanning]
    assert request["answered"] and request["by_fallback"]
    this = _within(requests, "first_at", START, END)
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
            rewarm += row.cache_write_tokens * (primary.cache_write - primary.cache_read)
    assert rewarm > 0, "the primary wrote its cache again after recovering"
    assert week.report.rewarm == rewarm


def test_no_model_is_unpriced(week):
    this = _within(week.attempts, "started_at", START, END)
    tokens = this[["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]]
    assert not (this["cost_usd"].isna() & (tokens.sum(axis=1) > 0)).any()
    assert week.report.unpriced.empty


def test_daily_rows_count_requests_by_day_of_first_attempt_and_attempt_cost_by_day(week, requests):
    requests = _within(requests, "first_at", START, END)
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
    assert set(counts) == {PRIMARY_TARGET, GPT}


def test_the_alerts_are_every_one_fired_in_the_week_oldest_first(week):
    assert (week.alerts["fired_at"] < START).any(), "an alert fired the week before"
    fired = _within(week.alerts, "fired_at", START, END).sort_values(["fired_at", "alert_id"])
    assert week.report.alerts["alert_id"].tolist() == fired["alert_id"].tolist()
    assert "fallback-rate-5m" in set(fired["rule"])


def test_each_incident_names_the_alerts_fired_about_it(week):
    """The alert on support that fired while the incident across midnight lasted is about it;
    none fired the week before is."""
    incidents = week.report.incidents
    alerts = week.report.alerts.set_index("alert_id")
    for incident in incidents.itertuples():
        for alert_id in [a for a in incident.alerts.split(", ") if a]:
            alert = alerts.loc[alert_id]
            assert alert["subject"] in {*incident.routes.split(", "), incident.target}
            ended = week.report.coverage.until if pd.isna(incident.ended_at) else incident.ended_at
            end = ended + timedelta(minutes=2)  # an ongoing one lasts to the data's time
            assert incident.started_at - timedelta(minutes=2) <= alert["fired_at"] <= end
    assert (incidents["alerts"] != "").any()


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


def test_the_headline_says_the_weeks_spend_and_its_worst_incident(week):
    """The week is whole as the scheduler reports it on Monday; the week before holds one
    hour of data (from Sunday 23:00), too little to compare with."""
    spend = _cost(_within(week.attempts, "started_at", START, END))
    previous = _cost(_within(week.attempts, "started_at", BEFORE, START))
    said = week.report.headline
    assert said.spend == (
        f"Spend: {format_usd(spend)} in 7 d of data; the week before, {format_usd(previous)} in "
        "1 h of data: too little data to compare."
    )
    incidents = _overlapping(week.incidents)
    worst = max(incidents.itertuples(), key=lambda i: (
        i.failed, i.requests_affected, i.ended_at - i.started_at))  # fmt: skip
    lasted = duration((worst.ended_at - worst.started_at).total_seconds())
    assert said.incident.startswith(
        f"Worst of {len(incidents)} incidents: {describe(worst.subject, worst.family)}, "
        f"{moment(worst.started_at)}, {lasted}: {worst.requests_affected} requests of "
        f"{worst.routes} affected, {worst.answered_by_fallback} answered by a backup, "
        f"{worst.failed} failed"
    ), said.incident
    assert worst.failed > 0


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
        "start (UTC)": "Mon 16 Nov 00:12", "route": "support", "target": PRIMARY_TARGET,
        "duration": "5 min", "status": "reported", "verdict": "passed", "requests": "25",
        "served by backups": "24", "failed": "1", "breaker opened after": "0.4 s",
        "cost difference": "cost $0.0022 more", "restored": "yes", "restored after": "1.2 s",
        "summary": DRILL_REPORT["summary"],
    }]  # fmt: skip
    [drill] = raw["drills"][1].to_dict("records")
    assert (drill["breaker opened after"], drill["cost difference"], drill["restored"],
            drill["restored after"]) == (0.4, "0.002200000", True, 1.2)  # fmt: skip
    assert shown["evals"][1].to_dict("records") == [
        {"route": "support", "target": PRIMARY_TARGET, "run (UTC)": "Mon 16 Nov 00:10",
         "cases file": "cases.toml", "cases": 3, "passed": 3, "pass rate": "100.0%",
         "minimum": "90%", "below minimum": "no", "p50 latency": "1,100 ms", "cost": "$0.0066"},
        {"route": "support", "target": GPT, "run (UTC)": "Mon 16 Nov 00:10",
         "cases file": "cases.toml", "cases": 3, "passed": 2, "pass rate": "66.7%",
         "minimum": "90%", "below minimum": "yes", "p50 latency": "550 ms", "cost": "$0.0013"},
    ]  # fmt: skip
    gpt = raw["evals"][1].set_index("target").loc[GPT]
    assert (gpt["pass rate"], gpt["below minimum"], gpt["cost"]) == (2 / 3, True, "0.001300000")
    assert (gpt["p50 latency (ms)"], drill["requests"]) == (550, 25), "numbers in the CSV"


def test_every_table_as_shown_holds_one_kind_of_value_a_column(week):
    """A column that can miss a value is text throughout ("529" beside "—" for a read timeout
    that got no status line), never numbers mixed with "—": the Reports page hands each frame
    to Arrow as it is, and Arrow refuses a mixed column."""
    shown = render.tables(week.report)
    for stem, (_, frame) in shown.items():
        try:
            pa.Table.from_pandas(frame)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise AssertionError(f"{stem}: {exc}") from None
    failures = shown["failures"][1]
    timeouts = failures[failures["failure"] == "read_timeout"]
    assert len(timeouts) and set(timeouts["HTTP status"]) == {MISSING}
    assert set(failures["HTTP status"]) - {MISSING} <= {str(s) for s in range(100, 600)}


def test_the_summary_names_the_drills_and_the_target_below_its_minimum(week):
    summary = week.report.summary
    assert "1 drill, 1 passed." in summary
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
        f"| Mon 16 Nov 00:12 | support | {PRIMARY_TARGET} | 5 min | reported | passed | 25 "
        "| 24 | 1 | 0.4 s | cost $0.0022 more | yes | 1.2 s |"
    ) in section
    page = render.html(week.report)
    assert page.count("<h2>Drills and evals</h2>") == 1
    assert "<h3>Drills started in the week</h3>" in page
