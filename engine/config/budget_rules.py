"""The alert rules every [[budgets]] gets: 80 % (warning), 100 % (critical), and a forecast.

    budget-80         warning   the period's spend reached 80 % of the amount
    budget-100        critical  it reached the amount (with a hard cap: the gateway refuses)
    budget-forecast   warning   under 80 %, but at the last 24 h's rate it runs out before the
                                period ends (projected to 100 % or more of the amount)

One rule of each serves every budget; an alert's subject is the budget's name. The rules exist
only when [[budgets]] do, whatever `[alerting] builtin_rules` says (a budget is asked for by
name), and a rule of your own with the same name replaces one; a rule of kind `budget` in
[[alerts]] adds a threshold of your own (`threshold = 50`). Their conditions are in
engine.alerts.budget_conditions.
"""

from __future__ import annotations

from dataclasses import replace

from engine.config.alerting import AlertingConfig, Rule
from engine.config.budgets import ALERT_AT, Budget

__all__ = ["BUDGET_RULES", "with_budget_rules"]

BUDGET_RULES: tuple[Rule, ...] = (
    Rule("budget-80", "budget", "warning", 100 * ALERT_AT[0], 0,
         description="A budget's spend in its period reached 80 % of its amount."),
    Rule("budget-100", "budget", "critical", 100 * ALERT_AT[1], 0,
         description="A budget is spent: its period's spend reached its amount (with a hard cap "
         "the gateway refuses the scope's requests until the period ends)."),
    Rule("budget-forecast", "budget_forecast", "warning", 100, 0,
         description="A budget under 80 % that, at the last 24 h's rate, runs out before its "
         "period ends."),
)  # fmt: skip


def with_budget_rules(alerting: AlertingConfig, budgets: tuple[Budget, ...]) -> AlertingConfig:
    """`alerting` with the budgets, and their rules unless one of the same name is there."""
    if not budgets:
        return alerting
    names = {r.name for r in alerting.rules}
    rules = alerting.rules + tuple(r for r in BUDGET_RULES if r.name not in names)
    return replace(alerting, rules=rules, budgets=budgets)
