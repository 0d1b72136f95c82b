"""The weekly reliability report's content: one ISO week (Monday 00:00 to Monday 00:00 UTC),
computed from the published snapshots only (so the CLI and the dashboard can make one while
the scheduler runs), with the same definitions as the dashboard (docs/metrics.md).

Every figure is a sum over the week's hourly rollups (which are sums of minutes, so they agree
with the dashboard to the cent), the incidents that overlap the week, the breaker transitions
and alerts that happened in it, and the daily failure classes the scheduler publishes; plus the
fault drills started in the week and the eval runs made in it (each target's latest pass rate),
as the Readiness page shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pandas as pd

from engine.alerts.families import describe
from engine.money import format_usd
from engine.store.read import PublishedData

AVAILABILITY_TARGET = 0.999
TOP_FAILURES = 5  # failure classes listed per provider
NANO = Decimal("1e-9")  # the scale of the DECIMAL(18,9) money columns


@dataclass(frozen=True, slots=True)
class RouteWeek:
    route: str
    requests: int
    answered: int
    by_fallback: int
    request_faults: int
    unavailable: int  # every provider failed or was skipped, or the budget ran out
    availability: float | None  # answered ÷ (requests − request faults − abandoned)
    budget_burned: float | None  # share of the error budget (1 − target) used
    fallback_rate: float | None
    cost_usd: Decimal


@dataclass(frozen=True, slots=True)
class CostLine:
    name: str
    cost_usd: Decimal
    previous_usd: Decimal

    @property
    def change(self) -> float | None:
        """Week over week, as a fraction; None when last week cost nothing."""
        if not self.previous_usd:
            return None
        return float((self.cost_usd - self.previous_usd) / self.previous_usd)


@dataclass
class WeekReport:
    week: str  # "2026-W47"
    start: datetime
    end: datetime
    target: float
    routes: list[RouteWeek]
    total_cost: Decimal
    previous_cost: Decimal
    cost_by: dict[str, list[CostLine]]  # "route" / "provider" / "model" → lines, costliest first
    fallback_premium: Decimal
    cache_loss: Decimal
    price_difference: Decimal
    rewarm: Decimal
    wasted: Decimal
    incidents: pd.DataFrame
    failures: pd.DataFrame  # provider, error_class, fault_kind, http_status, attempts
    breaker_openings: pd.DataFrame  # target, openings
    alerts: pd.DataFrame  # rule, severity, fired
    unpriced: pd.DataFrame  # target, attempts
    daily: pd.DataFrame  # day, route, requests, answered, counted, cost_usd (for charts)
    drills: pd.DataFrame  # those started in the week, oldest first, with their report's figures
    evals: pd.DataFrame  # per route and target: its latest eval run of the week (eval_scores)
    summary: list[str] = field(default_factory=list)

    @property
    def unavailable(self) -> int:
        return sum(r.unavailable for r in self.routes)


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


def build_week(data: PublishedData, week: str, target: float = AVAILABILITY_TARGET) -> WeekReport:
    start, end = week_bounds(week)
    hours = data.query("hour_rollups", since=start, until=end)
    before = data.query("hour_rollups", since=start - timedelta(days=7), until=start)
    routes = [_route(name, rows, target) for name, rows in hours.groupby("route")]
    cost_by = {dim: _costs(hours, before, dim) for dim in ("route", "provider", "model")}
    premium, cache_loss = _money(hours, "fallback_premium_usd"), _money(hours, "cache_loss_usd")
    incidents = data.query("incidents", since=start, until=end)
    # An incident covers [started_at, ended_at): one that ended as the week began (its last bad
    # minute Sunday 23:59) has no minute in it and belongs to the week before only.
    incidents = incidents[incidents["ended_at"].isna() | (incidents["ended_at"] > start)]
    failures = data.query("failure_classes", since=start, until=end)
    events = data.query("breaker_events", since=start, until=end)
    alerts = data.query("alerts", since=start)
    alerts = alerts[(alerts["fired_at"] >= start) & (alerts["fired_at"] < end)]
    drills = data.query("drills", since=start, until=end)
    drills = drills[drills["started_at"] >= start]  # one begun the week before belongs to it
    report = WeekReport(
        week=week,
        start=start,
        end=end,
        target=target,
        routes=sorted(routes, key=lambda r: r.route),
        total_cost=_money(hours, "cost_usd"),
        previous_cost=_money(before, "cost_usd"),
        cost_by=cost_by,
        fallback_premium=premium,
        cache_loss=cache_loss,
        price_difference=premium - cache_loss,
        rewarm=_money(hours, "rewarm_usd"),
        wasted=_money(hours, "wasted_usd"),
        incidents=incidents.sort_values("started_at").reset_index(drop=True),
        failures=_top_failures(failures),
        breaker_openings=_openings(events),
        alerts=_alert_counts(alerts),
        unpriced=_unpriced(hours),
        daily=_daily(hours),
        drills=drills.sort_values(["started_at", "drill_id"]).reset_index(drop=True),
        evals=_latest_scores(data.query("eval_scores", since=start, until=end)),
    )
    report.summary = summarise(report, before)
    return report


def _int(frame: pd.DataFrame, column: str) -> int:
    return int(frame[column].fillna(0).sum()) if len(frame) else 0


def _money(frame: pd.DataFrame, column: str) -> Decimal:
    """Exact: PublishedData hands the rollups' DECIMAL(18,9) values over as float64 (DuckDB's
    DataFrame conversion), so each is rounded back to its nine decimals (exact for a row below
    $4 M) before the Decimals are added; Decimal(float) alone is off by its binary error."""
    if not len(frame):
        return Decimal(0)
    return sum((Decimal(v).quantize(NANO) for v in frame[column].dropna()), Decimal(0))


def _route(name: str, rows: pd.DataFrame, target: float) -> RouteWeek:
    requests = _int(rows, "requests")
    counted = requests - _int(rows, "request_faults") - _int(rows, "abandoned")
    answered = _int(rows, "answered")
    availability = answered / counted if counted else None
    burned = None if availability is None else (1 - availability) / (1 - target)
    return RouteWeek(
        route=name,
        requests=requests,
        answered=answered,
        by_fallback=_int(rows, "answered_by_fallback"),
        request_faults=_int(rows, "request_faults"),
        unavailable=_int(rows, "unavailable"),
        availability=availability,
        budget_burned=burned,
        fallback_rate=_int(rows, "answered_by_fallback") / requests if requests else None,
        cost_usd=_money(rows, "cost_usd"),
    )


def _costs(week: pd.DataFrame, before: pd.DataFrame, dimension: str) -> list[CostLine]:
    names = sorted(set(week.get(dimension, [])) | set(before.get(dimension, [])))
    lines = [
        CostLine(
            name,
            _money(week[week[dimension] == name], "cost_usd"),
            _money(before[before[dimension] == name], "cost_usd") if len(before) else Decimal(0),
        )
        for name in names
    ]
    return sorted(lines, key=lambda line: (-line.cost_usd, line.name))


def _top_failures(failures: pd.DataFrame) -> pd.DataFrame:
    columns = ["provider", "error_class", "fault_kind", "http_status", "attempts"]
    if failures.empty:
        return pd.DataFrame(columns=columns)
    grouped = failures.groupby(columns[:4], dropna=False, as_index=False)["attempts"].sum()
    grouped = grouped.sort_values(["provider", "attempts", "error_class"],
                                  ascending=[True, False, True])  # fmt: skip
    return grouped.groupby("provider").head(TOP_FAILURES).reset_index(drop=True)[columns]


def _openings(events: pd.DataFrame) -> pd.DataFrame:
    if events.empty:
        return pd.DataFrame(columns=["target", "openings"])
    opened = events[(events["from_status"] == "closed") & (events["to_status"] == "open")]
    counts = opened.groupby("target").size().rename("openings").reset_index()
    return counts.sort_values(["openings", "target"], ascending=[False, True]).reset_index(
        drop=True
    )


def _alert_counts(alerts: pd.DataFrame) -> pd.DataFrame:
    if alerts.empty:
        return pd.DataFrame(columns=["rule", "severity", "fired"])
    counts = alerts.groupby(["rule", "severity"]).size().rename("fired").reset_index()
    return counts.sort_values(["fired", "rule"], ascending=[False, True]).reset_index(drop=True)


def _unpriced(hours: pd.DataFrame) -> pd.DataFrame:
    if hours.empty:
        return pd.DataFrame(columns=["target", "attempts"])
    rows = hours.groupby("target", as_index=False)["unpriced_attempts"].sum()
    rows = rows[rows["unpriced_attempts"] > 0].rename(columns={"unpriced_attempts": "attempts"})
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


def summarise(report: WeekReport, before: pd.DataFrame) -> list[str]:
    """ "What changed", in sentences written from the numbers (no model involved)."""
    lines = []
    below = [
        r for r in report.routes if r.availability is not None and r.availability < report.target
    ]
    if below:
        worst = min(below, key=lambda r: r.availability or 0)
        lines.append(
            f"{len(below)} of {len(report.routes)} routes were below the {report.target:.1%} "
            f"availability target; the worst, {worst.route}, answered {worst.availability:.2%} "
            f"and burned {worst.budget_burned:.0%} of its error budget."
        )
    elif report.routes:
        lines.append(f"Every route met the {report.target:.1%} availability target.")
    if report.previous_cost:
        change = float((report.total_cost - report.previous_cost) / report.previous_cost)
        lines.append(
            f"Spend was ${report.total_cost:,.2f}, {abs(change):.0%} "
            f"{'more' if change >= 0 else 'less'} than the week before "
            f"(${report.previous_cost:,.2f})."
        )
    else:
        lines.append(f"Spend was ${report.total_cost:,.2f} (nothing the week before to compare).")
    if len(report.incidents):
        biggest = report.incidents.sort_values("requests_affected", ascending=False).iloc[0]
        lines.append(
            f"{len(report.incidents)} incident(s); the largest, "
            f"{describe(biggest['subject'], biggest.get('family'))} from "
            f"{biggest['started_at']:%a %H:%M} UTC, affected {int(biggest['requests_affected']):,} "
            f"requests and cost {format_usd(Decimal(biggest['extra_cost_usd']))} extra."
        )
    else:
        lines.append("No incident.")
    extra = report.fallback_premium + report.rewarm
    lines.append(
        f"Fallbacks cost {format_usd(extra)} beyond what the primaries "
        f"would have charged (of which ${report.cache_loss:,.2f} lost prompt caching); "
        f"${report.wasted:,.2f} was paid for answers nobody got."
    )
    if report.unavailable:
        lines.append(f"{report.unavailable:,} requests failed with every provider unavailable.")
    lines += _readiness_lines(report)
    if len(report.unpriced):
        lines.append(
            "Models without a known price (not in the spend): "
            + ", ".join(report.unpriced["target"])
        )
    return lines


def _readiness_lines(report: WeekReport) -> list[str]:
    """What the week's drills and evals found: the drills that did not pass, the targets below
    their route's minimum pass rate."""
    lines = []
    drills = report.drills
    if len(drills):
        verdicts = drills["verdict"].fillna("no report yet")
        passed = int((verdicts == "passed").sum())
        line = f"{len(drills)} drill(s), {passed} passed"
        others = drills[verdicts != "passed"]
        if len(others):
            line += "; " + "; ".join(
                f"{d.target} on {d.route} from {d.started_at:%a %H:%M} UTC: {_why(d)}"
                for d in others.itertuples()
            )
        lines.append(line + ".")
    below = report.evals[report.evals["below_minimum"]] if len(report.evals) else report.evals
    for row in below.itertuples():
        lines.append(
            f"{row.target} passed {row.pass_rate:.0%} of {row.route}'s eval cases "
            f"({row.passed}/{row.cases}), below the route's {row.min_pass_rate:.0%} minimum."
        )
    if len(report.evals) and not len(below):
        lines.append("Every target evaluated met its route's minimum pass rate.")
    return lines


def _why(drill: object) -> str:
    """A drill that did not pass, in a few words: its summary, else its verdict or status."""
    for text in (getattr(drill, "summary", None), getattr(drill, "verdict", None)):
        if isinstance(text, str) and text:
            return text
    return str(getattr(drill, "status", ""))
