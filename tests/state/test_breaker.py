"""The breaker's pure state machine. The stores' contract suite, run against every store, is
in tests/state/test_store_contract.py.

Time is a `VirtualClock` moved by hand; nothing here sleeps.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.clock import VirtualClock
from engine.core.errors import (
    AccountFault,
    AmbiguousFault,
    AttemptError,
    DrillFault,
    ProviderFault,
    QualityFault,
    RateLimited,
    RequestFault,
)
from engine.state.breaker import (
    WINDOW_BUCKETS,
    AccountFailure,
    Admission,
    BreakerPolicy,
    BreakerState,
    DrillOver,
    Event,
    ProviderFailure,
    RateLimit,
    Released,
    Success,
    admit,
    event_for,
    transition,
)

POLICY = BreakerPolicy()  # failures=5, window 60 s, min_volume=10, rate 0.5, cooldown 30 s


# --- the pure functions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "event"),
    [
        (RequestFault("context_too_long", status=400), None),
        (ProviderFault("overloaded", status=529, retry_after_s=7.0), ProviderFailure(7.0)),
        (AmbiguousFault("truncated_body", status=200), ProviderFailure(None)),
        (AccountFault("invalid_api_key", status=401), AccountFailure()),
        (RateLimited("rate_limit", status=429, retry_after_s=3.0), RateLimit(3.0)),
        (DrillFault(120.0), AccountFailure(120.0, drill=True)),
        (QualityFault("schema: $.x", None, error_class="output_schema"), Success()),
    ],
)
def test_each_error_reports_the_event_of_its_decision(error: AttemptError, event: Event | None):
    assert event_for(error) == event


def test_a_drill_holds_the_breaker_open_until_it_ends_and_its_end_lets_a_probe_through():
    held = transition(BreakerState(), AccountFailure(120.0, drill=True), 10.0, POLICY)
    assert (held.status, held.open_reason, held.open_until) == ("open", "drill", 130.0)
    assert admit(held, 129.0, POLICY)[0] is Admission.REJECT_OPEN
    over = transition(held, DrillOver(), 40.0, POLICY)  # ended early
    assert admit(over, 40.0, POLICY)[0] is Admission.PROBE
    real = transition(BreakerState(), AccountFailure(), 10.0, POLICY)
    assert transition(real, DrillOver(), 40.0, POLICY) == real  # a real key problem stays


def test_the_window_stays_a_few_buckets_however_busy_the_target():
    clock, state = VirtualClock(), BreakerState()
    for _ in range(10_000):
        state = transition(state, Success(), clock.now(), POLICY)
        clock.advance(0.05)
    assert len(state.recent) <= WINDOW_BUCKETS + 1
    assert sum(total for _, _, total in state.recent) <= (POLICY.window_s * 1.1) / 0.05 + 1


def test_a_policy_rejects_nonsense():
    with pytest.raises(ValueError):
        BreakerPolicy(failure_rate=1.5)
    with pytest.raises(ValueError):
        BreakerPolicy(cooldown_s=-1)


SMALL = BreakerPolicy(
    failures=3, window_s=20, min_volume=4, cooldown_s=10, account_cooldown_s=30, probe_lease_s=5
)
failure = st.builds(ProviderFailure, st.none() | st.sampled_from([1.0, 15.0, 40.0]))
rate_limit = st.builds(RateLimit, st.none() | st.sampled_from([0.5, 3.0, 12.0]))
others = st.sampled_from([Success(), AccountFailure(), Released()])
# Weighted towards admits and failures, so that histories often reach open and half-open.
step_kinds = st.one_of(st.just("admit"), st.just("admit"), failure, failure, rate_limit, others)
steps = st.tuples(
    st.sampled_from([0.0, 0.0, 0.5, 1.0, 5.0, 10.0, 30.0]) | st.floats(0, 60), step_kinds
)


@settings(max_examples=500)
@given(st.lists(steps, max_size=60))
def test_random_histories_keep_the_breakers_promises(history):
    """Never admits while open or cooling, never has two probes out at once, and rate limits
    and releases never move the status."""
    clock, state = VirtualClock(), BreakerState()
    last_probe: float | None = None  # when the outstanding probe was granted, if any
    for dt, step in history:
        clock.advance(dt)
        now = clock.now()
        if step == "admit":
            decision, state_after = admit(state, now, SMALL)
            if state.status == "open" and now < (state.open_until or 0):
                assert decision is Admission.REJECT_OPEN
            if decision.allowed:
                assert state.cooling_until is None or now >= state.cooling_until
            if decision is Admission.ALLOW:
                assert state.status == "closed"
            if decision is Admission.PROBE:
                assert last_probe is None or now >= last_probe + SMALL.probe_lease_s
                last_probe = now
            state = state_after
        else:
            before, state = state, transition(state, step, now, SMALL)
            last_probe = None  # any report settles the probe
            if isinstance(step, RateLimit | Released):
                assert state.status == before.status
        assert len(state.recent) <= WINDOW_BUCKETS + 1
