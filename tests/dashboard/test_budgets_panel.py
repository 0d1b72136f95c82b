"""The Costs page's budgets: each budget's figures from published/budgets.json, adding up as
shown (left = amount − spent), a spent hard cap said as refusing, nothing when none exist."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from helpers.dashboard_pages import dollars, open_page, texts

from dashboard.budgets_panel import budget_rows
from engine.config.budgets import period_bounds
from engine.core.paths import DataPaths
from engine.published.budgets import BudgetsSnapshot, BudgetStatus, write_budgets

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def status(name: str, amount: str, spend: str, *, hard_cap: bool = False) -> BudgetStatus:
    start, end = period_bounds("month", NOW)
    return BudgetStatus(
        name=name, scope="route", value="support", period="month", period_start=start,
        period_end=end, amount_usd=Decimal(amount), spend_usd=Decimal(spend), hard_cap=hard_cap,
        rate_since=NOW - timedelta(hours=24), rate_spend_usd=Decimal("10"), computed_at=NOW,
    )  # fmt: skip


SNAPSHOT = BudgetsSnapshot(
    computed_at=NOW,
    budgets=(
        status("support-monthly", "500", "412.304"),
        status("triage-cap", "20", "20.75", hard_cap=True),
    ),
)


def test_each_budget_left_is_its_amount_less_its_spend_as_shown():
    rows = budget_rows(SNAPSHOT)
    for row in rows.to_dict("records"):
        spent, amount = dollars(row["spent"]), dollars(row["amount"])
        left = row["left"]
        shown = (
            -dollars(left.removeprefix("over by ")) if left.startswith("over by") else dollars(left)
        )
        assert shown == amount - spent, row
    first, second = rows.to_dict("records")
    assert (first["spent"], first["left"], first["used"]) == ("$412.30", "$87.70", "82 %")
    assert first["period"] == "month Dec 01 – Dec 31 (UTC)"
    # $87.696 left at $10 a day: 8.77 days on, rounded up to the minute.
    assert "runs out Friday Dec 11, 04:29 UTC" in first["forecast"]
    assert (second["left"], second["cap"], second["forecast"]) == (
        "over by $0.75", "refusing requests", "spent",
    )  # fmt: skip
    for text in rows.astype(str).to_numpy().ravel():
        assert not any(bad in text for bad in ("None", "nan", "<NA>", "E-"))


def test_the_costs_page_shows_the_budgets_and_a_refusing_cap(app_env):
    paths, _, _ = app_env
    path = DataPaths(paths.root).budgets
    write_budgets(path, SNAPSHOT)
    try:
        at = open_page("costs")
    finally:  # the dataset is shared by the other pages' tests
        path.unlink()
    assert "Budgets" in [h.value for h in at.subheader]
    tables = [t.value for t in at.dataframe]
    [budgets] = [t for t in tables if "budget" in t.columns]
    assert list(budgets["budget"]) == ["support-monthly", "triage-cap"]
    assert "The gateway refuses requests of: triage-cap" in texts(at)
    assert "own calendar period" in texts(at)


def test_without_budgets_the_costs_page_has_no_budgets_section(app_env):
    at = open_page("costs")
    assert "Budgets" not in [h.value for h in at.subheader]
