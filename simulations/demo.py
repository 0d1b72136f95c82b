"""`switchover up --demo`: the real engine on the fake providers, with traffic and incidents.

Nothing here is a mock-up: requests go through the real chain and provider adapters over HTTP
to the fault-injecting fake server, which plays a repeating 15-minute incident plan (the
support primary answering 529 for 3 minutes, a 429 storm on the classifier's primary, an
expired key on the summariser's primary). The console shows who served what and when the
breakers open and close.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import tomllib
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from engine.breaker import BreakerState
from engine.config import Config, load_config, parse_config
from engine.errors import ChainError, ConfigError
from engine.paths import DataPaths
from engine.store.publish import RECENT_ATTEMPTS, read_manifest
from engine.supervisor import child, stack
from engine.switchover import Switchover
from engine.types import Attempt, MessageEnd, Response, StreamError, StreamStart
from simulations.fakes import FakeProviders
from simulations.history import HISTORY_MARKER
from simulations.traffic import Traffic

DEMO_CONFIG = Path(__file__).parents[1] / "data" / "demo.toml"
DEMO_KEY_ENV = "SWITCHOVER_DEMO_KEY"
DEMO_MARKER = "DEMO"  # the dashboard labels a data folder holding it as demo data
CYCLE_S = 900.0
# (model, first start in s, duration in s, fault): one cycle of the incident plan.
INCIDENTS = (
    ("claude-sonnet-4-5", 20.0, 180.0, "overloaded"),
    ("gpt-4.1-mini", 300.0, 90.0, "rate_limit:retry_after=20"),
    ("claude-haiku-4-5", 600.0, 120.0, "auth"),
)

Say = Callable[[str], None]


def wants_demo(config_path: Path) -> tuple[bool, str]:
    """Run the demo unless a configuration exists whose keys are all in the environment."""
    if not config_path.exists():
        return True, f"no {config_path}: starting the demo on the fake providers"
    try:
        config = load_config(config_path)
        for provider in config.providers.values():
            provider.api_key()
    except ConfigError as exc:
        return True, f"{exc}: starting the demo on the fake providers"
    return False, f"using {config_path} with keys from the environment"


def demo_config(port: int) -> Config:
    text = DEMO_CONFIG.read_text().replace("127.0.0.1:8700", f"127.0.0.1:{port}")
    return parse_config(tomllib.loads(text), source=str(DEMO_CONFIG))


Incident = tuple[str, float, float, str]


def plan_incidents(fake: FakeProviders, incidents: tuple[Incident, ...] = INCIDENTS) -> None:
    for model, start, duration, fault in incidents:
        fake.schedule(
            model,
            flapping=[{"period_s": CYCLE_S, "down_s": duration, "offset_s": start, "fault": fault}],
        )
    # Latency like a hosted model's: most answers in well under a second, a long tail.
    fake.latency(median_ms=350, p99_ms=2500, token_interval_ms=12)


@dataclass
class Tally:
    """What the console summary says every few seconds."""

    requests: int = 0
    by_fallback: int = 0
    failed: int = 0
    attempts: Counter[str] = field(default_factory=Counter)

    def record(self, attempt: Attempt) -> None:
        self.attempts[attempt.error_class or "ok"] += 1


async def run_demo(
    *,
    port: int = 8700,
    rate_per_s: float = 3.0,
    seed: int = 7,
    say: Say = print,
    incidents: tuple[Incident, ...] = INCIDENTS,
    report_every_s: float = 10.0,
    paths: DataPaths | None = None,
    gateway_port: int | None = None,
    dashboard_port: int | None = None,
) -> None:
    """With `paths`, every attempt is spooled there, and the scheduler, the gateway (on
    `gateway_port`) and the dashboard (on `dashboard_port`) run as their own processes on the
    demo routes, as in production."""
    os.environ.setdefault(DEMO_KEY_ENV, "demo-key-not-secret")
    tally = Tally()
    async with (
        FakeProviders("127.0.0.1", port) as fake,
        _processes(paths, fake.port, gateway_port, dashboard_port, say),
    ):
        plan_incidents(fake, incidents)
        sw = Switchover(demo_config(fake.port), hooks=[tally.record], record_to=paths)
        say(f"fake providers on {fake.base_url} (control: {fake.base_url}/_fake/log)")
        say("incidents every 15 min: " + "; ".join(
            f"{model} {fault.split(':')[0]} at +{start:g}s for {duration:g}s"
            for model, start, duration, fault in incidents
        ))  # fmt: skip
        say("Ctrl-C stops the demo")
        async with sw:
            reporter = asyncio.create_task(_report(sw, tally, say, report_every_s, paths))
            try:
                await _send_traffic(sw, tally, Traffic(seed), rate_per_s, say)
            finally:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter


async def _send_traffic(
    sw: Switchover, tally: Tally, traffic: Traffic, rate_per_s: float, say: Say
) -> None:
    in_flight: set[asyncio.Task[None]] = set()
    try:
        while True:
            route, request = traffic.next()
            task = asyncio.create_task(_one(sw, tally, route, request, say))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            await asyncio.sleep(traffic.rng.expovariate(rate_per_s))
    finally:
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)


async def _one(sw: Switchover, tally: Tally, route: str, request, say: Say) -> None:
    tally.requests += 1
    try:
        if request.stream:
            answer = await _streamed(sw, route, request)
        else:
            answer = await sw.complete(route, request)
    except ChainError as exc:
        tally.failed += 1
        say(f"{_now()} {route:<9} FAILED  {exc}")
        return
    attempts = answer.attempts
    served = next((a for a in attempts if a.served), None)
    if served is not None and served.fallback_depth > 0:
        tally.by_fallback += 1
    if len(attempts) > 1 or (served is not None and served.fallback_depth > 0):
        path = " → ".join(
            f"{a.target} {a.error_class or 'ok'}" + (f" ({a.http_status})" if a.http_status else "")
            for a in attempts
        )
        if attempts[0].fallback_depth > 0:
            path = "earlier targets skipped (breaker open or cooling) → " + path
        say(f"{_now()} {route:<9} {path}")


async def _streamed(sw: Switchover, route: str, request) -> Response | MessageEnd | StreamError:
    last = None
    async for event in sw.stream(route, request):
        if not isinstance(event, StreamStart):
            last = event
    if isinstance(last, StreamError):
        raise ChainError(f"stream broke after it began: {last.message}", last.attempts)
    assert isinstance(last, MessageEnd)
    return last


async def _report(
    sw: Switchover, tally: Tally, say: Say, every_s: float, paths: DataPaths | None
) -> None:
    while True:
        await asyncio.sleep(every_s)
        breakers = await sw.breakers.snapshot_all()
        unhealthy = [_breaker_line(key, state) for key, state in sorted(breakers.items())]
        unhealthy = [line for line in unhealthy if line]
        share = tally.by_fallback / tally.requests if tally.requests else 0.0
        say(
            f"{_now()} ── {tally.requests} requests, {tally.by_fallback} served by a fallback "
            f"({share:.0%}), {tally.failed} failed"
            + (" │ " + "; ".join(unhealthy) if unhealthy else " │ all breakers closed")
            + _telemetry_line(sw, paths)
        )


def _telemetry_line(sw: Switchover, paths: DataPaths | None) -> str:
    if sw.recorder is None or paths is None:
        return ""
    stats = sw.recorder.stats()
    line = f" │ spooled {stats.written}"
    if stats.dropped:
        line += f" (dropped {stats.dropped})"
    recent = read_manifest(paths.published).get(RECENT_ATTEMPTS)
    if recent is not None:
        age = (datetime.now(UTC) - recent.written_at).total_seconds()
        line += f", published {age:.0f} s ago"
    return line


@contextlib.asynccontextmanager
async def _processes(
    paths: DataPaths | None,
    fake_port: int,
    gateway_port: int | None,
    dashboard_port: int | None,
    say: Say,
) -> AsyncIterator[None]:
    if paths is None:
        yield
        return
    paths.root.mkdir(parents=True, exist_ok=True)
    (paths.root / DEMO_MARKER).write_text(
        "This data folder holds demo data: fake providers and simulated history.\n"
    )
    config = paths.root / "demo-runtime.toml"  # the demo routes, on this run's fake providers
    config.write_text(DEMO_CONFIG.read_text().replace("127.0.0.1:8700", f"127.0.0.1:{fake_port}"))
    if gateway_port is None:
        async with child("scheduler", ["scheduler", "--data-dir", str(paths.root),
                                       "--config", str(config)], say):  # fmt: skip
            yield
        return
    async with contextlib.AsyncExitStack() as running:
        await running.enter_async_context(
            stack(config, paths, gateway_port=gateway_port, say=say, dashboard_port=dashboard_port)
        )
        if not (paths.root / HISTORY_MARKER).exists():
            say("seeding 14 days of demo history in the background (about a minute)")
            await running.enter_async_context(
                child("demo history", ["demo-history", "--data-dir", str(paths.root)], say)
            )
        yield


def _breaker_line(key: str, state: BreakerState) -> str:
    if state.status == "open":
        return f"{key} OPEN ({state.open_reason})"
    if state.status == "half_open":
        return f"{key} half-open"
    return ""


def _now() -> str:
    return time.strftime("%H:%M:%S")
