"""Health scores: each target's recent success rate, which adaptive routes order targets by.

    score = successes / (successes + failures)     over the last `window_s` (default 300 s)

A failure is an attempt that ended in an error that is not the request's fault: provider,
account, rate-limit and ambiguous faults all count, since each makes the target a worse first
choice. A request fault (decision "fail_fast") says nothing about the target, nor does a
quality fault (an answer that broke one route's contract); cancelled and skipped attempts made
no verdict on it: none of these count. A target with no counted attempts in the window scores
1.0, so that a target nobody has tried lately is tried (fail open) rather than starved.

The window is kept as `WINDOW_BUCKETS` time buckets of (successes, failures), as the breaker
keeps its own (`engine.state.breaker`), so memory per target is constant at any traffic and an
outcome counts for between 0.9 and 1.0 `window_s`.

`observe` is an attempt hook (`Chain(hooks=[scores.observe])`): it never raises, never awaits
and never does I/O. `RedisHealthScores` (engine.state.health_scores_redis) shares the counts
between every worker and host; its `observe` only queues increments, which a task on the
running loop writes in one pipeline.
Nothing here may fail a request: when Redis is unreachable the scores come from this process's
memory, with one warning per outage.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Protocol

from engine.core.attempt import Attempt
from engine.core.clock import Clock
from engine.state.breaker import WINDOW_BUCKETS

log = logging.getLogger("switchover.ordering")

NO_DATA = 1.0  # the score of a target without counted attempts in the window: fail open


class HealthScores(Protocol):
    def observe(self, attempt: Attempt) -> None:
        """Count a finished attempt. An attempt hook: never raises, never blocks."""

    async def scores(self, targets: Sequence[str]) -> dict[str, float]:
        """Each target's score in [0, 1]; never raises."""


def verdict(attempt: Attempt) -> bool | None:
    """True: counts as a success; False: as a failure; None: does not count."""
    if attempt.outcome == "success":
        return True
    if attempt.outcome != "error":  # cancelled or skipped: the target was not judged
        return None
    if attempt.decision == "fail_fast" or attempt.fault_kind in ("request", "suspected_request"):
        return None  # the request was at fault, whichever target received it
    if attempt.fault_kind == "quality":
        # An answer that broke one route's contract: the target is up (the breaker hears a
        # success), and a score shared by every route must not carry one route's contract.
        return None
    return False


def rate(successes: int, failures: int) -> float:
    total = successes + failures
    return successes / total if total > 0 else NO_DATA


class MemoryHealthScores:
    """Scores from this process's attempts only."""

    def __init__(self, clock: Clock, window_s: float = 300.0) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self.clock = clock
        self.window_s = window_s
        self._width = window_s / WINDOW_BUCKETS
        # target -> [[bucket index, successes, failures], ...], oldest first
        self._buckets: dict[str, list[list[int]]] = {}
        self._warned = False

    def observe(self, attempt: Attempt) -> None:
        try:
            ok = verdict(attempt)
            if ok is not None:
                self.add(attempt.target, ok)
        except Exception:  # once: an attempt hook runs on every request
            if not self._warned:
                self._warned = True
                log.exception("health scores: could not count an attempt; scores may lag")

    def add(self, target: str, ok: bool, count: int = 1) -> None:
        now = bucket_of(self.clock.now(), self._width)
        buckets = self._buckets.setdefault(target, [])
        if buckets and buckets[-1][0] == now:
            buckets[-1][1 if ok else 2] += count
            return
        # Drop what left the window, so a target never holds more than WINDOW_BUCKETS.
        buckets[:] = [b for b in buckets if b[0] > now - WINDOW_BUCKETS]
        buckets.append([now, count if ok else 0, 0 if ok else count])

    def score(self, target: str) -> float:
        oldest = bucket_of(self.clock.now(), self._width) - WINDOW_BUCKETS
        kept = [b for b in self._buckets.get(target, ()) if b[0] > oldest]
        return rate(sum(b[1] for b in kept), sum(b[2] for b in kept))

    async def scores(self, targets: Sequence[str]) -> dict[str, float]:
        return {target: self.score(target) for target in targets}


def bucket_of(seconds: float, width: float) -> int:
    """The index of the bucket of `width` seconds that `seconds` falls in."""
    return math.floor(seconds / width)
