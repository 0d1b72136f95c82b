"""The chain's tunables and the small pure strategies built on them (backoff, waits, the end of
each attempt within one request's budget).

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

    def for_caller(self, budget_s: float | None, primary_retries: int | None) -> Policy:
        """This policy with a caller's shorter budget or fewer primary retries: a caller can
        only shorten and lower them (engine.fallback.chain.Chain.complete)."""
        policy = self
        if budget_s is not None and 0 < budget_s < policy.budget_s:
            policy = policy.replace(budget_s=budget_s)
        if primary_retries is not None and 0 <= primary_retries < policy.primary_retries:
            policy = policy.replace(primary_retries=primary_retries)
        return policy

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


@dataclass(slots=True)
class Budget:
    """One request's time: its deadline, and when each of its attempts must end. Instants are
    the injected clock's (`Clock.now()`); nothing here reads it.

    While backups remain, attempts end at the reserve line, `backup_reserve_share` of the
    budget before the deadline, so that a provider that hangs leaves its backups that share.
    The primary's retries must fit before the line too (`retry_fits`): a retry never gets the
    backups' time. Every attempt's end is fixed by when it began, so the limit a stream re-arms
    before each event never moves later."""

    policy: Policy
    deadline: float
    # When the first attempt began: the origin of the primary's share (`reserve_line`).
    first_call: float | None = None

    def reserve_line(self) -> float:
        """The instant attempts with backups left must end by. The primary's share is counted
        from its first call, so that what the chain did before it (ordering the targets, asking
        the breaker) is not taken from the primary's wait: with the defaults a first token
        gets exactly 20 s. At most `min_attempt_budget_s` of that comes out of the reserve."""
        arrived = self.deadline - self.policy.budget_s
        first = arrived if self.first_call is None else self.first_call
        setup = min(first - arrived, self.policy.min_attempt_budget_s)
        return self.deadline - self.policy.backup_reserve_share * self.policy.budget_s + setup

    def attempt_end(self, started: float, depth: int, backups_left: bool) -> float:
        """When an attempt that began at `started` on the target at `depth` must end."""
        policy = self.policy
        reserve = policy.backup_reserve_share * policy.budget_s
        if not backups_left or policy.budget_s - reserve < policy.min_attempt_budget_s:
            return self.deadline  # the last target, or a budget too small to keep a reserve
        line = self.reserve_line()
        if depth == 0 or line - started >= policy.min_attempt_budget_s:
            return line
        # A backup past the line with backups after it (the primary and this one's
        # predecessors used their shares): it leaves the same share of what remains to them.
        share_end = started + (1 - policy.backup_reserve_share) * (self.deadline - started)
        return share_end if share_end - started >= policy.min_attempt_budget_s else self.deadline

    def retry_fits(self, at: float, *, backups_left: bool) -> bool:
        """Whether a retry of the primary beginning at `at` would have at least
        `min_attempt_budget_s` before its end: before the reserve line while backups remain,
        before the deadline on the last target. The chain asks when it decides, and again when
        the retry is due to begin, so that the decision it records is the one taken."""
        return not too_little(self.attempt_end(at, 0, backups_left) - at, self.policy)
