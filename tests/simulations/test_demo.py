"""The demo is one system: its traffic goes through the gateway process, so the breaker its
traffic opens is the one any other caller meets, the gateway's recorder records all of it, and
the console says each change once and what the last seconds did.

Each test runs the demo in this process (the fake providers, the traffic, the console) with its
scheduler and gateway as processes, on a data folder whose history is marked as seeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import httpx

from engine.cli.supervisor import Stop
from engine.core.paths import DataPaths
from engine.published.read import PublishedData
from simulations.demo.history import HISTORY_MARKER
from simulations.demo.up import Plan, run_demo, wants_demo

SONNET, HAIKU = "claude/claude-sonnet-4-5", "claude/claude-haiku-4-5"
DEADLINE_S = 90  # a loaded 2-core machine starts the scheduler and the gateway in seconds
SUMMARY = re.compile(r"^\d\d:\d\d:\d\d last 1 s: (\d+) requests, (\d+) by a fallback .*, 0 failed$")


@dataclass
class Demo:
    lines: list[str]
    paths: DataPaths
    gateway: str
    stop: Stop
    exit_code: int | None = None

    async def until_said(self, pattern: str) -> str:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            found = [line for line in self.lines if re.search(pattern, line)]
            if found:
                return found[0]
            assert time.monotonic() < deadline, f"never said {pattern!r}:\n" + "\n".join(
                self.lines[-30:]
            )
            await asyncio.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.asynccontextmanager
async def demo(tmp_path: Path, **options: object) -> AsyncIterator[Demo]:
    """The demo running; stopped (and awaited) when the block ends."""
    paths = DataPaths(tmp_path / "data")
    paths.root.mkdir(parents=True)
    (paths.root / HISTORY_MARKER).write_text("not seeded here: test_up_demo does it\n")
    port = _free_port()
    running = Demo([], paths, f"http://127.0.0.1:{port}", Stop())
    task = asyncio.create_task(
        run_demo(paths=paths, port=0, gateway_port=port, say=running.lines.append,
                 report_every_s=1, stop=running.stop, **options)  # type: ignore[arg-type]
    )  # fmt: skip
    try:
        yield running
    finally:
        running.stop()
        running.exit_code = await asyncio.wait_for(task, DEADLINE_S)


async def test_a_request_during_the_demos_outage_skips_the_primary_its_traffic_opened(tmp_path):
    outage = (("claude-sonnet-4-5", 0.0, 600.0, "overloaded"),)
    async with demo(tmp_path, rate_per_s=20, plan=Plan(outage)) as running:
        await running.until_said(f"breaker {SONNET} opened")
        async with httpx.AsyncClient(base_url=running.gateway, timeout=30) as gateway:
            ask = {"model": "support", "messages": [{"role": "user", "content": "Order 7?"}]}
            mine = await gateway.post("/v1/chat/completions", json=ask)
            status = (await gateway.get("/v1/status")).json()
            metrics = (await gateway.get("/metrics")).text
        await running.until_said(SUMMARY.pattern)
    assert running.exit_code == 0

    # One system: the breaker the demo's traffic opened in the gateway kept my request off
    # the primary (one attempt, on the backup), and the gateway counted the demo's traffic.
    assert mine.status_code == 200
    assert mine.headers["x-switchover-attempts"] == "1"
    assert mine.headers["x-switchover-model"] == "claude-haiku-4-5"
    assert mine.headers["x-switchover-fallback"] == "true"
    assert status["breakers"][SONNET]["status"] in ("open", "half_open")
    sonnet_failures = sum(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("switchover_attempts_total{")
        and f'target="{SONNET}"' in line
        and 'outcome="success"' not in line
    )
    assert sonnet_failures >= 5, "the failures that opened it were the demo's, in this gateway"

    # The console said the opening once, and no request was a line of its own.
    said = running.lines
    assert len([line for line in said if f"breaker {SONNET} opened" in line]) == 1
    for line in said[said.index("sending about 20 requests/s through the gateway") + 1 :]:
        assert re.match(r"^\d\d:\d\d:\d\d (last 1 s|breaker|alert|incident)", line) or line in (
            "stopping (a second Ctrl-C kills what is left at once)",
        ), line


async def test_the_gateway_records_the_demos_traffic_and_the_demo_records_nothing(tmp_path):
    async with demo(tmp_path, rate_per_s=30) as running:
        await running.until_said("sending about 30 requests/s")
        deadline = time.monotonic() + DEADLINE_S
        while sum(int(m[1]) for m in map(SUMMARY.match, running.lines) if m) < 40:
            assert time.monotonic() < deadline, "\n".join(running.lines[-20:])
            await asyncio.sleep(0.1)
    assert running.exit_code == 0

    paths = running.paths
    (gateway_pid,) = [
        int(line.split("pid ")[1].split(")")[0])
        for line in running.lines
        if line.startswith("gateway started")
    ]
    con = duckdb.connect(str(paths.database), read_only=True)
    attempts, priced, writers = con.execute(
        "SELECT count(*), count(cost_usd), list(DISTINCT process_id) FROM attempts"
    ).fetchone()
    (requests,) = con.execute("SELECT sum(requests) FROM rollup_minute").fetchone()
    since = datetime.now(UTC) - timedelta(hours=23)
    (today,) = con.execute("SELECT count(*) FROM attempts WHERE started_at >= $s", {"s": since}
                           ).fetchone()  # fmt: skip
    assert attempts > 30 and priced == attempts, "every demo model has a genai-prices price"
    assert writers == [gateway_pid], "only the gateway recorded: the demo sends, it records nothing"
    assert requests > 0
    published = PublishedData(paths.published)
    try:
        shown = published.query("recent_attempts", since=since, limit=100_000)
    finally:
        published.close()
    assert len(shown) == today > 0, "the last cycle published every attempt of the day"
    assert list(paths.spool.glob("*.parquet")) == [], "the last cycle ingested everything"


def test_the_demo_runs_unless_a_config_with_keys_exists(tmp_path: Path, monkeypatch):
    config = tmp_path / "switchover.toml"
    assert wants_demo(config)[0] is True
    config.write_text(
        '[providers.gpt]\nkind = "openai"\napi_key_env = "SWITCHOVER_TEST_KEY"\n'
        '[routes.r]\ntargets = ["gpt/gpt-4.1-mini"]\n'
    )
    monkeypatch.delenv("SWITCHOVER_TEST_KEY", raising=False)
    demo, reason = wants_demo(config)
    assert demo is True and "SWITCHOVER_TEST_KEY is not set" in reason
    monkeypatch.setenv("SWITCHOVER_TEST_KEY", "k")
    assert wants_demo(config)[0] is False


async def test_the_demos_revoked_key_is_a_credential_alert_in_alerts_list_within_one_cycle(
    tmp_path,
):
    """The demo's key incident: Haiku's key refused (401) while Sonnet, on the same provider
    and key variable, answers. `switchover alerts list` names the target and its key variable
    from the first cycle that took in the first refusal: fired at most one cycle (5 s) after
    the recorder's next flush (1 s), with room for a loaded machine's late cycle."""
    revoked = (("claude-haiku-4-5", 0.0, 600.0, "auth"),)
    async with demo(tmp_path, rate_per_s=20, plan=Plan(revoked)) as running:
        fired = await running.until_said(rf"alert fired: credential .*{HAIKU}")
        listed = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "engine.cli", "alerts", "list",
             "--data-dir", str(running.paths.root)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert running.exit_code == 0
    assert "SWITCHOVER_DEMO_KEY" in fired and "demo-key" not in fired, "the variable, never the key"

    firing = [line for line in listed.stdout.splitlines() if line.startswith("firing ")]
    assert [line for line in firing if "critical" in line and HAIKU in line], listed.stdout
    con = duckdb.connect(str(running.paths.database), read_only=True)
    first_fault, sonnet_answered = con.execute(
        "SELECT min(started_at) FILTER (target = $haiku AND fault_kind = 'account'), "
        "count(*) FILTER (target = $sonnet AND outcome = 'success') FROM attempts",
        {"haiku": HAIKU, "sonnet": SONNET},
    ).fetchone()
    (fired_at,) = con.execute(
        "SELECT min(fired_at) FROM alerts WHERE rule = 'credential' AND subject LIKE $s",
        {"s": f"%{HAIKU}%"},
    ).fetchone()
    assert sonnet_answered > 0, "the provider's other model kept answering with the same key"
    assert (fired_at - first_fault).total_seconds() < 1 + 5 + 10
