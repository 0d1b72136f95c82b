"""What a drill's pre-flight learns of a target (engine.state.target_health): its breaker (real
memory store), the operator switches (the real control file) and the faults this process saw,
on a virtual clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.spool import make_attempt

from engine.core.clock import VirtualClock
from engine.state.breaker import AccountFailure, BreakerPolicy, MemoryBreakerStore, RateLimit
from engine.state.switches_file import TargetSwitches
from engine.state.target_health import TargetHealth

T = "gpt/gpt-4.1-mini"


@pytest.fixture
def health(tmp_path) -> TargetHealth:
    clock = VirtualClock()
    breakers = MemoryBreakerStore(BreakerPolicy(account_cooldown_s=60))
    return TargetHealth(breakers, TargetSwitches(tmp_path / "t.json", now=clock.wall), clock)


def failed(health: TargetHealth, fault_kind: str, error_class: str) -> None:
    health.observe(make_attempt(target=T, started_at=health.clock.wall(), latency_ms=0.0,
                                outcome="error", fault_kind=fault_kind, error_class=error_class,
                                served=False))  # fmt: skip


async def test_a_target_nothing_is_known_against_is_healthy(health):
    failed(health, "request", "invalid_request")  # the caller's fault says nothing of it
    failed(health, "drill", "drill_invalid_key")  # nor does a drill's made-up key
    failed(health, "quality", "schema")
    assert await health.problems("classify", T) == []


async def test_a_fault_counts_for_five_minutes(health):
    failed(health, "rate_limit", "rate_limit")
    health.clock.advance(299)
    assert await health.problems("classify", T) == ["a rate-limit fault (rate_limit) 4 min ago"]
    health.clock.advance(1)
    assert await health.problems("classify", T) == []


async def test_an_open_breaker_says_why_and_when_its_probe_is_due(health):
    await health.breakers.record(T, AccountFailure(), health.clock.now())
    assert await health.problems("classify", T) == ["breaker open (account)"]
    health.clock.advance(61)  # past its hold, yet no request has asked it since
    assert await health.problems("classify", T) == ["breaker open (account, its probe due)"]


async def test_a_target_cooling_after_a_rate_limit_is_not_healthy(health):
    await health.breakers.record(T, RateLimit(reset_after_s=30), health.clock.now())
    assert await health.problems("classify", T) == ["cooling down after a rate limit"]
    health.clock.advance(30)
    assert await health.problems("classify", T) == []


async def test_a_switch_counts_only_on_its_route_or_everywhere(health):
    await health.switches.disable(T, route="support", reason="slow")
    assert await health.problems("classify", T) == []
    assert await health.problems("support", T) == ["disabled by an operator switch (slow)"]
    until = health.clock.wall() + timedelta(minutes=5)
    await health.switches.start_drill(T, route="classify", until=until, drill_id="d1")
    assert await health.problems("classify", T) == [
        f"under another drill until {until:%H:%M:%S} UTC"
    ]
