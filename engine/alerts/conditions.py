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
from typing import NamedTuple

from engine.alerts.budget_conditions import budget, budget_forecast
from engine.alerts.burn_rate import burn_rate
from engine.alerts.context import PROCESS_GONE_AFTER, Context, Observation, window_text
from engine.alerts.credentials import credential
from engine.alerts.telemetry_conditions import telemetry_lag, telemetry_loss
from engine.config.alerting import Rule
from engine.core.money import format_parts, format_usd, price_difference, read_usd

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


def _backup_cost(price: Decimal, cache_loss: Decimal, rewarm: Decimal) -> str:
    """What the backups cost against the primary, as a person reads it: never as good news,
    and with every part when a cache was lost, rounded so that the parts add up to the whole
    as shown: "backups' prices $0.19 lower than the primary's, $0.07 of prompt cache lost:
    $0.12 less in all"."""
    whole, shown = format_parts(
        price + cache_loss + rewarm, {"price": price, "cache": cache_loss, "rewarm": rewarm}
    )
    said = [_price_words(shown["price"])]
    if read_usd(shown["cache"]):  # never below zero: what the primary's cache would save
        said.append(f"{shown['cache']} of prompt cache lost")
    if read_usd(shown["rewarm"]):
        said.append(f"{shown['rewarm']} to re-warm it")
    if len(said) == 1:
        return said[0]
    total = read_usd(whole)
    if not total:
        return ", ".join(said) + ": the same in all"
    return ", ".join(said) + f": {whole.lstrip('-')} {'more' if total > 0 else 'less'} in all"


def _price_words(shown: str) -> str:
    if not read_usd(shown):
        return "backups' prices the same as the primary's"
    higher = "lower" if shown.startswith("-") else "higher"
    return f"backups' prices {shown.lstrip('-')} {higher} than the primary's"


def _wasted(wasted: Decimal) -> str:
    shown = format_usd(wasted)
    return f"wasted {shown}" if read_usd(shown) else "nothing wasted"


class _RouteFigures(NamedTuple):
    route: str
    requests: int
    by_fallback: int
    unavailable: int
    request_faults: int
    fallback_premium: Decimal
    cache_loss: Decimal
    rewarm: Decimal
    wasted: Decimal

    @property
    def price_difference(self) -> Decimal:
        return price_difference(self.fallback_premium, self.cache_loss)

    @property
    def extra_cost(self) -> Decimal:
        """Fallback premium + re-warm: what the backups cost beyond the primary."""
        return self.price_difference + self.cache_loss + self.rewarm


_ROUTE_FIGURES = """
    SELECT route, sum(requests)::BIGINT AS requests,
        -- a fault drill's fallbacks are an exercise, not a provider's trouble
        (sum(answered_by_fallback) - coalesce(sum(drill_fallbacks), 0))::BIGINT AS by_fallback,
        sum(unavailable)::BIGINT AS unavailable,
        sum(request_faults)::BIGINT AS request_faults,
        coalesce(sum(fallback_premium_usd), 0) AS fallback_premium,
        coalesce(sum(cache_loss_usd), 0) AS cache_loss,
        coalesce(sum(rewarm_usd), 0) AS rewarm,
        coalesce(sum(wasted_usd), 0) AS wasted
    FROM rollup_minute
    WHERE bucket >= time_bucket(INTERVAL 1 MINUTE, $since) AND bucket <= $now {routes}
    GROUP BY route ORDER BY route
"""


def _route_rows(rule: Rule, ctx: Context, since: datetime | None = None) -> list[_RouteFigures]:
    routes, params = _route_filter(rule)
    rows = ctx.con.execute(
        _ROUTE_FIGURES.format(routes=routes),
        {"since": since or ctx.since(rule), "now": ctx.now, **params},
    ).fetchall()
    return [_RouteFigures(*row) for row in rows]


def _fallback_rate(rule: Rule, ctx: Context) -> list[Observation]:
    fired = []
    for r in _route_rows(rule, ctx):
        if not r.requests or r.requests < rule.min_requests:
            continue
        rate = 100.0 * r.by_fallback / r.requests
        if rate > rule.threshold:
            summary = (
                f"{r.route}: {rate:.1f} % of {r.requests} requests answered by a backup in the "
                f"last {window_text(rule)} (threshold {rule.threshold:g} %); "
                f"{_backup_cost(r.price_difference, r.cache_loss, r.rewarm)}; {_wasted(r.wasted)}"
            )
            fired.append(Observation(rule, r.route, rate, summary, r.extra_cost + r.wasted))
    return fired


def _unavailable(rule: Rule, ctx: Context) -> list[Observation]:
    fired = []
    for r in _route_rows(rule, ctx):
        if r.unavailable and r.unavailable >= max(rule.threshold, 1):
            summary = (
                f"{r.route}: {r.unavailable} of {r.requests} requests failed with every "
                f"provider unavailable in the last {window_text(rule)}; {_wasted(r.wasted)}"
            )
            fired.append(Observation(rule, r.route, float(r.unavailable), summary, r.wasted))
    return fired


def _request_faults(rule: Rule, ctx: Context) -> list[Observation]:
    since = ctx.since(rule)
    usual = {
        r.route: (r.request_faults / r.requests if r.requests else 0.0)
        for r in _route_rows(
            Rule(rule.name, rule.kind, rule.severity, 0, 86400, routes=rule.routes),
            Context(ctx.con, since, ctx.spool_dir),
        )
    }
    fired = []
    for route, requests, _, _, faults, *_ in _route_rows(rule, ctx):
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
            f"{subject}: {what} at {format_usd(per_hour)}/h over the last {window_text(rule)} "
            f"(budget {format_usd(rule.threshold)}/h); {format_usd(total)} so far"
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
# Only a breaker held open now counts: one whose hold has run out is probing or about to (the
# next request is its probe), so a 5-minute account hold never fires a 5-minute alert at the
# moment it closes.
_BREAKERS = """
WITH events AS (SELECT * FROM breaker_events WHERE occurred_at <= $now),
per_process AS (
    SELECT target, host, process_id,
        arg_max(to_status, (occurred_at, seq)) AS status,
        arg_max(open_until, (occurred_at, seq)) AS open_until,
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
WHERE status = 'open' AND open_until > $now AND opened_at IS NOT NULL
    AND coalesce(reason, '') <> 'drill'
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
            fired.append(
                Observation(rule, f"{route}: {target}", rate, summary, about=(route, target))
            )
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
    "burn_rate": burn_rate,
    "budget": budget,
    "budget_forecast": budget_forecast,
}
