"""What the fast-forwarded requests leave in a run's results store.

Near a fault of the scenario or the chain's troubles (`BUSY_MARGIN` minutes either side), and
wherever a backup answered, each one is an attempt row, written into the spool as the recorder
would have written it: an incident's figures read every request of its minutes
(engine/alerts/incident_impact.py).
Everywhere else (nearly all of a long scenario: a week with a 2-hour outage is 98 % quiet
minutes) they go straight into the minute rollups as columns, without writing, ingesting and
aggregating millions of rows that all say "answered at once by the primary", and their
latencies into the table `quiet_answers`, which the results' latency quantiles read beside the
attempts.

The minute rollups come out as the rollup query (engine/store/rollup_queries.py, MINUTES) would
have made them from every row, because the scheduler's cycle calls `QuietMinutes.merge` right
after each refresh of its minutes, before the hours and the incident pass read them:
- counts, tokens and money are sums: the quiet requests' are added to the chain's;
- a minute's latency percentiles are computed again over both, where the chain also ran;
- a primary's answer re-warms its cache when backups served its route more than the primary
  in the 5 minutes before: those counts, hence the re-warm cost, are computed again with the
  quiet answers counted.
The differential test (tests/simulations/test_fastforward.py) runs every library scenario both
ways, with no margin too, and requires the same rollups, incidents and results.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine.alerts.incidents import IncidentPolicy
from engine.core.attempt import Attempt
from engine.core.pricing import Pricer
from engine.store.rollup_queries import ADDITIVE, REWARM_COST, REWARMING, REWARMING_WINDOW
from engine.store.rollups import bucket_end, bucket_start
from engine.telemetry import columns as records
from simulations.whatif.results import QUIET_ANSWERS, quantile_cont, quantile_cont_groups
from simulations.whatif.simulated import CACHE_TTL_S

if TYPE_CHECKING:
    import duckdb

    from simulations.whatif.fastforward import FastForward
    from simulations.whatif.ways import Way

ROWS_PER_FILE = 500_000
BUSY_MARGIN = 30  # minutes either side of a fault of the scenario: rows
# Minutes either side of the chain's sporadic troubles (a timeout when traffic is thin): an
# incident they begin is over a few minutes later, and its figures read 5 minutes around it.
TROUBLE_MARGIN = 15
# An incident needs `min_faults` of evidence (faults, requests held back) while it lasts, and
# it ends 15 minutes without a call or a few answers after its last bad minute: troubles at a
# target with fewer than that within this many minutes either side are noise (a lone timeout).
EVIDENCE_REACH = 60
_MINUTE_US = 60_000_000
QUANTILES = (0.5, 0.95, 0.99)  # the rollup's latency_p50_ms, latency_p95_ms, latency_p99_ms
LATENCY = ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms")
TTFT = ("ttft_p50_ms", "ttft_p95_ms")
KEYS = ("bucket", "route", "provider", "model", "target", "feature")


@dataclass
class RouteColumns:
    """One route's fast-forwarded requests, as the values their attempt rows would hold."""

    rows: np.ndarray  # arrival numbers
    started_us: np.ndarray
    latency_ms: np.ndarray
    counts: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # in, out, cache read, write
    cost: np.ndarray  # nano-dollars
    priced: np.ndarray
    source: np.ndarray

    def take(self, mask: np.ndarray) -> RouteColumns:
        return RouteColumns(
            self.rows[mask],
            self.started_us[mask],
            self.latency_ms[mask],
            tuple(c[mask] for c in self.counts),  # type: ignore[arg-type]
            self.cost[mask],
            self.priced[mask],
            self.source[mask],
        )


@dataclass
class QuietMinutes:
    """The minute rollups and answer latencies of the requests that were not written as rows:
    one row a minute and route (`groups`), with each group's latencies, sorted (`latency`
    from `starts`, `sizes` long), to compute its percentiles again beside the chain's."""

    groups: pa.Table | None = None
    latency: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    starts: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    sizes: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    ttft: dict[str, float | None] = dataclasses.field(default_factory=dict)  # route → template's
    answers: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    requests: int = 0
    _buckets: np.ndarray | None = None

    def merge(self, con: duckdb.DuckDBPyConnection, lo: datetime, hi: datetime) -> None:
        """The scheduler's `after_minutes`: add the quiet minutes in [lo, hi] to the minute
        rollups it has just refreshed from the rows."""
        if self.groups is None:
            return
        lo, hi = bucket_start(lo, "minute"), bucket_end(hi, "minute")
        bucket = self._bucket_us()
        lo_us, hi_us = int(lo.timestamp() * 1e6), int(hi.timestamp() * 1e6)
        mine = np.flatnonzero((bucket >= lo_us) & (bucket < hi_us))
        near = np.flatnonzero((bucket >= lo_us - 5 * _MINUTE_US) & (bucket < hi_us))
        if not len(near):
            return
        bounds = {"lo": lo, "hi": hi}
        part = self._with_chain_spread(con, self.groups.take(mine), mine, bounds)
        con.register("quiet_part", part)
        con.register("quiet_near", self.groups.take(near))
        try:
            con.execute("BEGIN TRANSACTION")
            con.execute(_MERGED)
            con.execute(_DROP_MERGED)
            con.execute("INSERT INTO rollup_minute BY NAME SELECT * FROM quiet_merged")
            con.execute(_REWARM, bounds)
            con.execute(_SET_REWARM)
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        finally:
            con.unregister("quiet_part")
            con.unregister("quiet_near")

    def store(self, con: duckdb.DuckDBPyConnection) -> None:
        """Once the scheduler has finished: `quiet_answers`. The run's hour and day rollups
        are dropped: their percentiles, from the rows, miss the quiet minutes' answers, and
        nothing reads them."""
        answers = pa.table({"ms": pa.array(self.answers, pa.float64())})
        con.register("quiet_latencies", answers)
        try:
            con.execute(f"CREATE OR REPLACE TABLE {QUIET_ANSWERS} AS SELECT * FROM quiet_latencies")
        finally:
            con.unregister("quiet_latencies")
        con.execute("DELETE FROM rollup_hour")
        con.execute("DELETE FROM rollup_day")

    def _bucket_us(self) -> np.ndarray:
        """The groups' minutes in microseconds, converted once (every refresh reads them)."""
        if self._buckets is None:
            assert self.groups is not None
            column = self.groups.column("bucket").combine_chunks()
            self._buckets = pc.cast(column, pa.int64()).to_numpy()
        return self._buckets

    def _with_chain_spread(
        self, con: duckdb.DuckDBPyConnection, part: pa.Table, mine: np.ndarray, bounds: dict
    ) -> pa.Table:
        """`part` with the percentiles of the groups where the chain ran too computed again
        over both's latencies (the chain's from its attempts in those minutes)."""
        con.register("quiet_part", part)
        try:
            chain = con.execute(_CHAIN_SPREAD, bounds).fetchall()
        finally:
            con.unregister("quiet_part")
        if not chain:
            return part
        found: dict[tuple, tuple[list, list]] = defaultdict(lambda: ([], []))
        for *key, latency, ttft in chain:
            latencies, ttfts = found[tuple(key)]
            latencies.append(latency)
            if ttft is not None:
                ttfts.append(ttft)
        keys = zip(*(part.column(k).to_pylist() for k in KEYS), strict=True)
        spread = {name: part.column(name).to_pylist() for name in (*LATENCY, *TTFT)}
        for row, key in enumerate(keys):
            if key not in found:
                continue
            latencies, ttfts = found[key]
            g = mine[row]
            ours = self.latency[self.starts[g] : self.starts[g] + self.sizes[g]]
            both = np.sort(np.concatenate([ours, np.array(latencies, dtype=np.float64)]))
            for q, name in zip(QUANTILES, LATENCY, strict=True):
                spread[name][row] = quantile_cont(both, q)
            template_ttft = self.ttft[key[1]]
            if template_ttft is not None:
                ttfts += [template_ttft] * int(self.sizes[g])
            values = np.sort(np.array(ttfts, dtype=np.float64))
            for q, name in zip(QUANTILES, TTFT, strict=False):
                spread[name][row] = quantile_cont(values, q) if len(values) else None
        for name, values in spread.items():
            part = part.set_column(
                part.schema.get_field_index(name), name, pa.array(values, pa.float64())
            )
        return part


_JOIN_KEYS = " AND ".join(f"r.{k} = q.{k}" for k in KEYS)
# The chain's attempts in the minutes and groups of `quiet_part`, for their percentiles.
_CHAIN_SPREAD = f"""
    SELECT r.bucket, r.route, r.provider, r.model, r.target, r.feature, r.latency_ms,
        CASE WHEN r.outcome = 'success' THEN r.ttft_ms END
    FROM (
        SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, route, provider, model,
            target, coalesce(feature, '') AS feature, latency_ms, ttft_ms, outcome
        FROM attempts WHERE started_at >= $lo AND started_at < $hi AND outcome <> 'skipped'
    ) r SEMI JOIN quiet_part q ON {_JOIN_KEYS}
"""
# Each group's sums with the quiet part's; percentiles the quiet part's (computed over both).
_MERGED = f"""
    CREATE OR REPLACE TEMP TABLE quiet_merged AS
    SELECT {", ".join(KEYS)},
        {", ".join(f"sum({c}) AS {c}" for c in ADDITIVE)},
        {", ".join(f"max({c}) FILTER (quiet) AS {c}" for c in (*LATENCY, *TTFT))}
    FROM (
        SELECT r.*, false AS quiet FROM rollup_minute r SEMI JOIN quiet_part q ON {_JOIN_KEYS}
        UNION ALL BY NAME SELECT *, true AS quiet FROM quiet_part
    )
    GROUP BY ALL
"""
_DROP_MERGED = f"DELETE FROM rollup_minute r USING quiet_part q WHERE {_JOIN_KEYS}"
# The re-warm cost of every group in [$lo, $hi), its flags counted with the quiet answers.
_PRIMARY_PRICES = """
    LEFT JOIN route_primaries pr ON pr.route = a.route
    LEFT JOIN prices px ON px.provider IS NOT DISTINCT FROM pr.provider
        AND px.provider_kind = pr.provider_kind AND px.model = pr.model
    LEFT JOIN flags f ON f.route = a.route AND f.minute = a.bucket
"""
_REWARM = f"""
    CREATE OR REPLACE TEMP TABLE quiet_rewarm AS
    WITH served AS (
        SELECT route, minute, sum(by_primary) AS by_primary, sum(by_backup) AS by_backup FROM (
            SELECT route, time_bucket(INTERVAL 1 MINUTE, started_at) AS minute,
                count(*) FILTER (fallback_depth = 0) AS by_primary,
                count(*) FILTER (fallback_depth > 0) AS by_backup
            FROM attempts
            WHERE served AND outcome = 'success'
                AND started_at >= $lo::TIMESTAMPTZ - INTERVAL 5 MINUTE AND started_at < $hi
            GROUP BY ALL
            UNION ALL SELECT route, bucket, answered, 0 FROM quiet_near
        ) GROUP BY ALL
    ),
    flags AS (SELECT route, minute, {REWARMING} AS rewarming FROM served WINDOW {REWARMING_WINDOW}),
    rows AS (
        SELECT a.*, px.p_cache_write, px.p_cache_read, coalesce(f.rewarming, false) AS rewarming
        FROM (
            SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, route, provider, model,
                target, coalesce(feature, '') AS feature, outcome, fallback_depth,
                cache_write_tokens
            FROM attempts WHERE started_at >= $lo AND started_at < $hi AND outcome <> 'skipped'
            UNION ALL
            SELECT bucket, route, provider, model, target, feature, 'success', 0,
                cache_write_tokens
            FROM quiet_part
        ) a {_PRIMARY_PRICES}
    )
    SELECT {", ".join(KEYS)},
        coalesce(sum({REWARM_COST}) FILTER (
            a.outcome = 'success' AND a.fallback_depth = 0 AND a.rewarming), 0)::DECIMAL(18,9)
            AS rewarm_usd
    FROM rows a GROUP BY ALL
"""
_SET_REWARM = f"""
    UPDATE rollup_minute r SET rewarm_usd = q.rewarm_usd FROM quiet_rewarm q WHERE {_JOIN_KEYS}
"""


def write(
    ff: FastForward,
    spool: Path,
    pricer: Pricer,
    wall_start: datetime,
    served: dict,
    busy_margin: int = BUSY_MARGIN,
) -> QuietMinutes:
    """Write the fast-forwarded requests near a fault or a limit into the spool, and return
    the rest as minute rollups. `served`: (model, route) → when the chain's own requests were
    answered."""
    rows = ff.rows()
    base_us = int(wall_start.timestamp() * 1_000_000)
    busy = _busy_minutes(ff, rows, base_us, busy_margin)
    warm = _warm(ff, rows, served)
    spool.mkdir(parents=True, exist_ok=True)
    tables: list[pa.Table] = []
    quiet: list[tuple[Attempt, RouteColumns]] = []
    written = 0
    for way, mine in _by_way(ff, rows):
        route = _route_columns(ff, way, rows[mine], warm[mine], pricer, base_us)
        # A backup's answers are always rows: something happened (and the minute rollups of
        # quiet minutes hold first answers only).
        near = busy(route.started_us, way.first) | (way.depth > 0)
        template = ff.templates[way.id]
        if near.any():
            tables.append(_route_table(template, route.take(near)))
            written += int(near.sum())
        if not near.all():
            quiet.append((template, route.take(~near)))
    _spool_tables(spool, tables)
    return _quiet_minutes(quiet, len(rows) - written)


def _by_way(ff: FastForward, rows: np.ndarray) -> list[tuple[Way, np.ndarray]]:
    """The fast-forwarded arrivals `rows` by the way they took, each with its mask."""
    taken = ff.taken[rows]
    return [(ff.ways.all[w], taken == w) for w in np.unique(taken).tolist()]


def _busy_minutes(ff: FastForward, rows: np.ndarray, base_us: int, margin: int) -> Any:
    """A test of a primary's answers' start times: within `margin` minutes of a fault of the
    scenario (from its start to its end), or of a minute in which the troubles at that
    primary could begin an incident (`_troubled`: a rate limit's refusals among them). An
    incident at a target reads the requests of the routes it is first for and those that
    tried it: a quiet answer by another route's primary is none of its business."""
    t = ff.traffic
    if not len(t):
        return lambda started_us, primary: np.zeros(len(started_us), dtype=bool)
    first = (base_us + int(t.at_s[0] * 1e6)) // _MINUTE_US
    size = (base_us + int(t.at_s[-1] * 1e6)) // _MINUTE_US - first + 2

    def minute(at_s: Any) -> Any:
        return (base_us + np.asarray(at_s) * 1e6).astype(np.int64) // _MINUTE_US - first

    faults = np.zeros(size + 1, dtype=np.int64)  # +1 at a busy stretch's start, -1 past its end
    for fault in ff.scenario.faults:
        lo, hi = minute([fault.start_s, min(fault.end_s, float(t.at_s[-1]))])
        np.add.at(faults, [max(0, lo - margin), min(size, max(0, hi + margin + 1))], [1, -1])
    width = min(margin, TROUBLE_MARGIN)
    near: dict[str, np.ndarray] = {}
    troubled = _troubled(ff, rows)
    for primary in set(ff.primary_of.values()):
        marks = faults.copy()
        at = troubled.get(primary, np.empty(0, np.int64)) - first
        np.add.at(marks, np.clip(at - width, 0, size), 1)
        np.add.at(marks, np.clip(at + width + 1, 0, size), -1)
        near[primary] = np.cumsum(marks)[:size] > 0

    def test(started_us: np.ndarray, primary: str) -> np.ndarray:
        return near[primary][np.clip(started_us // _MINUTE_US - first, 0, size - 1)]

    return test


def _troubled(ff: FastForward, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per target, the minutes (since 1970) in which its failed calls, or the answers by a
    backup of a route it is first for (the chain's and the fast-forward's), are at least half
    the incident rule's fault rate of every call to it (or a refused key, which alone makes a
    bad minute), with the rule's least evidence within EVIDENCE_REACH: a sporadic timeout
    among hundreds of answers cannot begin an incident, among a few it can, and an
    incident's figures read the rows of its minutes."""
    t = ff.traffic
    calls, troubles = Counter(ff.chain_calls), Counter(ff.chain_troubles)
    wall = (ff.wall_start_s + t.at_s[rows]).astype(np.int64) // 60
    for way, mine in _by_way(ff, rows):
        minutes, n = np.unique(wall[mine], return_counts=True)
        primary = ff.primary_of[way.route]
        for m, k in zip(minutes.tolist(), n.tolist(), strict=True):
            calls[(m, way.record_target)] += k
            if way.depth > 0:  # an answer by a backup, or no call at all
                troubles[(m, primary)] += k
    policy = IncidentPolicy()
    share = policy.fault_rate / 2
    by_target: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (m, target), bad in troubles.items():
        by_target[target].append((m, bad))
    troubled: dict[str, np.ndarray] = {}
    for target, found in by_target.items():
        found.sort()
        minutes = np.array([m for m, _ in found], dtype=np.int64)
        running = np.cumsum([0] + [bad for _, bad in found])
        lo = np.searchsorted(minutes, minutes - EVIDENCE_REACH, side="left")
        hi = np.searchsorted(minutes, minutes + EVIDENCE_REACH, side="right")
        nearby = running[hi] - running[lo]  # the troubles at the target within reach
        troubled[target] = np.array(
            [
                m
                for (m, bad), evidence in zip(found, nearby.tolist(), strict=True)
                if bad >= share * calls[(m, target)] and evidence >= policy.min_faults
            ],
            dtype=np.int64,
        )
    return troubled


def _warm(ff: FastForward, rows: np.ndarray, served: dict) -> np.ndarray:
    """Each fast-forwarded request's cache state: warm when anything on the same model and
    route was answered less than CACHE_TTL_S before it completed."""
    t = ff.traffic
    warm = np.zeros(len(rows), dtype=bool)
    done = t.at_s[rows] + ff.latency_s[rows]
    on_key: dict[Any, np.ndarray] = {}
    for way, mine in _by_way(ff, rows):
        if way.cache_key is not None:
            before = on_key.get(way.cache_key)
            on_key[way.cache_key] = mine if before is None else before | mine
    for key, mine in on_key.items():
        ours = done[mine]
        others = np.array(served.get(key, ()), dtype=np.float64)
        every = np.sort(np.concatenate([ours, others]))
        # The latest answer strictly before each of ours.
        before = np.searchsorted(every, ours, side="left") - 1
        prev = np.where(before >= 0, every[np.maximum(before, 0)], -np.inf)
        warm[mine] = prev + CACHE_TTL_S > ours
    return warm


def _route_columns(
    ff: FastForward, way: Way, rows: np.ndarray, warm: np.ndarray, pricer: Pricer, base_us: int
) -> RouteColumns:
    t = ff.traffic
    name = way.route
    prompt = t.input_tokens[rows]
    share = ff.scenario.routes[name].cached_share
    # int(prompt × share), as SimulatedProvider computes it (the same doubles).
    cacheable = (prompt.astype(np.float64) * share).astype(np.int64)
    counts = (prompt - cacheable, t.output_tokens[rows], np.where(warm, cacheable, 0),
              np.where(warm, 0, cacheable))  # fmt: skip
    if way.target is None:  # no call: no tokens
        counts = tuple(np.zeros(len(rows), np.int64) for _ in counts)
    # As `timedelta(seconds=t)` rounds (the clock's `wall`): whole seconds, then the
    # fraction's microseconds half-even.
    fraction, whole = np.modf(t.at_s[rows])
    started_us = whole.astype(np.int64) * 1_000_000 + np.rint(fraction * 1e6).astype(np.int64)
    started_us += base_us
    cost, priced, source = _price(ff.templates[way.id], counts, started_us, pricer)
    return RouteColumns(rows, started_us, ff.latency_s[rows] * 1000, counts, cost, priced, source)


# --- as attempt rows -------------------------------------------------------------------------


def _route_table(template: Attempt, route: RouteColumns) -> pa.Table:
    """The rows as the recorder's Parquet table: the template's values repeated, what varies
    from the arrays."""
    n = len(route.rows)
    fixed = records.to_row(template, None, None)
    counts = route.counts
    varying: dict[str, pa.Array] = {
        "request_id": pc.binary_join_element_wise(
            "ff-", pc.cast(pa.array(route.rows), pa.string()), ""
        ),
        "started_at": pa.array(route.started_us, pa.timestamp("us", tz="UTC")),
        "latency_ms": pa.array(route.latency_ms, pa.float64()),
        "input_tokens": pa.array(counts[0], pa.int64()),
        "output_tokens": pa.array(counts[1], pa.int64()),
        "cache_read_tokens": pa.array(counts[2], pa.int64()),
        "cache_write_tokens": pa.array(counts[3], pa.int64()),
        "cost_usd": _decimal_column(route.cost, route.priced),
        "price_source": pa.array(route.source, pa.string()),
    }
    columns = [
        varying.get(c.name) or pa.repeat(pa.scalar(fixed[c.name], c.arrow), n)
        for c in records.COLUMNS
    ]
    return pa.table(columns, schema=records.ARROW_SCHEMA)


def _spool_tables(spool: Path, tables: list[pa.Table]) -> None:
    if not tables:
        return
    table = pa.concat_tables(tables)
    for lo in range(0, len(table), ROWS_PER_FILE):
        name = f"fastforward-{os.getpid()}-{uuid.uuid4().hex[:8]}-{lo // ROWS_PER_FILE:06d}"
        tmp = spool / f".{name}.tmp"
        pq.write_table(table.slice(lo, ROWS_PER_FILE), tmp)
        tmp.rename(spool / f"{name}.parquet")


# --- as minute rollups -----------------------------------------------------------------------


def _quiet_minutes(quiet: list[tuple[Attempt, RouteColumns]], requests: int) -> QuietMinutes:
    if not quiet:
        return QuietMinutes(requests=requests)
    tables, latency, starts, sizes, answers = [], [], [], [], []
    offset = 0
    for template, route in quiet:
        table, sorted_latency, group_starts = _minute_rollups(template, route)
        tables.append(table)
        latency.append(sorted_latency)
        starts.append(group_starts + offset)
        sizes.append(np.diff(np.r_[group_starts, len(sorted_latency)]))
        offset += len(sorted_latency)
        # The results' answered latency, last end − first start, in the store's arithmetic.
        started = route.started_us.astype(np.float64)
        answers.append((started + route.latency_ms * 1000 - started) / 1000)
    return QuietMinutes(
        pa.concat_tables(tables),
        np.concatenate(latency),
        np.concatenate(starts),
        np.concatenate(sizes),
        {template.route: template.ttft_ms for template, _ in quiet},
        np.concatenate(answers),
        requests,
    )


def _minute_rollups(
    template: Attempt, route: RouteColumns
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """What the rollup query gives for minutes that hold only these first-attempt answers by
    the primary: each a request answered, an attempt, its tokens and cost; nothing failed,
    nothing fell back, nothing wasted, no premium or cache loss (NULL, as a sum of none).
    With the latencies sorted within each minute, and where each minute's begin."""
    minute = route.started_us // _MINUTE_US
    assert not len(minute) or (np.diff(minute) >= 0).all(), "rows out of arrival order"
    starts = np.flatnonzero(np.r_[True, np.diff(minute) != 0])
    n = np.diff(np.r_[starts, len(minute)])
    latency = route.latency_ms.copy()
    for a, b in zip(starts.tolist(), (starts + n).tolist(), strict=True):
        latency[a:b].sort()  # within each minute: a few hundred each, quicker than lexsort
    tokens = route.counts
    priced = route.priced
    cost = np.where(priced, route.cost, 0)
    used = (tokens[0] + tokens[1] + tokens[2] + tokens[3]) > 0
    groups = len(starts)
    zeros = pa.array(np.zeros(groups, dtype=np.int64))
    count = pa.array(n.astype(np.int64))
    body: dict[str, pa.Array] = {
        "bucket": pa.array(minute[starts] * _MINUTE_US, pa.timestamp("us", tz="UTC")),
        "route": pa.repeat(pa.scalar(template.route), groups),
        "provider": pa.repeat(pa.scalar(template.provider), groups),
        "model": pa.repeat(pa.scalar(template.model), groups),
        "target": pa.repeat(pa.scalar(template.target), groups),
        "feature": pa.repeat(pa.scalar(template.feature or ""), groups),
        **dict.fromkeys(("requests", "answered", "attempts"), count),
        **dict.fromkeys(_NONE_HAPPENED, zeros),
        "unpriced_attempts": pa.array(np.add.reduceat(~priced & used, starts).astype(np.int64)),
        "cost_usd": _decimal_column(np.add.reduceat(cost, starts), np.ones(groups, dtype=bool)),
        **dict.fromkeys(("wasted_usd", "rewarm_usd"), _decimal_column(np.zeros(groups, np.int64),
                                                                      np.ones(groups, bool))),
    }  # fmt: skip
    for name, column in zip(
        ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"),
        tokens,
        strict=True,
    ):
        body[name] = pa.array(np.add.reduceat(column, starts).astype(np.int64))
    for q, name in zip(QUANTILES, LATENCY, strict=True):
        body[name] = pa.array(quantile_cont_groups(latency, starts, n, q))
    for name in TTFT:
        body[name] = pa.array([template.ttft_ms] * groups, pa.float64())
    return pa.table(body), latency, starts


_NONE_HAPPENED = (
    *("answered_by_fallback", "drill_fallbacks", "drill_failures", "request_faults"),
    *("unavailable", "broken_streams", "abandoned", "failed_attempts", "request_fault_attempts"),
    *("provider_faults", "account_faults", "rate_limited", "ambiguous_faults", "quality_errors"),
)


# --- prices ----------------------------------------------------------------------------------


def _price(
    template: Attempt, counts: tuple, started_us: np.ndarray, pricer: Pricer
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(costs in nano-dollars, priced, source) of one target's rows (in arrival order), by
    the stretches of minutes with the same rates (a price may change at any minute: off-peak
    hours)."""
    n = len(started_us)
    cost = np.zeros(n, dtype=np.int64)
    priced = np.ones(n, dtype=bool)
    source = np.empty(n, dtype=object)
    minutes, first = np.unique(started_us // _MINUTE_US, return_index=True)
    target = (template.provider, template.provider_kind, template.model)
    at = [datetime.fromtimestamp(m * 60, tz=UTC) for m in minutes.tolist()]
    rates = [pricer.rates_at(*target, when) for when in at]
    changes = [k for k in range(len(rates)) if k == 0 or rates[k] != rates[k - 1]]
    for a, b in zip(changes, [*changes[1:], len(rates)], strict=True):
        lo, hi = int(first[a]), int(first[b]) if b < len(first) else n
        part = tuple(c[lo:hi] for c in counts)
        found = pricer.price_columns(*target, at[a], part)
        if found is None:  # only `price` can say: one attempt at a time
            for j in range(hi - lo):
                value, row_source = pricer.price(_with_counts(template, part, j, at[a]))
                priced[lo + j] = value is not None
                cost[lo + j] = 0 if value is None else int(value.scaleb(9).to_integral_value())
                source[lo + j] = row_source
            continue
        nano, source[lo:hi] = found
        if nano is None:
            priced[lo:hi] = False
        else:
            cost[lo:hi] = nano
    return cost, priced, source


def _with_counts(template: Attempt, counts: tuple, j: int, at: datetime) -> Attempt:
    return dataclasses.replace(
        template,
        started_at=at,
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
