"""`switchover drill` against the demo stack as `make run` starts it: the drilled primary fails
as if its key were invalid, the backup serves, the scheduler reports the drill (not as an
incident), and the target serves again afterwards."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from helpers.ports import wait_for

from engine.published.read import PublishedData

from .test_up_demo import start_demo

ROUTE, TARGET, BACKUP = "classify", "gpt/gpt-4.1-mini", "claude/claude-haiku-4-5"
ASK = {"model": ROUTE, "messages": [{"role": "user", "content": "refund?"}]}


def test_a_drill_on_the_demo_stack_reports_the_fallback_path_and_restores_the_target(
    tmp_path: Path,
):
    up, lines, _, where = start_demo(tmp_path)
    gateway, data = where["gateway"], where["data"]
    url = f"http://127.0.0.1:{gateway}"
    served: list[tuple[float, str]] = []
    stop = threading.Event()

    def traffic() -> None:  # a caller of the route through the gateway, twice a second
        while not stop.is_set():
            try:
                reply = httpx.post(f"{url}/v1/chat/completions", timeout=10, json=ASK)
                served.append((time.monotonic(), reply.headers.get("x-switchover-provider", "")))
            except httpx.HTTPError:
                pass
            stop.wait(0.5)

    caller = threading.Thread(target=traffic, daemon=True)
    try:
        wait_for(f"{url}/readyz", time.monotonic() + 60)
        caller.start()
        drill = subprocess.run(
            [sys.executable, "-m", "engine.cli", "drill", "--route", ROUTE, "--target", TARGET,
             "--for", "8s", "--gateway", url, "--data-dir", str(data), "--report-timeout", "90"],
            capture_output=True, text=True, timeout=150, cwd=tmp_path,
        )  # fmt: skip
        out = drill.stdout + drill.stderr
        assert drill.returncode == 0, out + "".join(lines[-30:])
        assert "verdict: passed" in out
        assert f"served by {BACKUP}" in out
        assert "failed requests: 0" in out
        assert "opened after" in out
        assert f"{TARGET} served again" in out
        # The gateway's own caller saw the switch, and the way back.
        assert "claude" in {provider for _, provider in served}
        after = httpx.post(f"{url}/v1/chat/completions", timeout=10, json=ASK)
        assert after.headers["x-switchover-provider"] == "gpt"
        published = PublishedData(data / "published")
        since = datetime.now(UTC) - timedelta(hours=1)
        drills = published.query("drills", since=since)
        assert list(drills["verdict"]) == ["passed"]
        assert published.query("incidents", since=since).query(f"target == '{TARGET}'").empty
        assert not (data / "control" / "targets.json").read_text().count('"drill"')
    finally:
        stop.set()
        up.send_signal(signal.SIGINT)
        up.wait(timeout=90)
