"""The telemetry spine with real processes: three writers and the scheduler, as on a server.

- No loss, no duplicates: 3 writers record 100,000 attempts while the scheduler runs; after a
  graceful stop the attempts table holds exactly 100,000 rows, each once.
- Fresh: the last attempt is visible in the published snapshots within 10 s.
- A writer killed with SIGKILL loses at most what it had not flushed yet (≤ 1 s or 1,000
  attempts); the figure is printed (`pytest -s`).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from engine.core.paths import DataPaths
from engine.published.read import PublishedData

WRITER = Path(__file__).parents[1] / "helpers" / "spool_writer.py"
TOTAL = 100_000


def _writer(spool: Path, count: int, rate: float, tag: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), str(spool), str(count), str(rate), tag],
        stdout=subprocess.PIPE,
        text=True,
    )


def _scheduler(paths: DataPaths) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "scheduler", "--data-dir", str(paths.root),
         "--cycle-s", "1", "--config", str(paths.root / "none.toml")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_three_writers_and_the_scheduler_lose_and_duplicate_nothing(tmp_path: Path):
    paths = DataPaths(tmp_path / "data")
    paths.spool.mkdir(parents=True)
    scheduler = _scheduler(paths)
    shares = [TOTAL // 3 + (1 if i < TOTAL % 3 else 0) for i in range(3)]
    writers = [_writer(paths.spool, n, 20_000, f"w{i}") for i, n in enumerate(shares)]
    for writer in writers:
        writer.communicate(timeout=120)
        assert writer.returncode == 0
    written_at = time.monotonic()

    data = PublishedData(paths.published)
    since = datetime.now(UTC) - timedelta(hours=1)
    seen = 0
    while seen < TOTAL and time.monotonic() - written_at < 30:
        counts = data.query("attempt_counts_by_minute", since=since)
        seen = int(counts["attempts"].sum())
        time.sleep(0.2)
    freshness = time.monotonic() - written_at
    print(f"\nall {TOTAL} attempts published {freshness:.1f} s after the writers exited")
    assert seen == TOTAL
    assert freshness <= 10

    scheduler.send_signal(signal.SIGTERM)
    _, errors = scheduler.communicate(timeout=30)
    assert scheduler.returncode == 0, errors
    con = duckdb.connect(str(paths.database), read_only=True)
    rows, distinct = con.execute(
        "SELECT count(*), count(DISTINCT (request_id, attempt_number)) FROM attempts"
    ).fetchone()
    assert rows == distinct == TOTAL


def test_a_writer_killed_outright_loses_at_most_its_last_flush(tmp_path: Path):
    spool = tmp_path / "spool"
    rate = 5_000.0
    writer = _writer(spool, 10**9, rate, "killed")
    recorded, deadline = 0, time.monotonic() + 3
    assert writer.stdout is not None
    for line in writer.stdout:
        recorded = int(line.split()[1])
        if time.monotonic() > deadline:
            break
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    spooled = sum(pq.read_metadata(f).num_rows for f in spool.glob("*.parquet"))
    # It had handed at least `recorded` attempts to the hook, plus up to 50 ms more.
    lost = recorded + rate * 0.05 - spooled
    print(f"\nSIGKILL at {recorded} recorded, {spooled} spooled: lost ≤ {lost:.0f} attempts "
          f"({lost / rate:.2f} s of traffic at {rate:.0f}/s)")  # fmt: skip
    assert spooled <= recorded + rate * 0.05
    assert lost <= rate * 1.0 + 1_000  # one flush interval, or one batch of flush_rows
