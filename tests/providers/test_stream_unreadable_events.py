"""Catalogue row 26 in both adapters, over real HTTP against the fake provider server: a stream
event whose data is not JSON is skipped and counted on the MessageEnd; more than
MAX_UNREADABLE_EVENTS of them in one stream make it a cut stream (row 21)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from helpers.provider_recorder import make_provider

from engine.core.errors import ProviderFault
from engine.core.messages import Message, MessageEnd, Request, StreamEvent, TextDelta
from engine.providers import AnthropicProvider, OpenAIProvider
from engine.providers.http import HttpProvider
from engine.providers.stream import MAX_UNREADABLE_EVENTS
from simulations.fakes import FakeProviders

QUESTION = "where is my order, and when will it arrive?"
ASK = Request(messages=(Message.user(QUESTION),), max_tokens=64)


@pytest.fixture
async def fake() -> AsyncIterator[FakeProviders]:
    async with FakeProviders(port=0) as server:
        yield server


@pytest.fixture(params=["anthropic", "openai"])
async def provider(request: pytest.FixtureRequest, fake: FakeProviders) -> AsyncIterator:
    if request.param == "anthropic":
        made: HttpProvider = AnthropicProvider("claude", base_url=fake.anthropic_url, api_key="k")
    else:
        made = OpenAIProvider("gpt", base_url=fake.openai_url, api_key="k")
    async with made:
        yield made


async def collect(provider: HttpProvider, model: str) -> list[StreamEvent]:
    return [event async for event in provider.stream(ASK, model, timeout_s=10)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_one_unreadable_event_is_skipped_and_the_whole_answer_arrives(provider):
    events = await collect(provider, "model#bad_event")
    assert text_of(events) == "echo: " + QUESTION
    assert isinstance(events[-1], MessageEnd) and events[-1].stop_reason == "end_turn"
    assert events[-1].unreadable_events == 1


async def test_a_healthy_stream_counts_no_unreadable_events(provider):
    events = await collect(provider, "model")
    assert isinstance(events[-1], MessageEnd) and events[-1].unreadable_events == 0


async def test_as_many_unreadable_events_as_allowed_still_complete(provider):
    events = await collect(provider, f"model#bad_event:count={MAX_UNREADABLE_EVENTS}")
    assert text_of(events) == "echo: " + QUESTION
    assert events[-1].unreadable_events == MAX_UNREADABLE_EVENTS == 3


async def test_unreadable_events_spread_over_a_stream_count_together(provider, fake):
    """The limit is per stream, not per run of consecutive bad events."""
    fake.script("*", ["bad_event:after_events=1,count=2"])
    events = await collect(provider, "model")
    assert events[-1].unreadable_events == 2


async def test_one_unreadable_event_too_many_is_a_cut_stream(provider):
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderFault) as caught:
        async for event in provider.stream(ASK, "model#bad_event:count=4", timeout_s=10):
            seen.append(event)
    assert caught.value.error_class == "stream_cut"
    assert caught.value.message.endswith("4 unreadable events")
    assert not any(isinstance(e, MessageEnd) for e in seen)


async def test_an_error_event_whose_data_is_not_json_is_still_an_error():
    body = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
        b'"type":"message","role":"assistant","model":"claude","content":[],'
        b'"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
        b"event: error\ndata: upstream timed out\n\n"
    )
    headers = {"content-type": "text/event-stream"}
    provider, _ = make_provider(
        AnthropicProvider,
        "claude",
        "k",
        lambda _: httpx.Response(200, content=body, headers=headers),
    )
    with pytest.raises(ProviderFault) as caught:
        await collect(provider, "claude")
    assert (caught.value.error_class, caught.value.message) == (
        "server_error",
        "upstream timed out",
    )
