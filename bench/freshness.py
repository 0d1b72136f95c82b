"""`python -m bench.freshness [--quick]`: the sustained rate one scheduler keeps up with when the
attempts come from the gateway's own spooling, and how fresh the dashboard's data stays.

Real processes on this machine, sharing its CPUs as they would in production: the fake
providers, `switchover serve --workers 2` (its recorders spool to the data folder) and
`switchover scheduler` on that folder, with open-loop load (bench.loadgen) at rising rates.
For each rate, while the load runs, every half second: the wall clock against the newest
attempt the scheduler has published (what the Live page could show at best: the recorder's
flush, the wait for the next 5 s cycle, the cycle itself). After each rate, the time until
every answered request is published, and that none is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.fake_process import REPO, FakeServerProcess, stop
from bench.gateway import BODY, KEY, PATH, gateway
from bench.loadgen import Load, Phase
from bench.stats import percentile
from engine.published.catalogue import RECENT_ATTEMPTS
from engine.published.publish import read_manifest

WORKERS = 2
RATES = (100.0, 300.0, 600.0, 900.0)
FRESHNESS_TARGET_S = 10.0
SAMPLE_S = 0.5


@dataclass(frozen=True)
class Sizes:
    seconds: float = 40.0  # per rate: eight scheduler cycles
    drain_s: float = 30.0  # at most, for the last answered request to be published
    warmup_s: float = 20.0  # the scheduler's first cycles and start-up jobs run in it


QUICK = Sizes(seconds=8.0, drain_s=20.0, warmup_s=2.0)


@dataclass(frozen=True)
class Rate:
    rate: float  # sent per second
    phase: Phase
    lags_s: list[float]  # wall clock minus the newest published attempt, every SAMPLE_S
    drained_s: float | None  # after the load, until every answered request was published
    published: int  # attempts published in all by then
    answered: int  # requests the gateway answered in all by then


class Published:
    """What the scheduler has published of the attempts, from its manifest: how many, and the
    newest (each part lists its latest started_at)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def rows(self) -> int:
        entry = read_manifest(self.folder).get(RECENT_ATTEMPTS)
        return entry.rows if entry else 0

    def newest(self) -> datetime | None:
        entry = read_manifest(self.folder).get(RECENT_ATTEMPTS)
        return max((part.newest for part in entry.parts), default=None) if entry else None


@contextlib.contextmanager
def scheduler(data: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = (data.parent / "scheduler.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "scheduler", "--data-dir", str(data),
         "-c", str(data.parent / "switchover.toml")],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        yield process
    finally:
        stop(process, signal.SIGTERM, 30)
        log.close()


async def _sample(published: Published, lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        newest = await asyncio.to_thread(published.newest)
        if newest is not None:
            lags.append((datetime.now(UTC) - newest).total_seconds())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_S)


async def _rate(load: Load, published: Published, rate: float, sizes: Sizes, answered: int) -> Rate:
    lags: list[float] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample(published, lags, stop))
    phase = await load.open_loop(rate, sizes.seconds)
    stop.set()
    await sampler
    answered += phase.requests - phase.errors
    began, drained = time.monotonic(), None
    while time.monotonic() - began < sizes.drain_s:
        if published.rows() >= answered:
            drained = time.monotonic() - began
            break
        await asyncio.sleep(0.2)
    return Rate(rate, phase, lags, drained, published.rows(), answered)


async def _measure(url: str, published: Published, sizes: Sizes, say: Callable[[str], None]):
    load = Load(url + PATH, BODY, {"authorization": f"Bearer {KEY}"})
    warm = await load.open_loop(50, sizes.warmup_s)  # connections, imports, first cycles
    answered, rows = warm.requests - warm.errors, []
    began = time.monotonic()
    while published.rows() < answered and time.monotonic() - began < 60:  # the first cycles
        await asyncio.sleep(0.5)
    for rate in RATES:
        say(f"{rate:g} requests/s for {sizes.seconds:g} s")
        measured = await _rate(load, published, rate, sizes, answered)
        rows.append(measured)
        answered = measured.answered
    return rows


def measure(sizes: Sizes, say: Callable[[str], None] = print) -> list[Rate]:
    with FakeServerProcess(pin=False) as fake, gateway(fake.url, WORKERS) as served:
        data = served.data
        with scheduler(data):
            return asyncio.run(_measure(served.url, Published(data / "published"), sizes, say))


def section(rates: list[Rate], *, command: str, when: datetime, runtime_s: float) -> str:
    lines = [
        "## Scheduler freshness under gateway load",
        "",
        f"`{command}` on {when:%Y-%m-%d %H:%M} UTC ({runtime_s:.0f} s, {os.cpu_count()} CPUs): "
        f"the fake providers, `switchover serve --workers {WORKERS}` spooling as in production "
        "and `switchover scheduler` (5 s cycles) on the same data folder, open-loop load at "
        "each rate in turn. Freshness: the wall clock minus the newest attempt published, "
        f"every {SAMPLE_S:g} s while the load ran (target: at most "
        f"{FRESHNESS_TARGET_S:g} s). All published: after the load, how long until every "
        "answered request was in the published attempts.",
        "",
        "| sent /s | answered /s | p50 latency | errors | freshness p50 | freshness max "
        "| all published |",
        "|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rates:
        latency = r.phase.latencies_ms
        p50 = f"{percentile(latency, 50):,.1f} ms" if latency else "—"
        lags = r.lags_s
        fresh = f"{percentile(lags, 50):.1f} s | {max(lags):.1f} s" if lags else "— | —"
        done = (
            f"after {r.drained_s:.1f} s ({r.published:,} of {r.answered:,})"
            if r.drained_s is not None
            else f"**no**: {r.published:,} of {r.answered:,}"
        )
        lines.append(
            f"| {r.rate:,.0f} | {r.phase.rate:,.0f} | {p50} | {r.phase.errors:,} "
            f"| {fresh} | {done} |"
        )
    kept = [r for r in rates if r.lags_s and max(r.lags_s) <= FRESHNESS_TARGET_S
            and r.drained_s is not None and not r.phase.errors]  # fmt: skip
    best = max(kept, key=lambda r: r.phase.rate, default=None)
    # The gateway is saturated when it answers clearly less than is sent: from there the
    # load is the gateway's ceiling on this machine, not the scheduler's.
    saturated = next((r for r in rates if r.phase.rate < 0.95 * r.rate), None)
    summary = (
        f"The scheduler kept the published attempts fresh within {FRESHNESS_TARGET_S:g} s, and "
        f"every one published, up to {best.phase.rate:,.0f} requests/s answered"
        if best
        else f"No rate kept the published attempts fresh within {FRESHNESS_TARGET_S:g} s"
    )
    if saturated is not None:
        summary += (
            f"; from {saturated.rate:,.0f} requests/s sent the gateway answered only "
            f"{saturated.phase.rate:,.0f}/s: that is the gateway's ceiling on this machine, "
            "where its two workers, the scheduler, the fake and the load generator share the "
            f"{os.cpu_count()} CPUs, not the scheduler's"
        )
    lines += ["", summary + "."]
    return "\n".join(lines)


def run(quick: bool, command: str) -> str:
    started, when = time.monotonic(), datetime.now(UTC)

    def say(what: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {what}", file=sys.stderr, flush=True)

    rates = measure(QUICK if quick else Sizes(), say)
    text = section(rates, command=command, when=when, runtime_s=time.monotonic() - started)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.freshness", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="8 s a rate instead of 40")
    args = parser.parse_args()
    run(args.quick, "python -m bench.freshness" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
