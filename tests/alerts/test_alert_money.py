"""What an alert says about money, from an outage a user would see: the chain on the fake
providers (with their prompt caches), the real recorder and scheduler pass on a virtual clock,
and a Slack stand-in. A fallback to a cheaper backup is no good news: the alert says what the
backups cost against the primary, the prompt cache lost beside the price difference, and the
parts as shown add up to the whole as shown."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from helpers.alert_harness import SlackStandIn, World, config

from engine.core.money import format_usd, read_usd

RULE = {"name": "fallback", "kind": "fallback_rate", "severity": "warning", "threshold": 20,
        "window": "5m", "min_requests": 20}  # fmt: skip
# The primary's cache-hit ratio for 10:00 comes from its successes before: ten healthy minutes.
START = datetime(2026, 11, 23, 9, 50, tzinfo=UTC)
SAID = re.compile(
    r"backups' prices (?P<price>\$[\d.,]+) (?P<way>lower|higher) than the primary's, "
    r"(?P<cache>\$[\d.,]+) of prompt cache lost(?:, (?P<rewarm>\$[\d.,]+) to re-warm it)?: "
    r"(?P<whole>\$[\d.,]+) (?P<all>less|more) in all; (?:nothing wasted|wasted \$[\d.,]+)$"
)
WINDOW = """
    SELECT coalesce(sum(fallback_premium_usd), 0) + coalesce(sum(rewarm_usd), 0),
        coalesce(sum(cache_loss_usd), 0)
    FROM rollup_minute
    WHERE route = 'support' AND bucket >= time_bucket(INTERVAL 1 MINUTE, $since)
        AND bucket <= $now
"""


@pytest.fixture(scope="module")
def fired(tmp_path_factory):
    """The primary overloaded from 10:00, after ten healthy minutes; at the cycle the
    fallback-rate alert fires, the alert as stored and as sent to Slack, and the rollups of
    its window."""
    slack = SlackStandIn()
    hook = {"name": "oncall", "kind": "slack", "url": slack.start()}
    world = World(tmp_path_factory.mktemp("money"), config([hook], [RULE]), per_minute=8,
                  start=START)  # fmt: skip
    try:
        world.minutes(10)
        world.primary_fails("overloaded", minutes=10)
        firing: list[tuple] = []
        while not firing and world.now < START + timedelta(minutes=15):
            world.minutes(1)
            firing = world.query(
                "SELECT summary, cost_usd FROM alerts WHERE rule = 'fallback' AND state = 'firing'"
            )
        [(summary, cost)] = firing
        window = {"since": world.now - timedelta(minutes=5), "now": world.now}
        [(extra, cache_loss)] = world.query(WINDOW, window)
        [(wasted,)] = world.query(
            "SELECT coalesce(sum(wasted_usd), 0) FROM rollup_minute WHERE route = 'support' "
            "AND bucket >= time_bucket(INTERVAL 1 MINUTE, $since) AND bucket <= $now",
            window,
        )
        texts = [d.body["text"] for d in slack.got]
        yield summary, cost, extra, cache_loss, wasted, texts
    finally:
        world.close()
        slack.stop()


def test_a_fallback_to_a_cheaper_backup_says_what_its_prices_and_the_lost_cache_came_to(fired):
    summary, _, extra, cache_loss, _, _ = fired
    assert cache_loss > 0, "the primary's system prompt was cached before the outage"
    said = SAID.search(summary)
    assert said, summary
    assert said["way"] == "lower", "GPT-4.1 mini charges less than Sonnet per token"
    assert "saved" not in summary and "-$" not in summary
    whole = read_usd(said["whole"]) * (-1 if said["all"] == "less" else 1)
    assert said["whole"] == format_usd(abs(whole), _decimals(said["whole"]))
    assert abs(whole - extra) <= _unit(said["whole"]) / 2, (summary, extra)


def test_the_parts_of_what_the_backups_cost_add_up_to_the_whole_as_shown(fired):
    summary, *_ = fired
    said = SAID.search(summary)
    assert said, summary
    price = -read_usd(said["price"]) if said["way"] == "lower" else read_usd(said["price"])
    rewarm = read_usd(said["rewarm"]) if said["rewarm"] else Decimal(0)
    whole = read_usd(said["whole"]) * (-1 if said["all"] == "less" else 1)
    assert price + read_usd(said["cache"]) + rewarm == whole, summary
    decimals = {_decimals(said[part]) for part in ("price", "cache", "whole")}
    assert len(decimals) == 1, f"one precision for the group: {summary}"


def test_the_slack_message_carries_the_summary_and_the_cost_in_the_one_money_format(fired):
    summary, cost, extra, _, wasted, texts = fired
    assert cost == extra + wasted
    [firing] = [t for t in texts if "*FIRING*" in t]
    assert summary in firing
    assert f"Cost so far: {format_usd(cost)}" in firing
    assert not re.search(r"\$-|-\$0\.0+\b(?!\d)|None|nan", firing), firing


def _decimals(shown: str) -> int:
    return len(shown.partition(".")[2])


def _unit(shown: str) -> Decimal:
    return Decimal(1).scaleb(-_decimals(shown))
