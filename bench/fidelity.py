"""Fidelity: a scenario run live (the fake providers over HTTP following its fault schedule,
the real engine, a traffic generator, 40 times faster than real time) against its simulation
on a virtual clock, on requests failed, fallback rate and cost; the target is ± 5 %.

A measurement, not a test: the live side runs on the wall clock, so a loaded machine moves
its requests against the fault windows (a run beside the test suite on 2 cores read 223 failed
against the simulation's 210). Run it on a quiet machine:

    python -m bench.fidelity [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from engine.core.paths import DataPaths
from simulations.whatif.arrivals import arrivals
from simulations.whatif.live import run_live
from simulations.whatif.scenario import compressed, parse_scenario
from simulations.whatif.simulate import run_once, with_backup

SCENARIO = {
    "name": "fidelity",
    "duration": "40m",
    "start": "2026-11-23T12:00:00Z",
    "seed": 5,
    "providers": {"claude": {"kind": "anthropic"}, "gpt": {"kind": "openai"}},
    "routes": {"support": {"targets": ["claude/claude-sonnet-4-5", "gpt/gpt-4.1-mini"],
                           "budget_s": 20}},
    "traffic": {"rate_per_s": 1.2, "routes": {"support": {
        "share": 1, "input_tokens": 1200, "output_tokens": 150}}},
    "latency": {"median_ms": 600, "p99_ms": 2000},
    "faults": [
        {"target": "claude/claude-sonnet-4-5", "kind": "overloaded", "start": "8m", "end": "20m"},
        {"target": "gpt/gpt-4.1-mini", "kind": "server_error", "start": "14m", "end": "17m"},
    ],
}  # fmt: skip
BACKUP = "gpt/gpt-4.1-mini"
FACTOR = 40  # 40 minutes in one
TARGET = 0.05


def once(folder: Path) -> list[tuple[str, float, float]]:
    """(figure, simulated, live) for one live run beside the (deterministic) simulation."""
    scenario = compressed(parse_scenario(SCENARIO), FACTOR)
    simulated = run_once(scenario, with_backup(scenario.config, BACKUP), arrivals(scenario),
                         DataPaths(folder / "simulated"), backup=BACKUP)  # fmt: skip
    live = asyncio.run(run_live(scenario, BACKUP, DataPaths(folder / "live")))
    assert simulated.requests == live.requests, "both sides sent the same requests"
    return [
        ("requests failed", simulated.failed, live.failed),
        ("fallback rate", simulated.fallback_rate, live.fallback_rate),
        ("cost (USD)", float(simulated.cost_usd), float(live.cost_usd)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print("| run | figure | simulated | live | difference |\n|---|---|---|---|---|")
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="switchover-fidelity-") as folder:
            for figure, simulated, live in once(Path(folder)):
                off = (simulated - live) / live if live else 0.0
                mark = "" if abs(off) <= TARGET else " (over ± 5 %)"
                print(f"| {run} | {figure} | {simulated:.4g} | {live:.4g} | {off:+.1%}{mark} |")


if __name__ == "__main__":
    main()
