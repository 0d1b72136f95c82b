"""The what-if simulator's speed: simulated requests a second on a virtual clock
(`simulations.whatif.simulate.run_once`) on the week-long library scenario with its incident, with
the fast-forward (quiet requests answered as columns) and, as the baseline of the same run, every
request through the real chain; and what a week of traffic at 20 requests/s would take.

    python -m bench.simulator [--quick]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from engine.core.paths import DataPaths
from simulations.whatif.arrivals import arrivals
from simulations.whatif.candidates import with_backup
from simulations.whatif.scenario import load_scenario
from simulations.whatif.simulate import run_once

SCENARIO = "week-with-a-tuesday-outage"
TARGET_PER_S = 100_000  # the simulator issue's target


@dataclass(frozen=True, slots=True)
class Measured:
    requests: int
    chain_s: float  # traffic through the chain and the recorder, on the virtual clock
    store_s: float  # ingest, rollups and incidents of the run's results store

    @property
    def per_s(self) -> float:
        return self.requests / self.chain_s


def measure(scale: float, *, fast_forward: bool = True) -> Measured:
    scenario = load_scenario(SCENARIO).scaled(scale)
    traffic = arrivals(scenario)
    backup = scenario.backups[0]
    root = Path(tempfile.mkdtemp(prefix="switchover-bench-sim-"))
    try:
        started = time.perf_counter()
        run = run_once(scenario, with_backup(scenario.config, backup), traffic,
                       DataPaths(root), backup=backup, fast_forward=fast_forward)  # fmt: skip
        total = time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Measured(run.requests, run.seconds, total - run.seconds)


def section(fast: Measured, chain: Measured, *, scale: float, command: str, when: datetime) -> str:
    met = "met" if fast.per_s >= TARGET_PER_S else "**not met**"
    week = round(fast.requests / scale)  # the scenario's whole week (its daily curve)
    week_min = week / fast.per_s / 60
    week_store = fast.store_s * week / fast.requests / 60
    rows = [
        ("simulated requests/s (chain, fast-forward, recorder, spool)", f"{fast.per_s:,.0f}",
         f"{chain.per_s:,.0f}", f"≥ {TARGET_PER_S:,}: {met}"),
        ("ratio to the chain", f"{fast.per_s / chain.per_s:.1f}×", "1.0×", ""),
        ("results store (ingest, rollups, incidents)", f"{fast.store_s:,.1f} s",
         f"{chain.store_s:,.1f} s", ""),
        (f"the whole week, one run ({week:,} requests), estimated at these rates",
         f"{week_min:,.1f} min + store {week_store:,.1f} min",
         f"{week / chain.per_s / 60:,.0f} min", "< 2 min for three backups"),
    ]  # fmt: skip
    table = "\n".join("| " + " | ".join(row) + " |" for row in rows)
    return f"""## Simulator

`{command}` on {when:%Y-%m-%d %H:%M} UTC: the library scenario `{SCENARIO}` (7 days, 20
requests/s at the daily peak, Sonnet 529s for 2 h on Tuesday; one backup),
{fast.requests:,} requests with the fast-forward; every request through the chain, the
baseline, on {chain.requests:,} requests of the same scenario in the same run.

| figure | fast-forward | every request through the chain | target |
|---|--:|--:|---|
{table}
"""


def run(quick: bool, command: str) -> str:
    when = datetime.now(UTC)
    scale = 0.02 if quick else 0.25
    fast = measure(scale)
    chain = measure(scale / 5, fast_forward=False)
    text = section(fast, chain, scale=scale, command=command, when=when)
    print("\n" + text, flush=True)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.simulator", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 % of the scenario's traffic")
    args = parser.parse_args()
    run(args.quick, "python -m bench.simulator" + (" --quick" if args.quick else ""))


if __name__ == "__main__":
    main()
