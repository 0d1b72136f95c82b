"""First-token limits learned from the attempts recorded (a route's
`first_token_timeout_s = "learned"`, issue 35).

A static 20 s limit is right for a model whose first token can take 15 s, and wastes 18 s on one
that answers in 800 ms and has stalled. A learned limit is a multiple (`MULTIPLE`) of the target's
recorded time to first token at p99, never below `FLOOR_S` (a limit shorter than that gives up on
ordinary variance) and never above the route's static limit (still the ceiling, and the reserve
line caps both). A target with fewer than `MIN_STREAMS` streamed answers in the window keeps the
static limit: too few to read a p99 from.

`LearnedLimits` is what the chains read, one per process, replaced whole when the published
target latency is read again (engine.published.learned_timeouts, by the gateway): the request
path never waits on a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

__all__ = ["FLOOR_S", "MIN_STREAMS", "MULTIPLE", "LearnedLimit", "LearnedLimits"]

MULTIPLE = 3.0
FLOOR_S = 2.0
MIN_STREAMS = 100


@dataclass(frozen=True, slots=True)
class LearnedLimit:
    """One target's evidence: its first-token p99 over `streams` streamed answers since
    `since`, and the limit it gives (before the route's static limit caps it)."""

    target: str
    ttft_p99_s: float
    streams: int
    since: datetime

    @property
    def limit_s(self) -> float:
        return max(FLOOR_S, MULTIPLE * self.ttft_p99_s)

    def capped(self, static_s: float) -> float:
        return min(static_s, self.limit_s)


class LearnedLimits:
    """The learned limits by target, as last read."""

    def __init__(self, limits: Mapping[str, LearnedLimit] | None = None) -> None:
        self._limits: Mapping[str, LearnedLimit] = dict(limits or {})

    def replace(self, limits: Mapping[str, LearnedLimit]) -> None:
        self._limits = dict(limits)

    def get(self, target: str) -> LearnedLimit | None:
        return self._limits.get(target)

    def first_token_s(self, target: str, static_s: float) -> float:
        """The first-token limit for `target`: learned, or `static_s` without evidence."""
        learned = self._limits.get(target)
        return static_s if learned is None else learned.capped(static_s)
