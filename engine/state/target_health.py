"""Whether a target could take a route's traffic now, as this process sees it: the question a
fault drill's pre-flight asks of the route's other targets (engine.state.drills).

    healthy   its breaker closed and not cooling down after a rate limit; not turned off for
              the route by an operator switch; not under another drill of the route; and no
              provider, ambiguous, account or rate-limit fault seen in the last 5 minutes

Per process. Breakers and switches are read from wherever this process keeps them (its memory,
the host's control file, or Redis, where every worker and host sees the same ones), but the
recent faults are those of this process's own requests (`TargetHealth.observe`, an attempt
hook): with several workers, a fault that another worker saw is known here only through the
breaker it moved. On a request's path this module does one dict write per failed attempt;
its reads happen only when a drill is about to start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core.attempt import Attempt
from engine.core.clock import Clock
from engine.state.breaker import BreakerState, BreakerStore
from engine.state.switches import Switches

RECENT = timedelta(minutes=5)
# The faults that say the target itself is failing: what its breaker counts, and rate limits.
# A drill's made-up invalid key, a request's own fault or a quality error say nothing of it.
TARGET_FAULTS = frozenset({"provider", "ambiguous", "account", "rate_limit"})
_KIND_WORDS = {"provider": "a provider", "ambiguous": "an ambiguous", "account": "an account",
               "rate_limit": "a rate-limit"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class SeenFault:
    at: datetime  # when the failed attempt ended (wall clock)
    fault_kind: str
    error_class: str


class TargetHealth:
    """The breakers, switches and recent faults of this process, asked about one target."""

    def __init__(self, breakers: BreakerStore, switches: Switches | None, clock: Clock) -> None:
        self.breakers = breakers
        self.switches = switches
        self.clock = clock
        # One entry a target: bounded by the configuration, as the chains and breakers are.
        self._last_fault: dict[str, SeenFault] = {}

    def observe(self, attempt: Attempt) -> None:
        """The attempt hook: keep each target's latest fault."""
        if attempt.fault_kind in TARGET_FAULTS:
            ended = attempt.started_at + timedelta(milliseconds=attempt.latency_ms)
            kind = attempt.fault_kind
            self._last_fault[attempt.target] = SeenFault(ended, kind, attempt.error_class or kind)

    async def problems(self, route: str, target: str) -> list[str]:
        """Why `target` cannot be trusted with `route`'s traffic now; empty when it is healthy."""
        found = await self._switched(route, target)
        found += breaker_problems(await self.breakers.snapshot(target), self.clock.now())
        seen = self._last_fault.get(target)
        if seen is not None and (ago := self.clock.wall() - seen.at) < RECENT:
            kind = _KIND_WORDS[seen.fault_kind]
            found.append(f"{kind} fault ({seen.error_class}) {_ago(ago)} ago")
        return found

    async def _switched(self, route: str, target: str) -> list[str]:
        if self.switches is None:
            return []
        found = []
        if target in await self.switches.disabled(route):
            found.append(
                "disabled by an operator switch"
                + _why(await self.switches.entries(), route, target)
            )
        until = (await self.switches.drilled(route)).get(target)
        if until is not None:
            found.append(f"under another drill until {until:%H:%M:%S} UTC")
        return found


def breaker_problems(state: BreakerState, now: float) -> list[str]:
    """What a breaker's state says against its target at `now` (the store's clock)."""
    found = []
    if state.status == "open":
        # A breaker stays "open" past its time until a request asks it: with no traffic to the
        # target (a backup while its primary serves), that can be long; a forced drill's first
        # request is then its probe.
        due = state.open_until is not None and state.open_until <= now
        found.append(
            f"breaker open ({state.open_reason or 'failures'}"
            + (", its probe due)" if due else ")")
        )
    elif state.status == "half_open":
        found.append("breaker half-open (a probe decides)")
    if state.cooling_until is not None and state.cooling_until > now:
        found.append("cooling down after a rate limit")
    return found


def _why(entries: list[dict], route: str, target: str) -> str:
    """ " (the operator's reason)" of the switch that turned `target` off for `route`, or ""."""
    for e in entries:
        mine = e.get("kind") == "disabled" and e.get("route") in (None, route)
        if mine and e.get("target") == target and e.get("reason"):
            return f" ({e['reason']})"
    return ""


def _ago(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"
