"""Spool files for the store tests: Attempt objects from a small factory, written the way the
recorder writes them (records.to_table, `.name.tmp`, then a rename)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.attempt import Attempt
from engine.telemetry import columns as records

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
COST = Decimal("0.000600000")  # every test attempt's price, as the recorder would store it


def make_attempt(**fields: Any) -> Attempt:
    base: dict[str, Any] = dict(
        request_id="req-1", attempt_number=1, route="support", target="claude/sonnet",
        provider="claude", provider_kind="anthropic", model="sonnet", key_kind="managed",
        process_id=4242, started_at=T0, latency_ms=120.0, ttft_ms=None, streamed=False,
        outcome="success", decision="served", error_class=None, fault_kind=None,
        http_status=200, error_type=None, error_code=None, error_message=None,
        retry_after_s=None, breaker_state="closed", served=True, fallback_depth=0,
        input_tokens=100, output_tokens=20, feature="chat",
    )  # fmt: skip
    base.update(fields)
    return Attempt(**base)


def table(attempts: list[Attempt]) -> pa.Table:
    return records.to_table([records.to_row(a, COST, "test") for a in attempts])


def write_table(spool_dir: Path, name: str, data: pa.Table) -> Path:
    """Like the recorder: write `.<name>.tmp`, then rename it to `<name>.parquet`."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    temp = spool_dir / f".{name}.tmp"
    pq.write_table(data, temp)
    final = spool_dir / f"{name}.parquet"
    os.replace(temp, final)
    return final


def write_spool(spool_dir: Path, name: str, attempts: list[Attempt]) -> Path:
    return write_table(spool_dir, name, table(attempts))


def fill_spool(
    spool_dir: Path,
    files: int,
    rows: int,
    *,
    prefix: str = "f",
    start: datetime = T0,
    step: timedelta = timedelta(milliseconds=10),
) -> list[Path]:
    """`files` spool files of `rows` attempts each, every request id unique, started_at rising.
    Fast: one template table, with its request ids and times replaced per file."""
    template = table([make_attempt(request_id=str(j)) for j in range(rows)])
    written = []
    for i in range(files):
        ids = pa.array([f"{prefix}{i:05d}-{j:05d}" for j in range(rows)])
        times = pa.array(
            [start + step * (i * rows + j) for j in range(rows)], type=pa.timestamp("us", tz="UTC")
        )
        data = template.set_column(0, "request_id", ids)
        data = data.set_column(data.schema.get_field_index("started_at"), "started_at", times)
        written.append(write_table(spool_dir, f"{prefix}{i:05d}", data))
    return written
