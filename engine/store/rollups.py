"""Rollups: what the attempts mean, per minute, hour and day, as `docs/metrics.md` defines it.

Incremental: a refresh recomputes whole buckets in a time range from the attempts table and
replaces them in one transaction, so a late spool file only means recomputing its buckets.
Request-level counts (a request may take several attempts, across targets) are bucketed by the
request's first attempt and attributed to the attempt that decided it (the one that served, or
else the last); attempt-level figures (latency, tokens, cost, faults) to each attempt's own
bucket and target. Money stays DECIMAL(18,9) from the attempt's cost to the rollup.

Runs inside the scheduler only: it writes to the DuckDB file, whose connection works in UTC, so
`time_bucket` (three times faster than `date_trunc` on TIMESTAMPTZ) cuts UTC minutes, hours
and days.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Literal, Protocol

import duckdb
import pyarrow as pa

from engine.store.rollup_queries import (
    ADD_BASELINES,
    COARSE,
    MINUTES,
    MISSING_BASELINES,
    UPDATE_PRIMARIES,
)

Grain = Literal["minute", "hour", "day"]
TABLES = {"minute": "rollup_minute", "hour": "rollup_hour", "day": "rollup_day"}

# A request whose last attempt asked for a retry or a fallback, and ended less than this ago,
# is taken as still under way (its next attempt not recorded yet) and left to a later refresh.
# Short enough that a refresh inside the scheduler's 2-minute lookback still sees it settled,
# even with one cycle a minute; a backup slower than this shows briefly as unavailable.
UNDER_WAY = timedelta(seconds=30)
# A long range (a late backlog, a backfill, the day rollups' catch-up) is refreshed in pieces
# this long, so that memory stays bounded whatever the range (`chunks`).
REFRESH_CHUNK = timedelta(hours=6)


class UnitPrices(Protocol):
    """USD per token (engine.core.pricing.UnitPrices)."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal


# (provider, provider_kind, model) → prices: the configured provider name first, as the
# recorder prices an attempt (its price_provider and provider/model overrides), then its kind.
PriceLookup = Callable[[str, str, str], UnitPrices | None]

_PRICES_SCHEMA = pa.schema(
    [
        ("provider", pa.string()),
        ("provider_kind", pa.string()),
        ("model", pa.string()),
        ("p_input", pa.decimal128(24, 15)),
        ("p_output", pa.decimal128(24, 15)),
        ("p_cache_read", pa.decimal128(24, 15)),
        ("p_cache_write", pa.decimal128(24, 15)),
    ]
)

# The rollup tables' columns (migration 2 creates the three tables from this, and the two
# helper tables below; migration 5 adds quality_errors and drill_fallbacks).
ROLLUP_COLUMNS = """
    bucket TIMESTAMPTZ NOT NULL, route VARCHAR NOT NULL, provider VARCHAR NOT NULL,
    model VARCHAR NOT NULL, target VARCHAR NOT NULL, feature VARCHAR NOT NULL,
    requests BIGINT, answered BIGINT, answered_by_fallback BIGINT, request_faults BIGINT,
    unavailable BIGINT, broken_streams BIGINT, abandoned BIGINT,
    attempts BIGINT, failed_attempts BIGINT, request_fault_attempts BIGINT,
    provider_faults BIGINT, account_faults BIGINT, rate_limited BIGINT, ambiguous_faults BIGINT,
    latency_p50_ms DOUBLE, latency_p95_ms DOUBLE, latency_p99_ms DOUBLE,
    ttft_p50_ms DOUBLE, ttft_p95_ms DOUBLE,
    input_tokens BIGINT, output_tokens BIGINT, cache_read_tokens BIGINT, cache_write_tokens BIGINT,
    cost_usd DECIMAL(18,9), unpriced_attempts BIGINT, wasted_usd DECIMAL(18,9),
    fallback_premium_usd DECIMAL(18,9), cache_loss_usd DECIMAL(18,9), rewarm_usd DECIMAL(18,9)
"""
# The tables as they are now: migration 5 added quality_errors and drill_fallbacks, migration
# 17 drill_failures.
CURRENT_ROLLUP_COLUMNS = (
    ROLLUP_COLUMNS.rstrip()
    + ", quality_errors BIGINT, drill_fallbacks BIGINT, drill_failures BIGINT\n"
)
HELPER_TABLES = """
CREATE TABLE route_primaries (route VARCHAR PRIMARY KEY, target VARCHAR, provider_kind VARCHAR,
    model VARCHAR, last_seen TIMESTAMPTZ);
CREATE TABLE baselines (route VARCHAR, hour TIMESTAMPTZ, hit_ratio DOUBLE,
    PRIMARY KEY (route, hour));
"""
# Migration 13: a primary's configured provider, the name its prices are found by.
PRIMARY_PROVIDER = "ALTER TABLE route_primaries ADD COLUMN provider VARCHAR;"
CURRENT_HELPER_TABLES = HELPER_TABLES + PRIMARY_PROVIDER  # as they are now


@dataclass(frozen=True, slots=True)
class RefreshResult:
    grain: Grain
    lo: datetime
    hi: datetime
    rows: int


def bucket_start(at: datetime, grain: Grain) -> datetime:
    if grain == "minute":
        return at.replace(second=0, microsecond=0)
    if grain == "hour":
        return at.replace(minute=0, second=0, microsecond=0)
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def bucket_end(at: datetime, grain: Grain) -> datetime:
    """The end of the bucket holding `at` (exclusive)."""
    step = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
    return bucket_start(at, grain) + step[grain]


def refresh(
    con: duckdb.DuckDBPyConnection,
    grain: Grain,
    since: datetime,
    until: datetime,
    prices: PriceLookup,
    *,
    now: datetime | None = None,
) -> RefreshResult:
    """Recompute every `grain` bucket that holds a moment in [since, until]. Refresh minutes
    before the hours and days that contain them: those are built from the minutes. `now` (the
    cycle's time; `until` when not given) tells requests still under way from finished ones."""
    lo, hi = bucket_start(since, grain), bucket_end(until, grain)
    bounds = {"lo": lo, "hi": hi}
    table = TABLES[grain]
    con.execute("BEGIN TRANSACTION")
    try:
        if grain == "minute":
            con.execute(UPDATE_PRIMARIES, bounds)
            _load_prices(con, prices)  # the primaries' only: the attempts carry their own cost
            _add_baselines(con, bounds)
            query, params = MINUTES, {**bounds, "settled": (now or until) - UNDER_WAY}
        else:
            query, params = COARSE.format(unit=grain), bounds
        con.execute(f"DELETE FROM {table} WHERE bucket >= $lo AND bucket < $hi", bounds)
        con.execute(f"INSERT INTO {table} BY NAME {query}", params)
        (rows,) = con.execute(
            f"SELECT count(*) FROM {table} WHERE bucket >= $lo AND bucket < $hi", bounds
        ).fetchone()
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return RefreshResult(grain, lo, hi, rows)


def _add_baselines(con: duckdb.DuckDBPyConnection, bounds: dict[str, datetime]) -> None:
    missing = con.execute(MISSING_BASELINES, bounds).fetchall()
    if missing:
        rows = [{"route": route, "hour": hour} for route, hour in missing]
        con.execute(ADD_BASELINES, {"missing": rows})


def forget_baselines(con: duckdb.DuckDBPyConnection, since: datetime) -> None:
    """Late attempts from `since` on: the cache-hit baselines of the hours they can enter (the
    next day's) are computed again by the refresh that follows, which must cover them."""
    con.execute(
        "DELETE FROM baselines WHERE hour >= time_bucket(INTERVAL 1 HOUR, $since::TIMESTAMPTZ)"
        " AND NOT given",
        {"since": since},
    )


def _load_prices(con: duckdb.DuckDBPyConnection, prices: PriceLookup) -> None:
    """Per-token prices of every route's primary, from engine.core.pricing, as a temporary table the
    rollup query joins (prices never live in SQL as literals). Only the primaries: what the
    primary would have charged is the one price the rollups compute; every attempt's own cost
    was priced by the recorder."""
    models = con.execute("SELECT DISTINCT provider, provider_kind, model FROM route_primaries")
    rows = []
    for provider, kind, model in models.fetchall():
        unit = prices(provider, kind, model)
        if unit is not None:
            rows.append(
                {
                    "provider": provider,
                    "provider_kind": kind,
                    "model": model,
                    "p_input": unit.input,
                    "p_output": unit.output,
                    "p_cache_read": unit.cache_read,
                    "p_cache_write": unit.cache_write,
                }
            )
    con.register("price_rows", pa.Table.from_pylist(rows, schema=_PRICES_SCHEMA))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE prices AS SELECT * FROM price_rows")
    finally:
        con.unregister("price_rows")


def chunks(
    since: datetime, until: datetime, size: timedelta = REFRESH_CHUNK
) -> list[tuple[datetime, datetime]]:
    """[since, until] as consecutive pieces of at most `size` (the last one ends at `until`),
    for a refresh over a long range: one refresh over 14 days of 10 M attempts peaked at
    12.5 GB of memory (bench), a few hours at a time stays small. A refresh covers whole
    buckets, so neighbouring pieces may both touch one."""
    pieces = []
    lo = since
    while lo + size < until:
        pieces.append((lo, lo + size))
        lo += size
    pieces.append((lo, until))
    return pieces
