"""Writing answers back in the OpenAI Chat Completions dialect: the exact shapes of a
chat.completion and of a chunk stream, round trips through our own provider codec, in-band
errors and error bodies. (The official SDK reads them in test_dialect_openai_sdk.py.)"""

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
from engine.gateway.dialects.openai import OPENAI, error_type_for, finish_reason
from engine.providers import openai_codec
from engine.providers.sse import parse_sse

USAGE = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_tokens=7)
START = StreamStart("route", "openai", "gpt-4.1", 0, 1)

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


def test_an_answer_is_encoded_as_a_chat_completion():
    assert OPENAI.encode(ANSWER, model="gpt-4.1", request_id="r1", created=1700000000) == {
        "id": "chatcmpl-r1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4.1",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Checking.",
                "refusal": None,
                "annotations": [],
                "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
                    {"id": "call_2", "type": "function",
                     "function": {"name": "weather", "arguments": '{"city": '}},
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }],
        "usage": {
            "prompt_tokens": 117,  # input + cache reads + cache writes
            "completion_tokens": 5,
            "total_tokens": 122,
            "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 7},
        },
        "system_fingerprint": None,
    }  # fmt: skip


def test_content_is_null_beside_tool_calls_and_empty_when_there_is_nothing():
    calls_only = ANSWER.replace(content=ANSWER.content[1:])
    empty = ANSWER.replace(content=(), stop_reason="max_tokens")
    assert (
        OPENAI.encode(calls_only, model="m", request_id="r")["choices"][0]["message"]["content"]
        is None
    )
    message = OPENAI.encode(empty, model="m", request_id="r")["choices"][0]["message"]
    assert message["content"] == "" and "tool_calls" not in message


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "length"),
    ],
)
def test_stop_reasons_map_to_finish_reasons(stop, finish):
    assert finish_reason(stop) == finish


def test_an_encoded_answer_decodes_back_to_the_same_answer():
    wire = OPENAI.encode(ANSWER, model="gpt-4.1", request_id="r1")
    decoded = openai_codec.decode_response(wire, requested_model="x")
    assert decoded.content == (
        Text("Checking."),
        ToolCall("call_1", "weather", {"city": "Oslo"}, '{"city": "Oslo"}'),
        ToolCall("call_2", "weather", None, '{"city": '),
    )
    assert (decoded.stop_reason, decoded.usage, decoded.model) == ("tool_use", USAGE, "gpt-4.1")


STREAM = [
    START,
    UsageUpdate(Usage(input_tokens=10, cache_read_tokens=100, cache_write_tokens=7)),
    TextDelta("Check"),
    TextDelta("ing."),
    TextDelta(""),
    ToolCallStart(4, "call_1", "weather"),  # neutral indexes need not start at 0
    ToolCallDelta(4, '{"city"'),
    ToolCallDelta(4, ': "Oslo"}'),
    ToolCallStart(9, "call_2", "weather"),
    ToolCallDelta(9, "{oops"),
    UsageUpdate(USAGE),
    MessageEnd("tool_use", USAGE, "gpt-4.1"),
]


def encode_stream(events, include_usage: bool, **kwargs) -> bytes:
    encoder = OPENAI.stream_encoder(
        model="gpt-4.1", request_id="r1", include_usage=include_usage, created=1, **kwargs
    )
    return b"".join(encoder.event(event) for event in events)


def chunks(raw: bytes) -> list:
    return [json.loads(e.data) if e.data != "[DONE]" else "[DONE]" for e in parse_sse(raw)]


def test_a_stream_is_encoded_as_chunks_then_done():
    sent = chunks(encode_stream(STREAM, include_usage=True))
    head = {"id": "chatcmpl-r1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4.1", "system_fingerprint": None}  # fmt: skip

    def chunk(delta, finish=None):
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice], "usage": None}

    assert sent == [
        chunk({"role": "assistant", "content": "", "refusal": None}),
        chunk({"content": "Check"}),
        chunk({"content": "ing."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "Oslo"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                               "function": {"name": "weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "{oops"}}]}),
        chunk({}, "tool_calls"),
        {**head, "choices": [], "usage": {
            "prompt_tokens": 117, "completion_tokens": 5, "total_tokens": 122,
            "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 7}}},
        "[DONE]",
    ]  # fmt: skip


def test_without_include_usage_there_is_no_usage_anywhere():
    sent = chunks(encode_stream(STREAM, include_usage=False))
    assert sent[-1] == "[DONE]"
    assert all("usage" not in chunk and chunk["choices"] for chunk in sent[:-1])


def test_an_encoded_stream_decodes_back_to_the_same_events():
    decoder = openai_codec.OpenAIStreamDecoder("x")
    events = []
    for item in parse_sse(encode_stream(STREAM, include_usage=True)):
        done = item.data == "[DONE]"
        events += decoder.feed_done() if done else decoder.feed(json.loads(item.data))
    assert events == [
        TextDelta("Check"), TextDelta("ing."),
        ToolCallStart(0, "call_1", "weather"), ToolCallDelta(0, '{"city"'),
        ToolCallDelta(0, ': "Oslo"}'),
        ToolCallStart(1, "call_2", "weather"), ToolCallDelta(1, "{oops"),
        UsageUpdate(USAGE), MessageEnd("tool_use", USAGE, "gpt-4.1"),
    ]  # fmt: skip


def test_an_in_band_error_ends_the_stream_without_done():
    error = StreamError("overloaded", "Overloaded", "overloaded_error")
    raw = encode_stream([START, TextDelta("Hel"), error, TextDelta("lo"), STREAM[-1]], True)
    sent = chunks(raw)
    assert sent[-1] == {"error": {"message": "Overloaded", "type": "server_error",
                                  "param": None, "code": "overloaded"}}  # fmt: skip
    assert [c.get("choices", [{}])[0].get("delta") for c in sent[:-1]][1] == {"content": "Hel"}
    assert b"[DONE]" not in raw


def test_content_before_stream_start_still_opens_with_the_role_chunk():
    sent = chunks(encode_stream([TextDelta("hi"), MessageEnd("end_turn", Usage())], False))
    assert [c["choices"][0]["delta"] for c in sent[:-1]] == [
        {"role": "assistant", "content": "", "refusal": None}, {"content": "hi"}, {},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "invalid_request_error"), (401, "authentication_error"),
        (402, "insufficient_quota"), (403, "permission_error"), (404, "invalid_request_error"),
        (413, "invalid_request_error"), (429, "rate_limit_error"), (500, "server_error"),
        (503, "server_error"), (504, "server_error"),
    ],
)  # fmt: skip
def test_error_types_by_status(status, error_type):
    assert error_type_for(status) == OPENAI.error_type_for(status) == error_type


def test_an_error_body_has_openais_shape():
    body = OPENAI.error_body(
        status=429, error_type="rate_limit_error", message="Slow down", code="rate_limit_exceeded",
        request_id="r1",
    )  # fmt: skip
    assert body == {"error": {"message": "Slow down", "type": "rate_limit_error", "param": None,
                              "code": "rate_limit_exceeded"}}  # fmt: skip
