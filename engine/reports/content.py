"""The weekly report as values: what engine.reports.week computes and every renderer (HTML,
text, the dashboard's Reports page, the chat headline) reads. No computation beyond the few
figures a report derives from its own parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pandas as pd

from engine.core.error_budget import COLUMNS as BUDGET_COLUMNS
from engine.core.error_budget import Counts

AVAILABILITY_TARGET = 0.999
NANO = Decimal("1e-9")  # the scale of the DECIMAL(18,9) money columns
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY_S = 86_400.0
MIN_COMPARED = timedelta(days=1)  # less data than this in either week: not compared


@dataclass(frozen=True, slots=True)
class RouteWeek:
    route: str
    requests: int
    answered: int
    by_fallback: int
    request_faults: int
    abandoned: int
    unavailable: int  # every provider failed or was skipped, or the budget ran out
    broken: int  # streams that failed after their first content event
    drill_failed: int  # of the failed, those that failed while a drill held a target down
    cost_usd: Decimal

    @property
    def counts(self) -> Counts:
        """The week's figures as the error budget counts them (engine.store.error_budget: the
        burn-rate alerts and the Live page count the same way)."""
        return Counts(**{name: getattr(self, name) for name in BUDGET_COLUMNS})

    @property
    def counted(self) -> int:
        """The requests availability counts: request faults and abandoned requests aside."""
        return self.counts.counted

    @property
    def failed(self) -> int:
        """Requests no target answered: unavailable, or a stream that broke (with the answered
        ones, the counted: tests/reports/test_report_invariants.py)."""
        return self.counts.failed

    @property
    def availability(self) -> float | None:
        """answered ÷ (requests − request faults − abandoned), drills included."""
        return self.answered / self.counted if self.counted else None

    @property
    def scored(self) -> float | None:
        """Availability with the failures a drill caused aside: what the target is met by."""
        share = self.counts.failure_share()
        return None if share is None else 1 - share

    def burned(self, target: float) -> float | None:
        """The share of the error budget (1 − target) the failures drills did not cause used."""
        return self.counts.burn_rate(target)

    @property
    def fallback_rate(self) -> float | None:
        return self.by_fallback / self.requests if self.requests else None


@dataclass(frozen=True, slots=True)
class CostLine:
    name: str
    cost_usd: Decimal
    previous_usd: Decimal


@dataclass(frozen=True, slots=True)
class Coverage:
    """The part of a week [week_start, week_end) the data covers: [start, until)."""

    week_start: datetime
    week_end: datetime
    start: datetime
    until: datetime

    @property
    def days(self) -> float:
        return max(0.0, (self.until - self.start).total_seconds() / DAY_S)

    @property
    def whole(self) -> bool:
        return self.start <= self.week_start and self.until >= self.week_end

    @property
    def over(self) -> bool:
        """The week has ended (by the data's time): not a week to date."""
        return self.until >= self.week_end


@dataclass
class WeekReport:
    week: str  # "2026-W47"
    start: datetime
    end: datetime
    target: float
    coverage: Coverage  # of this week
    previous: Coverage | None  # of the week before; None when the data holds none of it
    routes: list[RouteWeek]
    total_cost: Decimal
    previous_cost: Decimal
    cost_by: dict[str, list[CostLine]]  # "route" / "provider" / "model" → lines, costliest first
    fallback_premium: Decimal
    cache_loss: Decimal
    price_difference: Decimal
    rewarm: Decimal
    wasted: Decimal
    incidents: pd.DataFrame  # with `alerts`: the alerts fired about each ("" for none)
    failures: pd.DataFrame  # provider, error_class, fault_kind, http_status, attempts
    breaker_openings: pd.DataFrame  # target, openings
    alerts: pd.DataFrame  # every alert fired in the week, oldest first
    account_faults: pd.DataFrame  # target, attempts: keys or accounts refused
    unpriced: pd.DataFrame  # target, attempts
    daily: pd.DataFrame  # day, route, requests, answered, counted, cost_usd (for charts)
    drills: pd.DataFrame  # those started in the week, oldest first, with their report's figures
    evals: pd.DataFrame  # per route and target: its latest eval run of the week (eval_scores)
    primaries: dict[str, str]  # route → its primary target
    summary: list[str] = field(default_factory=list)  # "what changed" (engine.reports.summary)
    headline: Headline | None = None  # for a manager (engine.reports.headline)
    # route → its [[slo]] target, as the scheduler publishes them (slo_status); a route
    # without one is measured against `target`, [reports] availability_target.
    targets: dict[str, float] = field(default_factory=dict)

    def target_of(self, route: str) -> float:
        return self.targets.get(route, self.target)

    @property
    def unavailable(self) -> int:
        return sum(r.unavailable for r in self.routes)

    @property
    def extra_cost(self) -> Decimal:
        """What fallbacks cost beyond the primaries: price difference + cache loss + re-warm."""
        return self.fallback_premium + self.rewarm

    def change(self, cost: Decimal, previous: Decimal) -> float | None:
        """`cost` against `previous`, as a fraction: in total when both weeks are whole, per
        day of data otherwise; None when the week before cost nothing or either week has less
        than a day of data."""
        if self.previous is None or not previous:
            return None
        if self.coverage.whole and self.previous.whole:
            return float((cost - previous) / previous)
        if min(self.coverage.days, self.previous.days) < MIN_COMPARED.total_seconds() / DAY_S:
            return None
        per_day = float(cost) / self.coverage.days
        return per_day / (float(previous) / self.previous.days) - 1


@dataclass(frozen=True, slots=True)
class Headline:
    availability: str
    incident: str
    spend: str
    look_at: list[str]

    def sentences(self) -> list[str]:
        return [self.availability, self.incident, self.spend]
