"""Gateways on two hosts write to PostgreSQL while the scheduler pulls into DuckDB, and the
scheduler is killed and restarted midway: every attempt arrives in DuckDB exactly once.

Each "host" is a separate process with its own spool folder, recording through the real
Recorder with the PostgreSQL sink; both commit concurrently, so their transactions commit out of
id order all the time. The scheduler is the real `switchover scheduler` process, configured with
`[state] postgres_url`, and it is SIGKILLed (no last cycle, perhaps mid-pull) then restarted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import psycopg

from engine.core.paths import DataPaths
from engine.published.read import PublishedData

ROOT = Path(__file__).parents[2]
WRITER = Path(__file__).parents[1] / "helpers" / "postgres_writer.py"
TOTAL = 50_000
RATE = 12_500  # attempts a second per host: each host writes for ~2 s


def _host(url: str, spool: Path, count: int, tag: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WRITER), url, str(spool), str(count), str(RATE), tag],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _scheduler(paths: DataPaths, config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "scheduler", "--data-dir", str(paths.root),
         "--cycle-s", "0.5", "--config", str(config)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _published(paths: DataPaths) -> int:
    if not (paths.published / "rollup_minute.parquet").exists():
        return 0
    data = PublishedData(paths.published)
    try:
        counts = data.query(
            "attempt_counts_by_minute", since=datetime.now(UTC) - timedelta(hours=1)
        )
        return int(counts["attempts"].sum())
    finally:
        data.close()


def _wait_until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_two_hosts_and_a_restarted_scheduler_lose_and_duplicate_nothing(
    tmp_path: Path, postgres_url: str
):
    paths = DataPaths(tmp_path / "data")
    config = tmp_path / "switchover.toml"
    config.write_text(
        f'[providers.gpt]\nkind = "openai"\n\n[state]\npostgres_url = "{postgres_url}"\n'
    )
    scheduler = _scheduler(paths, config)
    _wait_until(lambda: (paths.published / "rollup_minute.parquet").exists())
    hosts = [
        _host(postgres_url, tmp_path / f"host{i}" / "spool", TOTAL // 2, f"h{i}") for i in (1, 2)
    ]
    _wait_until(lambda: _published(paths) > 0)  # both hosts are writing, the scheduler pulling
    scheduler.send_signal(signal.SIGKILL)
    scheduler.wait(timeout=10)
    with duckdb.connect(str(paths.database), read_only=True) as con:
        (before,) = con.execute("SELECT count(*) FROM attempts").fetchone()
    print(f"\nthe scheduler was killed with {before} of {TOTAL} attempts pulled")
    assert 0 < before < TOTAL
    scheduler = _scheduler(paths, config)
    for host in hosts:
        out, errors = host.communicate(timeout=60)
        assert host.returncode == 0, errors
        assert out.strip().endswith(f"done {TOTAL // 2}")
    with psycopg.connect(postgres_url) as pg:
        (in_postgres,) = pg.execute("SELECT count(*) FROM switchover_attempts").fetchone()
    assert in_postgres == TOTAL

    _wait_until(lambda: _published(paths) >= TOTAL)
    scheduler.send_signal(signal.SIGTERM)
    _, errors = scheduler.communicate(timeout=30)
    assert scheduler.returncode == 0, errors
    con = duckdb.connect(str(paths.database), read_only=True)
    rows, distinct, hosts_seen = con.execute(
        "SELECT count(*), count(DISTINCT (request_id, attempt_number)),"
        " count(DISTINCT split_part(request_id, '-', 1)) FROM attempts"
    ).fetchone()
    assert (rows, distinct, hosts_seen) == (TOTAL, TOTAL, 2)
    (pulled,) = con.execute("SELECT sum(pulled_rows) FROM postgres_pulls").fetchone()
    assert pulled == TOTAL
