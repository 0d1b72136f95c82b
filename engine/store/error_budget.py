"""Error budgets over the store's minute rollups: the windows the burn-rate alerts and the Live
page read, counted by the one computation of engine.core.error_budget (the weekly report's, over
its published hours). `window_counts` sums any windows in one scan; `publish_status` publishes
each [[slo]]'s week and burn rates for the Live page (the `slo_status` snapshot).

Reads the store: runs in the scheduler only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa

from engine.config.budgets import period_bounds
from engine.config.slo import BURN_RATE_RULES, Slo
from engine.core.error_budget import COLUMNS, Counts, window_label
from engine.published.catalogue import SLO_STATUS, select
from engine.published.publish import publish

__all__ = ["BURN_WINDOWS", "WEEK", "Counts", "Window", "publish_status", "window_counts"]


@dataclass(frozen=True, slots=True)
class Window:
    """[since, until] over minute buckets: the bucket holding `since` to the one holding
    `until`, inclusive (a trailing window counts the minute still being counted)."""

    name: str
    since: datetime
    until: datetime

    @classmethod
    def trailing(cls, now: datetime, seconds: float, name: str = "") -> Window:
        return cls(name or f"{seconds:g}s", now - timedelta(seconds=seconds), now)


_WINDOW_COUNTS = f"""
    SELECT w.name, r.route,
        {", ".join(f"coalesce(sum(r.{column}), 0)::BIGINT" for column in COLUMNS.values())}
    FROM rollup_minute r
    JOIN (SELECT unnest($windows, recursive := true)) w
        ON r.bucket >= time_bucket(INTERVAL 1 MINUTE, w.since) AND r.bucket <= w.until
    WHERE r.route IN (SELECT unnest($routes))
    GROUP BY ALL
"""


def window_counts(
    con: duckdb.DuckDBPyConnection, windows: Sequence[Window], routes: Iterable[str]
) -> dict[tuple[str, str], Counts]:
    """(window name, route) → its Counts, from the minute rollups, in one scan; a route
    without a counted minute in a window is absent (read it as `Counts()`)."""
    params = {
        "windows": [{"name": w.name, "since": w.since, "until": w.until} for w in windows],
        "routes": sorted(set(routes)),
    }
    if not params["windows"] or not params["routes"]:
        return {}
    rows = con.execute(_WINDOW_COUNTS, params).fetchall()
    return {(name, route): Counts(*sums) for name, route, *sums in rows}


# Every window of the burn-rate table, shortest first: the Live page shows each one's rate.
BURN_WINDOWS: tuple[float, ...] = tuple(
    sorted({s for row in BURN_RATE_RULES for s in (row.short_s, row.long_s)})
)
WEEK = "week"
_STATUS_SCHEMA = pa.schema(
    [
        ("slo", pa.string()),
        ("route", pa.string()),
        ("target", pa.float64()),
        ("as_of", pa.timestamp("us", tz="UTC")),
        ("week_start", pa.timestamp("us", tz="UTC")),
        ("week_end", pa.timestamp("us", tz="UTC")),
        ("counted", pa.int64()),
        ("failed", pa.int64()),
        ("drill_failed", pa.int64()),
        ("budget_left", pa.float64()),
        ("failures_left", pa.int64()),
        *((f"burn_{window_label(s)}", pa.float64()) for s in BURN_WINDOWS),
        *((f"counted_{window_label(s)}", pa.int64()) for s in BURN_WINDOWS),
    ]
)


def status_rows(
    con: duckdb.DuckDBPyConnection, slos: Sequence[Slo], now: datetime
) -> list[dict[str, object]]:
    """Per objective: this week's budget (the report's week, Monday 00:00 UTC on) and the
    burn rate over every window of the burn-rate table, as of `now`."""
    start, end = period_bounds("week", now)
    windows = [
        Window(WEEK, start, now),
        *(Window.trailing(now, s, window_label(s)) for s in BURN_WINDOWS),
    ]
    counts = window_counts(con, windows, (slo.route for slo in slos))
    elapsed = (now - start) / (end - start)
    rows = []
    for slo in slos:
        week = counts.get((WEEK, slo.route), Counts())
        row: dict[str, object] = {
            "slo": slo.name, "route": slo.route, "target": slo.target, "as_of": now,
            "week_start": start, "week_end": end, "counted": week.scored_counted,
            "failed": week.scored_failed, "drill_failed": week.drill_failed,
            "budget_left": week.budget_left(slo.target),
            "failures_left": week.failures_left(slo.target, elapsed),
        }  # fmt: skip
        for seconds in BURN_WINDOWS:
            label = window_label(seconds)
            window = counts.get((label, slo.route), Counts())
            row[f"burn_{label}"] = window.burn_rate(slo.target)
            row[f"counted_{label}"] = window.scored_counted
        rows.append(row)
    return rows


def publish_status(
    con: duckdb.DuckDBPyConnection, published_dir: Path, slos: Sequence[Slo], now: datetime
) -> None:
    """The `slo_status` snapshot (engine.published.catalogue): one row per objective."""
    table = pa.Table.from_pylist(status_rows(con, slos, now), schema=_STATUS_SCHEMA)
    con.register("slo_status_rows", table)
    try:
        publish(con, published_dir, SLO_STATUS, select(SLO_STATUS, "SELECT * FROM slo_status_rows"))
    finally:
        con.unregister("slo_status_rows")
