"""PagerDuty receivers from what on-call sees: an outage through the fake providers, the real
scheduler pass on a virtual clock, the outbox, and a local stand-in for the Events API v2 that
takes only events of the exact shape PagerDuty does (tests/helpers/pager_receivers.py)."""

from __future__ import annotations

import json
import logging

import jsonschema
import pytest
from helpers.alert_harness import PRIMARY, World, config
from helpers.pager_receivers import PAGERDUTY_TRIGGER, PagerStandIn
from typer.testing import CliRunner

from engine.alerts.oncall_payloads import with_routing_key
from engine.alerts.payloads import body_for
from engine.cli.main import app
from engine.config import ConfigError, parse_config
from engine.config.alerting import PAGERDUTY_EVENTS_URL, Receiver

FALLBACK_RULE = {
    "name": "fallback", "kind": "fallback_rate", "severity": "critical",
    "threshold": 20, "window": "5m", "min_requests": 20,
}  # fmt: skip
ROUTING_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"  # 32 characters, as PagerDuty's are
SONNET, HAIKU = f"claude/{PRIMARY}", "claude/claude-haiku-4-5"
TWO_ROUTES = {"support": [SONNET, "gpt/gpt-4.1-mini"], "summarize": [HAIKU, "gpt/gpt-4.1"]}


@pytest.fixture
def pagerduty():
    stand_in = PagerStandIn("pagerduty")
    stand_in.url = stand_in.start()
    yield stand_in
    stand_in.stop()


@pytest.fixture
def make_world(tmp_path, monkeypatch, pagerduty):
    monkeypatch.setenv("PD_ROUTING_KEY", ROUTING_KEY)
    worlds: list[World] = []

    def make(rules=(FALLBACK_RULE,), *, routes=None, **receiver) -> World:
        pager = {"name": "pager", "kind": "pagerduty", "url": pagerduty.url,
                 "routing_key_env": "PD_ROUTING_KEY", **receiver}  # fmt: skip
        data = config([pager], list(rules), routes=routes,
                      keys=("ANTHROPIC_API_KEY", "OPENAI_API_KEY"))  # fmt: skip
        worlds.append(World(tmp_path, data, routes=tuple(routes or ("support",))))
        return worlds[-1]

    yield make
    for world in worlds:
        world.close()


def _outage(world: World, minutes: int = 17) -> None:
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(minutes)


def _iso(when) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _open_incidents(events: list[dict]) -> set[str]:
    """What PagerDuty holds open after `events`: a trigger opens its dedup_key, a resolve
    closes it (PagerDuty's own de-duplication)."""
    opened: set[str] = set()
    for event in events:
        (opened.add if event["event_action"] == "trigger" else opened.discard)(event["dedup_key"])
    return opened


def test_an_outage_triggers_one_pagerduty_alert_and_its_recovery_resolves_it(make_world, pagerduty):
    world = make_world()
    _outage(world)

    assert [r.status for r in pagerduty.got] == [202, 202], [r.body for r in pagerduty.got]
    assert {r.path for r in pagerduty.got} == {"/v2/enqueue"}
    trigger, resolve = pagerduty.accepted()
    [(alert_id, fired_at)] = world.query("SELECT alert_id, fired_at FROM alerts")
    assert trigger["routing_key"] == resolve["routing_key"] == ROUTING_KEY
    assert resolve == {"routing_key": ROUTING_KEY, "event_action": "resolve",
                       "dedup_key": alert_id}, "a resolve needs nothing else"  # fmt: skip
    assert (trigger["event_action"], trigger["dedup_key"], trigger["client"]) == (
        "trigger", alert_id, "Switchover",
    )  # fmt: skip
    event = trigger["payload"]
    assert event["summary"].startswith("[fallback] support: ")
    assert "answered by a backup" in event["summary"]
    assert {k: v for k, v in event.items() if k not in ("summary", "custom_details")} == {
        "source": "switchover",
        "severity": "critical",
        "timestamp": _iso(fired_at),
        "component": "support",
        "group": "fallback",
        "class": "fallback_rate",
    }
    details = dict(event["custom_details"])
    value, cost = details.pop("value"), details.pop("cost_so_far")
    assert details == {"rule": "fallback", "threshold": 20.0, "unit": "%",
                       "alert_id": alert_id, "fired_at": _iso(fired_at)}  # fmt: skip
    assert value > 20 and value == round(value, 2), "the rate when it fired, rounded"
    assert cost.startswith(("$", "saved $")) and "E-" not in cost, "in the one money format"
    assert _open_incidents(pagerduty.accepted()) == set(), "the resolve closed what it opened"


def test_the_routing_key_reaches_pagerduty_but_never_the_store_nor_the_log(
    make_world, pagerduty, caplog
):
    caplog.set_level(logging.DEBUG)
    pagerduty.statuses = [500]  # an error and a retry: the paths that log and record
    world = make_world()
    _outage(world)

    assert all(r.body["routing_key"] == ROUTING_KEY for r in pagerduty.got)
    stored = world.query("SELECT payload FROM alert_notifications")
    assert len(stored) == 2 and all("routing_key" not in payload for (payload,) in stored)
    tables = world.query(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE data_type = 'VARCHAR' AND table_schema = 'main'"
    )
    assert ("alert_notifications", "payload") in tables
    for table, column in tables:
        [(found,)] = world.query(
            f'SELECT count(*) FROM "{table}" WHERE contains("{column}", $key)', {"key": ROUTING_KEY}
        )
        assert found == 0, f"the routing key is in {table}.{column}"
    assert "not delivered" in caplog.text and ROUTING_KEY not in caplog.text


def test_pagerduty_answering_500_then_429_gets_the_same_event_until_it_takes_it(
    make_world, pagerduty
):
    pagerduty.statuses = [500, 429]
    world = make_world()
    _outage(world)

    assert [r.status for r in pagerduty.got] == [500, 429, 202, 202]
    assert pagerduty.got[0].body == pagerduty.got[1].body == pagerduty.got[2].body
    assert [e["event_action"] for e in pagerduty.accepted()] == ["trigger", "resolve"]
    rows = world.query(
        "SELECT event, status, attempts, last_http_status FROM alert_notifications ORDER BY 1"
    )
    assert rows == [("firing", "delivered", 3, 202), ("resolved", "delivered", 1, 202)]


def test_an_event_pagerduty_refuses_as_invalid_fails_at_once_and_says_why(make_world, pagerduty):
    pagerduty.statuses = [400]  # what PagerDuty answers an event it will never take as sent
    world = make_world()
    _outage(world)

    [(status, attempts, error)] = world.query(
        "SELECT status, attempts, last_error FROM alert_notifications WHERE event = 'firing'"
    )
    assert (status, attempts) == ("failed", 1), "a 400 is not retried"
    assert error == "HTTP 400: PagerDuty refused the event as invalid (not retried)"
    assert [r.status for r in pagerduty.got] == [400, 202], "the trigger once, then the resolve"


def test_targets_refused_with_one_key_page_one_alert_each_and_each_resolve_closes_its_own(
    make_world, pagerduty
):
    world = make_world([{"name": "credential", "kind": "credential"}], routes=TWO_ROUTES)
    world.minutes(1)
    world.fails(PRIMARY, "auth", minutes=1)
    world.fails("claude-haiku-4-5", "auth", minutes=6)
    world.minutes(1)

    alerts = dict(world.query("SELECT subject, alert_id FROM alerts"))
    sonnet, haiku = alerts[f"{SONNET} (ANTHROPIC_API_KEY)"], alerts[f"{HAIKU} (ANTHROPIC_API_KEY)"]
    triggers = {e["dedup_key"]: e for e in pagerduty.accepted()}
    assert set(triggers) == {sonnet, haiku}, "one trigger per alert, each under its own id"
    assert triggers[sonnet]["payload"]["custom_details"]["fired_with"] == [
        f"{HAIKU} (ANTHROPIC_API_KEY)"
    ]
    assert triggers[haiku]["payload"]["component"] == f"{HAIKU} (ANTHROPIC_API_KEY)"

    world.minutes(6)  # Sonnet's key works again first
    [(resolved,)] = world.query("SELECT alert_id FROM alerts WHERE state = 'resolved'")
    assert resolved == sonnet
    assert _open_incidents(pagerduty.accepted()) == {haiku}, "Haiku's page stays open"
    world.minutes(6)
    assert world.query("SELECT count(*) FROM alerts WHERE state = 'firing'") == [(0,)]
    assert _open_incidents(pagerduty.accepted()) == set()
    assert [r.status for r in pagerduty.got] == [202] * 4


def test_a_missing_routing_key_fails_the_delivery_naming_the_variable(
    make_world, pagerduty, monkeypatch
):
    world = make_world(max_attempts=1)
    monkeypatch.delenv("PD_ROUTING_KEY")
    _outage(world)

    assert pagerduty.got == []
    errors = {error for (error,) in world.query("SELECT last_error FROM alert_notifications")}
    assert errors == {"PD_ROUTING_KEY is not set"}


def test_alerts_test_triggers_an_info_event_and_resolves_it(tmp_path, monkeypatch, pagerduty):
    monkeypatch.setenv("PD_ROUTING_KEY", ROUTING_KEY)
    path = tmp_path / "switchover.toml"
    path.write_text(
        '[providers.claude]\nkind = "anthropic"\napi_key_env = "K"\n'
        '[routes.support]\ntargets = ["claude/claude-haiku-4-5"]\n'
        '[[alerting.receivers]]\nname = "pager"\nkind = "pagerduty"\n'
        f'url = "{pagerduty.url}"\nrouting_key_env = "PD_ROUTING_KEY"\n'
    )
    result = CliRunner().invoke(app, ["alerts", "test", "-c", str(path)])

    assert result.exit_code == 0, result.output
    assert "pager: delivered (HTTP 202)" in result.output and ROUTING_KEY not in result.output
    trigger, resolve = pagerduty.accepted()
    assert trigger["payload"]["severity"] == "info"
    assert resolve["event_action"] == "resolve" and resolve["dedup_key"] == trigger["dedup_key"]


def test_a_long_summary_is_cut_to_what_pagerduty_takes_and_no_figure_reads_none():
    receiver = Receiver("pager", "pagerduty", PAGERDUTY_EVENTS_URL, routing_key_env="PD")
    alert = {
        "alert_id": "spend:all:20261123T090000", "rule": "spend", "kind": "spend",
        "severity": "warning", "subject": "all routes", "summary": "word " * 400,
        "value": float("nan"), "threshold": 10.0, "cost_usd": 0, "fired_at": None,
    }  # fmt: skip
    event = json.loads(with_routing_key(body_for(receiver, "firing", alert), ROUTING_KEY))

    jsonschema.validate(event, PAGERDUTY_TRIGGER)
    summary = event["payload"]["summary"]
    assert len(summary) <= 1024 and summary.endswith("word…")
    details = event["payload"]["custom_details"]
    assert details == {"rule": "spend", "threshold": 10.0, "unit": "USD/h",
                       "cost_so_far": "$0.00", "alert_id": alert["alert_id"]}  # fmt: skip


def _parse(receiver: dict):
    return parse_config(config([receiver], []))


def test_a_pagerduty_receiver_defaults_to_the_events_api_and_takes_a_relay_url_or_url_env():
    [receiver] = _parse(
        {"name": "p", "kind": "pagerduty", "routing_key_env": "PD"}
    ).alerting.receivers
    assert (receiver.url, receiver.url_env, receiver.routing_key_env) == (
        PAGERDUTY_EVENTS_URL, None, "PD",
    )  # fmt: skip
    [relay] = _parse({"name": "p", "kind": "pagerduty", "url": "http://relay:8080/v2/enqueue",
                      "routing_key_env": "PD"}).alerting.receivers  # fmt: skip
    assert relay.url == "http://relay:8080/v2/enqueue"
    [secret] = _parse({"name": "p", "kind": "pagerduty", "url_env": "PD_URL",
                       "routing_key_env": "PD"}).alerting.receivers  # fmt: skip
    assert (secret.url, secret.url_env) == (None, "PD_URL")


@pytest.mark.parametrize(
    ("receiver", "message"),
    [
        ({"name": "p", "kind": "pagerduty"},
         r"receivers\[0\]\.routing_key_env: a pagerduty receiver must name"),
        ({"name": "p", "kind": "pagerduty", "routing_key_env": ""},
         r"receivers\[0\]\.routing_key_env: a pagerduty receiver must name"),
        ({"name": "p", "kind": "pagerduty", "routing_key_env": 7},
         r"receivers\[0\]\.routing_key_env: a pagerduty receiver must name"),
        ({"name": "j", "kind": "json", "url": "http://x", "routing_key_env": "PD"},
         r"receivers\[0\]\.routing_key_env: only a pagerduty receiver"),
        ({"name": "p", "kind": "pagerduty", "routing_key_env": "PD", "format": "api"},
         r"receivers\[0\]\.format: only for kind"),
        ({"name": "p", "kind": "pagerduty", "routing_key_env": "PD", "url": "events.pagerduty.com"},
         r"receivers\[0\]\.url: must be an http\(s\) URL"),
    ],
)  # fmt: skip
def test_a_pagerduty_receiver_misconfigured_is_told_by_its_key(receiver, message):
    with pytest.raises(ConfigError, match=message):
        _parse(receiver)


def test_a_pager_cannot_receive_the_weekly_report_headline():
    data = config([{"name": "p", "kind": "pagerduty", "routing_key_env": "PD"}], [])
    data["reports"] = {"send_to": ["p"]}
    with pytest.raises(ConfigError, match=r"reports\.send_to"):
        parse_config(data)
