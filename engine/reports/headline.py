"""The report for a manager: one paragraph on top that needs no table to be read. Availability
against the target per route (met or missed, drills aside), the worst incident with its
duration, impact and cost, spend against the week before, and what to look at (a backup that
failed its eval, a key refused, a route that ran on its backups, requests that failed
everywhere, a drill that did not pass).

`headline_text` is the same as plain-text lines, for a chat message.

Written from the numbers only (no model involved); every money figure through engine.core.money.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pandas as pd

from engine.config.slo import target_text
from engine.core.fault_families import describe
from engine.core.money import format_change, format_usd
from engine.reports.content import Headline, RouteWeek, WeekReport
from engine.reports.dates import duration, moment, week_days

__all__ = ["Headline", "headline", "headline_text", "pct", "period", "plural"]

LONG_FALLBACK = timedelta(minutes=10)  # a route on its backups this long is worth a look
SHOWN_IN_CHAT = 3  # "look at" items in headline_text; the report has them all
_MIN = timedelta(minutes=1)


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def pct(value: float, digits: int = 2) -> str:
    """A share rounded down, so that anything short of all reads short of "100.00%"."""
    scale = 10 ** (digits + 2)
    return f"{int(value * scale) / scale:.{digits}%}"


def period(report: WeekReport) -> str:
    """The days the report covers, and what is missing from them: a week to date ends at the
    data's time; history that begins mid-week says where."""
    cover = report.coverage
    if cover.over:
        text = f"{week_days(report.start, report.end)} (UTC)"
    else:
        text = (
            f"Week to date: {week_days(report.start, max(cover.until, report.start + _MIN))}"
            f", data up to {moment(cover.until)} UTC"
        )
    if cover.start > report.start:
        text += f"; the data begins {moment(cover.start)}"
    return text


def headline(report: WeekReport) -> Headline:
    return Headline(
        availability=_availability(report),
        incident=_worst_incident(report),
        spend=_spend(report),
        look_at=_look_at(report),
    )


def headline_text(report: WeekReport) -> list[str]:
    """The headline as plain text, for a chat message: a title, then 3 or 4 lines (the
    availability, the worst incident, the spend, and what to look at when anything is)."""
    said = report.headline or headline(report)
    lines = [f"Reliability report {report.week}: {period(report)}", *said.sentences()]
    if said.look_at:
        shown = said.look_at[:SHOWN_IN_CHAT]
        more = len(said.look_at) - len(shown)
        lines.append(
            "Look at: " + "; ".join(shown) + (f"; and {more} more in the report" if more else "")
        )
    return lines


def _availability(report: WeekReport) -> str:
    routes = [r for r in report.routes if r.scored is not None]
    if not routes:
        return "No request was counted in the week: nothing to measure availability on."
    targets = {r.route: report.target_of(r.route) for r in routes}
    ordered = sorted(routes, key=lambda r: (r.scored >= targets[r.route], r.scored, r.route))
    if len(set(targets.values())) == 1:
        lead = f"Availability against the {next(iter(targets.values())):.1%} target: "
        said = [_route_availability(r, targets[r.route]) for r in ordered]
    else:  # [[slo]] targets that differ: each route says its own
        lead = "Availability against each route's target: "
        said = [_route_availability(r, targets[r.route], own=True) for r in ordered]
    return lead + "; ".join(said) + "."


def _route_availability(route: RouteWeek, target: float, own: bool = False) -> str:
    scored = route.scored or 0.0
    text = f"{route.route} {pct(scored)} ({'met' if scored >= target else 'missed'}"
    if own:
        text += f" its {target_text(target)} target"
    if scored < target:
        text += f", {route.burned(target):.0%} of its error budget burned"
    text += ")"
    if route.drill_failed:
        text += (
            f", not counting the {plural(route.drill_failed, 'request')} its drills failed"
            f" ({pct(route.availability or 0.0)} with them)"
        )
    return text


def _worst_incident(report: WeekReport) -> str:
    incidents = report.incidents
    if not len(incidents):
        return "No incident."
    until = report.coverage.until
    lasted = [_lasted(i, until) for i in incidents.itertuples()]
    keys = [
        (int(i.failed), int(i.requests_affected), seconds)
        for i, (seconds, _) in zip(incidents.itertuples(), lasted, strict=True)
    ]
    worst = max(range(len(keys)), key=lambda n: keys[n])
    row = incidents.iloc[worst]
    seconds, ongoing = lasted[worst]
    lead = "The incident" if len(incidents) == 1 else f"Worst of {len(incidents)} incidents"
    so_far = " so far (ongoing)" if ongoing else ""
    when = f"{moment(row['started_at'])}, {duration(seconds)}{so_far}"
    return f"{lead}: {describe(row['subject'], row.get('family'))}, {when}: {impact(row)}."


def impact(row: pd.Series) -> str:
    """What an incident did to requests and what it cost, in words."""
    affected, failed = int(row["requests_affected"]), int(row["failed"])
    if not affected:
        return "no request affected (retries on the same target answered them)"
    by_backup = int(row["answered_by_fallback"])
    text = (
        f"{plural(affected, 'request')} of {row['routes']} affected, {by_backup:,} answered "
        f"by a backup, {'none' if not failed else f'{failed:,}'} failed"
    )
    drills = row.get("during_drills")
    if isinstance(drills, str) and drills:
        text += f" (during drill {drills})"
    change = format_change(row["extra_cost_usd"])
    return text + (
        "; the fallbacks cost no more" if change == "no difference" else f"; the fallbacks {change}"
    )


def _lasted(incident: object, until: datetime) -> tuple[float, bool]:
    """Seconds from the incident's start to its end (to `until` while ongoing), and whether
    it is ongoing."""
    ended = getattr(incident, "ended_at", None)
    ongoing = ended is None or pd.isna(ended)
    end = until if ongoing else ended
    return max(0.0, (end - incident.started_at).total_seconds()), ongoing  # type: ignore[attr-defined]


def _spend(report: WeekReport) -> str:
    cover, before = report.coverage, report.previous
    total, so_far = format_usd(report.total_cost), "" if cover.over else " so far"
    if before is None or not report.previous_cost:
        data = "" if cover.whole else f" in {duration(cover.days * 86_400)} of data"
        return f"Spend{so_far}: {total}{data}; nothing the week before to compare it with."
    previous = format_usd(report.previous_cost)
    change = report.change(report.total_cost, report.previous_cost)
    if cover.whole and before.whole:
        return f"Spend: {total}, {_more(change)} than the week before ({previous})."
    this_days, last_days = duration(cover.days * 86_400), duration(before.days * 86_400)
    if change is None:
        return (
            f"Spend{so_far}: {total} in {this_days} of data; the week before, {previous} in "
            f"{last_days} of data: too little data to compare."
        )
    daily = format_usd(report.total_cost / _days(cover.days))
    before_daily = format_usd(report.previous_cost / _days(before.days))
    return (
        f"Spend{so_far}: {total} in {this_days} of data, {daily} a day: {_more(change)} a "
        f"day than the week before ({previous} in {last_days} of data, {before_daily} a "
        "day)."
    )


def _days(days: float) -> Decimal:
    """Days of data as a divisor of money (to the second: a day is 86,400 of them)."""
    return Decimal(round(days * 86_400)) / 86_400


def _more(change: float | None) -> str:
    if change is None or round(change, 2) == 0:
        return "about the same as"
    return f"{abs(change):.0%} {'more' if change > 0 else 'less'}"


def _look_at(report: WeekReport) -> list[str]:
    return [
        *_missed_evals(report),
        *_refused_keys(report),
        *_long_fallbacks(report),
        *_failed_everywhere(report),
        *_failed_drills(report),
        *_unpriced(report),
    ]


def _missed_evals(report: WeekReport) -> list[str]:
    evals = report.evals
    if not len(evals):
        return []
    found = []
    for e in evals[evals["below_minimum"].fillna(False).astype(bool)].itertuples():
        role = "primary" if report.primaries.get(e.route) == e.target else "backup"
        found.append(
            f"{role} {e.target} failed its eval on {e.route}: {e.pass_rate:.0%} of "
            f"the cases passed ({e.passed}/{e.cases}), below the "
            f"{e.min_pass_rate:.0%} minimum"
        )
    return found


def _refused_keys(report: WeekReport) -> list[str]:
    found = []
    failures = report.failures
    for row in report.account_faults.itertuples():
        provider = row.target.split("/", 1)[0]
        classes = failures[
            (failures["provider"] == provider) & (failures["fault_kind"] == "account")
        ]
        named = ""
        if len(classes):
            top = classes.iloc[0]
            status = "" if pd.isna(top["http_status"]) else f" {int(top['http_status'])}"
            named = f", mostly {top['error_class']}{status}"
        found.append(
            f"the key or account of {row.target} was refused "
            f"{plural(int(row.attempts), 'time')}{named}"
        )
    return found


def _long_fallbacks(report: WeekReport) -> list[str]:
    """Routes that ran on their backups during incidents for LONG_FALLBACK or more in all
    (overlapping incidents counted once), longest first."""
    spans: dict[str, list[tuple[datetime, datetime]]] = {}
    answered: dict[str, int] = {}
    targets: dict[str, set[str]] = {}
    lo, hi = report.start, report.coverage.until
    for i in report.incidents.itertuples():
        if not int(i.answered_by_fallback):
            continue
        end = hi if i.ended_at is None or pd.isna(i.ended_at) else min(hi, i.ended_at)
        for route in [r for r in str(i.routes).split(", ") if r]:
            spans.setdefault(route, []).append((max(lo, i.started_at), end))
            answered[route] = answered.get(route, 0) + int(i.answered_by_fallback)
            targets.setdefault(route, set()).add(str(getattr(i, "target", None) or i.subject))
    totals = {route: _union(found) for route, found in spans.items()}
    long = sorted((r for r in totals if totals[r] >= LONG_FALLBACK), key=lambda r: -totals[r])
    return [
        f"{route} fell back during {duration(totals[route].total_seconds())} of incidents "
        f"of {', '.join(sorted(targets[route]))}: "
        f"{plural(answered[route], 'request')} answered by a backup"
        for route in long
    ]


def _union(spans: list[tuple[datetime, datetime]]) -> timedelta:
    total, reached = timedelta(0), None
    for start, end in sorted(spans):
        if reached is not None and start < reached:
            start = reached
        if end > start:
            total += end - start
            reached = end
    return total


def _failed_everywhere(report: WeekReport) -> list[str]:
    found = []
    for r in report.routes:
        real = r.failed - r.drill_failed
        if real > 0:
            found.append(
                f"{plural(real, 'request')} of {r.route} failed with no target "
                "answering (drills aside)"
            )
    return found


def _failed_drills(report: WeekReport) -> list[str]:
    drills = report.drills
    if not len(drills):
        return []
    found = []
    for d in drills.itertuples():
        if d.verdict == "passed" or not isinstance(d.verdict, str):
            continue
        text = f"the drill of {d.target} on {d.route} ({moment(d.started_at)}) {d.verdict}"
        if not pd.isna(d.failed) and int(d.failed):
            text += f": {plural(int(d.failed), 'request')} failed"
        if isinstance(d.ended_reason, str) and d.ended_reason.startswith("aborted"):
            text += ", and it ended itself"
        found.append(text)
    return found


def _unpriced(report: WeekReport) -> list[str]:
    if not len(report.unpriced):
        return []
    return ["models without a known price, left out of the spend: "
            + ", ".join(report.unpriced["target"])]  # fmt: skip
