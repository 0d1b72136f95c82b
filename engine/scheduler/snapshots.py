"""What the cycle publishes for the dashboard and the reports: the snapshots of the catalogue
(engine.published.catalogue) that the store fills, and the SQL that fills each one from it.

Republished whole every cycle that changed something (and once a minute regardless: the windows
slide, and the dashboard shows their age), except the 24 h of attempts, appended as parts
(engine.published.partitions), and the traffic profile, which its own job publishes
(engine.store.traffic_profile). Each is written with exactly its catalogued columns
(`catalogue.select`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import duckdb

from engine.config.slo import Slo
from engine.published import partitions
from engine.published import publish as publishing
from engine.published.catalogue import select
from engine.store import error_budget
from engine.store.failure_classes import SNAPSHOT as FAILURE_CLASSES

# The 24 h of attempts (recent_attempts): its window, for the parts and their compaction.
RECENT_ATTEMPTS_HOURS = 24

# Each snapshot the cycle publishes whole, and its rows in the store ($now: the cycle's time).
SOURCES: dict[str, str] = {
    "rollup_minute": "SELECT * FROM rollup_minute WHERE bucket >= $now - INTERVAL 1 DAY",
    "rollup_hour": "SELECT * FROM rollup_hour WHERE bucket >= $now - INTERVAL 35 DAY",
    "rollup_day": "SELECT * FROM rollup_day",
    "route_primaries": "SELECT * FROM route_primaries",
    "failure_classes": FAILURE_CLASSES,
    "alerts": "SELECT * FROM alerts WHERE state = 'firing' OR fired_at >= $now - INTERVAL 35 DAY",
    "alert_notifications": (
        "SELECT * FROM alert_notifications WHERE created_at >= $now - INTERVAL 35 DAY"
    ),
    "alert_silences": "SELECT * FROM alert_silences WHERE ends_at >= $now - INTERVAL 35 DAY",
    "incidents": "SELECT * FROM incidents",
    "breaker_events": "SELECT * FROM breaker_events WHERE occurred_at >= $now - INTERVAL 35 DAY",
    "eval_runs": "SELECT * FROM eval_runs",
    "eval_results": "SELECT * FROM eval_results",
    "drills": "SELECT * FROM drills",
}


def publish(
    con: duckdb.DuckDBPyConnection, published_dir: Path, now: datetime, slos: Sequence[Slo] = ()
) -> None:
    """The attempts ingested since the last cycle as a new part, then every snapshot of
    SOURCES, as of `now`, and the error budgets of the [[slo]] objectives `slos`."""
    partitions.append(con, published_dir, now, hours=RECENT_ATTEMPTS_HOURS)
    written = []
    for name, sql in SOURCES.items():
        params = {"now": now} if "$now" in sql else None
        written.append(publishing.write(con, published_dir, name, select(name, sql), params))
    publishing.record(published_dir, written)  # one manifest rewrite, not one a snapshot
    error_budget.publish_status(con, published_dir, slos, now)
