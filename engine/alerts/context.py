"""What an alert condition sees and says: the store at a moment, and an observation that fires.
Shared by the rule kinds (engine.alerts.conditions, engine.alerts.telemetry_conditions)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb

from engine.config.alerting import Rule
from engine.config.budgets import Budget

# A process that recorded nothing for this long is gone (restarted, scaled down): its breakers
# went with it and no longer count as open.
PROCESS_GONE_AFTER = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class Observation:
    rule: Rule
    subject: str  # a route, target or provider; "all routes"; "spool"; "target (KEY_ENV)"
    value: float  # in rule.unit
    summary: str  # one line a person acts on, with the numbers
    cost_usd: Decimal | None = None  # what the condition cost in its window, where it has one
    # Observations of one rule with the same group that fire in one pass are told in one
    # notification (the targets that share a broken key); "" for none.
    group: str = ""
    about: tuple[str, ...] = ()  # the routes and targets it concerns, when not just its subject

    @property
    def names(self) -> tuple[str, ...]:
        """The routes and targets this observation is about (a drill on one of them marks it)."""
        return self.about or (self.subject,)


@dataclass(frozen=True, slots=True)
class Context:
    con: duckdb.DuckDBPyConnection
    now: datetime
    spool_dir: Path
    wall: Callable[[], float] = time.time  # file ages are measured against the real clock
    key_envs: Mapping[str, str | None] = field(default_factory=dict)  # provider → api_key_env
    budgets: tuple[Budget, ...] = ()  # [[budgets]], for the budget kinds
    archive_dir: Path | None = None  # archived days (a budget's period outlives the table)

    def since(self, rule: Rule) -> datetime:
        return self.now - timedelta(seconds=rule.window_s)


def window_text(rule: Rule) -> str:
    minutes = rule.window_s / 60
    return f"{minutes:g} min" if minutes < 120 else f"{minutes / 60:g} h"
