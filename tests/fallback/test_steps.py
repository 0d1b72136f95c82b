"""What follows a failed attempt is read from the error's own decision, never from its type: one
case per decision, and an error class that declares a decision is handled by it."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from engine.core.attempt import Step
from engine.core.errors import (
    AccountFault,
    AmbiguousFault,
    AttemptError,
    Decision,
    DrillFault,
    LocalFault,
    ProviderFault,
    QualityFault,
    RateLimited,
    RequestFault,
)
from engine.fallback.policy import Policy
from engine.fallback.steps import callers_mistake, next_step
from engine.fallback.target import Target
from engine.state.breaker import AccountFailure, event_for

PROVIDER = SimpleNamespace(name="p", kind="openai")
SMALL = Target(PROVIDER, "small", context_window=8_000)  # type: ignore[arg-type]
LARGE = Target(PROVIDER, "large", context_window=200_000)  # type: ignore[arg-type]


def step(
    error: AttemptError, *, later: tuple[Target, ...] = (LARGE,), retries_left: int = 1
) -> tuple[float | None, Step]:
    return next_step(
        error,
        target=SMALL,
        later=later,
        retries_left=retries_left,
        policy=Policy(),
        rng=random.Random(7),
    )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RequestFault("invalid_request", status=400), Step.FAIL_FAST),
        (LocalFault.internal("a bug in a prompt"), Step.FAIL_FAST),
        (RequestFault("context_overflow", status=400), Step.FALL_BACK_LARGER_CONTEXT),
        (AccountFault("authentication", status=401), Step.FALL_BACK_NOW),
        (DrillFault(60.0), Step.FALL_BACK_NOW),
        (RateLimited("rate_limit", status=429, retry_after_s=1.0), Step.WAIT_AND_RETRY),
        (RateLimited("rate_limit", status=429, retry_after_s=30.0), Step.FALL_BACK),
        (RateLimited("rate_limit", status=429), Step.FALL_BACK),
        (ProviderFault("overloaded", status=529), Step.RETRY),
        (ProviderFault("timeout", status=504, retry_same=False), Step.FALL_BACK),
        (AmbiguousFault("reset"), Step.RETRY),
        (QualityFault("$.x: required", None, error_class="output_schema"), Step.RETRY),
    ],
    ids=lambda case: case.error_class if isinstance(case, AttemptError) else str(case),
)
def test_each_error_takes_the_step_its_decision_names(error: AttemptError, expected: Step):
    wait, taken = step(error)
    assert taken is expected
    assert (wait is not None) == (taken in (Step.RETRY, Step.WAIT_AND_RETRY))


def test_a_context_overflow_fails_fast_when_no_later_window_is_larger():
    assert step(RequestFault("context_overflow"), later=(SMALL,)) == (None, Step.FAIL_FAST)


def test_with_no_retry_left_the_chain_falls_back_and_on_the_last_target_gives_up():
    overloaded = ProviderFault("overloaded", status=529)
    assert step(overloaded, retries_left=0) == (None, Step.FALL_BACK)
    assert step(overloaded, retries_left=0, later=()) == (None, Step.GIVE_UP)
    assert step(AccountFault("authentication"), later=()) == (None, Step.GIVE_UP)


def test_an_error_class_is_handled_by_the_decision_it_declares_not_by_its_type():
    """A provider fault that declared FALL_BACK_NOW is handled as an account fault is: by the
    chain's next step and by the breaker alike."""

    class Declared(ProviderFault):
        decision = Decision.FALL_BACK_NOW

    assert step(Declared("x")) == (None, Step.FALL_BACK_NOW)
    assert event_for(Declared("x")) == AccountFailure()


def test_a_direct_targets_unknown_model_is_the_callers_mistake():
    mistake = callers_mistake(AccountFault("model_not_found", "no such model", status=404))
    assert (type(mistake), mistake.status, mistake.credential_alert) == (RequestFault, 404, False)
    other = AccountFault("authentication", status=401)
    assert callers_mistake(other) is other


def test_recorded_steps_are_stored_as_the_strings_they_always_were():
    assert {str(s) for s in Step} == {
        "served",
        "fail_fast",
        "retry",
        "wait_and_retry",
        "fall_back",
        "fall_back_now",
        "fall_back_larger_context",
        "continue_elsewhere",
        "in_band_error",
        "give_up",
        "cancelled",
    }
    assert json.dumps({"decision": Step.FALL_BACK_NOW}) == '{"decision": "fall_back_now"}'
