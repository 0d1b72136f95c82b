"""Reading a caller's Anthropic Messages request into the neutral `Request`.

Strict but helpful: anything malformed is a `BadRequest` naming the field in Anthropic's own
style (`messages.2.content.0.source: ...`); fields the neutral request has no place for
(top_p, top_k, thinking...) are ignored. From the server side: `max_tokens` is required;
`thinking` blocks in the history are dropped, as the neutral types cannot carry their
signatures; a `cache_control` on the last system block marks the system prompt cacheable;
`{"_raw_arguments": ...}`, our own wrapping of arguments that were not JSON, comes back as
the raw string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal

from engine.core.messages import (
    Image,
    Message,
    Part,
    Request,
    Text,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from engine.gateway.dialects.base import (
    FEATURE_HEADER,
    Parsed,
    array,
    boolean,
    describe,
    header,
    integer,
    invalid,
    load_object,
    mapping,
    number,
    optional_string,
    required,
    shown,
    string,
    tool_arguments,
)
from engine.providers.codec import RAW_ARGUMENTS_KEY

__all__ = ["parse"]

_DROPPED_BLOCKS = ("thinking", "redacted_thinking")
_MODES: dict[object, Literal["auto", "any", "none"]] = {
    "auto": "auto",
    "any": "any",
    "none": "none",
}


def parse(body: bytes, headers: Mapping[str, str]) -> Parsed:
    """A `POST /v1/messages` body as a neutral request; BadRequest if malformed."""
    data = load_object(body)
    model = string(required(data, "model", "model"), "model", nonempty=True)
    max_tokens = required(data, "max_tokens", "max_tokens")
    if max_tokens == 0 and not isinstance(max_tokens, bool):
        raise invalid("max_tokens", "0 (pre-warming the prompt cache) is not supported")
    system, cache_system = _system(data.get("system"), "system")
    messages, hoisted = _messages(required(data, "messages", "messages"))
    tools = _tools(data.get("tools"))
    metadata = data.get("metadata")
    user_id = None if metadata is None else mapping(metadata, "metadata").get("user_id")
    if data.get("cache_control") is not None:
        mapping(data["cache_control"], "cache_control")
        messages = _cache_last_text(messages)
    request = Request(
        messages=messages,
        # A mid-conversation system message (SDK 0.121+) joins the top-level prompt: the
        # neutral request has one system prompt, so its position is lost.
        system="\n\n".join(text for text in (system, *hoisted) if text) or None,
        tools=tools,
        tool_choice=_tool_choice(data.get("tool_choice"), tools),
        max_tokens=integer(max_tokens, "max_tokens"),
        temperature=number(data.get("temperature"), "temperature", low=0, high=1),
        stop=_stop_sequences(data.get("stop_sequences")),
        feature=header(headers, FEATURE_HEADER),
        stream=boolean(data.get("stream"), "stream"),
        user=optional_string(user_id, "metadata.user_id"),
        cache_system=cache_system,
    )
    return Parsed(model=model, request=request, include_usage=True)


def _cache_last_text(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """A top-level `cache_control` (SDK 2.x) marks the last cacheable block of the request; the
    nearest neutral form is the last text of the last message, tool results included. With no
    text there nothing is marked: caching is an optimisation, not a meaning."""
    *earlier, last = messages
    marked = _marked(last.content)
    return messages if marked is None else (*earlier, Message(last.role, marked))


def _marked(parts: tuple[Any, ...]) -> tuple[Any, ...] | None:
    for i in reversed(range(len(parts))):
        part = parts[i]
        if isinstance(part, Text) and part.text:
            new = replace(part, cache=True)
        elif isinstance(part, ToolResult) and (inner := _marked(part.content)) is not None:
            new = replace(part, content=inner)
        else:
            continue
        return (*parts[:i], new, *parts[i + 1 :])
    return None


def _blocks(value: object, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        expected = "a string or an array of content blocks"
        raise invalid(where, f"expected {expected}, got {describe(value)}", "invalid_type")
    return [mapping(block, f"{where}.{j}") for j, block in enumerate(value)]


def _text_block(block: Mapping[str, Any], where: str) -> Text:
    if block.get("type") != "text":
        raise invalid(f"{where}.type", f"expected 'text', got {shown(block.get('type'))}")
    text = string(required(block, "text", f"{where}.text"), f"{where}.text")
    marker = block.get("cache_control")  # {"type": "ephemeral", "ttl"?: ...}
    if marker is not None:
        mapping(marker, f"{where}.cache_control")
    return Text(text, cache=marker is not None)


def _system(value: object, where: str) -> tuple[str, bool]:
    """The system prompt's text, and whether its last block asks to be cached."""
    if value is None or isinstance(value, str):
        return value or "", False
    texts = [_text_block(block, f"{where}.{j}") for j, block in enumerate(_blocks(value, where))]
    return "\n\n".join(t.text for t in texts if t.text), bool(texts) and texts[-1].cache


def _messages(value: object) -> tuple[tuple[Message, ...], list[str]]:
    messages: list[Message] = []
    hoisted: list[str] = []
    for i, item in enumerate(array(value, "messages")):
        where = f"messages.{i}"
        message = mapping(item, where)
        role = message.get("role")
        content = required(message, "content", f"{where}.content")
        if role == "system":
            hoisted.append(_system(content, f"{where}.content")[0])
        elif role == "user":
            messages.append(Message("user", _content(content, f"{where}.content", role)))
        elif role == "assistant":
            messages.append(Message("assistant", _content(content, f"{where}.content", role)))
        else:
            raise invalid(f"{where}.role", f"expected 'user' or 'assistant', got {shown(role)}")
    if not messages:
        raise invalid("messages", "at least one message is required")
    return tuple(messages), hoisted


def _content(value: object, where: str, role: str) -> tuple[Part, ...]:
    if isinstance(value, str):
        return (Text(value),)
    parts: list[Part] = []
    for j, block in enumerate(_blocks(value, where)):
        at, kind = f"{where}.{j}", block.get("type")
        if kind == "text":
            parts.append(_text_block(block, at))
        elif kind == "image":
            parts.append(_image(block, at))
        elif kind in ("tool_use", "tool_result"):
            owner = "assistant" if kind == "tool_use" else "user"
            if role != owner:
                raise invalid(at, f"{kind} blocks are only allowed in {owner} messages")
            parts.append(_tool_call(block, at) if kind == "tool_use" else _tool_result(block, at))
        elif kind not in _DROPPED_BLOCKS:
            supported = "text, image, tool_use, tool_result and thinking are"
            raise invalid(f"{at}.type", f"{shown(kind)} blocks are not supported ({supported})")
    return tuple(parts)


def _image(block: Mapping[str, Any], where: str) -> Image:
    at = f"{where}.source"
    source = mapping(required(block, "source", at), at)
    if source.get("type") == "base64":
        media_type = required(source, "media_type", f"{at}.media_type")
        data = string(required(source, "data", f"{at}.data"), f"{at}.data")
        return Image(media_type=string(media_type, f"{at}.media_type", nonempty=True), data=data)
    if source.get("type") == "url":
        return Image(url=string(required(source, "url", f"{at}.url"), f"{at}.url", nonempty=True))
    raise invalid(f"{at}.type", f"expected 'base64' or 'url', got {shown(source.get('type'))}")


def _tool_call(block: Mapping[str, Any], where: str) -> ToolCall:
    call_id = string(required(block, "id", f"{where}.id"), f"{where}.id", nonempty=True)
    name = string(required(block, "name", f"{where}.name"), f"{where}.name", nonempty=True)
    arguments = mapping(required(block, "input", f"{where}.input"), f"{where}.input")
    raw = arguments.get(RAW_ARGUMENTS_KEY)
    if len(arguments) == 1 and isinstance(raw, str):
        # Our wrapping of arguments that were not JSON, replayed: restore the raw string, so
        # an OpenAI-dialect provider gets back exactly what its model produced.
        parsed, raw_arguments = tool_arguments(raw, f"{where}.input")
        return ToolCall(call_id, name, parsed, raw_arguments)
    return ToolCall(call_id, name, dict(arguments))


def _tool_result(block: Mapping[str, Any], where: str) -> ToolResult:
    call_id = required(block, "tool_use_id", f"{where}.tool_use_id")
    call_id = string(call_id, f"{where}.tool_use_id", nonempty=True)
    content = block.get("content")
    parts: list[Text | Image] = []
    if isinstance(content, str):
        parts = [Text(content)] if content else []
    elif content is not None:
        for j, item in enumerate(_blocks(content, f"{where}.content")):
            at = f"{where}.content.{j}"
            parts.append(_image(item, at) if item.get("type") == "image" else _text_block(item, at))
    return ToolResult(call_id, tuple(parts), boolean(block.get("is_error"), f"{where}.is_error"))


def _tools(value: object) -> tuple[Tool, ...]:
    tools = []
    for i, item in enumerate([] if value is None else array(value, "tools")):
        where = f"tools.{i}"
        tool = mapping(item, where)
        if tool.get("type") not in (None, "custom"):
            kind = shown(tool["type"])
            raise invalid(f"{where}.type", f"server tools ({kind}) are not supported")
        name = string(required(tool, "name", f"{where}.name"), f"{where}.name", nonempty=True)
        description = optional_string(tool.get("description"), f"{where}.description") or ""
        schema = required(tool, "input_schema", f"{where}.input_schema")
        schema = mapping(schema, f"{where}.input_schema")
        if schema.get("type") != "object":
            raise invalid(f"{where}.input_schema.type", "Input should be 'object'")
        tools.append(Tool(name, description, dict(schema)))
    return tuple(tools)


def _tool_choice(value: object, tools: tuple[Tool, ...]) -> ToolChoice | None:
    if value is None:
        return None
    choice = mapping(value, "tool_choice")
    disable = choice.get("disable_parallel_tool_use")
    parallel = False if boolean(disable, "tool_choice.disable_parallel_tool_use") else None
    kind = choice.get("type")
    if isinstance(kind, str) and kind in _MODES:
        return ToolChoice(_MODES[kind], parallel=parallel)
    if kind == "tool":
        name = string(required(choice, "name", "tool_choice.name"), "tool_choice.name")
        if name not in {tool.name for tool in tools}:
            raise invalid("tool_choice.name", f"no tool named {name[:64]!r} in tools")
        return ToolChoice("tool", name, parallel)
    expected = "'auto', 'any', 'tool' or 'none'"
    raise invalid("tool_choice.type", f"expected {expected}, got {shown(kind)}")


def _stop_sequences(value: object) -> tuple[str, ...]:
    items = [] if value is None else array(value, "stop_sequences")
    return tuple(string(item, f"stop_sequences.{i}") for i, item in enumerate(items))
