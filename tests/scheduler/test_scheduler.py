"""The telemetry spine in one process: chain → recorder → spool → pipeline → published → reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.core.clock import VirtualClock
from engine.core.messages import Message, Request
from engine.core.paths import DataPaths
from engine.core.pricing import Pricer
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers.anthropic import AnthropicProvider
from engine.providers.openai import OpenAIProvider
from engine.published.read import PublishedData
from engine.scheduler.pipeline import Pipeline
from engine.telemetry.recorder import Recorder
from simulations.fakes import FakeTransport


@pytest.fixture
def paths(tmp_path) -> DataPaths:
    return DataPaths(tmp_path / "data")


def _traffic(
    paths: DataPaths, requests: int, primary_fault: str | None, ago: timedelta = timedelta(0)
) -> Recorder:
    """Real chains on the in-process fake; every attempt goes through a real Recorder."""
    clock = VirtualClock(wall_start=datetime.now(UTC) - ago - timedelta(seconds=30))
    transport = FakeTransport(clock=clock)
    if primary_fault:
        transport.script("claude-sonnet-4-5", [primary_fault] * (2 * requests))
    recorder = Recorder(paths.spool, pricer=Pricer(), flush_interval_s=60)

    async def main() -> None:
        chain = Chain(
            "support",
            [
                Target(
                    AnthropicProvider(
                        "claude", api_key="k", base_url="http://f", transport=transport, clock=clock
                    ),
                    "claude-sonnet-4-5",
                ),
                Target(
                    OpenAIProvider(
                        "gpt", api_key="k", base_url="http://f/v1", transport=transport, clock=clock
                    ),
                    "gpt-4.1-mini",
                ),
            ],
            policy=Policy(breaker_failures=1000, breaker_min_volume=100_000),
            clock=clock,
            hooks=[recorder],
        )
        for i in range(requests):
            request = Request(messages=(Message.user(f"question {i}"),), feature="faq")
            await chain.complete(request)

    clock.run(main())
    recorder.flush()
    return recorder


def test_attempts_reach_the_published_rollups_priced(paths: DataPaths):
    _traffic(paths, 20, primary_fault="overloaded")
    pipeline = Pipeline(paths)
    try:
        report = pipeline.cycle()
    finally:
        pipeline.close()
    assert report.rows == 60  # each request: 529, retry 529, backup serves
    assert list(paths.spool.glob("*.parquet")) == [], "ingested files are removed"

    data = PublishedData(paths.published)
    since = datetime.now(UTC) - timedelta(hours=1)
    rollups = data.query("minute_rollups", since=since, route="support")
    assert rollups["requests"].sum() == 20
    assert rollups["answered_by_fallback"].sum() == 20
    assert rollups["provider_faults"].sum() == 40
    backup = rollups[rollups["target"] == "gpt/gpt-4.1-mini"]
    assert backup["cost_usd"].sum() > 0, "gpt-4.1-mini is priced by genai-prices"
    attempts = data.query("recent_attempts", since=since, limit=1000)
    assert len(attempts) == 60 and attempts["price_source"].dropna().str.startswith("genai").all()


def test_a_second_cycle_with_nothing_new_changes_nothing(paths: DataPaths):
    _traffic(paths, 5, primary_fault=None)
    pipeline = Pipeline(paths)
    try:
        pipeline.cycle()
        first = pipeline.con.execute("SELECT sum(requests), sum(attempts) FROM rollup_minute")
        first = first.fetchone()
        assert pipeline.cycle().rows == 0
        again = pipeline.con.execute("SELECT sum(requests), sum(attempts) FROM rollup_minute")
        assert again.fetchone() == first == (5, 5)
        pipeline.day_rollups()
        (day,) = pipeline.con.execute("SELECT sum(requests) FROM rollup_day").fetchone()
        assert day == 5
    finally:
        pipeline.close()


def test_a_late_backlog_is_rolled_up_in_pieces_back_to_its_oldest_attempt(paths: DataPaths):
    """A writer that was offline for two days delivers its files: the cycle recomputes the
    minutes and hours back to them (in 6-hour pieces), and the day rollups catch up."""
    pipeline = Pipeline(paths)
    try:
        pipeline.cycle()
        pipeline.day_rollups()
        _traffic(paths, 4, primary_fault=None, ago=timedelta(days=2))
        report = pipeline.cycle()
        assert report.rows == 4
        assert report.refreshed_from < datetime.now(UTC) - timedelta(days=2)
        for table in ("rollup_minute", "rollup_hour"):
            (requests,) = pipeline.con.execute(f"SELECT sum(requests) FROM {table}").fetchone()
            assert requests == 4
        pipeline.day_rollups()
        (days,) = pipeline.con.execute("SELECT sum(requests) FROM rollup_day").fetchone()
        assert days == 4
    finally:
        pipeline.close()


def test_the_published_attempts_stay_whole_across_cycles_and_compactions(paths: DataPaths):
    """Each cycle publishes its attempts as one more part; the compaction (the scheduler's
    other thread) merges them without losing or repeating one, and a restarted pipeline goes
    on from the parts already published instead of writing the day again."""
    pipeline = Pipeline(paths)
    try:
        for _ in range(13):
            _traffic(paths, 2, primary_fault=None)
            pipeline.cycle()
        before = PublishedData(paths.published).query(
            "recent_attempts", since=datetime.now(UTC) - timedelta(hours=1), limit=1000
        )
        assert pipeline.compact().merged == 12
    finally:
        pipeline.close()
    _traffic(paths, 2, primary_fault=None)
    restarted = Pipeline(paths)
    try:
        restarted.cycle()
    finally:
        restarted.close()
    data = PublishedData(paths.published)
    after = data.query("recent_attempts", since=datetime.now(UTC) - timedelta(hours=1), limit=1000)
    assert len(before) == 26 and len(after) == 28
    assert after[["request_id", "attempt_number"]].duplicated().sum() == 0
    assert set(before["request_id"]) < set(after["request_id"])
    parts = data.snapshots()["recent_attempts"].parts
    # The first cycle's (the whole window, the top tier), the other twelve merged, the restart's.
    assert [p.tier for p in parts] == [4, 1, 0]
