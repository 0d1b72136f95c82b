"""Why the chain passed a target over without calling it, as a fact of the request.

A skipped target makes no HTTP call, so it is no attempt: it is recorded on the attempt rows
instead (`Attempt.skips`, one JSON text, never a row of its own), so that no count of calls,
attempts, faults or cost can ever take it for one. Each `Skip` names its target, its reason
and its place in the request's order (`depth`; None for a target an operator disabled, which
the order leaves out). The chain reads the words below into its failure (`(target, words)` of
`AllProvidersUnavailable.skipped`, which the gateway's answer and log quote); the Explorer
reads both columns of the table to tell the request's story.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["SKIP_WORDS", "Skip", "SkipReason", "from_json", "to_json"]


class SkipReason(StrEnum):
    """Why a target was passed over; stored as these strings."""

    BREAKER_OPEN = "breaker_open"
    PROBE_IN_FLIGHT = "probe_in_flight"
    COOLING_DOWN = "cooling_down"
    DRILL = "drill"
    DISABLED = "disabled"
    CONTEXT_TOO_SMALL = "context_too_small"
    NO_BUDGET = "no_budget"


# Each reason: what it is called (the chain's failure and the gateway's log say "<target>:
# skipped, <words>"; `engine.gateway.errors.cause_of_skip` reads "budget" and "cooling" in them),
# and why the chain passed the target over, as the Explorer says it.
SKIP_WORDS: Mapping[SkipReason, tuple[str, str]] = {
    SkipReason.BREAKER_OPEN: (
        "breaker open",
        "its breaker opened after provider faults: no call until its cool-down ends",
    ),
    SkipReason.PROBE_IN_FLIGHT: (
        "breaker half-open, probe in flight",
        "its breaker lets one probe through after the cool-down, and another request's probe "
        "was under way",
    ),
    SkipReason.COOLING_DOWN: (
        "cooling down after a rate limit",
        "it answered 429 rate limited: left alone until the limit resets",
    ),
    SkipReason.DRILL: (
        "fault drill",
        "a fault drill holds it down on this route, its breaker open until the drill ends",
    ),
    SkipReason.DISABLED: (
        "disabled by an operator",
        "an operator switched it off (switchover targets disable): left out until enabled",
    ),
    SkipReason.CONTEXT_TOO_SMALL: (
        "context window too small",
        "the request overflowed a context window at least as large as this target's",
    ),
    SkipReason.NO_BUDGET: (
        "time budget too small",
        "less than the minimum time of an attempt was left of the request's time budget",
    ),
}


@dataclass(frozen=True, slots=True)
class Skip:
    """One target passed over. `depth`: its place in the request's order (0: first), None when
    the order left it out (disabled); `detail`: what the reason's words leave out (the
    windows' sizes)."""

    target: str
    reason: str  # a SkipReason; a reason this version does not know is kept as it was read
    depth: int | None
    detail: str | None = None

    @property
    def name(self) -> str:
        """What the reason is called: "breaker open"."""
        return _words(self.reason)[0]

    @property
    def said(self) -> str:
        """What the chain's failure says of it: the detail where there is one, else the name."""
        return self.detail or self.name

    @property
    def why(self) -> str:
        return _words(self.reason)[1]


def _words(reason: str) -> tuple[str, str]:
    known = SKIP_WORDS.get(reason)  # type: ignore[call-overload]
    return known if known is not None else (reason.replace("_", " "), "")


def to_json(skips: Iterable[Skip]) -> str | None:
    """The skips as an attempt records them (`Attempt.skips`); None for none."""
    listed = [
        {"target": s.target, "reason": str(s.reason), "depth": s.depth}
        | ({"detail": s.detail} if s.detail else {})
        for s in skips
    ]
    return json.dumps(listed, separators=(",", ":")) if listed else None


def from_json(text: object) -> tuple[Skip, ...]:
    """The skips an attempt recorded; none for a missing value (NULL, a row from before the
    column, a snapshot without it) or one that does not read."""
    if not isinstance(text, str) or not text:
        return ()
    try:
        listed: Any = json.loads(text)
        return tuple(
            Skip(str(s["target"]), str(s["reason"]), _depth(s.get("depth")), s.get("detail"))
            for s in listed
        )
    except (ValueError, TypeError, KeyError):
        return ()


def _depth(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
