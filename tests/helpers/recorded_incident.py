"""Recorded traffic for What-if's scenarios from the store: real chain traffic on the fake
providers (tests/helpers/alert_harness.py `World`), with latency like a hosted model's and the
support primary down for ten minutes, ending now; every minute through the real scheduler pass, then
the scheduler's traffic-profile job (`Pipeline.traffic_profile`), which publishes what
simulations.whatif.from_store reads; and its routes as the switchover.toml the page reads from
$SWITCHOVER_CONFIG."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.core.paths import DataPaths
from helpers.alert_harness import PRIMARY, World, config

BEFORE, OUTAGE, AFTER = 20, 10, 15  # minutes
ROUTES = f"""
[providers.claude]
kind = "anthropic"
base_url = "http://fake"
api_key_env = "K"

[providers.gpt]
kind = "openai"
base_url = "http://fake/v1"
api_key_env = "K"

[routes.support]
targets = ["claude/{PRIMARY}", "gpt/gpt-4.1-mini"]
"""


def recorded(folder: Path) -> tuple[DataPaths, Path]:
    """The data folder under `folder`, published, and the switchover.toml of its routes."""
    minutes = BEFORE + OUTAGE + AFTER
    start = (datetime.now(UTC) - timedelta(minutes=minutes)).replace(second=0, microsecond=0)
    world = World(folder, config([], rules=None), start=start, per_minute=6)
    world.transport.latency(median_ms=400, p99_ms=2500)
    try:
        world.minutes(BEFORE)
        world.primary_fails("overloaded", minutes=OUTAGE)
        world.minutes(OUTAGE + AFTER)
        assert world.pipeline.traffic_profile(), "a new scheduler publishes the profile at once"
    finally:
        world.close()
    routes = folder / "switchover.toml"
    routes.write_text(ROUTES)
    return world.paths, routes
