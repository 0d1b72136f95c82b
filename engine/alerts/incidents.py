"""Incidents: the windows when a provider (or a route) was failing, with what they cost.

From the minute rollups:
  - a provider's minute is bad when its failed attempts that were not the request's fault
    (provider, ambiguous, rate-limit and account faults) are at least `fault_rate` of its
    attempts; while its breaker is open it gets only probes, which fail, so the minutes stay bad;
  - a route's minute is bad when the requests its primary did not answer (answered by a backup,
    failed, broken mid-stream) are at least `fault_rate` of its requests (request faults and
    abandoned requests aside: those are the caller's).
Bad minutes of one subject less than `merge_gap` apart form one window; a window with fewer
than `min_faults` bad attempts (or requests) is noise and dropped. A window is ongoing while
its last bad minute is within `merge_gap` of now.

A route's bad minute counts against its primary's provider too (even when the provider's
breaker let no attempt through that minute), so one outage is one provider incident that lists
the routes it hit, not an incident per route as well. Only a route with no known primary is an
incident of its own.

Impact over the incident's window, for the routes whose primary is on the provider (or the
route itself): requests, requests affected (not answered by the primary), answered by fallback,
failed; fallback premium split into cache loss and price difference (docs/metrics.md); the
re-warm cost from its start to RECOVERY after its end (the primary's first successes may fall
in its last minute); wasted spend (failed paid attempts on the
provider or those routes). Extra cost = fallback premium + re-warm.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb
import pyarrow as pa

MINUTE = timedelta(minutes=1)
RECOVERY = timedelta(minutes=10)  # re-warm cost is counted this long after an incident


@dataclass(frozen=True, slots=True)
class IncidentPolicy:
    fault_rate: float = 0.2
    min_faults: int = 3
    merge_gap: timedelta = timedelta(minutes=5)


@dataclass(slots=True)
class Window:
    scope: str  # "provider" or "route"
    subject: str
    start: datetime
    last_bad: datetime  # start of the last bad minute
    peak: float
    faults: int
    routes: set[str]

    @property
    def end(self) -> datetime:
        return self.last_bad + MINUTE


_PROVIDER_MINUTES = """
    SELECT provider, bucket, sum(attempts)::BIGINT AS n,
        sum(provider_faults + ambiguous_faults + rate_limited + account_faults)::BIGINT AS bad
    FROM rollup_minute GROUP BY ALL
    HAVING bad > 0 AND bad >= $rate * n
    ORDER BY provider, bucket
"""
_ROUTE_MINUTES = """
    SELECT route, bucket, sum(requests - request_faults - abandoned)::BIGINT AS n,
        sum(answered_by_fallback - coalesce(drill_fallbacks, 0) + unavailable
            + broken_streams)::BIGINT AS bad
    FROM rollup_minute GROUP BY ALL
    HAVING bad > 0 AND bad >= $rate * n
    ORDER BY route, bucket
"""
# A route's primary provider: the provider part of its first target ("claude/…" → "claude").
_PRIMARIES = "SELECT route, split_part(target, '/', 1) FROM route_primaries"


def detect(
    con: duckdb.DuckDBPyConnection, now: datetime, policy: IncidentPolicy | None = None
) -> list[Window]:
    policy = policy or IncidentPolicy()
    params = {"rate": policy.fault_rate}
    primary_of = dict(con.execute(_PRIMARIES).fetchall())
    route_minutes = con.execute(_ROUTE_MINUTES, params).fetchall()
    # A route whose primary did not answer is evidence against the primary's provider, even
    # in minutes when its breaker let no attempt through (open after an expired key, say).
    by_provider: dict[tuple[str, datetime], tuple[int, int]] = {
        (provider, bucket): (n, bad)
        for provider, bucket, n, bad in con.execute(_PROVIDER_MINUTES, params).fetchall()
    }
    for route, bucket, n, bad in route_minutes:
        if (provider := primary_of.get(route)) is not None:
            known = by_provider.get((provider, bucket))
            if known is None or bad / max(n, 1) > known[1] / max(known[0], 1):
                by_provider[(provider, bucket)] = (n, bad)
    minutes = sorted((p, b, n, bad) for (p, b), (n, bad) in by_provider.items())
    providers = _windows("provider", minutes, policy)
    served_by = defaultdict(set)  # provider → routes it is the primary of
    for route, provider in primary_of.items():
        served_by[provider].add(route)
    for window in providers:
        window.routes = set(served_by.get(window.subject, ()))
    # Routes with no known primary (none of their requests reached one yet) stand alone.
    orphans = [m for m in route_minutes if m[0] not in primary_of]
    routes = _windows("route", orphans, policy)
    for window in routes:
        window.routes = {window.subject}
    return sorted(providers + routes, key=lambda w: (w.start, w.scope, w.subject))


def _windows(scope: str, minutes: list[tuple], policy: IncidentPolicy) -> list[Window]:
    windows: list[Window] = []
    current: Window | None = None
    for subject, bucket, n, bad in minutes:
        rate = bad / n if n else 1.0
        if current and current.subject == subject and bucket - current.end <= policy.merge_gap:
            current.last_bad = bucket
            current.peak = max(current.peak, rate)
            current.faults += bad
            continue
        current = Window(scope, subject, bucket, bucket, rate, bad, set())
        windows.append(current)
    return [w for w in windows if w.faults >= policy.min_faults]


_WINDOWS = pa.schema([
    ("id", pa.string()), ("scope", pa.string()), ("subject", pa.string()),
    ("provider", pa.string()), ("routes", pa.list_(pa.string())),
    ("lo", pa.timestamp("us", tz="UTC")), ("hi", pa.timestamp("us", tz="UTC")),
    ("rewarm_hi", pa.timestamp("us", tz="UTC")), ("ended_at", pa.timestamp("us", tz="UTC")),
    ("peak", pa.float64()), ("faults", pa.int64()),
])  # fmt: skip

# Every incident's impact in one statement. Each window is expanded into its minutes and
# joined to the rollups (and the failed attempts) on the minute: equality joins, whatever the
# number of incidents (a range join with an OR degrades to a nested loop: 4.6 s for 950
# incidents over 1 M attempts, measured).
_REFRESH = """
INSERT INTO incidents
WITH minutes AS (
    SELECT id, unnest(generate_series(lo, hi - INTERVAL 1 MICROSECOND, INTERVAL 1 MINUTE))
        AS bucket
    FROM incident_windows
),
rewarm_minutes AS (
    SELECT id, unnest(generate_series(lo, rewarm_hi - INTERVAL 1 MICROSECOND, INTERVAL 1 MINUTE))
        AS bucket
    FROM incident_windows WHERE ended_at IS NOT NULL
),
rows AS (
    SELECT m.id, r.*, list_contains(w.routes, r.route) AS in_routes
    FROM minutes m JOIN incident_windows w USING (id) JOIN rollup_minute r USING (bucket)
    WHERE list_contains(w.routes, r.route) OR r.provider = w.provider
),
impact AS (
    SELECT id,
        coalesce(sum(requests) FILTER (in_routes), 0)::BIGINT AS requests,
        coalesce(sum(answered_by_fallback + unavailable + broken_streams) FILTER (in_routes),
            0)::BIGINT AS affected,
        coalesce(sum(answered_by_fallback) FILTER (in_routes), 0)::BIGINT AS by_fallback,
        coalesce(sum(unavailable + broken_streams) FILTER (in_routes), 0)::BIGINT AS failed,
        coalesce(sum(fallback_premium_usd) FILTER (in_routes), 0)::DECIMAL(18,9) AS premium,
        coalesce(sum(cache_loss_usd) FILTER (in_routes), 0)::DECIMAL(18,9) AS cache_loss,
        coalesce(sum(wasted_usd), 0)::DECIMAL(18,9) AS wasted
    FROM rows GROUP BY id
),
rewarm AS (
    SELECT m.id, coalesce(sum(r.rewarm_usd), 0)::DECIMAL(18,9) AS rewarm
    FROM rewarm_minutes m JOIN incident_windows w USING (id) JOIN rollup_minute r USING (bucket)
    WHERE list_contains(w.routes, r.route)
    GROUP BY m.id
),
failures AS (
    SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, provider, route, error_class,
        http_status
    FROM attempts
    WHERE started_at >= $lo AND started_at < $hi AND outcome = 'error'
        AND coalesce(fault_kind, '') <> 'request'
),
errors AS (
    SELECT m.id, f.error_class, f.http_status, count(*) AS n
    FROM minutes m JOIN incident_windows w USING (id) JOIN failures f USING (bucket)
    WHERE f.provider = w.provider OR list_contains(w.routes, f.route)
    GROUP BY ALL
),
top AS (
    SELECT id, arg_max(error_class || coalesce(' (' || http_status || ')', '') || ' ×' || n,
                       n * 1000000 - rank) AS top_error
    FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY error_class) AS rank FROM errors)
    GROUP BY id
)
SELECT w.id, w.scope, w.subject, w.lo, w.ended_at, w.peak, w.faults, t.top_error,
    array_to_string(w.routes, ', '),
    coalesce(i.requests, 0), coalesce(i.affected, 0), coalesce(i.by_fallback, 0),
    coalesce(i.failed, 0), coalesce(i.premium, 0), coalesce(i.cache_loss, 0),
    coalesce(i.premium, 0) - coalesce(i.cache_loss, 0), coalesce(rw.rewarm, 0),
    coalesce(i.wasted, 0), coalesce(i.premium, 0) + coalesce(rw.rewarm, 0)
FROM incident_windows w
LEFT JOIN impact i USING (id) LEFT JOIN rewarm rw USING (id) LEFT JOIN top t USING (id)
"""
# An incident that ended this long ago is settled: later refreshes keep its row as it is
# (unless late attempts arrived, which recompute everything).
SETTLED = timedelta(hours=1)


def refresh_incidents(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    policy: IncidentPolicy | None = None,
    *,
    full: bool = False,
) -> int:
    """Detect the incidents in the minute rollups and bring the table up to date in one
    transaction; the number of incidents. An incident keeps its id (scope, subject, start)
    from one run to the next; one settled an hour ago is kept as it is unless `full` (late
    attempts arrived)."""
    policy = policy or IncidentPolicy()
    settled = dict(con.execute("SELECT incident_id, ended_at FROM incidents").fetchall())
    keep, rows = [], []
    for w in detect(con, now, policy):
        incident_id = f"{w.scope}:{w.subject}:{w.start:%Y%m%dT%H%MZ}"
        ongoing = w.end >= now.replace(second=0, microsecond=0) - policy.merge_gap
        if not full and not ongoing and settled.get(incident_id) == w.end <= now - SETTLED:
            keep.append(incident_id)
            continue
        rows.append({
            "id": incident_id, "scope": w.scope, "subject": w.subject,
            "provider": w.subject if w.scope == "provider" else None,
            "routes": sorted(w.routes), "lo": w.start, "hi": now if ongoing else w.end,
            "rewarm_hi": w.end + RECOVERY, "ended_at": None if ongoing else w.end,
            "peak": w.peak, "faults": w.faults,
        })  # fmt: skip
    con.register("incident_windows", pa.Table.from_pylist(rows, schema=_WINDOWS))
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "DELETE FROM incidents WHERE NOT list_contains($keep, incident_id)", {"keep": keep}
        )
        if rows:
            span = {"lo": min(r["lo"] for r in rows), "hi": max(r["hi"] for r in rows)}
            con.execute(_REFRESH, span)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("incident_windows")
    return len(keep) + len(rows)
