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
import multiprocessing
import os
import pickle
import random
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from queue import Empty
from typing import Any

import numpy as np
import pyarrow as pa

from engine.config import Config
from engine.core.clock import VirtualClock
from engine.core.errors import ChainError
from engine.core.messages import Message, Request
from engine.core.paths import DataPaths
from engine.runtime.build import breaker_changes, breaker_policies, build_pricer
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from engine.telemetry.recorder import Recorder
from simulations.whatif import fastforward_rows
from simulations.whatif.arrivals import Traffic, arrivals
from simulations.whatif.calibration import NANO, Calibration
from simulations.whatif.candidates import default_candidate, refuse_failing, with_backup
from simulations.whatif.fastforward import Columns, FastForward
from simulations.whatif.fastforward_rows import BUSY_MARGIN, QuietMinutes
from simulations.whatif.pending_breakers import PendingBreakers
from simulations.whatif.results import Comparison, RunResult, results_of
from simulations.whatif.scenario import Scenario, slug
from simulations.whatif.simulated import (
    CURRENT,
    Caches,
    MinuteLimits,
    RequestDraws,
    RequestJitter,
    SimulatedProvider,
)

Progress = Callable[[str, float], None]  # (what, share done)


def run_once(
    scenario: Scenario,
    config: Config,
    traffic: Any,
    paths: DataPaths,
    *,
    faults: bool = True,
    label: str = "run",
    backup: str | None = None,
    progress: Progress | None = None,
    fast_forward: bool = True,
    busy_margin: int = BUSY_MARGIN,
) -> RunResult:
    """One run of `traffic` through `config`'s chains into the store at `paths`: every request
    through the chain, or with `fast_forward` (the default) the quiet ones answered by
    simulations.whatif.fastforward, with the same result; those further than `busy_margin`
    minutes from every request the chain ran go straight into the minute rollups
    (simulations.whatif.fastforward_rows)."""
    shutil.rmtree(paths.root, ignore_errors=True)
    run = _Run(scenario, config, traffic, paths, faults=faults, fast_forward=fast_forward)
    started = time.perf_counter()
    run.clock.run(run.drive(label, progress))
    quiet = run.finish(busy_margin)
    seconds = time.perf_counter() - started
    end = scenario.start + timedelta(seconds=scenario.duration_s)
    # Priced as the recorder prices; the quiet minutes added to the rollups as they are made.
    pipeline = Pipeline(
        paths, run.pricer, now=lambda: end, after_minutes=quiet.merge, publish=False
    )
    seed_cache_baselines(pipeline.con, scenario, config)
    alerts_log = logging.getLogger("switchover.alerts")
    level = alerts_log.level
    alerts_log.setLevel(logging.ERROR)  # a simulated incident's alerts are not news
    try:
        pipeline.cycle()
        quiet.store(pipeline.con)
        result = results_of(pipeline.con, label, backup, scenario)
    finally:
        pipeline.close()
        alerts_log.setLevel(level)
    result.seconds = seconds
    if progress is not None:
        progress(label, 1.0)
    return result


def seed_cache_baselines(con: Any, scenario: Scenario, config: Config) -> None:
    """The primary's healthy cache-hit ratio of each route, for every hour of the run: the
    scenario's `cached_share` (for a replay, what the store recorded). The rollups take it from
    the primary's answers in the day before each hour, which a run's own store does not have:
    without it every prompt cache a fallback lost in the run's first hours read as $0."""
    first = scenario.start.replace(minute=0, second=0, microsecond=0)
    # and the hour after: a request that arrived in the last seconds may end in it
    end = scenario.start + timedelta(seconds=scenario.duration_s, hours=1)
    hours = []
    while first < end:
        hours.append(first)
        first += timedelta(hours=1)
    seeded = [
        (name, hour, traffic.cached_share)
        for name, traffic in scenario.routes.items()
        if name in config.routes
        for hour in hours
    ]
    if seeded:  # as one table: executemany costs a millisecond a row
        route, hour, ratio = zip(*seeded, strict=True)
        con.register(
            "seeded_baselines", pa.table({"route": route, "hour": hour, "hit_ratio": ratio})
        )
        try:
            con.execute(
                "INSERT OR REPLACE INTO baselines (route, hour, hit_ratio, given)"
                " SELECT route, hour, hit_ratio, true FROM seeded_baselines"
            )
        finally:
            con.unregister("seeded_baselines")


class _Run:
    """One run's world: the simulated providers, the production chains over them (built by
    `Switchover`, as production builds them), the recorder and the fast-forward."""

    def __init__(
        self,
        scenario: Scenario,
        config: Config,
        traffic: Any,
        paths: DataPaths,
        *,
        faults: bool,
        fast_forward: bool,
    ) -> None:
        self.scenario, self.paths = scenario, paths
        self.clock = VirtualClock(start=0.0, wall_start=scenario.start)
        self.traffic = Columns.of(traffic)
        n = len(self.traffic)
        self.first_z = np.random.default_rng(scenario.seed + 1).standard_normal(n)
        self.served: dict[Any, list[float]] = defaultdict(list)
        caches = Caches(on_served=lambda key, at: self.served[key].append(at))
        for name in scenario.routes:
            if name in config.routes and scenario.routes[name].cached_share > 0:
                # The primary served this route before the scenario began: its cache is warm
                # (as a recorded incident's was), a backup's cold.
                caches.served((config.routes[name].targets[0].model, name), 0.0)
        active = scenario.faults if faults else ()
        limits = MinuteLimits(scenario.limits)
        providers = {
            name: SimulatedProvider(
                name,
                pc.kind,
                clock=self.clock,
                rng=random.Random(scenario.seed + 1),
                start=0.0,
                faults=active,
                routes=scenario.routes,
                median_ms=scenario.median_ms,
                p99_ms=scenario.p99_ms,
                limits=limits,
                latency=scenario.target_latency,
                caches=caches,
            )
            for name, pc in config.providers.items()
        }
        self.pricer = build_pricer(config)
        self.recorder = Recorder(
            paths.spool,
            pricer=self.pricer,
            flush_rows=20_000,
            max_buffered=5_000_000,
            fsync=False,
            clock=self.clock,
        )
        self.breakers = PendingBreakers(
            config.policy.breaker_policy(),
            policies_by_key=breaker_policies(config),
            on_change=breaker_changes(self.recorder, self.clock),
        )
        self.host = Switchover(
            config,
            clock=self.clock,
            breakers=self.breakers,
            hooks=[self.recorder],
            providers=providers,
            rng=RequestJitter(),
        )
        self.ff: FastForward | None = None
        if fast_forward:
            self.ff = FastForward(
                dataclasses.replace(scenario, faults=active),
                config,
                self.traffic,
                self.first_z,
                providers,
                self.breakers,
                caches,
                limits,
                self.host.switches,
            )
            self.host.add_hook(self.ff.learn)
        self._seed = scenario.seed * 1_000_003
        self._tasks: set[asyncio.Task[None]] = set()

    async def one(self, i: int) -> None:
        t = self.traffic
        route = t.routes[t.route[i]]
        CURRENT.set(RequestDraws(self._seed + i, float(self.first_z[i])))
        request = Request(
            messages=(Message.user("x" * (4 * int(t.input_tokens[i]))),),
            max_tokens=int(t.output_tokens[i]),
            feature=route,
            cache_system=self.scenario.routes[route].cached_share > 0,
        )
        with contextlib.suppress(ChainError):  # a failed request is recorded like any other
            # Its own number, not a fresh UUID: the system's randomness for an id nobody
            # reads across runs is a twentieth of a chain request's cost.
            await self.host.chain(route).complete(request, request_id=f"sim-{i}")

    async def drive(self, label: str, progress: Progress | None) -> None:
        t, clock, ff = self.traffic, self.clock, self.ff
        n = len(t)
        step, told = max(1, n // 100), -1
        i = 0
        while i < n:
            if progress is not None and i // step != told:
                told = i // step
                progress(label, i / n)
            if ff is not None:
                # Until the loop's next timer no chain request can act, so the state can change
                # only with time: every arrival before it that qualifies is answered at once,
                # up to the first that does not.
                j = ff.bulk(i, clock.now(), clock.quiet_until())
                if j > i:
                    i = j
                    continue
            await clock.sleep_until(float(t.at_s[i]))
            if ff is None or not ff.one(i, clock.now()):
                task = asyncio.create_task(self.one(i))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            i += 1
        await asyncio.gather(*self._tasks)

    def finish(self, busy_margin: int) -> QuietMinutes:
        self.breakers.finish()
        self.recorder.close()
        if self.ff is None:
            return QuietMinutes()
        return fastforward_rows.write(
            self.ff, self.paths.spool, self.pricer, self.scenario.start, self.served, busy_margin
        )


def simulate(
    scenario: Scenario,
    backups: list[str] | None = None,
    *,
    results_dir: Path,
    progress: Progress | None = None,
    processes: int | None = 1,
    on_run: Callable[[RunResult], None] | None = None,
    traffic: Traffic | None = None,
) -> Comparison:
    """The baseline and one run per backup candidate (the scenario's own when none given).
    `processes`: run the runs side by side in that many processes; None: one per core once
    the traffic is large enough to pay for starting them. Processes are spawned, so a script
    that asks for them must guard its main code (`if __name__ == "__main__":`); the command
    line and the What-if page's jobs do. `on_run`: told each run's result as it finishes (in
    any order), for partial results while the others go on. `traffic`: the scenario's
    arrivals, where the caller has drawn them already."""
    candidates = list(backups or scenario.backups) or [default_candidate(scenario)]
    refuse_failing(scenario, candidates)
    traffic = traffic if traffic is not None else arrivals(scenario)
    root = results_dir / slug(scenario.name)
    runs = [(BASELINE, None), *((backup, backup) for backup in candidates)]
    if scenario.recorded is not None:  # a replay: the chain that served, held against the record
        runs.append((AS_RECORDED, None))
    for _, backup in runs:
        if backup is not None:
            with_backup(scenario.config, backup)  # an unknown backup fails before any run
    if processes is None:
        processes = (os.cpu_count() or 1) if len(traffic) >= PARALLEL_FROM else 1
    workers = processes
    workers = min(workers, len(runs))
    if workers > 1 and _picklable(scenario):
        results = _in_processes(scenario, traffic, runs, root, workers, progress, on_run)
    else:
        results = []
        for label, backup in runs:
            results.append(_one_run(scenario, label, backup, root, traffic, progress))
            if on_run is not None:
                on_run(results[-1])
    compared = results[1 : 1 + len(candidates)]
    calibration = None
    if scenario.recorded is not None:
        served, scale = results[-1], scenario.traffic_scale  # a quick run: at full traffic
        calibration = Calibration.of(
            scenario.recorded,
            round(served.failed / scale),
            round(served.answered_by_fallback / scale),
            (served.cost_usd / Decimal(str(scale))).quantize(NANO),
            (served.cache_loss_usd / Decimal(str(scale))).quantize(NANO),
        )
    return Comparison(scenario.name, results[0], compared, calibration)


BASELINE = "baseline"  # the scenario's traffic with nothing failing
AS_RECORDED = "as recorded"  # a replay's faults through its own chain: what really served
# Below this many requests a run takes a few seconds: starting processes would cost as much.
PARALLEL_FROM = 200_000


def _one_run(
    scenario: Scenario,
    label: str,
    backup: str | None,
    root: Path,
    traffic: Any,
    progress: Progress | None,
) -> RunResult:
    config = scenario.config if backup is None else with_backup(scenario.config, backup)
    if label == AS_RECORDED and scenario.recorded_faults is not None:
        scenario = dataclasses.replace(scenario, faults=scenario.recorded_faults)
    paths = DataPaths(root / slug(label))
    return run_once(
        scenario,
        config,
        traffic,
        paths,
        faults=label != BASELINE,
        label=label,
        backup=backup,
        progress=progress,
    )


def _picklable(scenario: Scenario) -> bool:
    try:
        pickle.dumps(scenario)
    except Exception:  # a compiled output contract, say: run in this process
        return False
    return True


_progress_queue: Any = None


def _worker_init(queue: Any) -> None:
    global _progress_queue
    _progress_queue = queue


def _worker_run(
    scenario: Scenario, label: str, backup: str | None, root: Path, drawn: Path
) -> RunResult:
    def tell(what: str, share: float) -> None:
        _progress_queue.put((what, share))

    return _one_run(scenario, label, backup, root, Traffic.load(drawn), tell)


def _in_processes(
    scenario: Scenario,
    traffic: Traffic,
    runs: list[tuple[str, str | None]],
    root: Path,
    workers: int,
    progress: Progress | None,
    on_run: Callable[[RunResult], None] | None = None,
) -> list[RunResult]:
    """The runs in `workers` fresh processes (spawned: nothing of this one's threads or loops
    is inherited); the traffic, drawn once, through files; their progress through a queue."""
    drawn = root / ".traffic"
    traffic.save(drawn)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    stop = threading.Event()

    def relay() -> None:
        while not stop.is_set() or not queue.empty():
            try:
                what, share = queue.get(timeout=0.1)
            except Empty:
                continue
            if progress is not None:
                progress(what, share)

    relaying = threading.Thread(target=relay, name="simulation-progress", daemon=True)
    relaying.start()
    try:
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=_worker_init, initargs=(queue,)
        ) as pool:
            futures = [
                pool.submit(_worker_run, scenario, label, backup, root, drawn)
                for label, backup in runs
            ]
            for future in as_completed(futures):
                if on_run is not None:
                    on_run(future.result())
            return [future.result() for future in futures]
    finally:
        stop.set()
        relaying.join(timeout=5)
        shutil.rmtree(drawn, ignore_errors=True)
