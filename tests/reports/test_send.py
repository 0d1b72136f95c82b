"""The weekly report's headline reaches the receivers that opted in ([reports] send_to), from
the report the scheduler writes of a week with an outage, through the real pipeline."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from helpers.alert_harness import START, SlackStandIn, World, config

from engine.config import ConfigError, ReportsConfig, parse_config
from engine.config.alerting import Receiver
from engine.reports import send
from engine.scheduler.weekly_report import weekly_report


@pytest.fixture(scope="module")
def outage_week(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("week"), config([], None), per_minute=6)
    world.minutes(5)
    world.primary_fails("overloaded", 20)
    world.minutes(30)
    world.pipeline.day_rollups()
    yield world
    world.close()


def test_the_headline_goes_to_the_receivers_named_in_send_to_only(outage_week):
    chosen, other = SlackStandIn(), SlackStandIn()
    receivers = (Receiver("team", "slack", url=chosen.start()),
                 Receiver("pager", "json", url=other.start()))  # fmt: skip
    try:
        html = weekly_report(outage_week.paths, ReportsConfig(send_to=("team",)),
                             now=START + timedelta(days=7), receivers=receivers,
                             background=False)  # fmt: skip
    finally:
        chosen.stop()
        other.stop()
    assert other.got == [], "a receiver not named in send_to hears nothing"
    [delivery] = chosen.got
    text = delivery.body["text"]
    assert text.startswith(":bar_chart: *Reliability report 2026-W48")
    assert "claude/claude-sonnet-4-5" in text, "the worst incident is named"
    assert "Spend" in text or "spend" in text
    assert str(html) in text, "it says where the files are"


def test_a_json_receiver_gets_the_headline_as_fields(tmp_path):
    files = {"html": tmp_path / "r.html", "markdown": tmp_path / "r.md"}
    body = json.loads(send.message("json", "Reliability report 2026-W48", ["a", "b"], files))
    where = {k: str(v) for k, v in files.items()}
    assert body == {"event": "weekly_report", "title": "Reliability report 2026-W48",
                    "headline": ["a", "b"], "files": where}  # fmt: skip


def test_a_receiver_that_is_down_is_tried_again_with_the_outbox_backoff(tmp_path):
    stand_in = SlackStandIn(statuses=[503, 500])
    waited: list[float] = []
    try:
        results = send.send([Receiver("team", "slack", url=stand_in.start())], "title",
                            ["line"], {}, sleep=waited.append)  # fmt: skip
    finally:
        stand_in.stop()
    assert results["team"].ok and [d.status for d in stand_in.got] == [503, 500, 200]
    assert waited == [send.BACKOFF_S[0], send.BACKOFF_S[1]]


def test_a_receiver_down_all_along_costs_a_log_line_not_the_report(tmp_path, caplog):
    stand_in = SlackStandIn(statuses=[503] * send.TRIES)
    try:
        results = send.send([Receiver("team", "slack", url=stand_in.start())], "title",
                            ["line"], {}, sleep=lambda _: None)  # fmt: skip
    finally:
        stand_in.stop()
    assert not results["team"].ok
    assert "not sent to team: HTTP 503" in caplog.text


def test_send_to_must_name_configured_receivers():
    data = config([{"name": "team", "kind": "slack", "url": "http://127.0.0.1:9/hook"}], None)
    assert parse_config({**data, "reports": {"send_to": ["team"]}}).reports.send_to == ("team",)
    with pytest.raises(ConfigError, match=r"reports.send_to.*names no.*ops.*receivers: team"):
        parse_config({**data, "reports": {"send_to": ["ops"]}})
