"""Incidents: the windows when one target failed in one way, with what they cost.

An incident is about one target (provider/model) and one fault family (engine.core.fault_families:
availability, rate limit, account): a Sonnet 529 outage and a Haiku key failure at the same time
are two incidents, each with its own routes and top error. From the minute rollups:

  - a target's minute is *bad* for a family when the family's faults are at least `fault_rate`
    of the target's attempts that minute (for a decisive family, a refused key, any fault:
    its breaker opens at the first, so there is no second to make a share). Bad minutes are
    the only thing that starts or extends an incident;
  - an incident ends `settle` after its last fault (the exact time of the last fault of the
    family in its last bad minute or the minute after it: an outage rarely ends on a minute's
    edge). It is ongoing until what followed its last bad minute shows the target recovered:
    `settle` of *informative* minutes (the target took attempts, and none was a bad minute),
    with so many answers that a target still failing at the incident's rate would give them
    all by chance less than once in a thousand (`answers_to_recover`: at hundreds of requests
    a minute any two good minutes; at a few a minute, a lucky one is no recovery, and a
    target failing one request in three stays one incident). A minute in which the
    target took no attempt at all tells nothing: its breaker (or a rate-limit cool-down) kept
    it out, or nobody asked. Such minutes neither end nor extend an incident: a bad minute
    after them (the breaker's probe failing again) continues it, an answered one ends it at
    its last fault + `settle`. So a 3-minute outage behind a breaker is 3 to 5 minutes long
    (`settle` 2 min), whatever the breaker's hold, and a key refused for one minute behind a
    5-minute account hold is a 3-minute incident, not a 5-minute one (docs/decisions.md);
  - a stretch of QUIET without any informative minute ends it all the same;
  - the requests its routes could not send to the target (held: answered by a backup,
    failed) while it lasts count as evidence beside its faults: a refused key opens the
    breaker at its first 401, so one fault and the requests held back from it are an
    incident. A window with fewer than `min_faults` faults and held requests is noise. A
    minute a fault drill held the target down on a route holds nothing.

An incident keeps its id (target, family, start) from pass to pass. Once it ended SETTLED ago it
is final: kept as stored, late attempts and restarts included (engine.alerts.incident_evidence
keeps the minutes between passes). The impact and cost of each window are computed by
engine.alerts.incident_impact.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

import duckdb

from engine.alerts import incident_impact, incident_minutes
from engine.alerts.incident_evidence import Evidence, Held, Minutes
from engine.alerts.incident_minutes import NOTHING, Stretch, Stretches
from engine.core.fault_families import BY_NAME
from engine.store.retention import refresh_floor

MINUTE = timedelta(minutes=1)
# This long without an informative minute (no attempt at the target at all) ends an incident.
QUIET = timedelta(minutes=15)
# Answers, and no bad minute, between two windows: the target recovered in between. At least
# this many, more after a window that failed a small share (answers_to_recover): the chance
# that a target still failing answers them all is CHANCE.
RECOVERED_AFTER = 10
CHANCE = 0.001
RECOVERY = incident_impact.RECOVERY
SCOPE = "target"
# An incident that ended this long ago is final: kept as stored, whatever arrives later.
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
    last_fault: datetime  # the start of its last bad minute
    ongoing: bool = True  # fewer than `settle` informative minutes since its last bad minute
    peak: float = 0.0
    evidence: int = 0  # faults of the family + requests held back from the target

    @property
    def id(self) -> str:
        return f"{SCOPE}:{self.target}:{self.family}:{self.start:%Y%m%dT%H%MZ}"

    def end(self, last_fault_at: datetime | None, settle: timedelta) -> datetime:
        """`settle` after its last fault (`last_fault_at`; the end of its last bad minute when
        those attempts are gone)."""
        return (last_fault_at or self.last_fault + MINUTE) + settle

    def latest_end(self, settle: timedelta) -> datetime:
        """The end, at the latest: its last fault at the very end of the minute after its last
        bad minute."""
        return self.last_fault + 2 * MINUTE + settle


def detect(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    policy: IncidentPolicy | None = None,
    evidence: Evidence | None = None,
    since: datetime | None = None,
) -> list[Window]:
    """The incident windows in the minute rollups whose first bad minute is at or after
    `since` (all without), oldest first. `evidence`: what an earlier pass read, brought up to
    date here (engine.alerts.incident_evidence); read whole without."""
    policy = policy or IncidentPolicy()
    evidence = evidence or Evidence()
    evidence.read(con, policy.fault_rate)
    chains = {
        (target, family): buckets
        for target, minutes in evidence.bad.items()
        for family, buckets in _by_family(minutes, since).items()
    }
    informative = incident_minutes.stretches(con, _wanted(chains, now))
    windows: list[Window] = []
    for (target, family), buckets in chains.items():
        bad = {bucket: evidence.bad[target][bucket][family] for bucket in buckets}
        runs = _runs(target, family, bad, informative, policy)
        for i, run in enumerate(runs):
            window = Window(
                target, evidence.provider_of[target], family, run.buckets[0], run.buckets[-1]
            )
            for bucket in run.buckets:
                count, share = bad[bucket]
                window.evidence += count
                window.peak = max(window.peak, share)
            # A run another one follows was ended by what lies between them (`_runs`).
            last = i == len(runs) - 1
            window.ongoing = last and _still_ongoing(window, run, informative, now, policy)
            windows.append(window)
    _add_held(windows, evidence.held, policy)
    windows = [w for w in windows if w.evidence >= policy.min_faults]
    # An outage rarely begins on a minute's edge, and a breaker that opens at its first
    # failures leaves that minute below the fault rate: a window begins a minute early where
    # its target already failed that way then (a quarter of the rate: one stray timeout among
    # a hundred answers is not where an outage began).
    firsts = [(w.target, w.family, w.start) for w in windows]
    for i in incident_minutes.failed_the_minute_before(con, firsts, policy.fault_rate / 4):
        windows[i].start -= MINUTE
    return sorted(windows, key=lambda w: (w.start, w.target, w.family))


def _wanted(
    chains: dict[tuple[str, str], list[datetime]], now: datetime
) -> set[tuple[str, datetime, datetime]]:
    """The stretches the decisions need: between two bad minutes of a target and family less
    than QUIET apart (what lies inside a run counts in its failure rate), and after the last
    bad minute when that was less than QUIET ago."""
    wanted: set[tuple[str, datetime, datetime]] = set()
    for (target, _), buckets in chains.items():
        for before, after in pairwise(buckets):
            if MINUTE < after - before <= QUIET:
                wanted.add((target, before + MINUTE, after))
        last = buckets[-1] + MINUTE
        if now - last < QUIET:
            wanted.add((target, last, _gap_end(last, now)))
    return wanted


def _by_family(minutes: Minutes, since: datetime | None) -> dict[str, list[datetime]]:
    chains: dict[str, list[datetime]] = defaultdict(list)
    for bucket in sorted(minutes):
        if since is None or bucket >= since:
            for family in minutes[bucket]:
                chains[family].append(bucket)
    return chains


@dataclass(slots=True)
class _Run:
    """The bad minutes of one window so far, with its faults and attempts (those of the
    minutes between its bad ones included): its failure rate."""

    buckets: list[datetime]
    faults: float
    attempts: float

    def add(self, bucket: datetime, faults: int, share: float, between: Stretch, family: str):
        self.buckets.append(bucket)
        self.faults += faults + between.faults.get(family, 0)
        self.attempts += faults / share + between.attempts


def _runs(
    target: str,
    family: str,
    bad: dict[datetime, tuple[int, float]],
    informative: Stretches,
    policy: IncidentPolicy,
) -> list[_Run]:
    """The bad minutes of one target and family (bucket → faults, share), split where the
    stretch between two of them shows the target recovered (`_recovered`), or is QUIET long."""
    buckets = sorted(bad)
    first = buckets[0]
    runs = [_Run([first], bad[first][0], bad[first][0] / bad[first][1])]
    for before, after in pairwise(buckets):
        gap = after - before - MINUTE
        between = informative.get((target, before + MINUTE, after), NOTHING)
        if gap >= QUIET or (gap >= policy.settle and _recovered(between, runs[-1], policy)):
            runs.append(_Run([], 0.0, 0.0))
            between = NOTHING
        runs[-1].add(after, *bad[after], between, family)
    return runs


def _recovered(seen: Stretch, run: _Run, policy: IncidentPolicy) -> bool:
    """Whether a stretch after `run` shows its target recovered: `settle` of informative
    minutes, and so many answers that a target still failing at the run's rate would give
    them all by chance less than once in 1/CHANCE. At hundreds of requests a minute that is
    any two good minutes; at a few, a lucky minute is no recovery."""
    if seen.minutes * MINUTE < policy.settle:
        return False
    return seen.answered >= answers_to_recover(run.attempts, run.faults)


def answers_to_recover(attempts: float, faults: float) -> int:
    """Answers in a row that show a target recovered from failing `faults` of `attempts`: so
    many that, still failing at that rate, it would answer them all by chance less than once in
    1/CHANCE (a target failing one request in three: 18; never fewer than RECOVERED_AFTER)."""
    share = faults / attempts if attempts else 1.0
    if share >= 1:
        return RECOVERED_AFTER
    return max(RECOVERED_AFTER, math.ceil(math.log(CHANCE) / math.log(1 - share)))


def _still_ongoing(
    window: Window, run: _Run, informative: Stretches, now: datetime, policy: IncidentPolicy
) -> bool:
    after = window.last_fault + MINUTE
    if now < window.latest_end(policy.settle) - MINUTE:  # its settle time has not passed yet
        return True
    if now - after >= QUIET:
        return False
    seen = informative.get((window.target, after, _gap_end(after, now)), NOTHING)
    return not _recovered(seen, run, policy)


def _gap_end(after: datetime, now: datetime) -> datetime:
    """Where the stretch after a window's last bad minute is read up to: the minute now
    begins (a minute under way counts once it has attempts)."""
    return min(now.replace(second=0, microsecond=0) + MINUTE, after + QUIET)


def _add_held(windows: list[Window], held: dict[str, Held], policy: IncidentPolicy) -> None:
    """The requests held back from each window's target while it lasted: from its first bad
    minute to `settle` after its last, for the family whose bad minute came last."""
    by_target: dict[str, list[Window]] = defaultdict(list)
    for window in windows:
        by_target[window.target].append(window)
    for target, minutes in held.items():
        mine = by_target.get(target)
        if not mine:
            continue
        first = min(w.start for w in mine)
        for bucket, (requests, share) in minutes.items():
            if bucket < first:
                continue
            covering = [
                w for w in mine if w.start <= bucket < w.last_fault + MINUTE + policy.settle
            ]
            if covering:
                window = max(covering, key=lambda w: (w.last_fault, w.family))
                window.evidence += requests
                window.peak = max(window.peak, share)


_FINAL = """
    SELECT incident_id, target, family, started_at, ended_at FROM incidents
    WHERE ended_at IS NOT NULL AND ended_at <= $final
"""


def refresh_incidents(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    policy: IncidentPolicy | None = None,
    *,
    evidence: Evidence | None = None,
    since: datetime | None = None,
) -> int:
    """Detect the incidents in the minute rollups (`evidence`: as read by the last pass) and
    bring the table up to date in one transaction; the number of incidents. `since`: only
    windows that begin at or after it can have changed (the caller knows what it refreshed);
    everything is looked at without. An incident that ended SETTLED ago is final: its row is
    kept as it is, and a window found over it is that incident, not a new one; so is one that
    began before the store's refresh floor (its attempts may be in the archive)."""
    policy = policy or IncidentPolicy()
    floor = refresh_floor(con)
    if floor is not None and (since is None or since < floor):
        since = floor
    final = con.execute(_FINAL, {"final": now - SETTLED}).fetchall()
    keep = {incident_id for incident_id, *_ in final}
    stored = dict(con.execute("SELECT incident_id, started_at FROM incidents").fetchall())
    if since is not None:  # an incident not yet final is looked at again, however old
        since = min([since, *(started for i, started in stored.items() if i not in keep)])
        keep |= {i for i, started in stored.items() if started < since}
    fresh = [
        window
        for window in detect(con, now, policy, evidence, since)
        if window.id not in keep and not _over_final(window, final, policy)
    ]
    last_faults = incident_minutes.last_faults(
        con, [(w.id, w.target, w.family, w.last_fault) for w in fresh]
    )
    rows = [_row(w, last_faults.get(w.id), now, policy) for w in fresh]
    incident_impact.write(con, rows, sorted(keep), now)
    return len(keep) + len(rows)


def _over_final(window: Window, final: list[tuple], policy: IncidentPolicy) -> bool:
    """Whether `window` lies over a final incident of its target and family (the tail of one
    whose first minutes are before the pass's `since`, say)."""
    return any(
        (target, family) == (window.target, window.family)
        and window.start < ended
        and window.latest_end(policy.settle) > started
        for _, target, family, started, ended in final
    )


def _row(
    window: Window, last_fault_at: datetime | None, now: datetime, policy: IncidentPolicy
) -> dict[str, Any]:
    end = window.end(last_fault_at, policy.settle)
    ongoing = window.ongoing or end > now
    return {
        "id": window.id, "target": window.target, "provider": window.provider,
        "family": window.family, "kinds": list(BY_NAME[window.family].fault_kinds),
        "lo": window.start, "hi": now if ongoing else end, "rewarm_hi": end + RECOVERY,
        "ended_at": None if ongoing else end, "peak": window.peak,
    }  # fmt: skip
