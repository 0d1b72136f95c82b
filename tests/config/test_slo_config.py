"""[[slo]]: an objective per route, and the three burn-rate rules each one gets."""

from __future__ import annotations

import re

import pytest

from engine.config import ConfigError, parse_config

BASE = {
    "providers": {"p": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1"}},
    "routes": {"support": {"targets": ["p/m"]}, "classify": {"targets": ["p/m"]}},
}


def _parse(slo, **more):
    return parse_config({**BASE, "slo": slo, **more})


def test_an_slo_gives_its_route_the_three_rules_of_the_multi_window_table():
    config = _parse([{"route": "support", "target": 0.999}])
    rules = [r for r in config.alerting.rules if r.kind == "burn_rate"]
    assert [
        (r.name, r.severity, r.threshold, r.window_s, r.short_window_s, r.routes) for r in rules
    ] == [
        ("slo-support-page-1h", "critical", 14.4, 3600, 300, ("support",)),
        ("slo-support-page-6h", "critical", 6.0, 21600, 1800, ("support",)),
        ("slo-support-ticket-3d", "warning", 1.0, 259200, 21600, ("support",)),
    ]
    assert {r.min_requests for r in rules} == {20}
    assert config.slos[0].name == "support" and rules[0].unit == "× budget"


def test_a_name_and_a_minimum_volume_are_its_own():
    [slo] = _parse([{"route": "support", "target": 0.995, "name": "chat", "min_requests": 50}]).slos
    assert (slo.name, slo.target, slo.min_requests) == ("chat", 0.995, 50)
    names = [r.name for r in _parse([{"route": "support", "target": 0.99, "name": "chat"}])
             .alerting.rules if r.kind == "burn_rate"]  # fmt: skip
    assert names[0] == "slo-chat-page-1h"


def test_the_builtin_rules_off_leave_the_slo_rules_on():
    config = _parse([{"route": "support", "target": 0.999}], alerting={"builtin_rules": False})
    assert {r.kind for r in config.alerting.rules} == {"burn_rate"}


def test_a_three_day_window_is_no_reason_to_keep_attempts_three_days():
    """Burn rates read the rollups, which stay; only rules reading attempts bound retention."""
    config = _parse([{"route": "support", "target": 0.999}], store={"keep_attempts_days": 2})
    assert config.store.keep_attempts_days == 2


@pytest.mark.parametrize(
    ("slo", "said"),
    [
        ({"target": 0.999}, "slo[0].route: must name a route"),
        ({"route": "billing", "target": 0.999}, "slo[0].route: route 'billing' is not defined"),
        ({"route": "support"}, "slo[0].target: must be a share strictly between 0 and 1"),
        ({"route": "support", "target": 99.9}, "slo[0].target: must be a share strictly between"),
        ({"route": "support", "target": 1}, "slo[0].target: must be a share strictly between"),
        ({"route": "support", "target": 0}, "slo[0].target: must be a share strictly between"),
        ({"route": "support", "target": True}, "slo[0].target: must be a share strictly between"),
        ({"route": "support", "target": "0.999"}, "slo[0].target: must be a share"),
        ({"route": "support", "target": 0.9, "min_requests": 0}, "slo[0].min_requests: must be"),
        ({"route": "support", "target": 0.9, "name": "a b"}, "slo[0].name: must be a name"),
        ({"route": "support", "target": 0.9, "window": "1h"}, "slo[0].window: unknown key"),
    ],
)
def test_a_bad_objective_fails_in_one_line_naming_its_key(slo, said):
    with pytest.raises(ConfigError, match=re.escape(said)) as raised:
        _parse([slo])
    assert "\n" not in str(raised.value)


def test_two_objectives_of_one_route_or_one_name_are_refused():
    with pytest.raises(ConfigError, match="slo: two objectives have the route 'support'"):
        _parse([{"route": "support", "target": 0.99}, {"route": "support", "target": 0.999}])
    with pytest.raises(ConfigError, match="slo: two objectives have the name 'x'"):
        _parse([{"route": "support", "target": 0.99, "name": "x"},
                {"route": "classify", "target": 0.99, "name": "x"}])  # fmt: skip


def test_slo_must_be_an_array_of_tables():
    with pytest.raises(ConfigError, match=r"slo: must be an array of tables, like \[\[slo\]\]"):
        _parse({"route": "support", "target": 0.99})


def test_an_alert_cannot_be_a_burn_rate_rule_nor_take_an_slo_rules_name():
    with pytest.raises(
        ConfigError, match=r"alerts\[0\].kind: burn_rate rules come from \[\[slo\]\]"
    ):
        parse_config({**BASE, "alerts": [{"name": "mine", "kind": "burn_rate", "threshold": 2}]})
    mine = [{"name": "slo-support-page-1h", "kind": "unavailable", "threshold": 1}]
    with pytest.raises(ConfigError, match="'slo-support-page-1h' is the name of an"):
        _parse([{"route": "support", "target": 0.999}], alerts=mine)
