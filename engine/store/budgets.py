"""Each [[budgets]]'s spend in its current period, exact, from the store: the figure the budget
alerts, the Costs page and the gateway's hard cap all start from (published as budgets.json,
engine.published.budgets, right after each cycle's ingest).

Spend is the sum of `cost_usd` of every attempt of the budget's scope (its route, its feature,
or the label of the gateway key it came in with) whose `started_at` lies in the period, failed
and unserved attempts included (a provider bills a prompt it read), over the attempts table and
the archived days alike (engine.store.retention.stored_attempts): a month outlives
`[store] keep_attempts_days`. Summed in DECIMAL, never in floats.

The `ingested` watermarks say which spool files that spend holds: per writing process, the
highest seq of its files in the ingest ledger (names are `{process}-{seq:08d}.parquet`,
engine.telemetry.spool). A process's files are written, renamed and ingested in seq order and
every cycle drains the spool, so a file at or below its process's watermark is in the spend and
any other is not. Only processes with files ingested since the earliest period start are
listed: the others have nothing the gateway could add.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb

from engine.config.budgets import Budget
from engine.published.budgets import FORECAST_WINDOW, BudgetsSnapshot, BudgetStatus
from engine.store.retention import stored_attempts

__all__ = ["budget_statuses", "budgets_snapshot", "ingested_watermarks"]

# The attempts column each scope is matched on (never user text in the SQL).
_SCOPE_COLUMNS = {"route": "route", "feature": "feature", "key": "key_label"}
_SPEND = """
    SELECT coalesce(sum(cost_usd), 0), coalesce(sum(cost_usd) FILTER (started_at >= $rate_since), 0)
    FROM {view} WHERE {column} = $value AND started_at >= $start AND started_at < $end
"""
_SPOOL_NAME = r"^(.+)-(\d{8,})\.parquet$"
_WATERMARKS = f"""
    SELECT regexp_extract(file_name, '{_SPOOL_NAME}', 1) AS process,
        max(CAST(regexp_extract(file_name, '{_SPOOL_NAME}', 2) AS BIGINT)) AS seq
    FROM ingested_files
    WHERE ingested_at >= $since AND regexp_matches(file_name, '{_SPOOL_NAME}')
    GROUP BY process ORDER BY process
"""


def budget_statuses(
    con: duckdb.DuckDBPyConnection,
    archive_dir: Path | None,
    budgets: Iterable[Budget],
    now: datetime,
) -> tuple[BudgetStatus, ...]:
    """Each budget's period holding `now`, its spend so far and its forecast window."""
    budgets = tuple(budgets)
    if not budgets:
        return ()
    spans = [b.bounds(now) for b in budgets]
    with stored_attempts(con, archive_dir, spans) as view:
        return tuple(
            _status(con, view, b, span, now) for b, span in zip(budgets, spans, strict=True)
        )


def _status(
    con: duckdb.DuckDBPyConnection,
    view: str,
    budget: Budget,
    span: tuple[datetime, datetime],
    now: datetime,
) -> BudgetStatus:
    start, end = span
    rate_since = max(start, now - FORECAST_WINDOW)
    spend, recent = con.execute(
        _SPEND.format(view=view, column=_SCOPE_COLUMNS[budget.scope]),
        {"value": budget.value, "start": start, "end": end, "rate_since": rate_since},
    ).fetchone()
    return BudgetStatus(
        budget.name,
        budget.scope,
        budget.value,
        budget.period,
        start,
        end,
        budget.amount_usd,
        _exact(spend),
        budget.hard_cap,
        rate_since,
        _exact(recent),
        now,
    )


def ingested_watermarks(con: duckdb.DuckDBPyConnection, since: datetime) -> dict[str, int]:
    """Per writing process, the highest seq of its spool files ingested since `since`."""
    rows = con.execute(_WATERMARKS, {"since": since}).fetchall()
    return {process: int(seq) for process, seq in rows}


def budgets_snapshot(
    con: duckdb.DuckDBPyConnection,
    archive_dir: Path | None,
    budgets: Iterable[Budget],
    now: datetime,
) -> BudgetsSnapshot:
    """The spend and the watermarks, read on the one connection between two ingests, so the
    watermarks say exactly which files the spend holds."""
    statuses = budget_statuses(con, archive_dir, budgets, now)
    if not statuses:
        return BudgetsSnapshot(now)
    since = min(s.period_start for s in statuses)
    return BudgetsSnapshot(now, ingested_watermarks(con, since), statuses)


def _exact(value: Decimal | int) -> Decimal:
    """A DECIMAL(38,9) sum as a plain Decimal: $0 is "0", never "0E-9"."""
    amount = Decimal(value)
    return amount if amount else Decimal(0)
