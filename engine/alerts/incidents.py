"""Incidents: the windows when one target failed in one way, with what they cost.

An incident is about one target (provider/model) and one fault family (engine.core.fault_families:
availability, rate limit, account): a Sonnet 529 outage and a Haiku key failure at the same time
are two incidents, each with its own routes and top error. From the minute rollups:

  - a target's minute is bad for a family when the family's faults are at least `fault_rate`
    of the target's attempts that minute;
  - a minute when the routes whose primary is the target still could not get it (answered by a
    backup, failed, broken mid-stream: at least `fault_rate` of their requests, request faults
    and abandoned requests aside) is *held* evidence: its breaker, or a rate-limit cool-down,
    keeps it out, and it only gets a probe every few minutes (an expired key holds it for 5).
    Held minutes continue the window of the family whose faults came last; they never start one.
    A minute a fault drill held the target down on a route is no evidence at all;
  - bad or held minutes less than `settle` after the window's last evidence continue it.
    Minutes with no traffic at all (no attempt at the target, no request on its routes) do not
    count towards that, up to QUIET: an outage through a lull stays one incident, two bursts
    an hour apart are two;
  - nor does a stretch that does not show the target recovered, up to QUIET: it failed any
    attempt in the family's way (below `fault_rate` too), or answered fewer in a row than a
    target still failing at the window's rate would by chance once in a thousand
    (`answers_to_recover`). At a few requests a minute, a target failing one request in three
    leaves minutes without a fault, and its outage is one incident, not one per lucky stretch;
  - a window with fewer than `min_faults` faults and held requests is noise (and continues
    another for want of recovery only if that one is no noise: two blips are not an incident).

A window ends `settle` after its last fault, or at the end of the last minute its routes were
still kept from the target, whichever is later; until then it is ongoing. The impact and cost of
each window are computed by engine.alerts.incident_impact. The bad and held minutes are read by
engine.alerts.incident_evidence, which keeps them between passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import duckdb
import pyarrow as pa

from engine.alerts import incident_impact
from engine.alerts.incident_evidence import Evidence, Held, Minutes
from engine.core.fault_families import BY_NAME, FAMILIES
from engine.store.retention import refresh_floor

MINUTE = timedelta(minutes=1)
# A stretch with no traffic to the target this long or longer ends its incident all the same.
QUIET = timedelta(minutes=15)
# Answered attempts of the target, and no fault of the family, between two windows: it
# recovered in between. At least this many, more after a window that failed a small share
# (answers_to_recover): the chance that a target still failing answers them all is CHANCE.
RECOVERED_AFTER = 10
CHANCE = 0.001
RECOVERY = incident_impact.RECOVERY
SCOPE = "target"
# An incident that ended this long ago is settled: later refreshes keep its row as it is
# (unless late attempts arrived, which recompute everything).
SETTLED = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class IncidentPolicy:
    fault_rate: float = 0.2
    min_faults: int = 3
    settle: timedelta = timedelta(minutes=2)  # [alerting] incident_settle


@dataclass(slots=True)
class Window:
    target: str
    provider: str
    family: str
    start: datetime  # the start of its first bad minute
    last_fault: datetime  # the start of the last minute with the family's faults
    held_until: datetime  # the end of the last minute its routes were still kept from it
    peak: float = 0.0
    evidence: int = 0  # faults of the family + requests kept from the target

    @property
    def id(self) -> str:
        return f"{SCOPE}:{self.target}:{self.family}:{self.start:%Y%m%dT%H%MZ}"

    @property
    def evidence_end(self) -> datetime:
        return max(self.last_fault + MINUTE, self.held_until)

    def latest_end(self, settle: timedelta) -> datetime:
        """The end, at the latest (its last fault at the very end of its minute)."""
        return max(self.last_fault + MINUTE + settle, self.held_until)

    def end(self, last_fault_at: datetime | None, settle: timedelta) -> datetime:
        """`settle` after its last fault (`last_fault_at`; the end of the last fault's minute
        when its attempts are gone), or the end of its last held minute."""
        return max((last_fault_at or self.last_fault + MINUTE) + settle, self.held_until)


def detect(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    policy: IncidentPolicy | None = None,
    evidence: Evidence | None = None,
) -> list[Window]:
    """Every incident window in the minute rollups, oldest first. `evidence`: what an earlier
    pass read, brought up to date here (engine.alerts.incident_evidence); read whole without."""
    policy = policy or IncidentPolicy()
    evidence = evidence or Evidence()
    evidence.read(con, policy.fault_rate)
    windows = [
        window
        for target, minutes in evidence.bad.items()
        for window in _windows(
            target, evidence.provider_of[target], minutes, evidence.held.get(target, {}), policy
        )
    ]
    windows = _across_quiet(con, windows, policy)
    windows = [w for w in windows if w.evidence >= policy.min_faults]
    return sorted(windows, key=lambda w: (w.start, w.target, w.family))


def _windows(
    target: str, provider: str, faulted: Minutes, held: Held, policy: IncidentPolicy
) -> list[Window]:
    found: list[Window] = []
    current: dict[str, Window] = {}
    latest: str | None = None  # the family whose faults came last: why the target is kept out
    for bucket in sorted(faulted.keys() | held.keys()):
        for family, (count, share) in faulted.get(bucket, {}).items():
            window = current.get(family)
            if window is None or bucket - window.evidence_end >= policy.settle:
                window = Window(target, provider, family, bucket, bucket, bucket)
                current[family] = window
                found.append(window)
            window.last_fault = bucket
            window.peak = max(window.peak, share)
            window.evidence += count
        if bucket in faulted:
            latest = max(faulted[bucket], key=lambda f: faulted[bucket][f][0])
        if bucket in held and latest is not None:
            window = current[latest]
            if bucket - window.evidence_end < policy.settle:
                requests, share = held[bucket]
                window.held_until = bucket + MINUTE
                window.peak = max(window.peak, share)
                window.evidence += requests
    return found


# The minutes of each gap in which the target had traffic (an attempt, or a request of a route
# whose primary it is), the attempts it answered and its faults of each family. Gaps are short
# (under QUIET): expanded into minutes, equality joins.
def _family_sums(only: str) -> str:
    return ", ".join(
        f"coalesce(sum(r.{f.rollup_sum.replace(' + ', ' + r.')}) FILTER ({only}), 0) AS {f.name}"
        for f in FAMILIES
    )


def _active_in_gaps() -> str:
    faults = _family_sums("r.target = m.target")
    return f"""
        WITH minutes AS (
            SELECT id, target,
                unnest(generate_series(lo, hi - INTERVAL 1 MINUTE, INTERVAL 1 MINUTE)) AS bucket
            FROM gaps
        )
        SELECT m.id, count(DISTINCT m.bucket) AS active,
            coalesce(sum(r.attempts - r.failed_attempts) FILTER (r.target = m.target), 0)
                AS answered,
            {faults}
        FROM minutes m JOIN rollup_minute r USING (bucket)
        LEFT JOIN route_primaries p ON p.route = r.route
        WHERE (r.target = m.target AND r.attempts > 0) OR (p.target = m.target AND r.requests > 0)
        GROUP BY m.id
    """


_ACTIVE_IN_GAPS = _active_in_gaps()
# The attempts of the window before each gap and its faults of each family: how often it
# failed, so how long a run of answers shows it recovered.
_WINDOW_FAULTS = f"""
    SELECT g.id, sum(r.attempts)::BIGINT AS attempts, {_family_sums("true")}
    FROM gaps g JOIN rollup_minute r
        ON r.target = g.target AND r.bucket >= g.w_lo AND r.bucket < g.lo
    GROUP BY g.id
"""
_GAPS = pa.schema([
    ("id", pa.int64()), ("target", pa.string()), ("w_lo", pa.timestamp("us", tz="UTC")),
    ("lo", pa.timestamp("us", tz="UTC")), ("hi", pa.timestamp("us", tz="UTC")),
])  # fmt: skip


def answers_to_recover(attempts: int, faults: int) -> int:
    """Answers in a row that show a target recovered from a window in which it failed `faults`
    of `attempts`: so many that, still failing at that rate, it would answer them all by
    chance less than once in 1/CHANCE (a target failing one request in three: 18)."""
    share = faults / attempts if attempts else 1.0
    if share >= 1:
        return RECOVERED_AFTER
    return max(RECOVERED_AFTER, math.ceil(math.log(CHANCE) / math.log(1 - share)))


def _across_quiet(
    con: duckdb.DuckDBPyConnection, windows: list[Window], policy: IncidentPolicy
) -> list[Window]:
    """Merge each window of a target and family into the one before it when what lies between
    is mostly quiet (fewer than `settle` of its minutes had any traffic) or shows no recovery
    (too few attempts answered, `answers_to_recover`, or any fault of the family) and one of
    the two is an incident on its own (`min_faults`): two blips never add up to one."""
    ordered = sorted(windows, key=lambda w: (w.target, w.family, w.start))
    pairs = [
        (i, before, after)
        for i, (before, after) in enumerate(pairwise(ordered))
        if (before.target, before.family) == (after.target, after.family)
        and after.start - before.evidence_end < QUIET
    ]
    if not pairs:
        return windows
    gaps = [
        {"id": i, "target": b.target, "w_lo": b.start, "lo": b.evidence_end, "hi": a.start}
        for i, b, a in pairs
    ]
    con.register("gaps", pa.Table.from_pylist(gaps, schema=_GAPS))
    try:
        between = {row[0]: row[1:] for row in con.execute(_ACTIVE_IN_GAPS).fetchall()}
        failed = {row[0]: row[1:] for row in con.execute(_WINDOW_FAULTS).fetchall()}
    finally:
        con.unregister("gaps")
    families = [f.name for f in FAMILIES]
    none = (0, *(0 for _ in families))
    quiet, unrecovered = set(), set()
    for i, before, _ in pairs:
        family = 1 + families.index(before.family)
        active, answered, *faults = between.get(i, (0, *none))
        window = failed.get(i, none)
        needed = answers_to_recover(window[0], window[family])
        recovered = answered >= needed and not faults[family - 1]
        if active * MINUTE < policy.settle:
            quiet.add(i)
        elif not recovered:
            unrecovered.add(i)
    merged: list[Window] = []
    for i, window in enumerate(ordered):
        real = bool(merged) and policy.min_faults <= max(merged[-1].evidence, window.evidence)
        if i - 1 in quiet or (i - 1 in unrecovered and real):  # continues the one before it
            into = merged[-1]
            into.last_fault = max(into.last_fault, window.last_fault)
            into.held_until = max(into.held_until, window.held_until)
            into.peak = max(into.peak, window.peak)
            into.evidence += window.evidence
        else:
            merged.append(window)
    return merged


def refresh_incidents(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    policy: IncidentPolicy | None = None,
    *,
    full: bool = False,
    evidence: Evidence | None = None,
) -> int:
    """Detect the incidents in the minute rollups (`evidence`: as read by the last pass) and
    bring the table up to date in one transaction; the number of incidents. An incident keeps
    its id (target, family, start) from one run to the next; one settled an hour ago is kept as
    it is unless `full` (late attempts arrived) or it began before the store's refresh floor
    (its attempts may have moved to the archive: engine.store.retention)."""
    policy = policy or IncidentPolicy()
    floor = refresh_floor(con)
    stored = {
        incident_id
        for (incident_id,) in con.execute("SELECT incident_id FROM incidents").fetchall()
    }
    keep: list[str] = []
    fresh: list[Window] = []
    for window in detect(con, now, policy, evidence):
        settled = window.latest_end(policy.settle) <= now - SETTLED
        final = floor is not None and window.start < floor
        if (final or not full) and settled and window.id in stored:
            keep.append(window.id)
        else:
            fresh.append(window)
    last_faults = _last_faults(con, fresh)
    rows = [_row(w, last_faults.get(w.id), now, policy) for w in fresh]
    incident_impact.write(con, rows, keep, now)
    return len(keep) + len(rows)


def _row(
    window: Window, last_fault_at: datetime | None, now: datetime, policy: IncidentPolicy
) -> dict[str, Any]:
    end = window.end(last_fault_at, policy.settle)
    ongoing = end > now
    return {
        "id": window.id, "target": window.target, "provider": window.provider,
        "family": window.family, "kinds": list(BY_NAME[window.family].fault_kinds),
        "lo": window.start, "hi": now if ongoing else end, "rewarm_hi": end + RECOVERY,
        "ended_at": None if ongoing else end, "peak": window.peak,
    }  # fmt: skip


# The exact time of each window's last fault, from the attempts of its last bad minute
# (joined on the minute: an equality join, however many windows).
_LAST_FAULTS = """
    SELECT w.id, max(a.started_at)
    FROM last_minutes w JOIN attempts a
        ON a.target = w.target AND time_bucket(INTERVAL 1 MINUTE, a.started_at) = w.bucket
    WHERE a.started_at >= $lo AND a.started_at < $hi AND list_contains(w.kinds, a.fault_kind)
    GROUP BY w.id
"""


def _last_faults(con: duckdb.DuckDBPyConnection, windows: list[Window]) -> dict[str, datetime]:
    if not windows:
        return {}
    table = pa.Table.from_pylist(
        [
            {
                "id": w.id,
                "target": w.target,
                "bucket": w.last_fault,
                "kinds": list(BY_NAME[w.family].fault_kinds),
            }
            for w in windows
        ],
        schema=pa.schema(
            [
                ("id", pa.string()),
                ("target", pa.string()),
                ("bucket", pa.timestamp("us", tz="UTC")),
                ("kinds", pa.list_(pa.string())),
            ]
        ),
    )
    span = {"lo": min(w.last_fault for w in windows),
            "hi": max(w.last_fault for w in windows) + MINUTE}  # fmt: skip
    con.register("last_minutes", table)
    try:
        return dict(con.execute(_LAST_FAULTS, span).fetchall())
    finally:
        con.unregister("last_minutes")
