"""Demo history: the last fourteen days of the demo's three routes, made by the real chain.

Nothing is invented row by row. The demo's configuration runs through `Switchover` (chains,
breakers, retries, pricing, the recorder) against the in-process fake providers, on a virtual
clock that starts fourteen days ago, with traffic that follows a daily curve (the what-if's
`simulations.whatif.arrivals.daily_curve`, so a scenario's `daily_curve = true` is this one) and
a handful of past incidents. The attempts land in the spool like any writer's, dated in the
past, and the scheduler ingests them as late data: rollups, incidents and costs cover the
fortnight at once.
A file `HISTORY_MARKER` in the data folder says it was done, so the demo seeds only once.

The fakes keep no log of their calls unless asked (`fakes_log`): a fortnight of request bodies
is hundreds of megabytes that nobody reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from engine.config import Config
from engine.core.clock import VirtualClock
from engine.core.errors import ChainError
from engine.core.messages import Request
from engine.core.paths import DataPaths
from engine.runtime.switchover import Switchover
from engine.telemetry.breaker_events import EVENTS_DIR
from simulations.demo.traffic import Traffic
from simulations.fakes import Call, FakeTransport
from simulations.whatif.arrivals import daily_curve

HISTORY_MARKER = "HISTORY"
DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class PastIncident:
    day: int  # days after the history starts
    hour: float  # UTC hour of day it begins
    minutes: float
    model: str
    fault: str  # a fake fault spec ("overloaded", "rate_limit:retry_after=20", ...)


PAST_INCIDENTS = (
    PastIncident(2, 14.5, 45, "claude-sonnet-4-5", "overloaded"),
    PastIncident(5, 10.0, 25, "gpt-4.1-mini", "rate_limit:retry_after=20"),
    PastIncident(8, 13.0, 60, "claude-haiku-4-5", "auth"),
    PastIncident(11, 15.0, 120, "claude-sonnet-4-5", "overloaded:rate=0.3"),
    PastIncident(13, 9.0, 30, "claude-sonnet-4-5", "server_error"),
)


def seed_history(
    paths: DataPaths,
    config: Config,
    *,
    days: int = 14,
    end: datetime | None = None,
    peak_per_minute: float = 4.0,
    seed: int = 11,
    environ: dict[str, str] | None = None,
    say: Callable[[str], None] = print,
    fakes_log: list[Call] | None = None,
) -> int:
    """Run `days` of traffic ending at `end` (now) through `config`'s routes; the number of
    requests sent. Blocks; a few seconds of CPU per day of history at the default rate.
    `fakes_log`, when given, receives every call the fake providers took (what each read and
    wrote in its prompt cache included), to check the figures against the providers' account."""
    end = (end or datetime.now(UTC)).replace(second=0, microsecond=0)
    start = end - timedelta(days=days)
    clock = VirtualClock(wall_start=start)
    transport = FakeTransport(
        clock=clock, seed=seed, log_limit=None if fakes_log is not None else 0
    )
    transport.latency(median_ms=350, p99_ms=2500, token_interval_ms=12)
    for model, planned in incident_windows(start, days).items():
        transport.schedule(model, windows=planned)
    # Written aside and moved into the spool only when complete: an interrupted run leaves
    # nothing half-seeded behind, and the next one starts over.
    staging = DataPaths(paths.root / ".history")
    shutil.rmtree(staging.root, ignore_errors=True)
    sw = Switchover(
        config,
        clock=clock,
        transport=transport,
        record_to=staging,
        environ=environ,
    )
    sent = 0

    async def run() -> None:
        nonlocal sent
        sent = await _send_traffic(sw, clock, Traffic(seed), days, peak_per_minute, say)
        await sw.aclose()

    # The past incidents' credential failures are history, not news: keep the console quiet.
    chain_log = logging.getLogger("switchover.chain")
    level = chain_log.level
    chain_log.setLevel(logging.ERROR)
    try:
        clock.run(run())
    finally:
        chain_log.setLevel(level)
    if fakes_log is not None:
        fakes_log.extend(transport.calls())
    _move_into_spool(staging, paths)
    (paths.root / HISTORY_MARKER).write_text(
        f"{days} days of simulated demo history up to {end.isoformat()}: {sent} requests\n"
    )
    return sent


async def _send_traffic(
    sw: Switchover,
    clock: VirtualClock,
    traffic: Traffic,
    days: int,
    peak_per_minute: float,
    say: Callable[[str], None],
) -> int:
    """`days` of the demo's traffic from the clock's start, each request on its own task;
    the number of requests sent, once every one has ended."""
    start = clock.wall()
    tasks: set[asyncio.Task[None]] = set()
    sent, elapsed, next_report = 0, 0.0, DAY

    async def one(route: str, request: Request) -> None:
        with contextlib.suppress(ChainError):  # a failed request is recorded like any other
            await sw.complete(route, request)

    while True:
        # Arrivals of a Poisson process whose rate follows the daily curve (thinning).
        elapsed += traffic.rng.expovariate(peak_per_minute / 60)
        if elapsed >= days * DAY:
            break
        await clock.sleep(start.timestamp() + elapsed - clock.wall().timestamp())
        if traffic.rng.random() > daily_curve(clock.wall()):
            continue
        route, request = traffic.next()
        task = asyncio.create_task(one(route, request.replace(stream=False)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        sent += 1
        if elapsed >= next_report:
            say(f"demo history: {clock.wall():%Y-%m-%d} done, {sent:,} requests")
            next_report += DAY
    await asyncio.gather(*tasks)
    return sent


def incident_windows(start: datetime, days: int) -> dict[str, list[dict[str, object]]]:
    """The past incidents of a history of `days` from `start`, as fake schedule windows per
    model (seconds from the start)."""
    windows: dict[str, list[dict[str, object]]] = {}
    midnight = start.replace(hour=0, minute=0)
    for incident in PAST_INCIDENTS:
        at = midnight + timedelta(days=incident.day, hours=incident.hour)
        begins = (at - start).total_seconds()
        if 0 <= begins < days * DAY:
            windows.setdefault(incident.model, []).append(
                {
                    "start_s": begins,
                    "end_s": begins + incident.minutes * 60,
                    "fault": incident.fault,
                }
            )
    return windows


def _move_into_spool(staging: DataPaths, paths: DataPaths) -> None:
    """The staged attempt and event files into the real spool, each by a rename."""
    paths.spool.mkdir(parents=True, exist_ok=True)
    for folder, pattern in ((staging.spool, "*.parquet"), (staging.spool / EVENTS_DIR, "*.jsonl")):
        target = paths.spool / folder.relative_to(staging.spool)
        target.mkdir(parents=True, exist_ok=True)
        for file in sorted(folder.glob(pattern)):
            os.replace(file, target / file.name)
    shutil.rmtree(staging.root, ignore_errors=True)
