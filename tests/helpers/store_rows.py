"""Rows written straight into a fresh store, for rule and incident tests that need exact
figures rather than traffic."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import duckdb

from engine.telemetry.columns import COLUMNS

_SEQ = itertools.count()


def rollup(con: duckdb.DuckDBPyConnection, bucket: datetime, **figures: Any) -> None:
    """One rollup_minute row; keys default to route support on claude, figures to 0."""
    columns = [row[0] for row in con.execute("DESCRIBE rollup_minute").fetchall()]
    row: dict[str, Any] = dict.fromkeys(columns, 0)
    row.update(
        bucket=bucket, route="support", provider="claude", model="m", target="claude/m",
        feature="", latency_p50_ms=None, latency_p95_ms=None, latency_p99_ms=None,
        ttft_p50_ms=None, ttft_p95_ms=None,
    )  # fmt: skip
    row.update(figures)
    _insert(con, "rollup_minute", row)


def attempt(con: duckdb.DuckDBPyConnection, started_at: datetime, **fields: Any) -> None:
    """One attempts row: a successful, served primary attempt unless told otherwise."""
    row: dict[str, Any] = {c.name: None for c in COLUMNS}
    row.update(
        request_id=f"r{started_at.timestamp()}", attempt_number=1, route="support",
        target="claude/m", provider="claude", provider_kind="anthropic", model="m",
        key_kind="managed", host="h", process_id=1, started_at=started_at, latency_ms=100.0,
        streamed=False, outcome="success", decision="served", breaker_state="closed",
        served=True, fallback_depth=0, input_tokens=10, output_tokens=5, cache_read_tokens=0,
        cache_write_tokens=0, tokens_estimated=False, pii_masked=0, batch_id=1,
    )  # fmt: skip
    row.update(fields)
    _insert(con, "attempts", row)


def breaker_event(
    con: duckdb.DuckDBPyConnection, at: datetime, target: str, old: str, new: str, **fields: Any
) -> None:
    row = {
        "event_id": f"e{at.timestamp()}-{target}-{new}", "occurred_at": at, "target": target,
        "host": "h", "process_id": 1, "seq": next(_SEQ), "from_status": old, "to_status": new,
        "reason": "failures" if new == "open" else None, "open_until": None,
    }  # fmt: skip
    row.update(fields)
    _insert(con, "breaker_events", row)


def _insert(con: duckdb.DuckDBPyConnection, table: str, row: dict[str, Any]) -> None:
    names = ", ".join(row)
    values = ", ".join(f"${k}" for k in row)
    con.execute(f"INSERT INTO {table} ({names}) VALUES ({values})", row)
