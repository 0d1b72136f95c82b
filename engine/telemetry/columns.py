"""The attempt row: one schema for spool files, the `attempts` table and published snapshots.

An `Attempt` (engine/core/attempt.py) becomes a row here, priced, with the host that recorded it.
The column list is the single source of truth: the recorder writes Parquet with `ARROW_SCHEMA`, the
store creates its table from `DUCKDB_COLUMNS`, and a test checks they agree. Never the API key,
never the prompt: nothing in an Attempt carries either.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import pyarrow as pa

from engine.core.attempt import Attempt

# Money is DECIMAL(18,9) everywhere: nine decimals hold a single cached token of the cheapest
# model, eighteen digits hold a billion dollars.
COST_TYPE = pa.decimal128(18, 9)
# A few prices (fractions of a nano-dollar per token) make exact costs longer than 9 decimals;
# they are rounded half-even to the column's scale, never rejected.
_NANO_DOLLAR = Decimal("1e-9")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    arrow: pa.DataType
    duckdb: str


COLUMNS: tuple[Column, ...] = (
    Column("request_id", pa.string(), "VARCHAR NOT NULL"),
    Column("attempt_number", pa.int16(), "SMALLINT NOT NULL"),
    Column("route", pa.string(), "VARCHAR NOT NULL"),
    Column("target", pa.string(), "VARCHAR NOT NULL"),
    Column("provider", pa.string(), "VARCHAR NOT NULL"),
    Column("provider_kind", pa.string(), "VARCHAR NOT NULL"),
    Column("model", pa.string(), "VARCHAR NOT NULL"),
    Column("key_kind", pa.string(), "VARCHAR NOT NULL"),
    Column("host", pa.string(), "VARCHAR NOT NULL"),
    Column("process_id", pa.int32(), "INTEGER NOT NULL"),
    Column("started_at", pa.timestamp("us", tz="UTC"), "TIMESTAMPTZ NOT NULL"),
    Column("latency_ms", pa.float64(), "DOUBLE NOT NULL"),
    Column("ttft_ms", pa.float64(), "DOUBLE"),
    Column("streamed", pa.bool_(), "BOOLEAN NOT NULL"),
    Column("outcome", pa.string(), "VARCHAR NOT NULL"),
    Column("decision", pa.string(), "VARCHAR NOT NULL"),
    Column("error_class", pa.string(), "VARCHAR"),
    Column("fault_kind", pa.string(), "VARCHAR"),
    Column("http_status", pa.int16(), "SMALLINT"),
    Column("error_type", pa.string(), "VARCHAR"),
    Column("error_code", pa.string(), "VARCHAR"),
    Column("error_message", pa.string(), "VARCHAR"),
    Column("retry_after_s", pa.float64(), "DOUBLE"),
    Column("breaker_state", pa.string(), "VARCHAR NOT NULL"),
    Column("served", pa.bool_(), "BOOLEAN NOT NULL"),
    Column("fallback_depth", pa.int16(), "SMALLINT NOT NULL"),
    Column("input_tokens", pa.int64(), "BIGINT NOT NULL"),
    Column("output_tokens", pa.int64(), "BIGINT NOT NULL"),
    Column("cache_read_tokens", pa.int64(), "BIGINT NOT NULL"),
    Column("cache_write_tokens", pa.int64(), "BIGINT NOT NULL"),
    Column("tokens_estimated", pa.bool_(), "BOOLEAN NOT NULL"),
    Column("cost_usd", COST_TYPE, "DECIMAL(18,9)"),  # NULL: the model has no known price
    Column("price_source", pa.string(), "VARCHAR"),  # genai-prices, or the override's note
    Column("feature", pa.string(), "VARCHAR"),
    Column("pii_masked", pa.int32(), "INTEGER NOT NULL"),
    Column("provider_request_id", pa.string(), "VARCHAR"),
    Column("prompt_version", pa.string(), "VARCHAR"),  # added by migration 5
    Column("quality_error", pa.string(), "VARCHAR"),  # added by migration 5
    # Stream events skipped because their data did not parse; NULL in rows from before
    # migration 7, whose spool files lack it.
    Column("unreadable_events", pa.int32(), "INTEGER"),
    # A continuation of a committed stream (migration 11): the attempt it picks up from and the
    # characters the caller held; NULL on every other attempt.
    Column("continues_attempt", pa.int16(), "SMALLINT"),
    Column("continued_chars", pa.int32(), "INTEGER"),
)

ARROW_SCHEMA = pa.schema([pa.field(c.name, c.arrow) for c in COLUMNS])
DUCKDB_COLUMNS = ", ".join(f"{c.name} {c.duckdb}" for c in COLUMNS)
COLUMN_NAMES = tuple(c.name for c in COLUMNS)
HOST = socket.gethostname()


def to_row(attempt: Attempt, cost: Decimal | None, price_source: str | None) -> dict[str, Any]:
    """One Attempt as a row of COLUMNS (cost comes from engine.core.pricing, at flush time)."""
    return {
        "request_id": attempt.request_id,
        "attempt_number": attempt.attempt_number,
        "route": attempt.route,
        "target": attempt.target,
        "provider": attempt.provider,
        "provider_kind": attempt.provider_kind,
        "model": attempt.model,
        "key_kind": attempt.key_kind,
        "host": HOST,
        "process_id": attempt.process_id,
        "started_at": attempt.started_at,
        "latency_ms": attempt.latency_ms,
        "ttft_ms": attempt.ttft_ms,
        "streamed": attempt.streamed,
        "outcome": attempt.outcome,
        "decision": attempt.decision,
        "error_class": attempt.error_class,
        "fault_kind": attempt.fault_kind,
        "http_status": attempt.http_status,
        "error_type": attempt.error_type,
        "error_code": attempt.error_code,
        "error_message": attempt.error_message,
        "retry_after_s": attempt.retry_after_s,
        "breaker_state": attempt.breaker_state,
        "served": attempt.served,
        "fallback_depth": attempt.fallback_depth,
        "input_tokens": attempt.input_tokens,
        "output_tokens": attempt.output_tokens,
        "cache_read_tokens": attempt.cache_read_tokens,
        "cache_write_tokens": attempt.cache_write_tokens,
        "tokens_estimated": attempt.tokens_estimated,
        "cost_usd": None if cost is None else cost.quantize(_NANO_DOLLAR, ROUND_HALF_EVEN),
        "price_source": price_source,
        "feature": attempt.feature,
        "pii_masked": attempt.pii_masked,
        "provider_request_id": attempt.provider_request_id,
        "prompt_version": attempt.prompt_version,
        "quality_error": attempt.quality_error,
        "unreadable_events": attempt.unreadable_events,
        "continues_attempt": attempt.continues_attempt,
        "continued_chars": attempt.continued_chars,
    }


def to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)
