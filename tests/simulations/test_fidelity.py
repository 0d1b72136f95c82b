"""Fidelity: a scenario run live (fake providers over HTTP following its fault schedule, the
real engine, a traffic generator, 40 times faster than real time) and its simulation agree
within ± 5 % on requests failed, fallback rate and cost."""

from __future__ import annotations

import asyncio

import pytest

from engine.paths import DataPaths
from simulations.arrivals import arrivals
from simulations.live import run_live
from simulations.scenario import compressed, parse_scenario
from simulations.simulate import run_once, with_backup

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


def _close(simulated: float, live: float, what: str) -> None:
    assert simulated == pytest.approx(live, rel=0.05, abs=2), f"{what}: {simulated} vs {live}"


def test_a_scenario_run_live_and_simulated_agree_within_five_percent(tmp_path):
    scenario = compressed(parse_scenario(SCENARIO), FACTOR)
    sent = len(arrivals(scenario))
    simulated = run_once(scenario, with_backup(scenario.config, BACKUP), arrivals(scenario),
                         DataPaths(tmp_path / "simulated"), backup=BACKUP)  # fmt: skip
    live = asyncio.run(run_live(scenario, BACKUP, DataPaths(tmp_path / "live")))

    assert simulated.requests == live.requests == sent
    assert live.failed > 0, "the backup's own outage fails requests in both"
    _close(simulated.failed, live.failed, "requests failed")
    _close(simulated.fallback_rate, live.fallback_rate, "fallback rate")
    _close(float(simulated.cost_usd), float(live.cost_usd), "cost")
