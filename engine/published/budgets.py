"""`published/budgets.json`: each [[budgets]]'s spend in its period, as the scheduler's store
knows it, and the forecast every reader tells from it: the alerts, the Costs page, the report.

    {"version": 1, "computed_at": ISO, "ingested": {"<process>": <highest spool seq>, ...},
     "budgets": [{"name", "scope", "value", "period", "period_start", "period_end",
                  "amount_usd", "spend_usd", "hard_cap",
                  "rate_since", "rate_spend_usd"}, ...]}

Amounts are exact decimal strings. `ingested` is what the gateway's hard cap needs to add only
what the store has not counted (a spool file with a seq at or below its process's is in
`spend_usd`). `rate_since` / `rate_spend_usd` are the trailing window the forecast extrapolates:
the last FORECAST_WINDOW, or the period so far when that is shorter. Imports nothing of the store
and no duckdb: the dashboard and the gateway read it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from engine.core.files import atomic_write
from engine.core.money import format_usd

__all__ = [
    "FORECAST_WINDOW",
    "BudgetStatus",
    "BudgetsSnapshot",
    "read_budgets",
    "write_budgets",
]

VERSION = 1
FORECAST_WINDOW = timedelta(hours=24)  # the trailing rate a forecast extrapolates
_PERIOD_WORDS = {"day": "today", "week": "this week", "month": "this month"}


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    name: str
    scope: str  # route | feature | key
    value: str
    period: str  # day | week | month
    period_start: datetime
    period_end: datetime
    amount_usd: Decimal
    spend_usd: Decimal  # every attempt of the scope with started_at in [start, end), so far
    hard_cap: bool
    rate_since: datetime  # the forecast's window: [rate_since, computed_at)
    rate_spend_usd: Decimal  # the spend in that window
    computed_at: datetime

    @property
    def subject(self) -> str:
        return f"{self.scope} {self.value}"

    @property
    def left_usd(self) -> Decimal:
        """amount − spent: negative once overspent (the page says "over by")."""
        return self.amount_usd - self.spend_usd

    @property
    def percent(self) -> int:
        """The share spent in whole percent, rounded down: 79.99 % reads 79, so a figure shown
        under a rule's threshold never fires it."""
        return math.floor(self.spend_usd * 100 / self.amount_usd)

    @property
    def spent(self) -> bool:
        return self.spend_usd >= self.amount_usd

    @property
    def refusing(self) -> bool:
        """Whether the gateway refuses the scope's requests on the store's figure alone (it
        adds what the store has not ingested yet, so it may refuse sooner)."""
        return self.hard_cap and self.spent

    def runs_out(self) -> datetime | None:
        """When, at the window's rate, the spend reaches the amount: always after computed_at;
        None when not before the period ends (or nothing is being spent). Already spent:
        computed_at."""
        if self.spent:
            return self.computed_at
        seconds = (self.computed_at - self.rate_since).total_seconds()
        if seconds <= 0 or self.rate_spend_usd <= 0:
            return None
        rate = self.rate_spend_usd / Decimal(seconds)  # dollars a second
        at = self.computed_at + timedelta(seconds=float(self.left_usd / rate))
        at = _minute_up(at)
        return at if at < self.period_end else None

    def projected_usd(self) -> Decimal:
        """The spend at the period's end, at the window's rate."""
        seconds = (self.computed_at - self.rate_since).total_seconds()
        if seconds <= 0:
            return self.spend_usd
        rest = (self.period_end - self.computed_at).total_seconds()
        return self.spend_usd + self.rate_spend_usd * Decimal(rest) / Decimal(seconds)

    def window_text(self) -> str:
        """The forecast's window in words: "the last 24 h", "the period so far"."""
        if self.computed_at - self.rate_since >= FORECAST_WINDOW:
            hours = FORECAST_WINDOW.total_seconds() / 3600
            return f"the last {hours:g} h"
        return "the period so far"

    def rate_text(self) -> str:
        """ "at the last 24 h's rate", "at the rate of the period so far" """
        window = self.window_text()
        return (
            f"at {window}'s rate" if window.startswith("the last") else f"at the rate of {window}"
        )

    def forecast_text(self) -> str:
        """ "at the last 24 h's rate it runs out Thursday Dec 3, 14:00 UTC", or "… not before
        the period ends (Dec 31)"; "spent" once it is."""
        if self.spent:
            return "spent"
        at = self.runs_out()
        rate = self.rate_text()
        if at is None:
            last_day = self.period_end - timedelta(days=1)
            return (
                f"{rate} it does not run out before the period ends ({last_day:%b} {last_day.day})"
            )
        return f"{rate} it runs out {at:%A %b} {at.day}, {at:%H:%M} UTC"

    def summary(self) -> str:
        """ "support-monthly (route support): $412.30 of $500.00 spent this month (82 %); at the
        last 24 h's rate it runs out Thursday Dec 3, 14:00 UTC" """
        head = (
            f"{self.name} ({self.subject}): {format_usd(self.spend_usd, 2)} of "
            f"{format_usd(self.amount_usd, 2)} spent {_PERIOD_WORDS[self.period]} "
            f"({self.percent} %)"
        )
        if not self.spent:
            return f"{head}; {self.forecast_text()}"
        reset = f"{self.period_end:%b} {self.period_end.day}, {self.period_end:%H:%M} UTC"
        over = format_usd(-self.left_usd, 2)
        if self.hard_cap:
            return f"{head}; over by {over}; the gateway refuses its requests until {reset}"
        return f"{head}; over by {over}; no hard cap, so requests still go through"


@dataclass(frozen=True, slots=True)
class BudgetsSnapshot:
    computed_at: datetime
    ingested: Mapping[str, int] = field(default_factory=dict)  # process → highest spool seq
    budgets: tuple[BudgetStatus, ...] = ()

    def covers(self, process: str, seq: int) -> bool:
        """Whether spool file `seq` of `process` is in the spend figures (ingested)."""
        return seq <= self.ingested.get(process, -1)

    def stored_spend(self, name: str, period_start: datetime) -> Decimal:
        """Budget `name`'s spend in the store for the period starting `period_start` ($0 for
        another period, or a budget the snapshot does not have)."""
        for status in self.budgets:
            if status.name == name and status.period_start == period_start:
                return status.spend_usd
        return Decimal(0)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": VERSION,
                "computed_at": self.computed_at.isoformat(),
                "ingested": dict(sorted(self.ingested.items())),
                "budgets": [_status_json(s) for s in self.budgets],
            },
            indent=1,
        )

    @classmethod
    def parse(cls, raw: Any) -> BudgetsSnapshot:
        """ValueError, KeyError or TypeError when `raw` is not a version 1 budgets.json."""
        if raw.get("version") != VERSION:
            raise ValueError(f"unknown budgets snapshot version {raw.get('version')!r}")
        at = datetime.fromisoformat(raw["computed_at"])
        ingested = {str(p): int(seq) for p, seq in raw["ingested"].items()}
        return cls(at, ingested, tuple(_status(b, at) for b in raw["budgets"]))


def write_budgets(path: Path, snapshot: BudgetsSnapshot) -> None:
    atomic_write(path, snapshot.to_json(), durable=False)


def read_budgets(path: Path) -> BudgetsSnapshot | None:
    """The snapshot at `path`; None when there is none yet, or it cannot be read."""
    try:
        return BudgetsSnapshot.parse(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _status_json(s: BudgetStatus) -> dict[str, Any]:
    return {
        "name": s.name,
        "scope": s.scope,
        "value": s.value,
        "period": s.period,
        "period_start": s.period_start.isoformat(),
        "period_end": s.period_end.isoformat(),
        "amount_usd": str(s.amount_usd),
        "spend_usd": str(s.spend_usd),
        "hard_cap": s.hard_cap,
        "rate_since": s.rate_since.isoformat(),
        "rate_spend_usd": str(s.rate_spend_usd),
    }


def _status(b: Mapping[str, Any], at: datetime) -> BudgetStatus:
    return BudgetStatus(
        str(b["name"]),
        str(b["scope"]),
        str(b["value"]),
        str(b["period"]),
        datetime.fromisoformat(b["period_start"]),
        datetime.fromisoformat(b["period_end"]),
        Decimal(b["amount_usd"]),
        Decimal(b["spend_usd"]),
        bool(b["hard_cap"]),
        # The forecast's window is an addition to the gateway's contract: a snapshot without
        # it reads as "no rate measured" (no forecast), never as an unreadable one.
        datetime.fromisoformat(b["rate_since"]) if "rate_since" in b else at,
        Decimal(b.get("rate_spend_usd", 0)),
        at,
    )


def _minute_up(at: datetime) -> datetime:
    floor = at.replace(second=0, microsecond=0)
    return floor if floor == at else floor + timedelta(minutes=1)
