"""The store's schema as an ordered list of numbered SQL steps, applied in one transaction at open.

To change the schema, append a `Migration` with the next number; never edit one that has
shipped, because databases in the field have already run it. Migration 1 spells its columns out
instead of using `records.DUCKDB_COLUMNS`, so that it stays frozen when `records.COLUMNS` grows;
`tests/store/test_migrations.py` fails until a new migration brings `attempts` back in line with
the records schema.

Decisions (measured on the 2-core dev machine; `python -m bench.store`):
- No PRIMARY KEY on attempts (request_id, attempt_number). Exactly-once comes from the
  `ingested_files` ledger, written in the same transaction as the rows. A key cost a quarter of
  the INSERT's speed on 1,000-row files (528 k → 396 k rows/s), half on 100,000-row files
  (1.28 M → 0.66 M), and tripled the file size (139 MB → 433 MB at 4 M rows).
- No indexes. DuckDB's ART index helps only selective point lookups; the rollups scan time
  windows, which the per-row-group min/max of `started_at` already prunes, because rows arrive
  in roughly time order.
- `batch_id` on every row names the ingest transaction that brought it, so that incremental
  rollups can find the minutes touched by late rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from engine.store.eval_drill_tables import DRILL_ABORT_COLUMNS, READINESS_TABLES
from engine.store.event_tables import EVENT_AND_ALERT_TABLES as EVENT_TABLES
from engine.store.event_tables import INCIDENT_TARGET_COLUMNS
from engine.store.failure_classes import BACKFILL as FAILURE_HOURS_BACKFILL
from engine.store.failure_classes import FAILURE_HOURS_TABLE
from engine.store.rollups import HELPER_TABLES, PRIMARY_PROVIDER, ROLLUP_COLUMNS
from engine.store.rollups import TABLES as ROLLUP_TABLES
from engine.store.telemetry import TABLES as TELEMETRY_TABLES
from engine.store.traffic_tables import TABLES as TRAFFIC_PROFILE_TABLES


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str  # one or more statements separated by semicolons


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "attempts and the ingest ledger",
        """
        CREATE SEQUENCE ingest_batch_seq START 1;

        CREATE TABLE attempts (
            request_id VARCHAR NOT NULL,
            attempt_number SMALLINT NOT NULL,
            route VARCHAR NOT NULL,
            target VARCHAR NOT NULL,
            provider VARCHAR NOT NULL,
            provider_kind VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            key_kind VARCHAR NOT NULL,
            host VARCHAR NOT NULL,
            process_id INTEGER NOT NULL,
            started_at TIMESTAMPTZ NOT NULL,
            latency_ms DOUBLE NOT NULL,
            ttft_ms DOUBLE,
            streamed BOOLEAN NOT NULL,
            outcome VARCHAR NOT NULL,
            decision VARCHAR NOT NULL,
            error_class VARCHAR,
            fault_kind VARCHAR,
            http_status SMALLINT,
            error_type VARCHAR,
            error_code VARCHAR,
            error_message VARCHAR,
            retry_after_s DOUBLE,
            breaker_state VARCHAR NOT NULL,
            served BOOLEAN NOT NULL,
            fallback_depth SMALLINT NOT NULL,
            input_tokens BIGINT NOT NULL,
            output_tokens BIGINT NOT NULL,
            cache_read_tokens BIGINT NOT NULL,
            cache_write_tokens BIGINT NOT NULL,
            tokens_estimated BOOLEAN NOT NULL,
            cost_usd DECIMAL(18,9),
            price_source VARCHAR,
            feature VARCHAR,
            pii_masked INTEGER NOT NULL,
            provider_request_id VARCHAR,
            batch_id BIGINT NOT NULL
        );

        CREATE TABLE ingested_files (
            file_name VARCHAR PRIMARY KEY,
            row_count BIGINT NOT NULL,
            batch_id BIGINT NOT NULL,
            ingested_at TIMESTAMPTZ NOT NULL
        );
        """,
    ),
    Migration(
        2,
        "rollups per minute, hour and day",
        # Built from rollups.ROLLUP_COLUMNS and HELPER_TABLES: those are frozen by this
        # migration, and a change to them needs a migration of its own.
        ";\n".join(f"CREATE TABLE {table} ({ROLLUP_COLUMNS})" for table in ROLLUP_TABLES.values())
        + ";\n"
        + HELPER_TABLES,
    ),
    Migration(
        3,
        "breaker events, alerts, their notifications and silences, incidents",
        ";\n".join(f"CREATE TABLE {name} ({columns})" for name, columns in EVENT_TABLES.items()),
    ),
    Migration(
        4,
        "the watermark of the pull from PostgreSQL",
        # One row per PostgreSQL database (switchover_source.id): the last (xact_id, id) pulled,
        # written in the same transaction as the rows (engine/telemetry/postgres_sink.py).
        """
        CREATE TABLE postgres_pulls (
            source_id VARCHAR PRIMARY KEY,
            last_xact_id BIGINT NOT NULL,
            last_id BIGINT NOT NULL,
            pulled_rows BIGINT NOT NULL,
            pulled_at TIMESTAMPTZ NOT NULL
        );
        """,
    ),
)

MIGRATIONS += (
    Migration(
        5,
        "the prompt version and quality error of an attempt; quality errors and the fallbacks a "
        "fault drill caused in the rollups",
        # Nullable columns: spool files and PostgreSQL rows from before carry neither.
        """
        ALTER TABLE attempts ADD COLUMN prompt_version VARCHAR;
        ALTER TABLE attempts ADD COLUMN quality_error VARCHAR;
        ALTER TABLE rollup_minute ADD COLUMN quality_errors BIGINT;
        ALTER TABLE rollup_hour ADD COLUMN quality_errors BIGINT;
        ALTER TABLE rollup_day ADD COLUMN quality_errors BIGINT;
        ALTER TABLE rollup_minute ADD COLUMN drill_fallbacks BIGINT;
        ALTER TABLE rollup_hour ADD COLUMN drill_fallbacks BIGINT;
        ALTER TABLE rollup_day ADD COLUMN drill_fallbacks BIGINT;
        """,
    ),
)

MIGRATIONS += (
    Migration(
        6,
        "fallback readiness: eval runs and results, fault drills",
        ";\n".join(
            f"CREATE TABLE {name} ({columns})" for name, columns in READINESS_TABLES.items()
        ),
    ),
)

MIGRATIONS += (
    Migration(
        7,
        "the unreadable stream events an attempt skipped",
        # Nullable: spool files and PostgreSQL rows from before do not carry it.
        "ALTER TABLE attempts ADD COLUMN unreadable_events INTEGER",
    ),
)

MIGRATIONS += (
    Migration(
        8,
        "telemetry health: the recorders' status files, the attempts they lost, the spool check",
        TELEMETRY_TABLES,
    ),
)

MIGRATIONS += (
    Migration(
        9,
        "a fault drill's pre-flight and why it aborted itself",
        ";\n".join(
            f"ALTER TABLE drills ADD COLUMN {name} {kind}"
            for name, kind in DRILL_ABORT_COLUMNS.items()
        ),
    ),
)

MIGRATIONS += (
    Migration(
        10,
        "incidents per target and fault family: their target, family, provider and drills",
        # The rows from before (per provider) are replaced by the next incident refresh.
        ";\n".join(
            f"ALTER TABLE incidents ADD COLUMN {name} {kind}"
            for name, kind in INCIDENT_TARGET_COLUMNS.items()
        ),
    ),
)

MIGRATIONS += (
    Migration(
        11,
        "a stream continued on another target: the attempt it continues, from how many characters",
        # Nullable: NULL on every attempt that is no continuation, and on rows from before.
        """
        ALTER TABLE attempts ADD COLUMN continues_attempt SMALLINT;
        ALTER TABLE attempts ADD COLUMN continued_chars INTEGER;
        """,
    ),
)

MIGRATIONS += (
    Migration(
        12,
        "the traffic profile: prompt and answer sizes per route and hour (their sums per "
        "minute), latency per target and hour (what-if scenarios from the store)",
        TRAFFIC_PROFILE_TABLES,
    ),
)

MIGRATIONS += (
    Migration(
        13,
        "a route's primary by its configured provider (the name its prices are found by: a "
        "price_provider or a provider/model override); failure classes per hour",
        # A target is "provider/model": the provider of a primary seen before is its prefix.
        f"""
        {PRIMARY_PROVIDER}
        UPDATE route_primaries SET provider = split_part(target, '/', 1);
        {FAILURE_HOURS_TABLE}
        {FAILURE_HOURS_BACKFILL};
        """,
    ),
)

MIGRATIONS += (
    Migration(
        14,
        "the archive parts: the days of attempts moved to Parquet under data/archive/",
        # engine/store/retention.py: a part is entered not complete before its file is written,
        # and completed in the transaction that deletes its rows; readers read complete ones.
        """
        CREATE TABLE archive_parts (
            file_name VARCHAR PRIMARY KEY,  -- under data/archive/: 2026-10/2026-10-03-1.parquet
            day TIMESTAMPTZ NOT NULL,  -- its attempts started in [day, day + 1 day), UTC
            row_count BIGINT,  -- NULL until complete
            complete BOOLEAN NOT NULL,
            archived_at TIMESTAMPTZ NOT NULL
        );
        """,
    ),
)

MIGRATIONS += (
    Migration(
        15,
        "the label of the gateway key a request came in with (budgets per key)",
        # Nullable: unlabelled keys, library calls, and rows from before say none.
        "ALTER TABLE attempts ADD COLUMN key_label VARCHAR",
    ),
)

MIGRATIONS += (
    Migration(
        16,
        "who asked for a silence (a dashboard user, the CLI)",
        # Nullable: silences from before, and control files written before, say nobody.
        "ALTER TABLE alert_silences ADD COLUMN created_by VARCHAR",
    ),
)

MIGRATIONS += (
    Migration(
        17,
        "the requests that failed during a fault drill, in the rollups (what an error budget "
        "sets aside)",
        # Nullable: buckets refreshed before it read as none (sums coalesce them to 0).
        """
        ALTER TABLE rollup_minute ADD COLUMN drill_failures BIGINT;
        ALTER TABLE rollup_hour ADD COLUMN drill_failures BIGINT;
        ALTER TABLE rollup_day ADD COLUMN drill_failures BIGINT;
        """,
    ),
)

MIGRATIONS += (
    Migration(
        18,
        "the targets a request passed over without a call (breaker open, drill, disabled, "
        "window too small, no time left), on its attempts: engine.core.skips, as JSON",
        # Nullable: NULL on the attempts that passed nothing over, and on rows from before.
        "ALTER TABLE attempts ADD COLUMN skips VARCHAR",
    ),
)

MIGRATIONS += (
    Migration(
        19,
        "a cache-hit baseline given rather than measured (a simulation's: the scenario's, or "
        "for a replay the store's): kept when late attempts make the measured ones computed again",
        "ALTER TABLE baselines ADD COLUMN given BOOLEAN DEFAULT false",
    ),
)

LATEST = MIGRATIONS[-1].version


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer Switchover than the one running."""


def apply(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> list[int]:
    """Run every migration the database has not seen, all in one transaction; return their
    versions. A failure leaves the database as it was."""
    applied_at = now or datetime.now(UTC)
    con.begin()
    try:
        con.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
            " applied_at TIMESTAMPTZ NOT NULL)"
        )
        (current,) = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
        if current > LATEST:
            raise SchemaTooNewError(
                f"the database is at schema version {current}, newer than this code ({LATEST})"
            )
        done = []
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            con.execute(migration.sql)
            con.execute(
                "INSERT INTO schema_version VALUES ($version, $name, $applied_at)",
                {"version": migration.version, "name": migration.name, "applied_at": applied_at},
            )
            done.append(migration.version)
        con.commit()
    except BaseException:
        con.rollback()
        raise
    return done


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    (version,) = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return version
