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
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.config import Config, RouteConfig
from engine.core.attempt import Attempt
from engine.core.pricing import Pricer
from engine.fallback.policy import Policy
from engine.state.breaker import (
    WINDOW_BUCKETS,
    BreakerState,
    MemoryBreakerStore,
    Success,
    transition,
)
from engine.telemetry import columns as records
from simulations.whatif.scenario import Scenario
from simulations.whatif.simulated import CACHE_TTL_S, Caches, SimulatedProvider

ROWS_PER_FILE = 500_000
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

    def will_succeed(self, key: str, times: np.ndarray) -> None:
        """Successes to report on `key` at these (sorted) times."""
        if len(times):
            pending = self._pending.get(key)
            merged = times if pending is None else np.concatenate([pending, times])
            if pending is not None and len(pending) and pending[-1] > times[0]:
                merged.sort(kind="mergesort")
            self._pending[key] = merged

    def will_succeed_once(self, key: str, at: float) -> None:
        self.will_succeed(key, np.array([at]))

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
        for _ in range(2):  # a limit's hot minutes make its routes' backups' minutes hotter
            quiet &= ~self._limits_within_reach(quiet)
        self.latency_s, self.quiet = latency, quiet
        self.done_s = traffic.at_s + latency  # when each would be answered
        self._cache_keys = [
            (self.primary[r].model, name) if scenario.routes[name].cached_share > 0 else None
            for r, name in enumerate(traffic.routes)
        ]
        self.templates: dict[str, Attempt] = {}
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
                self._take(i, i + stop)
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
        self.breakers.will_succeed_once(self.primary_keys[route], done)
        if self._cache_keys[route] is not None:
            self.caches.will_serve_one(self._cache_keys[route], done)
        self._singles.append(i)
        return True

    def _take(self, start: int, stop: int) -> None:
        """Fast-forward the arrivals start..stop-1 (all qualify)."""
        t = self.traffic
        self._spans.append((start, stop))
        done = self.done_s[start:stop]
        routes = t.route[start:stop]
        for r in range(len(t.routes)):
            mine = done[routes == r] if len(t.routes) > 1 else done
            if not len(mine):
                continue
            mine = np.sort(mine)
            self.breakers.will_succeed(self.primary_keys[r], mine)
            if self._cache_keys[r] is not None:
                self.caches.will_serve(self._cache_keys[r], mine)

    def learn(self, attempt: Attempt) -> None:
        """The attempt hook: keep the chain's record of a quiet success, per route."""
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

    # --- writing ----------------------------------------------------------------------------

    def write(self, spool: Path, pricer: Pricer, wall_start: datetime, served: dict) -> int:
        """Write every fast-forwarded attempt into the spool, as the recorder would have.
        `served`: (model, route) → the times the chain's own requests were answered."""
        parts = [np.arange(a, b) for a, b in self._spans]
        parts.append(np.array(self._singles, dtype=np.int64))
        rows = np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
        if not len(rows):
            return 0
        warm = self._warm(rows, served)
        spool.mkdir(parents=True, exist_ok=True)
        for lo in range(0, len(rows), ROWS_PER_FILE):
            chunk = slice(lo, lo + ROWS_PER_FILE)
            table = self._table(rows[chunk], warm[chunk], pricer, wall_start)
            name = f"fastforward-{os.getpid()}-{uuid.uuid4().hex[:8]}-{lo // ROWS_PER_FILE:06d}"
            tmp = spool / f".{name}.tmp"
            pq.write_table(table, tmp)
            tmp.rename(spool / f"{name}.parquet")
        return len(rows)

    def _warm(self, rows: np.ndarray, served: dict) -> np.ndarray:
        """Each fast-forwarded request's cache state: warm when anything on the same model and
        route was answered less than CACHE_TTL_S before it completed."""
        t = self.traffic
        warm = np.zeros(len(rows), dtype=bool)
        done = t.at_s[rows] + self.latency_s[rows]
        for r in range(len(t.routes)):
            key = self._cache_keys[r]
            if key is None:
                continue
            mine = np.flatnonzero(t.route[rows] == r)
            others = np.array(served.get(key, ()), dtype=np.float64)
            every = np.sort(np.concatenate([done[mine], others]))
            # The latest answer strictly before each of ours.
            before = np.searchsorted(every, done[mine], side="left") - 1
            prev = np.where(before >= 0, every[np.maximum(before, 0)], -np.inf)
            warm[mine] = prev + CACHE_TTL_S > done[mine]
        return warm

    def _table(
        self, rows: np.ndarray, warm: np.ndarray, pricer: Pricer, wall_start: datetime
    ) -> pa.Table:
        """The rows as the recorder's Parquet table, one route at a time: the template's
        values repeated, what varies from the arrays."""
        t = self.traffic
        base_us = int(wall_start.timestamp() * 1_000_000)
        tables = []
        for r in np.unique(t.route[rows]):
            mine = t.route[rows] == r
            tables.append(self._route_table(int(r), rows[mine], warm[mine], pricer, base_us))
        return pa.concat_tables(tables)

    def _route_table(
        self, route: int, rows: np.ndarray, warm: np.ndarray, pricer: Pricer, base_us: int
    ) -> pa.Table:
        t = self.traffic
        n = len(rows)
        name = t.routes[route]
        prompt = t.input_tokens[rows]
        share = self.scenario.routes[name].cached_share
        # int(prompt × share), as SimulatedProvider computes it (the same doubles).
        cacheable = (prompt.astype(np.float64) * share).astype(np.int64)
        counts = (prompt - cacheable, t.output_tokens[rows], np.where(warm, cacheable, 0),
                  np.where(warm, 0, cacheable))  # fmt: skip
        # As `timedelta(seconds=t)` rounds (the clock's `wall`): whole seconds, then the
        # fraction's microseconds half-even.
        fraction, whole = np.modf(t.at_s[rows])
        started_us = whole.astype(np.int64) * 1_000_000 + np.rint(fraction * 1e6).astype(np.int64)
        started_us += base_us
        template = self.templates[name]
        cost, priced, source = self._price(template, counts, started_us, pricer)
        fixed = records.to_row(template, None, None)
        varying: dict[str, pa.Array] = {
            "request_id": pc.binary_join_element_wise(
                "ff-", pc.cast(pa.array(rows), pa.string()), ""
            ),
            "started_at": pa.array(started_us, pa.timestamp("us", tz="UTC")),
            "latency_ms": pa.array(self.latency_s[rows] * 1000, pa.float64()),
            "input_tokens": pa.array(counts[0], pa.int64()),
            "output_tokens": pa.array(counts[1], pa.int64()),
            "cache_read_tokens": pa.array(counts[2], pa.int64()),
            "cache_write_tokens": pa.array(counts[3], pa.int64()),
            "cost_usd": _decimal_column(cost, priced),
            "price_source": pa.array(source, pa.string()),
        }
        columns = [
            varying.get(c.name) or pa.repeat(pa.scalar(fixed[c.name], c.arrow), n)
            for c in records.COLUMNS
        ]
        return pa.table(columns, schema=records.ARROW_SCHEMA)

    def _price(
        self, template: Attempt, counts: tuple, started_us: np.ndarray, pricer: Pricer
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(costs in nano-dollars, priced, source) of one target's rows, by the minute (a
        price may change at any minute: off-peak hours)."""
        n = len(started_us)
        cost = np.zeros(n, dtype=np.int64)
        priced = np.ones(n, dtype=bool)
        source = np.empty(n, dtype=object)
        minutes = started_us // 60_000_000
        order = np.argsort(minutes, kind="stable")
        bounds = np.flatnonzero(np.diff(minutes[order])) + 1
        for group in np.split(order, bounds):
            at = datetime.fromtimestamp(int(minutes[group[0]]) * 60, tz=UTC)
            part = tuple(c[group] for c in counts)
            found = pricer.price_columns(
                template.provider, template.provider_kind, template.model, at, part
            )
            if found is None:  # only `price` can say: one attempt at a time
                for j, row in enumerate(group):
                    value, row_source = pricer.price(_with_counts(template, part, j))
                    priced[row] = value is not None
                    cost[row] = 0 if value is None else int(value.scaleb(9).to_integral_value())
                    source[row] = row_source
                continue
            nano, source[group] = found
            if nano is None:
                priced[group] = False
            else:
                cost[group] = nano
        return cost, priced, source


def _with_counts(template: Attempt, counts: tuple, j: int) -> Attempt:
    return dataclasses.replace(
        template,
        input_tokens=int(counts[0][j]),
        output_tokens=int(counts[1][j]),
        cache_read_tokens=int(counts[2][j]),
        cache_write_tokens=int(counts[3][j]),
    )


def _decimal_column(nano: np.ndarray, valid: np.ndarray) -> pa.Array:
    """Nano-dollar integers as the recorder's DECIMAL(18,9) column (NULL where unpriced)."""
    n = len(nano)
    words = np.zeros((n, 2), dtype=np.int64)
    words[:, 0] = nano
    words[:, 1] = np.where(nano < 0, -1, 0)  # two's complement high word
    validity = pa.array(valid, pa.bool_()).buffers()[1] if not valid.all() else None
    return pa.Array.from_buffers(
        records.COST_TYPE, n, [validity, pa.py_buffer(words.tobytes())], null_count=-1
    )
