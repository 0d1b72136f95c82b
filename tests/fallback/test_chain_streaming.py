"""The chain's streams on virtual time: before the first content a failure falls back unseen and
the budget applies; after it the answer is committed and a failure is reported in-band."""

from __future__ import annotations

import asyncio

import pytest
from helpers.chain_rig import ASK, BACKUP, PRIMARY, Rig, model

from engine.core.errors import AllProvidersUnavailable, RequestFailed
from engine.core.messages import MessageEnd, StreamError, StreamEvent, StreamStart, TextDelta


def stream(rig: Rig) -> list[tuple[float, StreamEvent]]:
    """Every event of one streamed request, with the virtual seconds at which it arrived."""
    rig.started = rig.clock.now()

    async def collect() -> list[tuple[float, StreamEvent]]:
        return [(rig.elapsed(), event) async for event in rig.chain.stream(ASK)]

    return rig.clock.run(collect())


def text(events: list[tuple[float, StreamEvent]]) -> str:
    return "".join(e.text for _, e in events if isinstance(e, TextDelta))


def test_a_stream_with_no_content_before_the_first_token_timeout_falls_back():
    rig = Rig(primary_retries=0, first_token_timeout_s=3)
    rig.script(PRIMARY, "slow_drip:interval=1,count=30")  # keep-alives, never a token
    events = stream(rig)
    at, start = events[0]
    assert at == 3 and start == StreamStart("support", "gpt", "gpt-4o", 1, 2)
    assert isinstance(events[-1][1], MessageEnd) and text(events).startswith("echo: ")
    assert (rig.attempts[0].error_class, rig.attempts[0].decision) == (
        "stream_stalled",
        "fall_back",
    )


@pytest.mark.parametrize(
    "fault", ["529", "reset", "stream_error:after_events=1", "stream_cut:after_events=2"]
)
def test_a_failure_before_the_first_content_falls_back_unseen_by_the_caller(fault):
    rig = Rig(primary_retries=0)
    rig.script(PRIMARY, fault)
    events = [e for _, e in stream(rig)]
    assert events[0] == StreamStart("support", "gpt", "gpt-4o", 1, 2)
    assert sum(isinstance(e, StreamStart) for e in events) == 1
    assert isinstance(events[-1], MessageEnd) and events[-1].attempts == tuple(rig.attempts)
    assert [(a.target, a.served) for a in rig.attempts] == [(PRIMARY, False), (BACKUP, True)]


def test_silence_after_the_first_content_ends_the_stream_with_an_in_band_error():
    rig = Rig(first_token_timeout_s=10, idle_timeout_s=5)
    rig.script(PRIMARY, "slow_tokens:interval=8")  # the first token at 8 s, the next at 16 s
    events = stream(rig)
    at, error = events[-1]
    assert at == 13 and isinstance(error, StreamError)
    assert (error.error_class, error.error_type) == ("stream_stalled", "timeout_error")
    assert not any(isinstance(e, MessageEnd) for _, e in events)
    assert not rig.calls(BACKUP)  # a committed answer is never spliced onto another model's
    [attempt] = rig.attempts
    assert (attempt.decision, attempt.served, attempt.ttft_ms) == ("in_band_error", True, 8000)
    assert error.attempts == (attempt,)


@pytest.mark.parametrize(
    ("fault", "error_class"),
    [("stream_cut:after_events=4", "stream_cut"), ("stream_error:after_events=4", "overloaded")],
)
def test_a_failure_after_the_first_content_is_reported_in_band(fault, error_class):
    rig = Rig()
    rig.script(PRIMARY, fault)
    events = [e for _, e in stream(rig)]
    assert isinstance(events[0], StreamStart) and events[0].provider == "claude"
    assert isinstance(events[-1], StreamError) and events[-1].error_class == error_class
    assert not any(isinstance(e, MessageEnd) for e in events)
    assert len(rig.calls()) == 1


def test_the_budget_bounds_a_stream_only_until_its_first_content():
    rig = Rig(budget_s=3, backup_reserve_share=0)
    rig.script(PRIMARY, "slow_tokens:interval=2")
    events = stream(rig)
    assert events[0][0] == 2  # committed inside the budget...
    assert isinstance(events[-1][1], MessageEnd) and events[-1][0] > 3  # ...then let finish


def test_the_budget_cuts_a_stream_that_has_not_started():
    rig = Rig(budget_s=5, backup_reserve_share=0)
    rig.script(PRIMARY, "slow_drip:interval=1,count=30")
    with pytest.raises(AllProvidersUnavailable) as caught:
        stream(rig)
    assert rig.elapsed() == 5 and caught.value.deadline_exceeded
    assert not rig.calls(BACKUP)


def test_a_stream_that_has_not_started_leaves_its_backup_the_reserved_budget():
    rig = Rig(budget_s=6)
    rig.script(PRIMARY, "slow_drip:interval=1,count=30")
    events = stream(rig)
    assert 4 <= events[0][0] < 4.5, "the primary is given up with a third of the budget left"


def test_a_request_fault_fails_a_stream_before_anything_is_yielded():
    rig = Rig()
    rig.script(PRIMARY, "400")
    seen: list[StreamEvent] = []

    async def read() -> None:
        async for event in rig.chain.stream(ASK):
            seen.append(event)

    with pytest.raises(RequestFailed):
        rig.clock.run(read())
    assert seen == [] and len(rig.calls()) == 1


def test_every_streamed_call_yields_one_attempt_and_the_served_one_counts_the_tokens():
    rig = Rig()
    rig.script(PRIMARY, "stream_error:after_events=1", "ok")
    events = [e for _, e in stream(rig)]
    calls = rig.calls()
    assert [a.target for a in rig.attempts] == [PRIMARY, PRIMARY] and len(calls) == 2
    failed, served = rig.attempts
    assert (failed.decision, failed.served, served.served) == ("retry", False, True)
    assert {a.streamed for a in rig.attempts} == {True}
    assert (served.input_tokens, served.output_tokens) == (
        calls[1].usage["input_tokens"],
        calls[1].usage["output_tokens"],
    )
    assert served.ttft_ms is not None and events[0] == StreamStart(
        "support", "claude", "claude-sonnet-4-5", 0, 2
    )


def test_a_caller_that_stops_reading_gets_the_attempt_recorded_and_the_probe_released_at_once():
    rig = Rig(breaker_failures=1, breaker_cooldown_s=30, primary_retries=0)
    rig.script(PRIMARY, "500", "slow_tokens:interval=1")
    rig.clock.run(rig.chain.complete(ASK))
    rig.clock.advance(30)
    rig.attempts.clear()

    async def read_one_token_then_leave() -> None:
        events = rig.chain.stream(ASK)
        async for event in events:
            if isinstance(event, TextDelta):
                break
        await events.aclose()
        [attempt] = rig.attempts  # recorded before anything else runs
        assert (attempt.outcome, attempt.served, attempt.breaker_state) == (
            "cancelled",
            True,
            "half_open",
        )
        assert (await rig.chain.breakers.snapshot(PRIMARY)).probe_until is None

    rig.clock.run(read_one_token_then_leave())


def test_cancelling_a_stream_before_its_first_content_records_a_cancelled_attempt():
    rig = Rig()
    rig.fake.latency(model(PRIMARY), fixed_ms=10_000)

    async def cancel_after_one_second() -> None:
        task = asyncio.create_task(stream_to_end(rig))
        await rig.clock.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    rig.clock.run(cancel_after_one_second())
    [attempt] = rig.attempts
    assert (attempt.outcome, attempt.decision, attempt.served) == ("cancelled", "cancelled", False)
    assert attempt.latency_ms == 1000 and not rig.calls(BACKUP)


async def stream_to_end(rig: Rig) -> None:
    async for _ in rig.chain.stream(ASK):
        pass
