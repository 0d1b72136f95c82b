"""Error budgets: the one computation of availability against a target that the weekly report,
the burn-rate alerts and the Live page all use.

    counted = requests − request faults − abandoned     (the caller's doing is not ours)
    failed  = unavailable + broken streams              (no target answered)
    scored  = counted and failed, less what a fault drill made fail (an exercise, on purpose)
    burn rate     = (scored failed ÷ scored counted) ÷ (1 − target)
    budget burned = the period's burn rate; budget left = 1 − budget burned

Every figure is a sum of the rollups' additive columns (`COLUMNS`), so a week of minutes (the
alerts', the Live page's: engine.store.error_budget) and the same week of hours (the report's)
agree to the request. Pure arithmetic: the report, which the dashboard renders, uses it without
the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from decimal import Decimal

# Counts' fields → the rollup column each one sums.
COLUMNS: Mapping[str, str] = {
    "requests": "requests",
    "answered": "answered",
    "request_faults": "request_faults",
    "abandoned": "abandoned",
    "unavailable": "unavailable",
    "broken": "broken_streams",
    "drill_failed": "drill_failures",
}


@dataclass(frozen=True, slots=True)
class Counts:
    """A route's requests over a period, as availability counts them."""

    requests: int = 0
    answered: int = 0
    request_faults: int = 0
    abandoned: int = 0
    unavailable: int = 0  # every provider failed or was skipped, or the budget ran out
    broken: int = 0  # streams that failed after their first content event
    drill_failed: int = 0  # of those, the ones that failed while a drill held a target down

    @property
    def counted(self) -> int:
        return self.requests - self.request_faults - self.abandoned

    @property
    def failed(self) -> int:
        return self.unavailable + self.broken

    @property
    def scored_counted(self) -> int:
        return self.counted - self.drill_failed

    @property
    def scored_failed(self) -> int:
        return max(0, self.failed - self.drill_failed)

    def failure_share(self) -> float | None:
        """Scored failed ÷ scored counted; None when nothing was counted."""
        counted = self.scored_counted
        return self.scored_failed / counted if counted > 0 else None

    def burn_rate(self, target: float) -> float | None:
        """How many times faster than the target allows the budget was spent (1: exactly).
        In decimals: 144 of 10,000 against 99.9 % is 14.4× exactly, not 14.399999999999977×,
        so a rule fires at its very threshold."""
        counted = self.scored_counted
        if counted <= 0:
            return None
        budget = 1 - Decimal(str(target))
        return float(Decimal(self.scored_failed) / counted / budget)

    def budget_left(self, target: float) -> float | None:
        """The share of the period's budget not spent (below 0: overspent)."""
        rate = self.burn_rate(target)
        return None if rate is None else 1 - rate

    def failures_left(self, target: float, share_of_period: float) -> int | None:
        """How many more scored failures the period can take if traffic goes on as it has:
        the budget of the counted requests projected to the whole period, less those failed.
        `share_of_period`: the part of the period the counts cover (0 to 1]."""
        if self.scored_counted <= 0 or share_of_period <= 0:
            return None
        allowed = (1 - target) * self.scored_counted / min(1.0, share_of_period)
        return int(allowed) - self.scored_failed

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def window_label(seconds: float) -> str:
    """300 → "5m", 3600 → "1h", 259200 → "3d": a window as alerts and columns name it."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
