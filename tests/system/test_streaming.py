"""Streams: fallback is invisible until the first content event; after it the answer is
committed, and a failure arrives in-band with no "complete" ending."""

from __future__ import annotations

from engine.core.messages import MessageEnd, StreamError, StreamStart, TextDelta

from .conftest import Stack, ask, collect


async def test_a_cut_before_the_first_content_falls_back_transparently(stack: Stack):
    chain = stack.chain(("anthropic", "primary#stream_cut:after_events=1"), ("openai", "backup"))
    events = await collect(chain.stream(ask("hello there")))

    starts = [e for e in events if isinstance(e, StreamStart)]
    assert len(starts) == 1 and starts[0].model == "backup" and starts[0].fallback_depth == 1
    assert isinstance(events[0], StreamStart), "nothing reaches the caller before the commit"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "echo: hello there", "one complete answer, none of the primary's"
    assert isinstance(events[-1], MessageEnd)
    assert not any(isinstance(e, StreamError) for e in events)
    assert [a.decision for a in events[-1].attempts] == ["retry", "fall_back", "served"]


async def test_a_cut_after_the_first_content_is_reported_in_band(stack: Stack):
    chain = stack.chain(("anthropic", "primary#stream_cut:after_events=6"), ("openai", "backup"))
    events = await collect(chain.stream(ask("a question long enough to stream in pieces")))

    assert isinstance(events[0], StreamStart) and events[0].model.startswith("primary")
    assert any(isinstance(e, TextDelta) and e.text for e in events)
    assert isinstance(events[-1], StreamError), "the stream ends with the error, in-band"
    assert not any(isinstance(e, MessageEnd) for e in events), "never a complete-looking end"
    assert events[-1].error_class == "stream_cut"
    assert stack.paid_calls("backup") == 0, "no fallback once the caller holds part of an answer"
    (attempt,) = stack.attempts
    assert (attempt.decision, attempt.served, attempt.outcome) == ("in_band_error", True, "error")


async def test_a_mid_stream_error_event_after_content_keeps_its_type(stack: Stack):
    chain = stack.chain(
        ("openai", "primary#stream_error:after_events=4,type=overloaded_error"),
        ("anthropic", "backup"),
    )
    events = await collect(chain.stream(ask("a question long enough to stream in pieces")))
    assert isinstance(events[-1], StreamError)
    assert events[-1].error_type == "overloaded_error"
    assert stack.paid_calls("backup") == 0


async def test_a_mid_stream_error_before_content_falls_back(stack: Stack):
    chain = stack.chain(
        ("anthropic", "primary#stream_error:after_events=1,type=overloaded_error"),
        ("openai", "backup"),
    )
    events = await collect(chain.stream(ask("hi")))
    assert isinstance(events[-1], MessageEnd)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "echo: hi"
    assert stack.paid_calls("primary") == 2 and stack.paid_calls("backup") == 1


async def test_a_streamed_answer_reports_usage_and_time_to_first_token(stack: Stack):
    chain = stack.chain(("openai", "primary"))
    events = await collect(chain.stream(ask("count my tokens please")))
    end = events[-1]
    assert isinstance(end, MessageEnd) and end.usage.output_tokens > 0
    (attempt,) = stack.attempts
    assert attempt.streamed and attempt.ttft_ms is not None and attempt.output_tokens > 0


async def test_a_caller_that_stops_reading_is_recorded_as_cancelled(stack: Stack):
    chain = stack.chain(("anthropic", "primary"))
    stream = chain.stream(ask("a question long enough to stream in several pieces"))
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()
    (attempt,) = stack.attempts
    assert (attempt.outcome, attempt.served) == ("cancelled", True)


async def test_finished_streams_hand_their_connection_back_to_the_pool(stack: Stack):
    """An unread body tail would make httpx drop the connection: a new TCP (and TLS)
    handshake for every streamed request."""
    for dialect in ("anthropic", "openai"):
        chain = stack.chain((dialect, "primary"))
        for _ in range(5):
            assert isinstance((await collect(chain.stream(ask())))[-1], MessageEnd)
    assert stack.fake.connections_accepted == 2  # one per provider client
