"""Which comparisons make up the table, and the checks that keep them honest.

Overhead, per dialect: a plain answer and a stream, one at a time and at a concurrency, the
chain (on the providers' default transport, aiohttp under httpx) against `Direct` (on httpx's
own). Then the openai rows one at a time again with the chain on httpx's own transport too, so
that the engine's own work shows apart from the transport's. Before a dialect's numbers are
kept, the fake's call log must show one and the same JSON body from both sides: otherwise the
rows would compare different requests.

Fallback: the primary (Anthropic) answers 529 through the fake's `model#529` suffix and the
backup (OpenAI) serves; the baseline is a healthy direct call to that backup. Three variants
separate the costs: one failed attempt (no retry), the default retry with its jittered backoff
(the sleeps are tallied through the injected clock and reported on their own), and an open
breaker that skips the primary without calling it. The breaker is disabled in the first two,
or it would open after five failures and turn them into the third.

Every measured phase also reads the fake server's CPU time, so the report can say whether the
server, rather than the client, limited it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import httpx

from bench.contenders import MODELS, Direct, ThroughChain
from bench.fake_process import FakeServerProcess
from bench.peer import SAME_TRANSPORT
from bench.runner import Connections, bursts, sequential, warm_up
from bench.stats import Row, row
from engine.fallback.policy import Policy

T = TypeVar("T")
DIALECTS = ("openai", "anthropic")
_NO_BREAKER = {"breaker_failures": 10**9, "breaker_min_volume": 10**9}


@dataclass(frozen=True)
class Sizes:
    warmup: int = 100  # per side, before every phase one at a time (a burst before bursts)
    sequential: int = 2000  # per side
    concurrency: int = 32
    burst: int = 500  # requests per side per burst
    rounds: int = 6  # bursts per side
    fallback: int = 400  # per side
    same_transport: int = 1000  # per side, one at a time, the chain on httpx's own transport


QUICK = Sizes(warmup=10, sequential=60, burst=64, rounds=2, fallback=20, same_transport=60)


class BenchError(RuntimeError):
    """The comparison would not be like with like."""


class Run:
    def __init__(self, fake: FakeServerProcess, control: httpx.AsyncClient, sizes: Sizes) -> None:
        self.fake = fake
        self.control = control
        self.sizes = sizes
        self.conns = Connections()
        self.server_busy_peak: float | None = None  # the fake's highest CPU share in a phase
        self._started = time.monotonic()

    def progress(self, what: str) -> None:
        print(f"[{time.monotonic() - self._started:6.1f} s] {what}", file=sys.stderr, flush=True)

    async def all(self) -> list[Row]:
        self.conns.install()
        rows: list[Row] = []
        for dialect in DIALECTS:
            rows += await self.overhead(dialect)
        # The providers' default transport (aiohttp under httpx) is not the baseline's (httpx's
        # own); these rows hold the transport equal, so what differs is the engine alone.
        rows += await self.overhead(
            "openai",
            transport=httpx.AsyncHTTPTransport(),
            suffix=SAME_TRANSPORT,
            concurrent=False,
            n=self.sizes.same_transport,
        )
        rows += await self.fallback()
        return rows

    async def overhead(
        self,
        dialect: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        suffix: str = "",
        concurrent: bool = True,
        n: int | None = None,
    ) -> list[Row]:
        """`transport`: the chain's, instead of the providers' default; `suffix` ends each
        row's label; `concurrent`: also the bursts at a concurrency; `n`: requests one at a
        time, per side (default `sizes.sequential`)."""
        s, conns = self.sizes, self.conns
        direct = Direct(dialect, self.fake.url)
        chained = ThroughChain.single(dialect, self.fake.url, transport=transport)
        try:
            rows = []
            for mode in ("answer", "stream"):
                stream = mode == "stream"
                a, b = (direct.complete, chained.complete)
                if stream:
                    a, b = direct.stream, chained.stream
                label = f"{dialect} {'stream, first text' if stream else 'answer'}{suffix}"

                self.progress(f"{dialect} {mode}{suffix}: one at a time")
                await self.fake.reset(self.control)
                await warm_up(a, b, s.warmup, conns)
                await self._same_bodies(f"{dialect} {mode}")
                base, subject = await self._phase(sequential(a, b, n or s.sequential, conns))
                rows.append(row(label, base, subject, concurrency=1, ttft=stream))
                if stream:
                    end = f"{dialect} stream, to the end{suffix}"
                    rows.append(row(end, base, subject, concurrency=1))
                if not concurrent:
                    continue

                self.progress(f"{dialect} {mode}: concurrency {s.concurrency}")
                await self.fake.reset(self.control)
                # A whole burst: httpcore's pool takes about one to settle on its size, and
                # the first burst after a short warm-up runs up to a quarter slower.
                await warm_up(a, b, s.burst, conns, s.concurrency)
                base, subject = await self._phase(
                    bursts(a, b, s.burst, conns, concurrency=s.concurrency, rounds=s.rounds)
                )
                rows.append(row(label, base, subject, concurrency=s.concurrency, ttft=stream))
            return rows
        finally:
            await direct.aclose()
            await chained.aclose()

    async def fallback(self) -> list[Row]:
        primary = ("anthropic", MODELS["anthropic"] + "#529")
        backup = ("openai", MODELS["openai"])
        variants = [
            ("529 → backup (no retry)", Policy(primary_retries=0, **_NO_BREAKER), 2),
            ("529, retry, 529 → backup", Policy(**_NO_BREAKER), 3),
            ("breaker open → backup", Policy(breaker_cooldown_s=3600), 1),
        ]
        direct = Direct("openai", self.fake.url)
        rows = []
        try:
            for label, policy, attempts in variants:
                self.progress(f"fallback: {label}")
                chained = ThroughChain(label, self.fake.url, [primary, backup], policy=policy)
                try:
                    rows.append(await self._fallback_row(label, direct, chained, attempts))
                finally:
                    await chained.aclose()
            return rows
        finally:
            await direct.aclose()

    async def _fallback_row(
        self, label: str, direct: Direct, chained: ThroughChain, attempts: int
    ) -> Row:
        await self.fake.reset(self.control)
        # Also opens the breaker in the third variant (five 529s in a row).
        await warm_up(
            direct.complete, chained.complete, max(10, self.sizes.warmup // 4), self.conns
        )
        answer = await chained.answer()
        if answer.fallback_depth != 1 or len(answer.attempts) != attempts:
            raise BenchError(
                f"{label}: served at depth {answer.fallback_depth} after "
                f"{len(answer.attempts)} attempts, expected depth 1 after {attempts}"
            )
        tally = chained.clock
        tally.slept_s, tally.sleeps = 0.0, 0
        base, subject = await self._phase(
            sequential(direct.complete, chained.complete, self.sizes.fallback, self.conns)
        )
        note = ""
        if tally.sleeps:
            note = (
                f"includes a mean backoff sleep of {tally.slept_s / tally.sleeps * 1000:.1f} ms "
                f"(overload_backoff_s {chained.chain.policy.overload_backoff_s:g} s, jittered)"
            )
        return row(f"fallback: {label}", base, subject, concurrency=1, note=note)

    async def _phase(self, measured: Awaitable[T]) -> T:
        cpu, start = self.fake.cpu_s(), time.monotonic()
        result = await measured
        if cpu is not None and (now := self.fake.cpu_s()) is not None:
            share = (now - cpu) / (time.monotonic() - start)
            self.server_busy_peak = max(share, self.server_busy_peak or 0.0)
        return result

    async def _same_bodies(self, what: str) -> None:
        calls = await self.fake.calls(self.control)
        bodies = {json.dumps(c["request"], sort_keys=True) for c in calls}
        if len(bodies) != 1:
            raise BenchError(f"{what}: the baseline and the chain sent different bodies: {bodies}")
