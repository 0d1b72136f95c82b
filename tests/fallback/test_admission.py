"""A target's admission: its breaker's word, and fault drills as one rule on it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace

from engine.core.clock import VirtualClock
from engine.core.skips import SkipReason
from engine.fallback.admission import Gate
from engine.fallback.target import Target
from engine.state.breaker import AccountFailure, BreakerPolicy, MemoryBreakerStore

TARGET = Target(SimpleNamespace(name="claude", kind="anthropic"), "m")  # type: ignore[arg-type]


def rig() -> tuple[VirtualClock, MemoryBreakerStore]:
    return VirtualClock(), MemoryBreakerStore(BreakerPolicy())


def test_a_drilled_target_is_let_in_to_fail_as_an_invalid_key_until_the_drill_ends():
    clock, breakers = rig()
    gate = Gate(breakers, clock, {TARGET.name: clock.wall() + timedelta(seconds=90)})
    admitted = asyncio.run(gate.admit(TARGET))
    assert (admitted.skip, admitted.breaker_state) == (None, "closed")
    assert admitted.drill is not None and admitted.drill.hold_s == 90.0


def test_a_breaker_a_drill_held_open_lets_its_probe_through_once_the_drill_is_over():
    clock, breakers = rig()
    asyncio.run(breakers.record(TARGET.name, AccountFailure(600.0, drill=True), clock.now()))
    admitted = asyncio.run(Gate(breakers, clock, {}).admit(TARGET))  # the drill ended early
    assert (admitted.skip, admitted.breaker_state, admitted.drill) == (None, "half_open", None)


def test_a_breaker_open_for_real_or_on_a_route_without_switches_stays_open():
    clock, breakers = rig()
    asyncio.run(breakers.record(TARGET.name, AccountFailure(), clock.now()))
    open_ = SkipReason.BREAKER_OPEN
    assert asyncio.run(Gate(breakers, clock, {}).admit(TARGET)).skip == open_
    drilled = MemoryBreakerStore(BreakerPolicy())
    asyncio.run(drilled.record(TARGET.name, AccountFailure(600.0, drill=True), clock.now()))
    assert asyncio.run(Gate(drilled, clock).admit(TARGET)).skip == open_


def test_a_breaker_a_drill_holds_open_is_passed_over_for_the_drill():
    clock, breakers = rig()
    asyncio.run(breakers.record(TARGET.name, AccountFailure(90.0, drill=True), clock.now()))
    gate = Gate(breakers, clock, {TARGET.name: clock.wall() + timedelta(seconds=90)})
    assert asyncio.run(gate.admit(TARGET)).skip == SkipReason.DRILL
