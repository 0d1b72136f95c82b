"""What the Redis store adds to the contract: several processes (here, several clients, each a
store of its own) share one breaker and one clock, and an unreachable Redis costs no request.

Time is a `VirtualClock` moved by hand; nothing sleeps except a real redis-server restarting.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from helpers.redis_server import RedisServer, free_port, redis_binary
from redis.asyncio import Redis

from engine.config import parse_config
from engine.core.clock import VirtualClock
from engine.core.errors import ConfigError
from engine.gateway.app import create_app
from engine.runtime.switchover import Switchover
from engine.state.breaker import Admission, BreakerPolicy, ProviderFailure, RateLimit, Success
from engine.state.breaker_redis import RedisBreakerStore
from simulations.fakes import FakeTransport

KEY = "gpt/primary"
POLICY = BreakerPolicy(failures=3, cooldown_s=2.0, probe_lease_s=5.0)
ENV = {"K": "test-key"}
Stores = Callable[..., list[RedisBreakerStore]]


@pytest.fixture
async def stores() -> AsyncIterator[Stores]:
    """`stores(url, n)`: n stores on their own connections, as n gateway processes have."""
    made: list[RedisBreakerStore] = []

    def build(url: str, n: int = 4, **options: object) -> list[RedisBreakerStore]:
        new = [RedisBreakerStore(Redis.from_url(url), POLICY, **options) for _ in range(n)]  # type: ignore[arg-type]
        made.extend(new)
        return new

    yield build
    for store in made:
        await store.aclose()


async def test_failures_from_every_process_count_towards_one_breaker(redis_url, stores):
    clock = VirtualClock()
    workers = stores(redis_url)
    for worker in workers[: POLICY.failures]:  # one failure each, in different processes
        assert (await worker.admit(KEY, clock.now()))[0] is Admission.ALLOW
        await worker.record(KEY, ProviderFailure(), clock.now())
    for worker in workers:
        assert (await worker.admit(KEY, clock.now())) == (Admission.REJECT_OPEN, "open")


async def test_exactly_one_process_gets_the_probe_and_its_success_closes_it_for_all(
    redis_url, stores
):
    clock = VirtualClock()
    workers = stores(redis_url)
    for _ in range(POLICY.failures):
        await workers[0].record(KEY, ProviderFailure(), clock.now())
    clock.advance(POLICY.cooldown_s)
    tries = [w.admit(KEY, clock.now()) for w in workers for _ in range(25)]
    admissions = [a for a, _ in await asyncio.gather(*tries)]
    assert admissions.count(Admission.PROBE) == 1
    assert admissions.count(Admission.REJECT_PROBING) == len(tries) - 1
    await workers[3].record(KEY, Success(), clock.now())
    for worker in workers:
        assert (await worker.admit(KEY, clock.now())) == (Admission.ALLOW, "closed")


async def test_a_rate_limit_cools_the_target_for_every_process(redis_url, stores):
    clock = VirtualClock()
    first, second = stores(redis_url, 2)
    await first.record(KEY, RateLimit(4.0), clock.now())
    assert (await second.admit(KEY, clock.now()))[0] is Admission.REJECT_COOLING
    clock.advance(4.0)
    assert (await second.admit(KEY, clock.now()))[0] is Admission.ALLOW


async def test_processes_whose_clocks_differ_agree_through_wall_time(redis_url, stores):
    """Each process maps its own monotonic clock to wall time; states come back in its own."""
    early, late = VirtualClock(start=50.0), VirtualClock(start=90_000.0)
    wall = 1_750_000_000.0
    (a,) = stores(redis_url, 1, clock_offset_s=wall - early.now())
    (b,) = stores(redis_url, 1, clock_offset_s=wall - late.now())
    for _ in range(POLICY.failures):
        await a.record(KEY, ProviderFailure(), early.now())
    assert (await b.admit(KEY, late.now()))[0] is Admission.REJECT_OPEN
    assert (await b.snapshot(KEY)).open_until == pytest.approx(late.now() + POLICY.cooldown_s)
    assert (await a.snapshot_all())[KEY].open_until == pytest.approx(50.0 + POLICY.cooldown_s)
    early.advance(POLICY.cooldown_s)
    late.advance(POLICY.cooldown_s)
    assert (await b.admit(KEY, late.now()))[0] is Admission.PROBE
    assert (await a.admit(KEY, early.now()))[0] is Admission.REJECT_PROBING


async def test_an_unreachable_redis_falls_back_to_memory_and_says_so(stores, caplog):
    clock = VirtualClock()
    (store,) = stores(f"redis://127.0.0.1:{free_port()}/0", 1)
    with caplog.at_level(logging.WARNING, logger="switchover.breaker"):
        assert (await store.admit(KEY, clock.now()))[0] is Admission.ALLOW
        for _ in range(POLICY.failures):
            await store.record(KEY, ProviderFailure(), clock.now())
        assert (await store.admit(KEY, clock.now()))[0] is Admission.REJECT_OPEN  # in memory
        assert (await store.snapshot(KEY)).status == "open"
    assert not store.shared
    assert store.fallbacks == 6
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, "one line per outage, not one per call"
    assert "unreachable" in warnings[0] and "memory" in warnings[0]


async def test_a_returning_redis_is_shared_again_after_the_retry_interval(stores, caplog):
    server = RedisServer(redis_binary()).start()
    try:
        clock = VirtualClock()
        (store,) = stores(server.url, 1, retry_s=5.0)
        await store.record(KEY, ProviderFailure(), clock.now())
        server.stop()
        assert (await store.admit(KEY, clock.now()))[0] is Admission.ALLOW
        assert not store.shared
        server.start()
        clock.advance(4.9)
        await store.admit(KEY, clock.now())
        assert not store.shared, "Redis is not retried on every call"
        clock.advance(0.1)
        with caplog.at_level(logging.WARNING, logger="switchover.breaker"):
            await store.admit(KEY, clock.now())
        assert store.shared
        assert "answers again" in caplog.text
        # Redis was flushed by the restart (no persistence): the shared state starts afresh.
        assert (await store.snapshot(KEY)).consecutive_failures == 0
    finally:
        server.stop()


def _config(redis_url: str) -> dict[str, object]:
    return {
        "providers": {"gpt": {"kind": "openai", "base_url": "http://fake/v1", "api_key_env": "K"}},
        "routes": {"support": {"targets": ["gpt/primary", "gpt/backup"]}},
        "state": {"redis_url": redis_url},
    }


async def test_a_gateway_whose_redis_is_down_answers_and_reports_the_fallback():
    config = parse_config(_config(f"redis://127.0.0.1:{free_port()}/0"))
    sw = Switchover(config, transport=FakeTransport(), environ=ENV)
    assert isinstance(sw.breakers, RedisBreakerStore)
    app = create_app(sw)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as gw:
        body = {"model": "support", "messages": [{"role": "user", "content": "hi"}]}
        answer = await gw.post("/v1/chat/completions", json=body)
        status = (await gw.get("/v1/status")).json()
        metrics = (await gw.get("/metrics")).text
    await sw.aclose()
    assert answer.status_code == 200
    assert status["breakers_shared"] is False
    assert "switchover_breaker_store_shared 0.0" in metrics
    fallbacks = [ln for ln in metrics.splitlines() if ln.startswith("switchover_breaker_store_fa")]
    assert fallbacks and float(fallbacks[0].split()[-1]) >= 1


async def test_a_gateway_with_redis_reports_its_breakers_shared(redis_url):
    sw = Switchover(parse_config(_config(redis_url)), transport=FakeTransport(), environ=ENV)
    app = create_app(sw)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://gw") as gw:
        status = (await gw.get("/v1/status")).json()
        metrics = (await gw.get("/metrics")).text
    await sw.aclose()
    assert status["breakers_shared"] is True
    assert "switchover_breaker_store_shared 1.0" in metrics


@pytest.mark.parametrize(
    "url", ["http://localhost:6379", "localhost:6379", 6379, "redis//localhost"]
)
def test_state_redis_url_must_be_a_redis_url(url: object):
    with pytest.raises(ConfigError, match=r"^switchover.toml: state.redis_url: must be a redis"):
        parse_config(_config(url))  # type: ignore[arg-type]


def test_without_state_the_breakers_stay_in_memory():
    data = _config("redis://localhost")
    del data["state"]
    assert parse_config(data).state.redis_url is None


async def test_an_unreadable_stored_state_counts_as_closed_and_is_rewritten(redis_url, stores):
    clock = VirtualClock()
    (store,) = stores(redis_url, 1)
    await store.redis.set(f"switchover:breaker:{KEY}", b"not json")
    assert (await store.admit(KEY, clock.now()))[0] is Admission.ALLOW
    await store.record(KEY, ProviderFailure(), clock.now())
    assert (await store.snapshot(KEY)).consecutive_failures == 1
