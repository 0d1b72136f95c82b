"""Which failures, per provider: error attempts counted per hour, error class, fault kind and
HTTP status, for the weekly report's "top failure classes" (attempts are published for 24 hours
only, and the report covers weeks).

Kept like a rollup: each cycle recomputes the hours of the range it refreshed, from the
attempts, so the published classes always cover the incidents the same cycle found (the report
lists an incident's top error among its week's failure classes). Publishing reads this small
table, never the month of attempts.
"""

from __future__ import annotations

from datetime import datetime

import duckdb

from engine.store.rollups import bucket_end, bucket_start

FAILURE_HOURS_TABLE = """
CREATE TABLE failure_hours (hour TIMESTAMPTZ NOT NULL, provider VARCHAR, error_class VARCHAR,
    fault_kind VARCHAR, http_status SMALLINT, attempts BIGINT NOT NULL);
"""

_HOURS = """
SELECT time_bucket(INTERVAL 1 HOUR, started_at) AS hour, provider, error_class, fault_kind,
    http_status, count(*) AS attempts
FROM attempts
WHERE outcome = 'error' AND started_at >= $lo AND started_at < $hi
GROUP BY ALL
"""

# The failure classes of the last 35 days (what the hourly rollups cover), per day.
SNAPSHOT = """
SELECT time_bucket(INTERVAL 1 DAY, hour) AS day, provider, error_class, fault_kind,
    http_status, sum(attempts)::BIGINT AS attempts
FROM failure_hours WHERE hour >= $now - INTERVAL 35 DAY
GROUP BY ALL
"""

BACKFILL = "INSERT INTO failure_hours BY NAME " + _HOURS.replace(
    "started_at >= $lo AND started_at < $hi", "true"
)


def refresh_failures(con: duckdb.DuckDBPyConnection, since: datetime, until: datetime) -> None:
    """Recompute every hour that holds a moment in [since, until], in one transaction."""
    bounds = {"lo": bucket_start(since, "hour"), "hi": bucket_end(until, "hour")}
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM failure_hours WHERE hour >= $lo AND hour < $hi", bounds)
        con.execute(f"INSERT INTO failure_hours BY NAME {_HOURS}", bounds)
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
