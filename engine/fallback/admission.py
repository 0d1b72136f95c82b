"""Whether a target may be tried now: its breaker's word, with fault drills as one rule on it.

    Gate.admit(target)
      ├── breaker closed, or its half-open probe    let in; a target under a fault drill is let
      │                                             in to fail as an invalid key would: its
      │                                             `DrillFault`, raised in place of the call
      ├── breaker open, held by a drill now over    DrillOver, then the breaker asked again: the
      │   (ended early, say)                        probe now, not at the drill's planned end
      └── breaker open, probe in flight, or         passed over, the reason recorded
          cooling down after a rate limit           (`SKIP_REASONS`); an open breaker on a
                                                    target under a drill: the drill's

Drills (`engine.state.switches`) reach the chain only here: the route's drilled targets, read
once per request with its order, and `Admitted.drill`. Everything after that (the breaker held
open until the drill ends, no alert, telemetry counting a drill) follows from `DrillFault`
itself. Which target comes next, and whether to wait, is the chain's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from engine.core.clock import Clock
from engine.core.errors import DrillFault
from engine.core.skips import SkipReason
from engine.state.breaker import Admission, BreakerStore, DrillOver

if TYPE_CHECKING:
    from engine.fallback.target import Target

__all__ = ["SKIP_REASONS", "Admitted", "Gate"]

# Why a target its breaker turns away is passed over, as recorded on the request (its words:
# `engine.core.skips.SKIP_WORDS`).
SKIP_REASONS: Mapping[Admission, SkipReason] = {
    Admission.REJECT_OPEN: SkipReason.BREAKER_OPEN,
    Admission.REJECT_PROBING: SkipReason.PROBE_IN_FLIGHT,
    Admission.REJECT_COOLING: SkipReason.COOLING_DOWN,
}


@dataclass(frozen=True, slots=True)
class Admitted:
    """The gate's answer for one target: the breaker state its attempt begins in (recorded on
    the attempt), or why it is passed over (`skip`); for a target under a fault drill, the
    fault its attempt fails with before any call (`drill`)."""

    breaker_state: str
    skip: SkipReason | None = None
    drill: DrillFault | None = None


class Gate:
    """One request's admissions. `drills`: the route's targets under a fault drill, with the
    drill's end (wall clock); None when the route has no operator switches, so that no drill
    can have held a breaker open."""

    def __init__(
        self,
        breakers: BreakerStore,
        clock: Clock,
        drills: Mapping[str, datetime] | None = None,
    ) -> None:
        self._breakers = breakers
        self._clock = clock
        self._drills = drills

    async def admit(self, target: Target) -> Admitted:
        now = self._clock.now()
        admission, state = await self._breakers.admit(target.name, now)
        if admission is Admission.REJECT_OPEN and await self._drill_over(target, now):
            admission, state = await self._breakers.admit(target.name, now)
        until = self._drills.get(target.name) if self._drills else None
        if admission is Admission.REJECT_OPEN and until is not None:
            return Admitted(state, skip=SkipReason.DRILL)  # open because the drill goes on
        if admission in SKIP_REASONS:
            return Admitted(state, skip=SKIP_REASONS[admission])
        if until is None:
            return Admitted(state)
        return Admitted(state, drill=DrillFault((until - self._clock.wall()).total_seconds()))

    async def _drill_over(self, target: Target, now: float) -> bool:
        """Whether `target`'s breaker is held open by a fault drill that is over; if so, the
        breaker is told, so that the probe goes through now."""
        if self._drills is None or target.name in self._drills:
            return False  # no switches, so no drill; or the drill goes on
        if (await self._breakers.snapshot(target.name)).open_reason != "drill":
            return False  # open for real
        await self._breakers.record(target.name, DrillOver(), now)
        return True
