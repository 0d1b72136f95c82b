"""The plan as oracle, against the real processes: `switchover up --demo` with a short plan
(one Sonnet 529 outage), stopped with Ctrl-C inside the incident and started again on the same
data folder with a healthy plan, as an operator restarts `make run`. The incident must be the
one the plan injected, told once on the console across the restart, and no process may log a
traceback. tests/alerts/test_plan_soak.py runs the whole plan on a virtual clock; this is the
same oracle on real time, sockets and processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from helpers.ports import free_ports, wait_for

from engine.published.read import PublishedData

pytestmark = pytest.mark.timeout(600)  # two demo starts and an incident's settle time, in real time

SONNET = "claude/claude-sonnet-4-5"
FAULT_AT_S, FAULT_FOR_S = 10.0, 50.0
# Both runs share one settle, as a restart keeps its configuration; shorter than the default
# two minutes so that the incident ends within a minute of real time after its last fault.
SETTLE_S = 30.0
SETTLE = timedelta(seconds=SETTLE_S)
MINUTE = timedelta(minutes=1)
OUTAGE = f"""
cycle_s = 3600
history = false
incident_settle_s = {SETTLE_S}
[[incidents]]
model = "claude-sonnet-4-5"
start_s = {FAULT_AT_S}
duration_s = {FAULT_FOR_S}
fault = "overloaded"
"""
HEALTHY = f"cycle_s = 3600\nhistory = false\nincident_settle_s = {SETTLE_S}\n"


class Up:
    """`switchover up --demo` on free ports, its output read as it comes."""

    def __init__(self, tmp_path: Path, plan: str, name: str) -> None:
        fake, self.gateway = free_ports(2)
        plan_file = tmp_path / f"{name}.toml"
        plan_file.write_text(plan)
        self.data = tmp_path / "data"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "up", "--demo", "--port", str(fake),
             "--gateway-port", str(self.gateway), "--dashboard-port", "0",
             "--data-dir", str(self.data), "--demo-plan", str(plan_file)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        )  # fmt: skip
        self.lines: list[str] = []
        self.fake_started: datetime | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if self.fake_started is None and line.startswith("fake providers on"):
                self.fake_started = datetime.now(UTC)  # the plan's offsets count from here
            self.lines.append(line)

    def ready(self, within_s: float = 60) -> None:
        wait_for(f"http://127.0.0.1:{self.gateway}/readyz", time.monotonic() + within_s)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=90)
        self._reader.join(timeout=5)
        assert self.process.returncode == 0, "".join(self.lines[-30:])


def _incidents(data: Path) -> pd.DataFrame:
    published = PublishedData(data / "published")
    try:
        return published.query("incidents", since=datetime.now(UTC) - timedelta(hours=1))
    finally:
        published.close()


def _of_sonnet(data: Path) -> pd.DataFrame | None:
    found = _incidents(data)
    found = found[found["subject"] == SONNET]
    return found if len(found) else None


def _all_ended(data: Path) -> pd.DataFrame | None:
    found = _incidents(data)
    return found if len(found) and found["ended_at"].notna().all() else None


def _until(condition, within_s: float, what: str):
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = condition()
        if found is not None:
            return found
        time.sleep(2)
    raise AssertionError(f"{what}: not within {within_s:g} s")


def test_a_short_plan_across_a_restart_is_its_one_incident_told_once(tmp_path: Path):
    first = Up(tmp_path, OUTAGE, "outage")
    try:
        first.ready()
        ongoing = _until(lambda: _of_sonnet(first.data), 150, "the outage's incident published")
        assert ongoing["ended_at"].isna().all(), "stopped inside the incident"
    finally:
        first.stop()
    assert first.fake_started is not None
    fault = (
        first.fake_started + timedelta(seconds=FAULT_AT_S),
        first.fake_started + timedelta(seconds=FAULT_AT_S + FAULT_FOR_S),
    )

    second = Up(tmp_path, HEALTHY, "healthy")
    try:
        second.ready()
        ended = _until(lambda: _all_ended(second.data), 300, "the incident ended")
    finally:
        second.stop()

    [incident] = ended.itertuples()
    assert (incident.subject, incident.family) == (SONNET, "availability")
    assert abs(incident.started_at - fault[0]) <= MINUTE
    assert fault[1] - MINUTE <= incident.ended_at <= fault[1] + SETTLE + MINUTE
    said = [line for run in (first, second) for line in run.lines]
    assert len([line for line in said if "incident started" in line]) == 1, "".join(said)
    assert len([line for line in said if "incident ended" in line]) <= 1
    fired = [line.split("alert fired: ")[1].split(":")[0] for line in said if "alert fired" in line]
    assert len(fired) == len(set(fired)), "no alert told twice across the restart"
    logs = {log.name: log.read_text() for log in (tmp_path / "data" / "logs").glob("*.log")}
    assert logs and not [name for name, text in logs.items() if "Traceback" in text], logs
