"""What other processes wrote about spend, as the hard cap reads it (engine.gateway.budget_guard):
the scheduler's budgets.json and the spool files it has not ingested yet. Plain reads of files,
never the store (the gateway never opens DuckDB); pyarrow only for a spool file, when one is
read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

from engine.config.budgets import Budget

Sums = dict[tuple[str, date], Decimal]  # (budget name, UTC day) → dollars
_NANO = Decimal("1e-9")  # a cost as the stored row rounds it (engine.telemetry.columns.to_row)
_COLUMNS = ("route", "feature", "key_label", "started_at", "cost_usd")


def in_scope(budget: Budget, route: str, feature: str | None, key_label: str | None) -> bool:
    subject = {"route": route, "feature": feature, "key": key_label}[budget.scope]
    return subject == budget.value


def rounded(cost: Decimal | None) -> Decimal:
    """A cost as the spool file and the store hold it: nano-dollars, half-even; None is $0."""
    return Decimal(0) if cost is None else cost.quantize(_NANO, ROUND_HALF_EVEN)


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


@dataclass(frozen=True, slots=True)
class Snapshot:
    """budgets.json: per budget its period's start and spend in the store, and per process the
    highest spool seq the store holds (a file at or below it is in that spend)."""

    ingested: Mapping[str, int]
    spend: Mapping[str, tuple[datetime, Decimal]]

    def covers(self, file: SpoolFile) -> bool:
        return file.seq <= self.ingested.get(file.process, -1)

    @classmethod
    def parse(cls, raw: Any) -> Snapshot:
        """ValueError, KeyError or TypeError when `raw` is not a version 1 budgets.json."""
        if raw.get("version") != 1:
            raise ValueError(f"unknown budgets snapshot version {raw.get('version')!r}")
        ingested = {str(p): int(seq) for p, seq in raw["ingested"].items()}
        spend = {
            str(b["name"]): (datetime.fromisoformat(b["period_start"]), Decimal(b["spend_usd"]))
            for b in raw["budgets"]
        }
        return cls(ingested, spend)


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
            if in_scope(b, row["route"], row.get("feature"), row.get("key_label"))
        ]
        add(sums, names, row["started_at"].astimezone(UTC).date(), row["cost_usd"])
    return sums
