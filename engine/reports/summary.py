"""The report's "what changed": sentences written from the numbers (no model involved), below
the manager's headline. Incidents and the alerts they raised (and those they did not, with the
reason an alert can be missing), what fallbacks cost as price difference + cache loss +
re-warm in one precision that adds up as shown, wasted spend, what drills and evals found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.money import format_parts, format_usd, read_usd
from engine.reports.dates import moment
from engine.reports.headline import plural

if TYPE_CHECKING:
    from engine.reports.content import WeekReport

# Why an incident can stand without an alert: said wherever one does, so that an empty alerts
# table never reads as a contradiction of the incidents beside it.
NO_ALERT_WHY = (
    "alerts are evaluated live, on each cycle's last minutes of data, so an incident that "
    "stayed below every rule's threshold, or whose attempts were taken in late (imported "
    "history, a spool that waited), raises none"
)


def summarise(report: WeekReport) -> list[str]:
    lines = [_incidents(report), _alerts(report), fallback_cost(report), _wasted(report)]
    lines += _unavailable(report)
    lines += _readiness(report)
    if len(report.unpriced):
        lines.append(
            "Models without a known price (not in the spend): "
            + ", ".join(report.unpriced["target"])
            + "."
        )
    return [line for line in lines if line]


def _incidents(report: WeekReport) -> str:
    incidents = report.incidents
    if not len(incidents):
        return "No incident."
    affected = int(incidents["requests_affected"].sum())
    by_backup = int(incidents["answered_by_fallback"].sum())
    failed = int(incidents["failed"].sum())
    return (
        f"{plural(len(incidents), 'incident')} affected {plural(affected, 'request')}: "
        f"{by_backup:,} answered by a backup, {failed:,} failed."
    )


def alert_coverage(report: WeekReport) -> str:
    """How many of the week's incidents raised no alert, and why that can be; "" when all did
    (or there was none)."""
    incidents = report.incidents
    quiet = int((incidents["alerts"] == "").sum()) if len(incidents) else 0
    if not quiet:
        return ""
    if len(incidents) == 1:
        said = "The incident raised no alert"
    elif quiet == len(incidents):
        said = f"Not one of the {len(incidents)} incidents raised an alert"
    else:
        said = f"{quiet} of the {len(incidents)} incidents raised no alert"
    return f"{said}: {NO_ALERT_WHY}."


def _alerts(report: WeekReport) -> str:
    alerts = report.alerts
    if not len(alerts):
        said = "No alert fired in the week."
    else:
        critical = int((alerts["severity"] == "critical").sum())
        said = (
            f"{plural(len(alerts), 'alert')} fired ({critical:,} critical), each listed "
            "under Alerts."
        )
    coverage = alert_coverage(report)
    return f"{said} {coverage}" if coverage else said


def fallback_parts(report: WeekReport) -> tuple[str, dict[str, str]]:
    """The extra cost of fallbacks and its parts, as shown: one precision, adding up."""
    return format_parts(
        report.extra_cost,
        {
            "price difference": report.price_difference,
            "cache loss": report.cache_loss,
            "re-warm": report.rewarm,
        },
    )


def fallback_cost(report: WeekReport) -> str:
    """What fallbacks cost beyond the primaries, said as a saving when they saved, and its
    parts as price difference (a saving when the backups are cheaper), cache loss and
    re-warm: the amounts as shown add up to the whole as shown."""
    total, parts = fallback_parts(report)
    whole = read_usd(total)
    if whole < 0:
        lead = f"Fallbacks saved {total[1:]} against what the primaries would have charged"
    elif whole > 0:
        lead = f"Fallbacks cost {total} more than the primaries would have charged"
    else:
        lead = f"Fallbacks cost no more than the primaries would have charged ({total})"
    price, cache, rewarm = parts["price difference"], parts["cache loss"], parts["re-warm"]
    priced = (
        f"the backups' lower prices saved {price[1:]}"
        if read_usd(price) < 0
        else f"the backups' prices cost {price} more"
    )
    return (
        f"{lead}: {priced}, lost prompt caching cost {cache}, re-warming the primaries' "
        f"caches cost {rewarm}."
    )


def _wasted(report: WeekReport) -> str:
    if not report.wasted:
        return "Nothing was paid for answers nobody got."
    return (
        f"{format_usd(report.wasted)} was paid for answers nobody got (retries, timeouts "
        "after the provider did the work, abandoned streams)."
    )


def _unavailable(report: WeekReport) -> list[str]:
    failed = sum(r.failed for r in report.routes)
    if not failed:
        return []
    drills = sum(r.drill_failed for r in report.routes)
    caused = f", {drills:,} of them in drills" if drills else ""
    return [f"{plural(failed, 'request')} failed with no target answering{caused}."]


def _readiness(report: WeekReport) -> list[str]:
    """What the week's drills and evals found: the drills that did not pass, the targets below
    their route's minimum pass rate."""
    lines = []
    drills = report.drills
    if len(drills):
        verdicts = drills["verdict"].fillna("no report yet")
        passed = int((verdicts == "passed").sum())
        line = f"{plural(len(drills), 'drill')}, {passed:,} passed"
        others = drills[verdicts != "passed"]
        if len(others):
            line += "; " + "; ".join(
                f"{d.target} on {d.route} from {moment(d.started_at)}: {_why(d)}"
                for d in others.itertuples()
            )
        lines.append(line.rstrip(".") + ".")
    evals = report.evals
    below = evals[evals["below_minimum"].fillna(False).astype(bool)] if len(evals) else evals
    for row in below.itertuples():
        lines.append(
            f"{row.target} passed {row.pass_rate:.0%} of {row.route}'s eval cases "
            f"({row.passed}/{row.cases}), below the route's {row.min_pass_rate:.0%} minimum."
        )
    if len(evals) and not len(below):
        lines.append("Every target evaluated met its route's minimum pass rate.")
    return lines


def _why(drill: object) -> str:
    """A drill that did not pass, in a few words: its summary, else its verdict or status."""
    for text in (getattr(drill, "summary", None), getattr(drill, "verdict", None)):
        if isinstance(text, str) and text:
            return text
    return str(getattr(drill, "status", ""))
