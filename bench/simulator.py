"""The what-if simulator's speed: simulated requests a second through the real chain, breakers
and recorder on a virtual clock (`simulations.simulate.run_once`), on a library scenario with
its incident, and what a week of traffic at 20 requests/s would take at that rate.

    python -m bench.simulator [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from engine.paths import DataPaths
from simulations.arrivals import arrivals
from simulations.scenario import load_scenario
from simulations.simulate import run_once, with_backup

SCENARIO = "anthropic-529-peak"
TARGET_PER_S = 100_000  # the simulator issue's target
WEEK_AT_20_PER_S = 7 * 86_400 * 20


@dataclass(frozen=True, slots=True)
class Measured:
    requests: int
    chain_s: float  # traffic through the chain and the recorder, on the virtual clock
    store_s: float  # ingest, rollups and incidents of the run's results store

    @property
    def per_s(self) -> float:
        return self.requests / self.chain_s


def measure(scale: float) -> Measured:
    scenario = load_scenario(SCENARIO)
    scenario = dataclasses.replace(scenario, rate_per_s=scenario.rate_per_s * scale)
    traffic = arrivals(scenario)
    backup = scenario.backups[0]
    root = Path(tempfile.mkdtemp(prefix="switchover-bench-sim-"))
    try:
        started = time.perf_counter()
        run = run_once(scenario, with_backup(scenario.config, backup), traffic,
                       DataPaths(root), backup=backup)  # fmt: skip
        total = time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Measured(run.requests, run.seconds, total - run.seconds)


def section(m: Measured, *, command: str, when: datetime) -> str:
    met = "met" if m.per_s >= TARGET_PER_S else "**not met**"
    week_min = WEEK_AT_20_PER_S / m.per_s / 60
    return f"""## Simulator

`{command}` on {when:%Y-%m-%d %H:%M} UTC: the library scenario `{SCENARIO}` (its incident, one
backup), {m.requests:,} requests.

| figure | value | target |
|---|---|---|
| simulated requests/s (chain + recorder) | {m.per_s:,.0f} | ≥ {TARGET_PER_S:,}: {met} |
| results store (ingest, rollups, incidents) | {m.store_s:,.1f} s | |
| a week at 20 requests/s ({WEEK_AT_20_PER_S:,} requests) | {week_min:,.0f} min | < 2 min |
"""


def run(quick: bool, command: str) -> str:
    when = datetime.now(UTC)
    measured = measure(0.02 if quick else 0.25)
    text = section(measured, command=command, when=when)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.simulator", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 % of the scenario's traffic")
    args = parser.parse_args()
    run(args.quick, "python -m bench.simulator" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
