"""The simulator's fast path: requests whose whole pass through the chain is known on arrival
are answered without running it, in bulk, as columns.

A request's pass is known when it makes one call and that call is answered: on arrival,
- its route's chain can only do one thing with a healthy answer: no PII masking, no output
  contract, no adaptive or own-keys order, no operator switch, no prompt of the primary's own
  (those change what is sent, checked or tried first);
- every target before one (its `Way`) has its breaker open, and stays open past the arrival
  (the chain passes over each without a call); that one's breaker is closed and not cooling
  (both read from the real breaker store, where nothing is pending that could change them:
  simulations.whatif.pending_breakers);
- no fault of the scenario is active on that target, and the call's latency (drawn with the
  traffic) is inside the attempt's time limit;
- the target's rate limits let the call in (`MinuteLimits`, counted in time order with every
  call the chain makes).
On a quiet day the way is the primary; during an outage, once the primary's breaker is open,
it is the backup, up to the moment its breaker lets a probe through.

Such a request's attempt is the chain's own record of the same pass on that route (captured
from the first one the chain ran: `templates`) with only what varies filled in: when it began,
its latency, its tokens (the prompt cache decided as `SimulatedProvider` decides it) and its
cost, from the same `Pricer` (`Pricer.price_columns`, the same rates, tiers and rounding).

Its effects on what later requests meet are kept exactly:
- the breaker's Success is applied in time order with the chain's own events on that target;
- its prompt-cache write or read is known to the chain's requests that complete after it
  (`Caches`), and its own warm or cold state is settled at the end against every answer, the
  chain's included;
- its call counts against the target's rate limits at its arrival.
Nothing of the chain acts between the arrivals answered at once (the loop's next timer bounds
each stretch), so every one of these is met in the order the chain would have met it. A
differential test (tests/simulations/test_fastforward.py) runs scenarios both ways and
requires the same attempts, rollups and incidents.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.config import Config
from engine.core.attempt import Attempt
from engine.core.skips import SkipReason
from simulations.whatif.pending_breakers import PendingBreakers
from simulations.whatif.scenario import Scenario
from simulations.whatif.simulated import Caches, MinuteLimits, SimulatedProvider
from simulations.whatif.ways import Way, Ways

CHUNK = 65_536  # arrivals looked at per step of a bulk stretch
Ready = tuple[Way | None, float]  # a route's way from now, and until when it holds


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
        limits: MinuteLimits,
        switches: Any,
    ) -> None:
        self.scenario, self.config, self.traffic = scenario, config, traffic
        self.breakers, self.caches, self.limits = breakers, caches, limits
        self.first_z = first_z
        n = len(traffic)
        self.ways = Ways(scenario, config, traffic.routes, providers, switches)
        self.primary_of = {name: config.routes[name].targets[0].name for name in traffic.routes}
        self.taken = np.full(n, -1, dtype=np.int16)  # the way each fast-forwarded one took
        self.latency_s = np.full(n, np.nan)  # its call's latency (0: no call)
        self.templates: dict[int, Attempt] = {}  # way → the chain's record of it
        self.wall_start_s = scenario.start.timestamp()
        self.chain_calls: Counter[tuple[int, str]] = Counter()
        self.chain_troubles: Counter[tuple[int, str]] = Counter()

    # --- which arrivals qualify -------------------------------------------------------------

    def ready(self, route: int, now: float) -> Ready:
        """The way `route`'s arrivals take from `now` while nothing else runs, and until when
        it holds (the first target passed over that would let a request in). No way when the
        chain must decide: a breaker half-open, or a way the chain has not yet recorded."""
        targets = self.ways.targets[route]
        if targets is None:
            return None, -np.inf
        passed: list[str] = []
        until = np.inf
        for target in targets:
            state = self.breakers.state(target.name, now)
            if state.status == "open" and (state.open_until or -np.inf) > now:
                passed.append(SkipReason.BREAKER_OPEN)
                until = min(until, state.open_until or -np.inf)
            elif state.status == "closed" and (state.cooling_until or -np.inf) > now:
                passed.append(SkipReason.COOLING_DOWN)
                until = min(until, state.cooling_until or -np.inf)
            elif state.status == "closed":
                break
            else:
                return None, -np.inf
        way = self.ways.find(route, tuple(passed))
        if way is None or way.id not in self.templates:
            return None, -np.inf
        return way, until

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

    def _qualify(
        self, start: int, stop: int, ready: list[Ready], horizon: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """(qualifies, latency) of arrivals start..stop-1, each on its route's way."""
        t = self.traffic
        at = t.at_s[start:stop]
        routes = t.route[start:stop]
        ok = at < horizon
        latency = np.zeros(len(at))
        for r, (way, until) in enumerate(ready):
            mine = routes == r if len(ready) > 1 else slice(None)
            if way is None:
                ok[mine] = False
                continue
            mine_at = at[mine]
            if way.target is None:  # no call: nothing can go otherwise
                ok[mine] &= mine_at < until
                continue
            lat = way.median_s * np.exp(way.sigma * self.first_z[start:stop][mine])
            latency[mine] = lat
            ok[mine] &= (
                (mine_at < until)
                & (lat < way.limit_s * (1 - 1e-9))
                & ~self._fault_possible(way.target.name, mine_at)
            )
        return ok, latency

    def _within_limits(self, start: int, stop: int, limited: list[tuple[str, list[int]]]) -> int:
        """How many of arrivals start..stop-1 (all qualifying otherwise) the rate limits of
        their ways' targets let in, up to the first they refuse."""
        t = self.traffic
        cut = stop - start
        for target, rows in self._calls(start, stop, limited):
            k = self.limits.passing(
                target, t.at_s[rows], t.input_tokens[rows], t.output_tokens[rows]
            )
            if k < len(rows):
                cut = min(cut, int(rows[k]) - start)
        return cut

    def _calls(
        self, start: int, stop: int, limited: list[tuple[str, list[int]]]
    ) -> list[tuple[str, np.ndarray]]:
        """Each limited target's arrivals among start..stop-1 (`limited`: the targets the
        routes' ways call, each with its routes)."""
        routes = self.traffic.route[start:stop]
        found = []
        for target, mine in limited:
            rows = routes == mine[0] if len(mine) == 1 else np.isin(routes, mine)
            found.append((target, start + np.flatnonzero(rows)))
        return found

    def _limited(self, ready: list[Ready]) -> list[tuple[str, list[int]]]:
        """The rate-limited targets these ways call, each with the routes that call it."""
        found: dict[str, list[int]] = {}
        for r, (way, _) in enumerate(ready):
            if way is not None and way.target is not None and way.target.name in self.limits:
                found.setdefault(way.target.name, []).append(r)
        return list(found.items())

    # --- fast-forwarding --------------------------------------------------------------------

    def bulk(self, start: int, now: float, horizon: float) -> int:
        """Fast-forward arrivals from `start`, before `horizon` (when a chain request may next
        act), while each qualifies; returns the first that does not."""
        t = self.traffic
        if start >= len(t) or t.at_s[start] >= horizon:
            return start
        ready = [self.ready(r, now) for r in range(len(t.routes))]
        if all(way is None for way, _ in ready):
            return start
        limited = self._limited(ready)
        i, step = start, 64
        while i < len(t):
            end = min(len(t), i + step)
            step = min(CHUNK, step * 4)
            ok, latency = self._qualify(i, end, ready, horizon)
            stop = int(np.argmin(ok)) if not ok.all() else end - i
            if stop and limited:
                stop = self._within_limits(i, i + stop, limited)
            if stop:
                self._take(i, i + stop, ready, limited, latency[:stop], now)
            i += stop
            if i < end:
                break
        return i

    def one(self, i: int, now: float) -> bool:
        """Fast-forward arrival `i` alone (chain requests are under way) if it qualifies."""
        t = self.traffic
        way, until = self.ready(int(t.route[i]), now)
        at = float(t.at_s[i])
        if way is None or at >= until:
            return False
        latency = 0.0
        if way.target is not None:
            target = way.target.name
            latency = way.median_s * math.exp(way.sigma * float(self.first_z[i]))
            if latency >= way.limit_s * (1 - 1e-9):
                return False
            if self._fault_possible(target, t.at_s[i : i + 1])[0]:
                return False
            prompt, output = int(t.input_tokens[i]), int(t.output_tokens[i])
            if self.limits.over(target, at, prompt, output) is not None:  # counted if not
                return False
            self.breakers.will_succeed_once(target, at + latency, now)
            if way.cache_key is not None:
                self.caches.will_serve_one(way.cache_key, at + latency, now)
        self.taken[i], self.latency_s[i] = way.id, latency
        return True

    def _take(
        self,
        start: int,
        stop: int,
        ready: list[Ready],
        limited: list[tuple[str, list[int]]],
        latency: np.ndarray,
        now: float,
    ) -> None:
        """Fast-forward the arrivals start..stop-1 (all qualify; none arrives before `now`)."""
        t = self.traffic
        self.latency_s[start:stop] = latency
        routes = t.route[start:stop]
        done = t.at_s[start:stop] + latency
        for r, (way, _) in enumerate(ready):
            if way is None:
                continue
            mine = routes == r if len(ready) > 1 else slice(None)
            self.taken[start:stop][mine] = way.id
            finished = np.sort(done[mine])
            if way.target is None or not len(finished):
                continue
            self.breakers.will_succeed(way.target.name, finished, now)
            if way.cache_key is not None:
                self.caches.will_serve(way.cache_key, finished, now)
        for target, rows in self._calls(start, stop, limited):
            self.limits.count(target, t.at_s[rows], t.input_tokens[rows], t.output_tokens[rows])

    def learn(self, attempt: Attempt) -> None:
        """The attempt hook: keep the chain's record of each way, and count the chain's calls
        and troubles by minute and target (`chain_calls`, `chain_troubles`: a failed call or
        a request that made none at its target, an answer by a backup at its route's
        primary)."""
        minute = int(attempt.started_at.timestamp()) // 60
        self.chain_calls[(minute, attempt.target)] += 1
        if attempt.outcome != "success":
            # A refused key makes a bad minute alone (engine.core.fault_families): as many
            # troubles as any minute can hold.
            decisive = attempt.fault_kind == "account"
            self.chain_troubles[(minute, attempt.target)] += 10**9 if decisive else 1
        elif attempt.fallback_depth > 0:
            self.chain_troubles[(minute, self.primary_of[attempt.route])] += 1
        way = self.ways.of_record(attempt)
        if way is not None and way.id not in self.templates:
            self.templates[way.id] = attempt

    @property
    def count(self) -> int:
        return int((self.taken >= 0).sum())

    def rows(self) -> np.ndarray:
        """The arrivals fast-forwarded, in order (simulations.whatif.fastforward_rows writes
        them)."""
        return np.flatnonzero(self.taken >= 0)
