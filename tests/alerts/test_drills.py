"""A fault drill end to end on virtual time: the real chain fails the drilled target as an
invalid key would, without calling it; the backup serves; the breaker opens and is restored by
its probe once the drill ends; the scheduler reports the drill, and neither an incident nor a
fallback alert comes of it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from helpers.alert_harness import PRIMARY, World, config

from engine.runtime.drills import DrillError, DrillRefused, end_drill, start_drill

TARGET = f"claude/{PRIMARY}"


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path, config([], None))
    yield w
    w.close()


def drill(world: World, minutes: float):
    return world.clock.run(
        start_drill(
            world.sw, "support", TARGET, timedelta(minutes=minutes), by="test", now=world.now
        )
    )


def test_a_drill_sends_the_traffic_to_the_backup_and_is_reported_not_as_an_incident(world):
    world.minutes(3)  # healthy: the primary serves
    calls_before = len(world.transport.calls(PRIMARY))
    started = drill(world, 5)
    world.minutes(5)
    assert len(world.transport.calls(PRIMARY)) == calls_before  # no call reached the target
    world.minutes(3)  # the drill is over: the breaker's probe restores the primary
    assert len(world.transport.calls(PRIMARY)) > calls_before
    assert world.failed_requests == 0

    drill_attempts = world.query(
        "SELECT count(*), any_value(error_class), any_value(http_status) FROM attempts "
        "WHERE fault_kind = 'drill'"
    )
    assert drill_attempts == [(1, "drill_invalid_key", 401)]  # then its breaker held it open
    assert world.query("SELECT count(*) FROM incidents") == [(0,)]
    # 100 % fallback for 5 min and a breaker the drill held open, yet neither is an alert.
    assert world.query("SELECT kind FROM alerts") == []
    (status, raw) = world.query(
        "SELECT status, report FROM drills WHERE drill_id = $id", {"id": started.drill_id}
    )[0]
    assert status == "reported"
    report = json.loads(raw)
    assert report["requests"] == 50 and report["served_by"] == {"gpt/gpt-4.1-mini": 50}
    assert (report["served_by_backups"], report["failed"], report["drill_faults"]) == (50, 0, 1)
    assert report["breaker_opened_after_s"] == pytest.approx(0.0, abs=0.01)
    assert report["restored"] is True and 0 <= report["restored_after_s"] <= 6
    assert report["verdict"] == "passed"
    assert float(report["cost_difference_usd"]) != 0  # the backup's prices, and a cold cache
    (fallbacks, by_drill) = world.query(
        "SELECT sum(answered_by_fallback)::INT, sum(drill_fallbacks)::INT FROM rollup_minute"
    )[0]
    assert fallbacks == by_drill == 50  # every fallback was the drill's, skipped ones included


def test_a_drill_ended_early_restores_the_target_at_once(world):
    started = drill(world, 30)
    world.minutes(2)
    ended = world.clock.run(end_drill(world.sw, started.drill_id, now=world.now))
    assert ended.ended_at == world.now
    calls = len(world.transport.calls(PRIMARY))
    world.minutes(2)
    assert len(world.transport.calls(PRIMARY)) > calls
    assert world.clock.run(world.sw.switches.drilled("support")) == {}


@pytest.mark.parametrize(
    ("route", "target", "minutes", "words"),
    [
        ("billing", TARGET, 5, "unknown route"),
        ("support", "claude/claude-opus-4", 5, "unknown target"),
        ("support", TARGET, 0, "more than 0 s"),
        ("support", TARGET, 600, "at most"),
    ],
)
def test_a_drill_that_cannot_run_says_why(world, route, target, minutes, words):
    with pytest.raises(DrillError, match=words):
        world.clock.run(
            start_drill(world.sw, route, target, timedelta(minutes=minutes), by="t", now=world.now)
        )
    assert world.clock.run(world.sw.switches.drilled("support")) == {}


BACKUP = "gpt/gpt-4.1-mini"


def fail_one_request(world: World, backup_fault: str) -> None:
    """The next request fails everywhere: the primary answers 529 twice (its try and its
    retry), the backup `backup_fault` once."""
    world.transport.script(PRIMARY, ["529", "529"])
    world.transport.script("gpt-4.1-mini", [backup_fault])


def test_a_drill_ends_itself_at_the_first_request_that_fails_and_the_target_probes_at_once(
    world,
):
    world.minutes(3)
    started = drill(world, 30)
    world.transport.script("gpt-4.1-mini", ["500"])  # the backup fails the next request
    world.minutes(2)

    assert world.failed_requests == 1, "one request failed, then the primary served again"
    assert world.clock.run(world.sw.switches.drilled("support")) == {}
    [(request_id,)] = world.query("SELECT request_id FROM attempts WHERE decision = 'give_up'")
    rows = world.query(
        "SELECT target, breaker_state, served FROM attempts WHERE started_at > "
        "(SELECT max(started_at) FROM attempts WHERE request_id = $id) "
        "ORDER BY started_at LIMIT 1",
        {"id": request_id},
    )
    assert rows == [(TARGET, "half_open", True)], "the next request probed the drilled target"
    (ended_at, reason, aborted_by, status, raw) = world.query(
        "SELECT ended_at, ended_reason, aborted_by_request, status, report FROM drills "
        "WHERE drill_id = $id",
        {"id": started.drill_id},
    )[0]
    assert reason == f"aborted: request {request_id} failed with every provider unavailable"
    assert aborted_by == request_id and ended_at < started.ends_at
    assert status == "reported"
    report = json.loads(raw)
    assert (report["verdict"], report["aborted"], report["aborted_by_request"]) == (
        "failed", True, request_id
    )  # fmt: skip
    assert (report["requests"], report["failed"], report["served_by_backups"]) == (1, 1, 0)
    assert sum(report["served_by"].values()) + report["failed"] == report["requests"]
    assert report["why"] == [
        f"aborted after request {request_id} failed: every provider unavailable",
        "1 request failed with every provider unavailable: the drill caused it",
    ]
    assert report["summary"].startswith("; ".join(report["why"]) + ". ")
    assert report["restored"] is True


def test_a_drill_is_refused_while_the_only_backup_has_its_breaker_open_unless_forced(world):
    world.minutes(1)
    fail_one_request(world, "401")  # the backup's key: its breaker opens (account)
    world.minutes(1)
    with pytest.raises(DrillRefused) as refused:
        drill(world, 5)
    assert f"backup {BACKUP}: breaker open (account)" in str(refused.value)
    assert "--force" in str(refused.value)
    assert world.clock.run(world.sw.switches.drilled("support")) == {}
    assert not list(world.paths.drills_inbox.glob("*.json")), "a refused drill left no record"

    forced = world.clock.run(
        start_drill(world.sw, "support", TARGET, timedelta(minutes=5), by="t", now=world.now,
                    force=True)
    )  # fmt: skip
    assert forced.forced and f"backup {BACKUP}: breaker open (account)" in forced.preflight
    world.minutes(2)  # the first request fails (the backup is skipped): the drill ends itself
    report = json.loads(world.query("SELECT report FROM drills")[0][0])
    assert report["aborted"] is True and report["forced"] is True
    assert report["why"][-1] == (
        "started with --force although no other target was healthy: " + forced.preflight
    )


def test_a_backup_fault_stops_a_drill_for_five_minutes(world):
    world.minutes(1)
    fail_one_request(world, "500")  # one provider fault: the backup's breaker stays closed
    world.minutes(1)
    with pytest.raises(DrillRefused, match=rf"backup {BACKUP}: a provider fault \(\w+\) \d+ s ago"):
        drill(world, 5)
    world.minutes(4)  # the fault came a moment into its minute: not five minutes old yet
    with pytest.raises(DrillRefused):
        drill(world, 5)
    world.minutes(1)
    assert drill(world, 5).preflight is None, "the fault is forgotten: nothing found"
