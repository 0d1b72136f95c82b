"""The in-memory breaker store of the simulator, with the fast-forward's successes pending.

A request the fast-forward answers (simulations.whatif.fastforward) reports its Success when it
completes, which is after later arrivals have been looked at: its success is held here, with
its time, and applied in time order before anything reads or changes its key after it, so a
failure rate computed later counts these successes as it would have.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from engine.state.breaker import (
    WINDOW_BUCKETS,
    BreakerState,
    MemoryBreakerStore,
    Success,
    transition,
)

_NONE = np.empty(0)


class PendingBreakers(MemoryBreakerStore):
    """The in-memory breaker store, with successes that will be reported at known times:
    each is applied, in time order, before anything reads or changes its key after it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, np.ndarray] = {}  # key → sorted times of successes to come

    def will_succeed(self, key: str, times: np.ndarray, now: float) -> None:
        """Successes to report on `key` at these (sorted) times, none before `now`. Those
        due by `now` are applied first, so that what is pending stays short."""
        if len(times):
            self.catch_up(key, now)
            pending = self._pending.get(key)
            merged = times if pending is None else np.concatenate([pending, times])
            if pending is not None and len(pending) and pending[-1] > times[0]:
                merged.sort(kind="mergesort")
            self._pending[key] = merged

    def will_succeed_once(self, key: str, at: float, now: float) -> None:
        self.will_succeed(key, np.array([at]), now)

    def catch_up(self, key: str, now: float) -> None:
        due = self._due(key, now)
        if not len(due):
            return
        state = self._states.get(key, BreakerState())
        policy = self.policy_for(key)
        i = 0
        while i < len(due) and state.status != "closed":  # a success may close a half-open
            state = self._apply(key, state, float(due[i]), policy)
            i += 1
        if i < len(due):
            state = _successes_on_closed(state, due[i:], policy)
        self._states[key] = state

    def _apply(self, key: str, state: BreakerState, at: float, policy: Any) -> BreakerState:
        after = transition(state, Success(), at, policy)
        self._put(key, state, after)
        return after

    def _due(self, key: str, now: float) -> np.ndarray:
        pending = self._pending.get(key)
        if pending is None or not len(pending) or pending[0] > now:
            return _NONE
        i = int(pending.searchsorted(now, side="right"))
        self._pending[key] = pending[i:]
        return pending[:i]

    def state(self, key: str, now: float) -> BreakerState:
        """`key`'s state once every success due by `now` is applied."""
        self.catch_up(key, now)
        return self._states.get(key, BreakerState())

    async def admit(self, key: str, now: float) -> Any:
        self.catch_up(key, now)
        return await super().admit(key, now)

    async def record(self, key: str, event: Any, now: float) -> None:
        self.catch_up(key, now)
        await super().record(key, event, now)

    def finish(self) -> None:
        for key in list(self._pending):
            self.catch_up(key, np.inf)


def _successes_on_closed(state: BreakerState, times: np.ndarray, policy: Any) -> BreakerState:
    """`transition(state, Success(), t)` for every t of `times` (sorted) in turn, on a closed
    breaker, at once: the run of failures ends, and each success counts in its window bucket;
    buckets the last success's window no longer reaches are dropped, as one by one."""
    width = policy.window_s / WINDOW_BUCKETS
    last = float(times[-1])
    counts: dict[float, list[int]] = {b[0]: [b[1], b[2]] for b in state.recent}
    if len(times) > 64:
        starts, added = np.unique(np.floor(times / width) * width, return_counts=True)
        pairs = zip(starts.tolist(), added.tolist(), strict=True)
    else:  # a few: plain floats are quicker than the arrays' set-up
        pairs = ((math.floor(t / width) * width, 1) for t in times.tolist())
    for start, n in pairs:
        counts.setdefault(start, [0, 0])[1] += n
    recent = tuple(
        (start, failures, total)
        for start, (failures, total) in sorted(counts.items())
        if start + width > last - policy.window_s
    )[-(WINDOW_BUCKETS + 1) :]
    return dataclasses.replace(state, consecutive_failures=0, recent=recent)
