"""Burn-rate alerts of an [[slo]], on a virtual clock: each rule of the multi-window table fires
exactly at its rate in both windows, never on one window alone or below the minimum volume,
resolves when its short window recovers; an outage through the fake providers pages; and the
Live page's budget is the weekly report's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.alert_harness import World, config
from helpers.store_rows import rollup

from engine.alerts.conditions import Context, evaluate
from engine.alerts.watch import Watch
from engine.config import parse_config
from engine.config.alerting import AlertingConfig
from engine.config.slo import BURN_RATE_RULES, Slo, slo_rules
from engine.core.paths import DataPaths
from engine.published.read import PublishedData
from engine.reports.week import build_week
from engine.store.db import open_store

NOW = datetime(2026, 11, 25, 12, 0, 30, tzinfo=UTC)  # a Wednesday
SLO = Slo("support", "support", 0.999)
RULES = {row.suffix: rule for row, rule in zip(BURN_RATE_RULES, slo_rules(SLO), strict=True)}
VOLUME = 10_000  # requests in each of the two minutes a test writes: 0.01 % a failure


@pytest.fixture
def con(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    yield con
    con.close()


def _minute(ago: float, now: datetime = NOW) -> datetime:
    return now.replace(second=0) - timedelta(minutes=ago)


def _failures(rate: float) -> int:
    """Failures of VOLUME requests that burn a 99.9 % budget at `rate`."""
    return round(rate * VOLUME * (1 - SLO.target))


def _traffic(con, ago: float, failed: int, requests: int = VOLUME, **more: int) -> None:
    rollup(con, _minute(ago), requests=requests, answered=requests - failed, unavailable=failed,
           **more)  # fmt: skip


def _two_windows(con, suffix: str, short_rate: float, long_only_rate: float) -> None:
    """One minute inside both windows of the rule, one inside its long window only."""
    row = next(r for r in BURN_RATE_RULES if r.suffix == suffix)
    _traffic(con, 0, _failures(short_rate))
    _traffic(con, row.short_s / 60 + 5, _failures(long_only_rate))


def _fired(con, suffix: str, now: datetime = NOW) -> list:
    rule = RULES[suffix]
    return evaluate([rule], Context(con, now, Path("no-spool")))[rule.name]


@pytest.mark.parametrize("suffix", [row.suffix for row in BURN_RATE_RULES])
def test_a_rule_fires_at_exactly_its_burn_rate_in_both_windows(con, suffix):
    rate = RULES[suffix].threshold
    _two_windows(con, suffix, rate, rate)
    [obs] = _fired(con, suffix)
    assert obs.subject == "support" and obs.value == pytest.approx(rate)
    assert obs.rule.severity == ("warning" if suffix == "ticket-3d" else "critical")


@pytest.mark.parametrize("suffix", [row.suffix for row in BURN_RATE_RULES])
@pytest.mark.parametrize("window", ["short", "long"])
def test_a_rule_stays_quiet_just_below_its_rate_in_either_window(con, suffix, window):
    rate = RULES[suffix].threshold
    below = rate - 0.1
    if window == "short":  # the short window below; the long one still at the rate
        _two_windows(con, suffix, below, rate + 0.1)
    else:  # both minutes at the rate but the long window's whole below it
        _two_windows(con, suffix, rate, rate - 0.2)
    assert _fired(con, suffix) == []


@pytest.mark.parametrize("suffix", [row.suffix for row in BURN_RATE_RULES])
def test_a_long_window_over_its_rate_does_not_fire_once_the_short_window_is_clean(con, suffix):
    """The reset: the failures are over, so the long window's burn is history, not a page."""
    _two_windows(con, suffix, 0, RULES[suffix].threshold * 4)
    assert _fired(con, suffix) == []


def test_a_window_below_the_minimum_volume_stays_quiet(con):
    """One failure in 19 requests burns 52× a 99.9 % budget; it is no evidence yet."""
    _traffic(con, 0, 1, requests=SLO.min_requests - 1)
    assert _fired(con, "page-1h") == []
    _traffic(con, 1, 0, requests=1)
    [obs] = _fired(con, "page-1h")
    assert obs.value == pytest.approx(1 / 20 / 0.001)


def test_failures_a_drill_caused_burn_no_budget(con):
    failed = _failures(20)
    _traffic(con, 0, failed, drill_failures=failed)
    _traffic(con, 10, failed, drill_failures=failed)
    assert _fired(con, "page-1h") == []


def test_request_faults_and_abandoned_requests_are_not_counted(con):
    """144 of 10,000 counted failed (14.4×); the caller's bad requests and the ones it left
    are neither failures nor counted."""
    _traffic(con, 0, 144, requests=10_000 + 500, request_faults=300, abandoned=200)
    [obs] = _fired(con, "page-1h")
    assert obs.value == pytest.approx(14.4)


def test_the_summary_says_both_burn_rates_the_target_the_requests_and_the_week_left(con):
    _traffic(con, 0, 20, requests=1_000)  # 5 min: 20 of 1,000 failed, 20×
    _traffic(con, 30, 15, requests=1_400)  # the hour: 35 of 2,400, 14.6×
    [obs] = _fired(con, "page-1h")
    assert obs.summary == (
        "support: burning the error budget 15× (1 h) and 20× (5 min) against 99.9 %: 35 of "
        "2,400 requests failed in the last hour; this week's budget overspent"
    )


def test_the_summary_says_how_much_of_this_weeks_budget_is_left(con):
    monday = datetime(2026, 11, 23, tzinfo=UTC)
    for day in range(2):  # Monday and Tuesday: 100,000 requests, 10 failed
        rollup(con, monday + timedelta(days=day, hours=9), requests=50_000, answered=49_995,
               unavailable=5)  # fmt: skip
    _traffic(con, 0, 2, requests=100)  # now: 2 of 100 failed, 20×
    [obs] = _fired(con, "page-1h")
    # the week: 12 failed of 100,100 counted against a budget of 100.1: 88 % left
    assert obs.summary.endswith("2 of 100 requests failed in the last hour; 88 % of this week's "
                                "budget left")  # fmt: skip


def test_the_page_resolves_when_the_short_window_recovers(tmp_path):
    paths = DataPaths(tmp_path / "data")
    watch = Watch(AlertingConfig(rules=slo_rules(SLO)), paths)
    con = open_store(tmp_path / "s.duckdb")
    try:
        _traffic(con, 0, 200)  # 20× in both windows
        watch.run(con, NOW)
        assert set(_states(con).values()) == {"firing"} and len(_states(con)) == 3
        later = NOW + timedelta(minutes=6)  # the failing minute has left the 5 min window
        rollup(con, _minute(0, later), requests=1_000, answered=1_000)
        watch.run(con, later)
        assert _states(con) == {
            "slo-support-page-1h": "resolved",  # its 5 min clean: resolved, an hour early
            "slo-support-page-6h": "firing",  # its 30 min still hold the failures
            "slo-support-ticket-3d": "firing",
        }
    finally:
        watch.close()
        con.close()


def _states(con) -> dict[str, str]:
    return dict(con.execute("SELECT rule, state FROM alerts ORDER BY rule").fetchall())


def _world(tmp_path, target: float = 0.999) -> World:
    data = config([], [])
    data["slo"] = [{"route": "support", "target": target}]
    return World(tmp_path, data, per_minute=10)


def test_an_outage_of_every_provider_pages_through_the_slo(tmp_path):
    """Sonnet and GPT-4.1 mini both 529 for 4 minutes: the support route's requests fail, the
    scheduler's cycle measures the burn on its virtual clock and pages."""
    world = _world(tmp_path)
    try:
        world.minutes(3)
        assert _firing(world) == []
        world.primary_fails("overloaded", minutes=4)
        world.fails("gpt-4.1-mini", "overloaded", minutes=4)
        world.minutes(3)
        assert world.failed_requests >= 20
        assert "slo-support-page-1h" in _firing(world)
        [(summary,)] = world.query("SELECT summary FROM alerts WHERE rule = 'slo-support-page-1h'")
        assert summary.startswith("support: burning the error budget ")
        assert "against 99.9 %" in summary
    finally:
        world.close()


def _firing(world: World) -> list[str]:
    rows = world.query("SELECT rule FROM alerts WHERE state = 'firing' ORDER BY rule")
    return [rule for (rule,) in rows]


def test_the_live_snapshot_and_the_weekly_report_agree_on_the_budget_left(tmp_path):
    """Known traffic in a week, a few requests failed: the budget the Live page reads
    (slo_status) is the one the report burns, against the [[slo]] target, not [reports]'."""
    world = _world(tmp_path, target=0.99)
    try:
        world.minutes(4)
        world.primary_fails("overloaded", minutes=1)
        world.fails("gpt-4.1-mini", "overloaded", minutes=1)
        world.minutes(3)
        published = PublishedData(world.paths.published)
        try:
            [status] = published.query("slo_status").itertuples()
            week = world.now.strftime("%G-W%V")
            report = build_week(published, week, 0.999)
        finally:
            published.close()
    finally:
        world.close()
    [support] = report.routes
    assert report.target_of("support") == status.target == 0.99
    assert support.failed > 0 and status.failed == support.failed - support.drill_failed
    assert status.counted == support.counted - support.drill_failed
    assert status.budget_left == pytest.approx(1 - support.burned(0.99), abs=1e-12)
    assert report.headline.availability.startswith("Availability against the 99.0% target")


def test_a_route_without_an_slo_has_no_burn_rate_rule():
    """[reports] availability_target measures the report; it never starts paging anyone."""
    parsed = parse_config({**config([], None), "reports": {"availability_target": 0.99}})
    assert not [r for r in parsed.alerting.rules if r.kind == "burn_rate"]
