"""The chain's tunables and the small pure strategies built on them (backoff, waits).

Defaults follow `shared/DESIGN.md` §3; every field can be set in `[policy]` of switchover.toml
and overridden per route.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any

from engine.state.breaker import BreakerPolicy


@dataclass(frozen=True, slots=True)
class Policy:
    budget_s: float = 30.0  # one deadline for the whole chain, retries and fallbacks included
    primary_retries: int = 1  # extra tries on the first target; each fallback gets one try
    min_attempt_budget_s: float = 0.25  # a target is skipped when less than this remains
    # A cap on one non-streaming attempt, so a provider that hangs cannot eat the whole budget
    # and leave nothing for the backup. Each attempt gets min(this, what remains).
    attempt_timeout_s: float = 60.0
    # While backups remain, attempts (a stream's wait for its first token too) end this share
    # of the budget before the deadline, and the primary retries only when the retry fits
    # before that line: a hanging primary leaves its backups a third, whatever its retries.
    backup_reserve_share: float = 1 / 3
    backoff_base_s: float = 0.2  # jittered exponential backoff before a retry, capped below
    backoff_max_s: float = 1.0
    overload_backoff_s: float = 0.05  # 529s cluster: retry almost at once, then move on
    max_retry_after_wait_s: float = 2.0  # wait for a 429's reset only when it is this short
    # Stream: no content by then → provider fault, fall back. Capped, like every attempt, at
    # the reserve line; with the defaults the two are the same 20 s from the primary's call.
    first_token_timeout_s: float = 20.0
    idle_timeout_s: float = 30.0  # stream: silence after the first content → in-band error
    breaker_failures: int = 5
    breaker_window_s: float = 60.0
    breaker_min_volume: int = 10
    breaker_failure_rate: float = 0.5
    breaker_cooldown_s: float = 30.0
    account_cooldown_s: float = 300.0
    rate_limit_cooldown_s: float = 10.0  # cool-down after a 429 that named no reset

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value < 0:
                raise ValueError(f"{f.name} must not be negative (got {value})")
        if self.budget_s <= 0:
            raise ValueError("budget_s must be positive")
        if not 0 < self.breaker_failure_rate <= 1:
            raise ValueError("breaker_failure_rate must be in (0, 1]")
        if not 0 <= self.backup_reserve_share < 1:
            raise ValueError("backup_reserve_share must be in [0, 1)")
        if self.breaker_failures < 1:
            raise ValueError("breaker_failures must be at least 1")

    def replace(self, **changes: Any) -> Policy:
        return dataclasses.replace(self, **changes)

    def breaker_policy(self) -> BreakerPolicy:
        return BreakerPolicy(
            failures=self.breaker_failures,
            window_s=self.breaker_window_s,
            min_volume=self.breaker_min_volume,
            failure_rate=self.breaker_failure_rate,
            cooldown_s=self.breaker_cooldown_s,
            account_cooldown_s=self.account_cooldown_s,
            rate_limit_cooldown_s=self.rate_limit_cooldown_s,
        )


POLICY_KEYS = frozenset(f.name for f in dataclasses.fields(Policy))


def too_little(seconds: float, policy: Policy) -> bool:
    """Whether `seconds` are too few to begin an attempt in."""
    return seconds <= 0 or seconds < policy.min_attempt_budget_s


def backoff_s(policy: Policy, retry_number: int, rng: random.Random, *, overloaded: bool) -> float:
    """Full-jitter-ish backoff: half fixed, half random, so retries of many requests that
    failed together do not arrive together."""
    base = policy.overload_backoff_s if overloaded else policy.backoff_base_s
    ceiling = min(policy.backoff_max_s, base * (2 ** max(0, retry_number - 1)))
    return ceiling * (0.5 + 0.5 * rng.random())
