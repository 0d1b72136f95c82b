"""The what-if simulator: a scenario's traffic through the real chain, once without the
incident (the baseline) and once per backup candidate with it, on a virtual clock.

    traffic (seeded, the same for every run) ──► Chain (real policy, breakers, retries)
        ──► SimulatedProvider (scenario: faults, latency, caches, rate limits)
        ──► Recorder ──► results/<run>/spool ──► Pipeline ──► results/<run>/switchover.duckdb

Every run has a store of its own under the results folder, never the live one, and its figures
are the live product's: the same recorder, pricing, rollups and incident detection. Results
compare each candidate with the baseline: cost, the fallback premium split into price
difference and cache loss, re-warm, wasted spend, failed requests, fallback rate over time,
added latency, and the backup's peak requests and tokens a minute against its rate limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import re
import shutil
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from engine.breaker import MemoryBreakerStore
from engine.breaker_events import recording_changes
from engine.chain import Chain, Target
from engine.clock import VirtualClock
from engine.config import Config, ProviderConfig, parse_target
from engine.errors import ChainError, ConfigError
from engine.paths import DataPaths
from engine.pricing import Pricer, known_price_provider
from engine.recorder import Recorder
from engine.scheduler import Pipeline
from engine.switchover import breaker_policies
from engine.types import Message, Request
from simulations.arrivals import Arrival, arrivals
from simulations.results import Comparison, RunResult, results_of
from simulations.scenario import Scenario
from simulations.simulated import SimulatedProvider

Progress = Callable[[str, float], None]  # (what, share done)


def with_backup(config: Config, backup: str) -> Config:
    """`config` with every route's second target (its first backup) replaced by `backup`, a
    `provider/model`: a provider of the config, a kind (`anthropic/…`, `openai/…`), or any
    genai-prices provider (`groq/…`, served over the OpenAI dialect)."""
    target = parse_target(backup)
    providers = dict(config.providers)
    if target.provider not in providers:
        if target.provider in ("anthropic", "openai"):
            providers[target.provider] = ProviderConfig(target.provider, target.provider, "")
        elif known_price_provider(target.provider):
            providers[target.provider] = ProviderConfig(
                target.provider, "openai", "", price_provider=target.provider
            )
        else:
            raise ConfigError(
                f"backup {backup!r}: {target.provider!r} is neither a provider of the scenario "
                "nor one genai-prices knows"
            )
    routes = {}
    for name, route in config.routes.items():
        targets = [t for t in route.targets if t != target]
        targets = [targets[0], target, *targets[2:]] if targets else [target]
        routes[name] = dataclasses.replace(route, targets=tuple(targets))  # every option kept
    return dataclasses.replace(config, providers=providers, routes=routes)


def run_once(
    scenario: Scenario,
    config: Config,
    traffic: list[Arrival],
    paths: DataPaths,
    *,
    faults: bool = True,
    label: str = "run",
    backup: str | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """One run of `traffic` through `config`'s chains into the store at `paths`."""
    shutil.rmtree(paths.root, ignore_errors=True)
    clock = VirtualClock(start=0.0, wall_start=scenario.start)
    rng = random.Random(scenario.seed + 1)
    providers = {
        name: SimulatedProvider(
            name, pc.kind, clock=clock, rng=rng, start=0.0,
            faults=scenario.faults if faults else (), routes=scenario.routes,
            median_ms=scenario.median_ms, p99_ms=scenario.p99_ms, limits=scenario.limits,
        )
        for name, pc in config.providers.items()
    }  # fmt: skip
    recorder = Recorder(paths.spool, pricer=Pricer.from_config(config), flush_rows=20_000,
                        max_buffered=5_000_000, fsync=False, clock=clock)  # fmt: skip
    breakers = MemoryBreakerStore(
        config.policy.breaker_policy(),
        policies_by_key=breaker_policies(config),
        on_change=recording_changes(recorder, clock),  # type: ignore[arg-type]
    )
    chains = {
        name: Chain(
            name,
            [Target(providers[t.provider], t.model, config.providers[t.provider].key_kind)  # type: ignore[arg-type]
             for t in route.targets],
            policy=route.policy, breakers=breakers, clock=clock, hooks=[recorder],
            rng=random.Random(scenario.seed + 2),  # retries' jitter: the same every run
        )
        for name, route in config.routes.items()
    }  # fmt: skip
    started = time.perf_counter()

    async def one(arrival: Arrival) -> None:
        cached = scenario.routes[arrival.route].cached_share > 0
        request = Request(
            messages=(Message.user("x" * (4 * arrival.input_tokens)),),
            max_tokens=arrival.output_tokens,
            feature=arrival.route,
            cache_system=cached,
        )
        with contextlib.suppress(ChainError):  # a failed request is recorded like any other
            await chains[arrival.route].complete(request)

    async def main() -> None:
        tasks: set[asyncio.Task[None]] = set()
        step = max(1, len(traffic) // 100)
        for i, arrival in enumerate(traffic):
            await clock.sleep(arrival.at_s - clock.now())
            task = asyncio.create_task(one(arrival))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            if progress is not None and i % step == 0:
                progress(label, i / len(traffic))
        await asyncio.gather(*tasks)

    clock.run(main())
    recorder.close()
    seconds = time.perf_counter() - started
    end = scenario.start + timedelta(seconds=scenario.duration_s)
    pipeline = Pipeline(paths, now=lambda: end)
    alerts_log = logging.getLogger("switchover.alerts")
    level = alerts_log.level
    alerts_log.setLevel(logging.ERROR)  # a simulated incident's alerts are not news
    try:
        pipeline.cycle()
        result = results_of(pipeline, label, backup, scenario)
    finally:
        pipeline.close()
        alerts_log.setLevel(level)
    result.seconds = seconds
    if progress is not None:
        progress(label, 1.0)
    return result


def simulate(
    scenario: Scenario,
    backups: list[str] | None = None,
    *,
    results_dir: Path,
    progress: Progress | None = None,
) -> Comparison:
    """The baseline and one run per backup candidate (the scenario's own when none given)."""
    candidates = list(backups or scenario.backups) or [_second_target(scenario.config)]
    traffic = arrivals(scenario)
    root = results_dir / slug(scenario.name)
    baseline = run_once(scenario, scenario.config, traffic, DataPaths(root / "baseline"),
                        faults=False, label="baseline", progress=progress)  # fmt: skip
    runs = [
        run_once(
            scenario,
            with_backup(scenario.config, backup),
            traffic,
            DataPaths(root / slug(backup)),
            label=backup,
            backup=backup,
            progress=progress,
        )
        for backup in candidates
    ]
    return Comparison(scenario.name, baseline, runs)


def _second_target(config: Config) -> str:
    for route in config.routes.values():
        if len(route.targets) > 1:
            return route.targets[1].name
    raise ConfigError("the scenario's routes have no backup: give one with --backup")


def slug(text: str) -> str:
    """A name as a file or folder name: lower-case letters and digits joined by dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
