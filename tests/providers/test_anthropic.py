"""The Anthropic adapter against a fake Messages API (httpx.MockTransport) with real wire bodies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from helpers.provider_recorder import make_provider

from engine.core.errors import (
    AccountFault,
    AmbiguousFault,
    AttemptError,
    ProviderFault,
    RateLimited,
)
from engine.core.messages import (
    Image,
    Message,
    MessageEnd,
    Request,
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
from engine.providers import AnthropicProvider, Provider
from engine.providers.anthropic_codec import encode_request
from engine.providers.codec import sanitize_tool_id

API_KEY = "sk-ant-test-SECRET"
MODEL = "claude-sonnet-4-5"
REPORTED_MODEL = "claude-sonnet-4-5-20250929"
HI = Request(messages=(Message.user("hi"),))


# --- a fake Messages API -----------------------------------------------------------------


def make(answer: Callable[[httpx.Request], httpx.Response], **kwargs) -> tuple:
    return make_provider(AnthropicProvider, "claude", API_KEY, answer, **kwargs)


def message(content: list, stop_reason: str | None = "end_turn", **usage) -> dict:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": REPORTED_MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5, **usage},
    }


def ok(body: dict, **headers: str) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(
        200, json=body, headers={"request-id": "req_1", **headers}
    )


def sse(*events: dict, tail: bytes = b"") -> bytes:
    lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]
    return "".join(lines).encode() + tail


def streamed(body: bytes, status: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    headers = {"content-type": "text/event-stream", "request-id": "req_s"}
    return lambda request: httpx.Response(status, content=body, headers=headers)


class Chunks(httpx.AsyncByteStream):
    """A response body that arrives in pieces, may then break, and records being closed."""

    def __init__(self, *chunks: bytes, then: Exception | None = None) -> None:
        self.chunks, self.then, self.closed = chunks, then, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.then is not None:
            raise self.then

    async def aclose(self) -> None:
        self.closed = True


START = {
    "type": "message_start",
    "message": {
        **message([], None, output_tokens=1, cache_read_input_tokens=1800),
        "usage": {
            "input_tokens": 25,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 1800,
            "output_tokens": 1,
        },
    },
}
PING = {"type": "ping"}
TEXT_START = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}


def text_delta(text: str, index: int = 0) -> dict:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": text},
    }


def json_delta(fragment: str, index: int) -> dict:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": fragment},
    }


def tool_start(index: int, tool_id: str, name: str) -> dict:
    block = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, output_tokens: int) -> dict:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


END = {"type": "message_stop"}


async def collect(provider: AnthropicProvider, request: Request = HI) -> list:
    return [event async for event in provider.stream(request, MODEL, timeout_s=30)]


# --- the request on the wire ---------------------------------------------------------------


async def test_request_goes_to_v1_messages_with_key_and_version_headers():
    provider, fake = make(ok(message([{"type": "text", "text": "hello"}])))
    await provider.complete(HI, MODEL, timeout_s=30)
    sent = fake.requests[0]
    assert sent.url == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == API_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert fake.body["model"] == MODEL
    assert isinstance(provider, Provider)
    assert API_KEY not in repr(provider)


async def test_base_url_of_a_compatible_server_gets_the_messages_path_appended():
    provider, fake = make(ok(message([])), base_url="http://proxy.local:8080/anthropic/")
    await provider.complete(HI, MODEL, timeout_s=30)
    assert fake.requests[0].url == "http://proxy.local:8080/anthropic/v1/messages"


async def test_timeout_is_the_remaining_budget_with_a_capped_connect_phase():
    provider, fake = make(ok(message([])), connect_timeout_s=5.0)
    await provider.complete(HI, MODEL, timeout_s=12.5)
    await provider.complete(HI, MODEL, timeout_s=2.0)
    first, second = (r.extensions["timeout"] for r in fake.requests)
    assert first == {"connect": 5.0, "read": 12.5, "write": 12.5, "pool": 12.5}
    assert second["connect"] == 2.0


def test_max_tokens_is_always_sent_because_anthropic_requires_it():
    assert encode_request(HI, MODEL, default_max_tokens=4096)["max_tokens"] == 4096
    request = HI.replace(max_tokens=300)
    assert encode_request(request, MODEL, default_max_tokens=4096)["max_tokens"] == 300


def test_system_prompt_is_a_top_level_field_not_a_message():
    body = encode_request(HI.replace(system="Be brief."), MODEL, default_max_tokens=10)
    assert body["system"] == "Be brief."
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_cacheable_system_prompt_carries_cache_control():
    request = HI.replace(system="Long rules.", cache_system=True)
    body = encode_request(request, MODEL, default_max_tokens=10)
    assert body["system"] == [
        {"type": "text", "text": "Long rules.", "cache_control": {"type": "ephemeral"}}
    ]


def test_text_marked_cache_gets_an_ephemeral_cache_control():
    request = Request(messages=(Message("user", (Text("doc", cache=True), Text("question"))),))
    blocks = encode_request(request, MODEL, default_max_tokens=10)["messages"][0]["content"]
    assert blocks == [
        {"type": "text", "text": "doc", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "question"},
    ]


def test_temperature_on_openais_scale_is_clamped_to_one():
    assert encode_request(HI.replace(temperature=1.7), MODEL, default_max_tokens=1)[
        "temperature"
    ] == pytest.approx(1.0)
    assert encode_request(HI.replace(temperature=0.3), MODEL, default_max_tokens=1)[
        "temperature"
    ] == pytest.approx(0.3)


def test_stop_and_user_map_to_stop_sequences_and_metadata():
    body = encode_request(HI.replace(stop=("END",), user="u-42"), MODEL, default_max_tokens=1)
    assert body["stop_sequences"] == ["END"]
    assert body["metadata"] == {"user_id": "u-42"}
    assert "stop" not in body and "user" not in body


def test_tools_always_get_an_object_input_schema():
    tools = (
        Tool("no_params", "", {}),
        Tool("typed", "Look up", {"properties": {"q": {"type": "string"}}}),
    )
    body = encode_request(HI.replace(tools=tools), MODEL, default_max_tokens=1)
    assert body["tools"] == [
        {"name": "no_params", "input_schema": {"type": "object", "properties": {}}},
        {
            "name": "typed",
            "description": "Look up",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    ]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice("auto"), {"type": "auto"}),
        (ToolChoice("any"), {"type": "any"}),
        (ToolChoice("tool", name="lookup"), {"type": "tool", "name": "lookup"}),
        (ToolChoice("none"), {"type": "none"}),
        (ToolChoice("auto", parallel=False), {"type": "auto", "disable_parallel_tool_use": True}),
        (ToolChoice("any", parallel=True), {"type": "any"}),
    ],
)
def test_tool_choice_maps_to_anthropic_types(choice, wire):
    request = HI.replace(tools=(Tool("lookup"),), tool_choice=choice)
    assert encode_request(request, MODEL, default_max_tokens=1)["tool_choice"] == wire


def test_tool_choice_is_not_sent_without_tools():
    body = encode_request(HI.replace(tool_choice=ToolChoice("any")), MODEL, default_max_tokens=1)
    assert "tool_choice" not in body and "tools" not in body


def history_with_foreign_tool_ids() -> Request:
    """A tool loop first served by an OpenAI-compatible server, whose ids Anthropic rejects."""
    return Request(
        messages=(
            Message.user("weather in Paris and Rome?"),
            Message(
                "assistant",
                (
                    ToolCall("functions.weather:0", "weather", {"city": "Paris"}),
                    ToolCall("functions.weather:1", "weather", {"city": "Rome"}),
                ),
            ),
            Message("user", (ToolResult("functions.weather:0", (Text("18C"),)),)),
            Message("user", (ToolResult("functions.weather:1", (Text("24C"),)),)),
            Message.user("which is warmer?"),
        ),
        tools=(Tool("weather"),),
    )


def test_tool_ids_are_sanitized_the_same_way_in_calls_and_results():
    messages = encode_request(history_with_foreign_tool_ids(), MODEL, default_max_tokens=1)[
        "messages"
    ]
    call_ids = [b["id"] for b in messages[1]["content"]]
    result_ids = [b["tool_use_id"] for b in messages[2]["content"] if b["type"] == "tool_result"]
    assert call_ids == result_ids
    assert all(c.replace("_", "").replace("-", "").isalnum() for c in call_ids)
    assert len(set(call_ids)) == 2


def test_sanitized_tool_ids_are_stable_and_keep_distinct_ids_apart():
    assert sanitize_tool_id("toolu_01A09q90qw90lq917835lq9") == "toolu_01A09q90qw90lq917835lq9"
    assert sanitize_tool_id("call:1") == sanitize_tool_id("call:1")
    assert sanitize_tool_id("call:1") != sanitize_tool_id("call.1")
    assert sanitize_tool_id("call:1").startswith("call_1_")


def test_tool_results_of_one_turn_become_one_user_message():
    messages = encode_request(history_with_foreign_tool_ids(), MODEL, default_max_tokens=1)[
        "messages"
    ]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert messages[2]["content"][0]["content"] == [{"type": "text", "text": "18C"}]


def test_tool_results_come_before_text_even_when_the_text_was_first():
    request = Request(
        messages=(Message("user", (Text("here you go"), ToolResult("t1", (Text("ok"),)))),)
    )
    blocks = encode_request(request, MODEL, default_max_tokens=1)["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text"]


def test_consecutive_same_role_messages_are_merged_into_one_turn():
    request = Request(messages=(Message.user("a"), Message.user("b"), Message.assistant("c")))
    messages = encode_request(request, MODEL, default_max_tokens=1)["messages"]
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
    ]


def test_empty_text_parts_are_dropped_because_anthropic_rejects_them():
    request = Request(messages=(Message.user("a"), Message.assistant(""), Message.user("b")))
    messages = encode_request(request, MODEL, default_max_tokens=1)["messages"]
    assert len(messages) == 1 and len(messages[0]["content"]) == 2


def test_tool_call_with_invalid_json_arguments_keeps_the_raw_string():
    request = Request(
        messages=(
            Message("assistant", (ToolCall("c1", "f", None, raw_arguments='{"a": 1'),)),
            Message("user", (ToolResult("c1", (Text("?"),), is_error=True),)),
        )
    )
    messages = encode_request(request, MODEL, default_max_tokens=1)["messages"]
    assert messages[0]["content"][0]["input"] == {"_raw_arguments": '{"a": 1'}
    assert messages[1]["content"][0]["is_error"] is True


def test_images_become_base64_or_url_sources():
    request = Request(
        messages=(
            Message(
                "user",
                (
                    Image(media_type="image/png", data="iVBORw0"),
                    Image(url="https://example.com/cat.jpg"),
                    Image(url="data:image/webp;base64,UklGR"),
                ),
            ),
        )
    )
    blocks = encode_request(request, MODEL, default_max_tokens=1)["messages"][0]["content"]
    assert [b["source"] for b in blocks] == [
        {"type": "base64", "media_type": "image/png", "data": "iVBORw0"},
        {"type": "url", "url": "https://example.com/cat.jpg"},
        {"type": "base64", "media_type": "image/webp", "data": "UklGR"},
    ]


def test_image_inside_a_tool_result_is_kept():
    result = ToolResult("t1", (Text("shot:"), Image(media_type="image/png", data="AAA")))
    request = Request(messages=(Message("user", (result,)),))
    block = encode_request(request, MODEL, default_max_tokens=1)["messages"][0]["content"][0]
    assert [b["type"] for b in block["content"]] == ["text", "image"]


# --- the answer ------------------------------------------------------------------------------


async def test_complete_returns_text_and_tool_calls_with_cache_usage():
    body = message(
        [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}},
        ],
        "tool_use",
        cache_read_input_tokens=1800,
        cache_creation_input_tokens=200,
    )
    provider, _ = make(ok(body))
    response = await provider.complete(HI, MODEL, timeout_s=30)
    assert response.content == (
        Text("Checking."),
        ToolCall("toolu_01", "weather", {"city": "Paris"}),
    )
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(12, 5, cache_read_tokens=1800, cache_write_tokens=200)
    assert response.usage.total_input_tokens == 2012
    assert response.model == REPORTED_MODEL
    assert response.provider == "claude"
    assert response.provider_request_id == "req_1"
    assert response.route == "" and response.attempts == () and response.fallback_depth == 0


@pytest.mark.parametrize(
    ("wire", "neutral"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("pause_turn", "pause_turn"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "max_tokens"),
    ],
)
async def test_stop_reasons_map_to_neutral(wire, neutral):
    provider, _ = make(ok(message([{"type": "text", "text": "x"}], wire)))
    assert (await provider.complete(HI, MODEL, timeout_s=30)).stop_reason == neutral


async def test_empty_content_with_end_turn_is_a_valid_answer():
    provider, _ = make(ok(message([], "end_turn")))
    response = await provider.complete(HI, MODEL, timeout_s=30)
    assert response.content == () and response.stop_reason == "end_turn"


# --- failures ----------------------------------------------------------------------------------


def error_body(error_type: str, text: str) -> dict:
    return {"type": "error", "error": {"type": error_type, "message": text}, "request_id": "req_e"}


async def test_rate_limit_reaches_the_error_with_retry_after_and_request_id():
    provider, _ = make(
        lambda r: httpx.Response(
            429,
            json=error_body("rate_limit_error", "Number of request tokens has exceeded"),
            headers={"retry-after": "3", "request-id": "req_429"},
        )
    )
    with pytest.raises(RateLimited) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.status == 429
    assert caught.value.retry_after_s == 3
    assert caught.value.provider_request_id == "req_429"


async def test_overloaded_529_is_a_provider_fault():
    provider, _ = make(lambda r: httpx.Response(529, json=error_body("overloaded_error", "Over")))
    with pytest.raises(ProviderFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.status == 529 and caught.value.error_type == "overloaded_error"


async def test_html_error_page_is_read_leniently():
    page = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head></html>"
    provider, _ = make(
        lambda r: httpx.Response(502, content=page, headers={"content-type": "text/html"})
    )
    with pytest.raises(ProviderFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.status == 502


async def test_revoked_key_is_an_account_fault_and_the_key_is_not_in_the_message():
    provider, _ = make(
        lambda r: httpx.Response(401, json=error_body("authentication_error", "invalid x-api-key"))
    )
    with pytest.raises(AccountFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert API_KEY not in str(caught.value) and API_KEY not in repr(caught.value)


async def test_200_whose_body_is_an_error_is_classified_by_the_error_inside():
    provider, _ = make(ok(error_body("overloaded_error", "Overloaded")))
    with pytest.raises(ProviderFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.error_type == "overloaded_error"


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        (httpx.Response(200, content=b'{"content":[', headers=JSON), "invalid_json"),
        (
            httpx.Response(
                200, content=b"<html>down</html>", headers={"content-type": "text/html"}
            ),
            "not_json",
        ),
        (httpx.Response(200, content=b""), "empty"),
        (httpx.Response(200, json={"type": "message", "role": "assistant"}), "empty"),
        (httpx.Response(200, json=message([], None)), "empty"),
    ],
    ids=["invalid-json", "html", "no-body", "no-content", "nothing-and-no-stop-reason"],
)
async def test_unusable_200_is_an_ambiguous_protocol_fault(response, kind):
    provider, _ = make(lambda r: response)
    with pytest.raises(AmbiguousFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.error_class == kind
    assert caught.value.status == 200


async def test_body_cut_by_the_peer_is_truncated():
    body = Chunks(
        b'{"type":"message","content":[{"type":"te',
        then=httpx.RemoteProtocolError("peer closed connection: incomplete chunked read"),
    )
    provider, _ = make(lambda r: httpx.Response(200, stream=body, headers={"request-id": "r"}))
    with pytest.raises(AmbiguousFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.error_class == "truncated"
    assert caught.value.provider_request_id == "r"
    assert body.closed


async def test_body_shorter_than_its_content_length_is_truncated():
    full = json.dumps(message([{"type": "text", "text": "hello"}])).encode()
    provider, _ = make(
        lambda r: httpx.Response(
            200,
            stream=Chunks(full[:20]),
            headers={"content-type": "application/json", "content-length": str(len(full))},
        )
    )
    with pytest.raises(AmbiguousFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.error_class == "truncated"


async def test_connection_refused_is_a_provider_fault_that_was_not_sent():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    provider, _ = make(refuse)
    with pytest.raises(ProviderFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.sent is False


async def test_reset_after_sending_is_ambiguous():
    def reset(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    provider, _ = make(reset)
    with pytest.raises(AmbiguousFault) as caught:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert caught.value.sent is True


# --- streaming ---------------------------------------------------------------------------------

FULL_STREAM = sse(
    START,
    TEXT_START,
    PING,
    text_delta("Let me "),
    text_delta("check."),
    stop(0),
    tool_start(1, "toolu_01", "weather"),
    json_delta("", 1),
    json_delta('{"city": "Pa', 1),
    json_delta('ris"}', 1),
    stop(1),
    message_delta("tool_use", 42),
    END,
)


async def test_stream_yields_text_tool_calls_usage_and_end():
    provider, fake = make(streamed(FULL_STREAM))
    events = await collect(provider)
    assert fake.body["stream"] is True
    opening = Usage(input_tokens=25, output_tokens=1, cache_read_tokens=1800)
    final = Usage(input_tokens=25, output_tokens=42, cache_read_tokens=1800)
    assert events == [
        UsageUpdate(opening),
        TextDelta("Let me "),
        TextDelta("check."),
        ToolCallStart(0, "toolu_01", "weather"),
        ToolCallDelta(0, '{"city": "Pa'),
        ToolCallDelta(0, 'ris"}'),
        UsageUpdate(final),
        MessageEnd("tool_use", final, REPORTED_MODEL, "req_s"),
    ]


async def test_tool_call_index_counts_tool_calls_only():
    body = sse(
        START,
        TEXT_START,
        text_delta("Two calls."),
        stop(0),
        tool_start(1, "toolu_a", "f"),
        stop(1),
        tool_start(2, "toolu_b", "g"),
        json_delta("{}", 2),
        stop(2),
        message_delta("tool_use", 9),
        END,
    )
    provider, _ = make(streamed(body))
    starts = [e for e in await collect(provider) if isinstance(e, ToolCallStart | ToolCallDelta)]
    assert starts == [
        ToolCallStart(0, "toolu_a", "f"),
        ToolCallStart(1, "toolu_b", "g"),
        ToolCallDelta(1, "{}"),
    ]


async def test_stream_ignores_pings_comments_and_unknown_events():
    body = (
        b": keep-alive\n\n"
        + sse(START, PING, TEXT_START, PING)
        + b'event: future_event\ndata: {"type":"future_event"}\n\n'
        + sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta"}},
            text_delta("ok"),
            stop(0),
            message_delta("end_turn", 2),
            END,
        )
    )
    provider, _ = make(streamed(body))
    events = await collect(provider)
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("ok")]
    assert isinstance(events[-1], MessageEnd) and events[-1].stop_reason == "end_turn"


async def test_context_window_stop_in_a_stream_maps_to_max_tokens():
    body = sse(
        START, TEXT_START, text_delta("x"), message_delta("model_context_window_exceeded", 3), END
    )
    provider, _ = make(streamed(body))
    assert (await collect(provider))[-1].stop_reason == "max_tokens"


async def test_in_stream_error_event_raises_the_classified_error_after_the_content():
    body = sse(START, TEXT_START, text_delta("Hel")) + (
        b"event: error\n"
        b'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    provider, _ = make(streamed(body))
    seen = []
    with pytest.raises(ProviderFault) as caught:
        async for event in provider.stream(HI, MODEL, timeout_s=30):
            seen.append(event)
    assert TextDelta("Hel") in seen
    assert caught.value.error_type == "overloaded_error"
    assert caught.value.provider_request_id == "req_s"


async def test_stream_cut_before_message_stop_is_a_provider_fault():
    provider, _ = make(streamed(sse(START, TEXT_START, text_delta("Hel"))))
    with pytest.raises(ProviderFault) as caught:
        await collect(provider)
    assert caught.value.error_class == "stream_cut"


async def test_connection_lost_mid_stream_is_classified():
    body = Chunks(
        sse(START, TEXT_START, text_delta("Hel")),
        then=httpx.RemoteProtocolError("peer closed connection without sending complete body"),
    )
    provider, _ = make(
        lambda r: httpx.Response(200, stream=body, headers={"content-type": "text/event-stream"})
    )
    with pytest.raises(AttemptError) as caught:
        await collect(provider)
    assert isinstance(caught.value, AmbiguousFault | ProviderFault)
    assert body.closed


async def test_error_status_on_a_stream_is_raised_at_the_first_iteration():
    provider, fake = make(
        lambda r: httpx.Response(529, json=error_body("overloaded_error", "Over"))
    )
    events = provider.stream(HI, MODEL, timeout_s=30)
    assert fake.requests == []  # nothing is sent before iteration starts
    with pytest.raises(ProviderFault):
        await anext(events)


async def test_stream_answered_with_plain_json_is_adapted():
    body = message(
        [
            {"type": "text", "text": "Sure."},
            {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {"a": 1}},
        ],
        "tool_use",
    )
    provider, _ = make(ok(body))
    events = await collect(provider)
    assert events[:3] == [
        TextDelta("Sure."),
        ToolCallStart(0, "toolu_9", "f"),
        ToolCallDelta(0, '{"a": 1}'),
    ]
    assert events[-1] == MessageEnd("tool_use", Usage(12, 5), REPORTED_MODEL, "req_1")


async def test_leaving_a_stream_early_closes_the_response():
    body = Chunks(FULL_STREAM)
    provider, _ = make(
        lambda r: httpx.Response(200, stream=body, headers={"content-type": "text/event-stream"})
    )
    events = provider.stream(HI, MODEL, timeout_s=30)
    async for event in events:
        if isinstance(event, TextDelta):
            break
    await events.aclose()
    assert body.closed


async def test_provider_closes_its_client():
    provider, _ = make(ok(message([])))
    async with provider:
        await provider.complete(HI, MODEL, timeout_s=30)
    assert provider._client.is_closed


async def test_stream_that_stops_without_ever_starting_a_message_is_an_empty_answer():
    provider, _ = make(streamed(sse(PING, END)))
    with pytest.raises(AmbiguousFault) as caught:
        await collect(provider)
    assert caught.value.error_class == "empty"


async def test_stream_with_an_empty_message_is_a_valid_answer():
    provider, _ = make(streamed(sse(START, message_delta("end_turn", 1), END)))
    events = await collect(provider)
    assert isinstance(events[-1], MessageEnd) and events[-1].stop_reason == "end_turn"
    assert not any(isinstance(e, TextDelta | ToolCallStart) for e in events)
