"""When a provider's stream is complete (engine.providers.stream): at its finish reason, however
the body ends after it (the end marker, a clean close, a broken connection, a silence), with the
usage sent with or after the finish reason; a body that ends before it is a cut. Both dialects,
each stream a canned SSE body played through httpx's MockTransport on a virtual clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from engine.core.clock import VirtualClock
from engine.core.errors import ProviderFault
from engine.core.messages import (
    Message,
    MessageEnd,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from engine.providers import AnthropicProvider, OpenAIProvider
from engine.providers.http import HttpProvider
from engine.providers.stream import FINISH_GRACE_S

ASK = Request(messages=(Message.user("hi"),), max_tokens=64)
WORDS = ["The ", "parcel ", "left ", "the ", "depot ", "today."]


class Body(httpx.AsyncByteStream):
    """A response body in pieces that then ends cleanly, breaks (`then`) or goes silent with
    the connection open (`hang`), and knows whether it was closed."""

    def __init__(self, *pieces: bytes, then: Exception | None = None, hang: bool = False):
        self.pieces, self.then, self.hang, self.closed = pieces, then, hang, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece
        if self.then is not None:
            raise self.then
        if self.hang:
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


def openai_sse(*chunks: dict, done: bool = False) -> bytes:
    lines = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (lines + ("data: [DONE]\n\n" if done else "")).encode()


def oa_chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None):
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-x", "choices": choices,
            "usage": usage}  # fmt: skip


OA_USAGE = {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18}
OA_TEXT = [oa_chunk({"role": "assistant", "content": ""})] + [
    oa_chunk({"content": w}) for w in WORDS
]


def anthropic_sse(*events: dict) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


AN_START = {"type": "message_start", "message": {"id": "m1", "type": "message",
            "role": "assistant", "model": "claude-x", "content": [], "stop_reason": None,
            "usage": {"input_tokens": 12, "output_tokens": 1}}}  # fmt: skip
AN_TEXT = [
    AN_START,
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    *(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}
        for w in WORDS
    ),
    {"type": "content_block_stop", "index": 0},
]
AN_DELTA = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 6}}  # fmt: skip
AN_STOP = {"type": "message_stop"}


def run(
    provider_kind: type[HttpProvider], body: Body, clock: VirtualClock | None = None
) -> list[StreamEvent]:
    """Every event of one stream of `body`, on a virtual clock (a silence costs no real time)."""
    clock = clock or VirtualClock()
    headers = {"content-type": "text/event-stream"}
    transport = httpx.MockTransport(lambda _: httpx.Response(200, stream=body, headers=headers))

    async def read() -> list[StreamEvent]:
        async with provider_kind("p", api_key="k", transport=transport, clock=clock) as provider:
            return [event async for event in provider.stream(ASK, "m", timeout_s=60)]

    return clock.run(read())


def text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def end(events: list[StreamEvent]) -> MessageEnd:
    assert isinstance(events[-1], MessageEnd), events[-1]
    assert sum(isinstance(e, MessageEnd) for e in events) == 1
    return events[-1]


# --- OpenAI: finish_reason, then usage, then [DONE] ------------------------------------------


def test_an_openai_stream_whose_body_closes_after_its_usage_without_done_is_complete():
    body = Body(openai_sse(*OA_TEXT, oa_chunk({}, "stop"), oa_chunk(usage=OA_USAGE)))
    events = run(OpenAIProvider, body)
    assert text(events) == "".join(WORDS)
    assert end(events).stop_reason == "end_turn"
    assert end(events).usage == Usage(input_tokens=12, output_tokens=6)
    assert body.closed


def test_an_openai_stream_whose_connection_breaks_after_the_finish_reason_is_complete():
    """A close that is not clean (the chunked body's last chunk never came) after the finish
    reason is the end of a whole answer, not a cut; the usage that arrived is kept."""
    cut = httpx.RemoteProtocolError("the connection closed mid-body (transfer encoding)")
    body = Body(openai_sse(*OA_TEXT, oa_chunk({}, "length"), oa_chunk(usage=OA_USAGE)), then=cut)
    events = run(OpenAIProvider, body)
    assert (end(events).stop_reason, end(events).usage.output_tokens) == ("max_tokens", 6)


def test_an_openai_stream_that_ends_at_its_finish_reason_keeps_the_usage_sent_with_it():
    body = Body(openai_sse(*OA_TEXT, oa_chunk({}, "stop", usage=OA_USAGE)))
    assert end(run(OpenAIProvider, body)).usage == Usage(input_tokens=12, output_tokens=6)


def test_an_openai_stream_that_goes_silent_after_its_finish_reason_completes_after_the_grace():
    clock = VirtualClock()
    started = clock.now()
    body = Body(openai_sse(*OA_TEXT, oa_chunk({}, "stop")), hang=True)
    events = run(OpenAIProvider, body, clock)
    assert text(events) == "".join(WORDS) and end(events).usage == Usage()
    assert clock.now() - started == pytest.approx(FINISH_GRACE_S)
    assert body.closed


def test_usage_that_follows_the_finish_reason_within_the_grace_is_kept():
    """The grace is per wait: the usage chunk a moment after the finish reason still counts."""

    class Late(Body):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield openai_sse(*OA_TEXT, oa_chunk({}, "stop"))
            await asyncio.sleep(FINISH_GRACE_S / 2)
            yield openai_sse(oa_chunk(usage=OA_USAGE))
            await asyncio.Event().wait()

    events = run(OpenAIProvider, Late())
    assert end(events).usage == Usage(input_tokens=12, output_tokens=6)


def test_an_openai_tool_call_stream_without_done_is_complete():
    start = {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": "track", "arguments": ""}}  # fmt: skip
    args = {"index": 0, "function": {"arguments": '{"order": 7}'}}
    body = Body(
        openai_sse(
            oa_chunk({"role": "assistant", "content": None, "tool_calls": [start]}),
            oa_chunk({"tool_calls": [args]}),
            oa_chunk({}, "tool_calls"),
            oa_chunk(usage=OA_USAGE),
        )
    )
    events = run(OpenAIProvider, body)
    assert events[:2] == [ToolCallStart(0, "call_1", "track"), ToolCallDelta(0, '{"order": 7}')]
    assert end(events).stop_reason == "tool_use"


def test_an_openai_stream_with_done_still_ends_at_done():
    body = Body(openai_sse(*OA_TEXT, oa_chunk({}, "stop"), oa_chunk(usage=OA_USAGE), done=True))
    events = run(OpenAIProvider, body)
    assert end(events).usage.output_tokens == 6 and text(events) == "".join(WORDS)


@pytest.mark.parametrize(
    "body",
    [
        Body(openai_sse(*OA_TEXT)),
        Body(openai_sse(*OA_TEXT), then=httpx.ReadError("[Errno 104] Connection reset by peer")),
        Body(openai_sse(*OA_TEXT, oa_chunk(usage=OA_USAGE))),  # usage, but no finish reason
    ],
    ids=["clean-close", "reset", "usage-only"],
)
def test_an_openai_stream_that_ends_before_its_finish_reason_is_a_cut(body):
    with pytest.raises(ProviderFault) as caught:
        run(OpenAIProvider, body)
    assert (caught.value.error_class, caught.value.status) == ("stream_cut", 200)
    assert caught.value.message.startswith("p: stream cut: ")


# --- Anthropic: message_delta with stop_reason and usage, then message_stop -----------------


def test_an_anthropic_stream_that_closes_after_message_delta_without_message_stop_is_complete():
    body = Body(anthropic_sse(*AN_TEXT, AN_DELTA))
    events = run(AnthropicProvider, body)
    assert text(events) == "".join(WORDS)
    assert end(events).stop_reason == "end_turn"
    assert end(events).usage == Usage(input_tokens=12, output_tokens=6)


def test_an_anthropic_stream_whose_connection_breaks_after_message_delta_is_complete():
    cut = httpx.RemoteProtocolError("the connection closed mid-body (transfer encoding)")
    events = run(AnthropicProvider, Body(anthropic_sse(*AN_TEXT, AN_DELTA), then=cut))
    assert end(events).usage.output_tokens == 6


def test_an_anthropic_stream_that_goes_silent_after_message_delta_completes_after_the_grace():
    clock = VirtualClock()
    started = clock.now()
    body = Body(anthropic_sse(*AN_TEXT, AN_DELTA), hang=True)
    events = run(AnthropicProvider, body, clock)
    assert end(events).usage == Usage(input_tokens=12, output_tokens=6)
    assert clock.now() - started == pytest.approx(FINISH_GRACE_S)
    assert body.closed


def test_an_anthropic_stream_with_message_stop_ends_there():
    events = run(AnthropicProvider, Body(anthropic_sse(*AN_TEXT, AN_DELTA, AN_STOP)))
    assert end(events).usage.output_tokens == 6


def test_message_stop_alone_still_completes_a_stream():
    """No message_delta (a compatible server's shortcut): message_stop is the end."""
    events = run(AnthropicProvider, Body(anthropic_sse(*AN_TEXT, AN_STOP)))
    assert end(events).stop_reason == "end_turn" and text(events) == "".join(WORDS)


@pytest.mark.parametrize(
    "body",
    [
        Body(anthropic_sse(*AN_TEXT)),
        Body(anthropic_sse(*AN_TEXT), then=httpx.ReadError("[Errno 104] Connection reset by peer")),
        # a message_delta with usage but no stop reason is not the end
        Body(
            anthropic_sse(
                *AN_TEXT, {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 6}}
            )
        ),
    ],
    ids=["clean-close", "reset", "delta-without-stop-reason"],
)
def test_an_anthropic_stream_that_ends_before_its_stop_reason_is_a_cut(body):
    with pytest.raises(ProviderFault) as caught:
        run(AnthropicProvider, body)
    assert (caught.value.error_class, caught.value.status) == ("stream_cut", 200)
