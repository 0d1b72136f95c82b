"""Alertmanager receivers from what on-call sees: an outage through the fake providers, the real
scheduler pass on a virtual clock, the outbox, and local stand-ins that take only Alertmanager's
exact shapes (tests/helpers/pager_receivers.py): the webhook body it posts to its own receivers
(format "webhook"), and the alerts its `POST /api/v2/alerts` ingests (format "api")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.alert_harness import PRIMARY, World, config
from helpers.pager_receivers import PagerStandIn

from engine.config import ConfigError, parse_config

FALLBACK_RULE = {
    "name": "fallback", "kind": "fallback_rate", "severity": "critical",
    "threshold": 20, "window": "5m", "min_requests": 20,
}  # fmt: skip
LABELS = {"alertname": "fallback", "severity": "critical", "subject": "support",
          "kind": "fallback_rate", "source": "switchover"}  # fmt: skip
ZERO_TIME = "0001-01-01T00:00:00Z"
RESOLVE_TIMEOUT = timedelta(minutes=5)  # Alertmanager's default
SONNET, HAIKU = f"claude/{PRIMARY}", "claude/claude-haiku-4-5"
TWO_ROUTES = {"support": [SONNET, "gpt/gpt-4.1-mini"], "summarize": [HAIKU, "gpt/gpt-4.1"]}


@pytest.fixture
def stand_ins():
    started: list[PagerStandIn] = []

    def start(fmt: str) -> PagerStandIn:
        stand_in = PagerStandIn(fmt)
        stand_in.url = stand_in.start()
        started.append(stand_in)
        return stand_in

    yield start
    for stand_in in started:
        stand_in.stop()


@pytest.fixture
def make_world(tmp_path):
    worlds: list[World] = []

    def make(*stand_ins: PagerStandIn, rules=(FALLBACK_RULE,), routes=None) -> World:
        receivers = [{"name": f"am-{s.kind}", "kind": "alertmanager", "url": s.url,
                      "format": s.kind} for s in stand_ins]  # fmt: skip
        data = config(receivers, list(rules), routes=routes,
                      keys=("ANTHROPIC_API_KEY", "OPENAI_API_KEY"))  # fmt: skip
        worlds.append(World(tmp_path, data, routes=tuple(routes or ("support",))))
        return worlds[-1]

    yield make
    for world in worlds:
        world.close()


def _iso(when) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _minute_by_minute(world: World, stand_in: PagerStandIn, minutes: int) -> list[tuple]:
    """Run `minutes`; (virtual time, alert posted) for each post `stand_in` took."""
    seen = []
    for _ in range(minutes):
        before = len(stand_in.got)
        world.minutes(1)
        seen += [(world.now, r.body) for r in stand_in.got[before:] if r.status < 300]
    return seen


def test_a_webhook_reader_gets_firing_then_resolved_in_alertmanagers_own_body(
    make_world, stand_ins
):
    webhook = stand_ins("webhook")
    world = make_world(webhook)
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(17)

    assert [r.status for r in webhook.got] == [200, 200], [r.body for r in webhook.got]
    firing, resolved = webhook.accepted()
    [(alert_id, fired_at, resolved_at)] = world.query(
        "SELECT alert_id, fired_at, resolved_at FROM alerts"
    )
    for body, status in ((firing, "firing"), (resolved, "resolved")):
        assert {k: v for k, v in body.items() if k != "alerts"} == {
            "version": "4",
            "groupKey": '{}:{alertname="fallback"}',
            "truncatedAlerts": 0,
            "status": status,
            "receiver": "am-webhook",
            "groupLabels": {"alertname": "fallback"},
            "commonLabels": LABELS,
            "commonAnnotations": body["alerts"][0]["annotations"],
            "externalURL": "",
        }
    [fa], [ra] = firing["alerts"], resolved["alerts"]
    assert (fa["status"], fa["endsAt"]) == ("firing", ZERO_TIME)
    assert (ra["status"], ra["endsAt"]) == ("resolved", _iso(resolved_at))
    assert fa["labels"] == ra["labels"] == LABELS
    assert fa["startsAt"] == ra["startsAt"] == _iso(fired_at)
    assert fa["fingerprint"] == ra["fingerprint"], "one alert, one fingerprint"
    assert "answered by a backup" in fa["annotations"]["summary"]
    assert fa["annotations"]["description"] == f"fallback on support ({alert_id})"


def test_the_teams_alertmanager_keeps_an_alert_firing_through_the_outage_then_resolves_it(
    make_world, stand_ins
):
    """Alertmanager resolves an alert it has not heard of for its resolve_timeout: what still
    fires is posted again every minute, so it stays firing there until the resolve."""
    api = stand_ins("api")
    world = make_world(api)
    world.minutes(5)
    world.primary_fails("overloaded", minutes=10)
    posts = _minute_by_minute(world, api, 25)

    [(fired_at, resolved_at)] = world.query("SELECT fired_at, resolved_at FROM alerts")
    assert resolved_at - fired_at > RESOLVE_TIMEOUT, "the outage outlasts a resolve_timeout"
    assert {r.path for r in api.got} == {"/api/v2/alerts"}
    alerts = [(when, a) for when, body in posts for a in body]
    assert all(a["labels"] == LABELS and a["startsAt"] == _iso(fired_at) for _, a in alerts)
    firing = [when for when, a in alerts if "endsAt" not in a]
    [(last, resolve)] = [(when, a) for when, a in alerts if "endsAt" in a]
    assert resolve["endsAt"] == _iso(resolved_at) and last == alerts[-1][0], "the resolve ends it"
    assert firing[0] <= fired_at + timedelta(minutes=1) and firing[-1] < last
    gaps = [b - a for a, b in zip([firing[0], *firing], [*firing, last], strict=True)]
    assert max(gaps) <= timedelta(minutes=2) < RESOLVE_TIMEOUT, gaps
    before = len(api.got)
    world.minutes(3)
    assert len(api.got) == before, "nothing is posted again once resolved"


def test_targets_refused_with_one_key_are_one_webhook_group_and_each_its_own_api_alert(
    make_world, stand_ins
):
    webhook, api = stand_ins("webhook"), stand_ins("api")
    world = make_world(webhook, api, rules=[{"name": "credential", "kind": "credential"}],
                       routes=TWO_ROUTES)  # fmt: skip
    world.minutes(1)
    world.fails(PRIMARY, "auth", minutes=1)
    world.fails("claude-haiku-4-5", "auth", minutes=6)
    world.minutes(1)

    subjects = [f"{HAIKU} (ANTHROPIC_API_KEY)", f"{SONNET} (ANTHROPIC_API_KEY)"]
    [group] = webhook.accepted()
    assert [a["labels"]["subject"] for a in group["alerts"]] == subjects
    assert len({a["fingerprint"] for a in group["alerts"]}) == 2
    assert group["commonLabels"] == {"alertname": "credential", "severity": "critical",
                                     "kind": "credential", "source": "switchover"}  # fmt: skip
    assert [[a["labels"]["subject"] for a in body] for body in api.accepted()] == [
        [s] for s in subjects
    ], "one alert a post: each re-sent and resolved on its own"

    world.minutes(12)  # Sonnet's key works first, then Haiku's
    resolves = [body["alerts"] for body in webhook.accepted()[1:]]
    assert [[a["labels"]["subject"] for a in alerts] for alerts in resolves] == [
        [subjects[1]], [subjects[0]],
    ]  # fmt: skip
    fingerprints = {a["labels"]["subject"]: a["fingerprint"] for a in group["alerts"]}
    assert all(a["fingerprint"] == fingerprints[a["labels"]["subject"]]
               for alerts in resolves for a in alerts)  # fmt: skip
    ended = [a["labels"]["subject"] for body in api.accepted() for a in body if "endsAt" in a]
    assert ended == [subjects[1], subjects[0]]


def test_an_alertmanager_down_with_500_gets_the_notification_once_it_recovers(
    make_world, stand_ins
):
    webhook = stand_ins("webhook")
    webhook.statuses = [500, 503]
    world = make_world(webhook)
    world.minutes(5)
    world.primary_fails("overloaded", minutes=5)
    world.minutes(17)

    assert [r.status for r in webhook.got] == [500, 503, 200, 200]
    assert webhook.got[0].body == webhook.got[2].body, "a retry sends the same notification"
    assert [b["status"] for b in webhook.accepted()] == ["firing", "resolved"]


def _parse(receiver: dict):
    return parse_config(config([receiver], []))


def test_an_alertmanager_receiver_posts_its_webhook_body_unless_told_api():
    [plain] = _parse({"name": "a", "kind": "alertmanager", "url": "http://am"}).alerting.receivers
    [api] = _parse({"name": "a", "kind": "alertmanager", "url": "http://am:9093/api/v2/alerts",
                    "format": "api"}).alerting.receivers  # fmt: skip
    assert (plain.format, api.format) == ("webhook", "api")


@pytest.mark.parametrize(
    ("receiver", "message"),
    [
        ({"name": "a", "kind": "alertmanager", "url": "http://x", "format": "v1"},
         r"receivers\[0\]\.format: only for kind \"alertmanager\": \"webhook\""),
        ({"name": "s", "kind": "slack", "url": "http://x", "format": "api"},
         r"receivers\[0\]\.format: only for kind"),
        ({"name": "a", "kind": "alertmanager"},
         r"receivers\[0\]: give either url or url_env"),
        ({"name": "a", "kind": "alertmanager", "url": "http://x", "routing_key_env": "PD"},
         r"receivers\[0\]\.routing_key_env: only a pagerduty receiver"),
    ],
)  # fmt: skip
def test_an_alertmanager_receiver_misconfigured_is_told_by_its_key(receiver, message):
    with pytest.raises(ConfigError, match=message):
        _parse(receiver)
