"""One dataset for every dashboard test: 100 minutes of real chain traffic on the fake
providers, ending now, with the primary down from minute 70 to 80, run through the real
scheduler pass (rollups, alerts, incidents) and published."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from alerts.harness import World, config

MINUTES = 100
OUTAGE = (70, 80)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    start = (datetime.now(UTC) - timedelta(minutes=MINUTES)).replace(second=0, microsecond=0)
    world = World(tmp_path_factory.mktemp("dashboard"), config([], rules=None), start=start,
                  per_minute=6)  # fmt: skip
    try:
        world.minutes(OUTAGE[0])
        world.primary_fails("overloaded", minutes=OUTAGE[1] - OUTAGE[0])
        world.minutes(MINUTES - OUTAGE[0])
        attempts = world.pipeline.con.execute("SELECT * FROM attempts").df()
    finally:
        world.close()
    return world.paths, attempts, start


@pytest.fixture
def app_env(dataset, monkeypatch):
    paths, _, _ = dataset
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    return dataset
