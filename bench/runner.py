"""The timing loops. Two calls are always measured together, in the same loop and the same run,
so that whatever slows the machine down slows both.

- `sequential`: one request at a time, the two sides alternating in ABBA order, so that a drift
  over the run (a warming CPU, a growing server log) falls on both equally. Each call's client CPU
  is read around it: one request in flight means the process's CPU time is that request's.
- `bursts`: `rounds` bursts of `n` requests per side at a fixed concurrency, sides alternating
  which goes first. Throughput is requests over the bursts' wall time; client CPU per request is
  the bursts' CPU time over their requests.

Both also count the TCP connections the client opened (`Connections`): a client that fails to
put connections back in its pool pays a handshake per request, which on loopback is a fraction of
a millisecond but against a real provider is a TLS handshake.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

# A call returns perf_counter() at the first text of a stream, or None for a plain answer.
Call = Callable[[], Awaitable[float | None]]


class Connections:
    """Counts the connections the client opens, by wrapping the running loop's
    `create_connection` (which anyio, and so httpx, opens every TCP connection through)."""

    def __init__(self) -> None:
        self.opened = 0

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        original = loop.create_connection

        async def counting(*args: Any, **kwargs: Any) -> Any:
            self.opened += 1
            return await original(*args, **kwargs)

        loop.create_connection = counting  # type: ignore[method-assign]


@dataclass
class Samples:
    latency_s: list[float] = field(default_factory=list)
    ttft_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0  # time the side spent running (its bursts, or the sum of its calls)
    cpu_s: float = 0.0  # client process CPU time over the same
    connections: int = 0  # TCP connections opened over the same

    @property
    def n(self) -> int:
        return len(self.latency_s)

    @property
    def throughput(self) -> float:
        return self.n / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_per_request_s(self) -> float:
        return self.cpu_s / self.n if self.n else 0.0

    @property
    def connections_per_100(self) -> float:
        return 100 * self.connections / self.n if self.n else 0.0


async def _timed(call: Call, into: Samples) -> None:
    start = perf_counter()
    first = await call()
    into.latency_s.append(perf_counter() - start)
    if first is not None:
        into.ttft_s.append(first - start)


async def warm_up(a: Call, b: Call, n: int, conns: Connections, concurrency: int = 1) -> None:
    """Fill both connection pools and let both code paths run hot before anything is kept."""
    for call in (a, b):
        await _burst(call, n, concurrency, Samples(), conns)


async def sequential(a: Call, b: Call, n: int, conns: Connections) -> tuple[Samples, Samples]:
    sides = (Samples(), Samples())
    gc.collect()  # start with no garbage from the previous case to collect on our time
    for i in range(n):
        order = (0, 1) if i % 4 in (0, 3) else (1, 0)
        for side in order:
            call, into = (a, b)[side], sides[side]
            opened, cpu, start = conns.opened, time.process_time(), perf_counter()
            await _timed(call, into)
            into.wall_s += perf_counter() - start
            into.cpu_s += time.process_time() - cpu
            into.connections += conns.opened - opened
    return sides


async def bursts(
    a: Call, b: Call, n: int, conns: Connections, *, concurrency: int, rounds: int
) -> tuple[Samples, Samples]:
    sides = (Samples(), Samples())
    for r in range(rounds):
        for side in (0, 1) if r % 2 == 0 else (1, 0):
            gc.collect()
            await _burst((a, b)[side], n, concurrency, sides[side], conns)
    return sides


async def _burst(call: Call, n: int, concurrency: int, into: Samples, conns: Connections) -> None:
    remaining = iter(range(n))

    async def worker() -> None:
        for _ in remaining:  # shared: each worker takes the next request until none are left
            await _timed(call, into)

    opened, cpu, start = conns.opened, time.process_time(), perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    into.wall_s += perf_counter() - start
    into.cpu_s += time.process_time() - cpu
    into.connections += conns.opened - opened
