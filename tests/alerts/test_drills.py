"""A fault drill end to end on virtual time: the real chain fails the drilled target as an
invalid key would, without calling it; the backup serves; the breaker opens and is restored by
its probe once the drill ends; the scheduler reports the drill, and neither an incident nor a
fallback alert comes of it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from engine.drills import DrillError, end_drill, start_drill

from .harness import PRIMARY, World, config

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
    # 100 % fallback for 5 min, yet no fallback alert; the breaker's alert was held, not sent.
    assert world.query("SELECT kind, silenced FROM alerts") == [("breaker_open", True)]
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
