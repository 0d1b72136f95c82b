"""An incident's cost in time: how much longer a request takes while its primary is down, before
the breaker opens and after, for outages of three kinds.

The chain is the real one (`Chain` over the provider adapters: primary Anthropic, backup OpenAI,
both on the fake provider process) with the default policy, except where a kind says otherwise:

  529 overloaded    the primary answers 529 at once (the fake's `<model>#529`)
  connect refused   the primary's address has nobody listening: the TCP connect fails at once
  hang              the primary reads the request and never answers (`<model>#hang`); the
                    chain's per-attempt timeout (`attempt_timeout_s`, HANG_ATTEMPT_TIMEOUT_S
                    here) ends each attempt, so the added time is a multiple of it

Each kind is measured over `onsets`: a chain whose breaker is closed, as before an incident, then
requests one at a time. A request that met a closed breaker is kept as "breaker closed": it paid
the failed primary attempt(s), the backoff before the retry and the backup's answer. Once the
breaker is open, `after` more requests are kept as "breaker open": the primary is skipped and the
backup answers at once. Beside every outage request, one request goes through a chain of the
same shape whose primary is healthy ("normal", served by the primary), the two in ABBA order, so
that both are measured over the same stretch of time. The added time is outage minus normal at
the same percentile. The onsets share their providers (and so their warm connection pools); only
the breaker store is new each time.

`python -m bench.incident [--quick]` runs it alone against a fake server of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.contenders import MODELS, REQUEST, SleepTally, provider
from bench.fake_process import FakeServerProcess, free_port
from bench.runner import Samples
from bench.stats import Summary, percentile
from engine.core.messages import Response
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.state.breaker import MemoryBreakerStore

OPEN_TARGET_MS = 5.0  # once the breaker is open, at most this much slower than normal at p50
HANG_ATTEMPT_TIMEOUT_S = 1.0
MAX_TO_OPEN = 50  # requests; the default breaker opens after five failures in a row


class BenchError(RuntimeError):
    """A request was not served the way its phase says it must be."""


@dataclass(frozen=True)
class Kind:
    name: str
    fault: str | None  # the primary model's `#fault` suffix; None: a dead address instead
    policy: Policy = field(default_factory=Policy)
    slow: bool = False  # fewer onsets: each one takes seconds


KINDS = (
    Kind("529 overloaded", "529"),
    Kind("connect refused", None),
    Kind(
        f"hang, attempt timeout {HANG_ATTEMPT_TIMEOUT_S:g} s",
        "hang",
        Policy(attempt_timeout_s=HANG_ATTEMPT_TIMEOUT_S),
        slow=True,
    ),
)


@dataclass(frozen=True)
class Sizes:
    warmup: int = 50  # normal requests, and as many to the backup, before anything is kept
    onsets: int = 20  # per fast kind
    slow_onsets: int = 3  # per slow kind
    after: int = 15  # requests kept per onset once the breaker is open


QUICK = Sizes(warmup=10, onsets=4, slow_onsets=1, after=5)


@dataclass
class Phase:
    outage: list[float] = field(default_factory=list)  # seconds per request
    normal: list[float] = field(default_factory=list)  # the normal requests beside them


@dataclass
class Outcome:
    kind: Kind
    closed: Phase
    open: Phase
    to_open: list[int]  # per onset: requests that met a closed breaker
    to_open_s: list[float]  # per onset: the time its requests took until the breaker opened
    slept_s: float  # backoff the chain slept over the closed phase, in all
    sleeps: int


def summary(values: list[float]) -> Summary:
    return Summary.of(Samples(latency_s=values), values)


class Incident:
    def __init__(self, url: str, sizes: Sizes, progress: Callable[[str], None]) -> None:
        self.sizes = sizes
        self.progress = progress
        self.primary = provider("anthropic", url)  # healthy, or failing by the model's suffix
        self.dead = provider("anthropic", f"http://127.0.0.1:{free_port()}")
        self.backup = provider("openai", url)
        self.normal_primary = provider("anthropic", url)  # its own pool, clear of the hangs

    async def run(self) -> list[Outcome]:
        await self._warm_up()
        return [await self.kind(kind) for kind in KINDS]

    async def aclose(self) -> None:
        for p in (self.primary, self.dead, self.backup, self.normal_primary):
            await p.aclose()

    def _chain(self, name: str, primary: Target, policy: Policy, clock: SleepTally) -> Chain:
        backup = Target(self.backup, MODELS["openai"])
        breakers = MemoryBreakerStore(policy.breaker_policy())
        return Chain(name, [primary, backup], policy=policy, breakers=breakers, clock=clock)

    async def _warm_up(self) -> None:
        normal = self._normal(Policy())
        straight = Chain("warm-up", [Target(self.backup, MODELS["openai"])])
        for _ in range(self.sizes.warmup):
            await normal.complete(REQUEST)
            await straight.complete(REQUEST)

    def _normal(self, policy: Policy) -> Chain:
        primary = Target(self.normal_primary, MODELS["anthropic"])
        return self._chain("normal", primary, policy, SleepTally())

    def _outage_target(self, kind: Kind) -> Target:
        if kind.fault is None:
            return Target(self.dead, MODELS["anthropic"])
        return Target(self.primary, f"{MODELS['anthropic']}#{kind.fault}")

    async def kind(self, kind: Kind) -> Outcome:
        onsets = self.sizes.slow_onsets if kind.slow else self.sizes.onsets
        self.progress(f"incident: {kind.name}, {onsets} onsets")
        normal = self._normal(kind.policy)
        target = self._outage_target(kind)
        clock = SleepTally()
        closed, opened = Phase(), Phase()
        to_open, to_open_s = [], []
        slept_s, sleeps = 0.0, 0
        i = 0
        for _ in range(onsets):
            chain = self._chain(f"outage {kind.name}", target, kind.policy, clock)
            n = 0
            while (await chain.breakers.snapshot(target.name)).status != "open":
                if n == MAX_TO_OPEN:
                    raise BenchError(f"{kind.name}: no open breaker after {n} requests")
                clock.slept_s, clock.sleeps = 0.0, 0
                await self._pair(i, normal, chain, closed, expect_primary_tried=True)
                slept_s, sleeps = slept_s + clock.slept_s, sleeps + clock.sleeps
                i, n = i + 1, n + 1
            to_open.append(n)
            to_open_s.append(sum(closed.outage[-n:]))
            for _ in range(self.sizes.after):
                await self._pair(i, normal, chain, opened, expect_primary_tried=False)
                i += 1
        return Outcome(kind, closed, opened, to_open, to_open_s, slept_s, sleeps)

    async def _pair(
        self, i: int, normal: Chain, outage: Chain, into: Phase, *, expect_primary_tried: bool
    ) -> None:
        order = (normal, outage) if i % 4 in (0, 3) else (outage, normal)
        for chain in order:
            started = time.perf_counter()
            answer = await chain.complete(REQUEST)
            seconds = time.perf_counter() - started
            if chain is normal:
                _check(answer, depth=0, attempts=1, what="normal")
                into.normal.append(seconds)
                continue
            tried = len(answer.attempts) > 1
            if answer.fallback_depth != 1 or tried != expect_primary_tried:
                raise BenchError(
                    f"{outage.route}: served at depth {answer.fallback_depth} after "
                    f"{len(answer.attempts)} attempts; expected the backup, "
                    f"{'after' if expect_primary_tried else 'without'} trying the primary"
                )
            into.outage.append(seconds)


def _check(answer: Response, *, depth: int, attempts: int, what: str) -> None:
    if answer.fallback_depth != depth or len(answer.attempts) != attempts:
        raise BenchError(
            f"{what}: served at depth {answer.fallback_depth} after {len(answer.attempts)} "
            f"attempts, expected depth {depth} after {attempts}"
        )


async def measure(url: str, sizes: Sizes, progress: Callable[[str], None]) -> list[Outcome]:
    incident = Incident(url, sizes, progress)
    try:
        return await incident.run()
    finally:
        await incident.aclose()


# --- the table -----------------------------------------------------------------------------


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| outage | breaker | requests | normal p50 / p99 ms | during the outage p50 / p99 ms "
        "| added p50 / p99 ms | target | met |",
        "|---|---|--:|--:|--:|--:|--:|---|",
    ]
    for o in outcomes:
        for label, phase in (("closed", o.closed), ("open", o.open)):
            normal, outage = summary(phase.normal), summary(phase.outage)
            added50, added99 = outage.p50_ms - normal.p50_ms, outage.p99_ms - normal.p99_ms
            target, met = "—", ""
            if label == "open":
                target = f"≤ +{OPEN_TARGET_MS:g} ms at p50"
                met = "yes" if added50 <= OPEN_TARGET_MS else "**no**"
            lines.append(
                f"| {o.kind.name} | {label} | {outage.n} "
                f"| {normal.p50_ms:.2f} / {normal.p99_ms:.2f} "
                f"| {outage.p50_ms:.2f} / {outage.p99_ms:.2f} "
                f"| {added50:+.2f} / {added99:+.2f} | {target} | {met} |"
            )
    return "\n".join(lines)


def notes(outcomes: list[Outcome]) -> list[str]:
    """One line per kind: how long the breaker took to open, and the backoff slept."""
    lines = []
    for o in outcomes:
        onsets, fewest, most = len(o.to_open), min(o.to_open), max(o.to_open)
        requests = str(fewest) if fewest == most else f"{fewest}–{most}"
        backoff = ""
        if o.sleeps:
            backoff = (
                f"; the closed phase slept a mean backoff of "
                f"{o.slept_s / o.sleeps * 1000:.0f} ms before each of its {o.sleeps} retries"
            )
        lines.append(
            f"{o.kind.name}: {onsets} onsets; the breaker opened after {requests} requests one "
            f"at a time, which took {percentile(o.to_open_s, 50):.2f} s (median){backoff}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.incident", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    began = time.monotonic()

    def progress(what: str) -> None:
        print(f"[{time.monotonic() - began:6.1f} s] {what}", file=sys.stderr, flush=True)

    with FakeServerProcess() as fake:
        outcomes = asyncio.run(measure(fake.url, QUICK if args.quick else Sizes(), progress))
    print(table(outcomes))
    print("\n".join(f"- {line}" for line in notes(outcomes)))


if __name__ == "__main__":
    main()
