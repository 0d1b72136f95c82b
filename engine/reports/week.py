"""The weekly reliability report's content: one ISO week (Monday 00:00 to Monday 00:00 UTC),
computed from the published snapshots only (so the CLI and the dashboard can make one while
the scheduler runs), with the same definitions as the dashboard (docs/metrics.md).

Every figure is a sum over the week's hourly rollups (which are sums of minutes, so they agree
with the dashboard to the cent), the incidents that overlap the week, the breaker transitions
and alerts that happened in it, and the daily failure classes the scheduler publishes; plus the
fault drills started in the week and the eval runs made in it (each target's latest pass rate),
as the Readiness page shows them.

A report knows how much of its week the data covers (`Coverage`): up to the data's time (a
week not over is a week to date) and from the first hour the data holds (history that begins
mid-week). Weeks are compared in total only when both are whole, else per day of data.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pandas as pd

from engine.core.error_budget import COLUMNS as BUDGET_COLUMNS
from engine.core.money import price_difference
from engine.published.catalogue import RECENT_ATTEMPTS
from engine.published.publish import read_manifest
from engine.published.read import PublishedData
from engine.reports import events
from engine.reports.content import (
    AVAILABILITY_TARGET,
    EPOCH,
    NANO,
    CostLine,
    Coverage,
    RouteWeek,
    WeekReport,
)
from engine.reports.headline import headline
from engine.reports.summary import summarise


def week_bounds(week: str) -> tuple[datetime, datetime]:
    """ "2026-W47" → its Monday 00:00 UTC and the next Monday's."""
    try:
        year, number = week.split("-W")
        monday = date.fromisocalendar(int(year), int(number), 1)
    except ValueError:
        raise ValueError(f"{week!r} is not an ISO week like 2026-W47") from None
    start = datetime(monday.year, monday.month, monday.day, tzinfo=UTC)
    return start, start + timedelta(days=7)


def last_week(now: datetime) -> str:
    """The ISO week before the one `now` is in."""
    year, number, _ = (now - timedelta(days=7)).isocalendar()
    return f"{year}-W{number:02d}"


def data_time(data: PublishedData) -> datetime | None:
    """The time the published data reaches: the last scheduler cycle that published the recent
    attempts (the dashboard's "as of"), from the manifest; None before any."""
    snapshots = read_manifest(data.published_dir)
    published = snapshots.get(RECENT_ATTEMPTS) or snapshots.get("rollup_hour")
    return None if published is None else published.written_at


def build_week(
    data: PublishedData,
    week: str,
    target: float = AVAILABILITY_TARGET,
    *,
    as_of: datetime | None = None,
) -> WeekReport:
    """The report of `week` as the data stands at `as_of` (default: the data's time, so that
    every process that reads the same snapshots makes the same report)."""
    start, end = week_bounds(week)
    before_start = start - timedelta(days=7)
    as_of = as_of or data_time(data) or end
    hours = data.query("hour_rollups", since=start, until=end)
    before = data.query("hour_rollups", since=before_start, until=start)
    begins = _data_begins(data, before_start, pd.concat([before, hours]))
    coverage = Coverage(start, end, max(start, begins), min(end, max(start, as_of)))
    previous = (
        Coverage(before_start, start, max(before_start, begins), start) if begins < start else None
    )
    drills = data.query("drills", since=start, until=end)
    drills = drills[drills["started_at"] >= start]  # one begun the week before belongs to it
    drills = drills.sort_values(["started_at", "drill_id"]).reset_index(drop=True)
    routes = [_route(name, rows) for name, rows in hours.groupby("route")]
    premium, cache_loss = money(hours, "fallback_premium_usd"), money(hours, "cache_loss_usd")
    alerts = events.fired(data.query("alerts", since=start), start, end)
    incidents = events.overlapping(data.query("incidents", since=start, until=end), start)
    report = WeekReport(
        week=week,
        start=start,
        end=end,
        target=target,
        coverage=coverage,
        previous=previous,
        routes=sorted(routes, key=lambda r: r.route),
        total_cost=money(hours, "cost_usd"),
        previous_cost=money(before, "cost_usd"),
        cost_by={dim: _costs(hours, before, dim) for dim in ("route", "provider", "model")},
        fallback_premium=premium,
        cache_loss=cache_loss,
        price_difference=price_difference(premium, cache_loss),
        rewarm=money(hours, "rewarm_usd"),
        wasted=money(hours, "wasted_usd"),
        incidents=events.with_alerts(incidents, alerts, coverage.until),
        failures=events.top_failures(
            data.query("failure_classes", since=start, until=end), incidents
        ),
        breaker_openings=events.openings(data.query("breaker_events", since=start, until=end)),
        alerts=alerts,
        account_faults=_account_faults(hours),
        unpriced=_unpriced(hours),
        daily=_daily(hours),
        drills=drills,
        evals=_latest_scores(data.query("eval_scores", since=start, until=end)),
        primaries=_primaries(data.query("route_primaries")),
        targets=_slo_targets(data.query("slo_status")),
    )
    report.summary = summarise(report)
    report.headline = headline(report)
    return report


def money(frame: pd.DataFrame, column: str) -> Decimal:
    """Exact: PublishedData hands the rollups' DECIMAL(18,9) values over as float64 (DuckDB's
    DataFrame conversion), so each is rounded back to its nine decimals (exact for a row below
    $4 M) before the Decimals are added; Decimal(float) alone is off by its binary error."""
    if not len(frame):
        return Decimal(0)
    return sum((Decimal(v).quantize(NANO) for v in frame[column].dropna()), Decimal(0))


def _int(frame: pd.DataFrame, column: str) -> int:
    """The column's sum; 0 for a column hours published before it existed do not have."""
    return int(frame[column].fillna(0).sum()) if len(frame) and column in frame else 0


def _data_begins(data: PublishedData, since: datetime, rows: pd.DataFrame) -> datetime:
    """The first hour the data holds at or after `since`: `since` itself when there is data
    from before it (hours without traffic then are quiet, not missing); `since` + 14 days when
    there is none at all."""
    if len(data.query("hour_rollups", since=EPOCH, until=since + timedelta(hours=1))):
        return since
    if not len(rows):
        return since + timedelta(days=14)
    return rows["bucket"].min().to_pydatetime()


def _route(name: str, rows: pd.DataFrame) -> RouteWeek:
    """The route's week: the error budget's columns (engine.store.error_budget, the same sums
    the burn-rate alerts make of the minutes; a drill's failures are the rollups' too, by the
    minute they happened in), its fallbacks and its cost."""
    return RouteWeek(
        route=name,
        by_fallback=_int(rows, "answered_by_fallback"),
        cost_usd=money(rows, "cost_usd"),
        **{figure: _int(rows, column) for figure, column in BUDGET_COLUMNS.items()},
    )


def _slo_targets(status: pd.DataFrame) -> dict[str, float]:
    return {row.route: float(row.target) for row in status.itertuples()}


def _costs(week: pd.DataFrame, before: pd.DataFrame, dimension: str) -> list[CostLine]:
    names = sorted(set(week.get(dimension, [])) | set(before.get(dimension, [])))
    lines = [
        CostLine(
            name,
            money(week[week[dimension] == name], "cost_usd"),
            money(before[before[dimension] == name], "cost_usd") if len(before) else Decimal(0),
        )
        for name in names
    ]
    return sorted(lines, key=lambda line: (-line.cost_usd, line.name))


def _account_faults(hours: pd.DataFrame) -> pd.DataFrame:
    """Per target, the attempts its key or account was refused (a drill's invalid key is not
    one: its attempts are `drill` faults)."""
    if hours.empty:
        return pd.DataFrame(columns=["target", "attempts"])
    rows = hours.groupby("target", as_index=False)["account_faults"].sum()
    rows = rows[rows["account_faults"] > 0].rename(columns={"account_faults": "attempts"})
    rows["attempts"] = rows["attempts"].astype(int)
    return rows.sort_values(["attempts", "target"], ascending=[False, True]).reset_index(drop=True)


def _unpriced(hours: pd.DataFrame) -> pd.DataFrame:
    if hours.empty:
        return pd.DataFrame(columns=["target", "attempts"])
    rows = hours.groupby("target", as_index=False)["unpriced_attempts"].sum()
    rows = rows[rows["unpriced_attempts"] > 0].rename(columns={"unpriced_attempts": "attempts"})
    rows["attempts"] = rows["attempts"].astype(int)
    return rows.sort_values("attempts", ascending=False).reset_index(drop=True)


def _daily(hours: pd.DataFrame) -> pd.DataFrame:
    columns = ["day", "route", "requests", "answered", "counted", "cost_usd"]
    if hours.empty:
        return pd.DataFrame(columns=columns)
    frame = hours.assign(
        day=hours["bucket"].dt.floor("D"),
        counted=hours["requests"].fillna(0)
        - hours["request_faults"].fillna(0)
        - hours["abandoned"].fillna(0),
        cost_usd=hours["cost_usd"].fillna(0).astype(float),
    )
    return frame.groupby(["day", "route"], as_index=False)[columns[2:]].sum()[columns]


def _latest_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """Each route and target's row of its latest run, by route and target."""
    if scores.empty:
        return scores.reset_index(drop=True)
    newest = scores.sort_values(["started_at", "run_id"]).groupby(["route", "target"]).tail(1)
    return newest.sort_values(["route", "target"]).reset_index(drop=True)


def _primaries(frame: pd.DataFrame) -> dict[str, str]:
    return {row.route: row.target for row in frame.itertuples() if isinstance(row.target, str)}
