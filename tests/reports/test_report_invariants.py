"""What every weekly report must hold, whatever its week: checked on the fixture week (as the
scheduler writes it the Monday after, and as a week to date) and on each week of the demo's
fortnight (a week whose data begins mid-week, a whole one, a week to date with a drill that
made requests fail). Through the files people get (HTML, Markdown, CSV), not only the figures.

- every part sums to its whole, as Decimals and as shown;
- every incident's top error is among the week's failure classes;
- every alert fired in the week is listed;
- dates read as the week; durations under a minute in seconds;
- no None, <NA>, nan, NaN, 0E-9 or -$0.00 anywhere;
- a week that is not over says "week to date" and compares per day;
- failures a drill caused are shown as the drill's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from helpers.fortnight import DAYS, END, WEEKS

from engine.published.read import PublishedData
from engine.reports import events, render
from engine.reports.content import WeekReport
from engine.reports.dates import moment, week_days
from engine.reports.summary import fallback_cost
from engine.reports.tables import tables
from engine.reports.week import build_week
from simulations.demo.history import PAST_INCIDENTS

pytestmark = pytest.mark.timeout(600)  # the fortnight takes a minute and a half to build

CASES = ["fixture week", "fixture week to date", *WEEKS]
FORBIDDEN = [r"\bNone\b", r"<NA>", r"\bnan\b", r"\bNaN\b", r"0E-9", r"-\$0\.00(?!\d)", r"\$-",
             r"\b0 min\b"]  # fmt: skip
NANO = Decimal("1e-9")
FIRED = "SELECT * FROM alerts WHERE fired_at >= $lo AND fired_at < $hi ORDER BY fired_at, alert_id"
AMOUNT = r"(saved|cost) (\$\d[\d,]*(?:\.\d+)?)"  # "saved $1,234.50", "cost $0.02"


@dataclass(frozen=True)
class Case:
    name: str
    report: WeekReport
    store: Path  # the scheduler's database: the independent account
    html: str
    markdown: str
    csv: dict[str, str]  # file stem → its text


@pytest.fixture(scope="module")
def fortnight_reports(fortnight) -> dict[str, WeekReport]:
    data = PublishedData(fortnight.paths.published)
    try:
        return {week: build_week(data, week) for week in WEEKS}
    finally:
        data.close()


@pytest.fixture(scope="module", params=CASES)
def case(request, tmp_path_factory) -> Case:
    if request.param.startswith("fixture week"):
        week = request.getfixturevalue("week")
        report = week.to_date if request.param.endswith("to date") else week.report
        store = week.paths.database
    else:
        report = request.getfixturevalue("fortnight_reports")[request.param]
        store = request.getfixturevalue("fortnight").paths.database
    folder = tmp_path_factory.mktemp("files")
    for stem, (_, frame) in render.csv_tables(report).items():
        frame.to_csv(folder / f"{stem}.csv", index=False)
    return Case(request.param, report, store, render.html(report), render.markdown(report),
                {p.stem: p.read_text() for p in folder.glob("*.csv")})  # fmt: skip


def _usd(shown: str) -> Decimal:
    """A dollar amount as shown ("-$1,234.50", "saved $0.02") back as a number."""
    sign = -1 if shown.startswith(("-", "saved")) else 1
    return sign * Decimal(re.sub(r"[^\d.]", "", shown))


def _store(case: Case, sql: str, params: dict | None = None) -> pd.DataFrame:
    with duckdb.connect(str(case.store), read_only=True) as con:
        return con.execute(sql, params or {}).df()


_DRILL_FAILURES = """
    WITH req AS (
        SELECT request_id, min(started_at) AS first_at, arg_max(route, attempt_number) AS route,
            bool_or(served AND outcome = 'success') AS answered,
            bool_or(served AND outcome = 'error') AS broken,
            bool_or(decision = 'fail_fast') AS fault,
            bool_or(outcome = 'cancelled' OR decision = 'cancelled') AS abandoned
        FROM attempts GROUP BY request_id
    )
    SELECT count(*) AS n FROM req
    WHERE route = $route AND first_at >= $lo AND first_at < $hi
      AND NOT answered AND (broken OR NOT (fault OR abandoned))
      AND EXISTS (SELECT 1 FROM drills d WHERE d.route = req.route
          AND (d.aborted_by_request = req.request_id OR (first_at >= d.started_at
               AND first_at < coalesce(d.ended_at, d.ends_at))))
"""


def _drill_failures(case: Case, route: str) -> int:
    """The route's requests in the report's period that failed while one of its drills was
    on, from the attempts themselves."""
    params = {"route": route, "lo": case.report.start, "hi": case.report.end}
    return int(_store(case, _DRILL_FAILURES, params)["n"].iloc[0])


# --- every part sums to its whole -----------------------------------------------------------


def test_requests_are_answered_failed_request_faults_or_abandoned(case):
    report = case.report
    for r in report.routes:
        assert r.requests == r.answered + r.failed + r.request_faults + r.abandoned, r
        assert r.drill_failed <= r.failed
    shown = tables(report)["availability"][1]
    for row in shown.to_dict("records"):
        assert row["requests"] == (row["answered"] + row["failed"] + row["request faults"]
                                   + row["abandoned"]), row  # fmt: skip
    total = shown.iloc[-1]
    assert total["route"] == "all routes"
    for column in ("requests", "answered", "failed", "failed in drills", "answered by a backup"):
        assert total[column] == shown.iloc[:-1][column].sum()


def test_costs_by_route_provider_and_model_add_up_to_the_spend_exactly_and_as_shown(case):
    report = case.report
    assert sum((r.cost_usd for r in report.routes), Decimal(0)) == report.total_cost
    shown = tables(report)
    for dimension, lines in report.cost_by.items():
        assert sum((line.cost_usd for line in lines), Decimal(0)) == report.total_cost
        assert sum((line.previous_usd for line in lines), Decimal(0)) == report.previous_cost
        frame = shown[f"cost_by_{dimension}"][1]
        assert frame.iloc[-1][dimension] == "all"
        for column in ("cost", "week before"):
            parts = sum((_usd(v) for v in frame[column].iloc[:-1]), Decimal(0))
            assert parts == _usd(frame[column].iloc[-1]), (dimension, column)
    routes = shown["availability"][1]
    assert sum((_usd(v) for v in routes["cost"].iloc[:-1]), Decimal(0)) == _usd(
        routes["cost"].iloc[-1]
    )
    raw = tables(report, raw=True)["cost_by_route"][1]
    assert sum(Decimal(v) for v in raw["cost"].iloc[:-1]) == Decimal(raw["cost"].iloc[-1])


def test_the_extra_cost_of_fallbacks_is_its_price_difference_cache_loss_and_rewarm(case):
    """Exactly, in the money table as shown, and in the sentence, where a saving is said."""
    report = case.report
    assert report.extra_cost == report.price_difference + report.cache_loss + report.rewarm
    money = tables(report)["money"][1].set_index("figure")["USD"]
    parts = [v for k, v in money.items() if k.startswith("  of which ")]
    assert len(parts) == 3
    assert sum((_usd(v) for v in parts), Decimal(0)) == _usd(money["extra cost of fallbacks"])
    sentence = fallback_cost(report)
    whole, said = sentence.split(": ", 1)
    amounts = [_usd(f"{verb} {amount}") for verb, amount in re.findall(AMOUNT, said)]
    assert len(amounts) == 3, sentence
    said_whole = re.search(AMOUNT, whole)
    total = _usd(" ".join(said_whole.groups())) if said_whole else Decimal(0)
    assert said_whole or whole.startswith("Fallbacks cost no more"), whole
    assert sum(amounts, Decimal(0)) == total, sentence
    if report.price_difference < 0:
        assert "lower prices saved" in sentence
    assert sentence in report.summary


def test_each_incidents_impact_and_extra_cost_add_up(case):
    for i in case.report.incidents.itertuples():
        assert i.requests_affected == i.answered_by_fallback + i.failed
        parts = sum(Decimal(v).quantize(NANO) for v in (i.price_difference_usd,
                    i.cache_loss_usd, i.rewarm_usd))  # fmt: skip
        assert abs(Decimal(i.extra_cost_usd).quantize(NANO) - parts) <= 2 * NANO
        assert i.routes or i.requests_affected == 0
    shown = tables(case.report)["incidents"][1]
    if len(shown):
        assert (shown["routes"] != "").all()


# --- what happened is consistent ------------------------------------------------------------


def test_every_incidents_top_error_is_among_the_weeks_failure_classes(case):
    failures = case.report.failures
    listed = {
        (f.provider, f.error_class, None if pd.isna(f.http_status) else int(f.http_status))
        for f in failures.itertuples()
    }
    shown = tables(case.report)["failures"][1]
    for i in case.report.incidents.itertuples():
        found = events.top_error(i.top_error)
        if found is None:
            continue
        assert (i.provider, found[0], found[1]) in listed, (i.top_error, listed)
        assert ((shown["provider"] == i.provider) & (shown["failure"] == found[0])).any()


def test_every_alert_fired_in_the_week_is_listed(case):
    report = case.report
    fired = _store(case, FIRED, {"lo": report.start, "hi": report.end})
    shown = tables(report)["alerts"][1]
    assert len(shown) == len(fired)
    expected = [(moment(a.fired_at), a.rule, a.subject) for a in fired.itertuples()]
    listed = list(zip(shown.get("fired (UTC)", []), shown.get("rule", []),
                      shown.get("subject", []), strict=True))  # fmt: skip
    assert listed == expected
    for alert_id in fired["alert_id"]:
        assert alert_id in case.csv["alerts"]
    if not len(fired):
        assert "No alert fired in the week." in case.markdown


def test_incidents_without_an_alert_are_said_to_have_raised_none(case):
    incidents = case.report.incidents
    quiet = int((incidents["alerts"] == "").sum()) if len(incidents) else 0
    text = " ".join(case.report.summary)
    if quiet:
        assert "alerts are evaluated live" in text
    if quiet and quiet < len(incidents):
        assert f"{quiet} of the {len(incidents)} incidents raised no alert" in text


# --- how it reads ---------------------------------------------------------------------------


def test_dates_read_as_the_week(case):
    report = case.report
    period = render.period(report)
    assert (
        period.split(" (UTC)")[0]
        .split(", data up to")[0]
        .endswith(
            week_days(report.start, report.end if report.coverage.over else report.coverage.until)
        )
    )
    first, last = _days_of(week_days(report.start, report.end))
    assert first == report.start.date() and last == (report.end - timedelta(days=1)).date()
    assert first.weekday() == 0 and last.weekday() == 6
    next_monday = f"{report.end:%Y-%m-%d}"
    for text in (case.markdown, _visible(case.html)):
        assert period in text
        assert next_monday not in text, "a week never reads as ending on the next Monday"


def _days_of(span: str) -> tuple:
    """ "Mon 30 Nov – Sun 6 Dec 2026" → its two dates."""
    left, right = span.split(" – ")
    end = datetime.strptime(right, "%a %d %b %Y").date()
    parts = left.split()
    fill = right.split()[len(parts) :]  # the month and year said once, on the right
    start = datetime.strptime(" ".join([*parts, *fill]), "%a %d %b %Y").date()
    return start, end


def test_no_missing_or_machine_value_reaches_a_person(case):
    for name, text in [("html", _visible(case.html)), ("markdown", case.markdown),
                       *case.csv.items()]:  # fmt: skip
        for pattern in FORBIDDEN:
            found = re.search(pattern, text)
            assert found is None, (
                name,
                pattern,
                text[max(0, found.start() - 80) : found.end() + 80],
            )


def _visible(page: str) -> str:
    """The HTML's text, without its scripts and styles (plotly.js holds "NaN", rightly)."""
    return re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S)


def test_a_week_not_over_says_week_to_date_and_compares_per_day(case):
    report = case.report
    money = tables(report)["money"][1]["figure"].tolist()
    change_columns = [c for c in tables(report)["cost_by_route"][1].columns if "change" in c]
    spend = report.headline.spend
    if report.coverage.over:
        assert "Week to date" not in case.markdown and "spend so far" not in money
    else:
        assert render.period(report).startswith("Week to date: ")
        assert "spend so far" in money
        assert spend.startswith("Spend so far: ")
    if report.coverage.whole and report.previous is not None and report.previous.whole:
        assert change_columns == ["change"]
    elif report.previous is not None:
        assert change_columns == ["change a day"]
        assert "a day" in spend or "too little data" in spend
        assert not re.search(r"(more|less) than the week before \(\$", spend)


def test_failures_a_drill_caused_are_shown_as_the_drills(case):
    report = case.report
    shown = tables(report)["availability"][1].set_index("route")
    for r in report.routes:
        caused = _drill_failures(case, r.route)
        assert r.drill_failed == caused
        assert shown.loc[r.route, "failed in drills"] == caused
        if caused:
            assert f"not counting the {caused} request" in report.headline.availability
    faults = tables(report)["failures"][1]
    drilled = faults[faults["failure"].str.startswith("drill")]
    assert (drilled["whose fault"] == "drill (an exercise, on purpose)").all()
    for incident in tables(report, raw=True)["incidents"][1].to_dict("records"):
        if incident["during drill"]:
            assert incident["during drill"] in case.markdown


def test_a_drill_shorter_than_a_minute_reads_in_seconds(fortnight_reports, fortnight):
    report = fortnight_reports["2026-W49"]
    [drill] = tables(report)["drills"][1].to_dict("records")
    lasted = (fortnight.drill.started_at, report.drills.iloc[0]["ended_at"])
    assert (lasted[1] - lasted[0]).total_seconds() < 60
    assert re.fullmatch(r"\d+(\.\d)? s", drill["duration"]), drill["duration"]
    [exact] = tables(report, raw=True)["drills"][1].to_dict("records")
    assert exact["failed"] >= 1 and drill["failed"] == f"{exact['failed']:,}", drill
    assert "its drills failed" in report.headline.availability


# --- incidents as they happened ---------------------------------------------------------------


FLAPPING = next(i for i in PAST_INCIDENTS if "rate=" in i.fault)  # 529 to 30 %, for 2 hours
OUTAGE_DAY = (END - timedelta(days=DAYS)).replace(hour=0, minute=0) + timedelta(days=FLAPPING.day)


def test_the_demos_two_hour_outage_failing_a_third_of_requests_is_one_incident(fortnight):
    """Sonnet answers 529 to 30 % of requests for two hours, at a few requests a minute.
    Between its faults it answers too few to have recovered: one incident, not a dozen."""
    with duckdb.connect(str(fortnight.paths.database), read_only=True) as con:
        rows = con.execute(
            "SELECT started_at, ended_at FROM incidents WHERE subject = $s "
            "AND started_at >= $lo AND started_at < $hi ORDER BY started_at",
            {
                "s": "claude/claude-sonnet-4-5",
                "lo": OUTAGE_DAY,
                "hi": OUTAGE_DAY + timedelta(days=1),
            },
        ).fetchall()
    [(started, ended)] = rows
    assert abs(started - (OUTAGE_DAY + timedelta(hours=FLAPPING.hour))) <= timedelta(minutes=10)
    assert ended - started >= timedelta(minutes=FLAPPING.minutes - 20), "not a fragment of it"
