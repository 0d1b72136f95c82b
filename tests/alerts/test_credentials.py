"""Credential alerts from what a user sees: one model's key refused while the provider's other
model answers, through the real chain, recorder and scheduler pass, told to a local receiver."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.alert_harness import PRIMARY, SlackStandIn, World, config

SONNET, HAIKU = f"claude/{PRIMARY}", "claude/claude-haiku-4-5"
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
MINUTE = timedelta(minutes=1)
ROUTES = {"support": [SONNET, "gpt/gpt-4.1-mini"], "summarize": [HAIKU, "gpt/gpt-4.1"]}


@pytest.fixture
def slack():
    stand_in = SlackStandIn()
    url = stand_in.start()
    stand_in.url = url
    yield stand_in
    stand_in.stop()


@pytest.fixture
def world(tmp_path, slack):
    hook = {"name": "oncall", "kind": "json", "url": slack.url}
    rules = [{"name": "credential", "kind": "credential"}]
    w = World(tmp_path, config([hook], rules, routes=ROUTES, keys=KEYS),
              routes=("support", "summarize"))  # fmt: skip
    yield w
    w.close()


def _first_refusal(world: World, target: str):
    [(first,)] = world.query(
        "SELECT min(started_at) FROM attempts WHERE target = $t AND fault_kind = 'account'",
        {"t": target},
    )
    return first


def test_one_models_key_refused_alerts_within_a_cycle_though_its_sibling_answers(world, slack):
    world.minutes(2)
    world.fails("claude-haiku-4-5", "auth", minutes=3)
    world.minutes(1)

    subject = f"{HAIKU} (ANTHROPIC_API_KEY)"
    assert slack.delivered() == [("firing", "credential", subject)]
    [(fired_at,)] = world.query("SELECT fired_at FROM alerts WHERE subject = $s", {"s": subject})
    assert fired_at == world.now and fired_at - _first_refusal(world, HAIKU) < MINUTE
    alert = slack.got[0].body["alert"]
    assert alert["severity"] == "critical"
    assert "refused the key ANTHROPIC_API_KEY: authentication (401)" in alert["summary"]
    assert "Routes falling back: summarize." in alert["summary"]
    assert f"Still answering with it: {SONNET}." in alert["summary"]
    assert "test-key" not in str(slack.got[0].body), "never the key"
    [(sonnet_answers,)] = world.query(
        "SELECT count(*) FROM attempts WHERE target = $t AND outcome = 'success' "
        "AND started_at >= $since", {"t": SONNET, "since": _first_refusal(world, HAIKU)},
    )  # fmt: skip
    assert sonnet_answers > 0, "the same provider's other model kept answering with the key"


def test_it_resolves_when_that_target_answers_again_with_the_key(world, slack):
    world.minutes(1)
    world.fails("claude-haiku-4-5", "auth", minutes=2)
    world.minutes(3)
    assert [event for event, _, _ in slack.delivered()] == ["firing"], "still refused"
    world.minutes(5)  # the account cool-down ends; the probe to Haiku succeeds
    subject = f"{HAIKU} (ANTHROPIC_API_KEY)"
    assert slack.delivered() == [
        ("firing", "credential", subject),
        ("resolved", "credential", subject),
    ]
    [(resolved_at,)] = world.query("SELECT resolved_at FROM alerts")
    [(answered,)] = world.query(
        "SELECT min(started_at) FROM attempts WHERE target = $t AND outcome = 'success' "
        "AND started_at > $since", {"t": HAIKU, "since": _first_refusal(world, HAIKU)},
    )  # fmt: skip
    assert answered < resolved_at and resolved_at - answered < MINUTE


def test_targets_refused_with_one_key_are_told_in_one_notification(world, slack):
    world.minutes(1)
    world.fails(PRIMARY, "auth", minutes=2)
    world.fails("claude-haiku-4-5", "auth", minutes=2)
    world.minutes(1)

    [delivery] = slack.got
    alert = delivery.body["alert"]
    assert delivery.body["event"] == "firing"
    assert alert["subjects"] == [f"{HAIKU} (ANTHROPIC_API_KEY)", f"{SONNET} (ANTHROPIC_API_KEY)"]
    assert alert["subject"].startswith("claude key ANTHROPIC_API_KEY: ")
    lines = alert["summary"].splitlines()
    assert [line.split(":")[0] for line in lines] == [HAIKU, SONNET]
    assert f"Also refused with it: {SONNET}." in lines[0]
    assert f"Also refused with it: {HAIKU}." in lines[1]
    firing = world.query("SELECT subject, notified FROM alerts WHERE state = 'firing' ORDER BY 1")
    assert firing == [
        (f"{HAIKU} (ANTHROPIC_API_KEY)", True),
        (f"{SONNET} (ANTHROPIC_API_KEY)", True),
    ]
