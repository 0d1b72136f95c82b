"""`switchover up --demo` as `make run` starts it: every process, the demo's traffic and ours
through the gateway (ours with the openai package), a fallback and an alert in the published
data within 90 s, a console that says each change once, and nothing left running after one
Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import openai
from helpers.ports import free_ports, wait_for

from engine.published.read import PublishedData

WITHIN_S = 90


def start_demo(tmp_path: Path) -> tuple[subprocess.Popen, list[str], threading.Thread, dict]:
    """`switchover up --demo` on free ports, its output gathered by a thread as it comes."""
    fake, gateway, dashboard = free_ports(3)
    data = tmp_path / "data"
    up = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "up", "--demo", "--port", str(fake),
         "--gateway-port", str(gateway), "--dashboard-port", str(dashboard),
         "--data-dir", str(data)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout), daemon=True)
    reader.start()
    return up, lines, reader, {"gateway": gateway, "dashboard": dashboard, "data": data}


def test_up_demo_serves_falls_back_alerts_and_stops_with_no_process_left(tmp_path: Path):
    started = time.monotonic()
    up, lines, reader, where = start_demo(tmp_path)
    gateway, dashboard, data = where["gateway"], where["dashboard"], where["data"]
    try:
        deadline = started + 60
        wait_for(f"http://127.0.0.1:{gateway}/readyz", deadline)
        wait_for(f"http://127.0.0.1:{dashboard}/_stcore/health", deadline)

        client = openai.OpenAI(base_url=f"http://127.0.0.1:{gateway}/v1", api_key="local")
        for i in range(10):
            reply = client.chat.completions.create(
                model="support", messages=[{"role": "user", "content": f"Where is order {i}?"}]
            )
            assert reply.choices[0].message.content

        published = PublishedData(data / "published")
        since = datetime.now(UTC) - timedelta(hours=1)
        seen: dict[str, int] = {}
        while time.monotonic() - started < WITHIN_S:
            rollups = published.query("minute_rollups", since=since)
            seen = {
                "attempts": int(rollups["attempts"].sum()),
                "fallbacks": int(rollups["answered_by_fallback"].sum()),
                "alerts": len(published.query("alerts", since=since)),
            }
            if all(seen.values()):
                break
            time.sleep(1)
        assert all(seen.values()), f"after {WITHIN_S} s: {seen}\n" + "".join(lines[-30:])
        gateway_routes = published.query("recent_attempts", since=since, limit=100_000)
        assert (gateway_routes["route"] == "support").any()
    finally:
        up.send_signal(signal.SIGINT)  # Ctrl-C, once
        up.wait(timeout=90)
        reader.join(timeout=5)
    assert up.returncode == 0 and "stopped\n" in lines

    pids = [int(line.split("pid ")[1].split(")")[0]) for line in lines if "(pid " in line]
    assert {"scheduler", "gateway", "dashboard"} <= {
        line.split(" started")[0] for line in lines if "(pid " in line
    }
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"process {pid} is still running after Ctrl-C")
    assert "seeding 14 days of demo history" in "".join(lines)
    # The console: the support primary's breaker said opened once, summaries of the last 10 s,
    # and no request as a line of its own.
    assert len([line for line in lines if "breaker claude/claude-sonnet-4-5 opened" in line]) == 1
    assert any(" last 10 s: " in line for line in lines)
    assert not [line for line in lines if "→" in line or "skipped" in line]
