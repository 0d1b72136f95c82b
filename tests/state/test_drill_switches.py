"""A drill's pre-flight travels with its switch, in both stores (the host's file and Redis):
whichever process ends the drill reads what the one that started it found."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from engine.core.clock import VirtualClock
from engine.state.switches import Switches
from engine.state.switches_file import TargetSwitches
from engine.state.switches_redis import RedisTargetSwitches

T, ROUTE = "gpt/gpt-4.1-mini", "classify"
FOUND = "backup claude/claude-haiku-4-5: breaker open (account)"


@pytest.fixture(params=["file", "redis"])
async def store(request, tmp_path) -> AsyncIterator[Callable[[], Switches]]:
    """`store()`: another process's view of the same switches."""
    clock = VirtualClock()
    made: list[RedisTargetSwitches] = []

    def build() -> Switches:
        if request.param == "file":
            return TargetSwitches(tmp_path / "targets.json", now=clock.wall)
        url = request.getfixturevalue("redis_url")
        made.append(RedisTargetSwitches(Redis.from_url(url), now=clock.wall, monotonic=clock.now))
        return made[-1]

    yield build
    for each in made:
        await each.aclose()


async def test_a_drills_pre_flight_is_read_back_by_another_process(store):
    starter, ender = store(), store()
    until = VirtualClock().wall() + timedelta(minutes=5)
    await starter.start_drill(T, route=ROUTE, until=until, drill_id="d1", by="ops",
                              forced=True, preflight=FOUND)  # fmt: skip
    await starter.disable("claude/claude-haiku-4-5", route=ROUTE, reason="key rotation")
    entries = {e["kind"]: e for e in await ender.entries()}
    assert (entries["drill"]["forced"], entries["drill"]["preflight"]) == (True, FOUND)
    assert "forced" not in entries["disabled"] and "preflight" not in entries["disabled"]


async def test_a_drill_started_without_a_pre_flight_note_reads_as_not_forced(store):
    until = VirtualClock().wall() + timedelta(minutes=5)
    await store().start_drill(T, route=ROUTE, until=until, drill_id="d2")
    [entry] = await store().entries()
    assert (entry["forced"], entry["preflight"]) == (False, None)
