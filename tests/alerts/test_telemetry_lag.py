"""`telemetry_lag` fires for attempts held back outside the store although no spool file is
waiting: a spool the scheduler cannot write to, and recorders whose writes keep failing."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.sample_attempt import make_attempt

from engine.core.paths import DataPaths
from engine.scheduler.pipeline import Pipeline
from engine.telemetry.columns import HOST
from engine.telemetry.recorder import Recorder

NOW = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)  # half an hour after make_attempt's attempts
PROCESS = f"{HOST}/{os.getpid()}"


class DownSink:
    def write(self, table: pa.Table) -> int:
        raise ConnectionError("connection refused")

    def close(self) -> None:
        pass


@pytest.fixture
def paths(tmp_path: Path) -> DataPaths:
    paths = DataPaths(tmp_path / "data")
    paths.root.mkdir()
    return paths


class Scheduler:
    """A Pipeline on a clock the test moves."""

    def __init__(self, paths: DataPaths) -> None:
        self.now = NOW
        self.pipeline = Pipeline(paths, now=lambda: self.now)

    def cycle_at(self, minutes: float) -> list[tuple[float, str]]:
        """A cycle `minutes` after NOW; the telemetry-lag alert firing then, as (value, summary)."""
        self.now = NOW + timedelta(minutes=minutes)
        self.pipeline.cycle()
        return self.pipeline.con.execute(
            "SELECT value, summary FROM alerts WHERE rule = 'telemetry-lag' AND state = 'firing'"
        ).fetchall()

    def close(self) -> None:
        self.pipeline.close()


@pytest.fixture
def scheduler(paths: DataPaths):
    made: list[Scheduler] = []

    def make() -> Scheduler:
        made.append(Scheduler(paths))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_a_spool_that_cannot_be_written_fires_although_no_spool_file_exists(paths, scheduler):
    paths.spool.write_text("a file where the spool folder should be")
    recorder = Recorder(paths.spool, flush_interval_s=3600)
    try:
        for n in range(4):
            recorder(make_attempt(n))
        assert recorder.flush() == 0
        s = scheduler()
        assert s.cycle_at(0) == [], "not yet above the 120 s threshold"

        [(value, summary)] = s.cycle_at(3)
        assert value == pytest.approx(180.0)
        assert f"the spool {paths.spool} cannot be written since 09:30 UTC: FileExistsError" in (
            summary
        )
        assert f"4 attempts waiting in process {PROCESS}, whose writes fail since 09:30" in summary

        paths.spool.unlink()  # the operator fixes it; the recorder's next cycle writes
        assert recorder.flush() == 4
        assert s.cycle_at(4) == []
        assert s.pipeline.con.execute("SELECT count(*) FROM attempts").fetchone() == (4,)
    finally:
        recorder.close()


def test_a_recorder_whose_writes_fail_fires_while_the_spool_itself_is_fine(paths, scheduler):
    recorder = Recorder(paths.spool, sink=DownSink(), flush_interval_s=3600)
    try:
        recorder(make_attempt(0))
        recorder(make_attempt(1))
        recorder.flush()
        s = scheduler()
        assert s.cycle_at(0) == []
        [(value, summary)] = s.cycle_at(2.5)
    finally:
        recorder.close()
    assert value == pytest.approx(150.0)
    assert "cannot be written" not in summary
    assert f"2 attempts waiting in process {PROCESS}" in summary
    assert "ConnectionError: connection refused" in summary


def test_a_failing_recorder_that_went_silent_no_longer_holds_the_alert(paths, scheduler):
    """A failing recorder rewrites its status every flush cycle; one unchanged for 10 minutes
    belongs to a process that is gone (killed with its buffer)."""
    recorder = Recorder(paths.spool, sink=DownSink(), flush_interval_s=3600)
    recorder(make_attempt(0))
    recorder.flush()
    s = scheduler()
    s.cycle_at(0)
    assert s.cycle_at(3)
    assert s.cycle_at(11) == []
    recorder.close()
