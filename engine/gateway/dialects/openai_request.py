"""Reading a caller's OpenAI Chat Completions request into the neutral `Request`.

Strict but helpful: anything malformed is a `BadRequest` naming the field
(`messages[2].content: expected ...`); fields the neutral request has no place for are
ignored, as the SDKs send extras. The §4 pitfalls from the server side: `system` and
`developer` messages are hoisted, in order, into one system prompt (their position in the
conversation is lost); a run of `tool` messages becomes one user turn of tool results;
`function.arguments` is kept as the caller's exact string, even when it is not JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

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
from engine.gateway.dialects.base import (
    FEATURE_HEADER,
    BadRequest,
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
from engine.providers.codec import split_data_url

__all__ = ["parse"]

_UNSUPPORTED_PARTS = ("input_audio", "file")


def parse(body: bytes, headers: Mapping[str, str]) -> Parsed:
    """A `POST /v1/chat/completions` body as a neutral request; BadRequest if malformed."""
    data = load_object(body)
    model = string(required(data, "model", "model"), "model", nonempty=True)
    n = integer(data.get("n"), "n")
    if n is not None and n > 1:
        raise BadRequest("n > 1 is not supported", param="n", code="invalid_value")
    for legacy in ("functions", "function_call"):
        if data.get(legacy) is not None:
            raise invalid(legacy, "deprecated and not supported: use tools and tool_choice")
    system, messages = _messages(required(data, "messages", "messages"))
    tools = _tools(data.get("tools"))
    options = data.get("stream_options")
    include_usage = options is not None and boolean(
        mapping(options, "stream_options").get("include_usage"), "stream_options.include_usage"
    )
    max_tokens = integer(data.get("max_completion_tokens"), "max_completion_tokens")
    legacy_max = integer(data.get("max_tokens"), "max_tokens")
    request = Request(
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=_tool_choice(data.get("tool_choice"), data.get("parallel_tool_calls"), tools),
        max_tokens=max_tokens if max_tokens is not None else legacy_max,
        temperature=number(data.get("temperature"), "temperature", low=0, high=2),
        stop=_stop(data.get("stop")),
        feature=header(headers, FEATURE_HEADER),
        stream=boolean(data.get("stream"), "stream"),
        user=optional_string(data.get("user"), "user"),
    )
    return Parsed(model=model, request=request, include_usage=include_usage)


def _messages(value: object) -> tuple[str | None, tuple[Message, ...]]:
    system: list[str] = []
    messages: list[Message] = []
    results: list[ToolResult] = []  # a run of `tool` messages, answered as one user turn
    for i, item in enumerate(array(value, "messages")):
        where = f"messages[{i}]"
        message = mapping(item, where)
        role = message.get("role")
        if role == "tool":
            results.append(_tool_result(message, where))
            continue
        if results:
            messages.append(Message("user", tuple(results)))
            results = []
        if role in ("system", "developer"):
            text = _text(required(message, "content", f"{where}.content"), f"{where}.content")
            system += [text] if text else []
        elif role == "user":
            content = required(message, "content", f"{where}.content")
            messages.append(Message("user", _user_parts(content, f"{where}.content")))
        elif role == "assistant":
            messages.append(Message("assistant", _assistant_parts(message, where)))
        elif role == "function":
            raise invalid(f"{where}.role", "'function' is deprecated: use tool_calls and 'tool'")
        else:
            expected = "'system', 'developer', 'user', 'assistant' or 'tool'"
            raise invalid(f"{where}.role", f"expected {expected}, got {shown(role)}")
    if results:
        messages.append(Message("user", tuple(results)))
    if not messages:
        raise invalid("messages", "at least one user, assistant or tool message is required")
    return "\n\n".join(system) or None, tuple(messages)


def _parts(value: object, where: str) -> list[Mapping[str, Any]]:
    """Content given as an array of parts, each an object with a type."""
    if not isinstance(value, list):
        expected = "a string or an array of content parts"
        raise invalid(where, f"expected {expected}, got {describe(value)}", "invalid_type")
    return [mapping(part, f"{where}[{j}]") for j, part in enumerate(value)]


def _text(value: object, where: str, allowed: tuple[str, ...] = ("text",)) -> str:
    """String content, or the text of an array of text (or refusal) parts."""
    if isinstance(value, str):
        return value
    texts = []
    for j, part in enumerate(_parts(value, where)):
        kind = part.get("type")
        if kind not in allowed:
            expected = " or ".join(map(repr, allowed))
            raise invalid(f"{where}[{j}].type", f"expected {expected}, got {shown(kind)}")
        texts.append(string(required(part, kind, f"{where}[{j}].{kind}"), f"{where}[{j}].{kind}"))
    return "".join(texts)


def _user_parts(value: object, where: str) -> tuple[Text | Image, ...]:
    if isinstance(value, str):
        return (Text(value),)
    parts: list[Text | Image] = []
    for j, part in enumerate(_parts(value, where)):
        at, kind = f"{where}[{j}]", part.get("type")
        if kind == "text":
            text = string(required(part, "text", f"{at}.text"), f"{at}.text")
            # cache_control on a part is the OpenRouter/LiteLLM extension for Claude models.
            parts.append(Text(text, cache=isinstance(part.get("cache_control"), Mapping)))
        elif kind == "image_url":
            parts.append(_image(required(part, "image_url", f"{at}.image_url"), f"{at}.image_url"))
        elif kind in _UNSUPPORTED_PARTS:
            raise invalid(f"{at}.type", f"'{kind}' content is not supported by this gateway")
        else:
            raise invalid(f"{at}.type", f"expected 'text' or 'image_url', got {shown(kind)}")
    return tuple(parts)


def _image(value: object, where: str) -> Image:
    # A bare string is the first vision API's shape; some clients still send it.
    if not isinstance(value, str):
        value = required(mapping(value, where), "url", f"{where}.url")
    url = string(value, f"{where}.url", nonempty=True)
    inline = split_data_url(url)
    if inline is not None:
        return Image(media_type=inline[0], data=inline[1])
    if not url.startswith(("https://", "http://")):
        raise invalid(f"{where}.url", "expected an https URL or data:<media type>;base64,<data>")
    return Image(url=url)


def _assistant_parts(message: Mapping[str, Any], where: str) -> tuple[Text | ToolCall, ...]:
    parts: list[Text | ToolCall] = []
    content = message.get("content")
    text = "" if content is None else _text(content, f"{where}.content", ("text", "refusal"))
    refusal = optional_string(message.get("refusal"), f"{where}.refusal")
    if text or refusal:
        parts.append(Text(text or refusal or ""))
    if message.get("function_call") is not None:
        raise invalid(f"{where}.function_call", "deprecated and not supported: use tool_calls")
    calls = message.get("tool_calls")
    for j, call in enumerate([] if calls is None else array(calls, f"{where}.tool_calls")):
        parts.append(_tool_call(call, f"{where}.tool_calls[{j}]"))
    return tuple(parts)


def _tool_call(value: object, where: str) -> ToolCall:
    call = mapping(value, where)
    if call.get("type") not in (None, "function"):
        raise invalid(f"{where}.type", f"expected 'function', got {shown(call['type'])}")
    call_id = string(required(call, "id", f"{where}.id"), f"{where}.id", nonempty=True)
    at = f"{where}.function"
    function = mapping(required(call, "function", at), at)
    name = string(required(function, "name", f"{at}.name"), f"{at}.name", nonempty=True)
    raw = required(function, "arguments", f"{at}.arguments")
    if not isinstance(raw, str | Mapping):  # an object is not OpenAI's, but it is unambiguous
        raise invalid(f"{at}.arguments", f"expected a JSON string, got {describe(raw)}")
    # The caller's exact string is kept even when it is not JSON: it is what the model said.
    arguments, raw_arguments = tool_arguments(raw, f"{at}.arguments")
    return ToolCall(call_id, name, arguments, raw_arguments)


def _tool_result(message: Mapping[str, Any], where: str) -> ToolResult:
    call_id = required(message, "tool_call_id", f"{where}.tool_call_id")
    call_id = string(call_id, f"{where}.tool_call_id", nonempty=True)
    text = _text(required(message, "content", f"{where}.content"), f"{where}.content")
    return ToolResult(call_id, (Text(text),) if text else ())


def _tools(value: object) -> tuple[Tool, ...]:
    tools = []
    for i, item in enumerate([] if value is None else array(value, "tools")):
        tool = mapping(item, f"tools[{i}]")
        if tool.get("type") not in (None, "function"):
            raise invalid(f"tools[{i}].type", f"expected 'function', got {shown(tool['type'])}")
        at = f"tools[{i}].function"
        function = mapping(required(tool, "function", at), at)
        name = string(required(function, "name", f"{at}.name"), f"{at}.name", nonempty=True)
        description = optional_string(function.get("description"), f"{at}.description") or ""
        parameters = function.get("parameters")
        if parameters is None:  # no parameters: the neutral default, an empty object schema
            tools.append(Tool(name, description))
        else:
            tools.append(Tool(name, description, dict(mapping(parameters, f"{at}.parameters"))))
    return tuple(tools)


_MODES: dict[object, Literal["auto", "none", "any"]] = {
    "auto": "auto",
    "none": "none",
    "required": "any",
}


def _tool_choice(value: object, parallel: object, tools: tuple[Tool, ...]) -> ToolChoice | None:
    allow_parallel = None if parallel is None else boolean(parallel, "parallel_tool_calls")
    if value is None:
        return None if allow_parallel is None else ToolChoice(parallel=allow_parallel)
    if isinstance(value, str) and value in _MODES:
        return ToolChoice(_MODES[value], parallel=allow_parallel)
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = mapping(required(value, "function", "tool_choice.function"), "tool_choice")
        name = string(function.get("name"), "tool_choice.function.name", nonempty=True)
        if name not in {tool.name for tool in tools}:
            raise invalid("tool_choice.function.name", f"no tool named {name[:64]!r} in tools")
        return ToolChoice("tool", name, allow_parallel)
    expected = '\'none\', \'auto\', \'required\' or {"type": "function", "function": {"name"}}'
    raise invalid("tool_choice", f"expected {expected}")


def _stop(value: object) -> tuple[str, ...]:
    if value is None or isinstance(value, str):
        return (value,) if value is not None else ()
    if not isinstance(value, list):
        raise invalid("stop", f"expected a string or an array of strings, got {describe(value)}")
    return tuple(string(item, f"stop[{i}]") for i, item in enumerate(value))
