"""One dataset for every dashboard test: 100 minutes of real chain traffic on the fake
providers, ending now, with the primary down from minute 70 to 80, run through the real
scheduler pass (rollups, alerts, incidents) and published; plus eval runs and drills written
straight into the store (EVAL_RUNS, EVAL_RESULTS, DRILLS, at minutes of the same 100)."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from helpers.alert_harness import PRIMARY, World, config
from helpers.built_once import built_once

from dashboard import data
from dashboard.live_breakers import GATEWAY_URL_ENV
from engine.core.paths import DataPaths

MINUTES = 100
OUTAGE = (70, 80)

CLAUDE, GPT = f"claude/{PRIMARY}", "gpt/gpt-4.1-mini"  # support's primary and backup
# run_id, route, cases file, started (minute), cases, min_pass_rate; each run takes a minute.
EVAL_RUNS = [
    ("support-1", "support", "cases.toml", 10, 5, 0.8),
    ("triage-1", "triage", "triage.toml", 50, 2, 0.5),
    ("support-2", "support", "cases.toml", 60, 5, 0.8),
]
# run_id, target, case, passed, reason, latency_ms, cost_usd, error
EVAL_RESULTS = [
    *((("support-1", CLAUDE, case, True, None, 900.0 + 100 * i, "0.0021", None)
       for i, case in enumerate(("refund", "order", "json", "tone", "escalate")))),
    ("support-1", GPT, "refund", True, None, 500.0, "0.0004", None),
    ("support-1", GPT, "order", True, None, 520.0, "0.0004", None),
    ("support-1", GPT, "json", True, None, 610.0, "0.0005", None),
    ("support-1", GPT, "tone", False, "contains: no 'sorry' in the answer", 480.0, "0.0004", None),
    ("support-1", GPT, "escalate", True, None, 700.0, "0.0006", None),
    *((("support-2", CLAUDE, case, True, None, 1000.0 + 50 * i, "0.0022", None)
       for i, case in enumerate(("refund", "order", "json", "tone", "escalate")))),
    ("support-2", GPT, "refund", True, None, 450.0, "0.0004", None),
    ("support-2", GPT, "order", True, None, 530.0, "0.0005", None),
    ("support-2", GPT, "json", False, "output_schema: 'order_id' is a required property", 600.0,
     "0.0005", None),
    ("support-2", GPT, "tone", True, None, 470.0, "0.0004", None),
    ("support-2", GPT, "escalate", False, None, 300.0, None, "overloaded (529)"),
    ("triage-1", GPT, "urgent", True, None, 400.0, "0.0003", None),
    ("triage-1", GPT, "routine", True, None, 420.0, "0.0003", None),
    ("triage-1", CLAUDE, "urgent", False, "regex: no match for 'P1'", 950.0, "0.0020", None),
    ("triage-1", CLAUDE, "routine", True, None, 980.0, "0.0020", None),
]  # fmt: skip
# drill_id, route, target, started (minute), planned end, ended (None: running), status, report
DRILLS = [
    ("drill-1", "support", CLAUDE, 20, 25, 25, "reported", {
        "requests": 30, "served_by": {GPT: 27, CLAUDE: 0}, "served_by_backups": 27, "failed": 3,
        "drill_faults": 9, "breaker_opened_after_s": None, "cost_usd": "0.0310",
        "primary_estimate_usd": "0.0290", "cost_difference_usd": "0.0020", "restored": None,
        "restored_after_s": None, "verdict": "failed",
        "summary": "3 of 30 requests failed: the breaker never opened"}),
    ("drill-2", "support", CLAUDE, 40, 45, 45, "reported", {
        "requests": 30, "served_by": {GPT: 30, CLAUDE: 0}, "served_by_backups": 30, "failed": 0,
        "drill_faults": 7, "breaker_opened_after_s": 0.4, "cost_usd": "0.0412",
        "primary_estimate_usd": "0.0390", "cost_difference_usd": "0.0022", "restored": True,
        "restored_after_s": 1.2, "verdict": "passed",
        "summary": f"30 of 30 requests served by {GPT}; {CLAUDE} served again 1.2 s after"}),
    ("drill-3", "support", GPT, 97, 107, None, "running", None),
]  # fmt: skip


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """(paths, attempts, start): built once per test run (helpers.built_once), each worker
    reading its own copy."""
    folder, (attempts, start) = built_once(tmp_path_factory, "dashboard", _build_dataset)
    return DataPaths(folder / "data"), attempts, start


def _build_dataset(folder: Path) -> tuple[pd.DataFrame, datetime]:
    start = (datetime.now(UTC) - timedelta(minutes=MINUTES)).replace(second=0, microsecond=0)
    world = World(folder, config([], rules=None), start=start, per_minute=6)
    try:
        world.minutes(OUTAGE[0])
        world.primary_fails("overloaded", minutes=OUTAGE[1] - OUTAGE[0])
        world.minutes(MINUTES - OUTAGE[0])
        readiness_rows(world.pipeline.con, start)
        world.pipeline.publish(world.now)
        attempts = world.pipeline.con.execute("SELECT * FROM attempts").df()
    finally:
        world.close()
    return attempts, start


@pytest.fixture(autouse=True)
def no_gateway(monkeypatch):
    """The gateway the Live page asks for its breakers: by default none (a port nothing
    listens on), so that a gateway running on this machine's 8787 never reaches a test."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(GATEWAY_URL_ENV, f"http://127.0.0.1:{port}")


@pytest.fixture
def app_env(dataset, monkeypatch):
    """The dataset, viewed as of when it was published: a test that runs minutes later in a
    long suite sees the same windows, and a scheduler that reported just now."""
    paths, _, start = dataset
    monkeypatch.setenv("SWITCHOVER_DATA_DIR", str(paths.root))
    published_at = start + timedelta(minutes=MINUTES)
    monkeypatch.setattr(data, "now", lambda: published_at)
    return dataset


def readiness_rows(con: duckdb.DuckDBPyConnection, start: datetime) -> None:
    """EVAL_RUNS, EVAL_RESULTS and DRILLS into the store, their minutes counted from `start`."""

    def at(minute: float | None) -> datetime | None:
        return None if minute is None else start + timedelta(minutes=minute)

    for run_id, route, cases_file, minute, cases, minimum in EVAL_RUNS:
        _insert(con, "eval_runs", run_id=run_id, route=route, cases_file=cases_file,
                started_at=at(minute), finished_at=at(minute + 1), cases=cases,
                min_pass_rate=minimum)  # fmt: skip
    routes = {run[0]: run[1] for run in EVAL_RUNS}
    for run_id, target, case, passed, reason, latency, cost, error in EVAL_RESULTS:
        _insert(con, "eval_results", run_id=run_id, route=routes[run_id], target=target,
                case_name=case, passed=passed, reason=reason, latency_ms=latency, cost_usd=cost,
                input_tokens=400, output_tokens=0 if error else 80, error=error)  # fmt: skip
    for drill_id, route, target, started, ends, ended, status, report in DRILLS:
        _insert(con, "drills", drill_id=drill_id, route=route, target=target,
                started_at=at(started), ends_at=at(ends), ended_at=at(ended),
                requested_by="ops@example.com", status=status,
                report=None if report is None else json.dumps(report))  # fmt: skip


def _insert(con: duckdb.DuckDBPyConnection, table: str, **row: Any) -> None:
    names, values = ", ".join(row), ", ".join(f"${k}" for k in row)
    con.execute(f"INSERT INTO {table} ({names}) VALUES ({values})", row)
