"""Circuit breakers, one per target key ("claude/claude-sonnet-4-5"): a pure state machine
and the stores that keep its state.

         ProviderFailure × `failures` in a row,
         or failure share ≥ `failure_rate` of ≥ `min_volume` outcomes in `window_s`,
         or AccountFailure (from any state; held `account_cooldown_s`)
    ┌────────┐ ──────────────────────────────────────► ┌──────┐
    │ closed │                                        │ open │ ◄────────────┐
    └────────┘                                        └──────┘              │
         ▲                                               │ admit() once     │ ProviderFailure,
         │ Success                                       ▼ now ≥ open_until │ AccountFailure
         │                                         ┌───────────┐            │
         └──────────────────────────────────────── │ half_open │ ───────────┘
                                                   └───────────┘
    half_open admits exactly one PROBE at a time; its lease ends with any event about it
    (Released for a request fault or a cancel) or lapses after `probe_lease_s`.
    RateLimit, in any state: skip the target until `cooling_until`; it never opens the breaker.

The breaker is told only about the provider's and the account's faults: request faults never
reach it. An open breaker is held for max(cooldown, Retry-After). `transition` and `admit` are
pure and take `now` from the caller's injected clock; stores only load, apply and save. Never
sleep or read a clock here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal, Protocol

from engine.core.errors import AttemptError, Decision, DrillFault

Status = Literal["closed", "open", "half_open"]
# "probe": reopened because the half-open probe failed; "drill": held open by a fault drill.
OpenReason = Literal["failures", "failure_rate", "account", "probe", "drill"]

# The sliding window is kept as this many time buckets of (start, failures, total), so the
# state stays a few numbers at any traffic and outcomes leave it within a tenth of window_s.
WINDOW_BUCKETS = 10


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    failures: int = 5  # consecutive provider faults that open the breaker
    window_s: float = 60.0
    min_volume: int = 10  # outcomes needed in the window before the failure rate counts
    failure_rate: float = 0.5
    cooldown_s: float = 30.0
    account_cooldown_s: float = 300.0
    rate_limit_cooldown_s: float = 10.0  # cool-down after a 429 that named no reset
    probe_lease_s: float = 30.0  # a probe that never reports back frees its slot after this

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"{f.name} must not be negative")
        if self.failures < 1 or self.window_s <= 0 or not 0 < self.failure_rate <= 1:
            raise ValueError("need failures ≥ 1, window_s > 0 and failure_rate in (0, 1]")


@dataclass(frozen=True, slots=True)
class BreakerState:
    status: Status = "closed"
    consecutive_failures: int = 0
    recent: tuple[tuple[float, int, int], ...] = ()  # (bucket start, failures, total)
    open_until: float | None = None
    probe_until: float | None = None  # lease expiry of the outstanding probe, if any
    cooling_until: float | None = None  # rate-limited: skipped until then, yet not open
    open_reason: OpenReason | None = None
    opened_at: float | None = None


# --- events ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Success:
    pass


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """A provider fault or an ambiguous fault."""

    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class AccountFailure:
    """The credential or the account is broken. `hold_s` replaces the account cooldown (a
    drill holds the breaker open exactly until it ends, then the usual probe restores it)."""

    hold_s: float | None = None
    drill: bool = False  # the invalid key of a fault drill (engine.state.drills)


@dataclass(frozen=True, slots=True)
class DrillOver:
    """The drill that holds this breaker open ended (early, maybe): probe now."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    reset_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class Released:
    """A probe ended without a verdict on the provider (request fault, cancelled)."""


Event = Success | ProviderFailure | AccountFailure | RateLimit | Released | DrillOver


def event_for(error: AttemptError) -> Event | None:
    """The event an attempt's error reports, read from its class's decision and
    `counts_on_breaker` (`engine.core.errors`); None for a fault the breaker never hears of
    (a caller that was admitted as PROBE reports `Released()` instead)."""
    match error.decision:
        case Decision.RATE_LIMITED:  # cools the target until the reset; never trips it
            return RateLimit(error.retry_after_s)
        case Decision.QUALITY:  # an answer arrived: the provider is up, whatever the model wrote
            return Success()
        case _ if not error.counts_on_breaker:  # the request's fault, or ours: not the provider's
            return None
        case Decision.FALL_BACK_NOW:  # a drill holds the breaker open exactly until it ends
            if isinstance(error, DrillFault):
                return AccountFailure(error.hold_s, drill=True)
            return AccountFailure()
        case Decision.RETRY_THEN_FALL_BACK | Decision.AMBIGUOUS:
            return ProviderFailure(error.retry_after_s)
    raise TypeError(f"no breaker event for the decision {error.decision!r}")


class Admission(StrEnum):
    ALLOW = "allow"
    PROBE = "probe"  # the single half-open trial; report its outcome (or Released)
    REJECT_OPEN = "reject_open"
    REJECT_PROBING = "reject_probing"
    REJECT_COOLING = "reject_cooling"

    @property
    def allowed(self) -> bool:
        return self in (Admission.ALLOW, Admission.PROBE)


# --- the state machine (pure) ----------------------------------------------------------------


def admit(state: BreakerState, now: float, policy: BreakerPolicy) -> tuple[Admission, BreakerState]:
    """May a request go to this target now? Also moves a lapsed open breaker to half-open and
    takes the probe lease, so the returned state must be stored."""
    if state.status == "open":
        if state.open_until is not None and now < state.open_until:
            return Admission.REJECT_OPEN, state
        state = replace(state, status="half_open", probe_until=None)
    if state.cooling_until is not None and now < state.cooling_until:
        return Admission.REJECT_COOLING, state
    if state.status == "closed":
        return Admission.ALLOW, state
    if state.probe_until is not None and now < state.probe_until:
        return Admission.REJECT_PROBING, state
    return Admission.PROBE, replace(state, probe_until=now + policy.probe_lease_s)


def transition(
    state: BreakerState, event: Event, now: float, policy: BreakerPolicy
) -> BreakerState:
    """The state after `event` was reported at `now`."""
    match event:
        case Released():
            return replace(state, probe_until=None)
        case RateLimit(reset_after_s=reset):
            wait = policy.rate_limit_cooldown_s if reset is None else reset
            return replace(state, cooling_until=now + wait, probe_until=None)
        case AccountFailure(hold_s=hold, drill=drill):
            until = now + (policy.account_cooldown_s if hold is None else hold)
            reason: OpenReason = "drill" if drill else "account"
            if state.status == "open" and state.open_reason == reason:
                return replace(state, open_until=max(until, state.open_until or until))
            return _open(state, now, until, reason)
        case DrillOver():
            if state.status == "open" and state.open_reason == "drill":
                return replace(state, open_until=min(now, state.open_until or now))
            return state
        case Success():
            if state.status == "half_open":
                return BreakerState(cooling_until=state.cooling_until)
            if state.status == "open":  # a late answer to a request sent before opening
                return state
            recent = _add_outcome(state.recent, now, False, policy)
            return replace(state, consecutive_failures=0, recent=recent)
        case ProviderFailure(retry_after_s=retry_after):
            until = now + max(policy.cooldown_s, retry_after or 0.0)
            if state.status == "half_open":
                return _open(state, now, until, "probe")
            if state.status == "open":  # late failure: only a longer Retry-After matters
                extended = now + (retry_after or 0.0)
                return replace(state, open_until=max(state.open_until or extended, extended))
            count = state.consecutive_failures + 1
            recent = _add_outcome(state.recent, now, True, policy)
            state = replace(state, consecutive_failures=count, recent=recent)
            if count >= policy.failures:
                return _open(state, now, until, "failures")
            if _rate_exceeded(recent, policy):
                return _open(state, now, until, "failure_rate")
            return state
    raise TypeError(f"not a breaker event: {event!r}")


def _open(state: BreakerState, now: float, until: float, reason: OpenReason) -> BreakerState:
    return replace(
        state, status="open", open_until=until, probe_until=None, open_reason=reason, opened_at=now
    )


def _add_outcome(
    recent: tuple[tuple[float, int, int], ...], now: float, failed: bool, policy: BreakerPolicy
) -> tuple[tuple[float, int, int], ...]:
    width = policy.window_s / WINDOW_BUCKETS
    start = math.floor(now / width) * width  # the same float for every `now` in a bucket
    kept = tuple(b for b in recent if b[0] + width > now - policy.window_s)
    if kept and kept[-1][0] == start:
        _, failures, total = kept[-1]
        return (*kept[:-1], (start, failures + failed, total + 1))
    return (*kept[-WINDOW_BUCKETS:], (start, int(failed), 1))


def _rate_exceeded(recent: tuple[tuple[float, int, int], ...], policy: BreakerPolicy) -> bool:
    total = sum(b[2] for b in recent)
    failures = sum(b[1] for b in recent)
    return total >= policy.min_volume and failures >= policy.failure_rate * total


def describe(state: BreakerState, now: float) -> dict[str, Any]:
    """A breaker as `/v1/status` tells it, at `now` on the clock of `state`'s times: the seconds
    it stays open or cooling, whether a probe is out, and how long ago it (re)opened. Said here
    once, for the gateway and for a reader of the shared store (the dashboard)."""
    open_for = _remaining(state.open_until, now) if state.status == "open" else None
    opened = state.opened_at if state.status != "closed" else None
    return {
        "status": state.status,
        "open_reason": state.open_reason,
        "consecutive_failures": state.consecutive_failures,
        "open_remaining_s": open_for,
        # An open breaker whose time is up lets one probe through on the next request.
        "probe_due": state.status == "open" and open_for == 0.0,
        # Half-open with its probe's lease running: a request is probing the target now.
        "probing": state.status == "half_open"
        and state.probe_until is not None
        and now < state.probe_until,
        "opened_s_ago": None if opened is None else round(max(0.0, now - opened), 3),
        "cooling_remaining_s": _remaining(state.cooling_until, now) or None,
    }


def _remaining(until: float | None, now: float) -> float | None:
    return None if until is None else round(max(0.0, until - now), 3)


# --- storage ---------------------------------------------------------------------------------

OnChange = Callable[[str, BreakerState, BreakerState], None]


class BreakerStore(Protocol):
    """Where breaker states live. Each call is atomic per key: across every process sharing the
    store, at most one caller holds a half-open probe."""

    def policy_for(self, key: str) -> BreakerPolicy: ...

    async def admit(self, key: str, now: float) -> tuple[Admission, Status]:
        """The admission, and the status it was decided in (a lapsed open counts as
        half_open), which the chain records as the attempt's breaker state."""

    async def record(self, key: str, event: Event, now: float) -> None: ...

    async def snapshot(self, key: str) -> BreakerState:
        """The stored state (a lapsed open stays "open" until the next admit)."""

    async def snapshot_all(self) -> dict[str, BreakerState]: ...


def _notable(old: BreakerState, new: BreakerState) -> bool:
    """Worth an `on_change` call: the status moved, or an open breaker was escalated to
    "account" (a credential alert)."""
    return old.status != new.status or old.open_reason != new.open_reason


class MemoryBreakerStore:
    """Breaker states in this process's memory; the default.

    No method awaits between reading a state and writing its successor, so on one event loop
    every call is atomic: of any number of concurrent `admit`s on a half-open key exactly one
    gets PROBE. Not shared between processes or threads (that is the Redis store's job).

    `on_change(key, old, new)` is called after the new state is stored whenever the status
    changes (opened with `new.open_reason`, half-open, closed) or an open breaker is escalated
    to "account". It runs inside the call: it must not block.
    """

    def __init__(
        self,
        policy: BreakerPolicy | None = None,
        policies_by_key: Mapping[str, BreakerPolicy] | None = None,
        on_change: OnChange | None = None,
    ) -> None:
        self._policy = policy or BreakerPolicy()
        self._policies = dict(policies_by_key or {})
        self._on_change = on_change
        self._states: dict[str, BreakerState] = {}

    def policy_for(self, key: str) -> BreakerPolicy:
        return self._policies.get(key, self._policy)

    async def admit(self, key: str, now: float) -> tuple[Admission, Status]:
        before = self._states.get(key, BreakerState())
        admission, after = admit(before, now, self.policy_for(key))
        self._put(key, before, after)
        return admission, after.status  # admit only ever moves open → half_open

    async def record(self, key: str, event: Event, now: float) -> None:
        before = self._states.get(key, BreakerState())
        self._put(key, before, transition(before, event, now, self.policy_for(key)))

    async def snapshot(self, key: str) -> BreakerState:
        return self._states.get(key, BreakerState())

    async def snapshot_all(self) -> dict[str, BreakerState]:
        return dict(self._states)

    def _put(self, key: str, before: BreakerState, after: BreakerState) -> None:
        self._states[key] = after  # stored even when unchanged: snapshot_all lists every key
        if self._on_change is not None and _notable(before, after):
            self._on_change(key, before, after)
