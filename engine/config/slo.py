"""[[slo]]: an availability objective per route, and the burn-rate alerts that guard it.

    [[slo]]
    route = "support"          # a route of [routes]
    target = 0.999             # the share of counted requests answered, strictly in (0, 1)
    name = "support"           # optional (default: the route); names the alert rules
    min_requests = 20          # optional: a window with fewer counted requests stays quiet

Each objective gets the SRE Workbook's multi-window burn-rate alerts (`BURN_RATE_RULES`): a
burn rate is the window's failure share ÷ the error budget (1 − target), and a rule fires
only while both of its windows burn at or above its rate. The long window says the budget is
really going; the short one that it is still going now, so an alert resolves minutes after the
failures stop instead of hours. The figures are the weekly report's (engine.store.error_budget).

A route without [[slo]] has no burn-rate alert: `[reports] availability_target` stays the
report's yardstick only, so setting it never starts paging anyone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.config.alerting import AlertingConfig, Rule, Severity
from engine.config.checks import Fail, no_unknown, table_of, valid_name
from engine.config.objective import MIN_REQUESTS, Slo

__all__ = ["BURN_RATE_RULES", "MIN_REQUESTS", "Slo", "parse_slos", "slo_rules", "target_text"]

_SLO_KEYS = ("name", "route", "target", "min_requests")


@dataclass(frozen=True, slots=True)
class BurnRateRule:
    """One row of the multi-window table: both windows at or above `rate` fire it."""

    suffix: str
    severity: Severity
    rate: float  # × the error budget
    long_s: float
    short_s: float


# The SRE Workbook, "Alerting on SLOs", multi-window multi-burn-rate alerts.
BURN_RATE_RULES: tuple[BurnRateRule, ...] = (
    BurnRateRule("page-1h", "critical", 14.4, 3_600, 300),  # 2 % of 30 days' budget in 1 h
    BurnRateRule("page-6h", "critical", 6.0, 21_600, 1_800),  # 5 % in 6 h
    BurnRateRule("ticket-3d", "warning", 1.0, 259_200, 21_600),  # 10 % in 3 days
)


def slo_rules(slo: Slo) -> tuple[Rule, ...]:
    """The objective's alert rules: `slo-<name>-page-1h`, `-page-6h`, `-ticket-3d`."""
    return tuple(
        Rule(
            f"slo-{slo.name}-{row.suffix}",
            "burn_rate",
            row.severity,
            row.rate,
            row.long_s,
            min_requests=slo.min_requests,
            routes=(slo.route,),
            description=(
                f"{slo.route} burning its error budget (target {target_text(slo.target)}) at "
                f"{row.rate:g}× or faster over both {_span(row.long_s)} and {_span(row.short_s)}."
            ),
            short_window_s=row.short_s,
            slo=slo,
        )
        for row in BURN_RATE_RULES
    )


def parse_slos(raw: Any, fail: Fail, routes: Sequence[str]) -> tuple[Slo, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail("slo", "must be an array of tables, like [[slo]]")
    slos = tuple(_slo(i, entry, fail, routes) for i, entry in enumerate(raw))
    for key in ("route", "name"):
        seen = [getattr(s, key) for s in slos]
        for value in seen:
            if seen.count(value) > 1:
                raise fail("slo", f"two objectives have the {key} {value!r}")
    return slos


def with_slo_rules(alerting: AlertingConfig, slos: Sequence[Slo], fail: Fail) -> AlertingConfig:
    """`alerting` with every objective's burn-rate rules after its own."""
    derived = [rule for slo in slos for rule in slo_rules(slo)]
    for rule in derived:
        if alerting.rule(rule.name) is not None:
            raise fail("alerts", f"{rule.name!r} is the name of an [[slo]] alert rule")
    return replace(alerting, rules=(*alerting.rules, *derived))


def _slo(i: int, raw: Any, fail: Fail, routes: Sequence[str]) -> Slo:
    where = f"slo[{i}]"
    table = table_of(raw, where, fail)
    no_unknown(table, _SLO_KEYS, where, fail)
    route = table.get("route")
    if not isinstance(route, str) or not route:
        raise fail(f"{where}.route", "must name a route of [routes]")
    if route not in routes:
        raise fail(f"{where}.route", f"route {route!r} is not defined in [routes]")
    target = table.get("target")
    if (
        isinstance(target, bool)
        or not isinstance(target, int | float)
        or not math.isfinite(target)
        or not 0 < target < 1
    ):
        raise fail(f"{where}.target", "must be a share strictly between 0 and 1, like 0.999")
    name = table.get("name", route)
    if not isinstance(name, str) or not valid_name(name):
        raise fail(f"{where}.name", "must be a name of letters, digits, '.', '_' or '-'")
    least = table.get("min_requests", MIN_REQUESTS)
    if isinstance(least, bool) or not isinstance(least, int) or least < 1:
        raise fail(f"{where}.min_requests", "must be a whole number of requests, at least 1")
    return Slo(name, route, float(target), least)


def target_text(share: float) -> str:
    """0.999 → "99.9 %", 0.9995 → "99.95 %": an availability target with the digits it has."""
    return f"{100 * share:.4f}".rstrip("0").rstrip(".") + " %"


def _span(seconds: float) -> str:
    if seconds >= 86_400:
        return f"{seconds / 86_400:g} d"
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds / 60:g} min"
