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
from decimal import Decimal

import duckdb

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
        sum(answered_by_fallback + unavailable + broken_streams)::BIGINT AS bad
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


_IMPACT = """
    SELECT
        coalesce(sum(requests) FILTER (in_routes), 0)::BIGINT,
        coalesce(sum(answered_by_fallback + unavailable + broken_streams) FILTER (in_routes),
            0)::BIGINT,
        coalesce(sum(answered_by_fallback) FILTER (in_routes), 0)::BIGINT,
        coalesce(sum(unavailable + broken_streams) FILTER (in_routes), 0)::BIGINT,
        coalesce(sum(fallback_premium_usd) FILTER (in_routes), 0)::DECIMAL(18,9),
        coalesce(sum(cache_loss_usd) FILTER (in_routes), 0)::DECIMAL(18,9),
        coalesce(sum(wasted_usd) FILTER (in_routes OR provider = $provider), 0)::DECIMAL(18,9)
    FROM (SELECT *, route IN (SELECT unnest($routes::VARCHAR[])) AS in_routes FROM rollup_minute
          WHERE bucket >= $lo AND bucket < $hi)
"""
_REWARM = """
    SELECT coalesce(sum(rewarm_usd), 0)::DECIMAL(18,9) FROM rollup_minute
    WHERE bucket >= $lo AND bucket < $hi AND route IN (SELECT unnest($routes::VARCHAR[]))
"""
_TOP_ERROR = """
    SELECT error_class, http_status, count(*) AS n FROM attempts
    WHERE started_at >= $lo AND started_at < $hi AND outcome = 'error'
        AND coalesce(fault_kind, '') <> 'request'
        AND (provider = $provider OR route IN (SELECT unnest($routes::VARCHAR[])))
    GROUP BY ALL ORDER BY n DESC, error_class LIMIT 1
"""
_REPLACE = """
    INSERT INTO incidents VALUES ($id, $scope, $subject, $start, $end, $peak, $faults, $top,
        $routes, $requests, $affected, $by_fallback, $failed, $premium, $cache_loss,
        $price_difference, $rewarm, $wasted, $extra)
"""


def refresh_incidents(
    con: duckdb.DuckDBPyConnection, now: datetime, policy: IncidentPolicy | None = None
) -> int:
    """Recompute every incident from the minute rollups and replace the table in one
    transaction; the number of incidents. Idempotent: an incident keeps its id (scope,
    subject, start) from one run to the next."""
    policy = policy or IncidentPolicy()
    windows = detect(con, now, policy)
    rows = [_row(con, w, now, policy) for w in windows]
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM incidents")
        for row in rows:
            con.execute(_REPLACE, row)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return len(rows)


def _row(
    con: duckdb.DuckDBPyConnection, w: Window, now: datetime, policy: IncidentPolicy
) -> dict[str, object]:
    ongoing = w.end >= now.replace(second=0, microsecond=0) - policy.merge_gap
    hi = now if ongoing else w.end
    routes = sorted(w.routes)
    provider = w.subject if w.scope == "provider" else None
    span = {"lo": w.start, "hi": hi, "routes": routes}
    impact = con.execute(_IMPACT, {**span, "provider": provider}).fetchone()
    requests, affected, by_fallback, failed, premium, cache_loss, wasted = impact
    rewarm = Decimal(0)
    if not ongoing:
        rewarm_span = {"lo": w.start, "hi": w.end + RECOVERY, "routes": routes}
        (rewarm,) = con.execute(_REWARM, rewarm_span).fetchone()
    top = con.execute(_TOP_ERROR, {**span, "provider": provider}).fetchone()
    top_error = None
    if top is not None:
        error_class, status, n = top
        top_error = f"{error_class}" + (f" ({status})" if status else "") + f" ×{n}"
    return {
        "id": f"{w.scope}:{w.subject}:{w.start:%Y%m%dT%H%MZ}",
        "scope": w.scope, "subject": w.subject, "start": w.start,
        "end": None if ongoing else w.end, "peak": w.peak, "faults": w.faults,
        "top": top_error, "routes": ", ".join(routes), "requests": requests,
        "affected": affected, "by_fallback": by_fallback, "failed": failed,
        "premium": premium, "cache_loss": cache_loss,
        "price_difference": premium - cache_loss, "rewarm": rewarm, "wasted": wasted,
        "extra": premium + rewarm,
    }  # fmt: skip
