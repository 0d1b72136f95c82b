"""The demo is the real engine on the fake providers: traffic flows, an incident makes the
chain fall back, the breaker opens, and nothing fails."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import duckdb

from engine.paths import DataPaths
from simulations.demo import run_demo, wants_demo


async def test_the_demo_serves_an_incident_through_the_fallback():
    lines: list[str] = []
    incident = (("claude-sonnet-4-5", 0.0, 600.0, "overloaded"),)
    demo = asyncio.create_task(
        run_demo(port=0, rate_per_s=40, say=lines.append, incidents=incident, report_every_s=1)
    )
    await asyncio.sleep(2.5)
    demo.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await demo

    output = "\n".join(lines)
    assert (
        "claude/claude-sonnet-4-5 overloaded (529) → claude/claude-sonnet-4-5 overloaded" in output
    )
    assert "claude/claude-sonnet-4-5 OPEN (failures)" in output
    summaries = [line for line in lines if " requests, " in line]
    assert summaries and " 0 failed" in summaries[-1]


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


async def test_the_demo_records_every_attempt_through_the_scheduler(tmp_path: Path):
    paths = DataPaths(tmp_path / "data")
    demo = asyncio.create_task(
        run_demo(port=0, rate_per_s=30, say=lambda line: None, paths=paths, report_every_s=60)
    )
    await asyncio.sleep(3)
    demo.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await demo

    con = duckdb.connect(str(paths.database), read_only=True)
    attempts, priced = con.execute("SELECT count(*), count(cost_usd) FROM attempts").fetchone()
    (requests,) = con.execute("SELECT sum(requests) FROM rollup_minute").fetchone()
    assert attempts > 30 and priced == attempts, "every demo model has a genai-prices price"
    assert requests > 0
    assert (paths.published / "recent_attempts.parquet").exists()
    assert list(paths.spool.glob("*.parquet")) == [], "the last cycle ingested everything"
