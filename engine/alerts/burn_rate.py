"""The burn_rate kind: an [[slo]]'s error budget spent too fast, over a long and a short window.

A rule (engine.config.slo derives three per objective) fires while both of its windows burn at
or above its rate, each with at least `min_requests` counted requests: the long window says
enough of the budget went to matter, the short one that it is still going, so the alert resolves
within the short window once the failures stop. The figures are the weekly report's
(engine.store.error_budget): one computation for the report, the alerts and the Live page.
"""

from __future__ import annotations

from datetime import timedelta

from engine.alerts.context import Context, Observation
from engine.config.alerting import Rule
from engine.config.budgets import period_bounds
from engine.config.slo import Slo, target_text
from engine.core.error_budget import Counts, window_label
from engine.store.error_budget import WEEK, Window, window_counts

_LONG, _SHORT = "long", "short"


def burn_rate(rule: Rule, ctx: Context) -> list[Observation]:
    slo = rule.slo
    if slo is None:  # only [[slo]] makes these rules; a hand-made one has nothing to guard
        return []
    start, _ = period_bounds("week", ctx.now)
    windows = (
        Window(_LONG, ctx.now - timedelta(seconds=rule.window_s), ctx.now),
        Window(_SHORT, ctx.now - timedelta(seconds=rule.short_window_s), ctx.now),
        Window(WEEK, start, ctx.now),
    )
    counts = window_counts(ctx.con, windows, (slo.route,))
    long, short = (counts.get((name, slo.route), Counts()) for name in (_LONG, _SHORT))
    long_rate, short_rate = _rate(long, slo, rule), _rate(short, slo, rule)
    if long_rate is None or short_rate is None:
        return []
    if long_rate < rule.threshold or short_rate < rule.threshold:
        return []
    week = counts.get((WEEK, slo.route), Counts())
    summary = _summary(rule, slo, (long_rate, short_rate), long, week)
    return [Observation(rule, slo.route, long_rate, summary)]


def _rate(counts: Counts, slo: Slo, rule: Rule) -> float | None:
    """The window's burn rate; None below the minimum volume (one failure in a handful of
    requests is no burn rate to page on)."""
    if counts.scored_counted < max(rule.min_requests, 1):
        return None
    return counts.burn_rate(slo.target)


def _summary(
    rule: Rule,
    slo: Slo,
    rates: tuple[float, float],
    long: Counts,
    week: Counts,
) -> str:
    """ "support: burning the error budget 16× (1 h) and 20× (5 min) against 99.9 %: 31 of
    2,400 requests failed in the last hour; 38 % of this week's budget left" """
    spans = (_span(rule.window_s), _span(rule.short_window_s))
    left = week.budget_left(slo.target)
    budget = (
        "this week's budget overspent"
        if left is not None and left < 0
        else f"{_percent(left)} of this week's budget left"
    )
    return (
        f"{slo.route}: burning the error budget {_times(rates[0])} ({spans[0]}) and "
        f"{_times(rates[1])} ({spans[1]}) against {target_text(slo.target)}: "
        f"{long.scored_failed:,} of {long.scored_counted:,} requests failed in the last "
        f"{_last(rule.window_s)}; {budget}"
    )


def _times(rate: float) -> str:
    return f"{rate:.1f}×" if rate < 10 else f"{rate:,.0f}×"


def _percent(share: float | None) -> str:
    return "all" if share is None else f"{100 * share:.0f} %"


def _span(seconds: float) -> str:
    label = window_label(seconds)
    return label.replace("m", " min").replace("h", " h").replace("d", " d")


def _last(seconds: float) -> str:
    """3600 → "hour", 21600 → "6 h", 259200 → "3 d"."""
    return "hour" if seconds == 3600 else _span(seconds)
