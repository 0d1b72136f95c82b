"""Every table of the weekly report, once: display text for people (HTML, Markdown, the
Reports page) or, with `raw`, the numbers themselves for the CSV files (money as exact decimal
strings, shares as fractions, times in ISO 8601, a missing value empty).

A whole shown beside its parts (spend and the routes', providers' and models' costs; the extra
cost of fallbacks and its price difference, cache loss and re-warm) is rounded with
engine.core.money.format_parts, so that the parts as shown add up to the whole as shown. A missing
value reads "—", never None or NaN, and a column that can miss a value is text throughout (an
HTTP status "529", a drill's "30" requests), so that no column mixes numbers and "—": the Reports
page shows the frames as they are. Latencies, moments and changes read as engine.core.formats
writes them ("1,100 ms", "Wed 25 Nov 13:01", "+59%").
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pandas as pd

from engine.core.fault_families import describe
from engine.core.formats import MISSING, format_latency, format_share_change
from engine.core.money import format_change, format_parts, format_usd
from engine.reports.content import NANO, RouteWeek, WeekReport
from engine.reports.dates import duration, moment
from engine.reports.headline import pct
from engine.reports.summary import fallback_parts

# A failed attempt's fault as people read it (attempts.fault_kind).
FAULTS = {
    "provider": "provider",
    "ambiguous": "ambiguous (timeout, reset, unusable answer)",
    "account": "key or account",
    "rate_limit": "rate limit",
    "request": "the request's (a caller error)",
    "suspected_request": "suspected the request's (failed the same way on every target)",
    "drill": "drill (an exercise, on purpose)",
}
Tables = dict[str, tuple[str, pd.DataFrame]]


def missing(value: Any) -> bool:
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def raw_usd(value: Any) -> str:
    """Exact dollars with nine decimals ("0.000000000", never "0E-9"); "" when missing."""
    if missing(value):
        return ""
    return f"{Decimal(str(value)).quantize(NANO):f}"


def _when(value: Any, raw: bool) -> str:
    if missing(value):
        return "" if raw else MISSING
    return pd.Timestamp(value).isoformat() if raw else moment(value)


def tables(report: WeekReport, *, raw: bool = False) -> Tables:
    """Every table of the report: file stem → (title, frame)."""
    found: Tables = {
        "availability": (f"Availability ({_targets_said(report)}, drills aside)",
                         _availability(report, raw)),
        "money": ("Spend and what fallbacks cost", _money(report, raw)),
    }  # fmt: skip
    for dimension in report.cost_by:
        found[f"cost_by_{dimension}"] = (f"Cost by {dimension}", _costs(report, dimension, raw))
    found["incidents"] = ("Incidents", _incidents(report, raw))
    found["alerts"] = ("Alerts fired in the week", _alerts(report, raw))
    found["drills"] = ("Drills started in the week", _drills(report, raw))
    found["evals"] = ("Eval pass rates: each target's latest run of the week", _evals(report, raw))
    found["failures"] = ("Top failure classes per provider", _failures(report, raw))
    found["breaker_openings"] = ("Breaker openings", report.breaker_openings)
    found["unpriced"] = ("Models without a known price", report.unpriced)
    return found


# What a table says when it has no row, instead of an empty table.
EMPTY = {
    "incidents": "No incident.", "alerts": "No alert fired in the week.",
    "drills": "No drill started in the week.", "evals": "No eval run in the week.",
    "failures": "No failed attempt.", "breaker_openings": "No breaker opened.",
    "unpriced": "Every model had a known price.", "availability": "No traffic.",
}  # fmt: skip


def empty_text(report: WeekReport, stem: str) -> str:
    """What the table `stem` says when it has no row. No failure class beside incidents that
    name their top error means snapshots from before the scheduler published them each cycle:
    said so, rather than "no failed attempt"."""
    if stem == "failures" and len(report.incidents) and report.incidents["top_error"].any():
        return (
            "The week's failure classes are not published yet (the scheduler publishes them "
            "every cycle; snapshots written before it did lack them)."
        )
    return EMPTY.get(stem, "Nothing.")


def _availability(report: WeekReport, raw: bool) -> pd.DataFrame:
    routes = report.routes
    whole, costs = format_parts(report.total_cost, {r.route: r.cost_usd for r in routes})
    total = _all_routes(report)
    costs[total.route] = whole
    rows = []
    own = _own_targets(report)
    for r in [*routes, total]:
        scored = r.scored
        target = report.target_of(r.route)
        rows.append(
            {
                "route": r.route,
                **({"target": _share(target, raw, 2)} if own else {}),
                "requests": r.requests,
                "answered": r.answered,
                "failed": r.failed,
                "failed in drills": r.drill_failed,
                "request faults": r.request_faults,
                "abandoned": r.abandoned,
                "availability": _share(r.availability, raw),
                "drills aside": _share(scored, raw),
                "target met": MISSING
                if scored is None
                else ("met" if scored >= target else "missed"),
                "error budget burned": _share(r.burned(target), raw, 0),
                "answered by a backup": r.by_fallback,
                "cost": raw_usd(r.cost_usd) if raw else costs[r.route],
            }
        )
    return pd.DataFrame(rows)


def _own_targets(report: WeekReport) -> bool:
    """Whether an [[slo]] gives some route a target other than the report's."""
    return any(report.target_of(r.route) != report.target for r in report.routes)


def _targets_said(report: WeekReport) -> str:
    if _own_targets(report):
        return f"each route's [[slo]] target, else {report.target:.1%}"
    return f"target {report.target:.1%}"


def _all_routes(report: WeekReport) -> RouteWeek:
    """The routes' sums, as a route of its own."""
    sums = {
        f: sum(getattr(r, f) for r in report.routes)
        for f in (
            "requests",
            "answered",
            "by_fallback",
            "request_faults",
            "abandoned",
            "unavailable",
            "broken",
            "drill_failed",
        )
    }
    return RouteWeek(route="all routes", cost_usd=report.total_cost, **sums)


def _whole(value: Any, raw: bool) -> int | str:
    """A whole number that may be missing: the number for the CSV (empty when missing), text
    for people ("1,234", "529", "—"), so that its column never mixes the two."""
    if missing(value):
        return "" if raw else MISSING
    return int(value) if raw else f"{int(value):,}"


def _share(value: float | None, raw: bool, digits: int = 2) -> Any:
    if raw:
        return value
    if value is None:
        return MISSING
    return pct(value, digits) if digits else f"{value:.0%}"


def _money(report: WeekReport, raw: bool) -> pd.DataFrame:
    so_far = "" if report.coverage.over else " so far"
    total, parts = fallback_parts(report)
    priced = (
        "saved: the backups were cheaper"
        if report.price_difference < 0
        else ("the backups cost more")
    )
    figures = [
        (f"spend{so_far}", report.total_cost, format_usd(report.total_cost)),
        ("spend the week before", report.previous_cost, format_usd(report.previous_cost)),
        ("extra cost of fallbacks", report.extra_cost, total),
        (
            f"  of which price difference ({priced})",
            report.price_difference,
            parts["price difference"],
        ),
        ("  of which lost prompt caching", report.cache_loss, parts["cache loss"]),
        ("  of which re-warming the primaries' caches", report.rewarm, parts["re-warm"]),
        ("wasted spend (answers nobody got)", report.wasted, format_usd(report.wasted)),
    ]
    return pd.DataFrame(
        [(name, raw_usd(exact) if raw else shown) for name, exact, shown in figures],
        columns=["figure", "USD"],
    )


def _costs(report: WeekReport, dimension: str, raw: bool) -> pd.DataFrame:
    lines = report.cost_by[dimension]
    total, now = format_parts(report.total_cost, {line.name: line.cost_usd for line in lines})
    previous, before = format_parts(
        report.previous_cost, {line.name: line.previous_usd for line in lines}
    )
    per_day = report.previous is not None and not (report.coverage.whole and report.previous.whole)
    change = "change a day" if per_day else "change"

    def changed(cost: Decimal, before: Decimal) -> Any:
        fraction = report.change(cost, before)
        return fraction if raw else format_share_change(fraction)

    rows = [
        {
            dimension: line.name,
            "cost": raw_usd(line.cost_usd) if raw else now[line.name],
            "week before": raw_usd(line.previous_usd) if raw else before[line.name],
            change: changed(line.cost_usd, line.previous_usd),
        }
        for line in lines
    ]
    rows.append(
        {
            dimension: "all",
            "cost": raw_usd(report.total_cost) if raw else total,
            "week before": raw_usd(report.previous_cost) if raw else previous,
            change: changed(report.total_cost, report.previous_cost),
        }
    )
    return pd.DataFrame(rows)


def _incidents(report: WeekReport, raw: bool) -> pd.DataFrame:
    rules = dict(zip(report.alerts["alert_id"], report.alerts["rule"], strict=True))
    until = report.coverage.until
    rows = []
    for i in report.incidents.itertuples():
        ongoing = missing(i.ended_at)
        seconds = ((until if ongoing else i.ended_at) - i.started_at).total_seconds()
        alerts = [a for a in str(i.alerts).split(", ") if a]
        drills = i.during_drills if isinstance(i.during_drills, str) else ""
        row = {
            "start (UTC)": _when(i.started_at, raw),
            "duration": round(seconds, 3) if raw else (
                duration(max(0.0, seconds)) + (" so far (ongoing)" if ongoing else "")),
            "what": describe(i.subject, getattr(i, "family", None)),
            "routes": i.routes if raw else (i.routes or "none affected"),
            "requests affected": int(i.requests_affected),
            "answered by a backup": int(i.answered_by_fallback), "failed": int(i.failed),
            "extra cost": raw_usd(i.extra_cost_usd) if raw else format_change(i.extra_cost_usd),
            "wasted": raw_usd(i.wasted_usd) if raw else format_usd(i.wasted_usd),
            "top error": i.top_error or ("" if raw else MISSING),
            "alerts": ", ".join(alerts) if raw else (
                ", ".join(dict.fromkeys(rules.get(a, a) for a in alerts)) or "none"),
            "during drill": drills if raw else (drills or MISSING),
        }  # fmt: skip
        if raw:
            row |= {
                "end (UTC)": _when(i.ended_at, raw),
                "incident_id": i.incident_id,
                **{
                    f"{part} (USD)": raw_usd(getattr(i, f"{part.replace(' ', '_')}_usd"))
                    for part in ("price difference", "cache loss", "rewarm")
                },
            }
        rows.append(row)
    return pd.DataFrame(rows)


def _alerts(report: WeekReport, raw: bool) -> pd.DataFrame:
    until = report.coverage.until
    rows = []
    for a in report.alerts.itertuples():
        resolved = not missing(a.resolved_at)
        seconds = ((a.resolved_at if resolved else until) - a.fired_at).total_seconds()
        rows.append(
            {
                "fired (UTC)": _when(a.fired_at, raw),
                "rule": a.rule,
                "severity": a.severity,
                "subject": a.subject,
                "lasted": round(seconds, 3)
                if raw
                else (duration(max(0.0, seconds)) if resolved else "still firing"),
                "resolved (UTC)": _when(a.resolved_at, raw),
                "summary": a.summary,
                **({"alert_id": a.alert_id} if raw else {}),
            }
        )
    return pd.DataFrame(rows)


def _failures(report: WeekReport, raw: bool) -> pd.DataFrame:
    columns = ["provider", "failure", "HTTP status", "whose fault", "attempts"]
    return pd.DataFrame(
        [
            {
                "provider": f.provider,
                "failure": f.error_class,
                "HTTP status": _whole(f.http_status, raw),  # none: a reset, a read timeout
                "whose fault": f.fault_kind if raw else FAULTS.get(f.fault_kind, f.fault_kind),
                "attempts": int(f.attempts),
            }
            for f in report.failures.itertuples()
        ],
        columns=columns,
    )


DRILL_COLUMNS = (
    "start (UTC)", "route", "target", "duration", "status", "verdict", "requests",
    "served by backups", "failed", "breaker opened after", "cost difference", "restored",
    "restored after", "summary",
)  # fmt: skip


def _drills(report: WeekReport, raw: bool) -> pd.DataFrame:
    """One row a drill with its report's figures: display text or, with `raw`, the numbers;
    "—" (empty in CSV) where the report has no such figure, or no report yet."""
    rows = [_drill_row(d, raw, report.coverage.until) for d in report.drills.itertuples()]
    return pd.DataFrame(rows, columns=list(DRILL_COLUMNS))


def _drill_row(d: Any, raw: bool, until: datetime) -> dict[str, Any]:
    blank = "" if raw else MISSING

    def seconds(value: Any, reported: bool, never: str) -> float | str:
        if missing(value):
            return never if reported and not raw else blank
        return float(value) if raw else duration(float(value))

    reported = d.status == "reported"
    ended = d.ended_at if not missing(d.ended_at) else None
    lasted = ((ended or until) - d.started_at).total_seconds()
    if missing(d.restored):
        restored: Any = blank
    else:
        restored = bool(d.restored) if raw else ("yes" if d.restored else "no")
    if missing(d.cost_difference_usd):
        difference: Any = blank
    elif raw:
        difference = raw_usd(d.cost_difference_usd)
    else:
        difference = format_change(d.cost_difference_usd)
    running = "" if ended else " so far (running)"
    return {
        "start (UTC)": _when(d.started_at, raw),
        "route": d.route,
        "target": d.target,
        "duration": round(lasted, 3) if raw else duration(max(0.0, lasted)) + running,
        "status": d.status,
        "verdict": blank if missing(d.verdict) else d.verdict,
        "requests": _whole(d.requests, raw),
        "served by backups": _whole(d.served_by_backups, raw),
        "failed": _whole(d.failed, raw),
        "breaker opened after": seconds(d.breaker_opened_after_s, reported, "never"),
        "cost difference": difference,
        "restored": "not seen" if restored == blank and reported and not raw else restored,
        "restored after": seconds(d.restored_after_s, False, blank),
        "summary": blank if missing(d.summary) else d.summary,
    }


def _evals(report: WeekReport, raw: bool) -> pd.DataFrame:
    blank = "" if raw else MISSING
    latency = "p50 latency (ms)" if raw else "p50 latency"
    columns = ["route", "target", "run (UTC)", "cases file", "cases", "passed", "pass rate",
               "minimum", "below minimum", latency, "cost"]  # fmt: skip
    return pd.DataFrame(
        [
            {
                "route": e.route,
                "target": e.target,
                "run (UTC)": _when(e.started_at, raw),
                "cases file": e.cases_file,
                "cases": int(e.cases),
                "passed": int(e.passed),
                "pass rate": e.pass_rate if raw else f"{e.pass_rate:.1%}",
                "minimum": e.min_pass_rate if raw else f"{e.min_pass_rate:.0%}",
                "below minimum": bool(e.below_minimum)
                if raw
                else ("yes" if e.below_minimum else "no"),
                latency: (blank if missing(e.latency_p50_ms) else round(e.latency_p50_ms))
                if raw
                else format_latency(e.latency_p50_ms),
                "cost": blank
                if missing(e.cost_usd)
                else (raw_usd(e.cost_usd) if raw else format_usd(e.cost_usd)),
            }
            for e in report.evals.itertuples()
        ],
        columns=columns,
    )
