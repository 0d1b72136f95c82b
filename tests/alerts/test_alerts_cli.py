"""`switchover alerts test | silence | list`, as an operator types them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers.alert_harness import SlackStandIn, World, config
from typer.testing import CliRunner

from engine.alerts.payloads import payload
from engine.cli.main import app

runner = CliRunner()


@pytest.fixture
def slack():
    stand_in = SlackStandIn()
    stand_in.url = stand_in.start()
    yield stand_in
    stand_in.stop()


def _toml(tmp_path, receivers: str):
    path = tmp_path / "switchover.toml"
    path.write_text(
        '[providers.claude]\nkind = "anthropic"\napi_key_env = "K"\n'
        '[routes.support]\ntargets = ["claude/claude-haiku-4-5"]\n' + receivers
    )
    return path


def test_alerts_test_reaches_every_receiver_in_its_own_format(tmp_path, slack, monkeypatch):
    monkeypatch.setenv("HOOK_URL", slack.url)
    path = _toml(
        tmp_path,
        '[[alerting.receivers]]\nname = "chat"\nkind = "slack"\nurl_env = "HOOK_URL"\n'
        f'[[alerting.receivers]]\nname = "pager"\nkind = "json"\nurl = "{slack.url}"\n',
    )
    result = runner.invoke(app, ["alerts", "test", "-c", str(path)])
    assert result.exit_code == 0, result.output
    assert "chat: delivered (HTTP 200)" in result.output
    assert "pager: delivered (HTTP 200)" in result.output
    slack_body, json_body = (d.body for d in slack.got)
    assert "this receiver works" in slack_body["text"] and slack_body["blocks"]
    assert json_body["event"] == "test" and json_body["alert"]["rule"] == "test"


def test_alerts_test_fails_naming_the_receiver_but_never_its_secret_url(tmp_path, monkeypatch):
    monkeypatch.setenv("HOOK_URL", "http://127.0.0.1:9/secret-token-abc")
    path = _toml(tmp_path, '[[alerting.receivers]]\nname = "chat"\nurl_env = "HOOK_URL"\n')
    result = runner.invoke(app, ["alerts", "test", "-c", str(path)])
    assert result.exit_code == 1
    assert "chat: NOT delivered: ConnectError" in result.output
    assert "secret-token-abc" not in result.output


def test_alerts_test_without_receivers_says_how_to_add_one(tmp_path):
    result = runner.invoke(app, ["alerts", "test", "-c", str(_toml(tmp_path, ""))])
    assert result.exit_code == 2 and "[[alerting.receivers]]" in result.output


def test_a_silence_from_the_command_line_reaches_the_scheduler(tmp_path, slack):
    rules = [{"name": "fallback", "kind": "fallback_rate", "threshold": 20, "min_requests": 20}]
    # The command line stamps the silence with the real time: the world starts now too.
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    world = World(tmp_path, config([{"name": "r", "url": slack.url}], rules), start=now)
    try:
        world.minutes(5)
        result = runner.invoke(app, ["alerts", "silence", "fallback", "--for", "2h",
                                     "--reason", "known outage",
                                     "--data-dir", str(world.paths.root)])  # fmt: skip
        assert result.exit_code == 0, result.output
        world.minutes(1)
        [(rule, subject, ends_at, reason)] = world.query(
            "SELECT rule, subject, ends_at, reason FROM alert_silences"
        )
        assert (rule, subject, reason) == ("fallback", None, "known outage")
        assert ends_at - world.now > timedelta(hours=1, minutes=50)
        world.primary_fails("overloaded", minutes=5)
        world.minutes(4)
        assert slack.got == []
        listed = runner.invoke(app, ["alerts", "list", "--data-dir", str(world.paths.root),
                                     "--days", "10000"])  # fmt: skip
        assert "firing" in listed.output and "(silenced)" in listed.output
    finally:
        world.close()


def test_a_bad_duration_is_refused():
    result = runner.invoke(app, ["alerts", "silence", "x", "--for", "soon"])
    assert result.exit_code == 2 and "not a duration" in result.output


def test_the_slack_payload_says_what_fired_what_it_cost_and_how_long_it_lasted():
    from decimal import Decimal

    fired = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
    alert = {"rule": "fallback", "subject": "support", "severity": "critical",
             "summary": "support: 40 % answered by a backup", "cost_usd": Decimal("1.5"),
             "fired_at": fired, "resolved_at": fired + timedelta(minutes=75)}  # fmt: skip
    import json

    text = json.loads(payload("slack", "resolved", alert))["text"]
    assert "*RESOLVED* [critical] fallback: support" in text
    assert "Cost so far: $1.50" in text and "Lasted 1 h 15 min" in text
