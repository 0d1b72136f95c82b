"""Alerts end to end: the chain on fake providers, the real scheduler pass on a virtual clock,
and a local receiver standing in for Slack."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from helpers.alert_harness import PRIMARY, SlackStandIn, World, at, config
from typer.testing import CliRunner

from engine.alerts.silences import request_silence
from engine.cli.main import app
from engine.published.read import PublishedData

FALLBACK_RULE = {
    "name": "fallback", "kind": "fallback_rate", "severity": "warning",
    "threshold": 20, "window": "5m", "min_requests": 20,
}  # fmt: skip
CREDENTIAL_RULE = {"name": "credential", "kind": "credential"}


@pytest.fixture
def slack():
    stand_in = SlackStandIn()
    stand_in.url = stand_in.start()
    yield stand_in
    if stand_in.hold is not None:
        stand_in.hold.set()
    stand_in.stop()


@pytest.fixture
def make_world(tmp_path, slack):
    worlds = []

    def make(rules, **receiver) -> World:
        hook = {"name": "oncall", "kind": "json", "url": slack.url, **receiver}
        worlds.append(World(tmp_path, config([hook], rules)))
        return worlds[-1]

    yield make
    for world in worlds:
        world.close()


def _alerts(world: World) -> list[tuple]:
    return world.query(
        "SELECT rule, subject, state, fired_at, resolved_at, notified, silenced FROM alerts "
        "ORDER BY fired_at"
    )


def test_an_outage_fires_once_and_resolves_once(make_world, slack):
    world = make_world([FALLBACK_RULE])
    world.minutes(5)
    assert slack.got == []
    world.primary_fails("overloaded", minutes=5)
    world.minutes(17)

    assert slack.delivered() == [
        ("firing", "fallback", "support"),
        ("resolved", "fallback", "support"),
    ]
    [(_, _, state, fired_at, resolved_at, notified, _)] = _alerts(world)
    assert state == "resolved" and notified
    assert at(5) < fired_at <= at(7), "fires within the outage's first cycles"
    assert at(10) < resolved_at <= at(17), "resolves once the 5-minute window is clean"
    firing = slack.got[0].body["alert"]
    assert "answered by a backup" in firing["summary"] and firing["cost_usd"] is not None


def test_a_delivery_the_receiver_refuses_with_500_is_retried_and_then_delivered(make_world, slack):
    slack.statuses = [500]
    world = make_world([FALLBACK_RULE])
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(5)  # fires at the 2nd cycle; the 500 is recorded at the 3rd, retried at the 4th

    assert [(d.body["event"], d.status) for d in slack.got] == [("firing", 500), ("firing", 200)]
    first, second = (d.body for d in slack.got)
    assert first == second, "a retry sends the same notification"
    [(status, attempts, error)] = world.query(
        "SELECT status, attempts, last_error FROM alert_notifications"
    )
    assert (status, attempts, error) == ("delivered", 2, None)


def test_a_receiver_that_keeps_failing_is_given_up_on_and_the_failure_is_published(
    make_world, slack
):
    slack.statuses = [503] * 10
    world = make_world([FALLBACK_RULE], max_attempts=2)
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(6)

    assert [d.status for d in slack.got] == [503, 503], "no third try"
    published = PublishedData(world.paths.published).query("alert_notifications", since=at(0))
    [row] = published.to_dict("records")
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 2, "HTTP 503")
    assert "payload" not in published.columns
    listed = CliRunner().invoke(
        app, ["alerts", "list", "--data-dir", str(world.paths.root), "--days", "10000"]
    )
    assert "delivery failed to oncall after 2 tries (HTTP 503)" in listed.output


def test_a_credential_failure_alerts_within_one_cycle_and_resolves_when_the_key_works(
    make_world, slack
):
    world = make_world([CREDENTIAL_RULE])
    world.minutes(2)
    world.primary_fails("auth", minutes=3)
    world.minutes(1)

    subject = f"claude/{PRIMARY} (K)"  # the target, and its credential by its key variable
    assert slack.delivered() == [("firing", "credential", subject)]
    alert = slack.got[0].body["alert"]
    assert alert["severity"] == "critical"
    assert "authentication (401)" in alert["summary"]
    assert "test-key" not in str(slack.got[0].body), "never the key"

    world.minutes(10)  # the key works again; the breaker's account cool-down ends, a probe succeeds
    assert slack.delivered() == [
        ("firing", "credential", subject),
        ("resolved", "credential", subject),
    ]


def test_a_silenced_rule_fires_in_the_store_but_sends_nothing(make_world, slack):
    world = make_world([FALLBACK_RULE])
    world.minutes(5)
    request_silence(world.paths, "fallback", duration=timedelta(hours=1), now=world.now)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(17)

    assert slack.got == []
    [(_, _, state, _, _, notified, silenced)] = _alerts(world)
    assert (state, notified, silenced) == ("resolved", False, True)


def test_an_alert_still_firing_when_its_silence_ends_is_sent_then(make_world, slack):
    world = make_world([FALLBACK_RULE])
    world.minutes(5)
    request_silence(world.paths, "fallback", duration=timedelta(minutes=4), now=world.now)
    world.primary_fails("overloaded", minutes=8)
    world.minutes(3)
    assert slack.got == [], "silenced"
    world.minutes(2)
    assert slack.delivered() == [("firing", "fallback", "support")]
    world.minutes(15)
    assert slack.delivered() == [
        ("firing", "fallback", "support"),
        ("resolved", "fallback", "support"),
    ]


def test_a_hanging_receiver_does_not_hold_up_the_scheduler(make_world, slack):
    slack.hold = threading.Event()
    world = make_world([FALLBACK_RULE], timeout_s=30)
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    for _ in range(3):
        world.clock.run(world._one_minute())
        world.sw.recorder.flush()
        world.pipeline.cycle()  # returns while the receiver holds the delivery
    assert slack.entered.is_set() and slack.got == []
    [(status,)] = world.query("SELECT status FROM alert_notifications")
    assert status == "pending", "in flight, not yet answered"
    slack.hold.set()
    assert world.watch.outbox.sender.wait_idle(10)
    world.cycle()
    [(status,)] = world.query("SELECT status FROM alert_notifications")
    assert status == "delivered"


def test_alert_state_is_in_the_published_snapshots(make_world, slack):
    world = make_world([FALLBACK_RULE])
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(3)
    alerts = PublishedData(world.paths.published).query("alerts", since=at(0))
    [row] = alerts.to_dict("records")
    assert (row["rule"], row["state"], row["severity"]) == ("fallback", "firing", "warning")


def test_a_breaker_open_through_a_long_outage_alerts_and_its_transitions_are_recorded(
    make_world, slack
):
    world = make_world([{"name": "breaker", "kind": "breaker_open", "threshold": 5}])
    world.minutes(2)
    world.primary_fails("overloaded", minutes=8)
    world.minutes(12)

    assert slack.delivered() == [
        ("firing", "breaker", "claude/claude-sonnet-4-5"),
        ("resolved", "breaker", "claude/claude-sonnet-4-5"),
    ]
    transitions = world.query(
        "SELECT from_status, to_status FROM breaker_events ORDER BY occurred_at, seq"
    )
    assert transitions[0] == ("closed", "open")
    assert ("open", "half_open") in transitions and ("half_open", "open") in transitions
    assert transitions[-1] == ("half_open", "closed")
    published = PublishedData(world.paths.published).query("breaker_events", since=at(0))
    assert len(published) == len(transitions)
