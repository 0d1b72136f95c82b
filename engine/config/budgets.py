"""[[budgets]]: how much a route, a feature or a gateway key may spend in a day, week or month.

    [[budgets]]
    name = "support-monthly"
    route = "support"          # the scope: exactly one of route, feature (x-switchover-feature)
                               # or key (the label of a gateway key in SWITCHOVER_GATEWAY_KEYS)
    period = "month"           # day | week (from Monday) | month; UTC
    amount_usd = 500
    hard_cap = false           # true: the gateway refuses the scope's requests once it is spent

Spend is every priced attempt of the scope in the period, failed ones included (a provider bills
a prompt it read). The scheduler computes it from the store (engine.store.budgets) and alerts at
80 % and 100 % with a forecast; with a hard cap the gateway adds what the store has not ingested
yet (engine.gateway.budget_guard). Periods are calendar periods in UTC, one definition for both
sides: `period_bounds`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from engine.config.checks import Fail, no_unknown, table_of

Period = Literal["day", "week", "month"]
PERIODS: tuple[Period, ...] = ("day", "week", "month")
ScopeKind = Literal["route", "feature", "key"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("route", "feature", "key")
_BUDGET_KEYS = ("name", "route", "feature", "key", "period", "amount_usd", "hard_cap")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ALERT_AT = (0.8, 1.0)  # the shares of a budget at which it alerts


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    scope: ScopeKind
    value: str  # the route's name, the feature header's value, or the gateway key's label
    period: Period
    amount_usd: Decimal
    hard_cap: bool = False

    @property
    def subject(self) -> str:
        """How alerts and pages name the scope: "route support", "feature triage", "key team-a"."""
        return f"{self.scope} {self.value}"

    def covers(self, route: str, feature: str | None, key_label: str | None) -> bool:
        """Whether a request of `route`, with that feature header and gateway key label, is in
        this budget's scope."""
        return {"route": route, "feature": feature, "key": key_label}[self.scope] == self.value

    def bounds(self, now: datetime) -> tuple[datetime, datetime]:
        return period_bounds(self.period, now)


def period_bounds(period: Period, now: datetime) -> tuple[datetime, datetime]:
    """The calendar period holding `now`, in UTC: [start, end)."""
    now = now.astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day, day + timedelta(days=1)
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    start = day.replace(day=1)
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start, end


def parse_budgets(raw: Any, fail: Fail, routes: tuple[str, ...]) -> tuple[Budget, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise fail("budgets", "must be an array of tables, like [[budgets]]")
    budgets = tuple(_budget(i, entry, fail, routes) for i, entry in enumerate(raw))
    names = [b.name for b in budgets]
    for name in names:
        if names.count(name) > 1:
            raise fail("budgets", f"two budgets are named {name!r}")
    return budgets


def _budget(i: int, raw: Any, fail: Fail, routes: tuple[str, ...]) -> Budget:
    where = f"budgets[{i}]"
    table = table_of(raw, where, fail)
    no_unknown(table, _BUDGET_KEYS, where, fail)
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise fail(f"{where}.name", "must be a name of letters, digits, '.', '_' or '-'")
    scopes = [kind for kind in SCOPE_KINDS if kind in table]
    if len(scopes) != 1:
        raise fail(where, "give exactly one scope: route, feature or key")
    scope = scopes[0]
    value = table[scope]
    if not isinstance(value, str) or not value:
        raise fail(f"{where}.{scope}", "must be a non-empty string")
    if scope == "route" and routes and value not in routes:
        raise fail(f"{where}.route", f"route {value!r} is not defined in [routes]")
    period = table.get("period", "month")
    if period not in PERIODS:
        raise fail(f"{where}.period", f"must be day, week or month (got {period!r})")
    amount = table.get("amount_usd")
    if (
        isinstance(amount, bool)
        or not isinstance(amount, int | float)
        or not math.isfinite(amount)
        or amount <= 0
    ):
        raise fail(f"{where}.amount_usd", "must be a number of US dollars above 0")
    hard_cap = table.get("hard_cap", False)
    if not isinstance(hard_cap, bool):
        raise fail(f"{where}.hard_cap", "must be true or false")
    return Budget(name, scope, value, period, Decimal(str(amount)), hard_cap)
