"""[[alerts]] and [alerting]: alert rules and receivers, as switchover.toml gives them.

    [alerting]
    builtin_rules = true            # the defaults below, unless a rule of yours takes the name
    incident_settle = "2m"          # an incident ends this long after its last fault
    [[alerting.receivers]]
    name = "oncall"
    kind = "slack"                  # "slack" (incoming webhook) or "json" (generic)
    url_env = "SLACK_WEBHOOK_URL"   # a webhook URL is a secret: name the variable holding it
    min_severity = "warning"

    [[alerts]]
    name = "support-fallback"
    kind = "fallback_rate"
    severity = "critical"
    threshold = 30                  # the unit is the kind's (UNITS below): here, percent
    window = "10m"
    routes = ["support"]

Rules are data; `engine.alerts.conditions` gives each kind its meaning. They live with the
configuration, below the alerts that evaluate them (engine.config.alerting re-exports them for
those). The configuration also hands the alerts each provider's key variable (`api_key_env`,
never the key): a credential alert names the credential a target failed with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from engine.config.budgets import Budget
from engine.config.checks import Fail, no_unknown
from engine.config.objective import Slo

Severity = Literal["warning", "critical"]
SEVERITIES: tuple[Severity, ...] = ("warning", "critical")

# kind → the unit of its threshold, as shown in alerts and the dashboard.
UNITS = {
    "fallback_rate": "%",  # requests answered by a backup ÷ requests, per route
    "credential": "account faults",  # a target's 401/403/402/404-model/quota since it answered
    "breaker_open": "min",  # a target's breaker not closed for this long
    "unavailable": "requests",  # requests failed with every provider unavailable, per route
    "fallback_premium": "USD/h",  # extra cost of fallbacks (premium + re-warm), all routes
    "spend": "USD/h",  # cost of every attempt, all routes
    "latency_p99": "ms",  # request latency (first attempt to last byte), per route
    "request_faults": "%",  # requests refused as malformed ÷ requests, per route
    "telemetry_lag": "s",  # how long attempts wait outside the store (files, spool, recorder)
    "telemetry_loss": "attempts",  # attempts a process's recorder discarded in the window
    "eval_pass_rate": "%",  # a backup's pass rate in its route's latest eval (0: the run's min)
    "budget": "%",  # a [[budgets]]'s spend in its period ÷ its amount (engine.config.budget_rules)
    "budget_forecast": "%",  # the same, projected to the period's end at the last 24 h's rate
    "burn_rate": "× budget",  # an [[slo]]'s failure share ÷ its error budget, in two windows
}
KINDS = tuple(UNITS)
DERIVED_KINDS = ("burn_rate",)  # rules another section makes, never written in [[alerts]]
# Kinds whose condition reads only the rollups (kept for good), never the attempts that
# [store] keep_attempts_days moves out: their window may be longer than that.
ROLLUP_KINDS = (
    "fallback_rate", "unavailable", "request_faults", "fallback_premium", "spend", "burn_rate",
)  # fmt: skip
RECEIVER_KINDS = ("slack", "json", "pagerduty", "alertmanager")
ALERTMANAGER_FORMATS = ("webhook", "api")

_RULE_KEYS = (
    "name", "kind", "severity", "threshold", "window", "min_requests", "routes",
    "baseline_factor", "description",
)  # fmt: skip
_RECEIVER_KEYS = (
    "name", "kind", "url", "url_env", "timeout_s", "max_attempts", "min_severity",
    "routing_key_env", "format",
)  # fmt: skip
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
_ALERTING_KEYS = ("builtin_rules", "receivers", "incident_settle")
INCIDENT_SETTLE_S = 120.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    kind: str
    severity: Severity
    threshold: float  # in UNITS[kind]
    window_s: float = 300.0  # the trailing period the figure is measured over
    min_requests: int = 0  # below this many requests in the window the rule stays quiet
    routes: tuple[str, ...] = ()  # only these routes (empty: every route)
    baseline_factor: float = 3.0  # request_faults: the rate must also be this × the last day's
    description: str = ""
    # burn_rate (derived from [[slo]] by engine.config.slo, never written in [[alerts]]): the
    # second, shorter window that must burn too, and the objective the rule guards.
    short_window_s: float = 0.0
    slo: Slo | None = None

    @property
    def unit(self) -> str:
        return UNITS[self.kind]


@dataclass(frozen=True, slots=True)
class Receiver:
    name: str
    kind: Literal["slack", "json", "pagerduty", "alertmanager"]
    url: str | None = None  # given in the file (a local relay, no secret in it)
    url_env: str | None = None  # or read from this environment variable when sending
    timeout_s: float = 5.0
    max_attempts: int = 6  # deliveries tried (with backoff) before the notification fails
    min_severity: Severity = "warning"
    # pagerduty: the variable holding the Events v2 routing key (a secret, read when sending).
    routing_key_env: str | None = None
    format: Literal["webhook", "api"] = "webhook"  # alertmanager: webhook v4, or /api/v2/alerts

    def wants(self, severity: str) -> bool:
        return SEVERITIES.index(severity) >= SEVERITIES.index(self.min_severity)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class AlertingConfig:
    rules: tuple[Rule, ...] = field(default_factory=lambda: DEFAULT_RULES)
    receivers: tuple[Receiver, ...] = ()
    # provider → the environment variable holding its key (None: it needs none); the
    # credential alert's subject names it. Empty when the scheduler runs without a config.
    key_envs: Mapping[str, str | None] = field(default_factory=dict)
    incident_settle_s: float = INCIDENT_SETTLE_S  # an incident ends this long after its last fault
    budgets: tuple[Budget, ...] = ()  # [[budgets]], which the budget rules watch

    def rule(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("fallback-rate-5m", "fallback_rate", "warning", 10, 300, min_requests=20,
         description="More than 10 % of a route's requests answered by a backup in 5 min."),
    Rule("fallback-rate-1h", "fallback_rate", "critical", 25, 3600, min_requests=100,
         description="More than 25 % of a route's requests answered by a backup over 1 h."),
    Rule("credential", "credential", "critical", 0, 86400,
         description="A target's provider refused its key or account (401, 403, 402, 404 "
         "model, quota or spend limit) and that target has not answered since."),
    Rule("breaker-open", "breaker_open", "warning", 5, 0,
         description="A target's breaker has stayed open (or probing) for 5 min."),
    Rule("all-unavailable", "unavailable", "critical", 1, 300,
         description="Requests failed with every provider unavailable in the last 5 min."),
    Rule("fallback-premium", "fallback_premium", "warning", 10, 3600,
         description="Fallbacks cost more than $10/h above what the primaries would have."),
    Rule("latency-p99", "latency_p99", "warning", 30_000, 300, min_requests=20,
         description="A route's p99 request latency above 30 s over 5 min."),
    Rule("request-fault-spike", "request_faults", "warning", 5, 900, min_requests=5,
         description="Over 5 % of a route's requests refused as malformed in 15 min, 3× its "
         "usual rate: often a provider API change."),
    Rule("telemetry-lag", "telemetry_lag", "critical", 120, 0,
         description="Attempts held back from the store over 2 min (spool files not ingested, "
         "a spool that cannot be written, a recorder whose writes fail): telemetry is failing."),
    Rule("telemetry-loss", "telemetry_loss", "critical", 0, 3600,
         description="A process lost attempts before they reached the spool (buffer full while "
         "writes failed, or still buffered at exit) in the last hour."),
    Rule("eval-below-minimum", "eval_pass_rate", "warning", 0, 0,
         description="A backup passes fewer of its route's eval cases than the route's minimum "
         "(the latest `switchover eval` run): falling back to it trades unavailability for "
         "wrong answers."),
)  # fmt: skip


def parse_alerting(
    alerts: Any,
    alerting: Any,
    fail: Fail,
    routes: tuple[str, ...] = (),
    key_envs: Mapping[str, str | None] | None = None,
) -> AlertingConfig:
    """`[[alerts]]` and `[alerting]` (each may be absent) → AlertingConfig; `key_envs`: each
    provider's `api_key_env`, for the credential alerts."""
    alerting = alerting if alerting is not None else {}
    if not isinstance(alerting, Mapping):
        raise fail("alerting", "must be a table")
    no_unknown(alerting, _ALERTING_KEYS, "alerting", fail)
    builtin = alerting.get("builtin_rules", True)
    if not isinstance(builtin, bool):
        raise fail("alerting.builtin_rules", "must be true or false")
    settle = parse_duration(alerting.get("incident_settle", INCIDENT_SETTLE_S))
    if settle is None or settle <= 0:
        raise fail("alerting.incident_settle", 'must be a duration like "2m" or seconds, above 0')
    own = [_rule(i, raw, fail, routes) for i, raw in enumerate(_list(alerts, "alerts", fail))]
    names = [r.name for r in own]
    for name in names:
        if names.count(name) > 1:
            raise fail("alerts", f"two rules are named {name!r}")
    rules = [r for r in DEFAULT_RULES if builtin and r.name not in names] + own
    receivers = [
        _receiver(i, raw, fail)
        for i, raw in enumerate(_list(alerting.get("receivers"), "alerting.receivers", fail))
    ]
    receiver_names = [r.name for r in receivers]
    for name in receiver_names:
        if receiver_names.count(name) > 1:
            raise fail("alerting.receivers", f"two receivers are named {name!r}")
    return AlertingConfig(tuple(rules), tuple(receivers), dict(key_envs or {}), settle)


def parse_duration(value: Any) -> float | None:
    """ "90s", "5m", "1.5h", "7d" or a number of seconds → seconds; None when not one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) and value >= 0 else None
    if isinstance(value, str) and (match := _DURATION.match(value.strip())):
        return float(match.group(1)) * _SECONDS[match.group(2)]
    return None


def _list(value: Any, where: str, fail: Fail) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(where, f"must be an array of tables, like [[{where}]]")
    return value


def _rule(i: int, raw: Any, fail: Fail, routes: tuple[str, ...]) -> Rule:
    where = f"alerts[{i}]"
    _known_keys(raw, where, _RULE_KEYS, fail)
    name = raw.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise fail(f"{where}.name", "must be a name of letters, digits, '-', '_' or '.'")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise fail(f"{where}.kind", f"must be one of {', '.join(KINDS)} (got {kind!r})")
    if kind in DERIVED_KINDS:
        raise fail(f"{where}.kind", f"{kind} rules come from [[slo]]: give the route an objective")
    base = next((r for r in DEFAULT_RULES if r.kind == kind), None)
    severity = raw.get("severity", base.severity if base else "warning")
    if severity not in SEVERITIES:
        raise fail(f"{where}.severity", f"must be warning or critical (got {severity!r})")
    threshold = raw.get("threshold", base.threshold if base else None)
    if not _number(threshold) or threshold < 0:
        raise fail(f"{where}.threshold", f"must be a non-negative number of {UNITS[kind]}")
    window = parse_duration(raw.get("window", base.window_s if base else 300))
    if window is None:
        raise fail(f"{where}.window", 'must be a duration like "5m", "1h" or seconds')
    min_requests = raw.get("min_requests", base.min_requests if base else 0)
    if not isinstance(min_requests, int) or isinstance(min_requests, bool) or min_requests < 0:
        raise fail(f"{where}.min_requests", "must be a non-negative integer")
    chosen = raw.get("routes", [])
    if not isinstance(chosen, list) or not all(isinstance(r, str) for r in chosen):
        raise fail(f"{where}.routes", "must be a list of route names")
    for route in chosen:
        if routes and route not in routes:
            raise fail(f"{where}.routes", f"route {route!r} is not defined in [routes]")
    factor = raw.get("baseline_factor", 3.0)
    if not _number(factor) or factor < 0:
        raise fail(f"{where}.baseline_factor", "must be a non-negative number")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise fail(f"{where}.description", "must be a string")
    rule = Rule(name, kind, severity, float(threshold), window, min_requests, tuple(chosen))
    return replace(rule, baseline_factor=float(factor), description=description)


def _receiver(i: int, raw: Any, fail: Fail) -> Receiver:
    where = f"alerting.receivers[{i}]"
    _known_keys(raw, where, _RECEIVER_KEYS, fail)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise fail(f"{where}.name", "must be a non-empty string")
    kind = raw.get("kind", "json")
    if kind not in RECEIVER_KINDS:
        raise fail(f"{where}.kind", f"must be one of {', '.join(RECEIVER_KINDS)} (got {kind!r})")
    url, url_env = raw.get("url"), raw.get("url_env")
    if kind == "pagerduty" and url is None and url_env is None:
        url = PAGERDUTY_EVENTS_URL
    if (url is None) == (url_env is None):
        raise fail(where, "give either url or url_env (the variable holding a secret URL)")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise fail(f"{where}.url", "must be an http(s) URL")
    if url_env is not None and (not isinstance(url_env, str) or not url_env):
        raise fail(f"{where}.url_env", "must name an environment variable")
    timeout = raw.get("timeout_s", 5.0)
    if not _number(timeout) or not 0 < timeout <= 60:
        raise fail(f"{where}.timeout_s", "must be a number of seconds in (0, 60]")
    attempts = raw.get("max_attempts", 6)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= 20:
        raise fail(f"{where}.max_attempts", "must be an integer from 1 to 20")
    min_severity = raw.get("min_severity", "warning")
    if min_severity not in SEVERITIES:
        raise fail(f"{where}.min_severity", "must be warning or critical")
    routing_key_env, fmt = raw.get("routing_key_env"), raw.get("format", "webhook")
    if kind == "pagerduty" and (not isinstance(routing_key_env, str) or not routing_key_env):
        raise fail(
            f"{where}.routing_key_env",
            "a pagerduty receiver must name the environment variable holding its routing key",
        )
    if kind != "pagerduty" and routing_key_env is not None:
        raise fail(f"{where}.routing_key_env", "only a pagerduty receiver takes a routing key")
    if fmt not in ALERTMANAGER_FORMATS or (kind != "alertmanager" and "format" in raw):
        raise fail(f"{where}.format", 'only for kind "alertmanager": "webhook" (v4) or "api"')
    receiver = Receiver(name, kind, url, url_env, float(timeout), attempts, min_severity)
    return replace(receiver, routing_key_env=routing_key_env, format=fmt)


def _known_keys(raw: Any, where: str, allowed: tuple[str, ...], fail: Fail) -> None:
    if not isinstance(raw, Mapping):
        raise fail(where, "must be a table")
    no_unknown(raw, allowed, where, fail)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
