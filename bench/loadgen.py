"""The gateway bench's load generator: aiohttp on this process's event loop, open and closed loop.

Not httpx: with httpx the bench measured its own load generator (856 requests/s from the fake
directly, against 693 through one gateway worker; issue 23). The body is serialised once and the
answer is read, never parsed, so what this process spends per request is aiohttp's HTTP/1.1 and
little else; each phase reports that CPU time, and with it the most this process could send on
one CPU (`Phase.ceiling`), so every run shows whether the load generator was the limit.

Never here: starting processes, or what the numbers mean (bench.gateway).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

TIMEOUT_S = 30.0
OPEN_LOOP_CONNECTIONS = 400  # more than an open-loop phase ever has in flight


@dataclass(frozen=True)
class Phase:
    """What one phase measured: each request's latency, and what it cost this process."""

    latencies_ms: list[float]
    errors: int
    seconds: float  # wall time of the phase
    cpu_s: float  # this process's CPU time in the phase
    # Open loop: requests still unanswered when the last one left. A server that keeps up has
    # about rate × latency in flight; one that fell behind has a queue.
    backlog: int = 0

    @property
    def requests(self) -> int:
        return len(self.latencies_ms)

    @property
    def rate(self) -> float:
        """Answers per second."""
        return self.requests / self.seconds

    @property
    def cpu_us_per_request(self) -> float:
        return self.cpu_s / self.requests * 1e6

    @property
    def ceiling(self) -> float:
        """Requests per second this process could send and read on one CPU, at what it spent."""
        return 1e6 / self.cpu_us_per_request


def combined(phases: list[Phase]) -> Phase:
    """Alternating halves of one measurement, as one phase."""
    return Phase(
        [ms for phase in phases for ms in phase.latencies_ms],
        sum(phase.errors for phase in phases),
        sum(phase.seconds for phase in phases),
        sum(phase.cpu_s for phase in phases),
        max(phase.backlog for phase in phases),
    )


class Load:
    """`async with Load(url, body, headers) as load:` then `await load.open_loop(...)` or
    `await load.closed_loop(...)`; one session (and its kept-alive connections) per phase."""

    def __init__(self, url: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        self.url = url
        self._body = json.dumps(body).encode()
        self._headers = {**headers, "content-type": "application/json"}

    async def open_loop(self, rate: float, seconds: float) -> Phase:
        """Send at `rate` per second on a fixed schedule whatever the answers do, so that
        queueing in the server shows in the latency as it would for real callers."""
        async with self._session(OPEN_LOOP_CONNECTIONS) as session:
            latencies: list[float] = []
            tasks: list[asyncio.Task[bool]] = []
            cpu, start = time.process_time(), time.perf_counter()
            for n in range(int(rate * seconds)):
                delay = start + n / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(self._post(session, latencies)))
            backlog = len(tasks) - len(latencies)
            results = await asyncio.gather(*tasks)
            return Phase(
                latencies,
                results.count(False),
                time.perf_counter() - start,
                time.process_time() - cpu,
                backlog,
            )

    async def closed_loop(self, callers: int, seconds: float) -> Phase:
        """`callers` callers, each sending its next request when its last is answered."""
        async with self._session(callers) as session:
            latencies: list[float] = []
            errors = 0
            cpu, start = time.process_time(), time.perf_counter()
            end = start + seconds

            async def caller() -> None:
                nonlocal errors
                while time.perf_counter() < end:
                    errors += not await self._post(session, latencies)

            await asyncio.gather(*(caller() for _ in range(callers)))
            return Phase(latencies, errors, time.perf_counter() - start, time.process_time() - cpu)

    def _session(self, connections: int) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections)
        return aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
            skip_auto_headers=("user-agent",),
        )

    async def _post(self, session: aiohttp.ClientSession, latencies: list[float]) -> bool:
        started = time.perf_counter()
        try:
            async with session.post(self.url, data=self._body, headers=self._headers) as answer:
                await answer.read()
                ok = answer.status == 200
        except (aiohttp.ClientError, TimeoutError):
            ok = False
        latencies.append((time.perf_counter() - started) * 1000)
        return ok
