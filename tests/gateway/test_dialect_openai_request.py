"""Reading a caller's OpenAI Chat Completions request: every documented field, the §4
pitfalls (system hoisting, tool-result grouping, arguments kept as strings), a table of
malformed bodies, and fuzzing that nothing but BadRequest ever escapes."""

from __future__ import annotations

import json

import pytest
from helpers.fuzz import encoded, mutated, random_objects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.messages import (
    Image,
    Message,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from engine.gateway.dialects.base import BadRequest, Parsed
from engine.gateway.dialects.openai import OPENAI
from engine.providers import anthropic_codec, openai_codec

PNG = "iVBORw0KGgo="
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def parse(body: object, headers: dict[str, str] | None = None) -> Parsed:
    return OPENAI.parse(json.dumps(body).encode(), headers or {})


def body(**fields: object) -> dict:
    return {"model": "fast", "messages": [{"role": "user", "content": "hi"}], **fields}


NUMBER_ARGS = {"name": "f", "arguments": 1}


def user(content: object) -> dict:
    return body(messages=[{"role": "user", "content": content}])


FULL = {
    "model": "fast",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "Weather here?"},
            {"type": "image_url",
             "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/sky.jpg"}},
        ]},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "weather", "arguments": '{"city":'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12 C"},
        {"role": "tool", "tool_call_id": "call_2",
         "content": [{"type": "text", "text": "bad args"}]},
        {"role": "user", "content": "Thanks", "name": "ann"},
    ],
    "tools": [
        {"type": "function", "function": {
            "name": "weather", "description": "Forecast", "parameters": WEATHER, "strict": True,
        }},
        {"type": "function", "function": {"name": "now"}},
    ],
    "tool_choice": {"type": "function", "function": {"name": "weather"}},
    "parallel_tool_calls": False,
    "max_completion_tokens": 300,
    "max_tokens": 99,
    "temperature": 1.5,
    "stop": ["END", "STOP"],
    "user": "user-42",
    "stream": True,
    "stream_options": {"include_usage": True},
    "n": 1,
    "top_p": 0.9, "seed": 7, "logprobs": False, "metadata": {"k": "v"},  # extras: ignored
}  # fmt: skip


# --- parsing ------------------------------------------------------------------------------


def test_a_full_request_parses_every_documented_field():
    parsed = parse(FULL, {"X-Switchover-Feature": "support-bot"})
    assert parsed.model == "fast"
    assert parsed.include_usage is True
    assert parsed.request == Request(
        messages=(
            Message("user", (
                Text("Weather here?"),
                Image(media_type="image/png", data=PNG),
                Image(url="https://example.com/sky.jpg"),
            )),
            Message("assistant", (
                Text("Checking."),
                ToolCall("call_1", "weather", {"city": "Oslo"}, '{"city":"Oslo"}'),
                ToolCall("call_2", "weather", None, '{"city":'),
            )),
            Message("user", (
                ToolResult("call_1", (Text("12 C"),)),
                ToolResult("call_2", (Text("bad args"),)),
            )),
            Message.user("Thanks"),
        ),
        system="Be brief.\n\nUse metric units.",
        tools=(Tool("weather", "Forecast", WEATHER), Tool("now")),
        tool_choice=ToolChoice("tool", "weather", parallel=False),
        max_tokens=300,
        temperature=1.5,
        stop=("END", "STOP"),
        feature="support-bot",
        stream=True,
        user="user-42",
    )  # fmt: skip


def test_system_and_developer_messages_anywhere_are_hoisted_in_order():
    parsed = parse(body(messages=[
        {"role": "user", "content": "a"},
        {"role": "system", "content": "first"},
        {"role": "assistant", "content": "b"},
        {"role": "developer", "content": "second"},
        {"role": "user", "content": "c"},
    ]))  # fmt: skip
    assert parsed.request.system == "first\n\nsecond"
    assert [m.text for m in parsed.request.messages] == ["a", "b", "c"]


def test_each_run_of_tool_messages_becomes_one_user_turn():
    call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    parsed = parse(body(messages=[
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "a", **call}, {"id": "b", **call}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": ""},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", **call}]},
        {"role": "tool", "tool_call_id": "c", "content": "3"},
    ]))  # fmt: skip
    roles = [(m.role, len(m.content)) for m in parsed.request.messages]
    assert roles == [("user", 1), ("assistant", 2), ("user", 2), ("assistant", 1), ("user", 1)]
    assert parsed.request.messages[2].content == (
        ToolResult("a", (Text("1"),)),
        ToolResult("b", ()),
    )


@pytest.mark.parametrize(
    ("arguments", "parsed", "raw"),
    [
        ('{"x": 1}', {"x": 1}, '{"x": 1}'),
        ("", {}, ""),
        ('{"x": ', None, '{"x": '),  # not JSON: kept verbatim for the next provider
        ("[1, 2]", None, "[1, 2]"),  # JSON, but not an object
        ({"x": 1}, {"x": 1}, None),  # an object instead of a string: unambiguous, accepted
    ],
)
def test_tool_call_arguments_keep_the_callers_exact_string(arguments, parsed, raw):
    function = {"name": "f", "arguments": arguments}
    calls = [{"id": "c", "function": function}]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    request = parse(body(messages=[{"role": "user", "content": "x"}, message])).request
    assert request.messages[1].content == (ToolCall("c", "f", parsed, raw),)


@pytest.mark.parametrize(
    ("fields", "choice"),
    [
        ({"tool_choice": "auto"}, ToolChoice("auto")),
        ({"tool_choice": "none"}, ToolChoice("none")),
        ({"tool_choice": "required"}, ToolChoice("any")),
        (
            {"tool_choice": "required", "parallel_tool_calls": True},
            ToolChoice("any", parallel=True),
        ),
        ({"parallel_tool_calls": False}, ToolChoice("auto", parallel=False)),
        ({}, None),
    ],
)
def test_tool_choice_maps_to_the_neutral_modes(fields, choice):
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert parse(body(tools=tools, **fields)).request.tool_choice == choice


def test_max_tokens_stop_and_usage_defaults():
    request = parse(body(max_tokens=50, stop="END")).request
    assert (request.max_tokens, request.stop, request.stream) == (50, ("END",), False)
    assert parse(body(stream=True)).include_usage is False
    assert parse(body()).request.feature is None


def test_assistant_refusal_in_history_is_kept_as_text():
    refused = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    request = parse(body(messages=[{"role": "user", "content": "x"}, refused])).request
    assert request.messages[1] == Message.assistant("I can't help with that.")


BAD = [
    (b"", "not valid JSON", None),
    (b"{", "not valid JSON", None),
    (b"[]", "must be a JSON object, not an array", None),
    (b'{"model": "m", "temperature": NaN}', "NaN is not valid JSON", None),
    ({"messages": []}, "model: Field required", "model"),
    ({"model": 3, "messages": []}, "model: expected a string, got a number", "model"),
    ({"model": "m"}, "messages: Field required", "messages"),
    ({"model": "m", "messages": {}}, "messages: expected an array, got an object", "messages"),
    ({"model": "m", "messages": []}, "messages: at least one", "messages"),
    (body(messages=[{"role": "system", "content": "x"}]), "at least one user", "messages"),
    (body(messages=["hi"]), "messages[0]: expected an object, got a string", "messages[0]"),
    (body(messages=[{"role": "bot", "content": "x"}]), "messages[0].role: expected 'system'", None),
    (body(messages=[{"role": "user"}]), "messages[0].content: Field required", None),
    (body(messages=[{"role": "user", "content": 5}]),
     "messages[0].content: expected a string or an array of content parts", None),
    (user([{"type": "audio"}]),
     "messages[0].content[0].type: expected 'text' or 'image_url', got 'audio'", None),
    (user([{"type": "input_audio"}]), "not supported", None),
    (user([{"type": "image_url", "image_url": {"url": "ftp://x"}}]),
     "messages[0].content[0].image_url.url: expected an https URL", None),
    (body(messages=[{"role": "tool", "content": "x"}]),
     "messages[0].tool_call_id: Field required", None),
    (body(messages=[{"role": "function", "content": "x", "name": "f"}]), "deprecated", None),
    (body(messages=[{"role": "assistant", "tool_calls": [{"id": "c", "function": NUMBER_ARGS}]}]),
     "messages[0].tool_calls[0].function.arguments: expected a JSON string, got a number", None),
    (body(n=2), "n > 1 is not supported", "n"),
    (body(n=0), "n: must be between 1", "n"),
    (body(temperature=2.5), "temperature: must be between 0 and 2, got 2.5", "temperature"),
    (body(temperature="hot"), "temperature: expected a number, got a string", "temperature"),
    (body(max_tokens=True), "max_tokens: expected an integer, got a boolean", "max_tokens"),
    (body(max_completion_tokens=0), "max_completion_tokens: must be between 1", None),
    (body(stop=[1]), "stop[0]: expected a string, got a number", "stop[0]"),
    (body(stream="yes"), "stream: expected a boolean, got a string", "stream"),
    (body(stream_options=[]), "stream_options: expected an object", None),
    (body(tools=[{"type": "web_search"}]), "tools[0].type: expected 'function'", None),
    (body(tools=[{"type": "function", "function": {"name": ""}}]), "must not be empty", None),
    (body(tool_choice="sometimes"), "tool_choice: expected 'none', 'auto', 'required'", None),
    (body(tool_choice={"type": "function", "function": {"name": "nope"}}),
     "no tool named 'nope'", None),
    (body(functions=[{"name": "f"}]), "functions: deprecated", "functions"),
]  # fmt: skip


@pytest.mark.parametrize(("payload", "message", "param"), BAD)
def test_malformed_requests_are_rejected_with_a_message_naming_the_field(payload, message, param):
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    with pytest.raises(BadRequest) as caught:
        OPENAI.parse(raw, {})
    assert message in caught.value.message
    assert caught.value.status == 400
    if param is not None:
        assert caught.value.param == param


def _parses_or_rejects(raw: bytes) -> None:
    """Only BadRequest may escape, and whatever parses can be sent to either provider."""
    try:
        parsed = OPENAI.parse(raw, {})
    except BadRequest as exc:
        assert exc.message
        return
    json.dumps(openai_codec.encode_request(parsed.request, "m"), allow_nan=False)
    json.dumps(anthropic_codec.encode_request(parsed.request, "m", default_max_tokens=9))


FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.binary(max_size=64))
def test_garbage_bytes_are_a_bad_request(raw):
    _parses_or_rejects(raw)


@FUZZ
@given(random_objects([*FULL.keys(), "functions", "function_call"]))
def test_random_json_is_a_bad_request_or_a_request(data):
    _parses_or_rejects(encoded(data))


@FUZZ
@given(mutated([FULL, body(), body(messages=FULL["messages"][3:])]))
def test_valid_bodies_with_fields_replaced_by_anything_never_crash(data):
    _parses_or_rejects(encoded(data))


def test_requests_the_provider_codec_writes_parse_back_to_the_same_request():
    """Our OpenAI provider codec and this dialect are inverses on what both can express."""
    request = Request(
        messages=(
            Message("user", (Text("look"), Image(media_type="image/png", data=PNG))),
            Message("assistant", (ToolCall("c1", "weather", {"city": "Oslo"}, '{"city":"Oslo"}'),
                                  ToolCall("c2", "weather", None, "{oops"))),
            Message("user", (ToolResult("c1", (Text("12 C"),)), ToolResult("c2", ()))),
            Message.assistant("Done."),
        ),
        system="Be brief.",
        tools=(Tool("weather", "Forecast", WEATHER),),
        tool_choice=ToolChoice("any", parallel=False),
        max_tokens=64,
        temperature=0.3,
        stop=("END",),
        user="u1",
        stream=True,
    )  # fmt: skip
    wire = openai_codec.encode_request(
        request, "gpt", max_tokens_field="max_completion_tokens", stream=True
    )
    parsed = parse(wire)
    assert parsed.request == request
    assert parsed.include_usage is True
