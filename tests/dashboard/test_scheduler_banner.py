"""The dashboard says what the scheduler's status file says: waiting for its database, gone, or
nothing at all while it runs. The sidebar says it on every page but Live, which refreshes
itself and says it at its top, inside its own refresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from helpers.dashboard_pages import open_page

from engine.core.paths import DataPaths
from engine.published.scheduler_status import write_status

LOCKED = (
    "data/switchover.duckdb is locked by another process (PID 4242): only one Switchover "
    "scheduler may run, and nothing else may open the database file"
)


@pytest.fixture
def paths(tmp_path, monkeypatch) -> DataPaths:
    paths = DataPaths(tmp_path / "data")
    paths.published.mkdir(parents=True)
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    return paths


def sidebar(at, kind: str) -> list[str]:
    return [e.value for e in getattr(at.sidebar, kind)]


def on_live(at, kind: str) -> list[str]:
    return [e.value for e in getattr(at.main, kind)]


def test_a_scheduler_waiting_for_its_database_shows_an_error_banner(paths: DataPaths):
    now = datetime.now(UTC)
    since = now - timedelta(minutes=3)
    write_status(paths.scheduler_status, "waiting_for_database", paths.database, since, now,
                 LOCKED)  # fmt: skip
    at = open_page("costs")
    [banner] = sidebar(at, "error")
    assert banner.startswith(f"The scheduler cannot open its database {paths.database}: {LOCKED}")
    assert f"retrying since {since:%H:%M} UTC" in banner


def test_a_scheduler_that_stopped_reporting_shows_as_gone(paths: DataPaths):
    then = datetime.now(UTC) - timedelta(minutes=10)
    write_status(paths.scheduler_status, "running", paths.database, then, then)
    at = open_page("costs")
    [warning] = sidebar(at, "warning")
    assert f"has not reported since {then:%H:%M} UTC (" in warning and "min ago" in warning
    assert sidebar(at, "error") == []


def test_a_running_scheduler_adds_nothing_to_the_sidebar(paths: DataPaths):
    now = datetime.now(UTC)
    write_status(paths.scheduler_status, "running", paths.database, now, now)
    at = open_page("costs")
    assert sidebar(at, "error") == [] and sidebar(at, "warning") == []
    live = open_page()
    assert on_live(live, "error") == [] and on_live(live, "warning") == []


def test_live_says_the_scheduler_is_waiting_at_its_top_and_not_in_the_sidebar(paths: DataPaths):
    now = datetime.now(UTC)
    write_status(paths.scheduler_status, "waiting_for_database", paths.database, now, now,
                 LOCKED)  # fmt: skip
    at = open_page()
    [banner] = on_live(at, "error")
    assert banner.startswith(f"The scheduler cannot open its database {paths.database}")
    assert sidebar(at, "error") == [] and sidebar(at, "caption") == []
