"""The simulator's fast path: requests that provably cannot differ from a plain first-attempt
success are answered without running the chain, in bulk, as columns.

A request qualifies when, on arrival, all of these hold:
- its route's chain can only do one thing with a healthy answer: no PII masking, no output
  contract, no adaptive or own-keys order, no operator switch, no prompt of the primary's own
  (those change what is sent, checked or tried first);
- no fault of the scenario is active on the route's first target;
- its first attempt's latency (drawn with the traffic) is inside the attempt's time limit;
- no rate limit of the first target is within reach in that minute: even if every request of
  every route that lists the target went to it, with every retry, the limit would hold;
- the first target's breaker is closed and not cooling (checked against the real breaker store,
  where nothing is pending that could change it: see below).

Such a request's attempt is the chain's own record of a quiet success on that route (captured
from the first one the chain ran: `Templates`) with only what varies filled in: when it began,
its latency, its tokens (the prompt cache decided as `SimulatedProvider` decides it) and its
cost, from the same `Pricer` (`Pricer.price_columns`, the same rates, tiers and rounding).

Its effects on what later requests meet are kept exactly:
- the breaker's Success is applied in time order with the chain's own events on that target
  (`PendingBreakers`: every read of a key first applies the successes due by then), so a
  failure rate computed later counts these successes as it would have;
- its prompt-cache write or read is known to the chain's requests that complete after it
  (`Caches`), and its own warm or cold state is settled at the end against every answer, the
  chain's included.
A differential test (tests/simulations/test_fastforward.py) runs scenarios both ways and
requires the same attempts, rollups and incidents.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.config import Config, RouteConfig
from engine.core.attempt import Attempt
from engine.fallback.policy import Policy
from engine.state.breaker import (
    WINDOW_BUCKETS,
    BreakerState,
    MemoryBreakerStore,
    Success,
    transition,
)
from simulations.whatif.scenario import Scenario
from simulations.whatif.simulated import Caches, SimulatedProvider

_NONE = np.empty(0)
CHUNK = 65_536  # arrivals looked at per step of a bulk stretch


class PendingBreakers(MemoryBreakerStore):
    """The in-memory breaker store, with successes that will be reported at known times:
    each is applied, in time order, before anything reads or changes its key after it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, np.ndarray] = {}  # key → sorted times of successes to come
        # key → until when its breaker was last open, half-open or cooling (inf: still is).
        self.unsettled_until: dict[str, float] = {}

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
            self._settled(key, state, float(due[-1]))
        self._states[key] = state

    def _apply(self, key: str, state: BreakerState, at: float, policy: Any) -> BreakerState:
        after = transition(state, Success(), at, policy)
        self._put(key, state, after)
        self._settled(key, after, at)
        return after

    def _settled(self, key: str, state: BreakerState, now: float) -> None:
        """Keep when `key` last stopped being closed and clear of any cool-down."""
        if state.status != "closed":
            self.unsettled_until[key] = np.inf
        elif state.cooling_until is not None and state.cooling_until > now:
            self.unsettled_until[key] = state.cooling_until
        elif self.unsettled_until.get(key) == np.inf:
            self.unsettled_until[key] = now

    def _due(self, key: str, now: float) -> np.ndarray:
        pending = self._pending.get(key)
        if pending is None or not len(pending) or pending[0] > now:
            return _NONE
        i = int(pending.searchsorted(now, side="right"))
        self._pending[key] = pending[i:]
        return pending[:i]

    def status(self, key: str, now: float) -> tuple[str, float]:
        """(status, cooling until) once every success due by `now` is applied."""
        self.catch_up(key, now)
        state = self._states.get(key, BreakerState())
        return state.status, state.cooling_until or -np.inf

    async def admit(self, key: str, now: float) -> Any:
        self.catch_up(key, now)
        admitted = await super().admit(key, now)
        self._settled(key, self._states[key], now)
        return admitted

    async def record(self, key: str, event: Any, now: float) -> None:
        self.catch_up(key, now)
        await super().record(key, event, now)
        self._settled(key, self._states[key], now)

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


def route_can_fast_forward(route: RouteConfig, config: Config, switches: Any) -> bool:
    """Whether no route option could make a healthy first answer end otherwise."""
    options = route.options
    primary = route.targets[0]
    return (
        switches is None
        and options.pii is None
        and options.contract is None
        and not options.adaptive_order
        and not options.own_keys_first
        and primary.prompt is None
    )


def first_attempt_limit(policy: Policy, backups: bool) -> float:
    """The first attempt's time limit, as engine.fallback.run sets it when the chain starts."""
    reserve = policy.backup_reserve_share * policy.budget_s
    if backups and policy.budget_s - reserve >= policy.min_attempt_budget_s:
        end = policy.budget_s - reserve
    else:
        end = policy.budget_s
    return min(end, policy.attempt_timeout_s)


@dataclass
class Columns:
    """The traffic as arrays (one row per arrival)."""

    at_s: np.ndarray
    route: np.ndarray  # index into `routes`
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    routes: tuple[str, ...]

    @classmethod
    def of(cls, traffic: Any) -> Columns:
        if hasattr(traffic, "at_s") and isinstance(traffic.at_s, np.ndarray):
            return cls(
                traffic.at_s,
                traffic.route,
                traffic.input_tokens,
                traffic.output_tokens,
                tuple(traffic.routes),
            )
        routes = tuple(dict.fromkeys(a.route for a in traffic))
        index = {r: i for i, r in enumerate(routes)}
        return cls(
            np.array([a.at_s for a in traffic], dtype=np.float64),
            np.array([index[a.route] for a in traffic], dtype=np.int16),
            np.array([a.input_tokens for a in traffic], dtype=np.int64),
            np.array([a.output_tokens for a in traffic], dtype=np.int64),
            routes,
        )

    def __len__(self) -> int:
        return len(self.at_s)


class FastForward:
    def __init__(
        self,
        scenario: Scenario,
        config: Config,
        traffic: Columns,
        first_z: np.ndarray,
        providers: Mapping[str, SimulatedProvider],
        breakers: PendingBreakers,
        caches: Caches,
        switches: Any,
    ) -> None:
        self.scenario, self.config, self.traffic = scenario, config, traffic
        self.breakers, self.caches = breakers, caches
        n = len(traffic)
        self.primary = [config.routes[r].targets[0] for r in traffic.routes]
        self.primary_keys = [t.name for t in self.primary]
        latency = np.empty(n)
        quiet = np.zeros(n, dtype=bool)
        for r, name in enumerate(traffic.routes):
            rows = traffic.route == r
            route = config.routes[name]
            target = self.primary[r]
            median, sigma = providers[target.provider].healthy_latency(target.name)
            latency[rows] = median * np.exp(sigma * first_z[rows])
            if not route_can_fast_forward(route, config, switches):
                continue
            limit = first_attempt_limit(route.policy, len(route.targets) > 1)
            ok = latency[rows] < limit * (1 - 1e-9)
            ok &= ~self._fault_possible(target.name, traffic.at_s[rows])
            quiet[rows] = ok
        # target → the routes that list it after their first target
        self.backed_up_by: dict[str, list[int]] = {}
        for r, name in enumerate(traffic.routes):
            for later in config.routes[name].targets[1:]:
                self.backed_up_by.setdefault(later.name, []).append(r)
        self.spill_s = 60 + max(
            (config.routes[n].policy.budget_s for n in traffic.routes), default=0
        )
        self.limited = np.zeros(n, dtype=bool)  # near a rate limit: always through the chain
        for _ in range(2):  # a limit's hot minutes make its routes' backups' minutes hotter
            self.limited |= self._limits_within_reach(quiet)
            quiet &= ~self.limited
        self.latency_s, self.quiet = latency, quiet
        self.done_s = traffic.at_s + latency  # when each would be answered
        self.cache_keys = [
            (self.primary[r].model, name) if scenario.routes[name].cached_share > 0 else None
            for r, name in enumerate(traffic.routes)
        ]
        self.templates: dict[str, Attempt] = {}
        self.wall_start_s = scenario.start.timestamp()
        self.primary_of = {name: self.primary_keys[r] for r, name in enumerate(traffic.routes)}
        self.chain_calls: Counter[tuple[int, str]] = Counter()
        self.chain_troubles: Counter[tuple[int, str]] = Counter()
        self._spans: list[tuple[int, int]] = []  # arrivals fast-forwarded in bulk: [start, stop)
        self._singles: list[int] = []

    # --- which arrivals qualify -------------------------------------------------------------

    def _fault_possible(self, target: str, at_s: np.ndarray) -> np.ndarray:
        hit = np.zeros(len(at_s), dtype=bool)
        for fault in self.scenario.faults:
            if not fault.hits(target):
                continue
            active = (at_s >= fault.start_s) & (at_s < fault.end_s)
            if fault.period_s:
                active &= (at_s - fault.start_s) % fault.period_s < (fault.down_s or 0)
            hit |= active
        return hit

    def _limits_within_reach(self, quiet: np.ndarray) -> np.ndarray:
        """Arrivals whose first target has a rate limit that this minute's traffic could
        reach. Counted as if every retry were made: all requests of the routes it is first
        for, and those of the routes it backs up that are not quiet themselves (in their
        minute and the next, as a fallback may come that much later). A backup's traffic from
        quiet requests is kept out by `ready` instead: it holds while their first target's
        breaker is settled."""
        t = self.traffic
        hot = np.zeros(len(t), dtype=bool)
        minute = (t.at_s // 60).astype(np.int64)
        size = int(minute.max()) + 2 if len(minute) else 0
        tokens = (t.input_tokens + t.output_tokens).astype(np.float64)
        for target, limits in self.scenario.limits.items():
            first = [r for r in range(len(t.routes)) if self.primary_keys[r] == target]
            if not first:
                continue
            backs = self.backed_up_by.get(target, [])
            mine = np.isin(t.route, first)
            spill = np.isin(t.route, backs) & ~quiet
            requests = np.zeros(size)
            used = np.zeros(size)
            for rows, shift in ((mine, 0), (spill, 0), (spill, 1)):
                tries = self._tries(first if rows is mine else backs)
                requests += np.bincount(minute[rows] + shift, minlength=size)[:size] * tries
                used += (
                    np.bincount(minute[rows] + shift, weights=tokens[rows], minlength=size)[:size]
                    * tries
                )
            over = np.zeros(size, dtype=bool)
            if limits.rpm is not None:
                over |= requests >= limits.rpm
            for name in ("tpm", "input_tpm", "output_tpm"):
                if getattr(limits, name, None) is not None:
                    over |= used >= getattr(limits, name)
            hot |= over[minute] & mine
        return hot

    def _tries(self, routes: list[int]) -> int:
        names = [self.traffic.routes[r] for r in routes]
        return 1 + max((self.config.routes[n].policy.primary_retries for n in names), default=0)

    def ready(self, route: int, now: float) -> tuple[bool, float]:
        """Whether `route`'s arrivals may be fast-forwarded from `now` while nothing else
        runs, and from when (its first target's cool-down)."""
        if self.traffic.routes[route] not in self.templates:
            return False, np.inf
        key = self.primary_keys[route]
        status, cooling = self.breakers.status(key, now)
        if key in self.scenario.limits:
            # Its limit leaves no room for requests it backs up unless their own first
            # targets have been settled long enough that none can still be falling back.
            for other in self.backed_up_by.get(key, ()):
                first = self.primary_keys[other]
                self.breakers.catch_up(first, now)
                since = self.breakers.unsettled_until.get(first, -np.inf)
                cooling = max(cooling, since + self.spill_s)
        return status == "closed", cooling

    # --- fast-forwarding --------------------------------------------------------------------

    def bulk(self, start: int, now: float, horizon: float) -> int:
        """Fast-forward arrivals from `start`, before `horizon` (when a chain request may next
        act), while each qualifies; returns the first that does not."""
        t = self.traffic
        if start >= len(t) or t.at_s[start] >= horizon or not self.quiet[start]:
            return start
        ready = [self.ready(r, now) for r in range(len(t.routes))]
        usable = np.array([ok for ok, _ in ready])
        cooling = np.array([c for _, c in ready])
        i, step = start, 64
        while i < len(t):
            end = min(len(t), i + step)
            step = min(CHUNK, step * 4)
            routes = t.route[i:end]
            at = t.at_s[i:end]
            ok = self.quiet[i:end] & usable[routes] & (at >= cooling[routes]) & (at < horizon)
            stop = int(np.argmin(ok)) if not ok.all() else end - i
            if stop:
                self._take(i, i + stop, now)
            i += stop
            if i < end:
                break
        return i

    def one(self, i: int, now: float) -> bool:
        """Fast-forward arrival `i` alone (chain requests are under way) if it qualifies."""
        route = int(self.traffic.route[i])
        if not self.quiet[i]:
            return False
        ok, cooling = self.ready(route, now)
        if not ok or self.traffic.at_s[i] < cooling:
            return False
        done = float(self.traffic.at_s[i] + self.latency_s[i])
        self.breakers.will_succeed_once(self.primary_keys[route], done, now)
        if self.cache_keys[route] is not None:
            self.caches.will_serve_one(self.cache_keys[route], done, now)
        self._singles.append(i)
        return True

    def _take(self, start: int, stop: int, now: float) -> None:
        """Fast-forward the arrivals start..stop-1 (all qualify; none arrives before `now`)."""
        t = self.traffic
        self._spans.append((start, stop))
        done = self.done_s[start:stop]
        routes = t.route[start:stop]
        for r in range(len(t.routes)):
            mine = done[routes == r] if len(t.routes) > 1 else done
            if not len(mine):
                continue
            mine = np.sort(mine)
            self.breakers.will_succeed(self.primary_keys[r], mine, now)
            if self.cache_keys[r] is not None:
                self.caches.will_serve(self.cache_keys[r], mine, now)

    def learn(self, attempt: Attempt) -> None:
        """The attempt hook: keep the chain's record of a quiet success, per route, and count
        the chain's calls and troubles by minute and target (`chain_calls`, `chain_troubles`:
        a failed call at its target, an answer by a backup at its route's primary)."""
        minute = int(attempt.started_at.timestamp()) // 60
        self.chain_calls[(minute, attempt.target)] += 1
        if attempt.outcome != "success":
            # A refused key makes a bad minute alone (engine.core.fault_families): as many
            # troubles as any minute can hold.
            decisive = attempt.fault_kind == "account"
            self.chain_troubles[(minute, attempt.target)] += 10**9 if decisive else 1
        elif attempt.fallback_depth > 0:
            self.chain_troubles[(minute, self.primary_of[attempt.route])] += 1
        if (
            attempt.served
            and attempt.fallback_depth == 0
            and attempt.attempt_number == 1
            and attempt.breaker_state == "closed"
            and attempt.route not in self.templates
            and attempt.quality_error is None
        ):
            self.templates[attempt.route] = attempt

    @property
    def count(self) -> int:
        return sum(b - a for a, b in self._spans) + len(self._singles)

    def rows(self) -> np.ndarray:
        """The arrivals fast-forwarded, in order (simulations.whatif.fastforward_rows writes
        them)."""
        parts = [np.arange(a, b) for a, b in self._spans]
        parts.append(np.array(self._singles, dtype=np.int64))
        return np.sort(np.concatenate(parts))
