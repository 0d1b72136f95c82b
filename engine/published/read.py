"""Named, parameterised queries over the published Parquet snapshots, for the dashboard and reports.

`PublishedData` holds an in-memory DuckDB. It never opens the scheduler's .duckdb file (that
would take or collide with its lock) and never formats a value into SQL: every query is a
module-level constant with `$name` parameters bound by DuckDB.

Correct while the scheduler replaces snapshots. DuckDB opens a Parquet path more than once in
one query (to bind it, and again to fetch the other columns of an ORDER BY ... LIMIT), so a
query by path can read the footer of one version and the pages of the next: measured, about one
query in twenty failed ("Invalid data", "bytes outside file") while a snapshot was republished
in a loop. So each query first opens every snapshot it reads, once, and reads it through
`/dev/fd/<n>`: the descriptor pins that version's inode for the whole query, whatever
`os.replace` does meanwhile (Linux and macOS). These per-query views are TEMP views on the
query's own cursor, which also makes concurrent Streamlit threads independent. The 24 h of
attempts are a set of parts (engine.published.partitions): a query takes the set from one version
of the manifest and opens every part before it runs, so it reads one consistent set; a part
compacted away in between makes it list them again. A snapshot that does not exist yet
reads as an empty table with its columns, so a fresh install shows empty DataFrames, not
errors.

To add a query: add it to QUERIES with the snapshots it `reads`; a new snapshot also needs its
columns in SNAPSHOT_COLUMNS (tests/store/test_read.py checks both).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from engine.published.publish import RECENT_ATTEMPTS, Snapshot, read_manifest
from engine.store.db import sql_string
from engine.store.event_tables import EVENT_AND_ALERT_TABLES, INCIDENT_TARGET_COLUMNS
from engine.store.readiness_tables import DRILL_ABORT_COLUMNS, READINESS_TABLES
from engine.store.rollups import CURRENT_ROLLUP_COLUMNS
from engine.store.rollups import TABLES as ROLLUP_TABLES
from engine.store.traffic_profile import QUERY_SPECS as PROFILE_QUERIES
from engine.store.traffic_profile import SNAPSHOT_COLUMNS as PROFILE_COLUMNS
from engine.telemetry.columns import DUCKDB_COLUMNS

# The columns of each snapshot, as DuckDB DDL, for the empty stand-in before it exists.
SNAPSHOT_COLUMNS: dict[str, str] = {
    RECENT_ATTEMPTS: DUCKDB_COLUMNS.replace(" NOT NULL", ""),
    **{table: CURRENT_ROLLUP_COLUMNS.replace(" NOT NULL", "") for table in ROLLUP_TABLES.values()},
    "route_primaries": "route VARCHAR, target VARCHAR, provider_kind VARCHAR, model VARCHAR, "
    "last_seen TIMESTAMPTZ, provider VARCHAR",
    "failure_classes": "day TIMESTAMPTZ, provider VARCHAR, error_class VARCHAR, "
    "fault_kind VARCHAR, http_status SMALLINT, attempts BIGINT",
    **PROFILE_COLUMNS,  # what-if scenarios from the store (engine.store.traffic_profile)
    **{
        table: ", ".join(
            line.strip().rstrip(",").replace(" NOT NULL", "").replace(" PRIMARY KEY", "")
            for line in columns.strip().splitlines()
            # the notification's body stays in the store: it may echo details nobody reads here
            if not line.strip().startswith("payload ")
        )
        for table, columns in {**EVENT_AND_ALERT_TABLES, **READINESS_TABLES}.items()
    },
}
# The columns later migrations added (9: a drill's pre-flight and abort; 10: incidents per
# target and fault family), in the stand-in too.
for _table, _added in (("drills", DRILL_ABORT_COLUMNS), ("incidents", INCIDENT_TARGET_COLUMNS)):
    SNAPSHOT_COLUMNS[_table] += "".join(f", {name} {kind}" for name, kind in _added.items())

REQUIRED = object()  # a parameter with no default
FD_DIR = "/dev/fd"
PARTITIONED = {RECENT_ATTEMPTS}  # published as parts the manifest lists
_LIST_TRIES = 5


class _PartGone(Exception):
    """A part the manifest listed was deleted before this reader opened it."""


@dataclass(frozen=True, slots=True)
class Query:
    sql: str
    reads: tuple[str, ...]  # the snapshots the SQL names
    params: Mapping[str, Any] = field(default_factory=dict)  # name → default, or REQUIRED

    def bind(self, given: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(given) - set(self.params)
        if unknown:
            raise TypeError(f"unknown parameters {sorted(unknown)}; known: {sorted(self.params)}")
        bound = {**self.params, **given}
        missing = [name for name, value in bound.items() if value is REQUIRED]
        if missing:
            raise TypeError(f"missing parameters {missing}")
        return bound


# time_bucket, not date_trunc: on TIMESTAMPTZ date_trunc goes through ICU's calendar, ~3× slower
# (1 M rows by minute: ~180 ms against ~60 ms).
QUERIES: dict[str, Query] = {
    "recent_attempts": Query(
        """
        SELECT * FROM recent_attempts
        WHERE started_at >= $since
          AND ($until IS NULL OR started_at < $until)
          AND ($route IS NULL OR route = $route)
          AND ($provider IS NULL OR provider = $provider)
          AND ($outcome IS NULL OR outcome = $outcome)
        ORDER BY started_at DESC, request_id, attempt_number
        LIMIT $limit
        """,
        (RECENT_ATTEMPTS,),
        {
            "since": REQUIRED,
            "until": None,
            "route": None,
            "provider": None,
            "outcome": None,
            "limit": 500,
        },
    ),
    "attempt_counts_by_minute": Query(
        """
        SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS minute, provider, outcome,
               count(*) AS attempts
        FROM recent_attempts
        WHERE started_at >= $since AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL
        ORDER BY minute, provider, outcome
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    "attempt_latency_by_minute": Query(
        """
        SELECT time_bucket(INTERVAL 1 MINUTE, started_at) AS bucket, count(*) AS attempts,
               quantile_cont(latency_ms, 0.5) AS p50_ms, quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE started_at >= $since AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    "attempt_latency": Query(
        """
        SELECT count(*) AS attempts, quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE started_at >= $since AND ($until IS NULL OR started_at < $until)
        HAVING count(*) > 0
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    # The Live page's timelines and health lines. Skipped rows made no HTTP call: they are
    # requests, never attempts, so they carry no latency (as in the rollups).
    "latency_by_bucket": Query(
        """
        SELECT time_bucket($width, started_at) AS bucket, count(*) AS attempts,
               quantile_cont(latency_ms, 0.5) AS p50_ms, quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE outcome <> 'skipped' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None, "width": timedelta(minutes=1)},
    ),
    "latency_between": Query(
        """
        SELECT count(*) AS attempts, quantile_cont(latency_ms, 0.5) AS p50_ms,
               quantile_cont(latency_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE outcome <> 'skipped' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        HAVING count(*) > 0
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    # Time to first token of the streamed attempts that answered, per route.
    "ttft_by_bucket": Query(
        """
        SELECT time_bucket($width, started_at) AS bucket, route, count(*) AS streams,
               quantile_cont(ttft_ms, 0.5) AS p50_ms, quantile_cont(ttft_ms, 0.99) AS p99_ms
        FROM recent_attempts
        WHERE streamed AND outcome = 'success' AND ttft_ms IS NOT NULL
          AND started_at >= $since AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket, route
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None, "width": timedelta(minutes=1)},
    ),
    # Failed attempts by what failed; the dashboard groups the classes for people.
    "failures_by_bucket": Query(
        """
        SELECT time_bucket($width, started_at) AS bucket, fault_kind, error_class, http_status,
               count(*) AS attempts
        FROM recent_attempts
        WHERE outcome = 'error' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY bucket, attempts DESC, error_class
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None, "width": timedelta(minutes=1)},
    ),
    "failures_by_target": Query(
        """
        SELECT target, fault_kind, error_class, http_status, count(*) AS attempts
        FROM recent_attempts
        WHERE outcome = 'error' AND started_at >= $since
          AND ($until IS NULL OR started_at < $until)
        GROUP BY ALL ORDER BY target, attempts DESC, error_class
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED, "until": None},
    ),
    "live_processes": Query(
        "SELECT DISTINCT host, process_id FROM recent_attempts WHERE started_at >= $since",
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED},
    ),
    "attempt_values": Query(
        """
        SELECT DISTINCT route, provider, outcome, decision FROM recent_attempts
        WHERE started_at >= $since
        """,
        (RECENT_ATTEMPTS,),
        {"since": REQUIRED},
    ),
    "find_attempts": Query(
        """
        SELECT *, count(*) OVER () AS matching FROM recent_attempts
        WHERE started_at >= $since
          AND ($routes IS NULL OR list_contains($routes, route))
          AND ($providers IS NULL OR list_contains($providers, provider))
          AND ($outcomes IS NULL OR list_contains($outcomes, outcome))
          AND ($decisions IS NULL OR list_contains($decisions, decision))
        ORDER BY started_at DESC, request_id, attempt_number
        LIMIT $limit
        """,
        (RECENT_ATTEMPTS,),
        {
            "since": REQUIRED,
            "routes": None,
            "providers": None,
            "outcomes": None,
            "decisions": None,
            "limit": 500,
        },
    ),
    "request_attempts": Query(
        """
        SELECT * FROM recent_attempts WHERE request_id = $request_id
        ORDER BY attempt_number
        """,
        (RECENT_ATTEMPTS,),
        {"request_id": REQUIRED},
    ),
    **{
        f"{grain}_rollups": Query(
            f"""
            SELECT * FROM {table}
            WHERE bucket >= $since AND ($until IS NULL OR bucket < $until)
              AND ($route IS NULL OR route = $route)
              AND ($provider IS NULL OR provider = $provider)
              AND ($feature IS NULL OR feature = $feature)
            ORDER BY bucket, route, provider, model, feature
            """,
            (table,),
            {"since": REQUIRED, "until": None, "route": None, "provider": None, "feature": None},
        )
        for grain, table in ROLLUP_TABLES.items()
    },
    "route_primaries": Query(
        "SELECT * FROM route_primaries ORDER BY route", ("route_primaries",), {}
    ),
    "alerts": Query(
        """
        SELECT * FROM alerts
        WHERE (state = 'firing' OR fired_at >= $since)
          AND ($state IS NULL OR state = $state)
        ORDER BY state = 'firing' DESC, severity = 'critical' DESC, fired_at DESC
        """,
        ("alerts",),
        {"since": REQUIRED, "state": None},
    ),
    "alert_notifications": Query(
        """
        SELECT * FROM alert_notifications
        WHERE created_at >= $since AND ($alert_id IS NULL OR alert_id = $alert_id)
        ORDER BY created_at DESC, notification_id
        """,
        ("alert_notifications",),
        {"since": REQUIRED, "alert_id": None},
    ),
    "alert_silences": Query(
        "SELECT * FROM alert_silences WHERE ends_at > $since ORDER BY ends_at",
        ("alert_silences",),
        {"since": REQUIRED},
    ),
    "incidents": Query(
        """
        SELECT * FROM incidents
        WHERE (ended_at IS NULL OR ended_at >= $since)
          AND ($until IS NULL OR started_at < $until)
          AND ($scope IS NULL OR scope = $scope)
        ORDER BY ended_at IS NULL DESC, started_at DESC
        """,
        ("incidents",),
        {"since": REQUIRED, "until": None, "scope": None},
    ),
    "failure_classes": Query(
        """
        SELECT * FROM failure_classes
        WHERE day >= $since AND ($until IS NULL OR day < $until)
        ORDER BY day, provider, attempts DESC
        """,
        ("failure_classes",),
        {"since": REQUIRED, "until": None},
    ),
    "breaker_events": Query(
        """
        SELECT * FROM breaker_events
        WHERE occurred_at >= $since AND ($until IS NULL OR occurred_at < $until)
          AND ($target IS NULL OR target = $target)
        ORDER BY occurred_at, event_id
        """,
        ("breaker_events",),
        {"since": REQUIRED, "until": None, "target": None},
    ),
    # Readiness (docs/metrics.md, Readiness): runs started in [since, until), newest first.
    "eval_runs": Query(
        """
        SELECT * FROM eval_runs
        WHERE ($since IS NULL OR started_at >= $since) AND ($until IS NULL OR started_at < $until)
          AND ($route IS NULL OR route = $route)
        ORDER BY started_at DESC, run_id
        """,
        ("eval_runs",),
        {"since": None, "until": None, "route": None},
    ),
    # One row a run and target: its pass rate (cases passed ÷ cases run) and what the run cost.
    "eval_scores": Query(
        """
        SELECT *, pass_rate < min_pass_rate AS below_minimum FROM (
            SELECT u.run_id, u.route, u.cases_file, u.started_at, u.finished_at,
                u.min_pass_rate, x.target, count(*) AS cases,
                count(*) FILTER (x.passed) AS passed,
                count(*) FILTER (x.passed) / count(*) AS pass_rate,
                count(*) FILTER (x.error IS NOT NULL) AS errors,
                quantile_cont(x.latency_ms, 0.5) AS latency_p50_ms,
                sum(x.cost_usd)::DECIMAL(18,9) AS cost_usd
            FROM eval_runs u JOIN eval_results x ON x.run_id = u.run_id
            WHERE ($since IS NULL OR u.started_at >= $since)
              AND ($until IS NULL OR u.started_at < $until)
              AND ($route IS NULL OR u.route = $route)
            GROUP BY ALL
        )
        ORDER BY started_at DESC, run_id, target
        """,
        ("eval_runs", "eval_results"),
        {"since": None, "until": None, "route": None},
    ),
    "eval_results": Query(
        """
        SELECT * FROM eval_results
        WHERE ($run_id IS NULL OR run_id = $run_id) AND ($passed IS NULL OR passed = $passed)
        ORDER BY run_id, target, case_name
        """,
        ("eval_results",),
        {"run_id": None, "passed": None},
    ),
    # Drills that were on at some time since `since` (all of them without it), newest first,
    # with the figures of their report (JSON, written once the drill ended) as columns.
    "drills": Query(
        """
        SELECT * EXCLUDE (r),
            r->>'verdict' AS verdict, r->>'summary' AS summary,
            (r->>'requests')::BIGINT AS requests,
            (r->>'served_by_backups')::BIGINT AS served_by_backups,
            (r->>'failed')::BIGINT AS failed, (r->>'drill_faults')::BIGINT AS drill_faults,
            (r->>'breaker_opened_after_s')::DOUBLE AS breaker_opened_after_s,
            (r->>'cost_usd')::DECIMAL(18,9) AS cost_usd,
            (r->>'primary_estimate_usd')::DECIMAL(18,9) AS primary_estimate_usd,
            (r->>'cost_difference_usd')::DECIMAL(18,9) AS cost_difference_usd,
            (r->>'restored')::BOOLEAN AS restored,
            (r->>'restored_after_s')::DOUBLE AS restored_after_s
        FROM (SELECT *, CASE WHEN json_valid(report) THEN report END AS r FROM drills)
        WHERE ($since IS NULL OR ended_at IS NULL OR ended_at >= $since)
          AND ($until IS NULL OR started_at < $until)
          AND ($route IS NULL OR route = $route)
        ORDER BY started_at DESC, drill_id
        """,
        ("drills",),
        {"since": None, "until": None, "route": None},
    ),
    **{name: Query(sql, reads, params) for name, (sql, reads, params) in PROFILE_QUERIES.items()},
}


class PublishedData:
    """Read-only access to `published_dir`; one per process (Streamlit: st.cache_resource)."""

    def __init__(self, published_dir: Path) -> None:
        self.published_dir = Path(published_dir)
        # No cache keyed by path: /dev/fd/<n> names a different file from one query to the next.
        self._con = duckdb.connect(config={"enable_external_file_cache": False})
        self._con.execute("SET GLOBAL parquet_metadata_cache = false")
        self._con.execute("SET GLOBAL TimeZone = 'UTC'")
        for name, columns in SNAPSHOT_COLUMNS.items():
            self._con.execute(f"CREATE TABLE _empty_{name} ({columns})")
            self._con.execute(f"CREATE VIEW {name} AS SELECT * FROM _empty_{name}")

    def names(self) -> list[str]:
        return sorted(QUERIES)

    def snapshots(self) -> dict[str, Snapshot]:
        """What is published, with row counts and write times (for freshness)."""
        return read_manifest(self.published_dir)

    def query(self, name: str, **params: Any) -> pd.DataFrame:
        try:
            query = QUERIES[name]
        except KeyError:
            raise KeyError(f"no query named {name!r}; known: {self.names()}") from None
        bound = query.bind(params)
        for _ in range(_LIST_TRIES - 1):
            try:
                return self._run(query, bound)
            except _PartGone:
                continue  # compacted away since the manifest was read: list the parts again
        return self._run(query, bound)

    def _run(self, query: Query, bound: dict[str, Any]) -> pd.DataFrame:
        manifest = read_manifest(self.published_dir) if PARTITIONED & set(query.reads) else {}
        cursor = self._con.cursor()
        pinned: list[int] = []
        try:
            for snapshot in query.reads:
                fds = self._pin(snapshot, manifest.get(snapshot))
                pinned.extend(fds)
                if not fds:
                    continue  # not published yet: the empty stand-in answers
                sources = ", ".join(sql_string(f"{FD_DIR}/{fd}") for fd in fds)
                cursor.execute(
                    f"CREATE TEMP VIEW {snapshot} AS "
                    f"SELECT * FROM read_parquet([{sources}], union_by_name = true)"
                )
            return cursor.execute(query.sql, bound).df()
        finally:
            cursor.close()
            for fd in pinned:
                os.close(fd)

    def _pin(self, snapshot: str, entry: Snapshot | None) -> list[int]:
        """A descriptor for each file of `snapshot`: its parts as the manifest lists them, or
        its one file. Raises _PartGone when a listed part is no longer there."""
        if entry is None or entry.through_batch is None:
            try:
                return [os.open(self.published_dir / f"{snapshot}.parquet", os.O_RDONLY)]
            except FileNotFoundError:
                return []
        fds: list[int] = []
        try:
            for part in entry.parts:
                fds.append(os.open(self.published_dir / part.file, os.O_RDONLY))
        except FileNotFoundError:
            for fd in fds:
                os.close(fd)
            raise _PartGone(snapshot) from None
        return fds

    def close(self) -> None:
        self._con.close()
