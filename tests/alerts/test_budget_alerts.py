"""Budget alerts (engine.alerts.budget_conditions) on the store's exact spend and an injected
time: 80 % and 100 % fire at exactly those figures and not a nano-dollar below, the forecast
names the right time for a known rate, and the alerts resolve when the next period starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from helpers.spool import make_attempt, write_table

from engine.alerts.conditions import Context, evaluate
from engine.config.budget_rules import BUDGET_RULES
from engine.config.budgets import Budget
from engine.store.budgets import budget_statuses
from engine.store.db import open_store
from engine.store.ingest import ingest_spool
from engine.telemetry import columns as records

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # a Wednesday
BUDGET = Budget("support-monthly", "route", "support", "month", Decimal("500"))


@pytest.fixture
def con(tmp_path):
    con = open_store(tmp_path / "s.duckdb")
    yield con
    con.close()


def _spend(con, spool: Path, at: datetime, cost: str, n: int) -> None:
    attempt = make_attempt(request_id=f"r{n}", started_at=at, route="support")
    write_table(spool, f"f{n}", records.to_table([records.to_row(attempt, Decimal(cost), "t")]))
    ingest_spool(con, spool, now=at)


def _fired(con, tmp_path, now: datetime = NOW) -> dict[str, str]:
    ctx = Context(con, now, tmp_path / "spool", budgets=(BUDGET,))
    return {
        name: obs[0].summary
        for name, obs in evaluate(BUDGET_RULES, ctx).items()
        if obs and obs[0].subject == BUDGET.name
    }


def test_80_percent_fires_at_exactly_400_dollars_and_not_below(con, tmp_path):
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=30), "399.999999999", 1)
    assert "budget-80" not in _fired(con, tmp_path)
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=30), "0.000000001", 2)
    fired = _fired(con, tmp_path)
    assert set(fired) == {"budget-80"}
    assert fired["budget-80"].startswith(
        "support-monthly (route support): $400.00 of $500.00 spent this month (80 %); "
        "at the last 24 h's rate"
    )


def test_100_percent_fires_at_exactly_the_amount(con, tmp_path):
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=30), "499.999999999", 1)
    assert set(_fired(con, tmp_path)) == {"budget-80"}
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=30), "0.000000001", 2)
    fired = _fired(con, tmp_path)
    assert set(fired) == {"budget-80", "budget-100"}
    assert "(100 %); over by $0.00; no hard cap" in fired["budget-100"]


def test_the_forecast_extrapolates_the_last_24_hours_to_a_known_time(con, tmp_path):
    """$400 spent, $24 of it in the last 24 h: $1 an hour, so the $100 left lasts 100 h."""
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=30), "376", 1)
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=12), "24", 2)
    summary = _fired(con, tmp_path)["budget-80"]
    # NOW + 100 h = Sunday Dec 6, 14:00 UTC
    assert summary.endswith("at the last 24 h's rate it runs out Sunday Dec 6, 14:00 UTC")


def test_a_slow_rate_says_it_lasts_the_period_and_the_forecast_rule_stays_quiet(con, tmp_path):
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=12), "1", 1)
    ctx = Context(con, NOW, tmp_path / "spool", budgets=(BUDGET,))
    (forecast,) = [r for r in BUDGET_RULES if r.kind == "budget_forecast"]
    assert evaluate([forecast], ctx) == {"budget-forecast": []}
    (status,) = budget_statuses(con, None, (BUDGET,), NOW)
    assert status.forecast_text() == (
        "at the last 24 h's rate it does not run out before the period ends (Dec 31)"
    )
    assert status.runs_out() is None


def test_the_forecast_rule_fires_under_80_percent_when_the_rate_runs_it_out(con, tmp_path):
    """$48 in the last 24 h is $2 an hour: the $452 left lasts 226 h, before December ends."""
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=12), "48", 1)
    fired = _fired(con, tmp_path)
    assert set(fired) == {"budget-forecast"}
    assert fired["budget-forecast"].endswith("it runs out Friday Dec 11, 20:00 UTC")


def test_the_alerts_resolve_when_the_next_period_starts(con, tmp_path):
    _spend(con, tmp_path / "spool", NOW - timedelta(hours=30), "600", 1)
    assert set(_fired(con, tmp_path)) == {"budget-80", "budget-100"}
    january = datetime(2027, 1, 1, 0, 5, tzinfo=UTC)
    ctx = Context(con, january, tmp_path / "spool", budgets=(BUDGET,))
    results = evaluate(BUDGET_RULES, ctx)
    assert results == {"budget-80": [], "budget-100": [], "budget-forecast": []}
