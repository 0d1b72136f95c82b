"""Writing answers back in the Anthropic Messages dialect: the exact shape of a message and of
an event stream (blocks numbered across text and tool calls, tool arguments held until
complete), round trips through our own provider codec, in-band errors and error bodies.
(The official SDK reads them in test_dialect_anthropic_sdk.py.)"""

from __future__ import annotations

import json

import pytest

from engine.core.messages import (
    MessageEnd,
    Response,
    StreamError,
    StreamStart,
    Text,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from engine.gateway.dialects.anthropic import ANTHROPIC, error_type_for
from engine.providers import anthropic_codec
from engine.providers.sse import parse_sse

USAGE = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=7)
START = StreamStart("route", "anthropic", "claude-sonnet-4-5", 0, 1)
ANSWER = Response(
    content=(
        Text("Checking."),
        Text(""),
        ToolCall("toolu_1", "weather", {"city": "Oslo"}),
        ToolCall("functions.weather:1", "weather", None, '{"city": '),  # from an OpenAI server
        ToolCall("call_3", "now", {}, ""),
    ),
    stop_reason="tool_use",
    usage=USAGE,
    model="gpt-4.1",
)
SANITIZED = anthropic_codec.sanitize_tool_id("functions.weather:1")


def test_an_answer_is_encoded_as_a_message():
    assert ANTHROPIC.encode(ANSWER, model="claude-sonnet-4-5", request_id="r1") == {
        "id": "msg_r1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": SANITIZED, "name": "weather",
             "input": {"_raw_arguments": '{"city": '}},
            {"type": "tool_use", "id": "call_3", "name": "now", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,  # uncached only
            "output_tokens": 5,
            "cache_creation_input_tokens": 7,
            "cache_read_input_tokens": 100,
        },
    }  # fmt: skip
    assert SANITIZED.startswith("functions_weather_1_")


@pytest.mark.parametrize(
    "stop", ["end_turn", "max_tokens", "stop_sequence", "tool_use", "refusal", "pause_turn"]
)
def test_neutral_stop_reasons_are_anthropics_own(stop):
    encoded = ANTHROPIC.encode(ANSWER.replace(stop_reason=stop), model="m", request_id="r")
    assert encoded["stop_reason"] == stop


def test_an_encoded_answer_decodes_back_to_the_same_answer():
    answer = ANSWER.replace(content=(Text("Hi."), ToolCall("toolu_1", "weather", {"city": "X"})))
    wire = ANTHROPIC.encode(answer, model="claude", request_id="r1")
    decoded = anthropic_codec.decode_response(wire, requested_model="x")
    assert (decoded.content, decoded.stop_reason, decoded.usage) == (
        answer.content,
        "tool_use",
        USAGE,
    )


STREAM = [
    START,
    UsageUpdate(Usage(input_tokens=10, cache_read_tokens=100, cache_write_tokens=7)),
    TextDelta("Check"),
    TextDelta(""),
    TextDelta("ing."),
    ToolCallStart(3, "toolu_1", "weather"),  # neutral indexes count tool calls only
    ToolCallStart(4, "functions.weather:1", "weather"),
    ToolCallDelta(3, '{"city"'),  # parallel calls interleaved, as some servers send them
    ToolCallDelta(4, '{"city": '),
    ToolCallDelta(3, ': "Oslo"}'),
    ToolCallStart(5, "call_3", "now"),
    UsageUpdate(USAGE),
    MessageEnd("tool_use", USAGE, "claude-sonnet-4-5"),
]


def encode_stream(events) -> bytes:
    encoder = ANTHROPIC.stream_encoder(
        model="claude-sonnet-4-5", request_id="r1", include_usage=True
    )
    return b"".join(encoder.event(event) for event in events)


def sent(raw: bytes) -> list[tuple[str | None, dict]]:
    return [(event.event, json.loads(event.data)) for event in parse_sse(raw)]


def test_a_stream_is_encoded_as_messages_events_in_order():
    events = sent(encode_stream(STREAM))
    assert all(name == data["type"] for name, data in events)
    assert [data for _, data in events] == [
        {"type": "message_start", "message": {
            "id": "msg_r1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Check"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "ing."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": SANITIZED, "name": "weather", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {
            "type": "input_json_delta", "partial_json": '{"_raw_arguments": "{\\"city\\": "}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3, "content_block": {
            "type": "tool_use", "id": "call_3", "name": "now", "input": {}}},
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 7,
                   "cache_read_input_tokens": 100}},
        {"type": "message_stop"},
    ]  # fmt: skip


def test_text_after_tool_calls_opens_a_new_block_after_them():
    events = [START, TextDelta("a"), ToolCallStart(0, "t1", "f"), ToolCallDelta(0, '{"x": 1}')]
    events += [TextDelta("b"), MessageEnd("end_turn", Usage())]
    kinds = [(d["type"], d.get("index")) for _, d in sent(encode_stream(events))]
    assert kinds == [
        ("message_start", None),
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_stop", 0),
        ("content_block_start", 1), ("content_block_delta", 1), ("content_block_stop", 1),
        ("content_block_start", 2), ("content_block_delta", 2), ("content_block_stop", 2),
        ("message_delta", None), ("message_stop", None),
    ]  # fmt: skip


def test_an_encoded_stream_decodes_back_to_the_same_answer():
    decoder = anthropic_codec.AnthropicStreamDecoder("x")
    events = []
    for item in parse_sse(encode_stream(STREAM)):
        events += decoder.feed(json.loads(item.data), item.event)
    assert events[-1] == MessageEnd("tool_use", USAGE, "claude-sonnet-4-5")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Checking."
    starts = [(e.index, e.id) for e in events if isinstance(e, ToolCallStart)]
    assert starts == [(0, "toolu_1"), (1, SANITIZED), (2, "call_3")]


def test_an_empty_answer_is_still_a_complete_message():
    events = sent(encode_stream([START, MessageEnd("max_tokens", Usage(5, 0))]))
    assert [d["type"] for _, d in events] == ["message_start", "message_delta", "message_stop"]
    assert events[1][1]["delta"]["stop_reason"] == "max_tokens"


def test_an_in_band_error_ends_the_stream_without_message_stop():
    error = StreamError("overloaded", "Overloaded", "overloaded_error")
    raw = encode_stream([START, TextDelta("Hel"), error, TextDelta("lo"), STREAM[-1]])
    events = sent(raw)
    error_body = {"type": "overloaded_error", "message": "Overloaded"}
    assert events[-1] == ("error", {"type": "error", "error": error_body})
    assert [d["type"] for _, d in events[:-1]] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ]


def test_content_before_stream_start_still_opens_with_message_start():
    events = sent(encode_stream([TextDelta("hi"), MessageEnd("end_turn", Usage())]))
    assert events[0][1]["type"] == "message_start"
    assert events[0][1]["message"]["model"] == "claude-sonnet-4-5"


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "invalid_request_error"), (401, "authentication_error"), (402, "billing_error"),
        (403, "permission_error"), (404, "not_found_error"), (413, "request_too_large"),
        (422, "invalid_request_error"), (429, "rate_limit_error"), (500, "api_error"),
        (502, "api_error"), (503, "overloaded_error"), (504, "timeout_error"),
        (529, "overloaded_error"),
    ],
)  # fmt: skip
def test_error_types_by_status(status, error_type):
    assert error_type_for(status) == ANTHROPIC.error_type_for(status) == error_type


def test_an_error_body_has_anthropics_shape_with_the_request_id():
    body = ANTHROPIC.error_body(
        status=529, error_type="overloaded_error", message="Overloaded", code="x", request_id="r1"
    )
    assert body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "r1",
    }
