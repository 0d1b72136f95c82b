"""What a fault drill makes fail for real is alerted and counted, never silenced, and said to be
the drill's; the drill itself never joins, starts or stretches an incident. The real chain on
the fake providers, the real recorder and scheduler pass, a virtual clock, a local receiver."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.alert_harness import SlackStandIn, World, config

from engine.alerts.incidents import IncidentPolicy
from engine.runtime.drills import start_drill

MINI, HAIKU = "gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"
SETTLE = IncidentPolicy().settle


@pytest.fixture(scope="module")
def drill_outage(tmp_path_factory):
    """classify's primary (GPT-4.1 mini) is rate limited for 3 minutes: a real incident. Right
    after, while that incident settles, a drill holds it down on classify, and its backup
    (Haiku, also summarize's primary) answers 529 for 3 minutes: the drill makes classify's
    requests fail (and ends itself at the first)."""
    slack = SlackStandIn()
    url = slack.start()
    hook = {"name": "oncall", "kind": "json", "url": url}
    routes = {"classify": [MINI, HAIKU], "summarize": [HAIKU, "gpt/gpt-4.1"]}
    world = World(tmp_path_factory.mktemp("drill-outage"), config([hook], None, routes=routes),
                  routes=("classify", "summarize"), per_minute=12)  # fmt: skip
    try:
        world.minutes(3)
        world.fails("gpt-4.1-mini", "rate_limit:retry_after=20", minutes=3)
        world.minutes(3)
        started = world.clock.run(
            start_drill(world.sw, "classify", MINI, timedelta(minutes=5), by="test", now=world.now)
        )
        world.fails("claude-haiku-4-5", "overloaded", minutes=3)
        world.minutes(12)
        yield world, started, slack
    finally:
        world.close()
        slack.stop()


def test_a_real_failure_during_a_drill_fires_unsilenced_and_says_during_drill(drill_outage):
    world, started, slack = drill_outage
    [(silenced, notified, summary)] = world.query(
        "SELECT silenced, notified, summary FROM alerts WHERE rule = 'all-unavailable' "
        "AND subject = 'classify'"
    )
    assert (silenced, notified) == (False, True)
    assert f"during drill {started.drill_id} ({MINI} held down on route classify" in summary
    assert ("firing", "all-unavailable", "classify") in slack.delivered()
    [(failed,)] = world.query(
        "SELECT sum(unavailable)::INT FROM rollup_minute WHERE route = 'classify'"
    )
    assert failed > 0, "the failures the drill caused are counted"


def test_the_drill_never_stretches_the_real_incident_it_followed(drill_outage):
    world, started, _ = drill_outage
    [(last_429,)] = world.query("SELECT max(started_at) FROM attempts WHERE http_status = 429")
    assert last_429 < started.started_at < last_429 + SETTLE
    [(family, ended_at, during)] = world.query(
        "SELECT family, ended_at, during_drills FROM incidents WHERE target = $t", {"t": MINI}
    )
    assert (family, ended_at) == ("rate_limit", last_429 + SETTLE)
    assert during == started.drill_id, "its route was drilled while it settled"


def test_the_drills_attempts_and_fallbacks_join_no_incident(drill_outage):
    world, started, _ = drill_outage
    [(drill_attempts,)] = world.query("SELECT count(*) FROM attempts WHERE fault_kind = 'drill'")
    assert drill_attempts >= 1
    [(lo, affected, by_fallback, failed)] = world.query(
        "SELECT started_at, requests_affected, answered_by_fallback, failed FROM incidents "
        "WHERE target = $t",
        {"t": MINI},
    )
    # Its requests are classify's that it did not answer, from its start to the drill's.
    [(expected,)] = world.query(
        """
        SELECT count(*) FROM (
            SELECT min(started_at) AS first_at, arg_min(route, attempt_number) AS route,
                coalesce(bool_or(served AND outcome = 'success' AND target = $t), false) AS ok
            FROM attempts GROUP BY request_id
        ) WHERE route = 'classify' AND NOT ok AND first_at >= $lo AND first_at < $drill
        """,
        {"t": MINI, "lo": lo, "drill": started.started_at},
    )
    assert affected == by_fallback + failed == expected > 0
    families = world.query("SELECT family FROM incidents WHERE target = $t", {"t": MINI})
    assert families == [("rate_limit",)], "the drill's invalid key is no account incident"


def test_the_target_the_drill_exposed_has_its_own_incident_marked_with_the_drill(drill_outage):
    world, started, _ = drill_outage
    [(family, routes, failed, during)] = world.query(
        "SELECT family, routes, failed, during_drills FROM incidents WHERE target = $t",
        {"t": HAIKU},
    )
    assert (family, routes) == ("availability", "classify, summarize")
    assert failed > 0 and during == started.drill_id


def test_neither_the_drills_breaker_nor_its_invalid_key_is_an_alert(drill_outage):
    world, _, _ = drill_outage
    about_mini = world.query("SELECT rule FROM alerts WHERE subject LIKE $t || '%'", {"t": MINI})
    assert about_mini == []


def test_a_failure_after_a_drill_ended_is_said_to_come_after_it_not_during(tmp_path):
    """A one-minute drill of classify's primary passes (its backup answers); two minutes after
    its end both targets answer 529: the all-unavailable alert names the drill that ran in its
    window as "after drill", since nothing failed while it ran."""
    routes = {"classify": [MINI, HAIKU]}
    world = World(tmp_path, config([], None, routes=routes), routes=("classify",), per_minute=12)
    try:
        world.minutes(2)
        started = world.clock.run(
            start_drill(world.sw, "classify", MINI, timedelta(minutes=1), by="test", now=world.now)
        )
        world.minutes(3)
        world.fails("gpt-4.1-mini", "overloaded", minutes=2)
        world.fails("claude-haiku-4-5", "overloaded", minutes=2)
        world.minutes(2)
        [(summary,)] = world.query(
            "SELECT summary FROM alerts WHERE rule = 'all-unavailable' AND subject = 'classify'"
        )
    finally:
        world.close()
    assert f"; after drill {started.drill_id} ({MINI} held down on route classify" in summary
    assert "during drill" not in summary
