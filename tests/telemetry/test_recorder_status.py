"""A recorder that loses attempts says so in its status file, even when its spool is what failed,
and the next scheduler cycle turns that into a firing `telemetry_loss` alert."""

from __future__ import annotations

import json
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
from engine.telemetry.status import RecorderStatus

NOW = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)  # half an hour after make_attempt's attempts


@pytest.fixture
def paths(tmp_path: Path) -> DataPaths:
    paths = DataPaths(tmp_path / "data")
    paths.root.mkdir()
    return paths


def statuses(folder: Path) -> list[RecorderStatus]:
    if not folder.is_dir():
        return []
    return [RecorderStatus.from_json(p.read_bytes()) for p in sorted(folder.glob("*.json"))]


def firing(pipeline: Pipeline, rule: str) -> list[tuple]:
    return pipeline.con.execute(
        "SELECT subject, severity, value, summary FROM alerts WHERE rule = $rule"
        " AND state = 'firing'",
        {"rule": rule},
    ).fetchall()


def record(recorder: Recorder, n: int) -> None:
    for i in range(n):
        recorder(make_attempt(i))


def test_attempts_buffered_at_exit_on_an_unwritable_spool_fire_the_loss_alert(paths: DataPaths):
    """The spool path is a regular file (root cannot write into that either): the status goes
    beside it, and the scheduler, which must not trip over such a spool, alerts with the count."""
    paths.spool.write_text("not a folder")
    recorder = Recorder(paths.spool, flush_interval_s=3600)
    record(recorder, 3)
    recorder.close()

    [status] = statuses(paths.recorder_status)
    assert (status.dropped, status.lost_at_exit, status.buffered) == (3, 3, 0)
    assert status.closed and status.failing and status.pid == os.getpid()
    assert status.drop_reason is not None
    assert "3 still buffered at exit" in status.drop_reason
    assert "the spool could not be written: FileExistsError" in status.drop_reason
    assert recorder.stats().lost_at_exit == 3

    pipeline = Pipeline(paths, now=lambda: NOW)
    try:
        pipeline.cycle()
        [(subject, severity, value, summary)] = firing(pipeline, "telemetry-loss")
    finally:
        pipeline.close()
    assert (subject, severity, value) == (f"{HOST}/{os.getpid()}", "critical", 3.0)
    assert summary.startswith(f"3 attempts dropped by {HOST}/{os.getpid()} in the last 60 min")
    assert "the spool could not be written: FileExistsError" in summary


def test_the_hook_drops_without_io_and_the_next_flush_tells_the_scheduler(paths: DataPaths):
    """Overflowing `max_buffered` drops on the caller's thread, which writes nothing; the flush
    writes the spool and the status, and one cycle later the alert fires."""
    recorder = Recorder(paths.spool, flush_interval_s=3600, max_buffered=5)
    try:
        record(recorder, 8)
        assert recorder.stats().dropped == 3
        assert not paths.recorder_status.exists(), "the hook wrote a file"

        assert recorder.flush() == 5
        [status] = statuses(paths.recorder_status)
        assert (status.dropped, status.written, status.failing) == (3, 5, False)
        assert status.drop_reason == "3 beyond max_buffered (5) before the flusher could write them"
    finally:
        recorder.close()

    pipeline = Pipeline(paths, now=lambda: NOW)
    try:
        pipeline.cycle()
        [(_, _, value, summary)] = firing(pipeline, "telemetry-loss")
        assert value == 3.0 and "3 beyond max_buffered (5)" in summary
        assert pipeline.con.execute("SELECT count(*) FROM attempts").fetchone() == (5,)
    finally:
        pipeline.close()


def test_a_recorder_that_never_had_trouble_writes_no_status(paths: DataPaths):
    recorder = Recorder(paths.spool, flush_interval_s=3600)
    record(recorder, 4)
    recorder.flush()
    recorder.close()

    assert recorder.stats().written == 4
    assert not paths.recorder_status.exists()
    assert not paths.recorder_status_fallback.exists()


def test_the_status_goes_into_the_spool_when_the_folder_beside_it_cannot_be_written(
    paths: DataPaths,
):
    """A read-only data folder with the spool on a volume of its own: here, a file stands where
    the status folder would be."""
    paths.recorder_status.write_text("not a folder")
    recorder = Recorder(paths.spool, flush_interval_s=3600, max_buffered=2)
    try:
        record(recorder, 4)
        recorder.flush()
    finally:
        recorder.close()

    [status] = statuses(paths.recorder_status_fallback)
    assert status.dropped == 2 and status.closed
    pipeline = Pipeline(paths, now=lambda: NOW)
    try:
        pipeline.cycle()
        [(_, _, value, _)] = firing(pipeline, "telemetry-loss")
    finally:
        pipeline.close()
    assert value == 2.0


class DownSink:
    """A PostgreSQL sink whose server is down, quoting its URL (with the password) in its error."""

    def write(self, table: pa.Table) -> int:
        raise ConnectionError("cannot reach postgresql://switchover:s3cret@db:5432/telemetry")

    def close(self) -> None:
        pass


def test_a_status_file_holds_counts_and_masked_errors_never_attempts_or_passwords(
    paths: DataPaths,
):
    recorder = Recorder(paths.spool, sink=DownSink(), flush_interval_s=3600)
    recorder(make_attempt(0, feature="checkout-secret-feature"))
    recorder.flush()
    recorder.close()

    [path] = paths.recorder_status.glob("*.json")
    text = path.read_text()
    body = json.loads(text)
    assert body["destination"] == "sink" and body["dropped"] == 1
    assert "s3cret" not in text and "switchover:***@db" in text
    assert "req-000000" not in text and "checkout-secret-feature" not in text
    assert "s3cret" not in (recorder.stats().last_error or "")


def test_losses_are_counted_once_across_cycles_and_scheduler_restarts(paths: DataPaths):
    recorder = Recorder(paths.spool, flush_interval_s=3600, max_buffered=1)
    record(recorder, 3)
    recorder.flush()  # 2 dropped
    now = [NOW]
    pipeline = Pipeline(paths, now=lambda: now[0])
    try:
        pipeline.cycle()
        now[0] += timedelta(minutes=1)
        pipeline.cycle()
    finally:
        pipeline.close()
    record(recorder, 3)
    recorder.close()  # 2 more dropped at once by the hook, before the final flush
    pipeline = Pipeline(paths, now=lambda: now[0] + timedelta(minutes=1))
    try:
        pipeline.cycle()
        losses = pipeline.con.execute(
            "SELECT dropped FROM telemetry_losses ORDER BY observed_at"
        ).fetchall()
        [(_, _, value, _)] = firing(pipeline, "telemetry-loss")
    finally:
        pipeline.close()
    assert losses == [(2,), (2,)]
    assert value == 4.0


def test_the_loss_alert_resolves_once_its_window_has_passed(paths: DataPaths):
    recorder = Recorder(paths.spool, flush_interval_s=3600, max_buffered=1)
    record(recorder, 2)
    recorder.close()
    now = [NOW]
    pipeline = Pipeline(paths, now=lambda: now[0])
    try:
        pipeline.cycle()
        assert firing(pipeline, "telemetry-loss")
        now[0] += timedelta(minutes=61)
        pipeline.cycle()
        assert firing(pipeline, "telemetry-loss") == []
        # An hour after its last word, a closed recorder's file is gone; its row stays.
        now[0] += timedelta(minutes=1)
        pipeline.cycle()
        assert statuses(paths.recorder_status) == []
        assert pipeline.con.execute("SELECT count(*) FROM recorder_status").fetchone() == (1,)
    finally:
        pipeline.close()
