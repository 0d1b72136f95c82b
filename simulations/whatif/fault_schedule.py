"""An incident's fault schedule as its attempts show it: `Fault`s of a scenario, per target and
kind, with the failing share of each stretch of minutes.

From the target's calls and faults minute by minute (the published `incident_minutes`):

  - each fault is read as the scenario kind that makes the simulated provider fail the same
    way (`scenario_kind`: a 529 is "overloaded", a 401 "auth", a 429 "rate_limit" with the
    recorded Retry-After, a read timeout "timeout", any other provider fault "server_error");
  - from the kind's first faulty minute to its last, minutes are grouped into stretches of one
    failing share: starting from single minutes, the two neighbouring stretches most alike are
    merged, again and again, while a two-proportion test cannot tell their shares apart (less
    than Z standard deviations). Z is 4, not 2: an incident has hundreds of minutes, and at 2 a
    few of them would split off by chance alone. A minute without calls (the breaker kept the
    target out) says nothing and belongs to the stretch before it. So a steady outage is one
    fault, a step from 100 % to 30 % two, and a 30 % outage is not a flicker of 0 % and 100 %
    minutes;
  - an edge is put halfway between the last faulty minute and the next (or last) minute the
    target answered: the fault ended somewhere in that silence.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise

from simulations.whatif.scenario import Fault

MINUTE = timedelta(minutes=1)
_Z = 4.0  # standard deviations apart two stretches' shares must be to stay two


@dataclass(frozen=True, slots=True)
class FaultMinute:
    """One minute of one target: its calls, its failed calls (any cause), and its faults of
    one class."""

    bucket: datetime
    calls: int
    failed: int
    fault_kind: str | None = None
    error_class: str | None = None
    failures: int = 0
    retry_after_s: float | None = None
    wanted: int = 0  # requests of the routes whose primary the target is
    held: int = 0  # of them, those it did not serve (a backup did, or nobody)


@dataclass(slots=True)
class _Stretch:
    first: datetime
    last: datetime
    failures: int = 0
    calls: int = 0
    retry_after: list[tuple[float, int]] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.failures / self.calls if self.calls else 0.0


def scenario_kind(fault_kind: str | None, error_class: str | None) -> str | None:
    """The scenario fault kind that fails like this recorded fault; None for what is no
    provider's fault (the request's, a drill's)."""
    if fault_kind == "account":
        return "auth"
    if fault_kind == "rate_limit":
        return "rate_limit"
    if fault_kind not in ("provider", "ambiguous"):
        return None
    if error_class == "overloaded":
        return "overloaded"
    if error_class and ("timeout" in error_class or error_class == "stream_stalled"):
        return "timeout"
    return "server_error"


def faults_of(
    target: str,
    minutes: Iterable[FaultMinute],
    *,
    start: datetime,
    end: datetime,
    kinds: Iterable[str] | None = None,
) -> list[Fault]:
    """`target`'s faults between `start` and `end` (the scenario's span, its start at 0 s),
    of the attempts' `fault_kind`s in `kinds` (every provider fault when None)."""
    rows = [m for m in minutes if start <= m.bucket < end]
    calls = {m.bucket: (m.calls, m.failed) for m in rows}
    held = {m.bucket: (m.wanted, m.held) for m in rows if m.held}
    allowed = None if kinds is None else set(kinds)
    by_kind: dict[str, dict[datetime, list[FaultMinute]]] = {}
    for m in rows:
        kind = scenario_kind(m.fault_kind, m.error_class)
        if kind is None or not m.failures or (allowed is not None and m.fault_kind not in allowed):
            continue
        by_kind.setdefault(kind, {}).setdefault(m.bucket, []).append(m)
    faults: list[Fault] = []
    placed: dict[datetime, int] = {}  # failures of kinds already given a fault, per minute
    for kind, faulty in sorted(by_kind.items(), key=lambda kv: -_total(kv[1])):
        stretches = _stretches(faulty, calls, placed, held)
        for stretch, (lo, hi) in zip(stretches, _edges(stretches, calls, start, end), strict=True):
            retry = _median(stretch.retry_after) if kind == "rate_limit" else None
            share = round(min(1.0, stretch.share), 3)
            if share > 0:
                faults.append(
                    Fault(
                        target,
                        kind,
                        (lo - start).total_seconds(),
                        (hi - start).total_seconds(),
                        share,
                        retry,
                    )
                )
        for bucket, found in faulty.items():
            placed[bucket] = placed.get(bucket, 0) + sum(m.failures for m in found)
    return sorted(faults, key=lambda f: (f.start_s, f.kind))


def _stretches(
    faulty: dict[datetime, list[FaultMinute]],
    calls: dict[datetime, tuple[int, int]],
    placed: dict[datetime, int],
    held: dict[datetime, tuple[int, int]],
) -> list[_Stretch]:
    """The kind's minutes, first fault to last, as stretches of one failing share. The share
    is of the calls the kinds placed before left over: the simulated provider tries a
    target's faults in order, so a later fault only meets the calls an earlier one spared.

    Behind an open breaker the calls are its probes, one or two a minute, all failing: a
    share of 1 with no weight, which the merging would fold into the outage's busy first
    minute (a full outage replayed at 40 %). So in a minute this kind failed, the requests its
    routes could not send to the target (`held`, of those that wanted it) are the evidence
    when they fail the larger share (the same share: when they are more): what the routes
    lived through. The first kind placed
    takes them (they are removed from `held`)."""
    units: list[_Stretch] = []
    bucket, last = min(faulty), max(faulty)
    while bucket <= last:
        found = faulty.get(bucket, [])
        f = sum(m.failures for m in found)
        c = max(f, calls.get(bucket, (0, 0))[0] - placed.get(bucket, 0))
        if f:
            wanted, kept_out = held.pop(bucket, (0, 0))
            larger, alike = kept_out * c > f * wanted, kept_out * c == f * wanted
            if wanted and (larger or (alike and wanted > c)):  # alike: the weightier evidence
                f, c = kept_out, wanted
        if c or not units:
            units.append(_Stretch(bucket, bucket))
        unit = units[-1]
        unit.last, unit.failures, unit.calls = bucket, unit.failures + f, unit.calls + c
        unit.retry_after += [
            (m.retry_after_s, m.failures) for m in found if m.retry_after_s is not None
        ]
        bucket += MINUTE
    return [s for s in _agglomerated(units) if s.failures]


def _agglomerated(units: list[_Stretch]) -> list[_Stretch]:
    """Merge the neighbours least apart (`_apart`) while they are less than _Z apart: a heap
    of the neighbouring pairs, each stale entry skipped, O(n log n) for n minutes."""
    alive = list(units)
    after = list(range(1, len(units) + 1))  # the next stretch alive, by index
    before = list(range(-1, len(units) - 1))
    version = [0] * len(units)
    heap = [(_apart(a, b), i, i + 1, 0, 0) for i, (a, b) in enumerate(pairwise(units))]
    heapq.heapify(heap)
    while heap:
        z, i, j, vi, vj = heapq.heappop(heap)
        if z >= _Z:
            break
        if version[i] != vi or version[j] != vj or after[i] != j:
            continue  # a pair one of whose stretches has grown since
        a, b = alive[i], alive[j]
        a.last, a.failures, a.calls = b.last, a.failures + b.failures, a.calls + b.calls
        a.retry_after += b.retry_after
        version[i] += 1
        version[j] = -1  # gone
        after[i] = after[j]
        if after[i] < len(units):
            before[after[i]] = i
            heapq.heappush(
                heap, (_apart(a, alive[after[i]]), i, after[i], version[i], version[after[i]])
            )
        if before[i] >= 0:
            k = before[i]
            heapq.heappush(heap, (_apart(alive[k], a), k, i, version[k], version[i]))
    return [s for s, v in zip(alive, version, strict=True) if v >= 0]


def _apart(a: _Stretch, b: _Stretch) -> float:
    """How many standard deviations apart the two stretches' failing shares are (a pooled
    two-proportion test); 0 when they are the same, or when either has no calls."""
    if not a.calls or not b.calls or a.share == b.share:
        return 0.0
    pooled = (a.failures + b.failures) / (a.calls + b.calls)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / a.calls + 1 / b.calls))
    return abs(a.share - b.share) / spread if spread else math.inf


def _edges(
    stretches: list[_Stretch],
    calls: dict[datetime, tuple[int, int]],
    start: datetime,
    end: datetime,
) -> list[tuple[datetime, datetime]]:
    """Each stretch's start and end: halfway into the silence before its first fault and after
    its last one (the minutes up to the target's nearest answer, a call that did not fail),
    never into the stretch next to it."""
    answered = sorted(b for b, (c, failed) in calls.items() if c > failed)
    edges = []
    for s in stretches:
        before = [b for b in answered if b < s.first]
        after = [b for b in answered if b > s.last]
        lo = s.first - (s.first - (before[-1] + MINUTE)) / 2 if before else s.first
        hi = s.last + MINUTE
        hi = hi + (after[0] - hi) / 2 if after else hi
        edges.append([max(lo, start), min(hi, end)])
    for (this, nxt), (_, following) in zip(pairwise(edges), pairwise(stretches), strict=True):
        if this[1] > nxt[0]:  # the silence between two stretches is split at the second's
            this[1] = nxt[0] = max(following.first, this[0])
    return [(lo, hi) for lo, hi in edges]


def _total(faulty: dict[datetime, list[FaultMinute]]) -> int:
    return sum(m.failures for found in faulty.values() for m in found)


def _median(weighted: list[tuple[float, int]]) -> float | None:
    if not weighted:
        return None
    ordered = sorted(weighted)
    half, seen = sum(n for _, n in ordered) / 2, 0
    for value, n in ordered:
        seen += n
        if seen >= half:
            return float(value)
    return float(ordered[-1][0])
