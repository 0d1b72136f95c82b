"""Reading a caller's Anthropic Messages request: every documented field, cache markers,
thinking blocks dropped, our own `_raw_arguments` wrapping undone, a table of malformed
bodies, and fuzzing that nothing but BadRequest ever escapes."""

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
from engine.gateway.dialects.anthropic import ANTHROPIC
from engine.gateway.dialects.base import BadRequest, Parsed
from engine.providers import anthropic_codec, openai_codec

PNG = "iVBORw0KGgo="
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
EPHEMERAL = {"type": "ephemeral"}


def parse(body: object, headers: dict[str, str] | None = None) -> Parsed:
    return ANTHROPIC.parse(json.dumps(body).encode(), headers or {})


def body(**fields: object) -> dict:
    return {"model": "fast", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]} | (
        fields
    )


def user(content: object) -> dict:
    return body(messages=[{"role": "user", "content": content}])


def assistant(content: object) -> dict:
    turns = [{"role": "user", "content": "x"}, {"role": "assistant", "content": content}]
    return body(messages=turns)


FULL = {
    "model": "fast",
    "max_tokens": 300,
    "system": [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Use metric units.", "cache_control": EPHEMERAL},
    ],
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "Weather here?", "cache_control": EPHEMERAL},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/sky.jpg"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "They want weather.", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xyz"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_2", "name": "weather",
             "input": {"_raw_arguments": '{"city":'}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "12 C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True, "content": [
                {"type": "text", "text": "bad args"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/e.png"}},
            ]},
            {"type": "text", "text": "Thanks"},
        ]},
    ],
    "tools": [
        {"name": "weather", "description": "Forecast", "input_schema": WEATHER,
         "cache_control": EPHEMERAL},
        {"type": "custom", "name": "now", "input_schema": {"type": "object"}},
    ],
    "tool_choice": {"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
    "temperature": 0.7,
    "stop_sequences": ["END"],
    "metadata": {"user_id": "user-42"},
    "stream": True,
    "top_k": 5, "top_p": 0.9, "thinking": {"type": "enabled", "budget_tokens": 1024},  # ignored
}  # fmt: skip


def test_a_full_request_parses_every_documented_field():
    parsed = parse(FULL, {"X-Switchover-Feature": "support-bot"})
    assert (parsed.model, parsed.include_usage) == ("fast", True)
    assert parsed.request == Request(
        messages=(
            Message("user", (
                Text("Weather here?", cache=True),
                Image(media_type="image/png", data=PNG),
                Image(url="https://example.com/sky.jpg"),
            )),
            Message("assistant", (
                Text("Checking."),
                ToolCall("toolu_1", "weather", {"city": "Oslo"}),
                ToolCall("toolu_2", "weather", None, '{"city":'),  # our wrapping, undone
            )),
            Message("user", (
                ToolResult("toolu_1", (Text("12 C"),)),
                ToolResult("toolu_2", (Text("bad args"), Image(url="https://example.com/e.png")),
                           is_error=True),
                Text("Thanks"),
            )),
        ),
        system="Be brief.\n\nUse metric units.",
        tools=(Tool("weather", "Forecast", WEATHER), Tool("now", "", {"type": "object"})),
        tool_choice=ToolChoice("tool", "weather", parallel=False),
        max_tokens=300,
        temperature=0.7,
        stop=("END",),
        feature="support-bot",
        stream=True,
        user="user-42",
        cache_system=True,
    )  # fmt: skip


def test_only_a_cache_marker_on_the_last_system_block_caches_the_system_prompt():
    first = [
        {"type": "text", "text": "a", "cache_control": EPHEMERAL},
        {"type": "text", "text": "b"},
    ]
    assert parse(body(system=first)).request.cache_system is False
    as_blocks = [{"type": "text", "text": "plain"}]
    assert parse(body(system="plain")).request == parse(body(system=as_blocks)).request


def test_top_level_cache_control_marks_the_last_text_even_inside_a_tool_result():
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    result = {"type": "tool_result", "tool_use_id": "t", "content": "42"}
    parsed = parse(user([result, image]) | {"cache_control": EPHEMERAL})
    assert parsed.request.messages[0].content[0] == ToolResult("t", (Text("42", cache=True),))
    assert (
        parse(user([image]) | {"cache_control": EPHEMERAL}).request == parse(user([image])).request
    )


def test_a_mid_conversation_system_message_joins_the_system_prompt():
    parsed = parse(body(system="top", messages=[
        {"role": "user", "content": "a"},
        {"role": "system", "content": "later"},
        {"role": "assistant", "content": "b"},
    ]))  # fmt: skip
    assert parsed.request.system == "top\n\nlater"
    assert [m.role for m in parsed.request.messages] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("choice", "neutral"),
    [
        ({"type": "auto"}, ToolChoice("auto")),
        ({"type": "any"}, ToolChoice("any")),
        ({"type": "none"}, ToolChoice("none")),
        ({"type": "any", "disable_parallel_tool_use": True}, ToolChoice("any", parallel=False)),
        ({"type": "auto", "disable_parallel_tool_use": False}, ToolChoice("auto")),
        ({"type": "tool", "name": "f"}, ToolChoice("tool", "f")),
    ],
)
def test_tool_choice_maps_to_the_neutral_modes(choice, neutral):
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    assert parse(body(tools=tools, tool_choice=choice)).request.tool_choice == neutral


def test_an_assistant_turn_of_only_thinking_is_an_empty_turn():
    parsed = parse(assistant([{"type": "thinking", "thinking": "hm", "signature": "s"}]))
    assert parsed.request.messages[1] == Message("assistant", ())


BAD = [
    (b"not json", "not valid JSON", None),
    (b'"a string"', "must be a JSON object, not a string", None),
    ({"model": "m", "messages": []}, "max_tokens: Field required", "max_tokens"),
    (body(max_tokens=None), "max_tokens: Field required", "max_tokens"),
    (body(max_tokens=0), "max_tokens: 0 (pre-warming the prompt cache) is not supported", None),
    (body(max_tokens="10"), "max_tokens: expected an integer, got a string", "max_tokens"),
    (body(max_tokens=10**12), "max_tokens: must be between 1 and 2147483647", None),
    (body(model=""), "model: must not be empty", "model"),
    (body(messages=[]), "messages: at least one message is required", "messages"),
    (body(messages=[{"role": "system", "content": "x"}]), "at least one message", None),
    (body(messages=[{"role": "tool", "content": "x"}]),
     "messages.0.role: expected 'user' or 'assistant', got 'tool'", "messages.0.role"),
    (body(messages=[{"role": "user"}]), "messages.0.content: Field required", None),
    (user(7), "messages.0.content: expected a string or an array of content blocks", None),
    (user([{"type": "document"}]), "messages.0.content.0.type: 'document' blocks are not supported",
     "messages.0.content.0.type"),
    (user([{"type": "text"}]), "messages.0.content.0.text: Field required", None),
    (user([{"type": "text", "text": "x", "cache_control": "yes"}]),
     "messages.0.content.0.cache_control: expected an object", None),
    (user([{"type": "image", "source": {"type": "file", "file_id": "f"}}]),
     "messages.0.content.0.source.type: expected 'base64' or 'url', got 'file'", None),
    (user([{"type": "image", "source": {"type": "base64", "data": PNG}}]),
     "messages.0.content.0.source.media_type: Field required", None),
    (user([{"type": "tool_use", "id": "t", "name": "f", "input": {}}]),
     "tool_use blocks are only allowed in assistant messages", None),
    (assistant([{"type": "tool_result", "tool_use_id": "t"}]),
     "tool_result blocks are only allowed in user messages", None),
    (assistant([{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]),
     "messages.1.content.0.input: expected an object, got a string", None),
    (user([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "document"}]}]),
     "messages.0.content.0.content.0.type: expected 'text', got 'document'", None),
    (user([{"type": "tool_result", "tool_use_id": "t", "is_error": "no"}]),
     "messages.0.content.0.is_error: expected a boolean", None),
    (body(system=[{"type": "image"}]), "system.0.type: expected 'text', got 'image'", None),
    (body(system=3), "system: expected a string or an array of content blocks", None),
    (body(temperature=1.5), "temperature: must be between 0 and 1, got 1.5", "temperature"),
    (body(stop_sequences="END"), "stop_sequences: expected an array, got a string", None),
    (body(metadata={"user_id": 5}), "metadata.user_id: expected a string", None),
    (body(tools=[{"type": "web_search_20250305", "name": "web_search"}]),
     "tools.0.type: server tools ('web_search_20250305') are not supported", None),
    (body(tools=[{"name": "f"}]), "tools.0.input_schema: Field required", None),
    (body(tools=[{"name": "f", "input_schema": {"type": "string"}}]),
     "tools.0.input_schema.type: Input should be 'object'", None),
    (body(tool_choice={"type": "tool", "name": "nope"}), "no tool named 'nope'", None),
    (body(tool_choice={"type": "sometimes"}), "tool_choice.type: expected 'auto', 'any'", None),
    (body(stream=1), "stream: expected a boolean, got a number", "stream"),
]  # fmt: skip


@pytest.mark.parametrize(("payload", "message", "param"), BAD)
def test_malformed_requests_are_rejected_with_a_message_naming_the_field(payload, message, param):
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    with pytest.raises(BadRequest) as caught:
        ANTHROPIC.parse(raw, {})
    assert message in caught.value.message
    assert caught.value.status == 400
    if param is not None:
        assert caught.value.param == param


def _parses_or_rejects(raw: bytes) -> None:
    """Only BadRequest may escape, and whatever parses can be sent to either provider."""
    try:
        parsed = ANTHROPIC.parse(raw, {})
    except BadRequest as exc:
        assert exc.message
        return
    json.dumps(anthropic_codec.encode_request(parsed.request, "m", default_max_tokens=9))
    json.dumps(openai_codec.encode_request(parsed.request, "m"), allow_nan=False)


FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.binary(max_size=64))
def test_garbage_bytes_are_a_bad_request(raw):
    _parses_or_rejects(raw)


@FUZZ
@given(random_objects([*FULL, "cache_control"]))
def test_random_json_is_a_bad_request_or_a_request(data):
    _parses_or_rejects(encoded(data))


@FUZZ
@given(mutated([FULL, body(), body(messages=FULL["messages"][1:])]))
def test_valid_bodies_with_fields_replaced_by_anything_never_crash(data):
    _parses_or_rejects(encoded(data))


def test_requests_the_provider_codec_writes_parse_back_to_the_same_request():
    """Our Anthropic provider codec and this dialect are inverses on what both can express."""
    request = Request(
        messages=(
            Message("user", (Text("look", cache=True), Image(media_type="image/png", data=PNG))),
            Message("assistant", (Text("Checking."), ToolCall("t1", "weather", {"city": "Oslo"}),
                                  ToolCall("t2", "weather", None, "{oops"))),
            Message("user", (ToolResult("t1", (Text("12 C"),)), ToolResult("t2", (), is_error=True),
                             Text("and?"))),
            Message.assistant("Done."),
        ),
        system="Be brief.",
        cache_system=True,
        tools=(Tool("weather", "Forecast", WEATHER),),
        tool_choice=ToolChoice("any", parallel=False),
        max_tokens=64,
        temperature=0.3,
        stop=("END",),
        user="u1",
        stream=True,
    )  # fmt: skip
    wire = anthropic_codec.encode_request(request, "claude", default_max_tokens=1, stream=True)
    assert parse(wire).request == request
