"""Time, injected: the chain, the breaker and the simulator read the clock and sleep through here.

`SystemClock` is real time. `VirtualClock` is time that moves only when told to, in two ways:
- by hand (`advance`), for pure state-machine tests and code that only reads `now()`;
- by running a coroutine under `VirtualClock.run`, an event loop whose time *is* the virtual
  clock and which jumps straight to the next timer whenever nothing is ready. Every asyncio
  primitive (sleep, timeouts, and so the timeouts inside httpx/anyio) then follows virtual
  time, so a two-hour outage replays in milliseconds through the very same code.

Never use a virtual loop with real sockets: it jumps time forward while a socket is waiting.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import selectors
import time
from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds, for deadlines and breakers."""

    def wall(self) -> datetime:
        """The current UTC time, for records and for parsing HTTP dates."""

    async def sleep(self, seconds: float) -> None: ...

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[Any]:
        """A scope that raises TimeoutError when `seconds` of this clock's time elapse."""


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[Any]:
        return asyncio.timeout(max(0.0, seconds))


class VirtualClock:
    def __init__(self, start: float = 1_000.0, wall_start: datetime | None = None) -> None:
        self._now = start
        self._start = start
        self._wall_start = wall_start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
        self._loop: asyncio.AbstractEventLoop | None = None

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime:
        return self._wall_start + timedelta(seconds=self._now - self._start)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time does not go backwards")
        self._now += seconds

    def _in_own_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    async def sleep(self, seconds: float) -> None:
        if self._in_own_loop():
            await asyncio.sleep(max(0.0, seconds))
        else:  # driven by hand on an ordinary loop: sleeping moves time, then lets others run
            self.advance(max(0.0, seconds))
            await asyncio.sleep(0)

    def quiet_until(self) -> float:
        """Inside `run`: until when nothing scheduled on the loop can run — the earliest timer,
        `inf` with none, now when callbacks are ready to run. A caller that changes nothing
        the loop's tasks read may act for any instant before it without sleeping there."""
        loop = self._loop
        if loop is None:
            return self._now
        return loop.quiet_until()  # type: ignore[attr-defined]

    async def sleep_until(self, at: float) -> None:
        """Sleep until `at`, and be there exactly: the loop's arithmetic (`now + (at - now)`)
        can land an ulp off, and a simulator that dates records by arrival wants them on the
        instant it scheduled."""
        await self.sleep(at - self._now)
        if abs(self._now - at) < 1e-6:
            self._now = at

    def timeout(self, seconds: float) -> AbstractAsyncContextManager[Any]:
        # Inside the virtual loop asyncio's own timer is virtual. On an ordinary loop a
        # hand-driven clock cannot fire a timer, so the scope is real time (tests that need
        # virtual deadlines run under `run`).
        return asyncio.timeout(max(0.0, seconds))

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run `main` to completion on an event loop whose time is this clock."""
        loop = _VirtualTimeLoop(self)
        self._loop = loop
        try:
            return loop.run_until_complete(main)
        finally:
            _cancel_all(loop)
            loop.close()
            self._loop = None


class _VirtualSelector:
    """Wraps a real selector: ready I/O wins; otherwise, instead of blocking until the next
    timer, time jumps there."""

    def __init__(self, real: selectors.BaseSelector, clock: VirtualClock) -> None:
        self._real = real
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[Any]:
        # Only the loop's own wake-up pipe registered: no socket can be ready, and a thread's
        # call_soon_threadsafe lands in the ready queue anyway, so the poll is skipped (the
        # simulator runs a million iterations through here).
        events = self._real.select(0) if len(self._real.get_map()) > 1 else []
        if events or timeout == 0:
            return events
        if timeout is None:  # no timer at all: only outside I/O can wake us
            return self._real.select(None)
        self._clock.advance(timeout)
        return []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(selectors.DefaultSelector())
        self._vclock = clock
        self._selector = _VirtualSelector(self._selector, clock)  # type: ignore[has-type]
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._vclock.now()

    def quiet_until(self) -> float:
        if self._ready:  # type: ignore[attr-defined]
            return self._vclock.now()
        scheduled = self._scheduled  # type: ignore[attr-defined]
        while scheduled and scheduled[0].cancelled():
            heapq.heappop(scheduled)
            self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
        return scheduled[0].when() if scheduled else math.inf


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
