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
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from engine.breaker import MemoryBreakerStore
from engine.breaker_events import recording_changes
from engine.chain import Chain, Target
from engine.clock import VirtualClock
from engine.config import Config, ProviderConfig, RouteConfig, parse_target
from engine.errors import ChainError, ConfigError
from engine.paths import DataPaths
from engine.pricing import Pricer, known_price_provider
from engine.recorder import Recorder
from engine.scheduler import Pipeline
from engine.switchover import breaker_policies
from engine.types import Message, Request
from simulations.history import daily_curve
from simulations.scenario import Scenario
from simulations.simulated import SimulatedProvider

Progress = Callable[[str, float], None]  # (what, share done)


@dataclass(frozen=True, slots=True)
class Arrival:
    at_s: float  # from the scenario's start
    route: str
    input_tokens: int
    output_tokens: int


@dataclass
class RunResult:
    label: str  # "baseline" or the backup candidate
    backup: str | None
    requests: int
    failed: int
    answered_by_fallback: int
    cost_usd: Decimal
    fallback_premium_usd: Decimal
    cache_loss_usd: Decimal
    rewarm_usd: Decimal
    wasted_usd: Decimal
    unpriced_attempts: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    backup_peak_rpm: int = 0
    backup_peak_tpm: int = 0
    backup_rpm_limit: int | None = None
    backup_tpm_limit: int | None = None
    incidents: int = 0
    fallback_by_minute: list[tuple[str, float]] = field(default_factory=list)
    seconds: float = 0.0  # wall time the run took

    @property
    def fallback_rate(self) -> float:
        return self.answered_by_fallback / self.requests if self.requests else 0.0

    @property
    def price_difference_usd(self) -> Decimal:
        return self.fallback_premium_usd - self.cache_loss_usd

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


@dataclass
class Comparison:
    scenario: str
    baseline: RunResult
    candidates: list[RunResult]

    def extra_cost(self, run: RunResult) -> Decimal:
        return run.cost_usd - self.baseline.cost_usd

    def added_latency_ms(self, run: RunResult, which: str = "p99") -> float | None:
        mine = getattr(run, f"latency_{which}_ms")
        base = getattr(self.baseline, f"latency_{which}_ms")
        return None if mine is None or base is None else mine - base


def arrivals(scenario: Scenario) -> list[Arrival]:
    """The scenario's requests: Poisson arrivals at `rate_per_s` (thinned by the daily curve),
    routes by share, sizes around their means; seeded, so every run sees the same traffic."""
    rng = random.Random(scenario.seed)
    routes = list(scenario.routes.items())
    weights = [r.share for _, r in routes]
    out, t = [], 0.0
    while True:
        t += rng.expovariate(scenario.rate_per_s)
        if t >= scenario.duration_s:
            return out
        if scenario.daily_curve and rng.random() > daily_curve(
            scenario.start + timedelta(seconds=t)
        ):
            continue
        name, route = rng.choices(routes, weights)[0]
        out.append(Arrival(t, name, max(1, round(route.input_tokens * rng.uniform(0.7, 1.3))),
                           max(1, round(route.output_tokens * rng.uniform(0.6, 1.4)))))  # fmt: skip


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
        routes[name] = RouteConfig(name, tuple(targets), route.policy)
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


_FIGURES = """
    SELECT sum(requests)::BIGINT, sum(unavailable + broken_streams)::BIGINT,
        sum(answered_by_fallback)::BIGINT, coalesce(sum(cost_usd), 0),
        coalesce(sum(fallback_premium_usd), 0), coalesce(sum(cache_loss_usd), 0),
        coalesce(sum(rewarm_usd), 0), coalesce(sum(wasted_usd), 0),
        coalesce(sum(unpriced_attempts), 0)::BIGINT
    FROM rollup_minute
"""
_LATENCY = """
    SELECT quantile_cont(ms, 0.5), quantile_cont(ms, 0.99) FROM (
        SELECT (max(epoch_us(started_at) + latency_ms * 1000) - min(epoch_us(started_at)))
            / 1000 AS ms
        FROM attempts GROUP BY request_id HAVING NOT bool_or(decision = 'fail_fast'))
"""
_PEAK = """
    SELECT coalesce(max(n), 0)::BIGINT, coalesce(max(tokens), 0)::BIGINT FROM (
        SELECT count(*) AS n,
            sum(input_tokens + cache_read_tokens + cache_write_tokens + output_tokens) AS tokens
        FROM attempts WHERE target = $target
        GROUP BY time_bucket(INTERVAL 1 MINUTE, started_at))
"""
_FALLBACK_OVER_TIME = """
    SELECT bucket, sum(answered_by_fallback) / nullif(sum(requests), 0) FROM (
        SELECT time_bucket(INTERVAL 5 MINUTE, bucket) AS bucket, requests, answered_by_fallback
        FROM rollup_minute)
    GROUP BY bucket ORDER BY bucket
"""


def results_of(pipeline: Pipeline, label: str, backup: str | None, scenario: Scenario) -> RunResult:
    con = pipeline.con
    (requests, failed, by_fallback, cost, premium, cache_loss, rewarm, wasted,
     unpriced) = con.execute(_FIGURES).fetchone()  # fmt: skip
    p50, p99 = con.execute(_LATENCY).fetchone()
    result = RunResult(
        label, backup, requests or 0, failed or 0, by_fallback or 0, Decimal(cost),
        Decimal(premium), Decimal(cache_loss), Decimal(rewarm), Decimal(wasted), unpriced,
        p50, p99,
    )  # fmt: skip
    (result.incidents,) = con.execute("SELECT count(*) FROM incidents").fetchone()
    result.fallback_by_minute = [
        (bucket.isoformat(), float(rate or 0.0))
        for bucket, rate in con.execute(_FALLBACK_OVER_TIME).fetchall()
    ]
    if backup is not None:
        peak_rpm, peak_tpm = con.execute(_PEAK, {"target": backup}).fetchone()
        limits = scenario.limits.get(backup)
        result.backup_peak_rpm, result.backup_peak_tpm = peak_rpm, peak_tpm
        if limits is not None:
            result.backup_rpm_limit, result.backup_tpm_limit = limits.rpm, limits.tpm
    return result


def _second_target(config: Config) -> str:
    for route in config.routes.values():
        if len(route.targets) > 1:
            return route.targets[1].name
    raise ConfigError("the scenario's routes have no backup: give one with --backup")


def slug(text: str) -> str:
    """A name as a file or folder name: lower-case letters and digits joined by dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def as_json(comparison: Comparison) -> dict:
    """The comparison as plain JSON types (money as strings, exact)."""

    def run(r: RunResult) -> dict:
        body = {k: (str(v) if isinstance(v, Decimal) else v)
                for k, v in dataclasses.asdict(r).items()}  # fmt: skip
        body.update(fallback_rate=r.fallback_rate, price_difference_usd=str(r.price_difference_usd),
                    requests_per_s=r.requests_per_s)  # fmt: skip
        if r is not comparison.baseline:
            body["extra_cost_usd"] = str(comparison.extra_cost(r))
            body["added_latency_p50_ms"] = comparison.added_latency_ms(r, "p50")
            body["added_latency_p99_ms"] = comparison.added_latency_ms(r, "p99")
        return body

    return {
        "scenario": comparison.scenario,
        "baseline": run(comparison.baseline),
        "candidates": [run(c) for c in comparison.candidates],
    }
