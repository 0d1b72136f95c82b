"""PagerDuty and Alertmanager receivers, end to end: an outage through the fake providers, the
real scheduler pass on a virtual clock, the outbox, and local stand-ins that check the exact
shape their real peers take (tests/helpers/pager_receivers.py)."""

from __future__ import annotations

import logging

import pytest
from helpers.alert_harness import World, config
from helpers.pager_receivers import PagerStandIn

from engine.config import ConfigError, parse_config
from engine.config.alerting import PAGERDUTY_EVENTS_URL

FALLBACK_RULE = {
    "name": "fallback", "kind": "fallback_rate", "severity": "critical",
    "threshold": 20, "window": "5m", "min_requests": 20,
}  # fmt: skip
ROUTING_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"  # 32 characters, as PagerDuty's are


@pytest.fixture
def stand_ins():
    started: list[PagerStandIn] = []

    def start(kind: str, statuses: list[int] | None = None) -> tuple[PagerStandIn, str]:
        stand_in = PagerStandIn(kind, statuses or [])
        started.append(stand_in)
        return stand_in, stand_in.start()

    yield start
    for stand_in in started:
        stand_in.stop()


@pytest.fixture
def make_world(tmp_path, monkeypatch):
    monkeypatch.setenv("PD_ROUTING_KEY", ROUTING_KEY)
    worlds: list[World] = []

    def make(*receivers: dict) -> World:
        worlds.append(World(tmp_path, config(list(receivers), [FALLBACK_RULE])))
        return worlds[-1]

    yield make
    for world in worlds:
        world.close()


def _outage(world: World) -> None:
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(17)


def test_pagerduty_gets_a_trigger_and_a_resolve_with_one_dedup_key(make_world, stand_ins):
    pd, url = stand_ins("pagerduty")
    world = make_world({"name": "pager", "kind": "pagerduty", "url": url,
                        "routing_key_env": "PD_ROUTING_KEY"})  # fmt: skip
    _outage(world)

    assert [r.status for r in pd.got] == [202, 202], [r.body for r in pd.got]
    trigger, resolve = pd.accepted()
    assert trigger["event_action"] == "trigger" and resolve["event_action"] == "resolve"
    assert trigger["routing_key"] == resolve["routing_key"] == ROUTING_KEY
    [(alert_id,)] = world.query("SELECT alert_id FROM alerts")
    assert trigger["dedup_key"] == resolve["dedup_key"] == alert_id
    event = trigger["payload"]
    assert event["severity"] == "critical" and event["source"] == "switchover"
    assert event["component"] == "support" and event["group"] == "fallback"
    assert event["class"] == "fallback_rate"
    assert "answered by a backup" in event["summary"]
    details = event["custom_details"]
    assert details["rule"] == "fallback" and details["unit"] == "%" and details["threshold"] == 20
    assert float(details["value"]) > 20 and details["alert_id"] == alert_id


def test_the_routing_key_is_never_stored_or_logged(make_world, stand_ins, caplog):
    caplog.set_level(logging.DEBUG)
    _, url = stand_ins("pagerduty", statuses=[500])
    world = make_world({"name": "pager", "kind": "pagerduty", "url": url,
                        "routing_key_env": "PD_ROUTING_KEY"})  # fmt: skip
    _outage(world)
    stored = world.query("SELECT payload, coalesce(last_error, '') FROM alert_notifications")
    assert stored, "notifications were queued"
    for payload, error in stored:
        assert ROUTING_KEY not in payload and ROUTING_KEY not in error
        assert "routing_key" not in payload
    assert ROUTING_KEY not in caplog.text


def test_a_pagerduty_outage_is_retried_until_the_event_is_taken(make_world, stand_ins):
    pd, url = stand_ins("pagerduty", statuses=[503, 429])
    world = make_world({"name": "pager", "kind": "pagerduty", "url": url,
                        "routing_key_env": "PD_ROUTING_KEY"})  # fmt: skip
    _outage(world)
    assert [r.status for r in pd.got] == [503, 429, 202, 202]
    assert pd.got[0].body == pd.got[2].body, "a retry sends the same event"
    assert [b["event_action"] for b in pd.accepted()] == ["trigger", "resolve"]


def test_a_missing_routing_key_fails_the_delivery_with_the_variable_named(
    make_world, stand_ins, monkeypatch
):
    pd, url = stand_ins("pagerduty")
    world = make_world({"name": "pager", "kind": "pagerduty", "url": url,
                        "routing_key_env": "PD_ROUTING_KEY", "max_attempts": 1})  # fmt: skip
    monkeypatch.delenv("PD_ROUTING_KEY")
    _outage(world)
    assert pd.got == []
    errors = {row[0] for row in world.query("SELECT last_error FROM alert_notifications")}
    assert errors == {"PD_ROUTING_KEY is not set"}


@pytest.mark.parametrize("fmt", ["webhook", "api"])
def test_alertmanager_gets_firing_then_resolved_in_its_own_shape(make_world, stand_ins, fmt):
    am, url = stand_ins(fmt)
    world = make_world({"name": "am", "kind": "alertmanager", "url": url, "format": fmt})
    _outage(world)

    assert {r.status for r in am.got} == {200}, [r.body for r in am.got]
    firing, resolved = am.accepted()[0], am.accepted()[-1]  # "api" re-sends while it fires
    [(fired_at, resolved_at)] = world.query("SELECT fired_at, resolved_at FROM alerts")
    if fmt == "webhook":
        assert (firing["status"], resolved["status"]) == ("firing", "resolved")
        assert firing["receiver"] == "am" and firing["groupLabels"] == {"alertname": "fallback"}
        [fa], [ra] = firing["alerts"], resolved["alerts"]
        assert fa["endsAt"] == "0001-01-01T00:00:00Z"
        assert fa["fingerprint"] == ra["fingerprint"], "one alert, one fingerprint"
    else:
        [fa], [ra] = firing, resolved
        assert "endsAt" not in fa, "a firing alert has no end"
    labels = {"alertname": "fallback", "severity": "critical", "subject": "support",
              "kind": "fallback_rate", "source": "switchover"}  # fmt: skip
    assert fa["labels"] == ra["labels"] == labels
    assert "answered by a backup" in fa["annotations"]["summary"]
    assert fa["startsAt"] == ra["startsAt"] == fired_at.isoformat().replace("+00:00", "Z")
    assert ra["endsAt"] == resolved_at.isoformat().replace("+00:00", "Z")


def _parse(receiver: dict) -> object:
    return parse_config(config([receiver], []))


def test_a_pagerduty_receiver_defaults_to_the_events_api_and_needs_a_routing_key_variable():
    parsed = _parse({"name": "p", "kind": "pagerduty", "routing_key_env": "PD"})
    [receiver] = parsed.alerting.receivers  # type: ignore[attr-defined]
    assert receiver.url == PAGERDUTY_EVENTS_URL and receiver.routing_key_env == "PD"
    with pytest.raises(ConfigError, match=r"receivers\[0\]\.routing_key_env: a pagerduty"):
        _parse({"name": "p", "kind": "pagerduty"})
    with pytest.raises(ConfigError, match=r"routing_key_env: only a pagerduty receiver"):
        _parse({"name": "j", "kind": "json", "url": "http://x", "routing_key_env": "PD"})


def test_an_alertmanager_format_is_webhook_or_api_and_only_for_alertmanager():
    with pytest.raises(ConfigError, match=r"receivers\[0\]\.format: only for kind"):
        _parse({"name": "a", "kind": "alertmanager", "url": "http://x", "format": "v1"})
    with pytest.raises(ConfigError, match=r"receivers\[0\]\.format"):
        _parse({"name": "s", "kind": "slack", "url": "http://x", "format": "api"})
    with pytest.raises(ConfigError, match=r"kind: must be one of slack, json, pagerduty"):
        _parse({"name": "s", "kind": "opsgenie", "url": "http://x"})


def test_a_pager_cannot_receive_the_weekly_report_headline():
    data = config([{"name": "p", "kind": "pagerduty", "routing_key_env": "PD"}], [])
    data["reports"] = {"send_to": ["p"]}
    with pytest.raises(ConfigError, match=r"reports\.send_to"):
        parse_config(data)
