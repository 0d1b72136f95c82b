"""Health scores and target switches in Redis: every process (here, every client) reads the
same numbers and switches, and an unreachable Redis costs no request.

Time is a `VirtualClock` moved by hand; nothing sleeps except a real redis-server restarting.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from helpers.redis_server import RedisServer, free_port, redis_binary
from redis.asyncio import Redis
from redis.exceptions import RedisError

from engine.core.attempt import Attempt
from engine.core.clock import VirtualClock
from engine.state.health_scores_redis import RedisHealthScores
from engine.state.switches_redis import RedisTargetSwitches

A, B, C = "gpt/a", "gpt/b", "gpt/c"
WINDOW = 300.0
Scores = Callable[..., RedisHealthScores]
Switches = Callable[..., RedisTargetSwitches]


@pytest.fixture
async def scores() -> AsyncIterator[Scores]:
    """`scores(url, clock)`: a RedisHealthScores on a connection of its own, as each gateway
    process has."""
    made: list[RedisHealthScores] = []

    def build(url: str, clock: VirtualClock, **options: Any) -> RedisHealthScores:
        made.append(RedisHealthScores(Redis.from_url(url), clock, WINDOW, **options))
        return made[-1]

    yield build
    for each in made:
        await each.aclose()


@pytest.fixture
async def switches() -> AsyncIterator[Switches]:
    made: list[RedisTargetSwitches] = []

    def build(url: str, clock: VirtualClock, **options: Any) -> RedisTargetSwitches:
        redis = Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        made.append(RedisTargetSwitches(redis, now=clock.wall, monotonic=clock.now, **options))
        return made[-1]

    yield build
    for each in made:
        await each.aclose()


def attempt(
    target: str, outcome: str = "success", decision: str = "served", fault_kind: str | None = None
) -> Attempt:
    return Attempt(
        request_id="r1", attempt_number=1, route="chat", target=target, provider="gpt",
        provider_kind="openai", model=target.partition("/")[2], key_kind="managed",
        process_id=1, started_at=VirtualClock().wall(), latency_ms=10.0, ttft_ms=None,
        streamed=False, outcome=outcome, decision=decision,  # type: ignore[arg-type]
        error_class=None, fault_kind=fault_kind, http_status=None, error_type=None,
        error_code=None, error_message=None, retry_after_s=None, breaker_state="closed",
        served=outcome == "success", fallback_depth=0,
    )  # fmt: skip


def ok(target: str) -> Attempt:
    return attempt(target)


def failed(target: str, fault_kind: str = "provider") -> Attempt:
    return attempt(target, "error", "fall_back", fault_kind)


# --- health scores ---------------------------------------------------------------------------


async def test_every_process_reads_the_scores_of_all(redis_url, scores):
    clock = VirtualClock()
    first, second = scores(redis_url, clock), scores(redis_url, clock)
    for a in [ok(A), ok(A), ok(A), failed(A)]:
        first.observe(a)
    second.observe(failed(B, "account"))
    second.observe(attempt(B, "error", "fail_fast", "request"))
    await first.flush()
    await second.flush()
    expected = {A: 0.75, B: 0.0, C: 1.0}
    assert await first.scores([A, B, C]) == expected
    assert await second.scores([A, B, C]) == expected


async def test_shared_outcomes_leave_the_window_and_their_keys_expire(redis_url, scores):
    clock = VirtualClock()
    writer, reader = scores(redis_url, clock), scores(redis_url, clock)
    writer.observe(failed(A))
    await writer.flush()
    assert await reader.scores([A]) == {A: 0.0}
    ttls = [await writer.redis.ttl(k) for k in await writer.redis.keys("switchover:health:*")]
    assert len(ttls) == 1 and WINDOW < ttls[0] <= WINDOW * 1.25
    clock.advance(WINDOW)
    assert await reader.scores([A]) == {A: 1.0}


async def test_a_read_is_cached_for_a_second(redis_url, scores):
    """At most one Redis read per route a second and process, not one per request."""
    clock = VirtualClock()
    writer, reader = scores(redis_url, clock), scores(redis_url, clock)
    assert await reader.scores([A]) == {A: 1.0}
    writer.observe(failed(A))
    await writer.flush()
    assert await reader.scores([A]) == {A: 1.0}
    clock.advance(1.0)
    assert await reader.scores([A]) == {A: 0.0}


async def test_closing_writes_what_was_queued(redis_url, scores):
    clock = VirtualClock()
    writer, reader = scores(redis_url, clock), scores(redis_url, clock)
    writer.observe(failed(A))
    await writer.aclose()
    assert await reader.scores([A]) == {A: 0.0}


async def test_an_unreachable_redis_falls_back_to_memory_and_says_so_once(scores, caplog):
    clock = VirtualClock()
    lonely = scores(f"redis://127.0.0.1:{free_port()}/0", clock)
    with caplog.at_level(logging.WARNING, logger="switchover.ordering"):
        lonely.observe(failed(A))
        lonely.observe(ok(A))
        await lonely.flush()  # fails quietly
        assert await lonely.scores([A, B]) == {A: 0.5, B: 1.0}
        lonely.observe(failed(A))
        await lonely.flush()
        assert await lonely.scores([A]) == {A: pytest.approx(1 / 3)}
    assert not lonely.shared
    assert lonely.fallbacks == 2
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, "one line per outage, not one per call"
    assert "unreachable" in warnings[0] and "own attempts" in warnings[0]


async def test_scores_are_shared_again_once_redis_answers(scores, caplog):
    server = RedisServer(redis_binary()).start()
    try:
        clock = VirtualClock()
        one = scores(server.url, clock, retry_s=5.0)
        server.stop()
        one.observe(failed(A))
        await one.flush()
        assert not one.shared
        server.start()
        clock.advance(4.9)
        assert await one.scores([A]) == {A: 0.0}, "from memory: Redis is not retried yet"
        assert not one.shared
        clock.advance(0.1)
        with caplog.at_level(logging.WARNING, logger="switchover.ordering"):
            assert await one.scores([A]) == {A: 1.0}, "the restarted Redis has no data"
        assert one.shared
        assert "answers again" in caplog.text
    finally:
        server.stop()


# --- target switches -------------------------------------------------------------------------


async def test_switches_are_shared_by_every_process(redis_url, switches):
    clock = VirtualClock()
    admin, worker = switches(redis_url, clock), switches(redis_url, clock)
    await admin.disable(A, reason="incident 42", by="ana")
    await admin.disable(B, route="chat")
    assert await worker.disabled("chat") == {A, B}
    assert await worker.disabled("batch") == {A}
    await worker.enable(A)
    assert await admin.disabled("batch") == frozenset()
    assert await admin.entries() == [
        {
            "target": B,
            "route": "chat",
            "reason": "",
            "by": "",
            "since": clock.wall().isoformat(),
            "kind": "disabled",
            "until": None,
            "drill_id": None,
        }
    ]


async def test_a_switch_reaches_other_processes_within_a_second(redis_url, switches):
    clock = VirtualClock()
    admin, worker = switches(redis_url, clock), switches(redis_url, clock)
    assert await worker.disabled("chat") == frozenset()
    await admin.disable(A)
    assert await admin.disabled("chat") == {A}, "the writer sees its change at once"
    assert await worker.disabled("chat") == frozenset(), "cached"
    clock.advance(1.0)
    assert await worker.disabled("chat") == {A}


async def test_while_redis_is_unreachable_the_last_switches_stay_in_force(switches, caplog):
    server = RedisServer(redis_binary()).start()
    try:
        clock = VirtualClock()
        worker = switches(server.url, clock)
        await worker.disable(A)
        assert await worker.disabled("chat") == {A}
        server.stop()
        clock.advance(1.0)
        with caplog.at_level(logging.WARNING, logger="switchover.ordering"):
            assert await worker.disabled("chat") == {A}
            clock.advance(5.0)
            assert await worker.disabled("chat") == {A}
        assert len(caplog.records) == 1 and "unreachable" in caplog.text
        with pytest.raises(RedisError):  # an operator's switch that did not take must say so
            await worker.disable(B)
    finally:
        server.stop()


async def test_switches_without_any_redis_disable_nothing(switches):
    clock = VirtualClock()
    worker = switches(f"redis://127.0.0.1:{free_port()}/0", clock)
    assert await worker.disabled("chat") == frozenset()
