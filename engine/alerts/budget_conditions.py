"""The budget kinds: a [[budgets]]'s spend in its period against its amount (`budget`), and the
forecast that it runs out before the period ends (`budget_forecast`), one observation per budget
named by the budget.

The spend is the store's exact figure (engine.store.budgets, the one budgets.json publishes), so
a rule at 80 % fires at exactly 80.000 % of the amount and not a nano-dollar below. A new period
starts from nothing, so the alerts of the last one resolve when it begins. The forecast
extrapolates the last 24 h (the period so far when shorter) and names that window; it stays
quiet under an hour of period, too little to extrapolate, and from 80 %, where `budget` speaks.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from engine.alerts.context import Context, Observation
from engine.config.alerting import Rule
from engine.config.budgets import ALERT_AT
from engine.published.budgets import BudgetStatus
from engine.store.budgets import budget_statuses

__all__ = ["budget", "budget_forecast"]

MIN_FORECAST_WINDOW = timedelta(hours=1)


def budget(rule: Rule, ctx: Context) -> list[Observation]:
    """Budgets whose spend is at or above `rule.threshold` % of their amount."""
    threshold = Decimal(str(rule.threshold))
    return [
        _observation(rule, status)
        for status in _statuses(ctx)
        if status.spend_usd * 100 >= status.amount_usd * threshold
    ]


def budget_forecast(rule: Rule, ctx: Context) -> list[Observation]:
    """Budgets under the first alert share that, at the window's rate, reach `rule.threshold` %
    of their amount by the period's end."""
    threshold = Decimal(str(rule.threshold))
    fired = []
    for status in _statuses(ctx):
        if status.spend_usd >= status.amount_usd * Decimal(str(ALERT_AT[0])):
            continue
        if status.computed_at - status.rate_since < MIN_FORECAST_WINDOW:
            continue
        if status.projected_usd() * 100 >= status.amount_usd * threshold:
            fired.append(_observation(rule, status))
    return fired


def _statuses(ctx: Context) -> tuple[BudgetStatus, ...]:
    return budget_statuses(ctx.con, ctx.archive_dir, ctx.budgets, ctx.now)


def _observation(rule: Rule, status: BudgetStatus) -> Observation:
    value = float(status.spend_usd * 100 / status.amount_usd)
    return Observation(rule, status.name, value, status.summary(), status.spend_usd)
