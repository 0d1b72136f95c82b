"""The official `anthropic` SDK, unchanged, against the Anthropic dialect: what the SDK sends
parses, and what we write back (messages, event streams, in-band errors, error bodies) the
SDK reads into its own objects and exceptions, including its stream accumulator and
`get_final_message()`. The transport is httpx's MockTransport, so this is the dialect alone;
tests/gateway/test_sdks.py runs the SDKs against the whole gateway."""

from __future__ import annotations

from collections.abc import Sequence

import anthropic
import httpx2
import pytest

from engine.core.messages import (
    Message,
    MessageEnd,
    Response,
    StreamError,
    StreamEvent,
    StreamStart,
    Text,
    TextDelta,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    ToolResult,
    Usage,
    UsageUpdate,
)
from engine.gateway.dialects.anthropic import ANTHROPIC
from engine.gateway.dialects.base import BadRequest, Parsed

USAGE = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=7)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = [{"name": "weather", "description": "Forecast", "input_schema": WEATHER}]
HI = [{"role": "user", "content": "hi"}]
ANSWER = Response(
    content=(
        Text("Checking."),
        ToolCall("toolu_1", "weather", {"city": "Oslo"}),
        ToolCall("call_2", "weather", None, '{"city": '),  # an OpenAI server's broken JSON
    ),
    stop_reason="tool_use",
    usage=USAGE,
    model="claude-sonnet-4-5",
)
STREAM: list[StreamEvent] = [
    StreamStart("route", "anthropic", "claude-sonnet-4-5", 0, 1),
    UsageUpdate(Usage(input_tokens=10, cache_read_tokens=100, cache_write_tokens=7)),
    TextDelta("Check"),
    TextDelta("ing."),
    ToolCallStart(0, "toolu_1", "weather"),
    ToolCallDelta(0, '{"city"'),
    ToolCallDelta(0, ': "Oslo"}'),
    ToolCallStart(1, "call_2", "weather"),
    ToolCallDelta(1, '{"city": '),
    MessageEnd("tool_use", USAGE, "claude-sonnet-4-5"),
]


class Gateway:
    """Just the dialect behind a MockTransport: parse, then answer `answer` or `events`."""

    def __init__(
        self, answer: Response = ANSWER, events: Sequence[StreamEvent] = STREAM, status: int = 200
    ) -> None:
        self.answer, self.events, self.status = answer, events, status
        self.seen: list[Parsed] = []
        self.client = anthropic.AsyncAnthropic(
            api_key="gw-key",
            base_url="http://gateway.test",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
            max_retries=0,
        )

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == ANTHROPIC.path
        try:
            parsed = ANTHROPIC.parse(request.content, request.headers)
        except BadRequest as exc:
            return self.error(exc.status, exc.message)
        self.seen.append(parsed)
        if self.status != 200:
            return self.error(self.status, "no provider could answer")
        if parsed.request.stream:
            encoder = ANTHROPIC.stream_encoder(model="claude", request_id="r1", include_usage=True)
            body = b"".join(encoder.event(event) for event in self.events)
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        answer = ANTHROPIC.encode(self.answer, model="claude", request_id="r1")
        return httpx2.Response(200, json=answer)

    def error(self, status: int, message: str) -> httpx2.Response:
        error_type = ANTHROPIC.error_type_for(status)
        body = ANTHROPIC.error_body(
            status=status, error_type=error_type, message=message, request_id="req_1"
        )
        return httpx2.Response(status, json=body, headers={"request-id": "req_1"})


async def test_the_sdk_reads_a_message_with_tool_use_and_cached_usage():
    gateway = Gateway()
    message = await gateway.client.messages.create(
        model="support",
        max_tokens=100,
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=HI,
        tools=TOOLS,
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
        extra_body={"temperature": 0.5},  # gone from SDK 2.x's signature, still on the wire
        stop_sequences=["END"],
        metadata={"user_id": "u1"},
        extra_headers={"x-switchover-feature": "helpdesk"},
    )
    assert (message.id, message.model, message.stop_reason) == ("msg_r1", "claude", "tool_use")
    text, first, second = message.content
    assert text.type == "text" and text.text == "Checking."
    assert (first.type, first.id, first.input) == ("tool_use", "toolu_1", {"city": "Oslo"})
    assert second.input == {"_raw_arguments": '{"city": '}
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (10, 100)
    request = gateway.seen[0].request
    assert (request.system, request.cache_system, request.feature) == (
        "Be brief.",
        True,
        "helpdesk",
    )
    assert (request.max_tokens, request.temperature, request.stop, request.user) == (
        100,
        0.5,
        ("END",),
        "u1",
    )
    assert request.tools == (Tool("weather", "Forecast", WEATHER),)
    assert request.tool_choice == ToolChoice("any", parallel=False)


async def test_top_level_cache_control_marks_the_last_text():
    gateway = Gateway()
    await gateway.client.messages.create(
        model="m", max_tokens=10, messages=HI, cache_control={"type": "ephemeral"}
    )
    assert gateway.seen[0].request.messages == (Message("user", (Text("hi", cache=True),)),)


async def test_the_sdks_stream_helper_accumulates_the_final_message():
    gateway = Gateway()
    async with gateway.client.messages.stream(
        model="support", max_tokens=100, messages=HI, tools=TOOLS
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Checking."
    assert [block.type for block in final.content] == ["text", "tool_use", "tool_use"]
    assert final.content[1].input == {"city": "Oslo"}
    assert final.content[2].input == {"_raw_arguments": '{"city": '}
    assert final.stop_reason == "tool_use"
    usage = final.usage  # message_start knew nothing yet; message_delta brought the totals
    assert (usage.input_tokens, usage.output_tokens, usage.cache_creation_input_tokens) == (
        10,
        5,
        7,
    )


async def test_the_sdks_raw_event_stream_has_the_documented_order():
    gateway = Gateway(events=[*STREAM[:4], STREAM[-1]])
    stream = await gateway.client.messages.create(
        model="m", max_tokens=10, messages=HI, stream=True
    )
    kinds = [event.type async for event in stream]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


async def test_an_in_band_error_raises_the_sdks_status_error_with_the_200():
    error = StreamError("overloaded", "Overloaded", "overloaded_error")
    gateway = Gateway(events=[*STREAM[:3], error])
    with pytest.raises(anthropic.APIStatusError) as caught:
        async with gateway.client.messages.stream(model="m", max_tokens=10, messages=HI) as stream:
            async for _ in stream.text_stream:
                pass
    assert caught.value.status_code == 200
    assert caught.value.type == "overloaded_error"


async def test_the_sdk_replays_its_own_tool_loop_history():
    gateway = Gateway()
    first = await gateway.client.messages.create(model="m", max_tokens=10, messages=HI, tools=TOOLS)
    await gateway.client.messages.create(
        model="m",
        max_tokens=10,
        tools=TOOLS,
        messages=[
            *HI,
            {"role": "assistant", "content": first.content},  # the SDK's own blocks
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "12 C"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "bad",
                 "is_error": True},
            ]},
        ],
    )  # fmt: skip
    assert gateway.seen[1].request.messages[1:] == (
        Message("assistant", (
            Text("Checking."),
            ToolCall("toolu_1", "weather", {"city": "Oslo"}),
            ToolCall("call_2", "weather", None, '{"city": '),  # the raw string, restored
        )),
        Message("user", (
            ToolResult("toolu_1", (Text("12 C"),)),
            ToolResult("call_2", (Text("bad"),), is_error=True),
        )),
    )  # fmt: skip


async def test_a_malformed_request_raises_the_sdks_bad_request_error():
    gateway = Gateway()
    with pytest.raises(anthropic.BadRequestError) as caught:
        await gateway.client.messages.create(model="m", max_tokens=0, messages=HI)
    assert caught.value.type == "invalid_request_error"
    assert "max_tokens: 0" in caught.value.body["error"]["message"]
    assert caught.value.request_id == "req_1"


@pytest.mark.parametrize(
    ("status", "exception"),
    [
        (401, anthropic.AuthenticationError),
        (404, anthropic.NotFoundError),
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
        (529, anthropic.OverloadedError),
    ],
)
async def test_error_bodies_become_the_sdks_typed_exceptions(status, exception):
    with pytest.raises(exception) as caught:
        await Gateway(status=status).client.messages.create(model="m", max_tokens=5, messages=HI)
    assert caught.value.status_code == status
    assert caught.value.type == ANTHROPIC.error_type_for(status)
    assert caught.value.body["request_id"] == "req_1"
