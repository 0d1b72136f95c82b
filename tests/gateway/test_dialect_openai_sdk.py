"""The official `openai` SDK, unchanged, against the OpenAI dialect: what the SDK sends
parses, and what we write back (answers, chunk streams, in-band errors, error bodies) the SDK
reads into its own objects and exceptions. The transport is httpx's MockTransport, so this
is the dialect alone; tests/gateway/test_sdks.py runs the SDKs against the whole gateway."""

from __future__ import annotations

from collections.abc import Sequence

import httpx2
import openai
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
from engine.gateway.dialects.base import BadRequest, Parsed
from engine.gateway.dialects.openai import OPENAI

USAGE = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=7)
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER}}]
HI = [{"role": "user", "content": "hi"}]
ANSWER = Response(
    content=(
        Text("Checking."),
        ToolCall("call_1", "weather", {"city": "Oslo"}),
        ToolCall("call_2", "weather", None, '{"city": '),
    ),
    stop_reason="tool_use",
    usage=USAGE,
    model="gpt-4.1-2025-04-14",
)
STREAM: list[StreamEvent] = [
    StreamStart("route", "openai", "gpt-4.1", 0, 1),
    UsageUpdate(Usage(input_tokens=10, cache_read_tokens=100, cache_write_tokens=7)),
    TextDelta("Check"),
    TextDelta("ing."),
    ToolCallStart(0, "call_1", "weather"),
    ToolCallDelta(0, '{"city"'),
    ToolCallDelta(0, ': "Oslo"}'),
    ToolCallStart(1, "call_2", "weather"),
    ToolCallDelta(1, '{"city": "Bergen"}'),
    MessageEnd("tool_use", USAGE, "gpt-4.1"),
]


class Gateway:
    """Just the dialect behind a MockTransport: parse, then answer `answer` or `events`."""

    def __init__(
        self, answer: Response = ANSWER, events: Sequence[StreamEvent] = STREAM, status: int = 200
    ) -> None:
        self.answer, self.events, self.status = answer, events, status
        self.seen: list[Parsed] = []
        transport = httpx2.MockTransport(self.handle)
        self.client = openai.AsyncOpenAI(
            api_key="gw-key",
            base_url="http://gateway.test/v1",
            http_client=httpx2.AsyncClient(transport=transport),
            max_retries=0,
        )

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == OPENAI.path
        try:
            parsed = OPENAI.parse(request.content, request.headers)
        except BadRequest as exc:
            return self.error(exc.status, exc.message, code=exc.code, param=exc.param)
        self.seen.append(parsed)
        if self.status != 200:
            return self.error(self.status, "no provider could answer", code="server_is_overloaded")
        if parsed.request.stream:
            encoder = OPENAI.stream_encoder(
                model="gpt-4.1", request_id="r1", include_usage=parsed.include_usage
            )
            body = b"".join(encoder.event(event) for event in self.events)
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        answer = OPENAI.encode(self.answer, model="gpt-4.1", request_id="r1")
        return httpx2.Response(200, json=answer)

    def error(self, status: int, message: str, **fields: str | None) -> httpx2.Response:
        body = OPENAI.error_body(
            status=status,
            error_type=OPENAI.error_type_for(status),
            message=message,
            request_id="r1",
            **fields,
        )
        return httpx2.Response(status, json=body, headers={"x-request-id": "r1"})


async def test_the_sdk_reads_an_answer_with_tool_calls_and_cached_usage():
    gateway = Gateway()
    completion = await gateway.client.chat.completions.create(
        model="support",
        messages=[{"role": "system", "content": "Be brief."}, *HI],
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_completion_tokens=100,
        extra_headers={"x-switchover-feature": "helpdesk"},
    )
    choice = completion.choices[0]
    assert (completion.id, completion.model, choice.finish_reason) == (
        "chatcmpl-r1",
        "gpt-4.1",
        "tool_calls",
    )
    assert choice.message.content == "Checking."
    calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls]
    assert calls == [
        ("call_1", "weather", '{"city": "Oslo"}'),
        ("call_2", "weather", '{"city": '),  # not JSON, and passed through as it came
    ]
    assert completion.usage.prompt_tokens == 117
    assert completion.usage.prompt_tokens_details.cached_tokens == 100
    request = gateway.seen[0].request
    assert (request.system, request.max_tokens, request.feature) == ("Be brief.", 100, "helpdesk")
    assert request.tools == (Tool("weather", "", WEATHER),)
    assert request.tool_choice == ToolChoice("any", parallel=False)


async def test_the_sdk_streams_text_tool_calls_and_a_final_usage_chunk():
    gateway = Gateway()
    stream = await gateway.client.chat.completions.create(
        model="support", messages=HI, stream=True, stream_options={"include_usage": True}
    )
    received = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in received if c.choices)
    assert text == "Checking."
    assert [c.choices[0].finish_reason for c in received if c.choices][-1] == "tool_calls"
    assert received[-1].choices == [] and received[-1].usage.total_tokens == 122
    assert all(c.usage is None for c in received[:-1])


async def test_the_sdks_stream_helper_assembles_the_tool_calls():
    gateway = Gateway()
    async with gateway.client.chat.completions.stream(
        model="support", messages=HI, tools=TOOLS
    ) as stream:
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Checking."
    assert [(c.id, c.function.arguments) for c in message.tool_calls] == [
        ("call_1", '{"city": "Oslo"}'),
        ("call_2", '{"city": "Bergen"}'),
    ]
    assert final.choices[0].finish_reason == "tool_calls"
    assert gateway.seen[0].include_usage is False


async def test_an_in_band_error_raises_the_sdks_api_error():
    error = StreamError("overloaded", "upstream overloaded mid-answer", "overloaded_error")
    gateway = Gateway(events=[*STREAM[:3], error])
    stream = await gateway.client.chat.completions.create(model="m", messages=HI, stream=True)
    texts = []
    with pytest.raises(openai.APIError, match="upstream overloaded mid-answer") as caught:
        async for chunk in stream:
            texts.append(chunk.choices[0].delta.content)
    assert texts == ["", "Check"]
    assert caught.value.code == "overloaded"


async def test_the_sdk_replays_its_own_tool_loop_history():
    gateway = Gateway()
    first = await gateway.client.chat.completions.create(model="m", messages=HI, tools=TOOLS)
    await gateway.client.chat.completions.create(
        model="m",
        tools=TOOLS,
        messages=[
            *HI,
            first.choices[0].message,  # the SDK's own object, as its docs show
            {"role": "tool", "tool_call_id": "call_1", "content": "12 C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "bad arguments"},
        ],
    )
    assert gateway.seen[1].request.messages[1:] == (
        Message("assistant", (
            Text("Checking."),
            ToolCall("call_1", "weather", {"city": "Oslo"}, '{"city": "Oslo"}'),
            ToolCall("call_2", "weather", None, '{"city": '),
        )),
        Message("user", (
            ToolResult("call_1", (Text("12 C"),)),
            ToolResult("call_2", (Text("bad arguments"),)),
        )),
    )  # fmt: skip


async def test_a_malformed_request_raises_the_sdks_bad_request_error_naming_the_field():
    gateway = Gateway()
    with pytest.raises(openai.BadRequestError) as caught:
        await gateway.client.chat.completions.create(model="m", messages=HI, n=2)
    assert (caught.value.status_code, caught.value.param) == (400, "n")
    assert caught.value.type == "invalid_request_error"
    assert "n > 1 is not supported" in caught.value.message


@pytest.mark.parametrize(
    ("status", "exception"),
    [
        (401, openai.AuthenticationError),
        (404, openai.NotFoundError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
async def test_error_bodies_become_the_sdks_typed_exceptions(status, exception):
    with pytest.raises(exception) as caught:
        await Gateway(status=status).client.chat.completions.create(model="m", messages=HI)
    assert caught.value.status_code == status
    assert caught.value.type == OPENAI.error_type_for(status)
    assert caught.value.request_id == "r1"
