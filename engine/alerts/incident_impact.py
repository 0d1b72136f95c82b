"""What each incident window did to the traffic and what it cost: one statement writes every
row of the `incidents` table from the windows engine.alerts.incidents found.

For an incident on target T, over the minutes of its window:
  - requests: those that counted on T: their route's primary is T, or they tried T (T a
    backup); request faults, abandoned requests and those a fault drill sent past T on its
    route (an exercise) aside;
  - requests affected: of those, the ones T did not answer = answered by fallback (another
    target answered) + failed (nothing did, or the stream broke);
  - routes: the routes of the affected requests, nothing else;
  - fallback premium and cache loss: of the routes whose primary is T (a backup's failure adds
    nothing to what its route pays beyond its primary), drilled minutes aside; re-warm the same,
    from the start to RECOVERY after the end (the primary's first successes may fall in its
    last minute); extra cost = fallback premium + re-warm;
  - wasted: the cost of T's attempts that did not succeed;
  - top error: the most frequent failure class (and HTTP status) among T's faults of the family;
  - during drills: the drills that ran on its routes while it lasted: the failures they caused
    are real and counted here, and said to be the drill's.
A drill's span includes its end: one that ended itself at its first failed request
(engine.state.drills
SelfAbort) can end the moment it started, and that request was still the drill's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import duckdb
import pyarrow as pa

from engine.store.rollups import UNDER_WAY

RECOVERY = timedelta(minutes=10)  # re-warm cost is counted this long after an incident

_WINDOWS = pa.schema([
    ("id", pa.string()), ("target", pa.string()), ("provider", pa.string()),
    ("family", pa.string()), ("kinds", pa.list_(pa.string())),
    ("lo", pa.timestamp("us", tz="UTC")), ("hi", pa.timestamp("us", tz="UTC")),
    ("rewarm_hi", pa.timestamp("us", tz="UTC")), ("ended_at", pa.timestamp("us", tz="UTC")),
    ("peak", pa.float64()),
])  # fmt: skip

# Each window is expanded into its minutes and joined to the rollups and attempts on the
# minute: equality joins, whatever the number of incidents (a range join with an OR degrades
# to a nested loop: 4.6 s for 950 incidents over 1 M attempts, measured).
_REFRESH = """
INSERT INTO incidents BY NAME
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
near AS (  -- the minutes whose attempts can belong to a request that started in a window
    SELECT DISTINCT unnest(generate_series(lo - INTERVAL 5 MINUTE, hi + INTERVAL 5 MINUTE,
        INTERVAL 1 MINUTE)) AS bucket
    FROM incident_windows
),
requests AS (  -- one row a request: where it started, what it tried, who answered
    SELECT request_id, time_bucket(INTERVAL 1 MINUTE, min(started_at)) AS bucket,
        min(started_at) AS first_at, arg_min(route, attempt_number) AS route,
        list(DISTINCT target) FILTER (outcome <> 'skipped') AS tried,
        any_value(target) FILTER (served AND outcome = 'success') AS answered_by,
        bool_or(decision = 'fail_fast') AS request_fault,
        bool_or(served AND outcome = 'error') AS broken,
        bool_or(outcome = 'cancelled') AS cancelled,
        -- a request still on its way is counted once over, as the rollups do
        bool_or(decision IN ('served', 'fail_fast', 'give_up', 'cancelled', 'in_band_error'))
            OR max(started_at + to_microseconds((latency_ms * 1000)::BIGINT)) < $settled AS over
    FROM attempts
    WHERE started_at >= $lo::TIMESTAMPTZ - INTERVAL 5 MINUTE
        AND started_at < $hi::TIMESTAMPTZ + INTERVAL 5 MINUTE
        AND time_bucket(INTERVAL 1 MINUTE, started_at) IN (SELECT bucket FROM near)
    GROUP BY request_id
),
counted AS (  -- the requests that counted on the incident's target
    SELECT w.id, q.route, coalesce(q.answered_by = w.target, false) AS by_target,
        q.answered_by IS NULL AS failed
    FROM minutes m
    JOIN incident_windows w USING (id)
    JOIN requests q USING (bucket)
    LEFT JOIN route_primaries p ON p.route = q.route
    WHERE (p.target = w.target OR list_contains(q.tried, w.target))
        AND q.over AND NOT q.request_fault
        AND NOT (q.cancelled AND q.answered_by IS NULL AND NOT q.broken)
        AND NOT EXISTS (
            SELECT 1 FROM drills d WHERE d.route = q.route AND d.target = w.target
                AND q.first_at BETWEEN d.started_at AND coalesce(d.ended_at, d.ends_at))
),
impact AS (
    SELECT id, count(*)::BIGINT AS requests,
        count(*) FILTER (NOT by_target)::BIGINT AS affected,
        count(*) FILTER (NOT by_target AND NOT failed)::BIGINT AS by_fallback,
        count(*) FILTER (failed)::BIGINT AS failed,
        list_sort(list_distinct(list(route) FILTER (NOT by_target))) AS routes
    FROM counted GROUP BY id
),
primary_rows AS (  -- the rollups of the routes whose primary is the target, drills aside
    SELECT m.id, r.fallback_premium_usd, r.cache_loss_usd
    FROM minutes m
    JOIN incident_windows w USING (id)
    JOIN rollup_minute r USING (bucket)
    JOIN route_primaries p ON p.route = r.route AND p.target = w.target
    WHERE NOT EXISTS (
        SELECT 1 FROM drills d WHERE d.route = r.route AND d.target = w.target
            AND d.started_at < r.bucket + INTERVAL 1 MINUTE
            AND coalesce(d.ended_at, d.ends_at) >= r.bucket)
),
money AS (
    SELECT id, coalesce(sum(fallback_premium_usd), 0)::DECIMAL(18,9) AS premium,
        coalesce(sum(cache_loss_usd), 0)::DECIMAL(18,9) AS cache_loss
    FROM primary_rows GROUP BY id
),
rewarm AS (
    SELECT m.id, coalesce(sum(r.rewarm_usd), 0)::DECIMAL(18,9) AS rewarm
    FROM rewarm_minutes m
    JOIN incident_windows w USING (id)
    JOIN rollup_minute r USING (bucket)
    JOIN route_primaries p ON p.route = r.route AND p.target = w.target
    GROUP BY m.id
),
wasted AS (
    SELECT m.id, coalesce(sum(r.wasted_usd), 0)::DECIMAL(18,9) AS wasted
    FROM minutes m
    JOIN incident_windows w USING (id)
    JOIN rollup_minute r ON r.bucket = m.bucket AND r.target = w.target
    GROUP BY m.id
),
failures AS (
    SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, target, fault_kind,
        error_class, http_status
    FROM attempts
    WHERE started_at >= $lo AND started_at < $hi AND outcome = 'error'
),
errors AS (
    SELECT m.id, coalesce(f.error_class, 'unknown') AS error_class, f.http_status,
        count(*) AS n
    FROM minutes m
    JOIN incident_windows w USING (id)
    JOIN failures f ON f.bucket = m.bucket AND f.target = w.target
    WHERE list_contains(w.kinds, f.fault_kind)
    GROUP BY ALL
),
top AS (
    SELECT id, sum(n)::BIGINT AS fault_attempts,
        arg_max(error_class || coalesce(' (' || http_status || ')', '') || ' ×' || n,
                n * 1000000 - rank) AS top_error
    FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY error_class) AS rank FROM errors)
    GROUP BY id
),
drilled AS (
    SELECT i.id, string_agg(DISTINCT d.drill_id, ', ' ORDER BY d.drill_id) AS drills
    FROM impact i
    JOIN incident_windows w USING (id)
    JOIN drills d ON d.started_at < w.hi AND coalesce(d.ended_at, d.ends_at) >= w.lo
    WHERE list_contains(i.routes, d.route)
    GROUP BY i.id
)
SELECT w.id AS incident_id, 'target' AS scope, w.target AS subject, w.lo AS started_at,
    w.ended_at, w.peak AS peak_fault_rate, coalesce(t.fault_attempts, 0) AS fault_attempts,
    coalesce(t.top_error, '') AS top_error,
    array_to_string(coalesce(i.routes, []::VARCHAR[]), ', ') AS routes,
    coalesce(i.requests, 0) AS requests, coalesce(i.affected, 0) AS requests_affected,
    coalesce(i.by_fallback, 0) AS answered_by_fallback, coalesce(i.failed, 0) AS failed,
    coalesce(mo.premium, 0) AS fallback_premium_usd, coalesce(mo.cache_loss, 0) AS cache_loss_usd,
    coalesce(mo.premium, 0) - coalesce(mo.cache_loss, 0) AS price_difference_usd,
    coalesce(rw.rewarm, 0) AS rewarm_usd, coalesce(wa.wasted, 0) AS wasted_usd,
    coalesce(mo.premium, 0) + coalesce(rw.rewarm, 0) AS extra_cost_usd,
    w.target, w.family, w.provider, coalesce(d.drills, '') AS during_drills
FROM incident_windows w
LEFT JOIN impact i USING (id) LEFT JOIN money mo USING (id) LEFT JOIN rewarm rw USING (id)
LEFT JOIN wasted wa USING (id) LEFT JOIN top t USING (id) LEFT JOIN drilled d USING (id)
"""


def write(
    con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]], keep: list[str], now: datetime
) -> None:
    """Replace every incident but those in `keep` by `rows` (windows: id, target, provider,
    family, kinds, lo, hi, rewarm_hi, ended_at, peak), in one transaction."""
    con.register("incident_windows", pa.Table.from_pylist(rows, schema=_WINDOWS))
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(
            "DELETE FROM incidents WHERE NOT list_contains($keep, incident_id)", {"keep": keep}
        )
        if rows:
            span = {"lo": min(r["lo"] for r in rows), "hi": max(r["hi"] for r in rows),
                    "settled": now - UNDER_WAY}  # fmt: skip
            con.execute(_REFRESH, span)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        con.unregister("incident_windows")
