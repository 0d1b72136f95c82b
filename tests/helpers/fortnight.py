"""The demo's fortnight, as the weekly reports meet it: fourteen days of the demo's history
(simulations.demo.history: real chains on the fake providers, taken in by the scheduler as late
data) up to a Wednesday noon, then a quarter of an hour of live traffic through the real
recorder, scheduler pass and alerting, in which a fault drill of classify's primary meets its
backup failing (the drill makes requests fail, and ends itself at the first).

So the fortnight holds a partial week (W47, from Wednesday noon), a whole week (W48) and a week
to date (W49), incidents that raised no alert (history is never alerted on) and, in W49,
alerts, a drill and the failures it caused."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.core.paths import DataPaths
from engine.runtime.drills import start_drill
from engine.state.drills import Drill
from helpers.alert_harness import World
from simulations.demo.history import seed_history
from simulations.demo.up import DEMO_KEY_ENV, demo_config, demo_text

END = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # a Wednesday noon: W49 is a week to date
DAYS = 14
WEEKS = ("2026-W47", "2026-W48", "2026-W49")  # partial (history begins), whole, to date
DRILLED, BACKUP = "gpt/gpt-4.1-mini", "claude-haiku-4-5"  # classify's primary and backup
LIVE_MINUTES = 15


@dataclass(frozen=True)
class Fortnight:
    paths: DataPaths
    drill: Drill
    data_until: datetime  # the last cycle's time: the data's time


def demo_fortnight(folder: Path) -> Fortnight:
    """Seed, take in and run the live quarter of an hour; the data folder is `folder/data`."""
    paths = DataPaths(folder / "data")
    seed_history(paths, demo_config(8700), days=DAYS, end=END, environ={DEMO_KEY_ENV: "k"},
                 say=lambda _: None)  # fmt: skip
    world = World(folder, tomllib.loads(demo_text(8700)), start=END, per_minute=9,
                  routes=("support", "classify", "summarize"))  # fmt: skip
    try:
        world.minutes(4)
        drill = world.clock.run(
            start_drill(
                world.sw, "classify", DRILLED, timedelta(minutes=5), by="ops", now=world.now
            )
        )
        world.fails(BACKUP, "overloaded", minutes=3)
        world.minutes(LIVE_MINUTES - 4)
        world.pipeline.day_rollups()
        world.cycle()
        return Fortnight(paths, drill, world.now)
    finally:
        world.close()
