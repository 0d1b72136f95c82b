"""Anthropic Messages API ↔ neutral types, as pure functions (no I/O, no HTTP, no errors
beyond `MalformedAnswer`), so the gateway can reuse them.

Every translation pitfall of `shared/reference/wire-formats.md` §4 that applies toward
Anthropic is handled here: the top-level system prompt, `input_schema` always an object, tool
ids sanitized the same way wherever they appear, all tool results of a turn in one user message
before any text, `max_tokens` always present, temperature clamped to 1, stop reasons mapped,
usage that excludes cached tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.core.messages import (
    Image,
    Message,
    MessageEnd,
    Request,
    Response,
    StopReason,
    StreamEvent,
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
from engine.providers.codec import (
    MalformedAnswer,
    count,
    sanitize_tool_id,
    split_data_url,
    tool_input,
)

__all__ = [
    "AnthropicStreamDecoder",
    "decode_response",
    "decode_usage",
    "encode_request",
    "map_stop_reason",
]

_EPHEMERAL = {"type": "ephemeral"}
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "pause_turn": "pause_turn",
    "refusal": "refusal",
    # The model ran out of context window rather than output budget; for the caller it is the
    # same "answer cut short" as max_tokens.
    "model_context_window_exceeded": "max_tokens",
}


# --- neutral → wire --------------------------------------------------------------------------


def encode_request(
    request: Request, model: str, *, default_max_tokens: int, stream: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        # Required by Anthropic, unlike OpenAI.
        "max_tokens": request.max_tokens or default_max_tokens,
        "messages": encode_messages(request.messages),
    }
    if request.system:
        if request.cache_system:
            body["system"] = [
                {"type": "text", "text": request.system, "cache_control": dict(_EPHEMERAL)}
            ]
        else:
            body["system"] = request.system
    if request.tools:
        body["tools"] = [_encode_tool(tool) for tool in request.tools]
        # Anthropic rejects tool_choice without tools, so it is only sent alongside them.
        if request.tool_choice is not None:
            body["tool_choice"] = _encode_tool_choice(request.tool_choice)
    if request.temperature is not None:
        body["temperature"] = min(max(request.temperature, 0.0), 1.0)  # OpenAI's scale is 0-2
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.user:
        body["metadata"] = {"user_id": request.user}
    if stream:
        body["stream"] = True
    return body


def encode_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Neutral messages as Anthropic turns: consecutive same-role messages become one turn, and
    in a user turn every tool_result comes first, because Anthropic wants all results of the
    previous assistant turn together at the start of the very next message."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        blocks = [b for part in message.content if (b := _encode_part(part)) is not None]
        if not blocks:  # e.g. only empty text: Anthropic rejects empty text blocks
            continue
        if turns and turns[-1]["role"] == message.role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": message.role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            content = turn["content"]
            results = [b for b in content if b["type"] == "tool_result"]
            turn["content"] = results + [b for b in content if b["type"] != "tool_result"]
    return turns


def _encode_part(part: Text | Image | ToolCall | ToolResult) -> dict[str, Any] | None:
    if isinstance(part, Text):
        return _encode_text(part)
    if isinstance(part, Image):
        return _encode_image(part)
    if isinstance(part, ToolCall):
        return {
            "type": "tool_use",
            "id": sanitize_tool_id(part.id),
            "name": part.name,
            "input": tool_input(part),
        }
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": sanitize_tool_id(part.tool_call_id),
    }
    content = [b for p in part.content if (b := _encode_part(p)) is not None]
    if content:
        block["content"] = content
    if part.is_error:
        block["is_error"] = True
    return block


def _encode_text(part: Text) -> dict[str, Any] | None:
    if not part.text:
        return None
    block: dict[str, Any] = {"type": "text", "text": part.text}
    if part.cache:
        block["cache_control"] = dict(_EPHEMERAL)
    return block


def _encode_image(image: Image) -> dict[str, Any]:
    if image.data is not None:
        source = {"type": "base64", "media_type": image.media_type, "data": image.data}
    elif image.url is not None and (inline := split_data_url(image.url)) is not None:
        # Anthropic's url source fetches over HTTP; a data: URL has to travel as base64.
        source = {"type": "base64", "media_type": inline[0], "data": inline[1]}
    else:
        source = {"type": "url", "url": image.url}
    return {"type": "image", "source": source}


def _encode_tool(tool: Tool) -> dict[str, Any]:
    block: dict[str, Any] = {"name": tool.name, "input_schema": object_schema(tool.input_schema)}
    if tool.description:
        block["description"] = tool.description
    return block


def object_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Anthropic insists on `{"type": "object", ...}`; OpenAI tolerates a missing schema."""
    result = dict(schema or {})
    result.setdefault("type", "object")
    if result["type"] == "object":
        result.setdefault("properties", {})
    return result


def _encode_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "tool":
        wire: dict[str, Any] = {"type": "tool", "name": choice.name}
    else:
        wire = {"type": choice.mode}
    if choice.parallel is False and choice.mode != "none":
        wire["disable_parallel_tool_use"] = True
    return wire


# --- wire → neutral --------------------------------------------------------------------------


def map_stop_reason(value: object, *, has_tool_calls: bool = False) -> StopReason:
    if isinstance(value, str) and value in _STOP_REASONS:
        return _STOP_REASONS[value]
    return "tool_use" if has_tool_calls else "end_turn"


def decode_usage(obj: object, base: Usage | None = None) -> Usage:
    """Anthropic usage (whose `input_tokens` already excludes cache reads and writes). Fields
    absent or null keep `base`'s value, because `message_delta` repeats only some of them."""
    base = base or Usage()
    if not isinstance(obj, Mapping):
        return base

    def pick(key: str, current: int) -> int:
        return count(obj[key]) if obj.get(key) is not None else current

    return Usage(
        input_tokens=pick("input_tokens", base.input_tokens),
        output_tokens=pick("output_tokens", base.output_tokens),
        cache_read_tokens=pick("cache_read_input_tokens", base.cache_read_tokens),
        cache_write_tokens=pick("cache_creation_input_tokens", base.cache_write_tokens),
    )


def decode_response(
    obj: object, *, requested_model: str, provider: str = "", provider_request_id: str | None = None
) -> Response:
    """A non-stream Messages answer. `content: []` with a stop reason is a valid empty answer;
    a body without a content list, or with nothing and no stop reason, is malformed."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("content"), list):
        raise MalformedAnswer("the answer has no content list")
    parts: list[Text | ToolCall] = []
    for block in obj["content"]:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            if block["text"]:
                parts.append(Text(block["text"]))
        elif block.get("type") == "tool_use":
            arguments = block.get("input")
            parts.append(
                ToolCall(
                    id=str(block.get("id") or ""),
                    name=str(block.get("name") or ""),
                    arguments=dict(arguments) if isinstance(arguments, Mapping) else {},
                )
            )
        # thinking, redacted_thinking and server-tool blocks have no neutral form yet.
    if not parts and obj.get("stop_reason") is None:
        raise MalformedAnswer("the answer has neither content nor a stop reason")
    has_tool_calls = any(isinstance(p, ToolCall) for p in parts)
    return Response(
        content=tuple(parts),
        stop_reason=map_stop_reason(obj.get("stop_reason"), has_tool_calls=has_tool_calls),
        usage=decode_usage(obj.get("usage")),
        model=str(obj.get("model") or requested_model),
        provider=provider,
        provider_request_id=provider_request_id,
    )


class AnthropicStreamDecoder:
    """Turns the parsed data objects of a Messages stream into neutral events.

    Anthropic numbers blocks across text and tool calls; the neutral `ToolCallStart.index`
    counts tool calls only, so block indexes are mapped. Error events are the adapter's to
    classify before they get here; unknown events (pings, thinking) are skipped.
    """

    def __init__(self, requested_model: str, provider_request_id: str | None = None) -> None:
        self.model = requested_model
        self.provider_request_id = provider_request_id
        self.usage = Usage()
        self.done = False
        self._stop_reason: object = None
        self._started = False
        self._tool_of_block: dict[int, int] = {}

    def feed(self, data: Mapping[str, Any], event: str | None = None) -> list[StreamEvent]:
        kind = data.get("type") or event
        if self.done:
            return []
        if kind == "message_start":
            self._started = True
            message = data.get("message")
            if isinstance(message, Mapping):
                self.model = str(message.get("model") or self.model)
                self.usage = decode_usage(message.get("usage"), self.usage)
                return [UsageUpdate(self.usage)]
        elif kind == "content_block_start":
            return self._block_start(data.get("index"), data.get("content_block"))
        elif kind == "content_block_delta":
            return self._block_delta(data.get("index"), data.get("delta"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason") is not None:
                self._stop_reason = delta["stop_reason"]
            self.usage = decode_usage(data.get("usage"), self.usage)
            return [UsageUpdate(self.usage)]
        elif kind == "message_stop":
            if not self._started:
                raise MalformedAnswer("the stream ended without a message_start")
            return self.finish()
        return []

    @property
    def finished(self) -> bool:
        """`message_delta` brought the stop reason: the answer is whole, and its usage came
        with it, whether or not `message_stop` follows."""
        return self._stop_reason is not None

    def finish(self) -> list[StreamEvent]:
        """The end of the message: at `message_stop`, or where a finished stream's body ended
        without it."""
        self.done = True
        stop = map_stop_reason(self._stop_reason, has_tool_calls=bool(self._tool_of_block))
        return [MessageEnd(stop, self.usage, self.model, self.provider_request_id)]

    def _block_start(self, index: object, block: object) -> list[StreamEvent]:
        if not isinstance(block, Mapping) or not isinstance(index, int):
            return []
        if block.get("type") == "text":
            text = block.get("text")
            return [TextDelta(text)] if isinstance(text, str) and text else []
        if block.get("type") == "tool_use":
            tool_index = len(self._tool_of_block)
            self._tool_of_block[index] = tool_index
            events: list[StreamEvent] = [
                ToolCallStart(tool_index, str(block.get("id") or ""), str(block.get("name") or ""))
            ]
            arguments = block.get("input")
            if isinstance(arguments, Mapping) and arguments:  # normally {} and sent as deltas
                events.append(ToolCallDelta(tool_index, json.dumps(arguments)))
            return events
        return []

    def _block_delta(self, index: object, delta: object) -> list[StreamEvent]:
        if not isinstance(delta, Mapping):
            return []
        if delta.get("type") == "text_delta":
            text = delta.get("text")
            return [TextDelta(text)] if isinstance(text, str) and text else []
        if delta.get("type") == "input_json_delta" and index in self._tool_of_block:
            fragment = delta.get("partial_json")
            if isinstance(fragment, str) and fragment:
                return [ToolCallDelta(self._tool_of_block[index], fragment)]
        return []
