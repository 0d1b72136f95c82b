"""The attempt row: one schema for spool files, the `attempts` table and published snapshots.

An `Attempt` (engine/core/attempt.py) becomes a row here, priced, with the host that recorded it.
The columns are declared once, by the record: each field of `Attempt`, in its order, is a column
of the type its annotation says (`_column`), and the few columns that are the row's alone (the
host, the cost and its source) sit where the stored schema has them (`_ROW_ONLY`). So a field
added to Attempt is a column, with no second spelling; its migration is still to write (a test
fails until it is). The recorder writes Parquet with `ARROW_SCHEMA`, the store creates its table
from `DUCKDB_COLUMNS`, and a test checks they agree. Never the API key, never the prompt: nothing
in an Attempt carries either.
"""

from __future__ import annotations

import dataclasses
import operator
import socket
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
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


# How a field's values are stored, by its annotation. A string vocabulary (a Literal, a
# StrEnum) is stored as its strings. Times are UTC.
_KINDS: dict[type, tuple[pa.DataType, str]] = {
    str: (pa.string(), "VARCHAR"),
    bool: (pa.bool_(), "BOOLEAN"),
    float: (pa.float64(), "DOUBLE"),
    datetime: (pa.timestamp("us", tz="UTC"), "TIMESTAMPTZ"),
}
# An integer is an INTEGER unless named here: numbers that stay small (attempt numbers, HTTP
# statuses, depths) are SMALLINT, token counts BIGINT.
_INTEGERS = {16: (pa.int16(), "SMALLINT"), 32: (pa.int32(), "INTEGER"), 64: (pa.int64(), "BIGINT")}
_INTEGER_BITS = {
    **dict.fromkeys(("attempt_number", "http_status", "fallback_depth", "continues_attempt"), 16),
    **dict.fromkeys(
        ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"), 64
    ),
}
# A column is NOT NULL unless its field admits None, or is named here: stream events skipped
# because their data did not parse are NULL in rows from before migration 7, whose spool files
# lack them. (prompt_version and quality_error, added by migration 5, and a continuation's
# continues_attempt and continued_chars, migration 11, admit None in the record itself.)
_NULLABLE = frozenset({"unreadable_events"})
# The row's own columns, each group after the field it follows in the stored schema: the host
# that recorded the attempt; its cost (NULL: the model has no known price) and the price's
# source (genai-prices, or the override's note), priced at flush time.
_ROW_ONLY: dict[str, tuple[Column, ...]] = {
    "key_kind": (Column("host", pa.string(), "VARCHAR NOT NULL"),),
    "tokens_estimated": (
        Column("cost_usd", COST_TYPE, "DECIMAL(18,9)"),
        Column("price_source", pa.string(), "VARCHAR"),
    ),
}


def _column(name: str, hint: Any) -> Column:
    """The column of the Attempt field `name`, annotated `hint`."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    nullable = type(None) in options or name in _NULLABLE
    (kind,) = (o for o in options if o is not type(None))
    if typing.get_origin(kind) is typing.Literal:
        kind = type(typing.get_args(kind)[0])
    if kind is int:
        arrow, duckdb = _INTEGERS[_INTEGER_BITS.get(name, 32)]
    elif kind in _KINDS:
        arrow, duckdb = _KINDS[kind]
    elif isinstance(kind, type) and issubclass(kind, str):  # a StrEnum
        arrow, duckdb = _KINDS[str]
    else:
        raise TypeError(f"Attempt.{name}: no column type for {hint!r}")
    return Column(name, arrow, duckdb if nullable else f"{duckdb} NOT NULL")


def _columns() -> tuple[Column, ...]:
    hints = typing.get_type_hints(Attempt)
    columns: list[Column] = []
    for field in dataclasses.fields(Attempt):
        columns.append(_column(field.name, hints[field.name]))
        columns.extend(_ROW_ONLY.get(field.name, ()))
    return tuple(columns)


COLUMNS: tuple[Column, ...] = _columns()
ARROW_SCHEMA = pa.schema([pa.field(c.name, c.arrow) for c in COLUMNS])
DUCKDB_COLUMNS = ", ".join(f"{c.name} {c.duckdb}" for c in COLUMNS)
COLUMN_NAMES = tuple(c.name for c in COLUMNS)
HOST = socket.gethostname()

_FIELDS = tuple(f.name for f in dataclasses.fields(Attempt))
_VALUES = operator.attrgetter(*_FIELDS)


def stored_cost(cost: Decimal | None) -> Decimal | None:
    """A cost as the spool file and the store hold it: nano-dollars, rounded half-even."""
    return None if cost is None else cost.quantize(_NANO_DOLLAR, ROUND_HALF_EVEN)


def to_row(attempt: Attempt, cost: Decimal | None, price_source: str | None) -> dict[str, Any]:
    """One Attempt as a row of COLUMNS (cost comes from engine.core.pricing, at flush time)."""
    row = dict(zip(_FIELDS, _VALUES(attempt), strict=True))
    row["host"] = HOST
    row["cost_usd"] = stored_cost(cost)
    row["price_source"] = price_source
    return row


def to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)


def valid_table(
    priced: Sequence[tuple[Attempt, Decimal | None, str | None]],
) -> tuple[pa.Table, int]:
    """The priced attempts as a table, and how many were left out because they cannot become
    a row (a value beyond its column's range, not an Attempt at all): one such record must not
    fail the others."""
    try:
        return to_table([to_row(*p) for p in priced]), 0
    except Exception:
        rows = []
        for one in priced:
            try:
                row = to_row(*one)
                to_table([row])
            except Exception:
                continue
            rows.append(row)
        return to_table(rows), len(priced) - len(rows)
