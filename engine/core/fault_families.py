"""Fault families: the kinds of failure an incident is about, never merged into one another.

    availability   the provider failed the call: 5xx, 529, connect errors, cut streams, and the
                   ambiguous ones (a reset after sending, a read timeout, an unusable 200)
    rate_limit     429 rate limit: the provider asked us to slow down
    account        401, 403, 402, 404 model, quota, spend limit: the key or the account

Each family names the attempt `fault_kind`s it counts (engine.telemetry.columns) and the rollup
columns that count them (engine.store.rollups). A fault drill's attempts (`fault_kind = "drill"`)
and request faults belong to no family: the first are an exercise, the second the caller's.

Vocabulary, so in the core: the store's traffic profile, the alerts' incidents, the reports, the
dashboard and the simulator all name failures by these families.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    fault_kinds: tuple[str, ...]  # attempts.fault_kind values it counts
    rollup_sum: str  # the rollup_minute columns that count them, as a SQL sum
    label: str  # how a person reads it, after the target's name
    # One fault is a bad minute, whatever its share of the minute's attempts: a refused key
    # is no flake (the chain falls back at once and alerts), and its breaker opens at that
    # first refusal, so there is never a second one to make the share.
    decisive: bool = False


FAMILIES: tuple[Family, ...] = (
    Family("availability", ("provider", "ambiguous"), "provider_faults + ambiguous_faults",
           "failing (5xx, 529, timeouts)"),
    Family("rate_limit", ("rate_limit",), "rate_limited", "rate limited (429)"),
    Family("account", ("account",), "account_faults",
           "refusing its key or account (401, 403, 402, 404 model, quota)", decisive=True),
)  # fmt: skip
BY_NAME = {family.name: family for family in FAMILIES}


def describe(subject: str, family: str | None) -> str:
    """What an incident is about, for people: "claude/claude-haiku-4-5 rate limited (429)"; the
    subject alone for a row from before families (or a family this code does not know)."""
    known = BY_NAME.get(family) if isinstance(family, str) else None
    return f"{subject} {known.label}" if known else subject
