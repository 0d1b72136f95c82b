"""[[alerts]] and [alerting] in switchover.toml."""

from __future__ import annotations

import re

import pytest

from engine.config import parse_config
from engine.config.alerting import DEFAULT_RULES, parse_duration
from engine.core.errors import ConfigError

BASE = {
    "providers": {"claude": {"kind": "anthropic", "api_key_env": "K"}},
    "routes": {"support": {"targets": ["claude/claude-haiku-4-5"]}},
}


def _alerting(**extra):
    return parse_config({**BASE, **extra}).alerting


def test_without_configuration_the_built_in_rules_apply_and_nobody_is_told():
    alerting = _alerting()
    assert alerting.rules == DEFAULT_RULES
    assert alerting.receivers == ()
    kinds = {r.kind for r in alerting.rules}
    assert {"fallback_rate", "credential", "breaker_open", "unavailable", "fallback_premium",
            "latency_p99", "request_faults", "telemetry_lag"} <= kinds  # fmt: skip


def test_a_rule_of_the_same_name_replaces_the_built_in_one():
    alerting = _alerting(alerts=[{"name": "fallback-rate-5m", "kind": "fallback_rate",
                                  "threshold": 30, "window": "10m"}])  # fmt: skip
    [rule] = [r for r in alerting.rules if r.name == "fallback-rate-5m"]
    assert (rule.threshold, rule.window_s, rule.severity) == (30, 600, "warning")
    assert len(alerting.rules) == len(DEFAULT_RULES)


def test_built_in_rules_can_be_turned_off():
    alerting = _alerting(alerting={"builtin_rules": False},
                         alerts=[{"name": "mine", "kind": "spend", "threshold": 50}])  # fmt: skip
    assert [r.name for r in alerting.rules] == ["mine"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"alerts": [{"name": "x", "kind": "nope"}]}, "alerts[0].kind: must be one of"),
        ({"alerts": [{"name": "x", "kind": "spend", "threshold": -1}]}, "alerts[0].threshold"),
        ({"alerts": [{"name": "x", "kind": "spend", "threshold": 5, "window": "soon"}]},
         "alerts[0].window"),
        ({"alerts": [{"name": "x", "kind": "spend", "threshold": 5, "routes": ["nope"]}]},
         "route 'nope' is not defined"),
        ({"alerts": [{"name": "x", "kind": "unavailable"}, {"name": "x", "kind": "unavailable"}]},
         "two rules are named 'x'"),
        ({"alerting": {"receivers": [{"name": "r", "kind": "slack"}]}},
         "give either url or url_env"),
        ({"alerting": {"receivers": [{"name": "r", "url": "ftp://x"}]}}, "must be an http(s)"),
        ({"alerting": {"receivers": [{"name": "r", "url": "http://x", "kind": "teams"}]}},
         "must be one of slack, json, pagerduty, alertmanager"),
        ({"alerting": {"colour": "red"}}, "alerting.colour: unknown key"),
        ({"alerting": {"incident_settle": "soon"}}, "alerting.incident_settle: must be"),
        ({"alerting": {"incident_settle": 0}}, "alerting.incident_settle: must be"),
    ],
)  # fmt: skip
def test_a_bad_rule_or_receiver_fails_at_start_naming_the_key(extra, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({**BASE, **extra})


def test_durations_read_as_seconds():
    assert [parse_duration(v) for v in ("90s", "5m", "1.5h", "7d", 30)] == [
        90,
        300,
        5400,
        604800,
        30,
    ]
    assert parse_duration("5 minutes") is None and parse_duration(-1) is None


def test_the_incident_settle_time_is_two_minutes_unless_configured():
    assert _alerting().incident_settle_s == 120
    assert _alerting(alerting={"incident_settle": "5m"}).incident_settle_s == 300


def test_the_alerts_know_each_providers_key_variable_never_the_key():
    assert _alerting().key_envs == {"claude": "K"}
