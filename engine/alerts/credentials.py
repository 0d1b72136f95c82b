"""The `credential` rule kind: a target whose provider refused its key or account.

What is broken is a target with the credential it used, not a provider: a key can be refused
for one model (no access, a per-model quota, a revoked project key) while the provider's other
models answer with it. So the alert's subject is the target and its key variable, as in
"claude/claude-haiku-4-5 (ANTHROPIC_API_KEY)": the provider's `api_key_env` from the config,
never the key. It fires on the first account fault (401, 403, 402, 404 model, quota, spend
limit) whatever the provider's other models do, and resolves once that same target has answered
again. Targets refused with the same key in one pass are told in one notification (their
observations share a group); each summary names the others on that key, refused or answering.
A missing model (404) is that target's alone: it is grouped with nothing. Drill attempts
(`fault_kind = "drill"`) are never account faults.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from engine.alerts.context import Context, Observation
from engine.config.alerting import Rule

# The first account fault in the rule's window: most passes find none and stop there.
_FIRST = """
SELECT min(started_at) FROM attempts
WHERE fault_kind = 'account' AND started_at >= $since AND started_at <= $now
"""
# Each target's account faults since it last answered (successes read from the first fault on).
_FAULTS = """
WITH answered AS (
    SELECT target, max(started_at) AS last_ok FROM attempts
    WHERE outcome = 'success' AND started_at >= $first AND started_at <= $now
    GROUP BY target
)
SELECT a.target, any_value(a.provider) AS provider, count(*) AS faults,
    min(a.started_at) AS first_fault, max(a.started_at) AS last_fault,
    arg_max(a.error_class, a.started_at) AS error_class,
    arg_max(a.http_status, a.started_at) AS status,
    arg_max(a.error_type, a.started_at) AS error_type,
    list_sort(list_distinct(list(a.route))) AS routes
FROM attempts a LEFT JOIN answered o USING (target)
WHERE a.fault_kind = 'account' AND a.started_at >= $since AND a.started_at <= $now
    AND (o.last_ok IS NULL OR a.started_at > o.last_ok)
GROUP BY a.target ORDER BY a.target
"""
# The routes whose primary is a target: they fall back while its breaker holds it out.
_PRIMARY_OF = "SELECT target, list_sort(list(route)) FROM route_primaries GROUP BY target"
# The providers' targets that answered since a moment (the first fault of the pass).
_ANSWERING = """
SELECT provider, target FROM attempts
WHERE outcome = 'success' AND started_at >= $since AND started_at <= $now
    AND provider IN (SELECT unnest($providers))
GROUP BY ALL ORDER BY target
"""


def credential(rule: Rule, ctx: Context) -> list[Observation]:
    window = {"since": ctx.since(rule), "now": ctx.now}
    (first,) = ctx.con.execute(_FIRST, window).fetchone()
    if first is None:
        return []
    rows = ctx.con.execute(_FAULTS, {**window, "first": first}).fetchall()
    rows = [row for row in rows if row[2] > rule.threshold]
    if not rows:
        return []
    primary_of = dict(ctx.con.execute(_PRIMARY_OF).fetchall())
    refused: dict[str, list[str]] = defaultdict(list)  # provider → targets refused its key
    for target, provider, *_, error_class, _status, _type, _routes in rows:
        if error_class != "model_not_found":
            refused[provider].append(target)
    answering: dict[str, list[str]] = defaultdict(list)
    if refused:
        params = {"since": first, "now": ctx.now, "providers": sorted(refused)}
        for provider, target in ctx.con.execute(_ANSWERING, params).fetchall():
            answering[provider].append(target)
    fired = []
    for target, provider, faults, first, last, error_class, status, error_type, routes in rows:
        routes = sorted({*routes, *primary_of.get(target, ())})
        detail = error_class + (f" ({status})" if status else "")
        if error_type and error_type != error_class:
            detail += f", {error_type}"
        times = _times(faults, first, last)
        if error_class == "model_not_found":
            summary = (
                f"{target}: {provider} does not know the model: {detail}, {times}; it has not "
                f"answered since. Routes falling back: {', '.join(routes)}. Check the model "
                "name in the route's targets."
            )
            fired.append(Observation(rule, target, float(faults), summary, about=(target,)))
            continue
        key = _key(ctx, provider)
        others = [t for t in refused[provider] if t != target]
        still = [t for t in answering[provider] if t not in refused[provider]]
        summary = (
            f"{target}: {provider} refused {key}: {detail}, {times}; this target has not "
            f"answered with it since. Routes falling back: {', '.join(routes)}. "
            + (f"Also refused with it: {', '.join(others)}. " if others else "")
            + (f"Still answering with it: {', '.join(still)}. " if still else "")
            + "Check the key, its access to this model, billing and quota."
        )
        env = ctx.key_envs.get(provider)
        subject = f"{target} ({env})" if env else target
        group = f"{provider} key {env}" if env else f"{provider} key"
        fired.append(
            Observation(rule, subject, float(faults), summary, group=group, about=(target,))
        )
    return fired


def _key(ctx: Context, provider: str) -> str:
    """The credential, named by its variable: never the key itself."""
    if provider not in ctx.key_envs:
        return "its key"  # a scheduler run without the configuration does not know the name
    env = ctx.key_envs[provider]
    return f"the key {env}" if env else "the request (no api_key_env is set for it)"


def _times(faults: int, first: datetime, last: datetime) -> str:
    if faults == 1:
        return f"once at {last:%H:%M:%S} UTC"
    return f"{faults} times since {first:%H:%M:%S} UTC, the latest at {last:%H:%M:%S}"
