"""The demo's incident plan as ground truth: its faults played for several cycles on a virtual
clock through the real chains, recorder, scheduler pipeline (ingest, rollups, alerts,
incidents, outbox) and a local receiver, with a scheduler restart and a late spool file in the
middle. What the plan injected is known exactly (`Injected`), so what the product recorded can
be compared with it.

    soak = PlanSoak(tmp_path, receiver_url=url)
    soak.run()
    soak.injected      # one row per fault the plan injected
    soak.query("SELECT ... FROM incidents")

Nothing here computes an incident: the scheduler's pipeline does, as in production. The
harness only sends traffic, moves the clock, runs a cycle every `cycle_s` and, for the late
file, holds back the spool files written in one stretch and hands them over later (a gateway
that could not reach the spool, then could).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.config import Config, parse_config
from engine.core.clock import VirtualClock
from engine.core.errors import ChainError
from engine.core.paths import DataPaths
from engine.published.read import PublishedData
from engine.runtime.build import build_pricer
from engine.runtime.switchover import Switchover
from engine.scheduler.pipeline import Pipeline
from simulations.demo.console import Changes, records
from simulations.demo.traffic import Traffic
from simulations.demo.up import CYCLE_S, INCIDENTS, demo_text
from simulations.fakes import FakeTransport

# A Monday: the soak is in one report week. Not on a minute's edge: a fault that begins inside a
# busy minute (a refused key after a dozen answers) must make its incident all the same.
START = datetime(2026, 11, 23, 9, 0, 37, tzinfo=UTC)
KEY_ENV = "SWITCHOVER_DEMO_KEY"
# The fake's fault of each plan line and the incident family it must make.
FAMILY = {"overloaded": "availability", "rate_limit": "rate_limit", "auth": "account"}


@dataclass(frozen=True, slots=True)
class Injected:
    """One fault the plan played: on `target`, of `family`, over [start, end)."""

    target: str
    family: str
    start: datetime
    end: datetime


@dataclass(frozen=True, slots=True)
class Stretch:
    """Minutes from the soak's start: [start, end)."""

    start: float
    end: float


class PlanSoak:
    def __init__(
        self,
        root: Path,
        *,
        cycles: int = 4,
        rate_per_s: float = 2.0,
        cycle_s: float = 30.0,
        tail_min: float = 10.0,
        restart_at_min: float = 16.5,
        held_back: Stretch = Stretch(33.0, 36.5),
        handed_over_at_min: float = 42.0,
        receiver_url: str | None = None,
        seed: int = 7,
    ) -> None:
        """`cycles` of the demo's plan, then `tail_min` minutes of healthy traffic so that the
        last incidents end; `restart_at_min`: the scheduler is stopped and a new one started
        on the same data folder; the spool files written in `held_back` reach the spool only
        at `handed_over_at_min`."""
        self.paths = DataPaths(root / "data")
        self.clock = VirtualClock(wall_start=START)
        self.transport = FakeTransport(clock=self.clock, seed=seed)
        self.cycles, self.rate, self.cycle_s, self.tail_min = cycles, rate_per_s, cycle_s, tail_min
        self.restart_at_min = restart_at_min
        self.held_back, self.handed_over_at_min = held_back, handed_over_at_min
        self.seed = seed
        self.config = _demo_config(receiver_url)
        self.injected = self._plan()
        self.sw = Switchover(
            self.config,
            clock=self.clock,
            transport=self.transport,
            record_to=self.paths,
            environ={KEY_ENV: "demo-key-not-secret"},
        )
        self.pipeline = self._pipeline()
        self.restarts = 0
        # The demo's console, reading the published snapshots after each cycle, restarted with
        # the scheduler: what it said is what an operator watching `switchover up` read.
        self._console_state = self.paths.root / "state" / "console.json"
        self.console = Changes(self._console_state)
        self.said: list[tuple[datetime, str]] = []
        self._holding = self.paths.root / "held-back-spool"
        self.requests = 0

    @property
    def end(self) -> datetime:
        return START + timedelta(minutes=self.cycles * CYCLE_S / 60 + self.tail_min)

    def _plan(self) -> list[Injected]:
        """The demo's plan (simulations.demo.up.INCIDENTS) for `cycles` cycles, as the fake's
        schedule and as the list of what it injected."""
        injected: list[Injected] = []
        for model, offset, duration, fault in INCIDENTS:
            windows = []
            for cycle in range(self.cycles):
                begins = cycle * CYCLE_S + offset
                windows.append({"start_s": begins, "end_s": begins + duration, "fault": fault})
                injected.append(
                    Injected(
                        _target(self.config, model),
                        FAMILY[fault.split(":")[0]],
                        START + timedelta(seconds=begins),
                        START + timedelta(seconds=begins + duration),
                    )
                )
            self.transport.schedule(model, windows=windows)
        self.transport.latency(median_ms=350, p99_ms=2500, token_interval_ms=12)
        return sorted(injected, key=lambda i: (i.start, i.target))

    def _pipeline(self) -> Pipeline:
        return Pipeline(
            self.paths,
            build_pricer(self.config),
            now=self.clock.wall,
            alerting=self.config.alerting,
        )

    def run(self) -> None:
        chain_log = logging.getLogger("switchover.chain")
        alerts_log = logging.getLogger("switchover.alerts")
        levels = chain_log.level, alerts_log.level
        chain_log.setLevel(logging.ERROR)  # the plan's key refusals are expected, not news
        alerts_log.setLevel(logging.ERROR)
        try:
            self.clock.run(self._traffic())
            self._cycle()  # what the last requests left
        finally:
            chain_log.setLevel(levels[0])
            alerts_log.setLevel(levels[1])

    async def _traffic(self) -> None:
        """Poisson arrivals of the demo's traffic, each request on its own task; a scheduler
        cycle every `cycle_s` of virtual time."""
        traffic = Traffic(self.seed)
        tasks: set[asyncio.Task[None]] = set()
        began = self.clock.now()
        stop = (self.end - START).total_seconds()
        elapsed, next_cycle = 0.0, self.cycle_s
        restarted = handed_over = False
        while True:
            elapsed += traffic.rng.expovariate(self.rate)
            while next_cycle <= min(elapsed, stop):
                await self.clock.sleep(began + next_cycle - self.clock.now())
                minute = next_cycle / 60
                if not restarted and minute >= self.restart_at_min:
                    self.restart()
                    restarted = True
                if not handed_over and minute >= self.handed_over_at_min:
                    self._hand_over()
                    handed_over = True
                self._cycle()
                next_cycle += self.cycle_s
            if elapsed >= stop:
                break
            await self.clock.sleep(began + elapsed - self.clock.now())
            route, request = traffic.next()
            task = asyncio.create_task(self._one(route, request.replace(stream=False)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            self.requests += 1
        await asyncio.gather(*tasks)
        await self.sw.aclose()

    async def _one(self, route: str, request: Any) -> None:
        with contextlib.suppress(ChainError):  # a failed request is recorded like any other
            await self.sw.complete(route, request)

    def _cycle(self) -> None:
        assert self.sw.recorder is not None
        self.sw.recorder.flush()
        minute = (self.clock.wall() - START).total_seconds() / 60
        if self.held_back.start <= minute < self.held_back.end + self.cycle_s / 60:
            self._hold_back()
        self.pipeline.cycle()
        sender = self.pipeline.watch.outbox._sender
        if sender is not None:  # let this pass's deliveries finish before time moves on
            assert sender.wait_idle(10)
        self._listen()

    def _listen(self) -> None:
        published = PublishedData(self.paths.published)
        try:
            alerts = records(published.query("alerts", since=START))
            incidents = records(published.query("incidents", since=START))
        finally:
            published.close()
        lines = self.console.alerts(alerts) + self.console.incidents(incidents)
        self.said += [(self.clock.wall(), line) for line in lines]
        self.console.save()

    def _hold_back(self) -> None:
        self._holding.mkdir(parents=True, exist_ok=True)
        for file in self.paths.spool.glob("*.parquet"):
            os.replace(file, self._holding / file.name)

    def _hand_over(self) -> None:
        for file in sorted(self._holding.glob("*.parquet")):
            os.replace(file, self.paths.spool / file.name)

    def restart(self) -> None:
        """The scheduler stops and a new one starts on the same data folder: nothing of the
        old one's memory survives."""
        self.pipeline.close()
        self.pipeline = self._pipeline()
        self.console = Changes(self._console_state)
        self.restarts += 1

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple]:
        return self.pipeline.con.execute(sql, params or {}).fetchall()

    def close(self) -> None:
        self.pipeline.close()


def _target(config: Config, model: str) -> str:
    [name] = {t.name for route in config.routes.values() for t in route.targets if t.model == model}
    return name


def _demo_config(receiver_url: str | None) -> Config:
    """data/demo.toml, with a JSON receiver at `receiver_url` when given."""
    data = tomllib.loads(demo_text(8700))
    if receiver_url is not None:
        data.setdefault("alerting", {})["receivers"] = [
            {"name": "oncall", "kind": "json", "url": receiver_url}
        ]
    return parse_config(data, source="the soak's demo configuration")
