"""Retention (engine.store.retention): attempts older than `[store] keep_attempts_days` move to
monthly Parquet archives, a part a day, each attempt exactly once across a crash at any moment;
`[store]` in the configuration; the scheduler's day job doing it. On spool files taken in by the
real ingest. What the report and the What-if make of moved days: test_retention_history.py."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.spool import fill_spool, make_attempt, write_spool

from engine.config import StoreConfig, parse_config
from engine.core.errors import ConfigError
from engine.core.paths import DataPaths
from engine.scheduler.pipeline import Pipeline
from engine.store.db import open_store
from engine.store.ingest import ingest_spool
from engine.store.retention import (
    archive_old_attempts,
    archive_parts,
    kept_since,
    refresh_floor,
    stored_attempts,
)
from engine.telemetry.columns import COLUMN_NAMES

T0 = datetime(2026, 10, 30, tzinfo=UTC)  # four days of a row a minute: 30, 31 Oct, 1, 2 Nov
NOW = datetime(2026, 11, 4, 12, 0, tzinfo=UTC)  # kept 2 days: 30 Oct to 1 Nov move, 2 Nov stays
KEPT = datetime(2026, 11, 2, tzinfo=UTC)
ALL = [(datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))]
ROWS = 4 * 1440


def _ingest(con: duckdb.DuckDBPyConnection, spool: Path) -> None:
    while ingest_spool(con, spool).more:
        pass


@pytest.fixture
def days(store: duckdb.DuckDBPyConnection, spool: Path) -> duckdb.DuckDBPyConnection:
    """The store with four days of attempts, each request id once."""
    fill_spool(spool, 4, 1440, start=T0, step=timedelta(minutes=1))
    _ingest(store, spool)
    return store


def _everywhere(con: duckdb.DuckDBPyConnection, archive: Path) -> tuple[int, int]:
    """(attempts, distinct attempts) in the table and the complete parts together."""
    with stored_attempts(con, archive, ALL) as view:
        return con.execute(
            f"SELECT count(*), count(DISTINCT (request_id, attempt_number)) FROM {view}"
        ).fetchone()


def _files(archive: Path) -> list[str]:
    return sorted(str(p.relative_to(archive)) for p in archive.rglob("*") if p.is_file())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- moving ---------------------------------------------------------------------------------


def test_days_older_than_kept_move_to_a_part_a_day_in_a_folder_a_month(days, tmp_path):
    archive = tmp_path / "archive"
    result = archive_old_attempts(days, archive, 2, NOW, max_days=10)
    assert result.parts == ("2026-10/2026-10-30-1.parquet", "2026-10/2026-10-31-1.parquet",
                            "2026-11/2026-11-01-1.parquet")  # fmt: skip
    assert (result.days, result.rows, result.more, result.kept_since) == (3, 3 * 1440, False, KEPT)
    assert _files(archive) == list(result.parts)
    for name in result.parts:
        day = datetime.fromisoformat(name[8:18]).replace(tzinfo=UTC)
        first, last, rows = days.execute(
            "SELECT min(started_at), max(started_at), count(*) FROM read_parquet($f)",
            {"f": str(archive / name)},
        ).fetchone()
        assert (rows, first, last) == (1440, day, day + timedelta(minutes=1439))
    left = days.execute("SELECT count(*), min(started_at) FROM attempts").fetchone()
    assert left == (1440, KEPT)


def test_each_attempt_is_read_once_from_the_table_and_the_archive(days, tmp_path):
    archive = tmp_path / "archive"
    archive_old_attempts(days, archive, 2, NOW, max_days=10)
    assert _everywhere(days, archive) == (ROWS, ROWS)
    assert archive_parts(days, archive, [(KEPT, NOW)]) == [], "a kept day opens no part"
    with pytest.raises(RuntimeError, match="no archive folder was given"):
        archive_parts(days, None, ALL)


def test_a_backlog_moves_a_day_a_run_the_oldest_first(days, tmp_path):
    archive = tmp_path / "archive"
    runs = [archive_old_attempts(days, archive, 2, NOW) for _ in range(4)]
    assert [(r.days, r.more, r.kept_since) for r in runs] == [
        (1, True, T0 + timedelta(days=1)),
        (1, True, T0 + timedelta(days=2)),
        (1, False, KEPT),
        (0, False, KEPT),
    ]
    assert _everywhere(days, archive) == (ROWS, ROWS)


def test_nothing_moves_while_every_day_is_younger_than_kept(days, tmp_path):
    archive = tmp_path / "archive"
    result = archive_old_attempts(days, archive, 30, NOW)
    assert (result.days, result.rows, result.kept_since) == (0, 0, None)
    assert not archive.exists()
    assert kept_since(days) is None and refresh_floor(days) is None


def test_the_refresh_floor_is_a_day_past_the_archived_days(days, tmp_path):
    """A minute's rollup reads 5 minutes before it, an hour's cache baseline the day before:
    from the floor on, all of it is in the table."""
    archive_old_attempts(days, tmp_path / "archive", 2, NOW, max_days=10)
    assert (kept_since(days), refresh_floor(days)) == (KEPT, KEPT + timedelta(days=1))


def test_a_day_that_gets_attempts_after_it_moved_gets_a_part_of_its_own(days, spool, tmp_path):
    archive = tmp_path / "archive"
    archive_old_attempts(days, archive, 2, NOW, max_days=10)
    first = archive / "2026-10/2026-10-31-1.parquet"
    before = _digest(first)
    late = make_attempt(request_id="late", started_at=T0 + timedelta(days=1, hours=12))
    write_spool(spool, "late", [late])
    _ingest(days, spool)
    result = archive_old_attempts(days, archive, 2, NOW, max_days=10)
    assert result.parts == ("2026-10/2026-10-31-2.parquet",) and result.rows == 1
    assert _digest(first) == before, "a part is never rewritten"
    assert _everywhere(days, archive) == (ROWS + 1, ROWS + 1)
    assert result.kept_since == KEPT


def test_an_archive_holds_the_attempt_record_and_nothing_else(days, tmp_path):
    """No key and no prompt: the record declares neither; the ingest's batch stays behind."""
    archive = tmp_path / "archive"
    result = archive_old_attempts(days, archive, 2, NOW)
    assert pq.read_schema(archive / result.parts[0]).names == list(COLUMN_NAMES)


def test_files_the_ledger_does_not_name_are_never_touched_nor_read(days, tmp_path):
    """The archive of a database since deleted keeps its files; the new one writes beside it."""
    archive = tmp_path / "archive"
    foreign = archive / "2026-10" / "2026-10-30-1.parquet"
    foreign.parent.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), foreign)
    before = _digest(foreign)
    result = archive_old_attempts(days, archive, 2, NOW)
    assert result.parts == ("2026-10/2026-10-30-2.parquet",)
    assert _digest(foreign) == before
    assert _everywhere(days, archive) == (ROWS, ROWS)


# --- a crash at any point -------------------------------------------------------------------

# Three days of 400,000 attempts each (~0.5 s to write a part), archived by a child process
# that is killed at one moment of a move: while a part is written, or once one is in place.
CRASH_ROWS = 1_200_000
_CHILD = """
import sys
from datetime import datetime
from pathlib import Path
from engine.store.db import open_store
from engine.store.retention import archive_old_attempts
con = open_store(Path(sys.argv[1]))
archive_old_attempts(con, Path(sys.argv[2]), 2, datetime.fromisoformat(sys.argv[3]), max_days=9)
"""


@pytest.fixture(scope="module")
def crash_store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("crash")
    fill_spool(folder / "spool", 60, CRASH_ROWS // 60, start=T0, step=timedelta(seconds=0.216))
    con = open_store(folder / "switchover.duckdb")
    try:
        _ingest(con, folder / "spool")
    finally:
        con.close()
    return folder / "switchover.duckdb"


def _writing(archive: Path) -> bool:
    return any(p.name.endswith(".tmp") for p in archive.rglob(".*"))


def _placed(archive: Path) -> bool:
    return any(archive.rglob("*.parquet"))


@pytest.mark.parametrize("moment", [_writing, _placed], ids=["writing a part", "part placed"])
def test_a_move_killed_at_any_moment_loses_and_repeats_no_attempt(crash_store, tmp_path, moment):
    database, archive = tmp_path / "switchover.duckdb", tmp_path / "archive"
    shutil.copy(crash_store, database)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(database), str(archive),
                              NOW.isoformat()], cwd=Path(__file__).parents[2])  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # a guard only: the kill waits for the moment
        while not moment(archive) and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert child.poll() is None, "the child finished before the moment came"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    con = open_store(database)
    try:
        assert _everywhere(con, archive) == (CRASH_ROWS, CRASH_ROWS), "as the crash left it"
        again = archive_old_attempts(con, archive, 2, NOW, max_days=9)
        assert again.removed <= 1
        assert _everywhere(con, archive) == (CRASH_ROWS, CRASH_ROWS), "after the next run"
        listed = con.execute("SELECT file_name, complete FROM archive_parts").fetchall()
        assert _files(archive) == sorted(name for name, _ in listed), "nothing left over"
        assert all(complete for _, complete in listed)
        assert con.execute("SELECT count(*) FROM attempts").fetchone() == (0,), "every day moved"
    finally:
        con.close()


# --- configuration --------------------------------------------------------------------------


def _config(**sections: object) -> dict:
    return {
        "providers": {"claude": {"kind": "anthropic"}},
        "routes": {"support": {"targets": ["claude/claude-sonnet-4-5"]}},
        **sections,
    }


def test_attempts_are_kept_30_days_unless_configured():
    assert parse_config(_config()).store.keep_attempts_days == 30
    keep = parse_config(_config(store={"keep_attempts_days": 7})).store.keep_attempts_days
    assert keep == 7


@pytest.mark.parametrize("days", [0, -1, 1, 2.5, "30", True, 36_501])
def test_a_keep_that_is_not_a_whole_number_of_days_from_2_is_refused(days):
    with pytest.raises(ConfigError, match=r"store\.keep_attempts_days: must be a whole number of "
                       r"days from 2 to 36500 \(archived attempts are kept for good"):  # fmt: skip
        parse_config(_config(store={"keep_attempts_days": days}))


def test_the_attempts_kept_must_cover_the_longest_alert_window():
    rule = {"name": "slow-month", "kind": "latency_p99", "threshold": 30_000, "window": "3d"}
    with pytest.raises(ConfigError, match=r"store\.keep_attempts_days: 2 days is shorter than "
                       r"the window of alert 'slow-month' \(3 days\)"):  # fmt: skip
        parse_config(_config(store={"keep_attempts_days": 2}, alerts=[rule]))


def test_an_unknown_store_key_is_refused():
    with pytest.raises(ConfigError, match=r"store\.keep_days"):
        parse_config(_config(store={"keep_days": 7}))


# --- the scheduler --------------------------------------------------------------------------


def test_the_schedulers_day_job_moves_what_is_older_than_keep_attempts_days(tmp_path):
    """A day a run, after the day rollups; the rollups of the days that moved stay (waits on
    Pipeline(store=StoreConfig) and the call in its day job)."""
    paths = DataPaths(tmp_path / "data")
    fill_spool(paths.spool, 4, 1440, start=T0, step=timedelta(minutes=1))
    pipeline = Pipeline(paths, now=lambda: NOW, store=StoreConfig(keep_attempts_days=2))
    try:
        pipeline.cycle()
        pipeline.day_rollups()
        days = pipeline.con.execute("SELECT * FROM rollup_day ORDER BY ALL").fetchall()
        for _ in range(3):
            pipeline.day_rollups()
        assert _files(paths.archive) == ["2026-10/2026-10-30-1.parquet",
                                         "2026-10/2026-10-31-1.parquet",
                                         "2026-11/2026-11-01-1.parquet"]  # fmt: skip
        assert pipeline.con.execute("SELECT * FROM rollup_day ORDER BY ALL").fetchall() == days
        assert _everywhere(pipeline.con, paths.archive) == (ROWS, ROWS)
    finally:
        pipeline.close()
