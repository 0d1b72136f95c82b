"""What each rule kind means, as a query over the store: which subjects are firing now.

`evaluate` returns, for every rule it could evaluate, the observations that fire (one per route,
target or provider). A rule missing from the result failed to evaluate and keeps its alerts as
they are; a rule present with no observation has nothing firing, so its alerts resolve.
Request-level figures come from the minute rollups (refreshed in the same cycle just before),
latency and credentials (engine.alerts.credentials) from the attempts, breakers from their
events, lag from the spool and the telemetry health tables (engine.store.telemetry), losses
from those tables.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from decimal import Decimal

from engine.alerts.context import PROCESS_GONE_AFTER, Context, Observation, window_text
from engine.alerts.credentials import credential
from engine.alerts.rules import Rule
from engine.alerts.telemetry_conditions import telemetry_lag, telemetry_loss
from engine.money import format_change, format_usd

log = logging.getLogger("switchover.alerts")


def evaluate(rules: Iterable[Rule], ctx: Context) -> dict[str, list[Observation]]:
    results: dict[str, list[Observation]] = {}
    for rule in rules:
        try:
            results[rule.name] = _KINDS[rule.kind](rule, ctx)
        except Exception:  # one broken rule must not silence the others
            log.exception("alert rule %s could not be evaluated", rule.name)
    return results


def _route_filter(rule: Rule) -> tuple[str, dict[str, object]]:
    if not rule.routes:
        return "", {}
    return " AND route IN (SELECT unnest($routes))", {"routes": list(rule.routes)}


def _usd(value: Decimal | float | None) -> str:
    return format_usd(value, 4)


def _fallback_spend(premium: Decimal | float | None, wasted: Decimal | float | None) -> str:
    """What the fallbacks did to the bill, as a person reads it: "the fallbacks saved $0.0624"
    (backups cheaper than the primary) or "cost $0.0624 more", then the wasted spend if any."""
    change = format_change(premium)
    said = "the fallbacks cost the same" if change == "no difference" else f"the fallbacks {change}"
    nothing = _usd(wasted) == _usd(0)  # less than $0.00005 reads as nothing, not "$0.0000"
    return said + (", nothing wasted" if nothing else f", wasted {_usd(wasted)}")


_ROUTE_FIGURES = """
    SELECT route, sum(requests)::BIGINT AS requests,
        -- a fault drill's fallbacks are an exercise, not a provider's trouble
        (sum(answered_by_fallback) - coalesce(sum(drill_fallbacks), 0))::BIGINT AS by_fallback,
        sum(unavailable)::BIGINT AS unavailable,
        sum(request_faults)::BIGINT AS request_faults,
        coalesce(sum(fallback_premium_usd), 0) + coalesce(sum(rewarm_usd), 0) AS premium,
        coalesce(sum(wasted_usd), 0) AS wasted
    FROM rollup_minute
    WHERE bucket >= time_bucket(INTERVAL 1 MINUTE, $since) AND bucket <= $now {routes}
    GROUP BY route ORDER BY route
"""


def _route_rows(rule: Rule, ctx: Context, since: datetime | None = None) -> list[tuple]:
    routes, params = _route_filter(rule)
    return ctx.con.execute(
        _ROUTE_FIGURES.format(routes=routes),
        {"since": since or ctx.since(rule), "now": ctx.now, **params},
    ).fetchall()


def _fallback_rate(rule: Rule, ctx: Context) -> list[Observation]:
    fired = []
    for route, requests, by_fallback, _, _, premium, wasted in _route_rows(rule, ctx):
        if not requests or requests < rule.min_requests:
            continue
        rate = 100.0 * by_fallback / requests
        if rate > rule.threshold:
            summary = (
                f"{route}: {rate:.1f} % of {requests} requests answered by a backup in the "
                f"last {window_text(rule)} (threshold {rule.threshold:g} %); "
                + _fallback_spend(premium, wasted)
            )
            fired.append(Observation(rule, route, rate, summary, premium + wasted))
    return fired


def _unavailable(rule: Rule, ctx: Context) -> list[Observation]:
    fired = []
    for route, requests, _, unavailable, _, _, wasted in _route_rows(rule, ctx):
        if unavailable and unavailable >= max(rule.threshold, 1):
            summary = (
                f"{route}: {unavailable} of {requests} requests failed with every provider "
                f"unavailable in the last {window_text(rule)}; wasted {_usd(wasted)}"
            )
            fired.append(Observation(rule, route, float(unavailable), summary, wasted))
    return fired


def _request_faults(rule: Rule, ctx: Context) -> list[Observation]:
    since = ctx.since(rule)
    usual = {
        route: (faults / requests if requests else 0.0)
        for route, requests, _, _, faults, _, _ in _route_rows(
            Rule(rule.name, rule.kind, rule.severity, 0, 86400, routes=rule.routes),
            Context(ctx.con, since, ctx.spool_dir),
        )
    }
    fired = []
    for route, requests, _, _, faults, _, _ in _route_rows(rule, ctx):
        if not requests or faults < max(rule.min_requests, 1):
            continue
        rate = 100.0 * faults / requests
        baseline = 100.0 * usual.get(route, 0.0)
        if rate > rule.threshold and rate >= rule.baseline_factor * baseline:
            summary = (
                f"{route}: {faults} of {requests} requests refused as malformed in the last "
                f"{window_text(rule)} ({rate:.1f} %, usually {baseline:.1f} %): often a change in "
                "the provider's API or in the caller's requests; the breaker ignores these"
            )
            fired.append(Observation(rule, route, rate, summary))
    return fired


def _money_per_hour(column: str, what: str) -> Callable[[Rule, Context], list[Observation]]:
    def check(rule: Rule, ctx: Context) -> list[Observation]:
        routes, params = _route_filter(rule)
        (total,) = ctx.con.execute(
            f"SELECT coalesce(sum({column}), 0) FROM rollup_minute "
            "WHERE bucket >= time_bucket(INTERVAL 1 MINUTE, $since) AND bucket <= $now" + routes,
            {"since": ctx.since(rule), "now": ctx.now, **params},
        ).fetchone()
        per_hour = float(total) * 3600 / max(rule.window_s, 60)
        if per_hour <= rule.threshold:
            return []
        subject = ", ".join(rule.routes) or "all routes"
        summary = (
            f"{subject}: {what} at {_usd(per_hour)}/h over the last {window_text(rule)} "
            f"(budget {_usd(rule.threshold)}/h); {_usd(total)} so far"
        )
        return [Observation(rule, subject, per_hour, summary, total)]

    return check


_LATENCY = """
    SELECT route, count(*) AS requests, quantile_cont(ms, 0.99) AS p99 FROM (
        SELECT arg_min(route, attempt_number) AS route,
            (max(epoch_us(started_at) + latency_ms * 1000) - min(epoch_us(started_at)))
                / 1000 AS ms
        FROM attempts WHERE started_at >= $since AND started_at <= $now {routes}
        GROUP BY request_id HAVING NOT bool_or(decision = 'fail_fast')
    ) GROUP BY route ORDER BY route
"""


def _latency_p99(rule: Rule, ctx: Context) -> list[Observation]:
    routes, params = _route_filter(rule)
    rows = ctx.con.execute(
        _LATENCY.format(routes=routes), {"since": ctx.since(rule), "now": ctx.now, **params}
    ).fetchall()
    fired = []
    for route, requests, p99 in rows:
        if requests >= max(rule.min_requests, 1) and p99 > rule.threshold:
            summary = (
                f"{route}: p99 request latency {p99 / 1000:.1f} s over {requests} requests in "
                f"the last {window_text(rule)} (threshold {rule.threshold / 1000:g} s)"
            )
            fired.append(Observation(rule, route, p99, summary))
    return fired


# A breaker a fault drill holds open is the drill's exercise, not an alert; one that a failed
# probe reopened after the drill counts from the drill's end (its next event), not its start.
_BREAKERS = """
WITH events AS (SELECT * FROM breaker_events WHERE occurred_at <= $now),
per_process AS (
    SELECT target, host, process_id,
        arg_max(to_status, (occurred_at, seq)) AS status,
        max(occurred_at) FILTER (from_status = 'closed') AS left_closed,
        arg_max(reason, (occurred_at, seq)) FILTER (to_status = 'open') AS reason,
        max(occurred_at) FILTER (to_status = 'open' AND reason = 'drill') AS drill_held,
        max(occurred_at) AS last_event
    FROM events GROUP BY ALL
),
opened AS (
    SELECT p.*, CASE WHEN p.drill_held IS NULL OR p.drill_held < p.left_closed
        THEN p.left_closed
        ELSE (SELECT min(e.occurred_at) FROM events e
              WHERE e.target = p.target AND e.host = p.host AND e.process_id = p.process_id
                  AND e.occurred_at > p.drill_held) END AS opened_at
    FROM per_process p
),
alive AS (
    SELECT host, process_id FROM attempts WHERE started_at >= $alive_since
    GROUP BY ALL
)
SELECT target, min(opened_at) AS opened_at, count(*) AS processes,
    string_agg(DISTINCT reason, ', ') AS reasons
FROM opened p
WHERE status <> 'closed' AND opened_at IS NOT NULL AND coalesce(reason, '') <> 'drill'
    AND (last_event >= $alive_since
         OR EXISTS (SELECT 1 FROM alive a WHERE a.host = p.host AND a.process_id = p.process_id))
GROUP BY target ORDER BY target
"""


def _breaker_open(rule: Rule, ctx: Context) -> list[Observation]:
    rows = ctx.con.execute(
        _BREAKERS, {"now": ctx.now, "alive_since": ctx.now - PROCESS_GONE_AFTER}
    ).fetchall()
    fired = []
    for target, opened_at, processes, reasons in rows:
        minutes = (ctx.now - opened_at).total_seconds() / 60
        if minutes >= rule.threshold:
            where = f" in {processes} processes" if processes > 1 else ""
            summary = (
                f"{target}: breaker open{where} for {minutes:.0f} min since "
                f"{opened_at:%H:%M} UTC ({reasons or 'failures'}); its traffic goes to the "
                "backups, and probes have not closed it"
            )
            fired.append(Observation(rule, target, minutes, summary))
    return fired


_EVALS = """
WITH latest AS (SELECT route, arg_max(run_id, finished_at) AS run_id FROM eval_runs GROUP BY route)
SELECT r.route, e.target, count(*)::BIGINT AS cases, count(*) FILTER (e.passed)::BIGINT,
    any_value(r.min_pass_rate), any_value(r.finished_at), any_value(r.cases_file)
FROM latest l
JOIN eval_runs r ON r.run_id = l.run_id
JOIN eval_results e ON e.run_id = r.run_id
LEFT JOIN route_primaries p ON p.route = r.route
WHERE (p.target IS NULL OR e.target <> p.target) {routes}
GROUP BY r.route, e.target ORDER BY r.route, e.target
"""


def _eval_pass_rate(rule: Rule, ctx: Context) -> list[Observation]:
    """Backups (every target but the route's primary) below the minimum in the latest eval."""
    routes, params = _route_filter(rule)
    query = _EVALS.format(routes=routes.replace("route IN", "r.route IN"))
    fired = []
    for route, target, cases, passed, minimum, finished, cases_file in ctx.con.execute(
        query, params
    ).fetchall():
        floor = rule.threshold if rule.threshold > 0 else 100.0 * minimum
        rate = 100.0 * passed / cases if cases else 0.0
        if rate < floor:
            summary = (
                f"{route}: backup {target} passed {passed} of {cases} eval cases ({rate:.0f} %, "
                f"minimum {floor:.0f} %) in the run of {finished:%Y-%m-%d %H:%M} UTC "
                f"({cases_file}); a fallback to it would answer wrongly"
            )
            fired.append(Observation(rule, f"{route}: {target}", rate, summary,
                                     about=(route, target)))  # fmt: skip
    return fired


_KINDS: dict[str, Callable[[Rule, Context], list[Observation]]] = {
    "fallback_rate": _fallback_rate,
    "unavailable": _unavailable,
    "request_faults": _request_faults,
    "fallback_premium": _money_per_hour(
        "coalesce(fallback_premium_usd, 0) + coalesce(rewarm_usd, 0)", "fallback premium"
    ),
    "spend": _money_per_hour("cost_usd", "spend"),
    "latency_p99": _latency_p99,
    "credential": credential,
    "breaker_open": _breaker_open,
    "telemetry_lag": telemetry_lag,
    "telemetry_loss": telemetry_loss,
    "eval_pass_rate": _eval_pass_rate,
}
