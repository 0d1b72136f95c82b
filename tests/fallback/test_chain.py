"""The fallback chain's loop, behaviour by behaviour: the real chain and provider adapters over the
in-process fake providers, on virtual time (a 30 s outage costs no real time)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from helpers.chain_rig import ASK, BACKUP, KEYS, PRIMARY, PROMPT, THIRD, Rig, model

from engine.core.clock import VirtualClock
from engine.core.errors import AllProvidersUnavailable, ChainError, RequestFailed
from engine.core.messages import Message, Request, Response
from engine.fallback.chain import Chain
from engine.fallback.policy import Policy
from engine.fallback.target import Target
from engine.providers.openai import OpenAIProvider
from engine.state.breaker import BreakerState
from simulations.fakes import FakeTransport

# --- what the chain does after each kind of failure ------------------------------------------


@pytest.mark.parametrize(
    ("primary", "backup", "decisions"),
    [
        (["ok"], [], "claude:served"),
        (["500", "ok"], [], "claude:retry claude:served"),
        (["529", "529"], ["ok"], "claude:retry claude:fall_back gpt:served"),
        (["reset", "truncated"], ["ok"], "claude:retry claude:fall_back gpt:served"),
        (["504:delay=1"], ["ok"], "claude:fall_back gpt:served"),
        (["rate_limit:retry_after=1", "ok"], [], "claude:wait_and_retry claude:served"),
        (["rate_limit_long"], ["ok"], "claude:fall_back gpt:served"),
        (["401"], ["ok"], "claude:fall_back_now gpt:served"),
        (["400"], [], "claude:fail_fast"),
        (["500", "502"], ["503"], "claude:retry claude:fall_back gpt:give_up"),
        (["billing"], ["auth"], "claude:fall_back_now gpt:give_up"),
    ],
)
def test_each_attempt_records_what_the_chain_did_next(primary, backup, decisions):
    rig = Rig()
    rig.script(PRIMARY, *primary)
    rig.script(BACKUP, *backup)
    with contextlib.suppress(ChainError):
        rig.complete()
    assert " ".join(f"{a.provider}:{a.decision}" for a in rig.attempts) == decisions


def test_a_provider_fault_is_retried_once_on_the_primary_then_falls_back():
    rig = Rig(targets=3)
    rig.script(PRIMARY, "500", "500", "500")
    response = rig.complete()
    assert (response.provider, response.fallback_depth) == ("gpt", 1)
    assert [len(rig.calls(t)) for t in (PRIMARY, BACKUP, THIRD)] == [2, 1, 0]
    assert [a.served for a in rig.attempts] == [False, False, True]
    assert response.attempts == tuple(rig.attempts)


@pytest.mark.parametrize(("fault", "low", "high"), [("500", 0.25, 0.5), ("529", 0.025, 0.05)])
def test_the_retry_backoff_is_jittered_and_never_longer_than_its_cap(fault, low, high):
    """Capped by backoff_max_s; an overloaded provider is retried almost at once."""
    rig = Rig(backoff_base_s=10, backoff_max_s=0.5, overload_backoff_s=0.05)
    rig.script(PRIMARY, fault, "ok")
    rig.complete()
    first, second = rig.calls(PRIMARY)
    assert low <= second.time - first.time <= high


def test_a_retry_whose_backoff_would_not_fit_in_the_budget_falls_back_without_sleeping():
    rig = Rig(budget_s=2, backoff_base_s=3, backoff_max_s=3)
    rig.script(PRIMARY, "500:delay=0.5")
    response = rig.complete()
    assert response.fallback_depth == 1
    assert rig.calls(BACKUP)[0].time == rig.calls(PRIMARY)[0].time + 0.5
    assert rig.attempts[0].decision == "fall_back"


def test_a_fallback_gets_exactly_one_try():
    rig = Rig(targets=3, primary_retries=2)
    rig.script(PRIMARY, "500", "500", "500")
    rig.script(BACKUP, "500", "ok")
    response = rig.complete()
    assert [len(rig.calls(t)) for t in (PRIMARY, BACKUP, THIRD)] == [3, 1, 1]
    assert response.fallback_depth == 2


def test_a_gateway_timeout_is_not_retried_on_the_same_target():
    rig = Rig()
    rig.script(PRIMARY, "504:delay=10")
    response = rig.complete()
    assert len(rig.calls(PRIMARY)) == 1 and response.fallback_depth == 1
    assert rig.attempts[0].http_status == 504


# --- rate limits ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    ["rate_limit:retry_after=2", "rate_limit_ms:retry_after=2", "rate_limit_date:retry_after=2"],
)
def test_a_short_retry_after_is_waited_out_exactly_then_retried(fault):
    rig = Rig(max_retry_after_wait_s=2)
    rig.script(PRIMARY, fault, "ok")
    response = rig.complete()
    first, second = rig.calls(PRIMARY)
    assert second.time - first.time == pytest.approx(2)
    assert response.fallback_depth == 0 and not rig.calls(BACKUP)
    assert rig.attempts[0].retry_after_s == pytest.approx(2)


@pytest.mark.parametrize(
    ("fault", "cooling_s"),
    [
        ("rate_limit:retry_after=3", 3),  # longer than max_retry_after_wait_s
        ("rate_limit_long", 3600),
        ("rate_limit_no_header", 10),  # no reset said: rate_limit_cooldown_s
        ("rate_limit_garbage", 10),
    ],
)
def test_a_long_or_unknown_retry_after_falls_back_at_once_and_cools_the_target(fault, cooling_s):
    rig = Rig(max_retry_after_wait_s=2, rate_limit_cooldown_s=10)
    rig.script(PRIMARY, fault)
    assert rig.complete().fallback_depth == 1
    assert rig.elapsed() == 0  # no wait at all
    rig.clock.advance(cooling_s - 0.5)
    assert rig.complete().fallback_depth == 1
    assert len(rig.calls(PRIMARY)) == 1  # skipped while cooling, without an HTTP call
    rig.clock.advance(0.5)
    assert rig.complete().fallback_depth == 0
    assert rig.breaker(PRIMARY).status == "closed"  # a rate limit never trips the breaker


def test_a_short_retry_after_that_would_outlast_the_budget_falls_back_at_once():
    rig = Rig(budget_s=2, max_retry_after_wait_s=2)
    rig.script(PRIMARY, "rate_limit:retry_after=2")
    assert rig.complete().fallback_depth == 1 and rig.elapsed() == 0


def test_a_cooling_target_is_named_when_nothing_could_answer():
    rig = Rig(targets=1)
    rig.script(PRIMARY, "rate_limit_long")
    rig.fails()
    error = rig.fails()
    assert error.skipped == ((PRIMARY, "cooling down after a rate limit"),)
    assert error.errors == () and len(rig.calls()) == 1


def test_a_request_that_could_not_be_sent_anywhere_is_still_recorded_once():
    """Every target skipped: no HTTP call, no attempt for the caller, but one "skipped" record
    for telemetry, so the request counts as unavailable and can be found."""
    rig = Rig(targets=1, breaker_failures=1, primary_retries=0)
    rig.script(PRIMARY, "500")
    rig.fails()
    rig.attempts.clear()
    error = rig.fails()
    assert error.attempts == ()
    [record] = rig.attempts
    assert (record.outcome, record.decision, record.error_class) == (
        "skipped",
        "give_up",
        "all_skipped",
    )
    assert record.target == PRIMARY and record.breaker_state == "open"
    assert "breaker open" in record.error_message and not record.served


# --- the breaker, through the chain ----------------------------------------------------------


def test_consecutive_provider_faults_open_the_breaker_and_the_next_request_skips_the_target():
    # Overloads: each is evidence, even on a retry of the same content (engine.fallback.poison)
    rig = Rig(targets=1, breaker_failures=3, primary_retries=2)
    rig.script(PRIMARY, "529", "529", "529")
    rig.fails()
    assert rig.breaker(PRIMARY).status == "open"
    error = rig.fails()
    assert error.skipped == ((PRIMARY, "breaker open"),)
    assert error.errors == () and error.attempts == ()
    assert len(rig.calls()) == 3


def test_an_open_primary_is_skipped_and_the_backup_serves_at_depth_one():
    rig = Rig(breaker_failures=2)
    rig.script(PRIMARY, "529", "529")
    rig.complete()
    rig.attempts.clear()
    response = rig.complete()
    assert len(rig.calls(PRIMARY)) == 2
    assert response.fallback_depth == 1 and response.provider == "gpt"
    [attempt] = rig.attempts
    assert (attempt.target, attempt.fallback_depth, attempt.served) == (BACKUP, 1, True)


def test_after_the_cooldown_exactly_one_probe_goes_through():
    rig = Rig(breaker_failures=2, breaker_cooldown_s=30)
    rig.script(PRIMARY, "529", "529")
    rig.complete()
    rig.clock.advance(30)
    rig.fake.latency(model(PRIMARY), fixed_ms=1000)
    rig.attempts.clear()

    async def three_at_once() -> list[Response]:
        return await asyncio.gather(*(rig.chain.complete(ASK) for _ in range(3)))

    responses = rig.clock.run(three_at_once())
    assert sorted(r.fallback_depth for r in responses) == [0, 1, 1]
    assert len(rig.calls(PRIMARY)) == 3  # two that opened it, one probe
    [probe] = [a for a in rig.attempts if a.target == PRIMARY]
    assert probe.breaker_state == "half_open" and probe.served
    assert rig.breaker(PRIMARY).status == "closed"


def test_a_fault_that_opens_the_breaker_is_not_retried_on_that_target():
    """No backoff is slept for a retry that the open breaker would refuse."""
    rig = Rig(breaker_failures=1)
    rig.script(PRIMARY, "500")
    assert rig.complete().fallback_depth == 1
    assert [a.decision for a in rig.attempts] == ["fall_back", "served"]
    assert rig.elapsed() == 0


def test_a_failed_probe_opens_the_breaker_again_and_is_not_retried():
    rig = Rig(targets=1, breaker_failures=1, breaker_cooldown_s=30)
    rig.script(PRIMARY, "500", "500", "ok")
    rig.fails()
    rig.clock.advance(30)
    error = rig.fails()
    assert (rig.attempts[-1].breaker_state, rig.attempts[-1].decision) == ("half_open", "give_up")
    assert len(rig.calls()) == 2 and error.skipped == ()
    assert (rig.breaker(PRIMARY).status, rig.breaker(PRIMARY).open_reason) == ("open", "probe")


# --- account and request faults ------------------------------------------------------------


@pytest.mark.parametrize("fault", ["401", "403", "model_not_found", "billing", "quota"])
def test_an_account_fault_falls_back_now_opens_the_breaker_for_long_and_alerts(fault):
    rig = Rig(account_cooldown_s=300)
    rig.script(PRIMARY, fault)
    response = rig.complete()
    assert response.fallback_depth == 1 and len(rig.calls(PRIMARY)) == 1  # never retried
    [event] = rig.events
    assert (event.kind, event.route, event.target) == ("credential_failure", "support", PRIMARY)
    assert event.error_class == rig.attempts[0].error_class
    state = rig.breaker(PRIMARY)
    assert (state.status, state.open_reason) == ("open", "account")
    assert state.open_until == rig.clock.now() + 300
    rig.clock.advance(299)
    assert rig.complete().fallback_depth == 1 and len(rig.calls(PRIMARY)) == 1
    rig.clock.advance(1)
    assert rig.complete().fallback_depth == 0


@pytest.mark.parametrize(
    "fault", ["400", "context_overflow", "too_large", "unprocessable", "content_policy"]
)
def test_a_request_fault_fails_fast_and_never_counts_on_the_breaker(fault):
    rig = Rig(breaker_failures=1)
    rig.script(PRIMARY, fault)
    error = rig.fails(RequestFailed)
    assert len(rig.calls()) == 1  # neither retried nor sent to the backup
    assert error.error.status == rig.calls()[0].status
    assert error.attempts == tuple(rig.attempts)
    assert rig.breaker(PRIMARY) == BreakerState()


# --- time --------------------------------------------------------------------------------------


def test_a_target_is_skipped_when_less_than_its_minimum_budget_remains():
    rig = Rig(budget_s=5, min_attempt_budget_s=1, primary_retries=0, backup_reserve_share=0)
    rig.script(PRIMARY, "500:delay=4.5")
    error = rig.fails()
    assert error.deadline_exceeded and error.skipped == ((BACKUP, "time budget too small"),)
    assert not rig.calls(BACKUP) and rig.elapsed() == 4.5


def test_the_budget_cuts_a_slow_attempt_at_the_deadline():
    rig = Rig(budget_s=5, attempt_timeout_s=60, backup_reserve_share=0)
    rig.script(PRIMARY, "read_timeout")  # the headers never come
    error = rig.fails()
    assert rig.elapsed() == 5 and error.deadline_exceeded
    assert [e.error_class for e in error.errors] == ["read_timeout"]
    assert "budget of 5 s ran out" in error.errors[0].message


def test_by_default_a_hanging_primary_leaves_its_backups_a_third_of_the_budget():
    """The default attempt timeout (60 s) is longer than the default budget (30 s): without a
    reserve a primary that never answers would use the budget up and fail the request."""
    rig = Rig(primary_retries=0)
    rig.script(PRIMARY, "read_timeout")
    response = rig.complete()
    assert response.provider == "gpt" and rig.elapsed() == 20
    assert rig.attempts[0].error_class == "read_timeout"


def test_a_stream_whose_primary_never_starts_falls_back_with_a_third_of_the_budget_left():
    rig = Rig(primary_retries=0, first_token_timeout_s=60)
    rig.script(PRIMARY, "read_timeout")
    events = rig.stream()
    assert rig.elapsed() == 20 and events[0].provider == "gpt"


def test_attempt_timeout_caps_a_hanging_attempt_so_the_backup_still_gets_time():
    rig = Rig(budget_s=30, attempt_timeout_s=5, primary_retries=0)
    rig.script(PRIMARY, "read_timeout")
    response = rig.complete()
    assert response.provider == "gpt" and rig.elapsed() == 5
    assert (rig.attempts[0].error_class, rig.attempts[0].latency_ms) == ("read_timeout", 5000)


def test_all_providers_unavailable_carries_each_error_in_order():
    rig = Rig(targets=3)
    rig.script(PRIMARY, "500", "529")
    rig.script(BACKUP, "504:delay=1")
    rig.script(THIRD, "401")
    error = rig.fails()
    assert [(e.error_class, e.status) for e in error.errors] == [
        ("server_error", 500), ("overloaded", 529), ("timeout", 504), ("authentication", 401)
    ]  # fmt: skip
    assert not error.deadline_exceeded and error.skipped == ()
    assert error.attempts == tuple(rig.attempts)
    assert rig.attempts[-1].decision == "give_up"


# --- the attempt records ---------------------------------------------------------------------


def test_every_http_call_yields_exactly_one_attempt():
    rig = Rig(targets=3)
    rig.script(PRIMARY, "reset", "invalid_json")
    rig.script(BACKUP, "rate_limit_long")
    response = rig.complete()
    targets = {model(t): t for t in (PRIMARY, BACKUP, THIRD)}
    assert [(targets[c.model], c.wall, c.status) for c in rig.calls()] == [
        (a.target, a.started_at.isoformat(), a.http_status if a.outcome == "error" else 200)
        for a in rig.attempts
    ]
    assert [a.attempt_number for a in rig.attempts] == [1, 2, 3, 4]
    assert len({a.request_id for a in rig.attempts}) == 1
    assert [a.fallback_depth for a in rig.attempts] == [0, 0, 1, 2]
    assert [a.served for a in rig.attempts] == [False, False, False, True]
    assert response.attempts == tuple(rig.attempts)


def test_the_serving_attempt_carries_the_tokens_and_the_feature_tag():
    rig = Rig()
    rig.script(PRIMARY, "500", "ok")
    rig.complete()
    failed, served = rig.attempts
    usage = rig.calls()[-1].usage
    assert (served.input_tokens, served.output_tokens) == (
        usage["input_tokens"], usage["output_tokens"]
    ) != (0, 0)  # fmt: skip
    assert (failed.input_tokens, failed.output_tokens) == (0, 0)
    assert {a.feature for a in rig.attempts} == {"checkout-help"}
    assert [a.breaker_state for a in rig.attempts] == ["closed", "closed"]
    assert (served.outcome, served.provider, served.provider_kind) == (
        "success", "claude", "anthropic"
    )  # fmt: skip


def test_no_record_or_error_holds_the_prompt_or_an_api_key():
    rig = Rig(targets=3)
    rig.script(PRIMARY, "500", "401")
    rig.script(BACKUP, "400")
    error = rig.fails(RequestFailed)
    seen = repr(rig.attempts) + repr(rig.events) + repr(error) + str(error) + repr(error.error)
    for secret in (PROMPT, *KEYS.values()):
        assert secret not in seen
    assert len(rig.attempts) == 3


def test_a_hook_that_raises_never_fails_the_request():
    def broken(_: object) -> None:
        raise RuntimeError("the sink is down")

    rig = Rig()
    rig.chain.hooks.insert(0, broken)
    rig.chain.event_hooks.insert(0, broken)
    rig.script(PRIMARY, "401")
    assert rig.complete().fallback_depth == 1
    assert len(rig.attempts) == 2 and len(rig.events) == 1  # the later hooks still ran


# --- cancellation ----------------------------------------------------------------------------


def test_a_cancelled_request_records_its_attempt_as_cancelled_and_releases_the_probe():
    rig = Rig(breaker_failures=1, breaker_cooldown_s=30, primary_retries=0)
    rig.script(PRIMARY, "500")
    rig.complete()
    rig.clock.advance(30)
    rig.fake.latency(model(PRIMARY), fixed_ms=10_000)
    rig.attempts.clear()

    async def cancel_after_one_second() -> None:
        task = asyncio.create_task(rig.chain.complete(ASK))
        await rig.clock.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    rig.clock.run(cancel_after_one_second())
    [attempt] = rig.attempts
    assert (attempt.outcome, attempt.decision, attempt.served) == ("cancelled", "cancelled", False)
    assert (attempt.breaker_state, attempt.latency_ms) == ("half_open", 1000)
    assert rig.breaker(PRIMARY).probe_until is None
    rig.fake.latency(model(PRIMARY), fixed_ms=0)
    assert rig.complete().fallback_depth == 0  # the next request may probe at once


def test_a_caller_budget_only_ever_shortens_the_route_budget():
    """`budget_s` from the caller (the gateway passes the SDK's read timeout) caps the chain;
    a longer one is ignored."""
    clock = VirtualClock()
    transport = FakeTransport(clock=clock)
    transport.latency("*", fixed_ms=3_000)

    async def main(budget: float) -> float:
        provider = OpenAIProvider("gpt", api_key="k", base_url="http://f/v1",
                                  transport=transport, clock=clock)  # fmt: skip
        chain = Chain("r", [Target(provider, "gpt-4.1-mini")], clock=clock,
                      policy=Policy(budget_s=10))  # fmt: skip
        start = clock.now()
        with contextlib.suppress(AllProvidersUnavailable):
            await chain.complete(Request(messages=(Message.user("hi"),)), budget_s=budget)
        return clock.now() - start

    assert clock.run(main(1.0)) <= 1.05
    assert clock.run(main(60.0)) == pytest.approx(3.0, abs=0.05)
