"""The Live page's status strip and headline figures, from exact frames."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from dashboard import figures

NOW = datetime(2026, 11, 23, 12, 0, 30, tzinfo=UTC)


def _rollup(minutes_ago: int, **figures_) -> dict:
    row = dict.fromkeys(
        ["requests", "answered", "answered_by_fallback", "request_faults", "unavailable",
         "broken_streams", "abandoned", "attempts", "failed_attempts", "provider_faults",
         "ambiguous_faults", "rate_limited", "account_faults", "cost_usd", "fallback_premium_usd",
         "rewarm_usd", "unpriced_attempts"], 0)  # fmt: skip
    bucket = pd.Timestamp(NOW.replace(second=0) - timedelta(minutes=minutes_ago))
    row.update(bucket=bucket, route="support", provider="claude", target="claude/m")
    row["latency_p99_ms"] = None
    row.update(figures_)
    return row


def _events(*rows: tuple) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "target": t,
                "host": "h",
                "process_id": 1,
                "occurred_at": pd.Timestamp(at),
                "seq": i,
                "from_status": old,
                "to_status": new,
                "reason": "failures",
                "open_until": until,
            }
            for i, (t, at, old, new, until) in enumerate(rows)
        ]
    )


def test_a_provider_failing_half_its_attempts_is_down_and_a_little_is_degraded():
    rollups = pd.DataFrame([
        _rollup(1, attempts=10, provider_faults=5),
        _rollup(1, provider="gpt", target="gpt/x", attempts=100, rate_limited=6),
        _rollup(1, provider="mistral", target="mistral/x", attempts=100, provider_faults=1),
    ])  # fmt: skip
    status = figures.provider_status(rollups, figures.breaker_states(_events(), set(), NOW), NOW)
    assert dict(zip(status["provider"], status["status"], strict=True)) == {
        "claude": "down",
        "gpt": "degraded",
        "mistral": "healthy",
    }


def test_an_open_breaker_shows_with_the_time_to_its_probe():
    opened = NOW - timedelta(minutes=2)
    events = _events(("claude/m", opened, "closed", "open", NOW + timedelta(seconds=15)))
    breakers = figures.breaker_states(events, {("h", 1)}, NOW)
    assert breakers.loc[0, "status"] == "open" and breakers.loc[0, "since"] == opened
    status = figures.provider_status(pd.DataFrame([_rollup(1, attempts=0)]), breakers, NOW)
    assert status.loc[0, "status"] == "down", "no attempt gets through: every target is held"
    assert "m open, probe in 15 s" in status.loc[0, "breakers"]


def test_a_breaker_of_a_process_gone_quiet_is_left_out():
    events = _events(("claude/m", NOW - timedelta(minutes=30), "closed", "open", None))
    assert figures.breaker_states(events, set(), NOW).empty


def test_routes_are_degraded_when_backups_carry_traffic_and_down_when_requests_fail():
    rollups = pd.DataFrame([
        _rollup(1, requests=100, answered=100, answered_by_fallback=40),
        _rollup(2, route="classify", requests=10, answered=4, unavailable=6),
        _rollup(1, route="summarize", requests=10, answered=10),
    ])  # fmt: skip
    status = figures.route_status(rollups, NOW)
    assert dict(zip(status["route"], status["status"], strict=True)) == {
        "classify": "down",
        "summarize": "healthy",
        "support": "degraded",
    }


def test_headline_figures_follow_the_definitions():
    rollups = pd.DataFrame([
        _rollup(1, requests=60, answered=55, answered_by_fallback=6, request_faults=3,
                abandoned=2, cost_usd=1.2, fallback_premium_usd=0.3, rewarm_usd=0.1),
    ])  # fmt: skip
    k = figures.kpis(rollups, 1234.0, timedelta(minutes=15))
    assert k.requests_per_min == 4.0
    assert k.availability == 55 / (60 - 3 - 2)
    assert k.fallback_rate == 0.1
    assert k.cost_per_hour == 1.2 * 4 and abs(k.premium_per_hour - 0.4 * 4) < 1e-12
    assert k.latency_p99_ms == 1234.0
