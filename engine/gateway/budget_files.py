"""What other processes wrote about spend, as the hard cap reads it (engine.gateway.budget_guard):
the spool files the scheduler has not ingested yet (its budgets.json is read by
engine.published.budgets). Plain reads of files, never the store (the gateway never opens
DuckDB); pyarrow only for a spool file, when one is read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date
from decimal import Decimal
from pathlib import Path

from engine.config.budgets import Budget

Sums = dict[tuple[str, date], Decimal]  # (budget name, UTC day) → dollars
_COLUMNS = ("route", "feature", "key_label", "started_at", "cost_usd")


def add(sums: Sums, names: Iterable[str], day: date, cost: Decimal) -> None:
    for name in names:
        sums[(name, day)] = sums.get((name, day), Decimal(0)) + cost


def total(sums: Mapping[tuple[str, date], Decimal], name: str, first: date, last: date) -> Decimal:
    """The sum of `name`'s dollars on the days [first, last)."""
    return sum((v for (n, d), v in sums.items() if n == name and first <= d < last), Decimal(0))


@dataclass
class SpoolFile:
    """What one spool file holds for the capped budgets."""

    process: str
    seq: int
    sums: Sums = field(default_factory=dict)

    @classmethod
    def named(cls, name: str) -> SpoolFile:
        """`{process}-{seq:08d}` (engine.telemetry.spool.file_name); process "" for any other
        name."""
        process, _, seq = name.rpartition("-")
        return cls(process, int(seq)) if process and seq.isdigit() else cls("", -1)


def read_spool_file(path: Path, budgets: Iterable[Budget]) -> Sums:
    """The dollars of each budget's scope, per day, in one spool file (a file from before a
    column existed lacks it: NULL, as the store reads it). OSError when it cannot be read."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    columns = [c for c in _COLUMNS if c in handle.schema_arrow.names]
    budgets = tuple(budgets)
    sums: Sums = {}
    for row in handle.read(columns=columns).to_pylist():
        if row.get("cost_usd") is None:
            continue
        names = [
            b.name
            for b in budgets
            if b.covers(row["route"], row.get("feature"), row.get("key_label"))
        ]
        add(sums, names, row["started_at"].astimezone(UTC).date(), row["cost_usd"])
    return sums
