"""The catalogue of published snapshots: each one's name, grain and columns, in one place.

The scheduler publishes the store as read-only Parquet snapshots (engine.published.publish;
the 24 h of attempts as parts, engine.published.partitions) and everyone else reads them
(engine.published.read). This module is the contract between the two:

- `name`: the snapshot's file, `<published>/<name>.parquet` (a folder of parts when it is
  `partitioned`), and the table its queries read;
- `grain`: the columns that name one row (what a row is: an attempt, a minute of a route's
  target, an alert);
- `columns`: its columns and their DuckDB types, in the order they are written. A writer
  selects exactly these (`select`), so a column left out here never leaves the store (the
  body of a notification); a reader stands in an empty table of these while a snapshot is not
  published yet (a fresh install reads empty frames, not errors).

The store's tables are created by migrations, frozen once shipped; these are the snapshots as
published now. tests/store/test_catalogue.py publishes every snapshot from a freshly migrated
store and checks it has exactly these columns and types, as tests/store/test_migrations.py
checks the attempts against the attempt record.

Imports nothing of the store: the store and the scheduler import it to write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from engine.telemetry.columns import DUCKDB_COLUMNS

Column = tuple[str, str]  # (name, DuckDB type)

RECENT_ATTEMPTS = "recent_attempts"
SLO_STATUS = "slo_status"
# The rollup snapshots by their time grain (the tables of the same names, engine.store.rollups).
ROLLUPS = {"minute": "rollup_minute", "hour": "rollup_hour", "day": "rollup_day"}
# The traffic profile's quantiles: each DOUBLE[] of traffic_sizes and target_latency holds a
# distribution at these levels, fine in the tails, where a p99 is read.
LEVELS: tuple[float, ...] = (0.0, 0.01, *(i / 100 for i in range(5, 100, 5)), 0.99, 1.0)
# incident_minutes covers an incident from this long before it to as long after it: the
# window a what-if replays.
REPLAY_MARGIN = timedelta(minutes=10)

_COLUMN = re.compile(r"(\w+)\s+(\w+(?:\(\d+,\s*\d+\))?(?:\[\])?)")


def _columns(ddl: str) -> tuple[Column, ...]:
    """`name TYPE, …` as (name, type) pairs; a type may hold a comma (DECIMAL(18,9))."""
    return tuple(_COLUMN.findall(ddl))


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    grain: tuple[str, ...]  # the columns that name one row
    columns: tuple[Column, ...]
    partitioned: bool = False  # published as parts the manifest lists

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    @property
    def ddl(self) -> str:
        """The columns as a CREATE TABLE takes them, all nullable."""
        return ", ".join(f"{name} {kind}" for name, kind in self.columns)


_ROLLUP = _columns("""
    bucket TIMESTAMPTZ, route VARCHAR, provider VARCHAR, model VARCHAR, target VARCHAR,
    feature VARCHAR,
    requests BIGINT, answered BIGINT, answered_by_fallback BIGINT, request_faults BIGINT,
    unavailable BIGINT, broken_streams BIGINT, abandoned BIGINT,
    attempts BIGINT, failed_attempts BIGINT, request_fault_attempts BIGINT,
    provider_faults BIGINT, account_faults BIGINT, rate_limited BIGINT, ambiguous_faults BIGINT,
    latency_p50_ms DOUBLE, latency_p95_ms DOUBLE, latency_p99_ms DOUBLE,
    ttft_p50_ms DOUBLE, ttft_p95_ms DOUBLE,
    input_tokens BIGINT, output_tokens BIGINT, cache_read_tokens BIGINT, cache_write_tokens BIGINT,
    cost_usd DECIMAL(18,9), unpriced_attempts BIGINT, wasted_usd DECIMAL(18,9),
    fallback_premium_usd DECIMAL(18,9), cache_loss_usd DECIMAL(18,9), rewarm_usd DECIMAL(18,9),
    quality_errors BIGINT, drill_fallbacks BIGINT, drill_failures BIGINT
""")
_ROLLUP_GRAIN = ("bucket", "route", "provider", "model", "target", "feature")

_SHAPES = (
    # Every attempt of the last 24 hours, as the recorder wrote it (engine.telemetry.columns).
    Shape(
        RECENT_ATTEMPTS,
        ("request_id", "attempt_number"),
        _columns(DUCKDB_COLUMNS.replace(" NOT NULL", "")),
        partitioned=True,
    ),
    # docs/metrics.md's figures per minute (the last day), hour (35 days) and day (all).
    *(Shape(table, _ROLLUP_GRAIN, _ROLLUP) for table in ROLLUPS.values()),
    # Each route's primary as last seen: what a fallback's premium is measured against.
    Shape(
        "route_primaries",
        ("route",),
        _columns("""
        route VARCHAR, target VARCHAR, provider_kind VARCHAR, model VARCHAR,
        last_seen TIMESTAMPTZ, provider VARCHAR
    """),
    ),
    # Failed attempts counted per day (35 days), for the weekly report's top failure classes.
    Shape(
        "failure_classes",
        ("day", "provider", "error_class", "fault_kind", "http_status"),
        _columns("""
        day TIMESTAMPTZ, provider VARCHAR, error_class VARCHAR, fault_kind VARCHAR,
        http_status SMALLINT, attempts BIGINT
    """),
    ),
    # Alerts firing, and those that fired in the last 35 days; one row an alert (rule, subject,
    # the time it fired).
    Shape(
        "alerts",
        ("alert_id",),
        _columns("""
        alert_id VARCHAR, rule VARCHAR, kind VARCHAR, severity VARCHAR, subject VARCHAR,
        state VARCHAR, fired_at TIMESTAMPTZ, resolved_at TIMESTAMPTZ, evaluated_at TIMESTAMPTZ,
        value DOUBLE, threshold DOUBLE, summary VARCHAR, cost_usd DECIMAL(18,9),
        notified BOOLEAN, silenced BOOLEAN
    """),
    ),
    # The outbox of the last 35 days, without the notification's body (`payload`): it stays in
    # the store, since it may echo details nobody reads here.
    Shape(
        "alert_notifications",
        ("notification_id",),
        _columns("""
        notification_id VARCHAR, alert_id VARCHAR, event VARCHAR, receiver VARCHAR,
        status VARCHAR, attempts INTEGER, created_at TIMESTAMPTZ, next_attempt_at TIMESTAMPTZ,
        delivered_at TIMESTAMPTZ, last_http_status SMALLINT, last_error VARCHAR
    """),
    ),
    Shape(
        "alert_silences",
        ("silence_id",),
        _columns("""
        silence_id VARCHAR, rule VARCHAR, subject VARCHAR, starts_at TIMESTAMPTZ,
        ends_at TIMESTAMPTZ, reason VARCHAR, created_at TIMESTAMPTZ, created_by VARCHAR
    """),
    ),
    # Every incident, per target and fault family (`scope` "target"; rows from before families
    # have no target, family or provider).
    Shape(
        "incidents",
        ("incident_id",),
        _columns("""
        incident_id VARCHAR, scope VARCHAR, subject VARCHAR, started_at TIMESTAMPTZ,
        ended_at TIMESTAMPTZ, peak_fault_rate DOUBLE, fault_attempts BIGINT, top_error VARCHAR,
        routes VARCHAR, requests BIGINT, requests_affected BIGINT, answered_by_fallback BIGINT,
        failed BIGINT, fallback_premium_usd DECIMAL(18,9), cache_loss_usd DECIMAL(18,9),
        price_difference_usd DECIMAL(18,9), rewarm_usd DECIMAL(18,9), wasted_usd DECIMAL(18,9),
        extra_cost_usd DECIMAL(18,9), target VARCHAR, family VARCHAR, provider VARCHAR,
        during_drills VARCHAR
    """),
    ),
    Shape(
        "breaker_events",
        ("event_id",),
        _columns("""
        event_id VARCHAR, occurred_at TIMESTAMPTZ, target VARCHAR, host VARCHAR,
        process_id INTEGER, seq BIGINT, from_status VARCHAR, to_status VARCHAR, reason VARCHAR,
        open_until TIMESTAMPTZ
    """),
    ),
    # Fallback readiness, whole: eval runs, their per-case results, fault drills (`report` is
    # JSON, written once the drill ended).
    Shape(
        "eval_runs",
        ("run_id",),
        _columns("""
        run_id VARCHAR, route VARCHAR, cases_file VARCHAR, started_at TIMESTAMPTZ,
        finished_at TIMESTAMPTZ, cases INTEGER, min_pass_rate DOUBLE
    """),
    ),
    Shape(
        "eval_results",
        ("run_id", "target", "case_name"),
        _columns("""
        run_id VARCHAR, route VARCHAR, target VARCHAR, case_name VARCHAR, passed BOOLEAN,
        reason VARCHAR, latency_ms DOUBLE, cost_usd DECIMAL(18,9), input_tokens BIGINT,
        output_tokens BIGINT, error VARCHAR
    """),
    ),
    Shape(
        "drills",
        ("drill_id",),
        _columns("""
        drill_id VARCHAR, route VARCHAR, target VARCHAR, started_at TIMESTAMPTZ,
        ends_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, requested_by VARCHAR, status VARCHAR,
        report VARCHAR, forced BOOLEAN, preflight VARCHAR, ended_reason VARCHAR,
        aborted_by_request VARCHAR
    """),
    ),
    # The traffic profile the what-if scenarios are built from (engine.store.traffic_profile),
    # 35 days of it. Per route and minute: requests, their outcomes and cost, and the answers'
    # prompt (input + cache read + cache write) and answer tokens, summed.
    Shape(
        "traffic_minute",
        ("bucket", "route"),
        _columns("""
        bucket TIMESTAMPTZ, route VARCHAR, requests BIGINT, answered BIGINT,
        answered_by_fallback BIGINT, failed BIGINT, request_faults BIGINT,
        cost_usd DECIMAL(18,9), fallback_premium_usd DECIMAL(18,9),
        cache_loss_usd DECIMAL(18,9), rewarm_usd DECIMAL(18,9), wasted_usd DECIMAL(18,9),
        answers BIGINT, prompt_tokens BIGINT, output_tokens BIGINT
    """),
    ),
    # Per route and hour: answers, their prompt and answer sizes at LEVELS; the primary's
    # prompt and cache reads on its warm answers (those that read its cache).
    Shape(
        "traffic_sizes",
        ("hour", "route"),
        _columns("""
        hour TIMESTAMPTZ, route VARCHAR, answers BIGINT, prompt_tokens DOUBLE[],
        output_tokens DOUBLE[], warm_prompt_tokens BIGINT, warm_cache_read_tokens BIGINT
    """),
    ),
    # Per target and hour: a success's latency and, streamed, its time to the first token, at
    # LEVELS.
    Shape(
        "target_latency",
        ("hour", "target"),
        _columns("""
        hour TIMESTAMPTZ, target VARCHAR, answers BIGINT, latency_ms DOUBLE[], streams BIGINT,
        ttft_ms DOUBLE[]
    """),
    ),
    # Per [[slo]], as of the cycle (engine.store.error_budget): this week's error budget (the
    # report's week, drills aside: `counted`, `failed`; `budget_left` a share, below 0 when
    # overspent; `failures_left` at this traffic until the week's end) and the burn rate and
    # counted requests over each window of the burn-rate table (NULL: none counted).
    Shape(
        SLO_STATUS,
        ("slo",),
        _columns("""
        slo VARCHAR, route VARCHAR, target DOUBLE, as_of TIMESTAMPTZ, week_start TIMESTAMPTZ,
        week_end TIMESTAMPTZ, counted BIGINT, failed BIGINT, drill_failed BIGINT,
        budget_left DOUBLE, failures_left BIGINT,
        burn_5m DOUBLE, burn_30m DOUBLE, burn_1h DOUBLE, burn_6h DOUBLE, burn_3d DOUBLE,
        counted_5m BIGINT, counted_30m BIGINT, counted_1h BIGINT, counted_6h BIGINT,
        counted_3d BIGINT
    """),
    ),
    # Per incident, minute and its target, REPLAY_MARGIN either side: the target's calls and
    # failed calls, and its faults by class (a minute without faults: one row with no class);
    # the requests of the routes whose primary it is (wanted) and those it did not serve (held:
    # answered by a backup or failed, its breaker's hold included).
    Shape(
        "incident_minutes",
        ("incident_id", "bucket", "target", "fault_kind", "error_class"),
        _columns("""
        incident_id VARCHAR, bucket TIMESTAMPTZ, target VARCHAR, calls BIGINT, failed BIGINT,
        fault_kind VARCHAR, error_class VARCHAR, failures BIGINT, retry_after_s DOUBLE,
        wanted BIGINT, held BIGINT
    """),
    ),
)
CATALOGUE: dict[str, Shape] = {shape.name: shape for shape in _SHAPES}
# name → its columns as a CREATE TABLE takes them (the reader's stand-in).
SNAPSHOT_COLUMNS: dict[str, str] = {name: shape.ddl for name, shape in CATALOGUE.items()}


def select(name: str, sql: str) -> str:
    """`sql` as the snapshot `name` is published: exactly its catalogued columns, in order."""
    return f"SELECT {', '.join(CATALOGUE[name].names)} FROM ({sql.strip().rstrip(';')})"
