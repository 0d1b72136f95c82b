"""Virtual time: hours pass in milliseconds, and asyncio's own timers (httpx's too) follow it."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import httpx
import pytest

from engine.core.clock import SystemClock, VirtualClock


def test_an_hour_of_sleeping_takes_no_real_time():
    clock = VirtualClock()
    start_wall = clock.wall()

    async def main() -> float:
        start = clock.now()
        await clock.sleep(3600)
        return clock.now() - start

    real_start = time.monotonic()
    assert clock.run(main()) == 3600
    assert time.monotonic() - real_start < 1
    assert clock.wall() - start_wall == timedelta(hours=1)


def test_timeouts_fire_on_virtual_time():
    clock = VirtualClock()

    async def main() -> None:
        async with clock.timeout(5):
            await asyncio.sleep(100)

    with pytest.raises(TimeoutError):
        clock.run(main())
    assert clock.now() == pytest.approx(1_005)


def test_concurrent_sleepers_wake_in_order_of_their_deadlines():
    clock = VirtualClock()
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append((name, clock.now() - 1_000))

    async def main() -> None:
        await asyncio.gather(sleeper("slow", 30), sleeper("fast", 2), sleeper("mid", 10))

    clock.run(main())
    assert woke == [("fast", 2), ("mid", 10), ("slow", 30)]


def test_httpx_calls_through_an_in_process_transport_run_on_virtual_time():
    clock = VirtualClock()

    async def slow_provider(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(45)
        return httpx.Response(200, json={"ok": True})

    async def main() -> int:
        transport = httpx.MockTransport(slow_provider)
        async with httpx.AsyncClient(transport=transport) as client:
            return (await client.get("http://provider.test/")).status_code

    assert clock.run(main()) == 200
    assert clock.now() - 1_000 == pytest.approx(45)


def test_a_hand_driven_clock_moves_only_when_told():
    clock = VirtualClock()
    before = clock.now()
    clock.advance(2.5)
    assert clock.now() - before == 2.5
    with pytest.raises(ValueError):
        clock.advance(-1)

    async def main() -> None:
        await clock.sleep(10)  # on an ordinary loop: advances at once, yields, returns

    asyncio.run(main())
    assert clock.now() - before == 12.5


def test_the_system_clock_is_monotonic_and_utc():
    clock = SystemClock()
    assert clock.now() <= clock.now()
    assert clock.wall().utcoffset() == timedelta(0)
